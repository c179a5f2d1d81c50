//! The split stage on int8 chains: QOperator convolutions and QDQ node units. Requantisation is
//! per element, so every tile computes exactly the original's integers: the rewritten models
//! must give bit-identical outputs in onnxruntime (run through `.ci/venv` or `MEMPLAN_PYTHON`;
//! the test says so and skips that part when neither has onnxruntime).
//!
//! Both chains have the geometry of tests/split_tiles.rs, worked by hand there (rows; columns
//! are the same): X[1,2,16,16] → 3×3 stride 2 pad 1 → 3×3 pad 1 → 3×3 pad 1 → Y[1,4,8,8], cut
//! into 2×2 tiles of Y. Tile row 0 makes Y rows [0,4): the last conv reads rows [-1,5) (one row
//! of padding), so the middle conv computes [0,5) and reads [-1,6); the first conv computes
//! [0,6) and reads X rows [0·2−1, 5·2−1+3) = [-1,12). Tile row 1 makes Y rows [4,8): the middle
//! conv computes [3,8), the first [2,8), reading X rows [2·2−1, 7·2−1+3) = [3,16). Halo: the
//! first conv computes 4 tiles × 6×6 = 144 positions instead of 64 (80 more, 4·2·9 = 72 MACs
//! each: 5760), the middle one 4 × 5×5 = 100 instead of 64 (36 more, 4·4·9 = 144 MACs each:
//! 5184). Extra MACs: 10944.

mod common;

use std::path::Path;
use std::process::Command;

use common::typed::Typed;
use common::{float_info, model, node, ort_python, raw_init, with_ints, write_model};
use onnx_memplan::onnx::proto::{
    GraphProto, ModelProto, NodeProto, TensorProto, TypeProto, ValueInfoProto,
};
use onnx_memplan::pipeline::load_typed;
use onnx_memplan::split::chain::{chain_of, is_constant};
use onnx_memplan::split::region::Span;
use onnx_memplan::split::tiling::tile;

const FLOAT: i32 = 1;
const UINT8: i32 = 2;
const INT8: i32 = 3;
const INT32: i32 = 6;

/// A graph output of the given element type and shape.
fn info(name: &str, elem_type: i32, dims: &[i64]) -> ValueInfoProto {
    let mut v = float_info(name, dims);
    if let Some(TypeProto {
        value: Some(onnx_memplan::onnx::proto::type_proto::Value::TensorType(t)),
        ..
    }) = v.r#type.as_mut()
    {
        t.elem_type = Some(elem_type);
    }
    v
}

fn scalar_f32(name: &str, v: f32) -> onnx_memplan::onnx::proto::TensorProto {
    raw_init(name, &[], FLOAT, v.to_le_bytes().to_vec())
}

/// int8 weights [m, c, 3, 3] of a fixed pattern spanning −90..=90.
fn weights(name: &str, m: i64, c: i64, seed: i64) -> onnx_memplan::onnx::proto::TensorProto {
    let n = m * c * 9;
    let raw = (0..n).map(|i| (((i * 37 + seed * 11) % 181) - 90) as i8 as u8);
    raw_init(name, &[m, c, 3, 3], INT8, raw.collect())
}

/// int32 biases [m].
fn bias(name: &str, m: i64, seed: i32) -> onnx_memplan::onnx::proto::TensorProto {
    let raw = (0..m as i32).flat_map(|i| (i * 97 - 150 + seed).to_le_bytes());
    raw_init(name, &[m], INT32, raw.collect())
}

/// 3×3 window attributes: pads 1 all round, the given stride.
fn window(n: NodeProto, stride: i64) -> NodeProto {
    let n = with_ints(n, "kernel_shape", &[3, 3]);
    let n = with_ints(n, "pads", &[1, 1, 1, 1]);
    with_ints(n, "strides", &[stride, stride])
}

/// x float → QuantizeLinear (uint8, zero point 100: padding is 100, not 0) → QLinearConv s2
/// → QLinearConv → QLinearConv (per-channel weight scales) → y uint8 [1,4,8,8].
fn qlinear_chain() -> ModelProto {
    let conv = |x: &str, w: &str, b: &str, ws: &str, out: &str, stride: i64| {
        window(
            node(
                "QLinearConv",
                &[x, "sx", "zx", w, ws, "zw", "sx", "zx", b],
                &[out],
            ),
            stride,
        )
    };
    let per_channel: Vec<u8> = [0.004f32, 0.006, 0.003, 0.005]
        .iter()
        .flat_map(|s| s.to_le_bytes())
        .collect();
    model(GraphProto {
        name: Some("qlinear_chain".into()),
        node: vec![
            node("QuantizeLinear", &["x", "sx", "zx"], &["x_q"]),
            conv("x_q", "w1", "b1", "sw", "c1", 2),
            conv("c1", "w2", "b2", "sw", "c2", 1),
            conv("c2", "w3", "b3", "sw3", "y", 1),
        ],
        input: vec![float_info("x", &[1, 2, 16, 16])],
        output: vec![info("y", UINT8, &[1, 4, 8, 8])],
        initializer: vec![
            scalar_f32("sx", 0.02),
            raw_init("zx", &[], UINT8, vec![100]),
            scalar_f32("sw", 0.005),
            raw_init("sw3", &[4], FLOAT, per_channel),
            raw_init("zw", &[], INT8, vec![0]),
            weights("w1", 4, 2, 1),
            weights("w2", 4, 4, 2),
            weights("w3", 4, 4, 3),
            bias("b1", 4, 1),
            bias("b2", 4, 2),
            bias("b3", 4, 3),
        ],
        ..Default::default()
    })
}

