//! Row blocking on a hand-built attention block (the legacy torch exporter's pattern):
//! X[1,S,8] → Q, K, V = X·W (+ bias for Q) → Reshape [1,S,2,4] → Transpose (Kᵀ: perm 0,2,3,1)
//! → scores = Q·Kᵀ [1,2,S,S] → Div 2 (√4) → Add mask [1,1,S,S] → Softmax(−1) → ·V [1,2,S,4]
//! → Transpose [1,S,2,4] → Reshape [1,S,8] → ·Wo → Add X (residual) → Y[1,S,8].
//!
//! Worked by hand for S = 16 and 4 blocks: every query row needs all of K and V (read whole)
//! and its own row of Q, of the mask and of X, so the chain making Y along the token axis (1)
//! holds the Q projection, its bias Add, Reshape (axis 1), Transpose (axis 2), the scores
//! MatMul, Div, mask Add, Softmax, the context MatMul (axis 2), Transpose back (axis 1),
//! Reshape, the output projection and the residual Add: 13 nodes. The K and V projections,
//! whose outputs are read whole, stay outside. Block b computes query rows [4b, 4b+4), so each
//! block's scores are [1,2,4,16]: 2 heads × 4 query rows × 16 keys, a quarter of [1,2,16,16].
//!
//! The rewritten model is run in onnxruntime against the original, element by element
//! (through the venv `scripts/ort_check.sh` creates, `.ci/venv`, or `MEMPLAN_PYTHON`; the test
//! says so and skips that part when neither has onnxruntime).

mod common;

use common::{compare_in_onnxruntime, float_info, float_init, int_init, model, node, write_model};
use onnx_memplan::onnx::proto::{GraphProto, ModelProto};
use onnx_memplan::pipeline::load_typed;
use onnx_memplan::split::region::Span;
use onnx_memplan::split::rows::chain::row_chain;
use onnx_memplan::split::rows::rewrite::rewrite_rows;

fn weights(name: &str, dims: &[i64], seed: f32) -> onnx_memplan::onnx::proto::TensorProto {
    let n: i64 = dims.iter().product();
    let values: Vec<f32> = (0..n)
        .map(|i| ((i as f32 + seed) * 0.37).sin() * 0.5)
        .collect();
    float_init(name, dims, &values)
}

/// The attention block at `s` tokens with a causal mask (−10000 above the diagonal).
fn attention(s: i64) -> ModelProto {
    let mask: Vec<f32> = (0..s * s)
        .map(|i| if i % s > i / s { -10000.0 } else { 0.0 })
        .collect();
    let mut transpose_k = node("Transpose", &["k4"], &["kt"]);
    transpose_k.attribute = vec![perm(&[0, 2, 3, 1])];
    let mut transpose_q = node("Transpose", &["q4"], &["qt"]);
    transpose_q.attribute = vec![perm(&[0, 2, 1, 3])];
    let mut transpose_v = node("Transpose", &["v4"], &["vt"]);
    transpose_v.attribute = vec![perm(&[0, 2, 1, 3])];
    let mut transpose_c = node("Transpose", &["ctx"], &["ct"]);
    transpose_c.attribute = vec![perm(&[0, 2, 1, 3])];
    model(GraphProto {
        name: Some("attention".into()),
        node: vec![
            node("MatMul", &["x", "wk"], &["k"]),
            node("Reshape", &["k", "heads"], &["k4"]),
            transpose_k,
            node("MatMul", &["x", "wv"], &["v"]),
            node("Reshape", &["v", "heads"], &["v4"]),
            transpose_v,
            node("MatMul", &["x", "wq"], &["q0"]),
            node("Add", &["q0", "bq"], &["q"]),
            node("Reshape", &["q", "heads"], &["q4"]),
            transpose_q,
            node("MatMul", &["qt", "kt"], &["scores"]),
            node("Div", &["scores", "scale"], &["scaled"]),
            node("Add", &["scaled", "mask"], &["masked"]),
            node("Softmax", &["masked"], &["probs"]),
            node("MatMul", &["probs", "vt"], &["ctx"]),
            transpose_c,
            node("Reshape", &["ct", "merge"], &["merged"]),
            node("MatMul", &["merged", "wo"], &["o"]),
            node("Add", &["o", "x"], &["y"]),
        ],
        input: vec![float_info("x", &[1, s, 8])],
        output: vec![float_info("y", &[1, s, 8])],
        initializer: vec![
            weights("wq", &[8, 8], 1.0),
            weights("wk", &[8, 8], 2.0),
            weights("wv", &[8, 8], 3.0),
            weights("wo", &[8, 8], 4.0),
            weights("bq", &[8], 5.0),
            float_init("scale", &[], &[2.0]),
            float_init("mask", &[1, 1, s, s], &mask),
            int_init("heads", &[4], &[1, s, 2, 4]),
            int_init("merge", &[3], &[1, s, 8]),
        ],
        ..Default::default()
    })
}

