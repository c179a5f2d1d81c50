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
use common::typed::Typed;
use common::{compare_in_onnxruntime, float_info, float_init, int_init, model, node, write_model};
use onnx_memplan::ir::Graph;
use onnx_memplan::onnx::proto::{GraphProto, ModelProto};
use onnx_memplan::split::region::Span;
use onnx_memplan::split::rows::chain::{Recompute, RowChain, RowOrder, row_chain};
use onnx_memplan::split::rows::estimate::Held;
use onnx_memplan::split::rows::rewrite::{RowCut, rewrite_rows};
use onnx_memplan::split::rows::rules::RuleSet;
use onnx_memplan::split::rows::sink::sunk;

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

/// The row chain of `typed` (token axis 1, stored order, the plain rule set) making the
/// output of its last node.
fn last_output_chain(typed: &Typed) -> RowChain {
    last_output_chain_by(typed, RuleSet::Plain, 1)
}

/// [`last_output_chain`] by the rule set `set`, along `axis`.
fn last_output_chain_by(typed: &Typed, set: RuleSet, axis: usize) -> RowChain {
    let order = &typed.order;
    let end = order.len() - 1;
    let chain = row_chain(
        typed.graph(),
        &RowOrder::new(order),
        [0, end],
        axis,
        (17, set, Recompute::Cheap),
        &|_| true,
    );
    chain.expect("a row chain")
}

/// The names of the values the chain's nodes make, in execution order.
fn made_by(graph: &Graph, chain: &RowChain) -> Vec<String> {
    chain
        .nodes
        .iter()
        .map(|&n| {
            graph.values[graph.nodes[n].outputs[0].unwrap()]
                .name
                .clone()
        })
        .collect()
}

#[test]
fn attention_in_four_query_row_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let original = Typed::write(dir.path(), "attention.onnx", &attention(16));
    let chain = last_output_chain(&original);
    let (graph, order) = (original.graph(), &original.order);
    assert_eq!(
        made_by(graph, &chain),
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
    let rewritten = rewrite_rows(&original.proto, graph, order, &[one_cut(&chain, &blocks)]);
    assert!(rewritten.parts[0].copies.iter().all(|c| c.len() == 4));
    let split = dir.path().join("attention.split.onnx");
    write_model(&rewritten.model, &split);
    // Each block's scores are [1,2,4,16] (worked above), never the whole [1,2,16,16].
    let blocked = Typed::load(&split);
    let softmax: Vec<Vec<i64>> = blocked
        .graph()
        .nodes
        .iter()
        .filter(|n| n.op_type == "Softmax")
        .map(|n| {
            onnx_memplan::split::rules::shape_of(blocked.graph(), n.outputs[0].unwrap()).unwrap()
        })
        .collect();
    assert_eq!(softmax, vec![vec![1, 2, 4, 16]; 4]);
    assert!(blocked.graph().value("scores").is_none());

    // The rewritten model plans and verifies like any other.
    common::plans_and_matches(dir.path(), &original.path, &split);
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

/// The attention block with its mask made at run time from the input, as exporters build it
/// (a boolean "keep" matrix turned into 0 / −10000 by a Where), and read again after the
/// block (a second output, `mask_out`): mean = ReduceMean(x, axis 2) [1,S,1]; keep =
/// Unsqueeze(mean > meanᵀ) [1,1,S,S] (bool); mask = Where(keep, 0, −10000) [1,1,S,S] (float).
fn attention_with_run_time_mask(s: i64) -> ModelProto {
    let mut m = attention(s);
    let g = m.graph.as_mut().unwrap();
    g.initializer.retain(|t| t.name() != "mask");
    g.initializer.extend([
        float_init("zero", &[], &[0.0]),
        float_init("neg", &[], &[-10000.0]),
        float_init("two", &[], &[2.0]),
        int_init("axis1", &[1], &[1]),
    ]);
    let mut mean = node("ReduceMean", &["x"], &["mean"]);
    mean.attribute = vec![onnx_memplan::onnx::proto::AttributeProto {
        name: Some("axes".into()),
        r#type: Some(onnx_memplan::onnx::proto::attribute_proto::AttributeType::Ints as i32),
        ints: vec![2],
        ..Default::default()
    }];
    let mut mean_t = node("Transpose", &["mean"], &["mean_t"]);
    mean_t.attribute = vec![perm(&[0, 2, 1])];
    let mut nodes = vec![
        mean,
        mean_t,
        node("Greater", &["mean", "mean_t"], &["keep3"]),
        node("Unsqueeze", &["keep3", "axis1"], &["keep"]),
        node("Where", &["keep", "zero", "neg"], &["mask"]),
    ];
    nodes.append(&mut g.node);
    nodes.push(node("Mul", &["mask", "two"], &["mask_out"]));
    g.node = nodes;
    g.output.push(float_info("mask_out", &[1, 1, s, s]));
    m
}

/// A chain whose first nodes are shared (the mask of the test above, recomputed per block
/// while the originals stay for `mask_out`) runs its blocks from its first node of its own:
/// the candidate's first step is that node's step in the plan, not the shared Greater's
/// (which runs earlier, where it stays), so the estimate counts the steps the blocks span.
#[test]
fn a_chain_with_shared_nodes_starts_at_its_first_own_node() {
    use onnx_memplan::pipeline::{Options, ScheduleChoice, plan_model};
    use onnx_memplan::split::TrialPlan;
    use onnx_memplan::split::estimate::live_bytes;
    use onnx_memplan::split::rows::{PLAIN_RULE_SET, candidates};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("masked.onnx");
    write_model(&attention_with_run_time_mask(16), &path);
    let options = Options {
        schedule: ScheduleChoice::Stored,
        ..Options::default()
    };
    let planned = plan_model(&path, &options).unwrap();
    let live = live_bytes(&planned.table);
    let hot: Vec<usize> = (0..live.len()).collect();
    let plan = TrialPlan {
        model: planned.model.into(),
        table: planned.table.into(),
    };
    let graph = &plan.model.graph;
    let step = |name: &str| {
        let node = graph.value(name).unwrap().producer.unwrap();
        plan.table.schedule.iter().position(|&n| n == node).unwrap()
    };
    let found = candidates(
        &plan,
        (&live, &hot, Held::Steps),
        &|_| true,
        (PLAIN_RULE_SET, Recompute::Cheap, 0),
        (0, &|_| true),
    )
    .unwrap();
    let masked = found
        .iter()
        .find(|b| b.chain.shared.len() == 3 && b.chain.whole.is_empty())
        .expect("the chain through the recomputed mask's rows");
    // Stored order: the Greater (keep3) runs first, the query projection (q0) after it.
    assert!(step("keep3") < step("q0"));
    assert_eq!(masked.start, step("q0"));
}

/// Worked by hand for S = 16 and 4 blocks: the mask's Where has another reader after the
/// block (`mask_out`), so it cannot leave the graph; but it is cheap to recompute. From `keep`
/// (1 byte an element, 256 bytes) it would cost a quarter of its 1,024 bytes; through the
/// Unsqueeze and the Greater, from `mean` and `mean_t` ([1,S,1] and [1,1,S], 64 bytes each),
/// only 128 bytes. So the Greater, the Unsqueeze and the Where join the chain as shared nodes:
/// each block recomputes its 4 rows of `keep3` (axis 1 of [1,S,S]), of `keep` and of the mask
/// (axis 2 of [1,1,S,S]) from rows of `mean` and all of `mean_t`, and the originals stay for
/// `mask_out`. The chain is the 13 nodes of the plain block plus those three, first in
/// execution order.
#[test]
fn a_run_time_mask_is_recomputed_per_block_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let original = Typed::write(dir.path(), "masked.onnx", &attention_with_run_time_mask(16));
    let (graph, order) = (original.graph(), &original.order);
    let end = graph.value("y").unwrap().producer.unwrap();
    let chain = row_chain(
        graph,
        &RowOrder::new(order),
        [0, end],
        1,
        (17, RuleSet::Plain, Recompute::Cheap),
        &|_| true,
    )
    .expect("a row chain");
    let output_of = |n: usize| {
        graph.values[graph.nodes[n].outputs[0].unwrap()]
            .name
            .as_str()
    };
    let names: Vec<&str> = chain.nodes.iter().map(|&n| output_of(n)).collect();
    assert_eq!(
        names,
        [
            "keep3", "keep", "mask", "q0", "q", "q4", "qt", "scores", "scaled", "masked", "probs",
            "ctx", "ct", "merged", "o", "y"
        ]
    );
    assert_eq!(chain.axes, [1, 2, 2, 1, 1, 1, 2, 2, 2, 2, 2, 2, 1, 1, 1, 1]);
    let shared: Vec<&str> = chain.shared.iter().map(|&n| output_of(n)).collect();
    assert_eq!(shared, ["keep3", "keep", "mask"]);

    let blocks = Span::parts(16, 4);
    let rewritten = rewrite_rows(&original.proto, graph, order, &[one_cut(&chain, &blocks)]);
    let nodes = &rewritten.model.graph.as_ref().unwrap().node;
    let wheres: Vec<&onnx_memplan::onnx::proto::NodeProto> =
        nodes.iter().filter(|n| n.op_type() == "Where").collect();
    // The original (reading all of `keep`) and one copy per block (reading its copy of the
    // Unsqueeze); each copy of the Greater reads a slice of `mean`.
    assert_eq!(wheres.len(), 5);
    assert_eq!(
        wheres.iter().filter(|n| n.input[0] == "keep").count(),
        1,
        "{wheres:?}"
    );
    assert!(nodes.iter().any(|n| n.output == ["mask"]));
    let greaters: Vec<_> = nodes.iter().filter(|n| n.op_type() == "Greater").collect();
    assert_eq!(greaters.len(), 5);
    assert_eq!(greaters.iter().filter(|n| n.input[0] == "mean").count(), 1);
    let split = dir.path().join("masked.split.onnx");
    write_model(&rewritten.model, &split);
    common::plans_and_matches(dir.path(), &original.path, &split);
}

