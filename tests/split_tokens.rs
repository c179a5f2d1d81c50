//! Spatial bands through token-major and channels-last layers. First on a hand-built Mix-FFN block (SegFormer's
//! feed-forward layer): X[1,16,4] (a 4×4 grid of tokens, 4 channels) → MatMul W1 [4,16] →
//! Add bias → Transpose [1,16,16] → Reshape [1,16,4,4] → depthwise Conv 3×3 pad 1 (group 16)
//! → Reshape [1,16,16] → Transpose → Relu → MatMul W2 [16,4] → Add X → Y[1,16,4].
//!
//! Worked by hand for 2 bands of Y's 4 grid rows: band 0 makes grid rows [0,2), tokens
//! [0,8). Relu, the Transposes and the second Reshape keep the rows; the Conv reads rows
//! [-1,3): one row of padding above, rows [0,3) of the first Reshape's output, which are
//! tokens [0,12) of the first Transpose, the bias Add and the first MatMul, which reads
//! tokens [0,12) of X. Band 1 makes rows [2,4): the Conv reads [1,5), one row of padding
//! below, so the first MatMul computes tokens [4,16). Halo: the first MatMul and its Add each
//! compute 3 + 3 grid rows instead of 4, 2 rows × 4 columns = 8 positions more; the MatMul's
//! 8 more positions cost 16 outputs × 4 inputs = 64 MACs each: 512 extra MACs.
//!
//! Then on a ConvNeXt block as onnxruntime's optimizer saves it (channels-last, each Linear a
//! Gemm between Reshapes that flatten H and W into one axis), worked by hand in its test.
//!
//! The rewritten models are run in onnxruntime against the original, element by element
//! (through the venv `scripts/ort_check.sh` creates, `.ci/venv`, or `MEMPLAN_PYTHON`; the test
//! says so and skips that part when neither has onnxruntime).

mod common;

use common::{compare_in_onnxruntime, float_info, int_init, model, node, wave_init, write_model};
use common::{with_int, with_ints};
use onnx_memplan::ir::Model;
use onnx_memplan::onnx::proto::{GraphProto, ModelProto, NodeProto};
use onnx_memplan::pipeline::load_typed;
use onnx_memplan::split::chain::chain_of;
use onnx_memplan::split::layout::{Layout, NCHW};
use onnx_memplan::split::region::Span;
use onnx_memplan::split::tiling::tile;

/// A depthwise Conv 3×3, pad 1, over `channels`.
fn depthwise_3x3(input: &str, weight: &str, output: &str, channels: i64) -> NodeProto {
    let conv = node("Conv", &[input, weight], &[output]);
    let conv = with_ints(conv, "kernel_shape", &[3, 3]);
    with_int(with_ints(conv, "pads", &[1, 1, 1, 1]), "group", channels)
}

/// The model at `path`, typed, and its nodes in stored order.
fn typed_in_order(path: &std::path::Path) -> (ModelProto, Model, Vec<usize>) {
    let (proto, typed, _) = load_typed(path, &Default::default()).unwrap();
    let order = (0..typed.graph.nodes.len()).collect();
    (proto, typed, order)
}

/// The Mix-FFN block on an `h`×`w` grid of tokens with `c` channels and `4c` hidden.
fn mix_ffn(h: i64, w: i64, c: i64) -> ModelProto {
    let (n, hidden) = (h * w, 4 * c);
    let to_channels = with_ints(node("Transpose", &["h1"], &["ht"]), "perm", &[0, 2, 1]);
    let dw = depthwise_3x3("img", "wd", "dw", hidden);
    let to_tokens = with_ints(node("Transpose", &["flat"], &["tok"]), "perm", &[0, 2, 1]);
    model(GraphProto {
        name: Some("mix_ffn".into()),
        node: vec![
            node("MatMul", &["x", "w1"], &["h0"]),
            node("Add", &["h0", "b1"], &["h1"]),
            to_channels,
            node("Reshape", &["ht", "grid"], &["img"]),
            dw,
            node("Reshape", &["dw", "tokens"], &["flat"]),
            to_tokens,
            node("Relu", &["tok"], &["act"]),
            node("MatMul", &["act", "w2"], &["o"]),
            node("Add", &["o", "x"], &["y"]),
        ],
        input: vec![float_info("x", &[1, n, c])],
        output: vec![float_info("y", &[1, n, c])],
        initializer: vec![
            wave_init("w1", &[c, hidden], 1.0),
            wave_init("b1", &[hidden], 2.0),
            wave_init("wd", &[hidden, 1, 3, 3], 3.0),
            wave_init("w2", &[hidden, c], 4.0),
            int_init("grid", &[4], &[1, hidden, h, w]),
            int_init("tokens", &[3], &[1, hidden, n]),
        ],
        ..Default::default()
    })
}