fn perm(values: &[i64]) -> onnx_memplan::onnx::proto::AttributeProto {
    onnx_memplan::onnx::proto::AttributeProto {
        name: Some("perm".into()),
        r#type: Some(onnx_memplan::onnx::proto::attribute_proto::AttributeType::Ints as i32),
        ints: values.to_vec(),
        ..Default::default()
    }
}

#[test]
fn attention_in_four_query_row_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let original = dir.path().join("attention.onnx");
    write_model(&attention(16), &original);
    let (proto, typed, _) = load_typed(&original, &Default::default()).unwrap();
    let graph = &typed.graph;
    let order: Vec<usize> = (0..graph.nodes.len()).collect();
    let end = order.len() - 1;
    let chain = row_chain(graph, &order, [0, end], 1, 17, &|_| true).expect("a row chain");
    let names: Vec<&str> = chain
        .nodes
        .iter()
        .map(|&n| {
            graph.values[graph.nodes[n].outputs[0].unwrap()]
                .name
                .as_str()
        })
        .collect();
    assert_eq!(
        names,
        [
            "q0", "q", "q4", "qt", "scores", "scaled", "masked", "probs", "ctx", "ct", "merged",
            "o", "y"
        ]
    );
    // Token axis 1 on [1,S,·]; the query axis 2 on [1,heads,S,·].
    assert_eq!(chain.axes, [1, 1, 1, 2, 2, 2, 2, 2, 2, 1, 1, 1, 1]);
    assert_eq!(chain.rows, 16);

    let blocks = Span::parts(16, 4);
    assert_eq!(blocks[1], Span::new(4, 8));
    let rewritten = rewrite_rows(&proto, graph, &order, &chain, &blocks, "split1");
    assert!(rewritten.copies.iter().all(|c| c.len() == 4));
    let split = dir.path().join("attention.split.onnx");
    write_model(&rewritten.model, &split);
    // Each block's scores are [1,2,4,16] (worked above), never the whole [1,2,16,16].
    let (_, blocked, _) = load_typed(&split, &Default::default()).unwrap();
    let softmax: Vec<Vec<i64>> = blocked
        .graph
        .nodes
        .iter()
        .filter(|n| n.op_type == "Softmax")
        .map(|n| {
            onnx_memplan::split::rules::shape_of(&blocked.graph, n.outputs[0].unwrap()).unwrap()
        })
        .collect();
    assert_eq!(softmax, vec![vec![1, 2, 4, 16]; 4]);
    assert!(blocked.graph.value("scores").is_none());

    // The rewritten model plans and verifies like any other.
    common::plans_and_matches(dir.path(), &original, &split);
}

/// `plan --split auto` on the block at 128 tokens: the scores ([1,2,128,128], 128 KiB) set the
/// peak; blocking the query rows lowers the arena, with no extra MACs; the table verifies
/// against the annotated model and the annotated model matches the original in onnxruntime.
#[test]
fn split_auto_blocks_attention_rows() {
    let dir = tempfile::tempdir().unwrap();
    let (path, table) = common::plan_written(
        dir.path(),
        "attention128",
        &attention(128),
        &["--split", "auto", "--schedule", "memory"],
    );
    let t = common::read_table(&table);
    let splits = t.splits.as_ref().expect("a splits section");
    assert!(!splits.chains.is_empty(), "{splits:?}");
    assert!(
        splits.arena_after * 2 <= splits.arena_before,
        "{} -> {}",
        splits.arena_before,
        splits.arena_after
    );
    assert_eq!(splits.extra_macs, 0);
    let chain = &splits.chains[0];
    // Row blocks (the search picks where the chain ends: [1,S,8] or [1,2,S,4]); the blocks
    // cover the 128 query rows in order.
    assert!(chain.axis.is_some(), "{chain:?}");
    assert_eq!(chain.tiles.len(), chain.grid[0]);
    assert_eq!(chain.tiles[0][0][0], 0);
    assert_eq!(chain.tiles.last().unwrap()[0][1], 128);
    assert!(chain.tiles.windows(2).all(|w| w[0][0][1] == w[1][0][0]));
    let softmax = chain
        .nodes
        .iter()
        .find(|n| n.op_type == "Softmax")
        .expect("the Softmax is blocked");
    assert_eq!(softmax.axis, Some(2));
    let annotated = dir.path().join("attention128.memplan.onnx");
    common::assert_verifies(&annotated, &table);
    compare_in_onnxruntime(&path, &annotated);
}
