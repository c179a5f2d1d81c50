//! Memory-aware scheduling: candidate topological orders that lower peak live bytes, scored by
//! the caller (so the score includes in-place and alias sharing) and the best one kept.
//!
//! Candidates: the stored order; the stored order with constant subgraphs (nodes computing only
//! from weights, e.g. ConstantOfShape of a constant shape) sunk next to their first consumer; a
//! greedy list schedule that runs the ready node with the smallest net allocation; the same with
//! sinking, and with every node that holds at least twice the bytes it reads sunk as well; and
//! the frontier search of [`super::frontier`], a dynamic program over sets of executed nodes that
//! is exact while the sets stay few and a beam search beyond, with and without sinking.
//! The greedy and frontier searches run over [`Steps`] (a QDQ node unit is one step, its float
//! tensors costing nothing).

use std::collections::HashMap;

use super::frontier::{FrontierLimits, frontier_order};
use super::steps::Steps;
use super::topological_order;
use crate::ir::{Graph, NodeId, ValueId, ValueKind};

/// Limits of the frontier search: up to 256 states per level (exact on the branching inside
/// transformer blocks) and about two million moves in all (a fraction of a second), so the
/// width narrows on graphs with thousands of nodes or wide ready sets.
pub const FRONTIER_LIMITS: FrontierLimits = FrontierLimits {
    width: 256,
    min_width: 8,
    moves: 2_000_000,
};

/// Limits of the frontier search in the split search's trials: a fortieth of the moves. The
/// rewrite keeps the order planned before the cut, and the full search took most of the
/// split's time (MobileNetV2: 4.0 of 17 s in 22 trials; bert_tiny's split took 15 s, about
/// 4 s with these limits). Trials still need some search to interleave what a row rewrite
/// inserts where its chain ended: GPT-2 loses its 2.25x split without the frontier search,
/// and keeps it with these limits.
pub const TRIAL_FRONTIER_LIMITS: FrontierLimits = FrontierLimits {
    moves: 50_000,
    ..FRONTIER_LIMITS
};

/// A scored candidate order.
#[derive(Clone, Debug)]
pub struct Scheduled {
    /// The order.
    pub order: Vec<NodeId>,
    /// Which method produced it.
    pub method: &'static str,
    /// The caller's score (lower is better), e.g. the max-live bound after sharing.
    pub score: u64,
}

