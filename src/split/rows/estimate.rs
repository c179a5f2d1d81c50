//! The arena estimate of a row chain run in blocks, to rank candidates before the real planner
//! scores the best few.

use super::Blocking;
use super::chain::RowChain;
use crate::emit::Table;
use crate::ir::{Graph, ValueId};
use crate::split::estimate::{crossing, outside_peak};

/// The estimated arena once the blocking's chain (its nodes between steps `start` and `end`
/// of the plan) runs in its blocks: the peak outside those steps, or what the plan holds
/// across them (less the chain's own tensors) plus the assembled outputs plus one block's
/// working set (with a first pass, plus the rows it keeps for the second). Returns that
/// estimate and the chain's own part (without the peak outside), which ranks block counts
/// when an equal peak elsewhere hides the difference.
pub fn estimate(
    graph: &Graph,
    table: &Table,
    live: &[u64],
    blocking: &Blocking,
    [start, end]: [usize; 2],
) -> (u64, u64) {
    let chain = &blocking.chain;
    let blocks = blocking.blocks.len() as i64;
    let outside = outside_peak(live, [start, end]);
    let crossing = crossing(graph, table, &chain.nodes, [start, end]);
    let output: u64 = chain.outputs.iter().map(|&v| bytes(graph, v)).sum();
    let all: Vec<usize> = (0..chain.nodes.len()).collect();
    let working = match &chain.first_pass {
        None => block_peak(graph, chain, blocks, &all),
        Some(first) => {
            let input = graph.nodes[chain.nodes[first.quantizer]].inputs[0];
            let part = input.map_or(0, |v| bytes(graph, v).div_ceil(blocks.max(1) as u64));
            let first_pass = block_peak(graph, chain, blocks, &first.prefix);
            blocking.keep as u64 * part + first_pass.max(block_peak(graph, chain, blocks, &all))
        }
    };
    let inside = crossing + output + working;
    (outside.max(inside), inside)
}

/// The most bytes one block holds at once running the chain's nodes at indices `run` (in
/// order): its live intermediates, the slices a node reads and the node's output, each a
/// `1 / blocks` part of the whole tensor.
fn block_peak(graph: &Graph, chain: &RowChain, blocks: i64, run: &[usize]) -> u64 {
    let part = |v: ValueId| bytes(graph, v).div_ceil(blocks.max(1) as u64);
    let n = chain.nodes.len();
    let position = |v: ValueId| {
        graph.values[v]
            .producer
            .and_then(|p| chain.nodes.iter().position(|&c| c == p))
    };
    let mut last_use = vec![0; n];
    for &k in run {
        for v in graph.nodes[chain.nodes[k]].inputs.iter().flatten() {
            if let Some(j) = position(*v) {
                last_use[j] = k;
            }
        }
    }
    let (mut held, mut peak) = (0u64, 0u64);
    for &k in run {
        let id = chain.nodes[k];
        let node = &graph.nodes[id];
        let slices: u64 = chain.rules[k]
            .reads
            .iter()
            .zip(&node.inputs)
            .filter_map(|(r, v)| match (r, v) {
                (r, Some(v)) if r.rows().is_some() && position(*v).is_none() => Some(part(*v)),
                _ => None,
            })
            .sum();
        let out: u64 = node.outputs.iter().flatten().map(|&v| part(v)).sum();
        peak = peak.max(held + slices + out);
        held += out;
        for j in (0..k).filter(|&j| last_use[j] == k) {
            held -= part(graph.nodes[chain.nodes[j]].outputs[0].expect("an output"));
        }
    }
    peak
}

/// Bytes of a value with a known shape and type (0 otherwise).
pub(super) fn bytes(graph: &Graph, value: ValueId) -> u64 {
    let (Some(t), Some(s)) = (
        graph.values[value].tensor_type(),
        crate::split::rules::shape_of(graph, value),
    ) else {
        return 0;
    };
    t.dtype
        .bytes_for(s.iter().product::<i64>().max(0) as u64)
        .unwrap_or(0)
}
