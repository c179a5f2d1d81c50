//! Keeping each QDQ node unit's nodes together: an order is turned into one where every
//! unit runs as a contiguous span (its DQs, its operator, its Qs), weight DQs included.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use anyhow::{Result, bail};

use crate::ir::{Graph, NodeId};

/// `order` with every unit of `graph.units` contiguous: a topological order of the graph
/// where each unit is contracted to one node, ties broken by the position in `order` of a
/// node (a unit by its operator's), each unit then expanded in place. Without units it is
/// `order` itself.
pub fn keep_units_together(graph: &Graph, order: &[NodeId]) -> Result<Vec<NodeId>> {
    if graph.units.is_empty() {
        return Ok(order.to_vec());
    }
    let n = graph.nodes.len();
    // The contracted node of each node: its unit's operator, or itself; and each unit's
    // members by its operator.
    let mut key: Vec<NodeId> = (0..n).collect();
    let mut members: Vec<&[NodeId]> = vec![&[]; n];
    for u in &graph.units {
        for &m in &u.nodes {
            key[m] = u.op;
        }
        members[u.op] = &u.nodes;
    }
    let position = crate::ir::steps_of(order, n);
    // Every read of a node, repeats included (a node reading a value twice waits twice).
    let reads = |node: NodeId| {
        let node = &graph.nodes[node];
        node.inputs.iter().flatten().chain(&node.captures).copied()
    };
    let mut waiting = vec![0usize; n];
    for node in 0..n {
        for v in reads(node) {
            if let Some(p) = graph.values[v].producer
                && key[p] != key[node]
            {
                waiting[key[node]] += 1;
            }
        }
    }
    let mut ready: BinaryHeap<Reverse<(usize, NodeId)>> = (0..n)
        .filter(|&k| key[k] == k && waiting[k] == 0)
        .map(|k| Reverse((position[k], k)))
        .collect();
    let mut result = Vec::with_capacity(n);
    while let Some(Reverse((_, k))) = ready.pop() {
        let nodes = match members[k].is_empty() {
            true => std::slice::from_ref(&key[k]),
            false => members[k],
        };
        result.extend_from_slice(nodes);
        for &node in nodes {
            for &out in graph.nodes[node].outputs.iter().flatten() {
                // Each reading node is listed once.
                for &c in &graph.values[out].consumers {
                    if key[c] == k {
                        continue;
                    }
                    // One decrement per read of the value by the consumer.
                    let times = reads(c).filter(|&v| v == out).count();
                    waiting[key[c]] -= times;
                    if waiting[key[c]] == 0 {
                        ready.push(Reverse((position[key[c]], key[c])));
                    }
                }
            }
        }
    }
    if result.len() != n {
        bail!("bug: the QDQ units of '{}' form a cycle", graph.name);
    }
    Ok(result)
}