#[test]
fn mix_ffn_in_two_bands_worked_by_hand() {
    let dir = tempfile::tempdir().unwrap();
    let original = dir.path().join("mix_ffn.onnx");
    write_model(&mix_ffn(4, 4, 4), &original);
    let (proto, typed, order) = typed_in_order(&original);
    let graph = &typed.graph;
    let chain = chain_of(graph, &order, 17).expect("the ten nodes form a chain");
    assert_eq!(graph.values[chain.output].name, "y");
    // Tokens on axis 1 of X's [1,16,·], axis 2 after the Transpose; NCHW around the Conv.
    let tokens = |a| Layout::Tokens(a);
    assert_eq!(
        chain.layouts,
        [
            tokens(1),
            tokens(1),
            tokens(2),
            NCHW,
            NCHW,
            tokens(2),
            tokens(1),
            tokens(1),
            tokens(1),
            tokens(1)
        ]
    );
    assert!(chain.grids.iter().all(|&g| g == [4, 4]));
    // Bands of whole rows only: a column cut is no range of tokens.
    assert!(tile(graph, &chain, [2, 2]).is_none());
    let tiling = tile(graph, &chain, [2, 1]).unwrap();

    let rows = |t: usize, k: usize| tiling.tiles()[t].computed[k][0];
    // Band 0: the first MatMul, Add, Transpose and Reshape rows [0,3); the rest [0,2).
    for k in 0..4 {
        assert_eq!(rows(0, k), Span::new(0, 3), "node {k}");
        assert_eq!(rows(1, k), Span::new(1, 4), "node {k}");
    }
    for k in 4..10 {
        assert_eq!(rows(0, k), Span::new(0, 2), "node {k}");
        assert_eq!(rows(1, k), Span::new(2, 4), "node {k}");
    }
    // The Conv reads rows [-1,3) and [1,5): one row of padding each.
    assert_eq!(tiling.tiles()[0].reads[4][0].unwrap()[0], Span::new(-1, 3));
    assert_eq!(tiling.tiles()[1].reads[4][0].unwrap()[0], Span::new(1, 5));
    assert_eq!(tiling.halo, vec![8, 8, 8, 8, 0, 0, 0, 0, 0, 0]);
    assert_eq!(tiling.extra_macs, 512);

    let rewritten = common::rewrite_alone(&proto, graph, &order, (&chain, &tiling));
    assert!(rewritten.parts[0].copies.iter().all(|c| c.len() == 2));
    let split = dir.path().join("mix_ffn.split.onnx");
    write_model(&rewritten.model, &split);
    // Band 0's first MatMul reads tokens [0,12) of X: [1,12,4]; the Conv's copies make
    // [1,16,2,4] (two grid rows).
    let (_, banded, _) = load_typed(&split, &Default::default()).unwrap();
    let shapes = |op: &str| -> Vec<Vec<i64>> {
        banded
            .graph
            .nodes
            .iter()
            .filter(|n| n.op_type == op)
            .map(|n| {
                onnx_memplan::split::rules::shape_of(&banded.graph, n.outputs[0].unwrap()).unwrap()
            })
            .collect()
    };
    assert_eq!(shapes("Conv"), vec![vec![1, 16, 2, 4]; 2]);
    assert_eq!(shapes("MatMul")[0], vec![1, 12, 16]);
    common::plans_and_matches(dir.path(), &original, &split);
}

/// `plan --split auto` on a wider block (a 16×16 grid, 16 channels, 64 hidden): the hidden
/// layer's tensors ([1,256,64], 64 KiB each, two live at the Conv) set the peak; bands lower
/// the arena within the allowance. The table records the token axis of the chain's output and
/// of each token-major node, verifies against the annotated model, and the annotated model
/// matches the original in onnxruntime.
#[test]
fn split_auto_bands_a_mix_ffn_block() {
    let dir = tempfile::tempdir().unwrap();
    let (path, table) = common::plan_written(
        dir.path(),
        "mix_ffn",
        &mix_ffn(16, 16, 16),
        &["--split", "auto"],
    );
    let t = common::read_table(&table);
    let splits = t.splits.as_ref().expect("a splits section");
    assert!(!splits.chains.is_empty(), "{splits:?}");
    assert!(
        splits.arena_after * 3 <= splits.arena_before * 2,
        "{} -> {}",
        splits.arena_before,
        splits.arena_after
    );
    let chain = &splits.chains[0];
    assert_eq!(chain.token_axis, Some(1), "{chain:?}");
    assert_eq!(chain.grid[1], 1);
    let conv = chain.nodes.iter().find(|n| n.op_type == "Conv").unwrap();
    assert_eq!(conv.token_axis, None);
    let first = chain.nodes.iter().find(|n| n.op_type == "MatMul").unwrap();
    assert_eq!(first.token_axis, Some(1));
    assert!(splits.extra_macs * 10 <= splits.total_macs, "{splits:?}");
    let annotated = dir.path().join("mix_ffn.memplan.onnx");
    common::assert_verifies(&annotated, &table);
    compare_in_onnxruntime(&path, &annotated);
}