/// The attention block of [`attention`] behind a pre-norm LayerNorm: `ln` = LayerNorm(x)
/// (over the 8 features) feeds the Q, K and V projections, and the residual Add reads `x`.
fn pre_norm_attention(s: i64) -> ModelProto {
    let mut m = attention(s);
    let g = m.graph.as_mut().unwrap();
    for n in g.node.iter_mut().filter(|n| n.op_type() == "MatMul") {
        if n.input[0] == "x" {
            n.input[0] = "ln".into();
        }
    }
    g.node.insert(
        0,
        node("LayerNormalization", &["x", "gamma", "beta"], &["ln"]),
    );
    g.initializer
        .extend([weights("gamma", &[8], 6.0), weights("beta", &[8], 7.0)]);
    m
}

/// Worked by hand for S = 16 and 4 blocks. The LayerNorm's output `ln` (512 bytes) is read
/// whole by the K and V projections, so it cannot join the chain as a member. Recomputing
/// it per block reads `x` (512 bytes) and the constant scale and bias: under
/// `Recompute::Cheap` a LayerNorm is not recomputed at all (the chain is the 13 nodes of the
/// plain block, reading slices of `ln`); under `Recompute::Normalizations` `x` costs nothing,
/// since the residual Add (a member) reads it anyway, so 0 < 512 bytes and the LayerNorm
/// joins first as a shared node: each block recomputes its 4 rows of `ln` from 4 rows of `x`,
/// and the original stays for the K and V projections: 5 LayerNorms in the rewrite, the
/// original reading `x` and one per block reading its slice.
#[test]
fn a_pre_norm_layer_norm_is_recomputed_per_block_under_the_wider_policy() {
    let dir = tempfile::tempdir().unwrap();
    let original = Typed::write(dir.path(), "prenorm.onnx", &pre_norm_attention(16));
    let (graph, order) = (original.graph(), &original.order);
    let end = graph.value("y").unwrap().producer.unwrap();
    let chain_with = |recompute| {
        row_chain(
            graph,
            &RowOrder::new(order),
            [0, end],
            1,
            (17, RuleSet::Plain, recompute),
            &|_| true,
        )
        .expect("a row chain")
    };
    let plain = [
        "q0", "q", "q4", "qt", "scores", "scaled", "masked", "probs", "ctx", "ct", "merged", "o",
        "y",
    ];
    assert_eq!(made_by(graph, &chain_with(Recompute::Cheap)), plain);
    let chain = chain_with(Recompute::Normalizations);
    let mut wider = vec!["ln"];
    wider.extend(plain);
    assert_eq!(made_by(graph, &chain), wider);
    assert_eq!(chain.axes, [1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 1, 1, 1, 1]);
    assert_eq!(chain.shared, [graph.value("ln").unwrap().producer.unwrap()]);

    let blocks = Span::parts(16, 4);
    let rewritten = rewrite_rows(&original.proto, graph, order, &[one_cut(&chain, &blocks)]);
    let nodes = &rewritten.model.graph.as_ref().unwrap().node;
    let norms: Vec<_> = nodes
        .iter()
        .filter(|n| n.op_type() == "LayerNormalization")
        .collect();
    assert_eq!(norms.len(), 5);
    assert_eq!(norms.iter().filter(|n| n.input[0] == "x").count(), 1);
    let split = dir.path().join("prenorm.split.onnx");
    write_model(&rewritten.model, &split);
    common::plans_and_matches(dir.path(), &original.path, &split);
}