/// The quantization parameters of the QDQ test graphs: activations int8 at scale 0.02, zero
/// point −20; weights at 0.005, zero point 0; int32 biases at 0.0001, the product of x's and
/// w's scales (quantize_static's convention).
fn qdq_scales() -> Vec<TensorProto> {
    vec![
        scalar_f32("sx", 0.02),
        raw_init("zx", &[], INT8, vec![(-20i8) as u8]),
        scalar_f32("sw", 0.005),
        raw_init("zw", &[], INT8, vec![0]),
        scalar_f32("sb", 0.0001),
    ]
}

/// A QDQ model named `name`: float input x [1,2,16,16], int8 output `output` of shape `dims`,
/// the scales and zero points of [`qdq_scales`] and `weights`.
fn qdq_model(
    name: &str,
    nodes: Vec<NodeProto>,
    (output, dims): (&str, &[i64]),
    weights: Vec<TensorProto>,
) -> ModelProto {
    model(GraphProto {
        name: Some(name.into()),
        node: nodes,
        input: vec![float_info("x", &[1, 2, 16, 16])],
        output: vec![info(output, INT8, dims)],
        initializer: [qdq_scales(), weights].concat(),
        ..Default::default()
    })
}

/// The weight and bias DequantizeLinears of `layers` convolutions (w{l} with sw, zw and b{l}
/// with sb, into dw{l} and db{l}), as quantize_static stores them: before the other nodes.
fn weight_dqs(layers: usize) -> Vec<NodeProto> {
    (1..=layers)
        .flat_map(|l| {
            [
                node(
                    "DequantizeLinear",
                    &[&format!("w{l}"), "sw", "zw"],
                    &[&format!("dw{l}")],
                ),
                node(
                    "DequantizeLinear",
                    &[&format!("b{l}"), "sb"],
                    &[&format!("db{l}")],
                ),
            ]
        })
        .collect()
}

/// The Conv unit of layer `l`: DQ `input` → Conv 3×3 pad 1 of the given stride (dw{l}, db{l})
/// → Q → `out`, every activation by sx and zx; its float tensors are d{out} and f{out}.
fn conv_unit(l: usize, input: &str, out: &str, stride: i64) -> [NodeProto; 3] {
    let (d, f) = (format!("d{out}"), format!("f{out}"));
    let conv = node("Conv", &[&d, &format!("dw{l}"), &format!("db{l}")], &[&f]);
    [
        node("DequantizeLinear", &[input, "sx", "zx"], &[&d]),
        window(conv, stride),
        node("QuantizeLinear", &[&f, "sx", "zx"], &[out]),
    ]
}

/// The same chain as QDQ node units (int8 activations, zero point −20): the weight and bias
/// DQs first, as quantize_static stores them, then x → Q → [DQ → Conv s2 → Q] → [DQ → Conv →
/// Q] → [DQ → Conv → Q] → y int8 [1,4,8,8].
fn qdq_chain() -> ModelProto {
    let mut nodes = weight_dqs(3);
    nodes.push(node("QuantizeLinear", &["x", "sx", "zx"], &["q0"]));
    for (l, stride) in [(1, 2), (2, 1), (3, 1)] {
        let (input, out) = (format!("q{}", l - 1), format!("q{l}"));
        nodes.extend(conv_unit(l, &input, &out, stride));
    }
    qdq_model(
        "qdq_chain",
        nodes,
        ("q3", &[1, 4, 8, 8]),
        vec![
            weights("w1", 4, 2, 1),
            weights("w2", 4, 4, 2),
            weights("w3", 4, 4, 3),
            bias("b1", 4, 1),
            bias("b2", 4, 2),
            bias("b3", 4, 3),
        ],
    )
}

/// Runs both models in onnxruntime on the same N(0, 1) input and asserts every output is
/// bit-identical (and that onnx.checker accepts the rewritten model); skips without a Python
/// with onnxruntime.
fn bit_identical_in_onnxruntime(original: &Path, rewritten: &Path) {
    let Some(python) = ort_python() else {
        eprintln!(
            "SKIPPED onnxruntime comparison: no Python with onnxruntime (run scripts/ort_check.sh \
             once to create .ci/venv, or set MEMPLAN_PYTHON)"
        );
        return;
    };
    let script = r#"
import sys, numpy as np, onnx, onnxruntime as ort
onnx.checker.check_model(sys.argv[2], full_check=True)
so = ort.SessionOptions()
so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
a = ort.InferenceSession(sys.argv[1], so, providers=["CPUExecutionProvider"])
b = ort.InferenceSession(sys.argv[2], so, providers=["CPUExecutionProvider"])
x = np.random.default_rng(7).standard_normal((1, 2, 16, 16)).astype(np.float32) * 2
ya, yb = a.run(None, {"x": x}), b.run(None, {"x": x})
same = all(p.dtype == q.dtype and np.array_equal(p, q) for p, q in zip(ya, yb))
spread = len(np.unique(ya[0]))
print(f"bit-identical {same}, {spread} distinct output values, dtype {ya[0].dtype}")
sys.exit(0 if same and spread > 8 else 1)
"#;
    common::assert_succeeds(
        "onnxruntime: ",
        Command::new(python)
            .args(["-c", script])
            .arg(original)
            .arg(rewritten),
    );
}

