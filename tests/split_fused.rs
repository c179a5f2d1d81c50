//! onnxruntime's fused forms in split chains: models/resnet_small saved by onnxruntime at
//! ORT_ENABLE_EXTENDED carries `com.microsoft` FusedConv (Conv + Relu); `--split auto` tiles
//! it like a Conv. The outputs are compared in onnxruntime by `.ci/run`'s edge-case step with
//! `--split auto` (scripts/ort_check.py, which also runs the plan inside its arena). Its
//! activation fusions (QuickGelu, the SiLU of EfficientNet-style networks) tile as the
//! elementwise operators they replace.

mod common;

use std::process::Command;

use common::{
    assert_verifies, compare_in_onnxruntime, float_info, model, node, ort_python, plan_to,
    plan_written, read_table, root, wave_init, with_int, with_ints,
};
use onnx_memplan::onnx::proto::{GraphProto, ModelProto, NodeProto, OperatorSetIdProto};

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

/// A `com.microsoft` node.
fn microsoft(op: &str, inputs: &[&str], outputs: &[&str]) -> NodeProto {
    let mut n = node(op, inputs, outputs);
    n.domain = Some("com.microsoft".into());
    n
}

/// A Conv with a square kernel, `pads` of `kernel / 2` and the given stride and group.
fn conv(
    input: &str,
    weight: &str,
    output: &str,
    kernel: i64,
    stride: i64,
    group: i64,
) -> NodeProto {
    let n = node("Conv", &[input, weight], &[output]);
    let n = with_ints(n, "kernel_shape", &[kernel, kernel]);
    let pad = kernel / 2;
    let n = with_ints(n, "pads", &[pad, pad, pad, pad]);
    let n = with_ints(n, "strides", &[stride, stride]);
    with_int(n, "group", group)
}

/// An inverted-residual block as onnxruntime saves an EfficientNet at ORT_ENABLE_EXTENDED:
/// X[1,8,64,64] → Conv 1×1 to 32 channels → QuickGelu → depthwise Conv 3×3 stride 2 →
/// QuickGelu → Conv 1×1 to 8 channels → Y[1,8,32,32]. Unsplit, the expansion's output (512 KiB,
/// its QuickGelu in place) is live with X (128 KiB) and then with the depthwise output (128 KiB):
/// 655,360 bytes.
fn quick_gelu_block() -> ModelProto {
    let mut m = model(GraphProto {
        name: Some("quick_gelu_block".into()),
        node: vec![
            conv("x", "w1", "e", 1, 1, 1),
            microsoft("QuickGelu", &["e"], &["s1"]),
            conv("s1", "w2", "d", 3, 2, 32),
            microsoft("QuickGelu", &["d"], &["s2"]),
            conv("s2", "w3", "y", 1, 1, 1),
        ],
        initializer: vec![
            wave_init("w1", &[32, 8, 1, 1], 0.0),
            wave_init("w2", &[32, 1, 3, 3], 1.0),
            wave_init("w3", &[8, 32, 1, 1], 2.0),
        ],
        input: vec![float_info("x", &[1, 8, 64, 64])],
        output: vec![float_info("y", &[1, 8, 32, 32])],
        ..Default::default()
    });
    m.opset_import.push(OperatorSetIdProto {
        domain: Some("com.microsoft".into()),
        version: Some(1),
    });
    m
}

#[test]
fn quick_gelu_activations_are_tiled_with_their_convs() {
    let dir = tempfile::tempdir().unwrap();
    let args = ["--schedule", "memory", "--split", "auto"];
    let (original, table_path) = plan_written(dir.path(), "block", &quick_gelu_block(), &args);
    let table = read_table(&table_path);
    let splits = table.splits.expect("a splits section");
    let tiled: Vec<_> = splits
        .chains
        .iter()
        .flat_map(|c| &c.nodes)
        .filter(|n| n.op_type == "QuickGelu" && n.tiles.len() > 1)
        .collect();
    assert_eq!(tiled.len(), 2, "{:?}", splits.chains);
    assert_eq!(splits.arena_before, 524_288 + 131_072);
    assert!(splits.arena_after < splits.arena_before);
    let rewritten = dir.path().join("block.memplan.onnx");
    assert_verifies(&rewritten, &table_path);
    compare_in_onnxruntime(&original, &rewritten);
}
