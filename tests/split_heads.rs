//! Head blocking of a dynamically quantized attention, as `quantize_dynamic` leaves a T5
//! encoder's: a block of the context's columns is one head, made from that head's columns of
//! the query, key and value weights, and the attention mask, which every head adds whole, is
//! recomputed in each block from the small tensor it comes from.
//!
//! The model, at S = 8 tokens, D = 8, two heads of 4:
//! X[1,8,8] → DynamicQuantizeLinear → (Xq u8, Xs, Xz); for P in q, k, v:
//! MatMulInteger(Xq, Wp u8 [8,8], Xz, Wpz) [1,8,8] i32 → Cast → Mul (Xs·Wps) → Reshape
//! [1,8,2,4] → Transpose (q, v: [0,2,1,3] → [1,2,8,4]; k: [0,2,3,1] → [1,2,4,8]);
//! MatMul(q, k) [1,2,8,8] → Add mask → Softmax → MatMul(·, v) [1,2,8,4] → Transpose
//! [1,8,2,4] → Reshape ctx [1,8,8] → Add X → Y. The mask: ReduceMax(X, axis 2) [1,8] →
//! Greater 0 → Unsqueeze [1,1,1,8] → Expand [1,1,8,8] (bool) → Where(·, 0, −10⁴) [1,1,8,8].
//!
//! Worked by hand for the chain making ctx along its columns (axis 2, the head rules): a
//! column of ctx is a column of one head's PV product; a head of that product needs the same
//! head of the probabilities and of V, so of the scores, Q and K; a head of Q (K, V) is 4
//! columns of the projection, which need all of Xq and those 4 columns of Wq (a constant).
//! Xq is read whole (made before the chain by the quantizer, whose scale needs all of X).
//! Each head adds all of the mask (broadcast along the head axis): the Where, 256 bytes, is
//! recomputed per block from the Expand (64 bytes), itself from the Unsqueeze (8 bytes); the
//! Unsqueeze is no larger than what it is made from (the 8-byte Greater), so it stays
//! outside and is read whole. The chain has 5 × 3 projection nodes, the two MatMuls, Add,
//! Softmax, Transpose and Reshape, Expand and Where: 23 nodes, 2 of them recomputed whole.
//! The extents along the cut axes are 8 (columns) and 2 (heads): blocks are whole heads
//! (`rows` 2). Cut in two, each block makes its three projections [1,8,4] and its own mask
//! [1,1,8,8]; the original mask is read by nothing else, so it goes. The same integer
//! products and float operations on the same values: bit-identical in onnxruntime.
//!
//! Nested, worked by hand: a head block still holds its head's whole square of scores. The
//! row chain ending at head 0's PV product copy `[1,1,8,4]`, along its query rows (axis 2,
//! 8 rows), cuts that block again: a query row of the product reads the same row of the
//! probabilities (V whole), so of the Softmax, of the Add, of the scores (K whole) and of
//! the mask's Where and Expand (the Expand reads its `[1,1,1,8]` input whole); a query row
//! of the scores is a row of head 0's Q, made through its Transpose, Reshape, Mul, Cast and
//! MatMulInteger from the same row of Xq: 11 nodes, all made by the head cut, so only a
//! search nesting row chains may take them. Cut in 4: head 0's four Softmax blocks
//! `[1,1,2,8]` beside head 1's `[1,1,8,8]`, its Q in four MatMulIntegers `[1,2,4]` beside the
//! five whole head projections `[1,8,4]`, and still bit-identical.

mod common;

use std::path::Path;

use common::dynamic::{assert_bit_identical, count_op, made_by, rewrite_rows_to, u8_init};
use common::typed::Typed;
use common::{float_info, float_init, int_init, model, node, with_int, with_ints, write_model};
use onnx_memplan::onnx::proto::{GraphProto, ModelProto, NodeProto};
use onnx_memplan::split::region::Span;
use onnx_memplan::split::rows::chain::{Recompute, RowChain, RowOrder, row_chain};
use onnx_memplan::split::rows::rewrite::{RowCut, rewrite_rows};
use onnx_memplan::split::rows::rules::RuleSet;

