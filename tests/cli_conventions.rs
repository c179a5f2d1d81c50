//! Command-line conventions: `--version`, `plan --json` (one JSON object on stdout),
//! `plan --quiet` (nothing on stderr) and the progress line on a terminal.

mod common;

use common::*;

#[test]
fn version_prints_the_crate_version() {
    let run = run_cli(&["--version"]);
    assert_eq!(run.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&run.stdout).trim(),
        format!("onnx-memplan {}", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn json_summary_is_one_object_matching_the_table() {
    let dir = tempfile::tempdir().unwrap();
    let model = root().join("models/resnet_small.onnx");
    let out = dir.path().join("r.memplan.onnx");
    let run = plan_to(&model, &out, &["--dim", "batch=1", "--json"]);
    assert_eq!(run.status.code(), Some(0));
    let stdout = String::from_utf8(run.stdout).unwrap();
    assert_eq!(stdout.lines().count(), 1, "one line: {stdout}");
    let summary: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let table = read_table(&dir.path().join("r.memplan.json"));
    let arena: u64 = table.arenas.iter().map(|a| a.bytes).sum();
    assert_eq!(summary["model"], "resnet_small.onnx");
    assert_eq!(summary["arena_bytes"], arena);
    assert_eq!(summary["lower_bound_bytes"], table.stats.lower_bound_bytes);
    assert_eq!(summary["naive_bytes"], table.stats.naive_bytes);
    assert_eq!(summary["tensors"], table.tensors.len());
    assert_eq!(summary["planner"], table.stats.planner.as_str());
    assert!(
        !String::from_utf8_lossy(&run.stderr).contains("arena"),
        "the summary line is not printed as well"
    );
}

#[test]
fn quiet_prints_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let model = root().join("models/resnet_small.onnx");
    let out = dir.path().join("r.memplan.onnx");
    let run = plan_to(&model, &out, &["--dim", "batch=1", "--quiet"]);
    assert_eq!(run.status.code(), Some(0));
    assert!(run.stdout.is_empty() && run.stderr.is_empty());
    assert!(dir.path().join("r.memplan.json").exists());
}

/// Options that keep the exact search on [`fragmenting_model`] busy until the 2 s time limit.
const LONG_SEARCH: [&str; 6] = [
    "--planner",
    "auto",
    "--work",
    "1000000000000000",
    "--time-limit",
    "2",
];

/// Writes the fragmenting model into `dir`; returns it and the annotated model's path.
fn long_search_model(dir: &std::path::Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let path = dir.join("fragmenting.onnx");
    write_model(&fragmenting_model(400), &path);
    (path, dir.join("fragmenting.memplan.onnx"))
}

/// `plan` with [`LONG_SEARCH`] plus `extra`, its terminal output read through `script`'s
/// pseudo-terminal; `None` when `script` (util-linux) is missing.
fn plan_on_a_terminal(dir: &std::path::Path, extra: &[&str]) -> Option<String> {
    let (model, out) = long_search_model(dir);
    let mut command = format!(
        "{} plan {} -o {}",
        env!("CARGO_BIN_EXE_onnx-memplan"),
        model.display(),
        out.display()
    );
    for arg in LONG_SEARCH.iter().chain(extra) {
        command.push(' ');
        command.push_str(arg);
    }
    let run = std::process::Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .output()
        .ok()?;
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stdout)
    );
    Some(String::from_utf8_lossy(&run.stdout).into_owned())
}

#[test]
fn a_long_plan_on_a_terminal_shows_a_progress_line_unless_quiet() {
    let dir = tempfile::tempdir().unwrap();
    let Some(shown) = plan_on_a_terminal(dir.path(), &[]) else {
        eprintln!("SKIPPED: `script` (util-linux) is not installed, no pseudo-terminal to test on");
        return;
    };
    let redraws: Vec<&str> = shown
        .split('\r')
        .filter(|l| l.contains("onnx-memplan: planning: search"))
        .collect();
    assert!(!redraws.is_empty(), "no progress line: {shown:?}");
    assert!(
        redraws
            .iter()
            .all(|l| l.contains("best arena") && l.contains(" s left")),
        "{redraws:?}"
    );
    // The line is erased before the summary, which ends the output.
    assert!(shown.trim_end().ends_with(")"), "{shown:?}");
    assert!(
        shown.contains("\x1b[2Kfragmenting.onnx: arena"),
        "{shown:?}"
    );
    let quiet = plan_on_a_terminal(dir.path(), &["--quiet"]).unwrap();
    assert!(quiet.trim().is_empty(), "--quiet draws nothing: {quiet:?}");
}

#[test]
fn a_long_plan_into_a_pipe_shows_no_progress_line() {
    let dir = tempfile::tempdir().unwrap();
    let (model, out) = long_search_model(dir.path());
    let run = plan_to(&model, &out, &LONG_SEARCH);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(0), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "only the summary: {stderr:?}");
    assert!(!stderr.contains('\r') && !stderr.contains("planning: search"));
}