#[test]
fn two_by_two_tiles_of_a_qlinearconv_chain_are_bit_identical() {
    let dir = tempfile::tempdir().unwrap();
    let original = Typed::write(dir.path(), "qlinear_chain.onnx", &qlinear_chain());
    let (graph, order) = (original.graph(), &original.order);
    let chain = chain_of(graph, order, 17).expect("Q and the three QLinearConvs form a chain");
    assert_eq!(graph.values[chain.output].name, "y");
    let tiling = tile(graph, &chain, [2, 2]).unwrap();
    let rows = |t: usize, k: usize| tiling.tiles()[t].computed[k][0];
    // Node 0 is the QuantizeLinear: it computes the X rows the first conv reads, clipped.
    assert_eq!(rows(0, 0), Span::new(0, 12));
    assert_eq!(rows(0, 1), Span::new(0, 6));
    assert_eq!(rows(0, 2), Span::new(0, 5));
    assert_eq!(rows(3, 0), Span::new(3, 16));
    assert_eq!(rows(3, 1), Span::new(2, 8));
    assert_eq!(rows(3, 2), Span::new(3, 8));
    assert_eq!(rows(3, 3), Span::new(4, 8));
    // The first conv of tile (0, 0) pads one row and column with x's zero point (its `pads`).
    assert_eq!(tiling.tiles()[0].reads[1][0].unwrap()[0], Span::new(-1, 12));
    // The QuantizeLinear computes (12 + 13)² = 625 positions of X's 256: 369 recomputed.
    assert_eq!(tiling.halo, vec![369, 80, 36, 0]);
    assert_eq!(tiling.extra_macs, 5760 + 5184);

    let rewritten = common::rewrite_alone(&original.proto, graph, order, (&chain, &tiling));
    assert!(rewritten.parts[0].copies.iter().all(|c| c.len() == 4));
    // No explicit Pad: padding stays inside the QLinearConv copies.
    let g = rewritten.model.graph.as_ref().unwrap();
    assert!(g.node.iter().all(|n| n.op_type() != "Pad"));
    let split = dir.path().join("qlinear_chain.split.onnx");
    write_model(&rewritten.model, &split);
    common::assert_plans(dir.path(), &split);
    bit_identical_in_onnxruntime(&original.path, &split);
}

/// Fused tensors of a table: the float tensors inside QDQ node units.
fn fused(table: &Path) -> usize {
    let t = common::read_table(table);
    t.tensors.iter().filter(|t| t.node_unit.is_some()).count()
}

#[test]
fn a_chain_of_qdq_units_splits_into_units_per_tile() {
    let dir = tempfile::tempdir().unwrap();
    let original = Typed::write(dir.path(), "qdq_chain.onnx", &qdq_chain());
    let (graph, order) = (original.graph(), &original.order);
    // The weight and bias DQs (nodes 0..6) are known before run time: outside the chain.
    assert!((0..6).all(|n| is_constant(graph, n)));
    assert!(!is_constant(graph, 7));
    let chain = chain_of(graph, &order[6..], 17).expect("Q and the three units form a chain");
    assert_eq!(graph.values[chain.output].name, "q3");
    let tiling = tile(graph, &chain, [2, 2]).unwrap();
    // Chain nodes: 0 Q, then per layer DQ, Conv, Q. The first Conv (position 2) computes rows
    // [0,6) in tile (0, 0), as its QuantizeLinear (3) and the next DQ (4).
    assert_eq!(tiling.tiles()[0].computed[2][0], Span::new(0, 6));
    assert_eq!(tiling.tiles()[0].computed[4][0], Span::new(0, 6));
    assert_eq!(tiling.extra_macs, 5760 + 5184);

    // Unsplit, planned as units: each unit's DQ output and Conv output are fused, and the
    // weight and bias DQ outputs too: 3 × 4 = 12 tensors that take no bytes.
    let (_, table) = common::plan_written(dir.path(), "unsplit", &qdq_chain(), &[]);
    assert_eq!(fused(&table), 12);

    let rewritten = common::rewrite_alone(&original.proto, graph, order, (&chain, &tiling));
    let split = dir.path().join("qdq_chain.split.onnx");
    write_model(&rewritten.model, &split);
    // Split, the units re-form in each tile: per tile and layer the DQ copy's and the Conv
    // copy's outputs (2 × 3 × 4 = 24), plus the 6 shared weight and bias DQ outputs: 30.
    let (_, table) = common::plan_written(dir.path(), "split", &rewritten.model, &[]);
    assert_eq!(fused(&table), 30);
    common::assert_verifies(&dir.path().join("split.onnx"), &table);
    bit_identical_in_onnxruntime(&original.path, &split);
}