/// The nodes of projection `p` (q, k or v): its Transpose by `perm` makes `p`.
fn projection(p: &str, perm: &[i64]) -> Vec<NodeProto> {
    let name = |s: &str| format!("{p}_{s}");
    vec![
        node("Mul", &["xs", &name("ws")], &[&name("s")]),
        node(
            "MatMulInteger",
            &["xq", &name("w"), "xz", &name("wz")],
            &[&name("mi")],
        ),
        with_int(node("Cast", &[&name("mi")], &[&name("c")]), "to", 1),
        node("Mul", &[&name("c"), &name("s")], &[&name("f")]),
        node("Reshape", &[&name("f"), "heads"], &[&name("r")]),
        with_ints(node("Transpose", &[&name("r")], &[p]), "perm", perm),
    ]
}

/// The attention described above.
fn quantized_attention() -> ModelProto {
    let (s, d) = (8, 8);
    let mut nodes = vec![
        node("DynamicQuantizeLinear", &["x"], &["xq", "xs", "xz"]),
        with_int(
            with_ints(node("ReduceMax", &["x"], &["rmax"]), "axes", &[2]),
            "keepdims",
            0,
        ),
        node("Greater", &["rmax", "zero"], &["keep"]),
        node("Unsqueeze", &["keep", "axes12"], &["keep4"]),
        node("Expand", &["keep4", "square"], &["keep_sq"]),
        node("Where", &["keep_sq", "zero", "minus"], &["mask"]),
    ];
    nodes.extend(projection("q", &[0, 2, 1, 3]));
    nodes.extend(projection("k", &[0, 2, 3, 1]));
    nodes.extend(projection("v", &[0, 2, 1, 3]));
    nodes.extend([
        node("MatMul", &["q", "k"], &["scores"]),
        node("Add", &["scores", "mask"], &["masked"]),
        with_int(node("Softmax", &["masked"], &["probs"]), "axis", -1),
        node("MatMul", &["probs", "v"], &["pv"]),
        with_ints(node("Transpose", &["pv"], &["pvt"]), "perm", &[0, 2, 1, 3]),
        node("Reshape", &["pvt", "merged"], &["ctx"]),
        node("Add", &["ctx", "x"], &["y"]),
    ]);
    let mut initializer = vec![
        float_init("zero", &[], &[0.0]),
        float_init("minus", &[], &[-10000.0]),
        int_init("axes12", &[2], &[1, 2]),
        int_init("square", &[4], &[1, 1, s, s]),
        int_init("heads", &[4], &[1, s, 2, d / 2]),
        int_init("merged", &[3], &[1, s, d]),
    ];
    for (k, p) in ["q", "k", "v"].iter().enumerate() {
        let w: Vec<u8> = (0..(d * d) as usize)
            .map(|i| ((i * 37 + 11 + 53 * k) % 256) as u8)
            .collect();
        initializer.push(u8_init(&format!("{p}_w"), &[d, d], &w));
        initializer.push(u8_init(&format!("{p}_wz"), &[], &[120 + k as u8]));
        initializer.push(float_init(
            &format!("{p}_ws"),
            &[],
            &[0.002 * (k + 1) as f32],
        ));
    }
    model(GraphProto {
        name: Some("quantized_attention".into()),
        node: nodes,
        input: vec![float_info("x", &[1, s, d])],
        output: vec![float_info("y", &[1, s, d])],
        initializer,
        ..Default::default()
    })
}

/// The attention above written to `dir` and typed, with its head chain (ending at the
/// Reshape making ctx, along the columns, blocks of whole heads).
fn head_chain(dir: &Path) -> (Typed, RowChain) {
    let typed = Typed::write(dir, "attention.onnx", &quantized_attention());
    let end = typed.order.len() - 2; // the Reshape making ctx
    let rules = (17, RuleSet::Heads, Recompute::Cheap);
    let steps = RowOrder::new(&typed.order);
    let chain = row_chain(typed.graph(), &steps, [0, end], 2, rules, &|_| true);
    (typed, chain.expect("a head chain"))
}