/// A ConvNeXt block on X[1,8,8,8] in onnxruntime's form: depthwise Conv 3×3 pad 1 → Transpose
/// to [1,8,8,8] channels-last → LayerNormalization over C → Reshape [64,8] → Gemm (W [8,32],
/// bias) → Reshape [1,8,8,32] → Relu → Reshape [64,32] → Gemm (W [32,8]) → Reshape [1,8,8,8]
/// → Transpose back → Add X → Y.
fn convnext_block() -> ModelProto {
    let transpose = |from: &str, to: &str, perm: &[i64]| {
        with_ints(node("Transpose", &[from], &[to]), "perm", perm)
    };
    let dw = depthwise_3x3("x", "wd", "dw", 8);
    let norm = with_int(
        node("LayerNormalization", &["nhwc", "gamma", "beta"], &["ln"]),
        "axis",
        -1,
    );
    model(GraphProto {
        name: Some("convnext_block".into()),
        node: vec![
            dw,
            transpose("dw", "nhwc", &[0, 2, 3, 1]),
            norm,
            node("Reshape", &["ln", "flat8"], &["rows1"]),
            node("Gemm", &["rows1", "w1", "b1"], &["g1"]),
            node("Reshape", &["g1", "grid32"], &["h1"]),
            node("Relu", &["h1"], &["act"]),
            node("Reshape", &["act", "flat32"], &["rows2"]),
            node("Gemm", &["rows2", "w2"], &["g2"]),
            node("Reshape", &["g2", "grid8"], &["h2"]),
            transpose("h2", "back", &[0, 3, 1, 2]),
            node("Add", &["back", "x"], &["y"]),
        ],
        input: vec![float_info("x", &[1, 8, 8, 8])],
        output: vec![float_info("y", &[1, 8, 8, 8])],
        initializer: vec![
            wave_init("wd", &[8, 1, 3, 3], 1.0),
            wave_init("gamma", &[8], 2.0),
            wave_init("beta", &[8], 3.0),
            wave_init("w1", &[8, 32], 4.0),
            wave_init("b1", &[32], 5.0),
            wave_init("w2", &[32, 8], 6.0),
            int_init("flat8", &[2], &[64, 8]),
            int_init("grid32", &[4], &[1, 8, 8, 32]),
            int_init("flat32", &[2], &[64, 32]),
            int_init("grid8", &[4], &[1, 8, 8, 8]),
        ],
        ..Default::default()
    })
}

/// Worked by hand: the Conv is NCHW; the first Transpose puts H and W on axes 1 and 2, which
/// the LayerNorm (over C) keeps; each Reshape to `[64, C]` merges them into token axis 0 of
/// the Gemm, and the Reshape after it splits them again; the last Transpose brings back NCHW
/// for the residual Add. In 2 bands of Y's 8 rows, every node computes its band's 4 rows and
/// the Conv reads X rows [-1,5) and [3,9) (X is made outside the chain): no halo, no extra
/// MACs.
#[test]
fn convnext_block_in_two_bands_through_gemm_reshapes() {
    let dir = tempfile::tempdir().unwrap();
    let original = dir.path().join("convnext_block.onnx");
    write_model(&convnext_block(), &original);
    let (proto, typed, order) = typed_in_order(&original);
    let graph = &typed.graph;
    let chain = chain_of(graph, &order, 17).expect("the twelve nodes form a chain");
    let last = Layout::Grid([1, 2]);
    let tokens = Layout::Tokens(0);
    assert_eq!(
        chain.layouts,
        [
            NCHW, last, last, tokens, tokens, last, last, tokens, tokens, last, NCHW, NCHW
        ]
    );
    assert!(tile(graph, &chain, [2, 2]).is_none());
    let tiling = tile(graph, &chain, [2, 1]).unwrap();
    for (t, rows) in [Span::new(0, 4), Span::new(4, 8)].into_iter().enumerate() {
        assert!(tiling.tiles()[t].computed.iter().all(|r| r[0] == rows));
    }
    assert_eq!(tiling.tiles()[0].reads[0][0].unwrap()[0], Span::new(-1, 5));
    assert_eq!(tiling.tiles()[1].reads[0][0].unwrap()[0], Span::new(3, 9));
    assert_eq!(tiling.extra_macs, 0);
    let rewritten = common::rewrite_alone(&proto, graph, &order, (&chain, &tiling));
    let split = dir.path().join("convnext_block.split.onnx");
    write_model(&rewritten.model, &split);
    // Each band's first Gemm reads [32, 8]: 4 rows of 8 positions.
    let (_, banded, _) = load_typed(&split, &Default::default()).unwrap();
    let gemm_inputs: Vec<Vec<i64>> = banded
        .graph
        .nodes
        .iter()
        .filter(|n| n.op_type == "Gemm")
        .map(|n| onnx_memplan::split::rules::shape_of(&banded.graph, n.inputs[0].unwrap()).unwrap())
        .collect();
    assert_eq!(gemm_inputs, [[32, 8], [32, 32], [32, 8], [32, 32]]);
    common::plans_and_matches(dir.path(), &original, &split);
}
