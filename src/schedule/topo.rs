//! Stable topological ordering of a graph's nodes.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use anyhow::Result;

use crate::bail_input;
use crate::ir::{Graph, NodeId};

/// A topological order of the graph's nodes that keeps the stored order wherever it is valid:
/// among ready nodes the one stored first runs first, so a topologically stored graph keeps
/// its order exactly; scatter nodes ([`Graph::scatters`]) come before every other node. A
/// cycle is an input error naming a node on it.
pub fn topological_order(graph: &Graph) -> Result<Vec<NodeId>> {
    let n = graph.nodes.len();
    let mut pending = vec![0usize; n];
    for (id, count) in pending.iter_mut().enumerate() {
        *count = producers(graph, id).len();
    }
    // Scatter nodes first (they read only graph inputs), then the stored order.
    let key = |id: NodeId| Reverse((!graph.scatters.contains(&id), id));
    let mut ready: BinaryHeap<Reverse<(bool, NodeId)>> =
        (0..n).filter(|&id| pending[id] == 0).map(key).collect();
    let mut order = Vec::with_capacity(n);
    let mut done = vec![false; n];
    while let Some(Reverse((_, id))) = ready.pop() {
        order.push(id);
        done[id] = true;
        for &out in graph.nodes[id].outputs.iter().flatten() {
            for &consumer in &graph.values[out].consumers {
                pending[consumer] -= 1;
                if pending[consumer] == 0 {
                    ready.push(key(consumer));
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

/// `order` with the scatter nodes ([`Graph::scatters`]) moved to its front, the others kept in
/// their order (a scatter reads only a graph input, so the result stays topological).
pub fn scatters_first(graph: &Graph, order: Vec<NodeId>) -> Vec<NodeId> {
    if graph.scatters.is_empty() {
        return order;
    }
    let (mut front, rest): (Vec<NodeId>, Vec<NodeId>) =
        order.into_iter().partition(|n| graph.scatters.contains(n));
    front.extend(rest);
    front
}
