//! The fuzz targets' findings (`tests/fuzz/<target>/`, raw fuzz inputs; see fuzz/README.md)
//! replayed through the CLI: each must end cleanly, with a plan (exit 0) or a one-line input
//! error (exit 2), never a panic (101) or an internal error (1). The unit test beside each fix
//! checks the mechanism itself.

mod common;

use std::path::PathBuf;

use common::*;

fn findings(target: &str) -> Vec<PathBuf> {
    let dir = root().join("tests/fuzz").join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no findings in {}", dir.display());
    files
}

/// `plan`'s flags for the `model` target's option byte (as `fuzz/fuzz_targets/model.rs`
/// reads it).
fn model_flags(flags: u8) -> Vec<&'static str> {
    let mut args = vec!["--time-limit", "0.05"];
    let switches = [
        "--no-inplace",
        "--no-alias",
        "--exclude-io",
        "--schedule=memory",
        "--trust-value-info",
    ];
    for (bit, switch) in switches.iter().enumerate() {
        if flags >> bit & 1 == 1 {
            args.push(switch);
        }
    }
    args.push(
        [
            "--alignment=64",
            "--alignment=1",
            "--alignment=16",
            "--alignment=256",
        ][usize::from(flags >> 5 & 3)],
    );
    if flags & 128 != 0 {
        args.extend(["--split=auto", "--split-time=1"]);
    }
    args
}

fn assert_clean(out: &std::process::Output, what: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    match out.status.code() {
        Some(0) => {}
        Some(2) => {
            assert_eq!(err.trim().lines().count(), 1, "{what}: one line: {err}");
            assert!(err.starts_with("error: "), "{what}: {err}");
        }
        code => panic!("{what}: exit {code:?}: {err}"),
    }
}

#[test]
fn model_findings_plan_or_fail_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    for finding in findings("model") {
        let bytes = std::fs::read(&finding).unwrap();
        let (&flags, model) = bytes.split_first().expect("a flag byte");
        let path = dir.path().join("finding.onnx");
        std::fs::write(&path, model).unwrap();
        let out_path = dir.path().join("finding.memplan.onnx");
        let mut args = vec![
            "plan",
            path.to_str().unwrap(),
            "-o",
            out_path.to_str().unwrap(),
        ];
        args.extend(model_flags(flags));
        assert_clean(&run_cli(&args), &finding.display().to_string());
    }
}

#[test]
fn solve_csv_findings_solve_or_fail_cleanly() {
    for finding in findings("solve_csv") {
        let out = run_cli(&["solve", finding.to_str().unwrap(), "--time-limit", "1"]);
        assert_clean(&out, &finding.display().to_string());
    }
}
