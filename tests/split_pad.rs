//! Constant `Pad` on H and W inside a chain (TF "same" padding as exporters write it: an
//! explicit Pad before an unpadded Conv), tiled as a 1×1 window that computes nothing.
//!
//! X[1,2,12,12] → Pad end 1 (rows and columns) → P1[13,13] → Conv 3×3 stride 2 → C1[6,6] →
//! Relu → Pad 1 both sides, value 0.5 → P2[8,8] → Conv 3×3 → Y[1,4,6,6], in 2×2 tiles.
//!
//! Worked by hand (rows; columns are the same). Tile row 0 makes Y [0,3): the last Conv reads
//! P2 [0,5); P2 row p is R1 row p−1, so it reads R1 [-1,4): one row of its own begin padding,
//! R1 and C1 compute [0,4); C1 reads P1 [0, 3·2+3) = [0,9), which is X [0,9), no padding.
//! Tile row 1 makes Y [3,6): P2 [3,8) reads R1 [2,7), past R1's 6 rows by one: R1 and C1
//! [2,6) and one row of end padding; C1 reads P1 [4,13), X [4,13): X has 12 rows, so one row
//! of end padding. Halo: C1 computes 4 × 4×4 = 64 positions instead of 36, 28 more at
//! 4·2·9 = 72 MACs each: 2016; the last Conv none; the Pads have no MACs.

mod common;

use common::typed::Typed;
use common::{
    compare_in_onnxruntime, float_info, float_init, int_init, model, node, wave_init, with_ints,
    write_model,
};
use onnx_memplan::onnx::proto::{GraphProto, ModelProto};
use onnx_memplan::pipeline::load_typed;
use onnx_memplan::split::chain::chain_of;
use onnx_memplan::split::region::Span;
use onnx_memplan::split::rules::rule_of;
use onnx_memplan::split::tiling::tile;

fn conv(
    input: &str,
    weight: &str,
    output: &str,
    stride: i64,
) -> onnx_memplan::onnx::proto::NodeProto {
    let n = with_ints(
        node("Conv", &[input, weight], &[output]),
        "kernel_shape",
        &[3, 3],
    );
    with_ints(n, "strides", &[stride, stride])
}

fn tf_same_chain(mode: Option<&str>) -> ModelProto {
    let mut pad2 = node("Pad", &["r1", "pads2", "half"], &["p2"]);
    if let Some(m) = mode {
        pad2.attribute
            .push(onnx_memplan::onnx::proto::AttributeProto {
                name: Some("mode".into()),
                r#type: Some(3),
                s: Some(m.as_bytes().to_vec().into()),
                ..Default::default()
            });
    }
    model(GraphProto {
        name: Some("tf_same_chain".into()),
        node: vec![
            node("Pad", &["x", "pads1"], &["p1"]),
            conv("p1", "w1", "c1", 2),
            node("Relu", &["c1"], &["r1"]),
            pad2,
            conv("p2", "w2", "y", 1),
        ],
        input: vec![float_info("x", &[1, 2, 12, 12])],
        output: vec![float_info("y", &[1, 4, 6, 6])],
        initializer: vec![
            int_init("pads1", &[8], &[0, 0, 0, 0, 0, 0, 1, 1]),
            int_init("pads2", &[8], &[0, 0, 1, 1, 0, 0, 1, 1]),
            float_init("half", &[], &[0.5]),
            wave_init("w1", &[4, 2, 3, 3], 1.0),
            wave_init("w2", &[4, 4, 3, 3], 2.0),
        ],
        ..Default::default()
    })
}

