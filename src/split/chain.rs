//! Chains: runs of consecutive steps of the schedule whose operators all have a split rule;
//! the tensors they make that are read after the run (or are graph outputs) are the chain's
//! outputs, which the tiles fill part by part.

use std::collections::HashMap;

use super::rules::{Inputs, Rule, rule_of, shape_of};
use crate::ir::{Graph, NodeId, ValueId};

/// How a chain node reads one input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Read {
    /// The input is absent (an omitted optional input).
    Absent,
    /// Read whole by every tile (weights, per-channel parameters, tensors broadcast along H
    /// and W).
    Whole,
    /// A spatial tensor made outside the chain: each tile reads a slice of it.
    Outside,
    /// A spatial tensor made by the chain node at this position of [`Chain::nodes`].
    Inside(usize),
}

/// A chain of splittable nodes, in execution order.
#[derive(Clone, Debug)]
pub struct Chain {
    /// The nodes, in execution order.
    pub nodes: Vec<NodeId>,
    /// Each node's rule.
    pub rules: Vec<Rule>,
    /// For each node, how it reads each input.
    pub reads: Vec<Vec<Read>>,
    /// Each node's output shape (NCHW).
    pub shapes: Vec<[i64; 4]>,
    /// The position in `nodes` of the node making the chain's output.
    pub last: usize,
    /// The chain's output: the last tensor it makes that is read after the chain (or is a
    /// graph output); the tile grid cuts it.
    pub output: ValueId,
    /// The positions in `nodes` of the nodes making the chain's other outputs (intermediates
    /// also read after the chain, such as a U-Net's skips), in execution order.
    pub extra: Vec<usize>,
}

/// Every chain made of the nodes at steps `[start, end]` of `order` (less `Constant` nodes)
/// with `start ≤ peak ≤ end`;
/// `allowed` says which nodes may be split (nodes made by an earlier split may not).
pub fn chains_around(
    graph: &Graph,
    order: &[NodeId],
    peak: usize,
    allowed: &dyn Fn(NodeId) -> bool,
) -> Vec<Chain> {
    chains_around_except(graph, order, peak, allowed, &|_| false)
}

/// [`chains_around`] less the chains whose first and last steps `known` names (already
/// looked at: they are not built again).
pub fn chains_around_except(
    graph: &Graph,
    order: &[NodeId],
    peak: usize,
    allowed: &dyn Fn(NodeId) -> bool,
    known: &dyn Fn([usize; 2]) -> bool,
) -> Vec<Chain> {
    let splittable = |step: usize| {
        let node = order[step];
        allowed(node) && rule_of(graph, &graph.nodes[node]).is_some()
    };
    let ok = |step: usize| splittable(step) || is_constant(graph, order[step]);
    if peak >= order.len() || !splittable(peak) {
        return Vec::new();
    }
    let mut low = peak;
    while low > 0 && ok(low - 1) {
        low -= 1;
    }
    let mut high = peak;
    while high + 1 < order.len() && ok(high + 1) {
        high += 1;
    }
    let mut found = Vec::new();
    for end in (peak..=high).filter(|&s| splittable(s)) {
        for start in (low..=peak).rev().filter(|&s| splittable(s)) {
            if known([start, end]) {
                continue;
            }
            let nodes: Vec<NodeId> = order[start..=end]
                .iter()
                .copied()
                .filter(|&n| !is_constant(graph, n))
                .collect();
            if let Some(chain) = chain_of(graph, &nodes) {
                found.push(chain);
            }
        }
    }
    found
}

/// A `Constant` node: it stays outside chains (its value is read whole), so a chain may span
/// the steps where the exporter placed one.
pub fn is_constant(graph: &Graph, node: NodeId) -> bool {
    graph.nodes[node]
        .outputs
        .iter()
        .flatten()
        .all(|&v| graph.is_model_constant(v))
}

/// The chain made of exactly these nodes, if they form one: every output rank 4 with a known
/// shape, every input spatial (sliced per tile) or readable whole, and every tensor made read
/// inside the run or after it.
pub fn chain_of(graph: &Graph, nodes: &[NodeId]) -> Option<Chain> {
    let position: HashMap<NodeId, usize> = nodes.iter().enumerate().map(|(i, &n)| (n, i)).collect();
    let mut rules = Vec::with_capacity(nodes.len());
    let mut reads = Vec::with_capacity(nodes.len());
    let mut shapes = Vec::with_capacity(nodes.len());
    let mut escaping = Vec::new();
    for (k, &id) in nodes.iter().enumerate() {
        let node = &graph.nodes[id];
        let rule = rule_of(graph, node)?;
        let out = node.outputs[0]?;
        let shape: [i64; 4] = shape_of(graph, out)?.try_into().ok()?;
        let value = &graph.values[out];
        if value.is_output || value.consumers.iter().any(|c| !position.contains_key(c)) {
            escaping.push(k);
        } else if value.consumers.is_empty() {
            return None;
        }
        let mut node_reads = Vec::with_capacity(node.inputs.len());
        for (i, input) in node.inputs.iter().enumerate() {
            let Some(v) = *input else {
                node_reads.push(Read::Absent);
                continue;
            };
            let inside = graph.values[v]
                .producer
                .and_then(|p| position.get(&p).copied());
            let spatial_role = match rule {
                Rule::Pointwise(Inputs::All) => true,
                Rule::Pointwise(Inputs::First) | Rule::Window(_) | Rule::Upsample(_) => i == 0,
            };
            let read = if !spatial_role {
                if inside.is_some() {
                    return None;
                }
                Read::Whole
            } else {
                let dims = shape_of(graph, v)?;
                let spatial = match rule {
                    Rule::Window(_) | Rule::Upsample(_) => dims.len() == 4,
                    _ => dims.len() == 4 && dims[2..] == shape[2..],
                };
                match (inside, spatial) {
                    (Some(j), true) => Read::Inside(j),
                    (None, true) => Read::Outside,
                    (None, false) if broadcasts(&dims) => Read::Whole,
                    _ => return None,
                }
            };
            node_reads.push(read);
        }
        rules.push(rule);
        reads.push(node_reads);
        shapes.push(shape);
    }
    let (&last, extra) = escaping.split_last()?;
    Some(Chain {
        nodes: nodes.to_vec(),
        rules,
        reads,
        shapes,
        last,
        output: graph.nodes[nodes[last]].outputs[0]?,
        extra: extra.to_vec(),
    })
}

/// True when a tensor of this shape broadcasts along the last two axes (H and W) of a rank-4
/// tensor: a scalar, or size 1 in both.
fn broadcasts(dims: &[i64]) -> bool {
    match dims.len() {
        0 => true,
        1 => dims[0] == 1,
        n => dims[n - 2] == 1 && dims[n - 1] == 1,
    }
}