/// [`pre_norm_attention`] with its layer input made at run time (`x = Relu(inp)`) and its
/// output read once more (`out = Neg(y)`), so both are intermediates.
fn pre_norm_layer_inside(s: i64) -> ModelProto {
    let mut m = pre_norm_attention(s);
    let g = m.graph.as_mut().unwrap();
    g.node.insert(0, node("Relu", &["inp"], &["x"]));
    g.node.push(node("Neg", &["y"], &["out"]));
    g.input = vec![float_info("inp", &[1, s, 8])];
    g.output = vec![float_info("out", &[1, s, 8])];
    m
}

/// Worked by hand for S = 16 and 4 blocks of 4 rows, the plain chain making `y` (13 nodes,
/// reading rows of `ln` and of `x`): with blocks allowed to write over their input
/// (`blockwise`, alignment 64), each of `x` and `ln` [1,16,8] (512 bytes, 32 a row) is cut
/// by one Split into 4 parts of 128 bytes starting at 0, 128, 256 and 384 (multiples of 64),
/// each a view of it. Block b's residual Add `y_b = o_b + x_b` is the last reader of x_b, and
/// `x` itself was last read by its Split, so y_b overwrites x_b; the Concat making `y` then
/// takes those bytes: `y` at `x`'s offset, y_b a slice of it 128·b bytes in. The table
/// verifies and the rewrite matches onnxruntime. Tampered so that part r2 of `x` claims the
/// bytes of part r1, the verifier refuses the overwrite of r1 (a tensor holding its bytes is
/// read later).
#[test]
fn blocks_write_their_output_over_the_rows_of_their_input() {
    let dir = tempfile::tempdir().unwrap();
    let original = Typed::write(dir.path(), "layer.onnx", &pre_norm_layer_inside(16));
    let (graph, order) = (original.graph(), &original.order);
    let end = graph.value("y").unwrap().producer.unwrap();
    let rules = (17, RuleSet::Plain, Recompute::Cheap);
    let chain = row_chain(graph, &RowOrder::new(order), [0, end], 1, rules, &|_| true).unwrap();
    assert_eq!(chain.nodes.len(), 13);
    let blocks = Span::parts(16, 4);
    let cut = RowCut {
        blockwise: Some(64),
        ..one_cut(&chain, &blocks)
    };
    let rewritten = rewrite_rows(&original.proto, graph, order, &[cut]);
    let nodes = &rewritten.model.graph.as_ref().unwrap().node;
    let splits: Vec<&str> = nodes
        .iter()
        .filter(|n| n.op_type() == "Split")
        .map(|n| n.input[0].as_str())
        .collect();
    assert_eq!(splits, ["ln", "x"]);
    let split = dir.path().join("layer.split.onnx");
    write_model(&rewritten.model, &split);

    let options = onnx_memplan::pipeline::Options {
        liveness: onnx_memplan::liveness::LivenessOptions {
            blockwise: true,
            ..Default::default()
        },
        ..Default::default()
    };
    let planned = onnx_memplan::pipeline::plan_model(&split, &options).unwrap();
    let table = &planned.table;
    let entry = |name: &str| table.tensors.iter().find(|t| t.name == name).unwrap();
    assert_eq!(entry("y").offset, entry("x").offset);
    for b in 0..4 {
        let y_b = entry(&format!("y/split1/r{b}"));
        let x_b = format!("x/split1/r{b}/part");
        assert_eq!(y_b.inplace_of.as_deref(), Some(x_b.as_str()));
        assert_eq!(y_b.alias_of.as_deref(), Some("y"));
        assert_eq!(y_b.alias_offset, Some(128 * b as u64));
        assert_eq!(entry(&x_b).alias_of.as_deref(), Some("x"));
    }
    let problems = onnx_memplan::pipeline::verify_table(&split, table).unwrap();
    assert!(problems.is_empty(), "{problems:?}");
    compare_in_onnxruntime(&original.path, &split);

    let mut tampered = table.clone();
    let r1 = entry("x/split1/r1/part").offset;
    for t in &mut tampered.tensors {
        if t.name == "x/split1/r2/part" {
            (t.offset, t.alias_offset) = (r1, Some(128));
        }
    }
    let path = dir.path().join("tampered.json");
    std::fs::write(&path, serde_json::to_string(&tampered).unwrap()).unwrap();
    common::assert_verify_refuses(&split, &path, "which holds the same bytes");
}

/// The order a rewrite starts from, worked by hand on x [1,16,8] (512 B) and the stored order
/// b = x·2 (512 B), m = ReduceMean(x, axis 2) ([1,16,1], 64 B), y = b + m: b frees nothing
/// (x is read again by m), so it sinks to just before its reader y; m frees x (512 B) and
/// makes 64 B, so it stays. Sunk: m, b, y, and x dies before b is made (peak 576 B where the
/// stored order holds x, b and m at once: 1088 B).
#[test]
fn nodes_that_free_nothing_sink_to_their_reader() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sink.onnx");
    let mut mean = node("ReduceMean", &["x"], &["m"]);
    mean.attribute = vec![onnx_memplan::onnx::proto::AttributeProto {
        name: Some("axes".into()),
        r#type: Some(onnx_memplan::onnx::proto::attribute_proto::AttributeType::Ints as i32),
        ints: vec![2],
        ..Default::default()
    }];
    let m = model(GraphProto {
        name: Some("sink".into()),
        node: vec![
            node("Mul", &["x", "two"], &["b"]),
            mean,
            node("Add", &["b", "m"], &["y"]),
        ],
        input: vec![float_info("x", &[1, 16, 8])],
        output: vec![float_info("y", &[1, 16, 8])],
        initializer: vec![float_init("two", &[], &[2.0])],
        ..Default::default()
    });
    write_model(&m, &path);
    assert_eq!(sunk(Typed::load(&path).graph(), &[0, 1, 2]), [1, 0, 2]);
}