#[test]
fn tf_same_pads_tile_as_windows() {
    let dir = tempfile::tempdir().unwrap();
    let original = Typed::write(dir.path(), "tf_same_chain.onnx", &tf_same_chain(None));
    let (graph, order) = (original.graph(), &original.order);
    let chain = chain_of(graph, order, 17).expect("the five nodes form a chain");
    let tiling = tile(graph, &chain, [2, 2]).unwrap();

    let rows = |t: usize, k: usize| tiling.tiles()[t].computed[k][0];
    let read = |t: usize, k: usize| tiling.tiles()[t].reads[k][0].unwrap()[0];
    // Tile row 0: P1 [0,9) from X [0,9); C1 and R1 [0,4); P2 [0,5) reading R1 [-1,4).
    assert_eq!(rows(0, 0), Span::new(0, 9));
    assert_eq!(read(0, 0), Span::new(0, 9));
    assert_eq!(rows(0, 1), Span::new(0, 4));
    assert_eq!(rows(0, 2), Span::new(0, 4));
    assert_eq!(rows(0, 3), Span::new(0, 5));
    assert_eq!(read(0, 3), Span::new(-1, 4));
    // Tile row 1 (tile 2 in grid order): P1 [4,13) from X [4,13), one row past X's 12;
    // C1 and R1 [2,6); P2 [3,8) reading R1 [2,7), one row past R1's 6.
    assert_eq!(rows(2, 0), Span::new(4, 13));
    assert_eq!(read(2, 0), Span::new(4, 13));
    assert_eq!(rows(2, 1), Span::new(2, 6));
    assert_eq!(rows(2, 3), Span::new(3, 8));
    assert_eq!(read(2, 3), Span::new(2, 7));
    assert_eq!(tiling.extra_macs, 2016);

    let rewritten = common::rewrite_alone(&original.proto, graph, order, (&chain, &tiling));
    // Each Pad copy pads only the borders its tile touches: P2's copy in tile (0,0) pads the
    // beginning of H and W, in tile (1,1) the end.
    let g = rewritten.model.graph.as_ref().unwrap();
    let pads_of = |name: &str| -> Vec<i64> {
        let n = g.node.iter().find(|n| n.name() == name).unwrap();
        let init = g
            .initializer
            .iter()
            .find(|t| t.name() == n.input[1])
            .unwrap();
        let raw = init
            .raw_data
            .as_deref()
            .map(<[u8]>::to_vec)
            .unwrap_or_default();
        if raw.is_empty() {
            return init.int64_data.clone();
        }
        raw.chunks(8)
            .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
            .collect()
    };
    let copies = &rewritten.parts[0].copies;
    assert_eq!(pads_of(&copies[3][0]), [0, 0, 1, 1, 0, 0, 0, 0]);
    assert_eq!(pads_of(&copies[3][3]), [0, 0, 0, 0, 0, 0, 1, 1]);
    assert_eq!(pads_of(&copies[0][0]), [0, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(pads_of(&copies[0][3]), [0, 0, 0, 0, 0, 0, 1, 1]);
    let split = dir.path().join("tf_same_chain.split.onnx");
    write_model(&rewritten.model, &split);
    compare_in_onnxruntime(&original.path, &split);
    common::plans_and_matches(dir.path(), &original.path, &split);
}

/// Only constant padding is a window: edge and reflect padding repeat input values, which a
/// tile away from the border does not hold.
#[test]
fn edge_and_reflect_pads_end_chains() {
    let dir = tempfile::tempdir().unwrap();
    for (mode, rule) in [
        (Some("constant"), true),
        (Some("edge"), false),
        (Some("reflect"), false),
    ] {
        let path = dir.path().join("pad_mode.onnx");
        write_model(&tf_same_chain(mode), &path);
        let (_, typed, _) = load_typed(&path, &Default::default()).unwrap();
        let g = &typed.graph;
        assert_eq!(rule_of(g, &g.nodes[3]).is_some(), rule, "{mode:?}");
    }
}

/// The same chain with P2's pads computed at run time from `Shape(R1)`, as timm's
/// TensorFlow-ported models do ("same" padding from the input size): Shape(R1) = [1,4,6,6]
/// (worked by hand), Gather of its H, 6 / 6 = 1, and the pads [0,0,1,1,0,0,1,1] concatenated
/// from it. The shape computation runs between Relu and the Pad; its outputs are known before
/// run time, so it stays outside the chain, the chain still spans the five nodes, and the
/// rewrite replaces the Shape of R1 (which no longer exists whole) by its value.
#[test]
fn pads_computed_from_a_shape_stay_outside_the_chain() {
    let mut m = tf_same_chain(None);
    let g = m.graph.as_mut().unwrap();
    let pads = ["zeros", "one", "one", "zeros", "one", "one"];
    let shape_nodes = vec![
        node("Shape", &["r1"], &["r1_shape"]),
        node("Gather", &["r1_shape", "h_index"], &["r1_h"]),
        node("Div", &["r1_h", "r1_h"], &["one"]),
        common::with_int(node("Concat", &pads, &["pads2"]), "axis", 0),
    ];
    g.node.splice(3..3, shape_nodes);
    g.initializer.retain(|t| t.name() != "pads2");
    g.initializer.push(int_init("h_index", &[1], &[2]));
    g.initializer.push(int_init("zeros", &[2], &[0, 0]));
    let dir = tempfile::tempdir().unwrap();
    let original = Typed::write(dir.path(), "shape_pads.onnx", &m);
    let (graph, order) = (original.graph(), &original.order);
    let data: Vec<usize> = order
        .iter()
        .copied()
        .filter(|&n| !onnx_memplan::split::chain::is_constant(graph, n))
        .collect();
    let ops = common::op_types(graph, &data);
    assert_eq!(ops, ["Pad", "Conv", "Relu", "Pad", "Conv"]);
    let chain = chain_of(graph, &data, 17).expect("the five nodes form a chain");
    assert_eq!(graph.values[chain.output].name, "y");
    assert!(chain.extra.is_empty(), "R1 is not assembled for its Shape");
    let tiling = tile(graph, &chain, [2, 2]).unwrap();
    let rewritten = common::rewrite_alone(&original.proto, graph, order, (&chain, &tiling));
    let g = rewritten.model.graph.as_ref().unwrap();
    assert!(g.node.iter().all(|n| !n.input.contains(&"r1".to_string())));
    let folded = g
        .initializer
        .iter()
        .find(|t| t.name() == "r1_shape")
        .unwrap();
    let values: Vec<i64> = folded
        .raw_data()
        .chunks(8)
        .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(values, [1, 4, 6, 6]);
    let split = dir.path().join("shape_pads.split.onnx");
    write_model(&rewritten.model, &split);
    common::plans_and_matches(dir.path(), &original.path, &split);
}
