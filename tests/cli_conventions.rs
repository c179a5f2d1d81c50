//! Command-line conventions: `--version`, `plan --json` (one JSON object on stdout) and
//! `plan --quiet` (nothing on stderr).

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
    let run = run_cli(&[
        "plan",
        model.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--dim",
        "batch=1",
        "--json",
    ]);
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
    let run = run_cli(&[
        "plan",
        model.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--dim",
        "batch=1",
        "--quiet",
    ]);
    assert_eq!(run.status.code(), Some(0));
    assert!(run.stdout.is_empty() && run.stderr.is_empty());
    assert!(dir.path().join("r.memplan.json").exists());
}
