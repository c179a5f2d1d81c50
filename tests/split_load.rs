//! `--split auto` gives the same files under any load: its search stops on deterministic
//! work, and the wall-clock safety stop (ten times `--split-time`) does not fire on a real
//! model even while other processes keep every core busy. The model is planned twice, once on
//! its own and once beside two busy loops (as many as CI's cores: the searches made ahead
//! run at a lower priority, and the driver waits for them), and the tables and annotated
//! models are compared byte by byte (no timing is asserted).

mod common;

use std::process::{Command, Stdio};

/// Plans ResNet-small with the split within `split_time` seconds of work into `dir`, returns
/// the table's and the model's bytes.
fn plan_in(dir: &std::path::Path, split_time: &str) -> (Vec<u8>, Vec<u8>) {
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
        split_time,
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

/// How the split search of a table ended; the table must split at least one chain.
fn split_ended(table: &[u8]) -> Vec<String> {
    let table: serde_json::Value = serde_json::from_slice(table).unwrap();
    assert!(
        table["splits"]["chains"]
            .as_array()
            .is_some_and(|c| !c.is_empty())
    );
    table["stats"]["searches"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["planner"] == "split")
        .map(|s| s["ended_by"].as_str().unwrap().to_string())
        .collect()
}

/// Two allowances: 2 s, where the search completes, and 0.3 s, where its work ends it (its
/// safety stop at 3 s of wall time; beside two busy loops, searches made ahead at the lowest
/// priority, nice 19, were starved past it, and the file changed).
#[test]
fn split_auto_writes_the_same_bytes_beside_busy_processes() {
    for (split_time, ending) in [("2", "complete"), ("0.3", "work-budget")] {
        let (quiet, busy) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let first = plan_in(quiet.path(), split_time);
        let spin = || {
            Command::new("sh")
                .args(["-c", "while :; do :; done"])
                .stdout(Stdio::null())
                .spawn()
                .expect("sh runs")
        };
        let mut spinners = [spin(), spin()];
        let second = plan_in(busy.path(), split_time);
        for spinner in &mut spinners {
            spinner.kill().expect("the busy loop stops");
            spinner.wait().expect("the busy loop ends");
        }
        // The work ends the search, or it completes first; never the clock.
        assert_eq!(split_ended(&first.0), [ending], "--split-time {split_time}");
        assert_eq!(
            split_ended(&second.0),
            [ending],
            "--split-time {split_time}, busy"
        );
        assert!(
            first.0 == second.0,
            "--split-time {split_time}: the tables differ"
        );
        assert!(
            first.1 == second.1,
            "--split-time {split_time}: the models differ"
        );
    }
}
