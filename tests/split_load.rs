//! `--split auto` gives the same files under any load: its search stops on deterministic
//! work, and the wall-clock safety stop (ten times `--split-time`) does not fire on a real
//! model even while another process keeps a core busy. The model is planned twice, once on
//! its own and once beside a busy loop, and the tables and annotated models are compared byte
//! by byte (no timing is asserted). `--split-time 2` lets the work end the search, as it does
//! on larger models at the default.

mod common;

use std::process::{Command, Stdio};

/// Plans ResNet-small with the split into `dir`, returns the table's and the model's bytes.
fn plan_in(dir: &std::path::Path) -> (Vec<u8>, Vec<u8>) {
    let model = common::root().join("models/resnet_small.onnx");
    let out = dir.join("rs.onnx");
    let args = [
        "--dim",
        "batch=1",
        "--schedule",
        "memory",
        "--split",
        "auto",
        "--split-time",
        "2",
    ];
    let run = common::plan_to(&model, &out, &args);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let table = std::fs::read(dir.join("rs.memplan.json")).unwrap();
    (table, std::fs::read(&out).unwrap())
}

#[test]
fn split_auto_writes_the_same_bytes_beside_a_busy_process() {
    let (quiet, busy) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let first = plan_in(quiet.path());
    let mut spinner = Command::new("sh")
        .args(["-c", "while :; do :; done"])
        .stdout(Stdio::null())
        .spawn()
        .expect("sh runs");
    let second = plan_in(busy.path());
    spinner.kill().expect("the busy loop stops");
    spinner.wait().expect("the busy loop ends");
    let table: serde_json::Value = serde_json::from_slice(&first.0).unwrap();
    let ended: Vec<&str> = table["stats"]["searches"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["planner"] == "split")
        .map(|s| s["ended_by"].as_str().unwrap())
        .collect();
    // The work ends the search (or it completes first), never the clock.
    assert!(
        ended == ["work-budget"] || ended == ["complete"],
        "the split search ended by {ended:?}"
    );
    assert!(
        table["splits"]["chains"]
            .as_array()
            .is_some_and(|c| !c.is_empty())
    );
    assert!(first.0 == second.0, "the tables differ");
    assert!(first.1 == second.1, "the annotated models differ");
}