/// The attention block as onnxruntime's extended optimisations leave it: the scores
/// `MatMul` + `Div 2` fused into `FusedMatMul(qt, k, transB = 1, alpha = 0.5)` reading K as
/// [1,2,S,4] (not transposed: transB swaps its last two axes).
fn fused_attention(s: i64) -> ModelProto {
    let mut m = attention(s);
    m.opset_import
        .push(onnx_memplan::onnx::proto::OperatorSetIdProto {
            domain: Some("com.microsoft".into()),
            version: Some(1),
        });
    let g = m.graph.as_mut().unwrap();
    let ms = |mut n: onnx_memplan::onnx::proto::NodeProto| {
        n.domain = Some("com.microsoft".into());
        n
    };
    let attr = |name: &str, r#type, i: Option<i64>, f: Option<f32>| {
        onnx_memplan::onnx::proto::AttributeProto {
            name: Some(name.into()),
            r#type: Some(r#type as i32),
            i,
            f,
            ..Default::default()
        }
    };
    use onnx_memplan::onnx::proto::attribute_proto::AttributeType;
    for n in &mut g.node {
        if n.output[0] == "kt" {
            // K heads-first, rows kept: [1,2,S,4].
            n.attribute = vec![perm(&[0, 2, 1, 3])];
        }
    }
    let scores = g.node.iter().position(|n| n.output[0] == "scores").unwrap();
    let mut fused = ms(node("FusedMatMul", &["qt", "kt"], &["scaled"]));
    fused.attribute = vec![
        attr("transB", AttributeType::Int, Some(1), None),
        attr("alpha", AttributeType::Float, None, Some(0.5)),
    ];
    g.node[scores] = fused;
    g.node
        .retain(|n| n.output[0] != "scaled" || n.op_type() == "FusedMatMul");
    g.initializer.retain(|t| t.name() != "scale");
    m
}

/// The fused form blocks like the exporter's: the chain making Y along the token axis holds
/// the FusedMatMul (query axis 2; K read whole), 12 nodes (the Div is gone); 4 blocks of 4
/// query rows match the unsplit model in onnxruntime, and each block's scores are [1,2,4,16].
#[test]
fn onnxruntime_fused_attention_in_four_query_row_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let original = Typed::write(dir.path(), "fused.onnx", &fused_attention(16));
    let chain = last_output_chain(&original);
    let (graph, order) = (original.graph(), &original.order);
    let ops = common::op_types(graph, &chain.nodes);
    assert_eq!(
        ops,
        [
            "MatMul",
            "Add",
            "Reshape",
            "Transpose",
            "FusedMatMul",
            "Add",
            "Softmax",
            "MatMul",
            "Transpose",
            "Reshape",
            "MatMul",
            "Add"
        ]
    );
    assert_eq!(chain.axes, [1, 1, 1, 2, 2, 2, 2, 2, 1, 1, 1, 1]);
    let rewritten = rewrite_rows(
        &original.proto,
        graph,
        order,
        &[one_cut(&chain, &Span::parts(16, 4))],
    );
    let split = dir.path().join("fused.split.onnx");
    write_model(&rewritten.model, &split);
    let blocked = Typed::load(&split);
    let scores: Vec<Vec<i64>> = blocked
        .graph()
        .nodes
        .iter()
        .filter(|n| n.op_type == "FusedMatMul")
        .map(|n| {
            onnx_memplan::split::rules::shape_of(blocked.graph(), n.outputs[0].unwrap()).unwrap()
        })
        .collect();
    assert_eq!(scores, vec![vec![1, 2, 4, 16]; 4]);
    common::plans_and_matches(dir.path(), &original.path, &split);
}

/// A FusedMatMul that transposes A (or moves A's first axis behind its batch axes) reads A's
/// columns for output rows: it ends a row chain rather than joining it. At 4 tokens A's last
/// axis has the token axis's extent (4), so only the rule, not the extent check, keeps it out.
#[test]
fn fused_matmul_transposing_a_is_not_row_blocked() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("transa.onnx");
    let mut m = fused_attention(4);
    let g = m.graph.as_mut().unwrap();
    for n in &mut g.node {
        if n.op_type() == "FusedMatMul" {
            n.attribute.push(onnx_memplan::onnx::proto::AttributeProto {
                name: Some("transA".into()),
                r#type: Some(onnx_memplan::onnx::proto::attribute_proto::AttributeType::Int as i32),
                i: Some(1),
                ..Default::default()
            });
            // A is now read transposed: feed it Q heads-first with rows last, [1,2,4,S].
            n.input[0] = "qtt".into();
        }
    }
    let mut qtt = node("Transpose", &["q4"], &["qtt"]);
    qtt.attribute = vec![perm(&[0, 2, 3, 1])];
    let at = g.node.iter().position(|n| n.output[0] == "qt").unwrap();
    g.node.insert(at + 1, qtt);
    write_model(&m, &path);
    let typed = Typed::load(&path);
    let chain = last_output_chain(&typed);
    let graph = typed.graph();
    assert!(
        chain
            .nodes
            .iter()
            .all(|&n| graph.nodes[n].op_type != "FusedMatMul"),
        "{:?}",
        chain.nodes
    );
}

/// The attention block in the form torch's scaled-dot-product-attention export takes (seen in
/// `bert_sdpa`): Q and Kᵀ each scaled by a Mul (√ of 1/√d: 0.7071 for d = 4) before the
/// scores, and the probabilities guarded by `Where(IsNaN(p), 0, p)` before ·V. Q also passes
/// through an `Unsqueeze` / `Squeeze` pair (axes 2, as packed projections are unpacked). Made
/// from [`attention`] node by node.
fn sdpa_attention(s: i64) -> ModelProto {
    let mut m = attention(s);
    let g = m.graph.as_mut().unwrap();
    let mut nodes = Vec::new();
    for n in std::mem::take(&mut g.node) {
        match n.output[0].as_str() {
            "q" => nodes.extend([
                n,
                node("Unsqueeze", &["q", "axis2"], &["qu"]),
                node("Squeeze", &["qu", "axis2"], &["qs"]),
            ]),
            "q4" => nodes.push(node("Reshape", &["qs", "heads"], &["q4"])),
            "qt" => nodes.extend([n, node("Mul", &["qt", "root"], &["qm"])]),
            "kt" => nodes.extend([n, node("Mul", &["kt", "root"], &["ks"])]),
            "scores" => nodes.push(node("MatMul", &["qm", "ks"], &["scores"])),
            // Q and K are scaled instead.
            "scaled" => {}
            "masked" => nodes.push(node("Add", &["scores", "mask"], &["masked"])),
            "probs" => nodes.extend([
                n,
                node("IsNaN", &["probs"], &["nan"]),
                node("Where", &["nan", "zero", "probs"], &["safe"]),
            ]),
            "ctx" => nodes.push(node("MatMul", &["safe", "vt"], &["ctx"])),
            _ => nodes.push(n),
        }
    }
    g.node = nodes;
    g.initializer.retain(|t| t.name.as_deref() != Some("scale"));
    g.initializer.extend([
        float_init("root", &[], &[0.70710677]),
        float_init("zero", &[], &[0.0]),
        int_init("axis2", &[1], &[2]),
    ]);
    m
}

