//! Helpers of the tests of dynamically quantized row chains: uint8 weights, and onnxruntime's
//! outputs compared bit for bit on inputs chosen to reach the quantizer's edge cases.

use std::process::Command;

use onnx_memplan::onnx::proto::TensorProto;

/// A uint8 initializer (ONNX element type 2).
pub fn u8_init(name: &str, dims: &[i64], values: &[u8]) -> TensorProto {
    TensorProto {
        name: Some(name.into()),
        dims: dims.to_vec(),
        data_type: Some(2),
        raw_data: Some(values.to_vec().into()),
        ..Default::default()
    }
}

/// Runs both models in onnxruntime (all graph optimizations off) on the same input `x` of
/// each kind of `inputs` (see the script) and asserts every output is bit-identical (same
/// dtype, shape and bytes).
pub fn assert_bit_identical(
    original: &std::path::Path,
    rewritten: &std::path::Path,
    inputs: &[&str],
) {
    let Some(python) = super::ort_python() else {
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
shape = a.get_inputs()[0].shape
n = int(np.prod(shape))
normal = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
def halves(lo):
    # lo, lo + 2, ... every value halfway between two steps of scale 1; the last moved to
    # lo + 255 so that the range is exactly 255.
    x = (np.arange(n, dtype=np.float32) * 2 + np.float32(lo)).reshape(shape)
    x.flat[-1] = lo + 255
    return x
def one_negative():
    x = np.zeros(shape, np.float32)
    x.flat[0] = -1
    return x
kinds = {
    "normal": lambda: normal,
    "positive": lambda: np.abs(normal) + np.float32(0.1),
    "negative": lambda: -np.abs(normal) - np.float32(0.1),
    "zeros": lambda: np.zeros(shape, np.float32),
    "constant": lambda: np.full(shape, 3, np.float32),
    "ties_even": lambda: halves(-2.5),
    "ties_odd": lambda: halves(-3.5),
    "denormal": lambda: normal * np.float32(1e-40),
    "one_negative": one_negative,
    "huge": lambda: np.clip(normal, -1, 1) * np.float32(3e38),
}
bad = []
for kind in sys.argv[3:]:
    x = kinds[kind]()
    ya, yb = a.run(None, {"x": x}), b.run(None, {"x": x})
    same = all(p.dtype == q.dtype and p.shape == q.shape and p.tobytes() == q.tobytes() for p, q in zip(ya, yb))
    diff = max(float(np.abs(p.astype(np.float64) - q.astype(np.float64)).max()) for p, q in zip(ya, yb))
    print(f"{kind}: bit-identical {same}, max abs diff {diff}")
    if not same:
        bad.append(kind)
sys.exit(1 if bad else 0)
"#;
    super::assert_succeeds(
        "onnxruntime: ",
        Command::new(python)
            .args(["-c", script])
            .arg(original)
            .arg(rewritten)
            .args(inputs),
    );
}

/// `proto` (typed as `graph`, nodes in `order`) with `chain` run in `blocks` under the label
/// `split1` (no Split before the first block), the last `keep` blocks of the pass before the
/// last kept for it; the rewritten model is also written to `path`.
pub fn rewrite_rows_to(
    proto: &onnx_memplan::onnx::proto::ModelProto,
    graph: &onnx_memplan::ir::Graph,
    order: &[usize],
    (chain, blocks, keep): (
        &onnx_memplan::split::rows::chain::RowChain,
        &[onnx_memplan::split::region::Span],
        usize,
    ),
    path: &std::path::Path,
) -> onnx_memplan::split::rewrite::Rewritten {
    use onnx_memplan::split::rows::rewrite::{RowCut, rewrite_rows};
    let cut = RowCut {
        chain,
        blocks,
        label: "split1".to_string(),
        blockwise: None,
        keep,
    };
    let rewritten = rewrite_rows(proto, graph, order, &[cut]);
    super::write_model(&rewritten.model, path);
    rewritten
}

/// How many nodes of `graph` run `op`.
pub fn count_op(graph: &onnx_memplan::ir::Graph, op: &str) -> usize {
    graph.nodes.iter().filter(|n| n.op_type == op).count()
}

/// The output shape of each node of `graph` running `op`, in order.
pub fn made_by(graph: &onnx_memplan::ir::Graph, op: &str) -> Vec<Vec<i64>> {
    let nodes = graph.nodes.iter().filter(|n| n.op_type == op);
    nodes
        .map(|n| onnx_memplan::split::rules::shape_of(graph, n.outputs[0].unwrap()).unwrap())
        .collect()
}