/// Returns the best candidate order under `score` (ties keep the earlier candidate, so the
/// stored order wins unless another is strictly better), plus every candidate's result. The
/// frontier search runs within `frontier`.
pub fn memory_order(
    graph: &Graph,
    stored: &[NodeId],
    score: &mut dyn FnMut(&[NodeId]) -> anyhow::Result<u64>,
    frontier: FrontierLimits,
) -> anyhow::Result<(Scheduled, Vec<Scheduled>)> {
    let costs = Costs::new(graph);
    let steps = Steps::new(graph);
    let mut candidates: Vec<(&'static str, Vec<NodeId>)> = vec![("stored", stored.to_vec())];
    candidates.push(("stored+sink", sink_constants(graph, &costs, stored)));
    let greedy = greedy_order(graph, &costs, &steps);
    candidates.push(("greedy+sink", sink_constants(graph, &costs, &greedy)));
    candidates.push(("greedy+sink-all", sink_allocating(graph, &costs, &greedy)));
    candidates.push(("greedy", greedy));
    let frontier = frontier_order(graph, &steps, &|v| costs.bytes[v], frontier);
    let method = if frontier.exact {
        "exact-dp"
    } else {
        "frontier-beam"
    };
    candidates.push((
        "frontier+sink",
        sink_constants(graph, &costs, &frontier.order),
    ));
    candidates.push((method, frontier.order));
    let mut results = Vec::new();
    for (method, order) in candidates {
        debug_assert_eq!(order.len(), graph.nodes.len());
        let order = super::scatters_first(graph, order);
        // Methods often agree (nothing to sink, a greedy order equal to the stored one):
        // an order already scored keeps its score.
        let score = match results.iter().find(|r: &&Scheduled| r.order == order) {
            Some(known) => known.score,
            None => score(&order)?,
        };
        results.push(Scheduled {
            order,
            method,
            score,
        });
    }
    let best = results
        .iter()
        .min_by_key(|s| s.score)
        .cloned()
        .expect("at least the stored order");
    Ok((best, results))
}

/// Per-value byte costs and per-node read lists for the memory model (no sharing):
/// constants and the float tensors inside QDQ units cost nothing, everything else its exact
/// bytes.
struct Costs {
    bytes: Vec<u64>,
    reads: Vec<Vec<ValueId>>,
    /// Nodes whose result depends only on constants.
    constant_subgraph: Vec<bool>,
    /// Nodes that hold at least twice the bytes they read (and make no graph output): moved
    /// to just before their first reader, no step holds more than before, sharing aside. A
    /// node holding as much as it reads (a row block's MatMul) stays: sunk too, the blocks of
    /// BERT encoders split by rows all ran together at their Concat, their row slices still
    /// ahead, and the split arenas came out 1.5% larger.
    allocating: Vec<bool>,
}

impl Costs {
    fn new(graph: &Graph) -> Costs {
        let mut bytes: Vec<u64> = graph
            .values
            .iter()
            .enumerate()
            .map(|(id, v)| {
                if graph.is_model_constant(id) {
                    0
                } else {
                    v.tensor_type().and_then(|t| t.bytes()).unwrap_or(0)
                }
            })
            .collect();
        for &v in graph.units.iter().flat_map(|u| &u.internal) {
            bytes[v] = 0;
        }
        let reads: Vec<Vec<ValueId>> = graph
            .nodes
            .iter()
            .map(|n| {
                let mut r: Vec<ValueId> = n.inputs.iter().flatten().copied().collect();
                r.extend(&n.captures);
                r.sort_unstable();
                r.dedup();
                r
            })
            .collect();
        let mut constant_subgraph = vec![false; graph.nodes.len()];
        if let Ok(order) = topological_order(graph) {
            for id in order {
                constant_subgraph[id] = reads[id].iter().all(|&v| {
                    let value = &graph.values[v];
                    match value.kind {
                        ValueKind::Initializer => true,
                        ValueKind::NodeOutput => {
                            value.producer.is_some_and(|p| constant_subgraph[p])
                        }
                        _ => false,
                    }
                }) && !graph.nodes[id]
                    .outputs
                    .iter()
                    .flatten()
                    .any(|&o| graph.values[o].is_output);
            }
        }
        let allocating = graph
            .nodes
            .iter()
            .enumerate()
            .map(|(id, node)| {
                let outputs = node.outputs.iter().flatten();
                let made: u64 = outputs.clone().map(|&o| bytes[o]).sum();
                let read: u64 = reads[id].iter().map(|&v| bytes[v]).sum();
                made >= 2 * read && !outputs.clone().any(|&o| graph.values[o].is_output)
            })
            .collect();
        Costs {
            bytes,
            reads,
            constant_subgraph,
            allocating,
        }
    }
}

/// `order` with every constant-subgraph node moved to just before its first consumer
/// (its own constant ancestors in front of it, in their original relative order).
fn sink_constants(graph: &Graph, costs: &Costs, order: &[NodeId]) -> Vec<NodeId> {
    sink(graph, costs, order, &costs.constant_subgraph)
}

/// `order` with every constant-subgraph node and every node that holds at least twice the
/// bytes it reads moved to just before its first consumer ([`sink`]): a greedy order runs such a
/// node as soon as it allocates less than the next node on the main path (an attention
/// mask's rows, recomputed per block of a split layer, ran at the model's start and stayed
/// live through every other layer).
fn sink_allocating(graph: &Graph, costs: &Costs, order: &[NodeId]) -> Vec<NodeId> {
    let which: Vec<bool> = (costs.constant_subgraph.iter().zip(&costs.allocating))
        .map(|(&c, &a)| c || a)
        .collect();
    sink(graph, costs, order, &which)
}

/// `order` with every node `which` marks moved to just before its first consumer (its own
/// marked ancestors in front of it, in their original relative order).
fn sink(graph: &Graph, costs: &Costs, order: &[NodeId], which: &[bool]) -> Vec<NodeId> {
    let position: HashMap<NodeId, usize> = order.iter().enumerate().map(|(i, &n)| (n, i)).collect();
    let mut emitted = vec![false; graph.nodes.len()];
    let mut out = Vec::with_capacity(order.len());
    fn emit(
        graph: &Graph,
        (costs, which): (&Costs, &[bool]),
        position: &HashMap<NodeId, usize>,
        node: NodeId,
        emitted: &mut [bool],
        out: &mut Vec<NodeId>,
    ) {
        let mut ancestors: Vec<NodeId> = costs.reads[node]
            .iter()
            .filter_map(|&v| graph.values[v].producer)
            .filter(|&p| which[p] && !emitted[p])
            .collect();
        ancestors.sort_by_key(|p| position[p]);
        ancestors.dedup();
        for p in ancestors {
            if !emitted[p] {
                emit(graph, (costs, which), position, p, emitted, out);
            }
        }
        emitted[node] = true;
        out.push(node);
    }
    for &node in order {
        if !which[node] && !emitted[node] {
            emit(graph, (costs, which), &position, node, &mut emitted, &mut out);
        }
    }
    // Marked nodes nothing reads (constant subgraphs) keep their relative order at the end.
    for &node in order {
        if !emitted[node] {
            emit(graph, (costs, which), &position, node, &mut emitted, &mut out);
        }
    }
    out
}

/// Greedy list scheduling over `steps`: among ready steps, run the one whose outputs minus
/// the inputs it frees is smallest (ties: the lower step); the order is given node by node.
fn greedy_order(graph: &Graph, costs: &Costs, steps: &Steps) -> Vec<NodeId> {
    let n = steps.nodes.len();
    let mut remaining: Vec<usize> = steps.readers.iter().map(Vec::len).collect();
    let mut pending: Vec<usize> = (0..n)
        .map(|s| {
            steps.reads[s]
                .iter()
                .filter(|&&v| graph.values[v].producer.is_some())
                .count()
        })
        .collect();
    let mut ready: Vec<usize> = (0..n).filter(|&s| pending[s] == 0).collect();
    let mut order = Vec::with_capacity(n);
    while !ready.is_empty() {
        let net = |s: usize| -> i128 {
            let alloc: u64 = steps.writes[s].iter().map(|&v| costs.bytes[v]).sum();
            let freed: u64 = steps.reads[s]
                .iter()
                .filter(|&&v| remaining[v] == 1 && !graph.values[v].is_output)
                .map(|&v| costs.bytes[v])
                .sum();
            i128::from(alloc) - i128::from(freed)
        };
        let (k, &s) = ready
            .iter()
            .enumerate()
            .min_by_key(|&(_, &s)| (net(s), s))
            .expect("ready is not empty");
        ready.swap_remove(k);
        order.push(s);
        for &v in &steps.reads[s] {
            remaining[v] = remaining[v].saturating_sub(1);
        }
        for &v in &steps.writes[s] {
            for &c in &steps.readers[v] {
                pending[c] -= 1;
                if pending[c] == 0 {
                    ready.push(c);
                }
            }
        }
    }
    steps.expand(&order)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::test_nodes::unit_beside_a_node;

    /// Worked by hand on [`unit_beside_a_node`]. Node by node, the greedy runs the
    /// DequantizeLinear and the Relu (nothing allocated), then B (it frees x: net 0) before
    /// the QuantizeLinear (net +100), splitting the unit. As steps, the unit (net +100: x is
    /// still read by B) and B (net +100) tie, the unit goes first as the lower step, then B
    /// (it frees x: net 0) and Add.
    #[test]
    fn the_greedy_runs_a_unit_as_one_step() {
        let (graph, bytes) = unit_beside_a_node();
        let costs = Costs {
            bytes: (0..graph.values.len()).map(bytes).collect(),
            reads: Vec::new(),
            constant_subgraph: vec![false; graph.nodes.len()],
            allocating: vec![false; graph.nodes.len()],
        };
        let steps = Steps::new(&graph);
        assert_eq!(greedy_order(&graph, &costs, &steps), vec![0, 1, 2, 3, 4]);
    }

    /// Graph inputs x [1, 100] and m [1, 1] (float32: 400 and 4 bytes); node 0 (E) makes
    /// e [1, 100] from m, node 1 (A) makes a [1, 1000] from x, node 2 (B) makes b [1, 10]
    /// from a, node 3 (C) makes the graph output y [1, 10] from b and e. Worked by hand:
    /// E holds at least twice what it reads (400 ≥ 2 × 4 bytes), A too (4,000 ≥ 2 × 400), B
    /// does not (40 < 2 × 4,000) and C makes a graph output. In the stored order E, A, B, C,
    /// A's step holds m, x, e and a: 4,804 bytes. Sinking moves E to just before C (A already
    /// runs just before B), so A's step holds 4,404. Nothing is a constant subgraph, so
    /// sinking constants alone keeps the order.
    #[test]
    fn a_node_holding_more_than_it_reads_sinks_to_its_reader() {
        use crate::ir::{DType, ValueType, known_shape};
        use crate::onnx::proto::GraphProto;
        use crate::schedule::test_nodes::{info, node};
        let mut graph = Graph::from_proto(&GraphProto {
            node: vec![
                node("E", &["m"], &["e"]),
                node("A", &["x"], &["a"]),
                node("B", &["a"], &["b"]),
                node("C", &["b", "e"], &["y"]),
            ],
            input: vec![info("x"), info("m")],
            output: vec![info("y")],
            ..Default::default()
        })
        .expect("a valid graph");
        for v in &mut graph.values {
            let width = match v.name.as_str() {
                "m" => 1,
                "x" | "e" => 100,
                "a" => 1000,
                _ => 10,
            };
            v.ty = Some(ValueType::tensor(DType::Float, known_shape(&[1, width])));
        }
        let costs = Costs::new(&graph);
        assert_eq!(costs.allocating, vec![true, true, false, false]);
        let stored = [0, 1, 2, 3];
        assert_eq!(sink_allocating(&graph, &costs, &stored), vec![1, 2, 0, 3]);
        assert_eq!(sink_constants(&graph, &costs, &stored), stored.to_vec());
    }
}