/// Worked by hand for S = 16 and 4 blocks: the chain making Y along the token axis holds the
/// Q path (projection, bias, Unsqueeze and Squeeze on axis 1 of [1,S,·] and [1,S,1,8],
/// Reshape, Transpose, the Mul), the scores, mask Add, Softmax, IsNaN and Where (all on the
/// query axis 2), ·V, and the way back: 17 nodes. The K and V paths stay outside (read
/// whole). The 4 blocks match the unsplit model in onnxruntime.
#[test]
fn the_sdpa_export_form_in_four_query_row_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let original = Typed::write(dir.path(), "sdpa.onnx", &sdpa_attention(16));
    let chain = last_output_chain(&original);
    let (graph, order) = (original.graph(), &original.order);
    assert_eq!(
        made_by(graph, &chain),
        [
            "q0", "q", "qu", "qs", "q4", "qt", "qm", "scores", "masked", "probs", "nan", "safe",
            "ctx", "ct", "merged", "o", "y"
        ]
    );
    assert_eq!(
        chain.axes,
        [1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 1, 1, 1, 1]
    );
    let rewritten = rewrite_rows(
        &original.proto,
        graph,
        order,
        &[one_cut(&chain, &Span::parts(16, 4))],
    );
    assert!(rewritten.parts[0].copies.iter().all(|c| c.len() == 4));
    let split = dir.path().join("sdpa.split.onnx");
    write_model(&rewritten.model, &split);
    common::plans_and_matches(dir.path(), &original.path, &split);
}

/// `layers` attention blocks one after the other (block l reads block l−1's output), sharing
/// the weights: each block's scores set an equal peak.
fn attention_stack(s: i64, layers: usize) -> ModelProto {
    let mut m = attention(s);
    let g = m.graph.as_mut().unwrap();
    let block = std::mem::take(&mut g.node);
    let shared: Vec<String> = g.initializer.iter().map(|t| t.name().to_string()).collect();
    for l in 0..layers {
        let rename = |name: &String| match name.as_str() {
            "x" if l == 0 => name.clone(),
            "x" => format!("y{}", l - 1),
            "y" if l + 1 == layers => name.clone(),
            _ if shared.contains(name) => name.clone(),
            _ => format!("{name}{l}"),
        };
        g.node.extend(block.iter().map(|n| {
            let mut n = n.clone();
            n.name = Some(format!("{}{l}", n.name()));
            n.input = n.input.iter().map(rename).collect();
            n.output = n.output.iter().map(rename).collect();
            n
        }));
    }
    m
}

/// Repeated layers cut alike are rewritten at once: two attention blocks at 16 tokens, each
/// one's chain (grown back from its output along the token axis) cut into 4 blocks of 4 rows
/// in one rewrite. The chains are disjoint, each node gets 4 copies, every copy of layer 0
/// runs before the first of layer 1, and the model matches the unsplit one in onnxruntime.
#[test]
fn two_layers_blocked_in_one_rewrite_match_onnxruntime() {
    let dir = tempfile::tempdir().unwrap();
    let original = Typed::write(dir.path(), "stack2.onnx", &attention_stack(16, 2));
    let (graph, order) = (original.graph(), &original.order);
    let making = |name: &str| {
        order
            .iter()
            .position(|&n| graph.nodes[n].outputs[0].is_some_and(|v| graph.values[v].name == name))
            .expect("the layer output is made")
    };
    let chains: Vec<RowChain> = ["y0", "y"]
        .iter()
        .map(|out| {
            row_chain(
                graph,
                &RowOrder::new(order),
                [0, making(out)],
                1,
                (17, RuleSet::Plain, Recompute::Cheap),
                &|_| true,
            )
            .unwrap()
        })
        .collect();
    assert!(chains[0].nodes.iter().all(|n| !chains[1].nodes.contains(n)));
    assert_eq!(chains[0].nodes.len(), chains[1].nodes.len());
    let blocks = Span::parts(16, 4);
    let cuts: Vec<RowCut> = chains
        .iter()
        .enumerate()
        .map(|(k, chain)| RowCut {
            chain,
            blocks: &blocks,
            label: format!("split{}", k + 1),
            blockwise: None,
            keep: 0,
        })
        .collect();
    let rewritten = rewrite_rows(&original.proto, graph, order, &cuts);
    assert_eq!(rewritten.parts.len(), 2);
    for parts in &rewritten.parts {
        assert!(parts.copies.iter().all(|c| c.len() == 4));
    }
    let names: Vec<&str> = rewritten
        .model
        .graph
        .as_ref()
        .unwrap()
        .node
        .iter()
        .map(|n| n.name())
        .collect();
    // Each layer's copies: the positions of its first and last in the rewritten model.
    let span: Vec<(usize, usize)> = rewritten
        .parts
        .iter()
        .map(|parts| {
            let at = parts
                .copies
                .iter()
                .flatten()
                .map(|c| names.iter().position(|n| n == c).unwrap());
            (at.clone().min().unwrap(), at.max().unwrap())
        })
        .collect();
    assert!(span[0].1 < span[1].0, "{span:?}");
    let split = dir.path().join("stack2.split.onnx");
    write_model(&rewritten.model, &split);
    common::plans_and_matches(dir.path(), &original.path, &split);
}

/// Eight equal attention blocks at 128 tokens: every block's scores ([1,2,128,128], 128 KiB)
/// peak alike, so the arena drops only once all eight are blocked. The first round picks the
/// best of its trials; each later round takes the first trial that cuts its block as the
/// first was cut, so the search blocks all eight within a split allowance (`--split-time
/// 1`, 30 M work units) that trying every round's candidates runs out of (it then keeps
/// nothing). Worked by hand: one row chain per block; then at most half of one block's scores
/// (64 KiB) is live, beside at most six [1,128,8] tensors (4 KiB each: the block's input,
/// K, Kᵀ, V, Vᵀ and the context being assembled), so the arena is at most 90,112 bytes.
#[test]
fn repeated_layers_are_all_blocked_within_a_small_allowance() {
    let dir = tempfile::tempdir().unwrap();
    let (path, table) = common::plan_written(
        dir.path(),
        "stack",
        &attention_stack(128, 8),
        &["--split", "auto", "--split-time", "1"],
    );
    let t = common::read_table(&table);
    let splits = t.splits.as_ref().expect("a splits section");
    let softmaxes: Vec<&str> = splits
        .chains
        .iter()
        .flat_map(|c| c.nodes.iter())
        .filter(|n| n.op_type == "Softmax")
        .map(|n| n.node.as_str())
        .collect();
    assert_eq!(softmaxes.len(), 8, "{softmaxes:?}");
    assert_eq!(splits.arena_before, 147_456);
    assert!(splits.arena_after <= 65_536 + 6 * 4_096, "{splits:?}");
    let annotated = dir.path().join("stack.memplan.onnx");
    common::assert_verifies(&annotated, &table);
    compare_in_onnxruntime(&path, &annotated);
}

