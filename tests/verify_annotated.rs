//! `verify` accepts the annotated model `plan` wrote beside the table (recognised by the
//! SHA-256 the table records for it, nodes put back in the input's order), for flat, reordered
//! and split plans, and refuses it once a byte of it changed: a weight, a node, a metadata
//! entry, or the digest the table records.

mod common;

use std::path::Path;

use common::{assert_verifies, root, run_cli};
use onnx_memplan::onnx::proto::ModelProto;
use prost::Message;

/// Plans `model` (a file of models/) into `dir` with `extra`; returns the annotated model's
/// path and the table's.
fn plan(dir: &Path, model: &str, extra: &[&str]) -> (std::path::PathBuf, std::path::PathBuf) {
    let out = dir.join("m.memplan.onnx");
    let mut args = vec![
        "plan".to_string(),
        root().join("models").join(model).display().to_string(),
        "-o".to_string(),
        out.display().to_string(),
        "-q".to_string(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = run_cli(&args);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    (out, dir.join("m.memplan.json"))
}

/// Runs `verify` and returns (exit code, stdout + stderr).
fn verify(model: &Path, table: &Path) -> (Option<i32>, String) {
    let run = run_cli(&["verify", model.to_str().unwrap(), table.to_str().unwrap()]);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    (run.status.code(), text)
}

/// Writes a copy of the annotated model at `from`, changed by `change`, at `to`.
fn tampered(from: &Path, to: &Path, change: impl FnOnce(&mut ModelProto)) {
    let mut model = ModelProto::decode(std::fs::read(from).unwrap().as_slice()).unwrap();
    change(&mut model);
    std::fs::write(to, model.encode_to_vec()).unwrap();
}

#[test]
fn the_annotated_model_verifies_and_a_tampered_one_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let (annotated, table) = plan(dir.path(), "mobilenet_v2.onnx", &["--schedule", "memory"]);
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&table).unwrap()).unwrap();
    assert_verifies(&annotated, &table);
    assert_verifies(&root().join("models/mobilenet_v2.onnx"), &table);

    let bad = dir.path().join("bad.onnx");
    let refused = |bad: &Path, what: &str| {
        let (code, text) = verify(bad, &table);
        assert_eq!(code, Some(2), "{what}: {text}");
        assert!(text.contains("made for a different file"), "{what}: {text}");
    };
    // One weight changed.
    tampered(&annotated, &bad, |m| {
        let mut init = m.graph.as_mut().unwrap().initializer.iter_mut();
        let weight = init
            .find(|t| t.raw_data.as_ref().is_some_and(|r| !r.is_empty()))
            .unwrap();
        let mut raw = weight.raw_data.as_ref().unwrap().to_vec();
        raw[0] ^= 0x40;
        weight.raw_data = Some(raw.into());
    });
    refused(&bad, "a weight");
    // One node changed (a Relu became a Sigmoid: same shapes, so only the digest catches it).
    tampered(&annotated, &bad, |m| {
        let graph = m.graph.as_mut().unwrap();
        let node = graph
            .node
            .iter_mut()
            .find(|n| n.op_type() == "Relu" || n.op_type() == "Clip")
            .unwrap();
        node.op_type = Some("Sigmoid".into());
        node.input.truncate(1);
    });
    refused(&bad, "a node");
    // A memplan metadata entry edited.
    tampered(&annotated, &bad, |m| {
        let entry = m
            .metadata_props
            .iter_mut()
            .find(|p| p.key() == "memplan.arena.0.bytes")
            .unwrap();
        entry.value = Some("1".into());
    });
    refused(&bad, "a metadata entry");
    // The table's digest of the annotated model edited: the genuine model is refused.
    let mut edited = json.clone();
    edited["model"]["annotated_sha256"] = serde_json::Value::String("0".repeat(64));
    let edited_table = dir.path().join("edited.json");
    std::fs::write(&edited_table, edited.to_string()).unwrap();
    let (code, text) = verify(&annotated, &edited_table);
    assert_eq!(code, Some(2), "{text}");
    // A schedule that does not fit the annotated model (a step dropped): its nodes cannot be
    // put back in the input's order, and the verifier says so.
    let mut short = json.clone();
    short["schedule"].as_array_mut().unwrap().pop();
    let short_table = dir.path().join("short.json");
    std::fs::write(&short_table, short.to_string()).unwrap();
    let (code, text) = verify(&annotated, &short_table);
    assert!(text.contains("steps but the annotated model"), "{text}");
    assert_eq!(code, Some(1), "{text}");
}

#[test]
fn the_annotated_model_of_a_reordered_plan_verifies() {
    // The chain model with its nodes stored backwards: the schedule is the topological order,
    // so the annotated model's nodes are in another order than the input's and verify must
    // put them back.
    let dir = tempfile::tempdir().unwrap();
    let mut model = common::chain_model();
    model.graph.as_mut().unwrap().node.reverse();
    let (path, table) = common::plan_written(dir.path(), "rev", &model, &["--dim", "batch=2"]);
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&table).unwrap()).unwrap();
    let schedule: Vec<u64> = serde_json::from_value(json["schedule"].clone()).unwrap();
    assert!(schedule.iter().enumerate().any(|(i, &n)| i as u64 != n));
    assert_verifies(&dir.path().join("rev.memplan.onnx"), &table);
    assert_verifies(&path, &table);
}

#[test]
fn the_annotated_model_of_a_split_plan_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let (annotated, table) = plan(
        dir.path(),
        "unet_small.onnx",
        &["--split", "auto", "--split-time", "3"],
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&table).unwrap()).unwrap();
    assert!(!json["splits"]["chains"].as_array().unwrap().is_empty());
    assert_verifies(&annotated, &table);
}
