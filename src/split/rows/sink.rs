//! The order a row rewrite starts from: every node that holds more bytes than it frees moved
//! as late as it can go, just before its first reader.
//!
//! The memory scheduler keeps any order whose peak is no higher, so once a peak elsewhere
//! dominates, the blocks of an earlier split may have been hoisted (every block's query
//! projection computed up front). Each later rewrite inherits that order; when the later
//! splits lower the other peaks, the hoisted blocks set the peak. Sinking them back before
//! each rewrite gives the planner a stored order where each block runs when its output is
//! needed. When no rewrite lowers the peak because the hoisted blocks set it, the search
//! plans the whole model run just in time ([`just_in_time_model`]), which moves whole blocks.

use std::collections::HashMap;

use super::estimate::bytes;
use crate::ir::{Graph, NodeId, ValueId, ValueKind};
use crate::onnx::proto::ModelProto;
use crate::split::TrialPlan;

/// `proto` (planned as `planned`) with its nodes in the plan's order run just in time
/// ([`crate::schedule::just_in_time`]: groups of nodes, one block of an earlier split from its
/// Slices to its part of the output, also move as one), and that order as the planned graph's
/// nodes. When a search round finds no split that lowers the peak because the plan runs the
/// blocks of an earlier split ahead of need there, planning this order takes them back.
pub fn just_in_time_model(proto: &ModelProto, planned: &TrialPlan) -> (ModelProto, Vec<NodeId>) {
    let graph = &planned.model.graph;
    let order = crate::schedule::just_in_time(graph, &planned.table.schedule, &|v| {
        run_time_bytes(graph, v)
    });
    (
        super::super::search::in_schedule_order(proto, &order),
        order,
    )
}

/// `order` with each node whose outputs take at least the bytes of the inputs it reads last
/// moved just before its first reader (nodes that make graph outputs, or that nothing reads,
/// stay). Topological when `order` is.
pub fn sunk(graph: &Graph, order: &[NodeId]) -> Vec<NodeId> {
    let position: HashMap<NodeId, usize> = order.iter().enumerate().map(|(k, &n)| (n, k)).collect();
    let mut last_reader: HashMap<ValueId, usize> = HashMap::new();
    for (k, &n) in order.iter().enumerate() {
        for &v in graph.nodes[n].inputs.iter().flatten() {
            last_reader.insert(v, k);
        }
    }
    // A node's sort key: `[step, 1]` where it stays; `key(first reader)` without its last
    // element, then `[0, step, 1]`, where it sinks, which sorts just before that reader and
    // after anything sunk there earlier in `order`.
    let mut keys: Vec<Vec<usize>> = vec![Vec::new(); order.len()];
    for (k, &n) in order.iter().enumerate().rev() {
        let node = &graph.nodes[n];
        let outputs: Vec<ValueId> = node.outputs.iter().flatten().copied().collect();
        let made: u64 = outputs.iter().map(|&v| run_time_bytes(graph, v)).sum();
        let freed: u64 = node
            .inputs
            .iter()
            .flatten()
            .filter(|v| last_reader.get(v) == Some(&k) && !graph.values[**v].is_output)
            .map(|&v| run_time_bytes(graph, v))
            .sum();
        let first_reader = outputs
            .iter()
            .flat_map(|&v| graph.values[v].consumers.iter())
            .filter_map(|c| position.get(c))
            .min_by_key(|&&p| &keys[p]);
        let stays = outputs.iter().any(|&v| graph.values[v].is_output) || made < freed;
        keys[k] = match first_reader {
            Some(&p) if !stays => {
                let mut key = keys[p][..keys[p].len() - 1].to_vec();
                key.extend([0, k, 1]);
                key
            }
            _ => vec![k, 1],
        };
    }
    let mut steps: Vec<usize> = (0..order.len()).collect();
    steps.sort_by(|&a, &b| keys[a].cmp(&keys[b]));
    steps.into_iter().map(|k| order[k]).collect()
}

/// Bytes a value takes in the arena at run time (constants and weights take none).
fn run_time_bytes(graph: &Graph, v: ValueId) -> u64 {
    let value = &graph.values[v];
    let run_time = value.constant.is_none()
        && !value.folded
        && matches!(value.kind, ValueKind::Input | ValueKind::NodeOutput);
    if run_time { bytes(graph, v) } else { 0 }
}