/// Under `--budget`, row chains are sought around the steps whose operands exceed it, not only
/// where the live bytes peak. models/vit_tiny_batch.onnx (batch 1, 65 tokens, 4 heads of 24):
/// each layer's scores MatMul reads Q [1,4,65,24] and Kᵀ [1,4,24,65] (24,960 bytes each) and
/// writes [1,4,65,65] (67,600 bytes), 117,520 bytes at once; its live peak is elsewhere (the
/// QKV projection). A budget of 87,360 bytes (half of the 174,720-byte arena of the layer's
/// QKV step) fits only if the scores are cut into query-row blocks.
#[test]
fn budget_blocks_attention_rows_away_from_the_peak() {
    let dir = tempfile::tempdir().unwrap();
    let model = common::root().join("models/vit_tiny_batch.onnx");
    let out = dir.path().join("vit.onnx");
    let args = [
        "--dim",
        "batch=1",
        "--schedule",
        "memory",
        "--split",
        "auto",
        "--budget",
        "87360",
    ];
    let run = common::plan_to(&model, &out, &args);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let table = common::read_table(&dir.path().join("vit.memplan.json"));
    let splits = table.splits.as_ref().unwrap();
    let scores_blocked = splits.chains.iter().any(|c| {
        c.axis.is_some()
            && c.nodes
                .iter()
                .any(|n| n.node.ends_with("self_attention/MatMul_1") && n.tiles.len() > 1)
    });
    assert!(
        scores_blocked,
        "{:?}",
        splits.chains.iter().map(|c| &c.output).collect::<Vec<_>>()
    );
}