/// A QDQ ShuffleNet channel shuffle between two Conv units, as quantize_static writes it: x →
/// Q → q0; [DQ → Conv 3×3 pad 1, 2 → 4 channels → Q] → q1 [1,4,16,16]; DQ → Reshape
/// [1,2,2,16,16] → Q → DQ → Transpose (0,2,1,3,4) → Q → DQ → Reshape [1,4,16,16] → Q → q4;
/// [DQ → Conv 3×3 pad 1 → Q] → y [1,4,16,16]. Every Q and DQ is per tensor (scale sx).
fn qdq_shuffle() -> ModelProto {
    let mut nodes = weight_dqs(2);
    nodes.push(node("QuantizeLinear", &["x", "sx", "zx"], &["q0"]));
    nodes.extend(conv_unit(1, "q0", "q1", 1));
    let steps = [
        ("Reshape", "q1", "q2", Some("split_shape")),
        ("Transpose", "q2", "q3", None),
        ("Reshape", "q3", "q4", Some("merged_shape")),
    ];
    for (op, input, out, shape) in steps {
        let (d, f) = (format!("d{out}"), format!("f{out}"));
        nodes.push(node("DequantizeLinear", &[input, "sx", "zx"], &[&d]));
        nodes.push(match shape {
            Some(shape) => node(op, &[&d, shape], &[&f]),
            None => with_ints(node(op, &[&d], &[&f]), "perm", &[0, 2, 1, 3, 4]),
        });
        nodes.push(node("QuantizeLinear", &[&f, "sx", "zx"], &[out]));
    }
    nodes.extend(conv_unit(2, "q4", "y", 1));
    qdq_model(
        "qdq_shuffle",
        nodes,
        ("y", &[1, 4, 16, 16]),
        vec![
            weights("w1", 4, 2, 1),
            weights("w2", 4, 4, 2),
            bias("b1", 4, 1),
            bias("b2", 4, 2),
            common::int_init("split_shape", &[5], &[1, 2, 2, 16, 16]),
            common::int_init("merged_shape", &[4], &[1, 4, 16, 16]),
        ],
    )
}

/// A per-tensor Q or DQ is elementwise with scalar operands: it takes its neighbours' layout,
/// so a chain crosses a QDQ channel shuffle whose Q and DQ nodes hold rank-5 tensors (a
/// ShuffleNetV2's QDQ form). A chain with tensors not NCHW is cut into bands of whole rows.
/// Worked by hand for 2 bands of y: band 0 makes rows [0,8); the second Conv reads [-1,9), so
/// every node of the shuffle computes rows [0,9) (axis 3 of the rank-5 tensors), the first
/// Conv too, reading [-1,10) of q0. Halo: the first Conv computes 2 × 9 rows of 16 = 288
/// positions instead of 256 (32 more, 4·2·9 = 72 MACs each): 2304 extra MACs.
#[test]
fn a_chain_crosses_a_qdq_channel_shuffle_of_rank_5_tensors() {
    use onnx_memplan::split::layout::{Layout, NCHW};
    let dir = tempfile::tempdir().unwrap();
    let original = Typed::write(dir.path(), "qdq_shuffle.onnx", &qdq_shuffle());
    let (graph, order) = (original.graph(), &original.order);
    assert!((0..4).all(|n| is_constant(graph, n)));
    let chain = chain_of(graph, &order[4..], 17).expect("the shuffle's Q and DQ join the chain");
    assert_eq!(graph.values[chain.output].name, "y");
    // Chain nodes: 0 Q, 1–3 the first unit, then DQ, Reshape, Q (4–6), DQ, Transpose, Q (7–9),
    // DQ, Reshape, Q (10–12), and the last unit (13–15).
    let ops = common::op_types(graph, &chain.nodes);
    assert_eq!(
        &ops[4..7],
        ["DequantizeLinear", "Reshape", "QuantizeLinear"]
    );
    assert_eq!(chain.layouts[3], NCHW);
    let shuffle = chain.layouts.iter().zip(&ops).enumerate().take(11).skip(5);
    for (k, (&layout, op)) in shuffle {
        assert_eq!(layout, Layout::Grid([3, 4]), "node {k} ({op})");
    }
    assert_eq!(chain.layouts[11], NCHW);
    assert!(
        tile(graph, &chain, [2, 2]).is_none(),
        "bands of whole rows only"
    );
    let tiling = tile(graph, &chain, [2, 1]).unwrap();
    for k in [2, 6, 9, 12] {
        assert_eq!(
            tiling.tiles()[0].computed[k][0],
            Span::new(0, 9),
            "node {k}"
        );
        assert_eq!(
            tiling.tiles()[0].computed[k][1],
            Span::new(0, 16),
            "node {k}"
        );
    }
    assert_eq!(tiling.tiles()[0].computed[0][0], Span::new(0, 10));
    assert_eq!(tiling.tiles()[1].computed[6][0], Span::new(7, 16));
    assert_eq!(tiling.extra_macs, 2304);

    let rewritten = common::rewrite_alone(&original.proto, graph, order, (&chain, &tiling));
    let split = dir.path().join("qdq_shuffle.split.onnx");
    write_model(&rewritten.model, &split);
    let (_, table) = common::plan_written(dir.path(), "split", &rewritten.model, &[]);
    common::assert_verifies(&dir.path().join("split.onnx"), &table);
    bit_identical_in_onnxruntime(&original.path, &split);
}

