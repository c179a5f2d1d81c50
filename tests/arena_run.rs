//! scripts/arena_run.py, the check that runs a planned model for real inside its arena (used by
//! scripts/ort_check.py in `.ci/run`), must pass a good plan and catch bad ones: a tensor moved
//! onto bytes another tensor still needs, and a tensor given fewer bytes than its output needs.
//! Needs Python with onnx, onnxruntime and numpy (`.ci/venv`, or MEMPLAN_PYTHON); prints SKIPPED
//! without them.

mod common;

use std::path::Path;
use std::process::Output;

use common::{ort_python, plan_to, root};
use serde_json::Value;

fn arena_run(python: &Path, model: &Path, table: &Path) -> Output {
    std::process::Command::new(python)
        .arg(root().join("scripts/arena_run.py"))
        .args(["--model", model.to_str().unwrap()])
        .args(["--table", table.to_str().unwrap()])
        .output()
        .unwrap()
}

fn write_json(value: &Value, path: &Path) {
    std::fs::write(path, serde_json::to_vec(value).unwrap()).unwrap();
}

/// Entries of planned intermediates that neither overwrite nor alias another tensor.
fn plain_intermediates(table: &Value) -> Vec<&Value> {
    table["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| {
            t["kind"] == "intermediate"
                && t["offset"].is_u64()
                && t["inplace_of"].is_null()
                && t["alias_of"].is_null()
        })
        .collect()
}

#[test]
fn the_arena_run_passes_a_plan_and_catches_an_overlap_and_a_short_buffer() {
    let Some(python) = ort_python() else {
        eprintln!("SKIPPED: no Python with onnx, onnxruntime and numpy (set MEMPLAN_PYTHON)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("resnet.memplan.onnx");
    let plan = plan_to(
        &root().join("models/resnet_small.onnx"),
        &out,
        &["--quiet", "--dim", "batch=1"],
    );
    assert!(plan.status.success(), "{plan:?}");
    let table_path = dir.path().join("resnet.memplan.json");

    let good = arena_run(&python, &out, &table_path);
    let report = String::from_utf8_lossy(&good.stdout);
    assert!(
        good.status.success(),
        "{report}{}",
        String::from_utf8_lossy(&good.stderr)
    );
    assert!(report.contains(": ok,"), "{report}");

    // b is written while a is still to be read: putting b at a's offset destroys a (and only
    // a, since b is no larger).
    let table: Value = serde_json::from_slice(&std::fs::read(&table_path).unwrap()).unwrap();
    let plain = plain_intermediates(&table);
    let (a, b) = plain
        .iter()
        .flat_map(|a| plain.iter().map(move |b| (a, b)))
        .find(|(a, b)| {
            a["first"].as_u64() < b["first"].as_u64()
                && b["first"].as_u64() < a["last"].as_u64()
                && b["bytes"].as_u64() <= a["bytes"].as_u64()
        })
        .map(|(a, b)| (a["name"].clone(), b["name"].clone()))
        .expect("two intermediates with crossing lifetimes");
    let offset_of_a = plain.iter().find(|t| t["name"] == a).unwrap()["offset"].clone();
    let mut overlap = table.clone();
    for t in overlap["tensors"].as_array_mut().unwrap() {
        if t["name"] == b {
            t["offset"] = offset_of_a.clone();
        }
    }
    let bad_path = dir.path().join("overlap.json");
    write_json(&overlap, &bad_path);
    let bad = arena_run(&python, &out, &bad_path);
    let report = String::from_utf8_lossy(&bad.stdout);
    assert_eq!(bad.status.code(), Some(1), "{report}");
    assert!(
        report.contains("FAIL") && report.contains("was overwritten at step"),
        "{report}"
    );
    assert!(
        report.contains(a.as_str().unwrap()),
        "names the destroyed tensor: {report}"
    );

    // A buffer 4 bytes short of its tensor.
    let mut short = table.clone();
    let victim = plain[0]["name"].clone();
    for t in short["tensors"].as_array_mut().unwrap() {
        if t["name"] == victim {
            t["bytes"] = Value::from(t["bytes"].as_u64().unwrap() - 4);
        }
    }
    let short_path = dir.path().join("short.json");
    write_json(&short, &short_path);
    let bad = arena_run(&python, &out, &short_path);
    let report = String::from_utf8_lossy(&bad.stdout);
    assert_eq!(bad.status.code(), Some(1), "{report}");
    assert!(report.contains("the table gives it"), "{report}");
}