/// GPT-2's fused projection: X[1,16,8] → MatMul W[8,24] → QKV[1,16,24] → Split along axis 2
/// into Q, K, V [1,16,8], read after the chain. A Split along another axis than the blocked
/// one may end a row chain (worked by hand: block b makes QKV rows [4b, 4b+4) and its Split
/// copy parts [1,4,8] of Q, K and V), so QKV never exists whole; each part is assembled by a
/// Concat along the token axis under its own name.
#[test]
fn a_split_of_the_fused_projection_ends_a_row_chain() {
    let mut split = node("Split", &["qkv", "sizes"], &["q", "k", "v"]);
    split = common::with_int(split, "axis", 2);
    let m = model(GraphProto {
        name: Some("qkv".into()),
        node: vec![
            node("MatMul", &["x", "w"], &["qkv"]),
            split,
            node("Add", &["q", "k"], &["qk"]),
            node("Mul", &["qk", "v"], &["y"]),
        ],
        input: vec![float_info("x", &[1, 16, 8])],
        output: vec![float_info("y", &[1, 16, 8])],
        initializer: vec![
            weights("w", &[8, 24], 1.0),
            int_init("sizes", &[3], &[8, 8, 8]),
        ],
        ..Default::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let original = Typed::write(dir.path(), "qkv.onnx", &m);
    let (graph, order) = (original.graph(), &original.order);
    let chain = row_chain(
        graph,
        &RowOrder::new(order),
        [0, 1],
        1,
        (17, RuleSet::Plain, Recompute::Cheap),
        &|_| true,
    )
    .expect("MatMul and Split");
    assert_eq!(made_by(graph, &chain), ["qkv", "q"]);
    let names: Vec<&str> = chain
        .outputs
        .iter()
        .map(|&v| graph.values[v].name.as_str())
        .collect();
    assert_eq!(names, ["q", "k", "v"]);
    let blocks = Span::parts(16, 4);
    let rewritten = rewrite_rows(&original.proto, graph, order, &[one_cut(&chain, &blocks)]);
    let g = rewritten.model.graph.as_ref().unwrap();
    let splits: Vec<_> = g.node.iter().filter(|n| n.op_type() == "Split").collect();
    assert_eq!(splits.len(), 4);
    assert!(splits.iter().all(|n| n.output.len() == 3));
    for name in ["q", "k", "v"] {
        let concat = g.node.iter().find(|n| n.output == [name]).unwrap();
        assert_eq!((concat.op_type(), concat.input.len()), ("Concat", 4));
    }
    assert!(
        g.node
            .iter()
            .all(|n| !n.output.contains(&"qkv".to_string()))
    );
    let out = dir.path().join("qkv.split.onnx");
    write_model(&rewritten.model, &out);
    common::plans_and_matches(dir.path(), &original.path, &out);
}

/// Two attention blocks sharing a relative-position bias made at run time, as T5 builds it:
/// from `position_ids` [S] (int64), rel = Unsqueeze(pos, 1) − Unsqueeze(pos, 0) [S,S];
/// idx = Min(|rel|, 7); bias = Unsqueeze(Transpose(Gather(table [8,2], idx), perm 2,0,1), 0)
/// [1,2,S,S], added to both blocks' scores in place of the constant mask.
fn attention_stack_with_position_bias(s: i64) -> ModelProto {
    let mut m = attention_stack(s, 2);
    let g = m.graph.as_mut().unwrap();
    g.initializer.retain(|t| t.name() != "mask");
    let table: Vec<f32> = (0..16).map(|i| (i as f32 * 0.37).sin()).collect();
    g.initializer.extend([
        float_init("table", &[8, 2], &table),
        int_init("seven", &[], &[7]),
        int_init("axis0", &[1], &[0]),
        int_init("axis1", &[1], &[1]),
    ]);
    let mut to_heads = node("Transpose", &["gathered"], &["bias_t"]);
    to_heads.attribute = vec![perm(&[2, 0, 1])];
    let mut nodes = vec![
        node("Unsqueeze", &["position_ids", "axis1"], &["column"]),
        node("Unsqueeze", &["position_ids", "axis0"], &["row"]),
        node("Sub", &["column", "row"], &["rel"]),
        node("Abs", &["rel"], &["distance"]),
        node("Min", &["distance", "seven"], &["bucket"]),
        node("Gather", &["table", "bucket"], &["gathered"]),
        to_heads,
        node("Unsqueeze", &["bias_t", "axis0"], &["mask"]),
    ];
    nodes.append(&mut g.node);
    g.node = nodes;
    // `position_ids`: int64 (element type 7); onnxruntime's check feeds it 0, 1, …, S − 1.
    let mut positions = float_info("position_ids", &[s]);
    if let Some(onnx_memplan::onnx::proto::type_proto::Value::TensorType(t)) =
        positions.r#type.as_mut().and_then(|t| t.value.as_mut())
    {
        t.elem_type = Some(7);
    }
    g.input.push(positions);
    m
}

/// The shared bias of the model above at S = 64 ([1,2,64,64], 32 KiB, as are the scores, the
/// distances [64,64] int64 and the gathered [64,64,2]) is read by both blocks, so it is live
/// from the first block's scores to the second's. Worked by hand: recomputing it costs only
/// `position_ids` (512 bytes), so each block's row chain takes its cone (Sub, Abs, Min, Gather,
/// Transpose, Unsqueeze) and recomputes its rows of the bias per block of query rows. The
/// first cut leaves the original for the other block and lowers nothing by itself; the search
/// takes it on trial, and the second cut removes the original. Then no tensor of 32 KiB
/// exists whole, so the arena is below 32,768 bytes, and the bias `mask` is gone.
#[test]
fn a_relative_position_bias_is_recomputed_in_each_block() {
    let dir = tempfile::tempdir().unwrap();
    let (path, table) = common::plan_written(
        dir.path(),
        "bias",
        &attention_stack_with_position_bias(64),
        &["--split", "auto"],
    );
    let t = common::read_table(&table);
    let splits = t.splits.as_ref().expect("a splits section");
    let gathers = splits
        .chains
        .iter()
        .filter(|c| c.nodes.iter().any(|n| n.op_type == "Gather"))
        .count();
    assert_eq!((splits.chains.len(), gathers), (2, 2), "{splits:?}");
    assert!(splits.arena_after < 32_768, "{splits:?}");
    assert!(t.tensors.iter().all(|e| e.name != "mask"));
    let annotated = dir.path().join("bias.memplan.onnx");
    common::assert_verifies(&annotated, &table);
    compare_in_onnxruntime(&path, &annotated);
}

/// The attention block with rotary embeddings on the queries (Llama's export): `rotate_half`
/// takes the two halves of each head's last axis by Slice, negates the second and Concats them
/// back swapped; `q·cos + rotate_half(q)·sin`. The keys and values come from a grouped
/// projection: one key-value head `[1,1,S,4]` Expanded to both query heads `[1,2,S,4]`.
fn rotary_attention(s: i64) -> ModelProto {
    let positions: Vec<f32> = (0..s * 4).map(|i| (i as f32 * 0.1).cos()).collect();
    let sines: Vec<f32> = (0..s * 4).map(|i| (i as f32 * 0.1).sin()).collect();
    let transpose = |from: &str, to: &str, p: &[i64]| {
        let mut t = node("Transpose", &[from], &[to]);
        t.attribute = vec![perm(p)];
        t
    };
    let concat = common::with_int(node("Concat", &["neg", "x1"], &["rot"]), "axis", 3);
    let softmax = common::with_int(node("Softmax", &["scaled"], &["probs"]), "axis", -1);
    model(GraphProto {
        name: Some("rotary_attention".into()),
        node: vec![
            node("MatMul", &["x", "wk"], &["k"]),
            node("Reshape", &["k", "one_head"], &["k4"]),
            transpose("k4", "kh", &[0, 2, 3, 1]),
            node("Expand", &["kh", "kt_shape"], &["kt"]),
            node("MatMul", &["x", "wv"], &["v"]),
            node("Reshape", &["v", "one_head"], &["v4"]),
            transpose("v4", "vh", &[0, 2, 1, 3]),
            node("Expand", &["vh", "v_shape"], &["vt"]),
            node("MatMul", &["x", "wq"], &["q"]),
            node("Reshape", &["q", "heads"], &["q4"]),
            transpose("q4", "qt", &[0, 2, 1, 3]),
            node("Slice", &["qt", "zero", "two", "three"], &["x1"]),
            node("Slice", &["qt", "two", "four", "three"], &["x2"]),
            node("Neg", &["x2"], &["neg"]),
            concat,
            node("Mul", &["qt", "cos"], &["qc"]),
            node("Mul", &["rot", "sin"], &["rs"]),
            node("Add", &["qc", "rs"], &["qr"]),
            node("MatMul", &["qr", "kt"], &["scores"]),
            node("Div", &["scores", "scale"], &["scaled"]),
            softmax,
            node("MatMul", &["probs", "vt"], &["ctx"]),
            transpose("ctx", "ct", &[0, 2, 1, 3]),
            node("Reshape", &["ct", "merge"], &["merged"]),
            node("Add", &["merged", "x"], &["y"]),
        ],
        input: vec![float_info("x", &[1, s, 8])],
        output: vec![float_info("y", &[1, s, 8])],
        initializer: vec![
            weights("wq", &[8, 8], 1.0),
            weights("wk", &[8, 4], 2.0),
            weights("wv", &[8, 4], 3.0),
            float_init("scale", &[], &[2.0]),
            float_init("cos", &[1, 1, s, 4], &positions),
            float_init("sin", &[1, 1, s, 4], &sines),
            int_init("one_head", &[4], &[1, s, 1, 4]),
            int_init("heads", &[4], &[1, s, 2, 4]),
            int_init("merge", &[3], &[1, s, 8]),
            int_init("kt_shape", &[4], &[1, 2, 4, s]),
            int_init("v_shape", &[4], &[1, 2, s, 4]),
            int_init("zero", &[1], &[0]),
            int_init("two", &[1], &[2]),
            int_init("four", &[1], &[4]),
            int_init("three", &[1], &[3]),
        ],
        ..Default::default()
    })
}

/// Worked by hand: blocks of query rows (axis 2 of `[1,2,S,4]`) leave each head's last axis
/// whole, so both Slices of `rotate_half` (along axis 3), the Neg and the Concat (axis 3) run
/// per block, and so does everything from the query projection on: the chain making Y along
/// the token axis holds the 17 nodes of the query path. The keys and values are read whole:
/// each Expand of the one key-value head to both query heads joins, recomputed whole in every
/// block, as what it is made from (the head it expands, through a Transpose and a Reshape,
/// from the projection `[1,S,4]`) holds half its bytes; the Transposes before them hold as
/// many as they read, and stay outside. So the chain has 19 nodes, `kt` and `vt` first;
/// a chain blocking heads (axis 1 of the scores) takes the Expands too, each block expanding
/// the one key-value head to its own query head.
#[test]
fn rotary_halves_and_grouped_heads_are_row_blocked() {
    let dir = tempfile::tempdir().unwrap();
    let original = Typed::write(dir.path(), "rotary.onnx", &rotary_attention(16));
    let graph = original.graph();
    // The plain rules stop at rotate_half's Concat: the query projection stays outside.
    let plain = last_output_chain(&original);
    assert!(!made_by(graph, &plain).contains(&"rot".to_string()));
    let chain = last_output_chain_by(&original, RuleSet::Extended, 1);
    assert_eq!(
        made_by(graph, &chain),
        [
            "kt", "vt", "q", "q4", "qt", "x1", "x2", "neg", "rot", "qc", "rs", "qr", "scores",
            "scaled", "probs", "ctx", "ct", "merged", "y"
        ]
    );
    let whole: Vec<&str> = chain
        .whole
        .iter()
        .map(|&n| graph.nodes[n].outputs[0].unwrap())
        .map(|v| graph.values[v].name.as_str())
        .collect();
    assert_eq!(whole, ["kt", "vt"]);
    // By heads: the context [1,2,S,4] along axis 1 takes both Expands.
    let order = &original.order;
    let made_at = |name: &str| {
        order
            .iter()
            .position(|&n| graph.values[graph.nodes[n].outputs[0].unwrap()].name == name)
            .unwrap()
    };
    let ctx = made_at("ctx");
    let heads = row_chain(
        graph,
        &RowOrder::new(order),
        [0, ctx],
        1,
        (17, RuleSet::Extended, Recompute::Cheap),
        &|_| true,
    )
    .expect("a head chain");
    let made = made_by(graph, &heads);
    assert!(
        made.contains(&"kt".to_string()) && made.contains(&"vt".to_string()),
        "{made:?}"
    );

    let blocks = Span::parts(16, 4);
    let rewritten = rewrite_rows(&original.proto, graph, order, &[one_cut(&chain, &blocks)]);
    let split = dir.path().join("rotary.split.onnx");
    write_model(&rewritten.model, &split);
    common::plans_and_matches(dir.path(), &original.path, &split);
    let blocks = Span::parts(2, 2);
    let rewritten = rewrite_rows(&original.proto, graph, order, &[one_cut(&heads, &blocks)]);
    let by_heads = dir.path().join("rotary.heads.onnx");
    write_model(&rewritten.model, &by_heads);
    compare_in_onnxruntime(&original.path, &by_heads);
}

/// Window attention (Swin's, as onnxsim leaves it) on X[4,8,8]: 4 windows of 8 tokens. One
/// projection makes Q, K and V: MatMul [8,24] → Reshape [4,8,3,2,4] → Transpose
/// [3,4,2,8,4] → Gather 0, 1, 2 along axis 0; per window and head Q·Kᵀ → Softmax → ·V →
/// Transpose → Reshape [4,8,8]; then the output projection as a fused Gemm between Reshapes
/// that merge windows and tokens ([32,8]) and split them again; Add X → Y.
fn window_attention() -> ModelProto {
    let transpose = |from: &str, to: &str, p: &[i64]| {
        let mut t = node("Transpose", &[from], &[to]);
        t.attribute = vec![perm(p)];
        t
    };
    let gather = |index: &str, out: &str| node("Gather", &["qkv5", index], &[out]);
    model(GraphProto {
        name: Some("window_attention".into()),
        node: vec![
            node("MatMul", &["x", "wqkv"], &["qkv"]),
            node("Reshape", &["qkv", "split_heads"], &["qkv4"]),
            transpose("qkv4", "qkv5", &[2, 0, 3, 1, 4]),
            gather("i0", "q"),
            gather("i1", "k"),
            gather("i2", "v"),
            transpose("k", "kt", &[0, 1, 3, 2]),
            node("MatMul", &["q", "kt"], &["scores"]),
            common::with_int(node("Softmax", &["scores"], &["probs"]), "axis", -1),
            node("MatMul", &["probs", "v"], &["ctx"]),
            transpose("ctx", "ct", &[0, 2, 1, 3]),
            node("Reshape", &["ct", "merge_heads"], &["merged"]),
            node("Reshape", &["merged", "flat"], &["rows"]),
            node("Gemm", &["rows", "wo", "bo"], &["g"]),
            node("Reshape", &["g", "windows"], &["o"]),
            node("Add", &["o", "x"], &["y"]),
        ],
        input: vec![float_info("x", &[4, 8, 8])],
        output: vec![float_info("y", &[4, 8, 8])],
        initializer: vec![
            weights("wqkv", &[8, 24], 1.0),
            weights("wo", &[8, 8], 2.0),
            weights("bo", &[8], 3.0),
            int_init("split_heads", &[5], &[4, 8, 3, 2, 4]),
            int_init("merge_heads", &[3], &[4, 8, 8]),
            int_init("flat", &[2], &[32, 8]),
            int_init("windows", &[3], &[4, 8, 8]),
            int_init("i0", &[], &[0]),
            int_init("i1", &[], &[1]),
            int_init("i2", &[], &[2]),
        ],
        ..Default::default()
    })
}

/// Worked by hand: blocks of windows (axis 0 of Y) cut the Gemm's rows 8 at a time (a window
/// is 8 rows of [32,8]: the chain's rows are the gcd of 4 and 32, 4), and every window has its
/// own Q, K and V, so with the extended rules the three Gathers join and with them the
/// Transpose, the Reshape and the projection: all 16 nodes run per block. The plain rules stop
/// at the Reshape after the Gemm, which splits its rows: the residual Add alone is no chain.
#[test]
fn window_attention_blocked_by_windows_through_gathers_and_merges() {
    let dir = tempfile::tempdir().unwrap();
    let original = Typed::write(dir.path(), "windows.onnx", &window_attention());
    let chain = last_output_chain_by(&original, RuleSet::Extended, 0);
    let (graph, order) = (original.graph(), &original.order);
    let plain = row_chain(
        graph,
        &RowOrder::new(order),
        [0, 15],
        0,
        (17, RuleSet::Plain, Recompute::Cheap),
        &|_| true,
    );
    assert!(plain.is_none(), "{plain:?}");
    assert_eq!(chain.nodes.len(), 16);
    assert_eq!(chain.axes[0], 0);
    assert_eq!(chain.rows, 4);
    // Window 1 of 4 is rows [8, 16) of the Gemm's [32, 8].
    assert_eq!(chain.part(32, Span::new(1, 2)), Span::new(8, 16));
    let blocks = Span::parts(4, 2);
    let rewritten = rewrite_rows(&original.proto, graph, order, &[one_cut(&chain, &blocks)]);
    let split = dir.path().join("windows.split.onnx");
    write_model(&rewritten.model, &split);
    common::plans_and_matches(dir.path(), &original.path, &split);
}

/// The chain cut alone, its new names tagged `split1`.
fn one_cut<'a>(chain: &'a RowChain, blocks: &'a [Span]) -> RowCut<'a> {
    RowCut {
        chain,
        blocks,
        label: "split1".to_string(),
        blockwise: None,
        keep: 0,
    }
}
