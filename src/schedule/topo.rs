//! Stable topological ordering of a graph's nodes.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use anyhow::Result;

use crate::bail_input;
use crate::ir::{Graph, NodeId};

/// A topological order of the graph's nodes that keeps the stored order wherever it is valid:
/// among ready nodes the one stored first runs first, so a topologically stored graph keeps
/// its order exactly. A cycle is an input error naming a node on it.
pub fn topological_order(graph: &Graph) -> Result<Vec<NodeId>> {
    let n = graph.nodes.len();
    let mut pending = vec![0usize; n];
    for (id, count) in pending.iter_mut().enumerate() {
        *count = producers(graph, id).len();
    }
    let mut ready: BinaryHeap<Reverse<NodeId>> =
        (0..n).filter(|&id| pending[id] == 0).map(Reverse).collect();
    let mut order = Vec::with_capacity(n);
    let mut done = vec![false; n];
    while let Some(Reverse(id)) = ready.pop() {
        order.push(id);
        done[id] = true;
        for &out in graph.nodes[id].outputs.iter().flatten() {
            for &consumer in &graph.values[out].consumers {
                pending[consumer] -= 1;
                if pending[consumer] == 0 {
                    ready.push(Reverse(consumer));
                }
            }
        }
    }
    if order.len() < n {
        let stuck = (0..n)
            .find(|&id| !done[id])
            .expect("some node is not ordered");
        bail_input!(
            "the graph has a cycle through {}",
            graph.nodes[stuck].label(stuck)
        );
    }
    Ok(order)
}

/// The distinct producer nodes a node waits for (inputs and subgraph captures), counted once
/// per edge the consumer lists record.
fn producers(graph: &Graph, id: NodeId) -> Vec<NodeId> {
    let node = &graph.nodes[id];
    let mut read: Vec<usize> = node.inputs.iter().flatten().copied().collect();
    read.extend(&node.captures);
    read.sort_unstable();
    read.dedup();
    read.iter()
        .filter_map(|&v| graph.values[v].producer)
        .collect()
}
