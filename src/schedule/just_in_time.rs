//! Just-in-time reordering: every group of nodes that holds at least the bytes it frees moved
//! as late as it can go, just before its first reader. A group is a node with the producers
//! only it reads (recursively): one block of a row-split attention, from the Slice of its
//! input to its masked scores, frees its intermediates inside itself, so it is judged as a
//! whole by what it makes and what it frees of the tensors made outside it.
//!
//! An order can reach its peak once and stay lazy elsewhere: a memory-aware search keeps any
//! order whose peak is no higher, so away from the peak it may run work ahead of need (every
//! block of a row-split attention's scores before the values they multiply). When that
//! stretch later becomes the peak (another peak lowered by a rewrite), running each such
//! group just before its result is needed takes it back. The split search
//! ([`crate::split`]) plans the result when no split lowers the peak, and keeps it unless the
//! planner finds it worse.

use std::collections::{BinaryHeap, HashMap, HashSet};

use crate::ir::{Graph, NodeId, ValueId};

/// `order` with each group (a node and the producers only it reads, recursively) whose root's
/// outputs take at least the bytes the group frees (`bytes` gives a value's run-time bytes;
/// freed are the inputs made outside the group that the group reads last) moved just before
/// the root's first reader, its members arranged the same way among themselves; a node that
/// frees no more than it makes moves alone. Nodes that make graph outputs, or that nothing
/// reads, stay. Topological when `order` is.
pub fn just_in_time(
    graph: &Graph,
    order: &[NodeId],
    bytes: &dyn Fn(ValueId) -> u64,
) -> Vec<NodeId> {
    let position: HashMap<NodeId, usize> = order.iter().enumerate().map(|(k, &n)| (n, k)).collect();
    let mut last_reader: HashMap<ValueId, usize> = HashMap::new();
    for (k, &n) in order.iter().enumerate() {
        for &v in reads(graph, n) {
            last_reader.insert(v, k);
        }
    }
    let context = Context {
        graph,
        order,
        position,
        last_reader,
        bytes,
    };
    let steps: Vec<usize> = (0..order.len()).collect();
    context
        .arrange(&steps)
        .into_iter()
        .map(|k| order[k])
        .collect()
}

/// What arranging needs of the whole order.
struct Context<'a> {
    graph: &'a Graph,
    order: &'a [NodeId],
    /// Step of each node.
    position: HashMap<NodeId, usize>,
    /// Step of each value's last reader.
    last_reader: HashMap<ValueId, usize>,
    bytes: &'a dyn Fn(ValueId) -> u64,
}