/// A residual block of QDQ units (int8, zero point −20, every scale 0.02): x → Q → q0;
/// [DQ q0 → Conv 3×3 pad 1 → Q] → q1; [DQ q1 → Conv 3×3 pad 1 → Q] → q2; [DQ q0, DQ q2 →
/// Add → Q] → y [1,2,16,16]. The DQ of q0 is read by both the first Conv and the Add, as
/// quantize_static writes a tensor read twice.
fn qdq_residual() -> ModelProto {
    let mut nodes = weight_dqs(2);
    nodes.push(node("QuantizeLinear", &["x", "sx", "zx"], &["q0"]));
    nodes.push(node("DequantizeLinear", &["q0", "sx", "zx"], &["d0"]));
    for l in 1..=2 {
        let d = if l == 1 {
            "d0".to_string()
        } else {
            format!("d{}", l - 1)
        };
        if l == 2 {
            nodes.push(node("DequantizeLinear", &["q1", "sx", "zx"], &[&d]));
        }
        let c = format!("c{l}");
        let conv = node("Conv", &[&d, &format!("dw{l}"), &format!("db{l}")], &[&c]);
        nodes.push(window(conv, 1));
        nodes.push(node(
            "QuantizeLinear",
            &[&c, "sx", "zx"],
            &[&format!("q{l}")],
        ));
    }
    nodes.push(node("DequantizeLinear", &["q2", "sx", "zx"], &["d2"]));
    nodes.push(node("Add", &["d0", "d2"], &["s"]));
    nodes.push(node("QuantizeLinear", &["s", "sx", "zx"], &["y"]));
    qdq_model(
        "qdq_residual",
        nodes,
        ("y", &[1, 2, 16, 16]),
        vec![
            weights("w1", 2, 2, 1),
            weights("w2", 2, 2, 2),
            bias("b1", 2, 1),
            bias("b2", 2, 2),
        ],
    )
}

/// Row strips of a QDQ residual block stream and keep every unit whole. Worked by hand, 4
/// strips of y's 16 rows: after `unique_readers` the chain is Q0, DQa (d0 for the Conv),
/// DQb (d0 for the Add), Conv1, Q1, DQ1, Conv2, Q2, DQ2, Add, Qy. Strip 1 makes y rows
/// [4,8): Add, Q2 and Conv2 stream rows [4,8); Conv2 reads rows [3,9) of DQ1, which each
/// strip recomputes from q1's rows (Q1 and Conv1 stream [5,9): strip 0 went to row 5, as
/// Conv2's rows [0,4) read [−1,5)); Conv1's rows [5,9) read DQa rows [4,10), Q0 streams
/// [6,10). DQa computes [0,6), [4,10), [8,14), [12,16): 22 rows of 16 for 16, 96 positions
/// recomputed (no MACs: a DQ multiplies nothing); DQ1 likewise [0,5), [3,9), [7,13),
/// [11,16): 96. DQb and DQ2 compute the Add's rows once. No Conv recomputes a row.
#[test]
fn row_strips_of_a_qdq_residual_block_stream_as_units() {
    use onnx_memplan::split::dequantize::unique_readers;
    use onnx_memplan::split::tiling::stream;
    let dir = tempfile::tempdir().unwrap();
    let original = dir.path().join("qdq_residual.onnx");
    write_model(&qdq_residual(), &original);
    let mut unique = qdq_residual();
    assert_eq!(unique_readers(&mut unique), 1, "d0 gets a copy for the Add");
    let g = unique.graph.as_ref().unwrap();
    let add = g.node.iter().find(|n| n.op_type() == "Add").unwrap();
    assert_eq!(add.input[0], "d0/reader1");
    let path = dir.path().join("unique.onnx");
    write_model(&unique, &path);
    let (proto, typed, _) = load_typed(&path, &Default::default()).unwrap();
    let graph = &typed.graph;
    let order: Vec<usize> = (0..graph.nodes.len()).collect();
    let chain = chain_of(graph, &order[4..], 17).expect("the block forms a chain");
    assert_eq!(chain.nodes.len(), 11);
    let tiling = stream(graph, &chain, 4).expect("the strips stream");
    let rows = |t: usize, k: usize| tiling.tiles()[t].computed[k][0];
    let (q0, dqa, dqb, conv1, dq1, conv2, add) = (0, 1, 2, 3, 5, 6, 9);
    assert_eq!(rows(1, add), Span::new(4, 8));
    assert_eq!(rows(1, conv2), Span::new(4, 8));
    assert_eq!(rows(1, dq1), Span::new(3, 9));
    assert_eq!(rows(1, conv1), Span::new(5, 9));
    assert_eq!(rows(1, dqa), Span::new(4, 10));
    assert_eq!(rows(1, q0), Span::new(6, 10));
    assert_eq!(rows(1, dqb), Span::new(4, 8));
    assert_eq!(rows(3, dqa), Span::new(12, 16));
    assert_eq!(rows(3, dq1), Span::new(11, 16));
    assert_eq!(tiling.halo, vec![0, 96, 0, 0, 0, 96, 0, 0, 0, 0, 0]);
    assert_eq!(tiling.extra_macs, 0);

    let rewritten = common::rewrite_alone(&proto, graph, &order, (&chain, &tiling));
    let (_, table) = common::plan_written(dir.path(), "split", &rewritten.model, &[]);
    // Units per strip: DQa → Conv1 → Q1, DQ1 → Conv2 → Q2, DQb + DQ2 → Add → Qy: seven
    // fused outputs (DQa, Conv1, DQ1, Conv2, DQb, DQ2, Add) × 4 strips, plus the 4 shared
    // weight and bias DQ outputs: 32. Every other float tensor is x or a slice of it.
    assert_eq!(fused(&table), 32);
    let t = common::read_table(&table);
    let float_planned: Vec<&str> = t
        .tensors
        .iter()
        .filter(|x| x.offset.is_some() && x.dtype.as_deref() == Some("float32"))
        .map(|x| x.name.as_str())
        .filter(|n| *n != "x" && !n.starts_with("x/"))
        .collect();
    assert!(float_planned.is_empty(), "{float_planned:?}");
    common::assert_verifies(&dir.path().join("split.onnx"), &table);
    bit_identical_in_onnxruntime(&original, &dir.path().join("split.onnx"));
}

