//! Three passes of row blocks through two dynamically quantized inputs, on a hand-built
//! pre-norm feed-forward block at 16 tokens (the LayerNorm stands in as MatMul and Relu, both
//! row-independent):
//! X[1,16,8] → MatMul W0 [8,8] → Relu → H → DynamicQuantizeLinear → MatMulInteger(Hq, W1 u8
//! [8,32]) → Cast → Mul (Hs·W1s) → Add bias [32] → Relu → G → DynamicQuantizeLinear →
//! MatMulInteger(Gq, W2 u8 [32,8]) → Cast → Mul (Gs·W2s) → Y[1,16,8].
//!
//! Worked by hand for 4 blocks of 4 rows. Both quantizers take their scale from all of their
//! input. With one pass before the last, only G's quantizer is reached through its input, so
//! H is made whole before the chain. With two, a first pass runs each block's MatMul and Relu
//! for H's extremes (H's scale and zero point), a second runs them again with H's quantizer
//! (now a QuantizeLinear), the first projection and the GELU stand-in for G's extremes, and the
//! last pass runs the chain. The minimum of the blocks' minima is the whole input's, so every
//! integer is the one the whole operators make: onnxruntime's outputs must be bit-identical.

mod common;

use common::dynamic::{assert_bit_identical, count_op, rewrite_rows_to, u8_init};
use common::typed::Typed;
use common::{float_info, float_init, model, node, with_int};
use onnx_memplan::onnx::proto::{GraphProto, ModelProto};
use onnx_memplan::split::region::Span;
use onnx_memplan::split::rows::chain::{Pass, Recompute, RowOrder, RowRules, row_chain};
use onnx_memplan::split::rows::recomputed_macs;
use onnx_memplan::split::rows::rules::RuleSet;

/// The pre-norm feed-forward block described above (weights a fixed pattern).
fn pre_norm_ffn() -> ModelProto {
    let w0: Vec<f32> = (0..64).map(|i| ((i as f32) * 0.61).cos() * 0.7).collect();
    let w1: Vec<u8> = (0..8 * 32).map(|i| ((i * 37 + 11) % 256) as u8).collect();
    let w2: Vec<u8> = (0..32 * 8).map(|i| ((i * 53 + 7) % 256) as u8).collect();
    let bias: Vec<f32> = (0..32).map(|i| ((i as f32) * 0.7).cos()).collect();
    model(GraphProto {
        name: Some("pre_norm_ffn".into()),
        node: vec![
            node("MatMul", &["x", "w0"], &["m0"]),
            node("Relu", &["m0"], &["h"]),
            node("DynamicQuantizeLinear", &["h"], &["hq", "hs", "hz"]),
            node("Mul", &["hs", "w1s"], &["s1"]),
            node("MatMulInteger", &["hq", "w1", "hz", "w1z"], &["mi1"]),
            with_int(node("Cast", &["mi1"], &["c1"]), "to", 1),
            node("Mul", &["c1", "s1"], &["scaled1"]),
            node("Add", &["scaled1", "b1"], &["a1"]),
            node("Relu", &["a1"], &["g"]),
            node("DynamicQuantizeLinear", &["g"], &["gq", "gs", "gz"]),
            node("Mul", &["gs", "w2s"], &["s2"]),
            node("MatMulInteger", &["gq", "w2", "gz", "w2z"], &["mi2"]),
            with_int(node("Cast", &["mi2"], &["c2"]), "to", 1),
            node("Mul", &["c2", "s2"], &["y"]),
        ],
        input: vec![float_info("x", &[1, 16, 8])],
        output: vec![float_info("y", &[1, 16, 8])],
        initializer: vec![
            float_init("w0", &[8, 8], &w0),
            u8_init("w1", &[8, 32], &w1),
            u8_init("w1z", &[], &[131]),
            float_init("w1s", &[], &[0.0123]),
            float_init("b1", &[32], &bias),
            u8_init("w2", &[32, 8], &w2),
            u8_init("w2z", &[], &[120]),
            float_init("w2s", &[], &[0.0071]),
        ],
        ..Default::default()
    })
}

