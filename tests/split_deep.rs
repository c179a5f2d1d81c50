//! A deep run of splittable operators (a reparameterisable network's hundreds of Conv and Add
//! nodes): the split search grows chains of a bounded length around the peak and stops growing
//! a chain backwards once no grid cuts it within the MAC allowance, so it ranks its candidates
//! within a small allowance and splits the stem.
//!
//! The model: X[1,4,64,64] → Conv 3×3 pad 1 to 32 channels → Relu → Conv 3×3 stride 2 pad 1 to
//! 8 channels → 200 residual blocks (Conv 1×1 → Add with the block's input) → Y[1,8,32,32].
//! Worked by hand, unsplit: X (65,536 bytes) and the stem's output (524,288; its Relu in place)
//! are live together, 589,824 bytes; every later step holds at most 524,288 + 32,768. Split,
//! the stem's output is never whole: X, the 32,768-byte output of the strided Conv and one
//! tile's part of the stem are live, well under half of the unsplit arena.

mod common;

use common::{
    assert_verifies, compare_in_onnxruntime, float_info, float_init, model, node, plan_written,
    read_table, wave_init, with_ints, write_model,
};
use onnx_memplan::onnx::proto::{GraphProto, ModelProto, NodeProto};
use onnx_memplan::pipeline::load_typed;
use onnx_memplan::split::chain::Chain;

/// Residual blocks after the stem.
const BLOCKS: usize = 200;

fn conv(input: &str, weight: &str, output: &str, kernel: i64, stride: i64) -> NodeProto {
    let n = with_ints(
        node("Conv", &[input, weight], &[output]),
        "kernel_shape",
        &[kernel; 2],
    );
    let pad = kernel / 2;
    let n = with_ints(n, "pads", &[pad; 4]);
    with_ints(n, "strides", &[stride; 2])
}

fn deep_model() -> ModelProto {
    let mut nodes = vec![
        conv("x", "w_stem", "stem", 3, 1),
        node("Relu", &["stem"], &["stem_relu"]),
        conv("stem_relu", "w_down", "b0", 3, 2),
    ];
    let mut initializer = vec![
        wave_init("w_stem", &[32, 4, 3, 3], 0.0),
        wave_init("w_down", &[8, 32, 3, 3], 1.0),
    ];
    for i in 0..BLOCKS {
        let (input, weight) = (format!("b{i}"), format!("w{i}"));
        let (mid, out) = (format!("c{i}"), format!("b{}", i + 1));
        nodes.push(conv(&input, &weight, &mid, 1, 1));
        let last = i + 1 == BLOCKS;
        nodes.push(node(
            "Add",
            &[&mid, &input],
            &[if last { "y" } else { &out }],
        ));
        // Small weights, so 200 residual blocks keep the values finite.
        let values: Vec<f32> = (0..64)
            .map(|k| ((k + i) as f32 * 0.7).sin() * 0.002)
            .collect();
        initializer.push(float_init(&weight, &[8, 8, 1, 1], &values));
    }
    model(GraphProto {
        name: Some("deep".into()),
        node: nodes,
        initializer,
        input: vec![float_info("x", &[1, 4, 64, 64])],
        output: vec![float_info("y", &[1, 8, 32, 32])],
        ..Default::default()
    })
}

#[test]
fn a_deep_run_of_splittable_nodes_is_split_within_a_small_allowance() {
    let dir = tempfile::tempdir().unwrap();
    let args = ["--split", "auto", "--split-time", "10"];
    let (original, table_path) = plan_written(dir.path(), "deep", &deep_model(), &args);
    let table = read_table(&table_path);
    let splits = table.splits.expect("a splits section");
    assert_eq!(splits.arena_before, 65_536 + 524_288);
    assert!(!splits.chains.is_empty(), "no chain was split");
    assert!(
        splits.arena_after < splits.arena_before / 2,
        "{} -> {}",
        splits.arena_before,
        splits.arena_after
    );
    let rewritten = dir.path().join("deep.memplan.onnx");
    assert_verifies(&rewritten, &table_path);
    compare_in_onnxruntime(&original, &rewritten);
}

/// The walk around a peak: chains of at most `MAX_CHAIN_NODES` nodes (here), each last step
/// from the shortest chain to the longest, and no longer chain for a last step once the
/// visitor says a chain is not worth growing.
#[test]
fn the_walk_is_bounded_and_stops_growing_a_chain_the_visitor_refuses() {
    use onnx_memplan::split::chain::{MAX_CHAIN_NODES, Walker};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("deep.onnx");
    write_model(&deep_model(), &path);
    let (_, typed, _) = load_typed(&path, &Default::default()).unwrap();
    let graph = &typed.graph;
    let order: Vec<usize> = (0..graph.nodes.len()).collect();
    // Around step 10 (a block's Add): every chain [start, end] with start ≤ 10 ≤ end and at
    // most MAX_CHAIN_NODES nodes; the visitor refuses chains starting before step 5.
    let mut visited = Vec::new();
    let mut visit = |steps: [usize; 2], build: &dyn Fn() -> Option<Chain>| {
        assert!(build().is_some(), "{steps:?} is a chain");
        visited.push(steps);
        Ok::<bool, ()>(steps[0] >= 5)
    };
    Walker::new(graph, &order)
        .around(10, &|_| true, (MAX_CHAIN_NODES, 17), &mut visit)
        .unwrap();
    let mut expected = Vec::new();
    for end in 10..order.len() {
        for start in (0..=10).rev() {
            if end - start + 1 > MAX_CHAIN_NODES {
                break;
            }
            expected.push([start, end]);
            if start < 5 {
                break;
            }
        }
    }
    // The last steps reach MAX_CHAIN_NODES nodes from the peak, and each stops at start 4.
    assert_eq!(expected.last(), Some(&[10, 10 + MAX_CHAIN_NODES - 1]));
    assert_eq!(visited, expected);
}