/// `model` written to `dir` as `<stem>.onnx`, loaded and typed, with its node units marked as
/// the pipeline marks them: the path, the loaded proto and the typed model.
fn typed_with_units(
    dir: &Path,
    stem: &str,
    model: &ModelProto,
) -> (std::path::PathBuf, ModelProto, onnx_memplan::ir::Model) {
    let path = dir.join(format!("{stem}.onnx"));
    write_model(model, &path);
    let (proto, mut typed, _) = load_typed(&path, &Default::default()).unwrap();
    onnx_memplan::units::mark(&mut typed.graph, onnx_memplan::units::QdqChoice::Units);
    (path, proto, typed)
}

/// Chains take QDQ node units whole and count each as one kernel. Worked by hand on the
/// qdq_chain in its stored order: steps 0–5 are the weight and bias DQs (constants), 6 is
/// Q(x) (no unit), and the units are steps 7–9, 10–12 and 13–15 (DQ, Conv, Q). Around the
/// second Conv (step 11) a chain may begin at 6, 7 or 10 (never at a Conv or a Q inside a
/// unit) and end at 12 or 15. Within 1 kernel only the second unit is a chain; within 2,
/// the first unit joins it, or the third does.
#[test]
fn chains_begin_and_end_at_qdq_unit_boundaries() {
    use onnx_memplan::split::chain::Walker;
    let dir = tempfile::tempdir().unwrap();
    let (_, _, typed) = typed_with_units(dir.path(), "qdq_chain", &qdq_chain());
    let graph = &typed.graph;
    assert_eq!(graph.units.len(), 3);
    let order: Vec<usize> = (0..graph.nodes.len()).collect();
    let walk = |max_kernels: usize| {
        let mut seen = Vec::new();
        let mut visit = |steps: [usize; 2], build: &dyn Fn() -> Option<_>| {
            assert!(build().is_some(), "{steps:?} forms a chain");
            seen.push(steps);
            Ok::<bool, ()>(true)
        };
        let walker = Walker::new(graph, &order);
        walker
            .around(11, &|_| true, (max_kernels, 17), &mut visit)
            .unwrap();
        seen
    };
    assert_eq!(walk(1), vec![[10, 12]]);
    assert_eq!(walk(2), vec![[10, 12], [7, 12], [10, 15]]);
    assert_eq!(
        walk(32),
        vec![[10, 12], [7, 12], [6, 12], [10, 15], [7, 15], [6, 15]]
    );
}

/// An estimate is charged by a chain's kernels, as the walk counts them: worked by hand on the
/// qdq_chain, the chain from Q(x) (step 6) through the three units has 10 nodes and 4 kernels
/// (Q(x) and one per unit), so one visit costs 4 node visits; the second unit alone, 1.
#[test]
fn an_estimate_charges_a_qdq_unit_as_one_kernel() {
    use onnx_memplan::split::estimate::{UNITS_PER_NODE_VISIT, visit_units};
    let dir = tempfile::tempdir().unwrap();
    let (_, _, typed) = typed_with_units(dir.path(), "qdq_chain", &qdq_chain());
    let graph = &typed.graph;
    let order: Vec<usize> = (0..graph.nodes.len()).collect();
    let whole = chain_of(graph, &order[6..], 17).expect("Q and the three units form a chain");
    assert_eq!(whole.nodes.len(), 10);
    assert_eq!(visit_units(graph, &whole), 4 * UNITS_PER_NODE_VISIT);
    let second = chain_of(graph, &order[10..13], 17).expect("the second unit is a chain");
    assert_eq!(visit_units(graph, &second), UNITS_PER_NODE_VISIT);
}

/// A unit reads its inputs until it writes its outputs, so the estimate holds both. Worked by
/// hand on the qdq_chain's three units (steps 7–15: DQ1, Conv1, Q1, … Q3), cut into 2×2
/// tiles: the first unit reads a slice of q0 (int8, 2 channels) and writes Q1's part
/// (4 channels × 6 × 6 = 144 bytes in every tile, see the file's head); the DQ and Conv
/// outputs are fused. Tile (0, 0) reads q0 rows and columns [0, 12): 2 × 12 × 12 = 288
/// bytes, with Q1's 144: 432. Tiles (0, 1) and (1, 0) read 12 × 13: 312 + 144 = 456; tile
/// (1, 1) reads 13 × 13: 338 + 144 = 482. The later units hold less (q1 144 + q2 100).
#[test]
fn a_tile_estimate_holds_a_units_input_and_output_together() {
    use onnx_memplan::split::estimate::{Banding, ChainEstimate, live_bytes};
    let dir = tempfile::tempdir().unwrap();
    let (_, _, typed) = typed_with_units(dir.path(), "qdq_chain", &qdq_chain());
    let graph = &typed.graph;
    let order: Vec<usize> = (0..graph.nodes.len()).collect();
    let chain = chain_of(graph, &order[7..], 17).expect("the three units form a chain");
    let tiling = tile(graph, &chain, [2, 2]).unwrap();
    let (_, table) = common::plan_written(dir.path(), "unsplit", &qdq_chain(), &[]);
    let table = common::read_table(&table);
    let live = live_bytes(&table);
    let banding = Banding {
        made_by_split: &|_| false,
        progressive: false,
    };
    let estimate = ChainEstimate::new(graph, (&table, &live), &chain, [7, 15], &banding);
    assert_eq!(estimate.by_tile(&chain, &tiling), vec![432, 456, 456, 482]);
}