#[test]
fn three_passes_quantize_a_pre_norm_feed_forward_in_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let original = Typed::write(dir.path(), "pre_norm.onnx", &pre_norm_ffn());
    let (graph, order) = (original.graph(), &original.order);
    let chain_of = |passes: usize| {
        let rules = RowRules {
            opset: 17,
            set: RuleSet::Plain,
            recompute: Recompute::Cheap,
            passes,
        };
        let steps = RowOrder::new(order);
        let end = [0, order.len() - 1];
        row_chain(graph, &steps, end, 1, rules, &|_| true).expect("a row chain")
    };
    // The scalar Muls of the scales read no rows and stay outside every chain.
    let last = ["DynamicQuantizeLinear", "MatMulInteger", "Cast", "Mul"];
    let first = [&last[..], &["Add", "Relu"]].concat();
    let stand_in = ["MatMul", "Relu"];
    // No pass: G is made whole before the chain.
    let none = chain_of(0);
    assert_eq!(common::op_types(graph, &none.nodes), last);
    assert_eq!(none.passes, []);
    // One pass before the last: H is made whole before it.
    let one = chain_of(1);
    assert_eq!(
        common::op_types(graph, &one.nodes),
        [&first[..], &last].concat()
    );
    let prefix: Vec<usize> = (0..6).collect();
    assert_eq!(
        one.passes,
        [Pass {
            quantizer: 6,
            prefix
        }]
    );
    // Two: the chain also runs the stand-in for the LayerNorm.
    let chain = chain_of(2);
    let all = [&stand_in[..], &first, &last].concat();
    assert_eq!(common::op_types(graph, &chain.nodes), all);
    let passes = [
        Pass {
            quantizer: 2,
            prefix: vec![0, 1],
        },
        Pass {
            quantizer: 8,
            prefix: (0..8).collect(),
        },
    ];
    assert_eq!(chain.passes, passes);
    // MACs: the MatMul makes 16 × 8 outputs of 8 (1,024), the first MatMulInteger 16 × 32 of 8
    // (4,096). The MatMul runs in both passes before the last (16 rows again) and, with the
    // last `keep` blocks of the second kept, again for the other 16 - 4 × keep rows in the
    // last; the first MatMulInteger runs again for those rows only. keep 0: 1,024 × 32 / 16 +
    // 4,096 = 6,144; keep 1: 1,024 × 28 / 16 + 4,096 × 12 / 16 = 1,792 + 3,072 = 4,864;
    // keep 4: 1,024.
    let blocks = Span::parts(16, 4);
    let macs = |keep| recomputed_macs(graph, &chain, &blocks, keep);
    assert_eq!([macs(0), macs(1), macs(4)], [6144, 4864, 1024]);

    let split = dir.path().join("pre_norm.split.onnx");
    let rewritten = rewrite_rows_to(&original.proto, graph, order, (&chain, &blocks, 1), &split);
    let parts = &rewritten.parts[0];
    // The MatMul's copies in the passes before the last: 4 in each; the kept block's copy in
    // the last pass is its copy in the second.
    assert_eq!(parts.first_pass[0].len(), 8);
    assert_eq!(parts.first_pass[3].len(), 4);
    assert!(parts.first_pass[8].is_empty());
    assert_eq!(parts.copies[0].len(), 4);
    assert_eq!(parts.copies[0][3], parts.first_pass[0][7]);
    let blocked = Typed::load(&split);
    let nodes = &blocked.graph().nodes;
    let count = |op: &str| count_op(blocked.graph(), op);
    // MatMul: 4 + 4 + 3; Relu: the stand-in's 11 and the second's 4 + 3; reductions: 4 per pass
    // before the last; QuantizeLinear: H's 4 + 3 and G's 4; MatMulInteger: the first's 4 + 3,
    // the second's 4.
    let ops = [
        "MatMul",
        "Relu",
        "ReduceMin",
        "ReduceMax",
        "QuantizeLinear",
        "DynamicQuantizeLinear",
        "MatMulInteger",
    ];
    assert_eq!(ops.map(count), [11, 18, 8, 8, 11, 0, 11]);
    // Every first-pass reduction runs before any MatMulInteger (which needs H's scale), and
    // the last pass runs its kept block first, so its rows die before the others recompute.
    let at = |name: &str| {
        let names = nodes.iter().map(|n| n.name.as_str());
        names.into_iter().position(|n| n == name).expect("a copy")
    };
    let first_pass = |g: &&String| g.contains("/pass0/") && g.contains("/Reduce");
    let reductions: Vec<usize> = parts
        .glue
        .iter()
        .filter(first_pass)
        .map(|g| at(g))
        .collect();
    assert_eq!(reductions.len(), 8);
    let first_integer = nodes
        .iter()
        .position(|n| n.op_type == "MatMulInteger")
        .unwrap();
    assert!(reductions.iter().all(|&step| step < first_integer));
    assert!(at(&parts.copies[9][3]) < at(&parts.copies[9][0]));

    common::assert_plans(dir.path(), &split);
    assert_bit_identical(
        &original.path,
        &split,
        &["normal", "positive", "negative", "zeros", "one_negative"],
    );
}