impl Context<'_> {
    /// The steps `steps` (ascending) rearranged: each node or group sunk just before its first
    /// reader among `steps`.
    fn arrange(&self, steps: &[usize]) -> Vec<usize> {
        let graph = self.graph;
        let set: HashSet<usize> = steps.iter().copied().collect();
        // A node's sort key: `[step, 1]` where it stays; `key(first reader)` without its last
        // element, then `[0, step, 1]` where it sinks alone, or `[0, root's step, rank, 1]`
        // for the members of a sunk group (`rank` its place in the group's own arrangement),
        // which sorts just before that reader and after anything sunk there earlier.
        let mut keys: HashMap<usize, Vec<usize>> = HashMap::new();
        for &k in steps.iter().rev() {
            if keys.contains_key(&k) {
                continue; // a member of a later node's sunk group
            }
            let n = self.order[k];
            let outputs: Vec<ValueId> = graph.nodes[n].outputs.iter().flatten().copied().collect();
            let first_reader = outputs
                .iter()
                .flat_map(|&v| graph.values[v].consumers.iter())
                .filter_map(|c| self.position.get(c))
                .filter(|p| set.contains(p))
                .min_by_key(|&p| keys.get(p));
            let stays = outputs.iter().any(|&v| graph.values[v].is_output);
            let (Some(&p), false) = (first_reader, stays) else {
                keys.insert(k, vec![k, 1]);
                continue;
            };
            let made: u64 = outputs.iter().map(|&v| (self.bytes)(v)).sum();
            let reader = &keys[&p];
            let prefix = reader[..reader.len() - 1].to_vec();
            if made >= self.freed(&[k]) {
                keys.insert(k, [prefix, vec![0, k, 1]].concat());
                continue;
            }
            let mut members = self.group(&set, k);
            if members.len() == 1 || made < self.freed(&members) {
                keys.insert(k, vec![k, 1]);
                continue;
            }
            members.sort_unstable();
            for (rank, m) in self.arrange(&members).into_iter().enumerate() {
                keys.insert(m, [prefix.clone(), vec![0, k, rank, 1]].concat());
            }
        }
        let mut arranged = steps.to_vec();
        arranged.sort_by(|a, b| keys[a].cmp(&keys[b]));
        arranged
    }

    /// Bytes of the inputs made outside `members` (steps) that they read last.
    fn freed(&self, members: &[usize]) -> u64 {
        let inside: HashSet<usize> = members.iter().copied().collect();
        let mut values: Vec<ValueId> = members
            .iter()
            .flat_map(|&m| reads(self.graph, self.order[m]))
            .copied()
            .filter(|v| {
                let value = &self.graph.values[*v];
                let outside = value
                    .producer
                    .and_then(|q| self.position.get(&q))
                    .is_none_or(|q| !inside.contains(q));
                outside
                    && self.last_reader.get(v).is_some_and(|r| inside.contains(r))
                    && !value.is_output
            })
            .collect();
        values.sort_unstable();
        values.dedup();
        values.into_iter().map(self.bytes).sum()
    }

    /// The group of the node at step `root`: it and, recursively, the producers among `set`
    /// whose every output only the group reads (none a graph output), as steps.
    fn group(&self, set: &HashSet<usize>, root: usize) -> Vec<usize> {
        let graph = self.graph;
        let mut members = vec![root];
        let mut inside: HashSet<NodeId> = HashSet::from([self.order[root]]);
        // Latest producer first: by then every member that reads it has joined.
        let mut pending: BinaryHeap<usize> = BinaryHeap::new();
        let push = |pending: &mut BinaryHeap<usize>, n: NodeId| {
            for &v in reads(graph, n) {
                if let Some(&q) = graph.values[v].producer.and_then(|q| self.position.get(&q))
                    && set.contains(&q)
                {
                    pending.push(q);
                }
            }
        };
        push(&mut pending, self.order[root]);
        while let Some(q) = pending.pop() {
            let n = self.order[q];
            if inside.contains(&n) {
                continue;
            }
            let only_read_inside = graph.nodes[n].outputs.iter().flatten().all(|&v| {
                let value = &graph.values[v];
                !value.is_output && value.consumers.iter().all(|c| inside.contains(c))
            });
            if only_read_inside {
                inside.insert(n);
                members.push(q);
                push(&mut pending, n);
            }
        }
        members
    }
}

/// The values node `n` reads: its inputs and its subgraphs' captures.
fn reads(graph: &Graph, n: NodeId) -> impl Iterator<Item = &ValueId> {
    let node = &graph.nodes[n];
    node.inputs.iter().flatten().chain(&node.captures)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::onnx::proto::GraphProto;
    use crate::schedule::test_nodes::{info, node};

    /// Two blocks of a split attention run ahead of need: from input x (1 byte), S0 and S1
    /// make scores s0, s1 (10 bytes each), M0 and M1 their softmax m0, m1 (10 each), V the
    /// values v (5), O0 and O1 multiply each block by v into o0, o1 (1 each), J joins them.
    /// Stored order S0, M0, S1, M1, V, O0, O1, J peaks at 31 bytes (x, m0, s1, m1 at M1).
    /// Worked by hand: O1 frees m1 and v (20) for 1 byte, and so does its group (S1, M1, O1
    /// free v): it stays. O0 frees m0 alone, but its group (S0, M0, O0) frees nothing made
    /// outside it, so the group moves just before J, arranged S0, M0, O0 inside. V makes 5
    /// for x (1) and moves just before its first reader, now O1; M1 (makes 10, frees s1's
    /// 10) and S1 follow their readers there. Order S1, M1, V, O1, S0, M0, O0, J: its peak is
    /// 27 bytes (x, v, o1, s0, m0 at M0).
    #[test]
    fn blocks_run_ahead_of_need_move_just_before_their_reader() {
        let graph = Graph::from_proto(&GraphProto {
            node: vec![
                node("S", &["x"], &["s0"]),
                node("M", &["s0"], &["m0"]),
                node("S", &["x"], &["s1"]),
                node("M", &["s1"], &["m1"]),
                node("V", &["x"], &["v"]),
                node("O", &["m0", "v"], &["o0"]),
                node("O", &["m1", "v"], &["o1"]),
                node("J", &["o0", "o1"], &["y"]),
            ],
            input: vec![info("x")],
            output: vec![info("y")],
            ..Default::default()
        })
        .unwrap();
        let bytes = |v: ValueId| match graph.values[v].name.as_str() {
            "s0" | "s1" | "m0" | "m1" => 10,
            "v" => 5,
            _ => 1,
        };
        let stored: Vec<NodeId> = (0..8).collect();
        assert_eq!(
            just_in_time(&graph, &stored, &bytes),
            vec![2, 3, 4, 6, 0, 1, 5, 7]
        );
    }
}