/// A squeeze-and-excitation tail of QDQ units (int8, zero point −20, scale 0.02): x → Q → q0;
/// [DQ q0 → GlobalAveragePool → Q] → qs [1,2,1,1]; [DQ q0, DQ qs → Mul → Q] → q1; [DQ q1 →
/// Conv 1×1 → Q] → y [1,4,16,16]. q0 has one DQ per reader, as `unique_readers` leaves it.
fn qdq_excitation() -> ModelProto {
    let mut nodes = vec![
        node("DequantizeLinear", &["w", "sw", "zw"], &["dw"]),
        node("DequantizeLinear", &["b", "sb"], &["db"]),
        node("QuantizeLinear", &["x", "sx", "zx"], &["q0"]),
        node("DequantizeLinear", &["q0", "sx", "zx"], &["d0"]),
        node("GlobalAveragePool", &["d0"], &["g"]),
        node("QuantizeLinear", &["g", "sx", "zx"], &["qs"]),
        node("DequantizeLinear", &["qs", "sx", "zx"], &["ds"]),
        node("DequantizeLinear", &["q0", "sx", "zx"], &["d0b"]),
        node("Mul", &["d0b", "ds"], &["m"]),
        node("QuantizeLinear", &["m", "sx", "zx"], &["q1"]),
        node("DequantizeLinear", &["q1", "sx", "zx"], &["d1"]),
    ];
    nodes.push(with_ints(
        node("Conv", &["d1", "dw", "db"], &["c"]),
        "kernel_shape",
        &[1, 1],
    ));
    nodes.push(node("QuantizeLinear", &["c", "sx", "zx"], &["y"]));
    let w = (0..8).map(|i| ((i * 37 % 181) - 90) as i8 as u8);
    qdq_model(
        "qdq_excitation",
        nodes,
        ("y", &[1, 4, 16, 16]),
        vec![
            raw_init("w", &[4, 2, 1, 1], INT8, w.collect()),
            bias("b", 4, 1),
        ],
    )
}

/// The DequantizeLinear of a squeeze-and-excitation block's channel scales (qs, [1,2,1,1],
/// made at run time) stays outside the chain: worked by hand on the stored order, steps 6–9
/// are the Mul unit (DQ qs at 6 is read whole, broadcast along H and W, so the chain's nodes
/// begin at 7, but the chain spans the unit's step 6, which the planner runs with it) and
/// 10–12 the Conv unit. Around the Mul (step 8) or the DQ of qs (step 6), within 2 kernels,
/// the chains are the Mul unit alone ([6, 9]) and with the Conv unit ([6, 12]); the
/// GlobalAveragePool unit (3–5) reads all of q0 and ends the run. Cut into 2×2 tiles, the
/// Mul and Conv copies re-form units per tile, all four reading the one DQ of qs, and the
/// outputs are bit-identical.
#[test]
fn an_excitation_scale_dequantized_once_is_read_whole_by_every_tile() {
    use onnx_memplan::split::chain::{Walker, stays_outside};
    let dir = tempfile::tempdir().unwrap();
    let (original, proto, typed) =
        typed_with_units(dir.path(), "qdq_excitation", &qdq_excitation());
    let graph = &typed.graph;
    assert_eq!(graph.units.len(), 3);
    assert!(stays_outside(graph, 6), "DQ of the [1,2,1,1] scales");
    assert!(!stays_outside(graph, 7), "DQ of q0 [1,2,16,16]");
    let order: Vec<usize> = (0..graph.nodes.len()).collect();
    for peak in [8, 6] {
        let mut seen = Vec::new();
        let mut visit = |steps: [usize; 2], build: &dyn Fn() -> Option<_>| {
            seen.push((steps, build().is_some()));
            Ok::<bool, ()>(true)
        };
        let walker = Walker::new(graph, &order);
        walker.around(peak, &|_| true, (2, 17), &mut visit).unwrap();
        assert_eq!(
            seen,
            vec![([6, 9], true), ([6, 12], true)],
            "around step {peak}"
        );
    }

    let chain = chain_of(graph, &[7, 8, 9, 10, 11, 12], 17).expect("Mul and Conv units");
    let tiling = tile(graph, &chain, [2, 2]).unwrap();
    assert_eq!(tiling.extra_macs, 0);
    let rewritten = common::rewrite_alone(&proto, graph, &order, (&chain, &tiling));
    let (_, table) = common::plan_written(dir.path(), "split", &rewritten.model, &[]);
    // Fused per tile: the Mul unit's DQ of q0 and Mul output, the Conv unit's DQ and Conv
    // output (4 × 4 = 16); the shared DQ of qs; the GlobalAveragePool unit's DQ and output;
    // the weight and bias DQs: 16 + 1 + 2 + 2 = 21.
    assert_eq!(fused(&table), 21);
    common::assert_verifies(&dir.path().join("split.onnx"), &table);
    bit_identical_in_onnxruntime(&original, &dir.path().join("split.onnx"));
}

