//! Row blocking through the operators `onnxruntime.quantization.quantize_dynamic` emits for a
//! transformer's projections, on a hand-built feed-forward block at S tokens:
//! X[1,S,8] → DynamicQuantizeLinear → (Xq u8, Xs, Xz) → MatMulInteger(Xq, W1 u8 [8,32], Xz, W1z)
//! [1,S,32] i32 → Cast float → Mul (Xs·W1s, a scalar) → Add bias [32] → Relu → MatMul W2 [32,8]
//! → Y[1,S,8].
//!
//! Worked by hand for S = 16 and 4 blocks: a row of the MatMulInteger's output needs its own
//! row of Xq and all of W1; both zero points and the scale product are one value each (read
//! whole), and Cast, Mul, Add, Relu and the last MatMul keep rows independent. So the chain
//! making Y along the token axis (1) holds MatMulInteger, Cast, Mul (by the scale), Add, Relu
//! and MatMul: 6 nodes. The DynamicQuantizeLinear stays outside: its scale and zero point come
//! from the minimum and maximum of the WHOLE of X (no block can compute them alone), so it runs
//! once and the blocks read rows of Xq and the whole scale and zero point. Block b computes
//! rows [4b, 4b+4), so each block's MatMulInteger output is [1,4,32], a quarter of [1,16,32].
//! Integer products and the same float operations in the same order per element: the
//! rewritten model must match the original bit for bit in onnxruntime (through `.ci/venv` or
//! `MEMPLAN_PYTHON`; the test says so and skips that part when neither has onnxruntime).

mod common;

use std::process::Command;

use common::{float_info, float_init, model, node, with_int, write_model};
use onnx_memplan::onnx::proto::{GraphProto, ModelProto, TensorProto};
use onnx_memplan::pipeline::load_typed;
use onnx_memplan::split::region::Span;
use onnx_memplan::split::rows::chain::{Recompute, row_chain};
use onnx_memplan::split::rows::rewrite::{RowCut, rewrite_rows};
use onnx_memplan::split::rows::rules::RuleSet;

/// A uint8 initializer (ONNX element type 2).
fn u8_init(name: &str, dims: &[i64], values: &[u8]) -> TensorProto {
    TensorProto {
        name: Some(name.into()),
        dims: dims.to_vec(),
        data_type: Some(2),
        raw_data: Some(values.to_vec().into()),
        ..Default::default()
    }
}

/// The dynamically quantized feed-forward block at `s` tokens (described above).
fn quantized_ffn(s: i64) -> ModelProto {
    let w1: Vec<u8> = (0..8 * 32).map(|i| ((i * 37 + 11) % 256) as u8).collect();
    let w2: Vec<f32> = (0..32 * 8)
        .map(|i| ((i as f32) * 0.37).sin() * 0.5)
        .collect();
    let bias: Vec<f32> = (0..32).map(|i| ((i as f32) * 0.7).cos()).collect();
    model(GraphProto {
        name: Some("quantized_ffn".into()),
        node: vec![
            node("DynamicQuantizeLinear", &["x"], &["xq", "xs", "xz"]),
            node("Mul", &["xs", "w1s"], &["s"]),
            node("MatMulInteger", &["xq", "w1", "xz", "w1z"], &["mi"]),
            with_int(node("Cast", &["mi"], &["c"]), "to", 1),
            node("Mul", &["c", "s"], &["scaled"]),
            node("Add", &["scaled", "b1"], &["h"]),
            node("Relu", &["h"], &["r"]),
            node("MatMul", &["r", "w2"], &["y"]),
        ],
        input: vec![float_info("x", &[1, s, 8])],
        output: vec![float_info("y", &[1, s, 8])],
        initializer: vec![
            u8_init("w1", &[8, 32], &w1),
            u8_init("w1z", &[], &[131]),
            float_init("w1s", &[], &[0.0123]),
            float_init("b1", &[32], &bias),
            float_init("w2", &[32, 8], &w2),
        ],
        ..Default::default()
    })
}

