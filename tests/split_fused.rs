//! onnxruntime's fused forms in split chains: models/resnet_small saved by onnxruntime at
//! ORT_ENABLE_EXTENDED carries `com.microsoft` FusedConv (Conv + Relu); `--split auto` tiles
//! it like a Conv. The outputs are compared in onnxruntime by `.ci/run`'s edge-case step with
//! `--split auto` (scripts/ort_check.py, which also runs the plan inside its arena).

mod common;

use std::process::Command;

use common::{assert_verifies, ort_python, plan_to, read_table, root};

#[test]
fn fused_convs_of_onnxruntime_are_tiled() {
    let Some(python) = ort_python() else {
        eprintln!(
            "SKIPPED the FusedConv split: no Python with onnxruntime to save the model at \
             ORT_ENABLE_EXTENDED (run scripts/ort_check.sh once to create .ci/venv, or set \
             MEMPLAN_PYTHON)"
        );
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("resnet_fused.onnx");
    let save = r#"
import sys, onnxruntime as ort
so = ort.SessionOptions()
so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
so.optimized_model_filepath = sys.argv[2]
ort.InferenceSession(sys.argv[1], so, providers=["CPUExecutionProvider"])
"#;
    let run = Command::new(python)
        .args(["-c", save])
        .arg(root().join("models/resnet_small.onnx"))
        .arg(&model)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );

    let out = dir.path().join("resnet_fused.memplan.onnx");
    let args = [
        "--dim",
        "batch=1",
        "--schedule",
        "memory",
        "--split",
        "auto",
    ];
    let plan = plan_to(&model, &out, &args);
    assert!(
        plan.status.success(),
        "{}",
        String::from_utf8_lossy(&plan.stderr)
    );
    let table_path = dir.path().join("resnet_fused.memplan.json");
    let table = read_table(&table_path);
    let splits = table.splits.expect("a splits section");
    let fused: Vec<_> = splits
        .chains
        .iter()
        .flat_map(|c| &c.nodes)
        .filter(|n| n.op_type == "FusedConv")
        .collect();
    assert!(
        !fused.is_empty(),
        "no FusedConv was tiled: {:?}",
        splits.chains
    );
    assert!(fused.iter().all(|n| n.tiles.len() > 1));
    assert!(splits.arena_after < splits.arena_before);
    assert_verifies(&out, &table_path);
}