/// An attribute holding a string.
fn string(name: &str, value: &str) -> onnx_memplan::onnx::proto::AttributeProto {
    onnx_memplan::onnx::proto::AttributeProto {
        name: Some(name.into()),
        r#type: Some(3),
        s: Some(value.as_bytes().to_vec().into()),
        ..Default::default()
    }
}

/// QDQ units through an upsampling (int8, zero point −20, every scale 0.02): x [1,2,16,16] →
/// Q → [DQ → Conv 3×3 pad 1 → Q] → c [1,4,16,16] → [DQ → Resize nearest ×2 (asymmetric,
/// floor) → Q] → u [1,4,32,32] → [DQ → Conv 3×3 pad 1 → Q] → y [1,4,32,32].
fn qdq_upsample() -> ModelProto {
    let mut nodes = weight_dqs(2);
    nodes.push(node("QuantizeLinear", &["x", "sx", "zx"], &["q0"]));
    nodes.extend(conv_unit(1, "q0", "c", 1));
    nodes.push(node("DequantizeLinear", &["c", "sx", "zx"], &["rc"]));
    let mut resize = node("Resize", &["rc", "", "scales"], &["fu"]);
    resize.attribute = vec![
        string("mode", "nearest"),
        string("coordinate_transformation_mode", "asymmetric"),
        string("nearest_mode", "floor"),
    ];
    nodes.push(resize);
    nodes.push(node("QuantizeLinear", &["fu", "sx", "zx"], &["u"]));
    nodes.extend(conv_unit(2, "u", "y", 1));
    let scales = [1f32, 1., 2., 2.].iter().flat_map(|v| v.to_le_bytes());
    qdq_model(
        "qdq_upsample",
        nodes,
        ("y", &[1, 4, 32, 32]),
        vec![
            raw_init("scales", &[4], FLOAT, scales.collect()),
            weights("w1", 4, 2, 1),
            weights("w2", 4, 4, 2),
            bias("b1", 4, 1),
            bias("b2", 4, 2),
        ],
    )
}

/// A tile's Resize copy makes whole input rows' worth of output and is cropped to what the
/// next Conv reads; in a QDQ unit the crop must cut the QuantizeLinear's integers, not the
/// Resize's floats, or the unit breaks and its float output takes arena bytes. Worked by hand
/// on 2×2 tiles of y (chain positions: 0 Q, 1–3 the first Conv unit, 4–6 the Resize unit,
/// 7–9 the second Conv unit): tile row 0 makes y rows [0,16), the second Conv reads u rows
/// [-1,17), clipped [0,17); the Resize reads c rows ⌊0/2⌋..⌊16/2⌋ = [0,9) and makes u rows
/// [0,18). Tile row 1 makes y [16,32) from u [15,32); the Resize reads c [7,16) and makes
/// u [14,32). Columns alike. Every Resize copy then feeds its QuantizeLinear directly, and no
/// Slice reads a Resize copy. Fused per tile: each of the three units' DQ and operator
/// outputs (4 × 6 = 24), and the 4 weight and bias DQ outputs: 28 (20 when the Resize unit
/// breaks).
#[test]
fn a_resize_unit_is_cropped_after_its_quantize() {
    let dir = tempfile::tempdir().unwrap();
    let original = Typed::write(dir.path(), "qdq_upsample.onnx", &qdq_upsample());
    let (graph, order) = (original.graph(), &original.order);
    let chain = chain_of(graph, &order[4..], 17).expect("Q and the three units form a chain");
    assert_eq!(graph.values[chain.output].name, "y");
    assert_eq!(graph.nodes[chain.nodes[5]].op_type, "Resize");
    let tiling = tile(graph, &chain, [2, 2]).unwrap();
    let tiles = tiling.tiles();
    assert_eq!(tiles[0].computed[5][0], Span::new(0, 17));
    assert_eq!(tiles[0].produced[5][0], Span::new(0, 18));
    assert_eq!(tiles[3].computed[5][0], Span::new(15, 32));
    assert_eq!(tiles[3].produced[5][0], Span::new(14, 32));

    let rewritten = common::rewrite_alone(&original.proto, graph, order, (&chain, &tiling));
    let g = rewritten.model.graph.as_ref().unwrap();
    let resized: Vec<&str> = g
        .node
        .iter()
        .filter(|n| n.op_type() == "Resize")
        .map(|n| n.output[0].as_str())
        .collect();
    assert_eq!(resized.len(), 4);
    for out in &resized {
        let readers: Vec<&str> = g
            .node
            .iter()
            .filter(|n| n.input.iter().any(|i| i == out))
            .map(|n| n.op_type())
            .collect();
        assert_eq!(readers, ["QuantizeLinear"], "the readers of {out}");
    }
    let split = dir.path().join("qdq_upsample.split.onnx");
    write_model(&rewritten.model, &split);
    let (_, table) = common::plan_written(dir.path(), "split", &rewritten.model, &[]);
    assert_eq!(fused(&table), 28);
    common::assert_verifies(&dir.path().join("split.onnx"), &table);
    bit_identical_in_onnxruntime(&original.path, &split);
}