#[test]
fn dynamic_quantize_and_matmul_integer_in_four_row_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let original = dir.path().join("ffn.onnx");
    write_model(&quantized_ffn(16), &original);
    let (proto, typed, _) = load_typed(&original, &Default::default()).unwrap();
    let graph = &typed.graph;
    let order: Vec<usize> = (0..graph.nodes.len()).collect();
    let rules = (17, RuleSet::Plain, Recompute::Cheap);
    let chain =
        row_chain(graph, &order, [0, order.len() - 1], 1, rules, &|_| true).expect("a row chain");
    let ops: Vec<&str> = chain
        .nodes
        .iter()
        .map(|&n| graph.nodes[n].op_type.as_str())
        .collect();
    assert_eq!(
        ops,
        ["MatMulInteger", "Cast", "Mul", "Add", "Relu", "MatMul"]
    );
    assert_eq!(chain.axes, [1; 6]);
    assert_eq!(chain.rows, 16);

    let blocks = Span::parts(16, 4);
    let cut = RowCut {
        chain: &chain,
        blocks: &blocks,
        label: "split1".to_string(),
        blockwise: None,
    };
    let rewritten = rewrite_rows(&proto, graph, &order, &[cut]);
    let split = dir.path().join("ffn.split.onnx");
    write_model(&rewritten.model, &split);
    // Four MatMulIntegers, each making [1,4,32] (worked above); one DynamicQuantizeLinear.
    let (_, blocked, _) = load_typed(&split, &Default::default()).unwrap();
    let count = |op: &str| {
        blocked
            .graph
            .nodes
            .iter()
            .filter(|n| n.op_type == op)
            .count()
    };
    let made: Vec<Vec<i64>> = blocked
        .graph
        .nodes
        .iter()
        .filter(|n| n.op_type == "MatMulInteger")
        .map(|n| {
            onnx_memplan::split::rules::shape_of(&blocked.graph, n.outputs[0].unwrap()).unwrap()
        })
        .collect();
    assert_eq!(made, vec![vec![1, 4, 32]; 4]);
    assert_eq!(count("DynamicQuantizeLinear"), 1);

    // The rewritten model plans and verifies, and matches the original bit for bit.
    let plan = common::run_cli(&[
        "plan",
        split.to_str().unwrap(),
        "-o",
        dir.path().join("p.onnx").to_str().unwrap(),
    ]);
    assert!(
        plan.status.success(),
        "{}",
        String::from_utf8_lossy(&plan.stderr)
    );
    assert_bit_identical(&original, &split);
}

/// Runs both models in onnxruntime (all graph optimizations off) on the same normal random
/// input and asserts every output is bit-identical.
fn assert_bit_identical(original: &std::path::Path, rewritten: &std::path::Path) {
    let Some(python) = common::ort_python() else {
        eprintln!(
            "SKIPPED onnxruntime comparison: no Python with onnxruntime (run scripts/ort_check.sh \
             once to create .ci/venv, or set MEMPLAN_PYTHON)"
        );
        return;
    };
    let script = r#"
import sys, numpy as np, onnxruntime as ort
so = ort.SessionOptions()
so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
a = ort.InferenceSession(sys.argv[1], so, providers=["CPUExecutionProvider"])
b = ort.InferenceSession(sys.argv[2], so, providers=["CPUExecutionProvider"])
x = np.random.default_rng(0).standard_normal(a.get_inputs()[0].shape).astype(np.float32)
ya, yb = a.run(None, {"x": x}), b.run(None, {"x": x})
same = all(np.array_equal(p, q) for p, q in zip(ya, yb))
print(f"bit-identical {same}, max abs diff {max(float(np.abs(p - q).max()) for p, q in zip(ya, yb))}")
sys.exit(0 if same else 1)
"#;
    let run = Command::new(python)
        .args(["-c", script])
        .arg(original)
        .arg(rewritten)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&run.stdout);
    eprintln!("onnxruntime: {said}");
    assert!(
        run.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&run.stderr)
    );
}