#[test]
fn a_quantized_attention_runs_head_by_head_recomputing_its_mask() {
    let dir = tempfile::tempdir().unwrap();
    let (original, chain) = head_chain(dir.path());
    let (graph, order) = (original.graph(), &original.order);
    assert_eq!(chain.nodes.len(), 23);
    assert_eq!(common::op_types(graph, &chain.whole), ["Expand", "Where"]);
    assert!(chain.shared.is_empty());
    assert_eq!(chain.rows, 2);
    let ops = common::op_types(graph, &chain.nodes);
    assert_eq!(ops.iter().filter(|&&o| o == "MatMulInteger").count(), 3);
    assert!(!ops.contains(&"DynamicQuantizeLinear"));
    assert!(!ops.contains(&"Unsqueeze"));

    let blocks = Span::parts(2, 2);
    let split = dir.path().join("attention.split.onnx");
    let rewritten = rewrite_rows_to(&original.proto, graph, order, (&chain, &blocks, 0), &split);
    // The head shapes [1,8,2,4] and [1,8,8], read only by the Reshapes the blocks replace
    // (each copy reshapes by its own [1,8,1,4] and [1,8,4]), go with them.
    let g = rewritten.model.graph.as_ref().unwrap();
    let constants: Vec<&str> = g.initializer.iter().map(|t| t.name()).collect();
    assert!(!constants.contains(&"heads") && !constants.contains(&"merged"));
    assert!(
        constants.contains(&"square"),
        "the mask's shape is still read"
    );
    let blocked = Typed::load(&split);
    let made = |op: &str| made_by(blocked.graph(), op);
    assert_eq!(made("MatMulInteger"), vec![vec![1, 8, 4]; 6]);
    assert_eq!(made("Where"), vec![vec![1, 1, 8, 8]; 2]);
    assert_eq!(made("Softmax"), vec![vec![1, 1, 8, 8]; 2]);
    assert_eq!(count_op(blocked.graph(), "DynamicQuantizeLinear"), 1);

    // The rewritten model plans and verifies, and matches the original bit for bit.
    common::assert_plans(dir.path(), &split);
    assert_bit_identical(&original.path, &split, &["normal", "negative", "ties_even"]);
}

#[test]
fn a_head_block_is_cut_again_by_query_rows() {
    let dir = tempfile::tempdir().unwrap();
    let (original, heads) = head_chain(dir.path());
    let (graph, order) = (original.graph(), &original.order);
    let by_heads = dir.path().join("attention.heads.onnx");
    let cut = rewrite_rows_to(
        &original.proto,
        graph,
        order,
        (&heads, &Span::parts(2, 2), 0),
        &by_heads,
    );
    let blocked = Typed::load(&by_heads);
    let (graph, order) = (blocked.graph(), &blocked.order);
    // Head 0's PV product: the first MatMul reading a Softmax.
    let made_by_softmax = |v: Option<usize>| {
        v.and_then(|v| graph.values[v].producer)
            .is_some_and(|p| graph.nodes[p].op_type == "Softmax")
    };
    let end = order
        .iter()
        .position(|&n| {
            graph.nodes[n].op_type == "MatMul" && made_by_softmax(graph.nodes[n].inputs[0])
        })
        .expect("head 0's PV product");
    let nested = (17, RuleSet::Extended, Recompute::Cheap);
    let steps = RowOrder::new(order);
    // Without nesting (only nodes of the model before the cut): no chain there.
    let kept = |n: usize| cut.kept[n].is_some();
    assert!(row_chain(graph, &steps, [0, end], 2, nested, &kept).is_none());
    let chain = row_chain(graph, &steps, [0, end], 2, nested, &|_| true).expect("a nested chain");
    assert_eq!(chain.rows, 8);
    let mut ops = common::op_types(graph, &chain.nodes);
    ops.sort_unstable();
    let expected = [
        "Add",
        "Cast",
        "Expand",
        "MatMul",
        "MatMul",
        "MatMulInteger",
        "Mul",
        "Reshape",
        "Softmax",
        "Transpose",
        "Where",
    ];
    assert_eq!(ops, expected);
    assert!(chain.whole.is_empty() && chain.shared.is_empty());

    let blocks = Span::parts(8, 4);
    let again = RowCut {
        chain: &chain,
        blocks: &blocks,
        label: "split2".to_string(),
        blockwise: None,
        keep: 0,
    };
    let rewritten = rewrite_rows(&blocked.proto, graph, order, &[again]);
    let split = dir.path().join("attention.nested.onnx");
    write_model(&rewritten.model, &split);
    let nested = Typed::load(&split);
    let made = |op: &str| {
        let mut shapes = made_by(nested.graph(), op);
        shapes.sort_unstable();
        shapes
    };
    let mut softmax = vec![vec![1, 1, 2, 8]; 4];
    softmax.push(vec![1, 1, 8, 8]);
    assert_eq!(made("Softmax"), softmax);
    let mut projections = vec![vec![1, 2, 4]; 4];
    projections.extend(vec![vec![1, 8, 4]; 5]);
    assert_eq!(made("MatMulInteger"), projections);

    common::assert_plans(dir.path(), &split);
    assert_bit_identical(&original.path, &split, &["normal", "negative", "ties_even"]);
}
