//! The steps the memory-aware order searches run over: each QDQ node unit is one step (the
//! runtime runs its nodes as one integer kernel, so nothing runs between them and its float
//! tensors take no bytes), and every other node is a step of its own. Without units the steps
//! are the nodes, in the same numbering.

use crate::ir::{Graph, NodeId, ValueId};

/// A graph seen as steps: what each step reads and writes from outside it.
pub struct Steps {
    /// Nodes of each step, in the order they run. Steps are numbered by their first-met
    /// representative node (a unit's operator), so their numbering follows the nodes'.
    pub nodes: Vec<Vec<NodeId>>,
    /// Per step: the values it reads that other steps make (or that are present from the
    /// start), sorted and without repeats. A unit reading a shared DQ's output also reads
    /// that DQ's inputs, as the runtime's kernel does.
    pub reads: Vec<Vec<ValueId>>,
    /// Per step: the values its nodes make, in node order.
    pub writes: Vec<Vec<ValueId>>,
    /// Per step: the steps that make what it reads, sorted and without repeats.
    pub preds: Vec<Vec<usize>>,
    /// Per value: the steps reading it (per [`Steps::reads`]), in increasing order.
    pub readers: Vec<Vec<usize>>,
    /// Per node: its step.
    pub of: Vec<usize>,
}

impl Steps {
    /// The steps of `graph`.
    pub fn new(graph: &Graph) -> Steps {
        let n = graph.nodes.len();
        let mut unit_of: Vec<Option<usize>> = vec![None; n];
        for (u, unit) in graph.units.iter().enumerate() {
            for &m in &unit.nodes {
                unit_of[m] = Some(u);
            }
        }
        let mut of = vec![usize::MAX; n];
        let mut nodes: Vec<Vec<NodeId>> = Vec::with_capacity(n);
        for (id, unit) in unit_of.iter().enumerate() {
            let members = match *unit {
                Some(u) if graph.units[u].op == id => graph.units[u].nodes.clone(),
                Some(_) => continue,
                None => vec![id],
            };
            for &m in &members {
                of[m] = nodes.len();
            }
            nodes.push(members);
        }
        // A unit whose operator is not among its nodes (never made by the units stage) would
        // leave its members without a step: each then runs alone.
        for (id, step) in of.iter_mut().enumerate() {
            if *step == usize::MAX {
                *step = nodes.len();
                nodes.push(vec![id]);
            }
        }
        let producer_step = |v: ValueId| graph.values[v].producer.map(|p| of[p]);
        let mut reads = Vec::with_capacity(nodes.len());
        let mut writes = Vec::with_capacity(nodes.len());
        let mut preds = Vec::with_capacity(nodes.len());
        for (s, members) in nodes.iter().enumerate() {
            let mut r: Vec<ValueId> = Vec::new();
            for &m in members {
                let node = &graph.nodes[m];
                r.extend(node.inputs.iter().flatten().chain(&node.captures));
            }
            if let Some(u) = unit_of[members[0]] {
                for &dq in &graph.units[u].shared {
                    r.extend(graph.nodes[dq].inputs.iter().flatten());
                }
            }
            r.retain(|&v| producer_step(v) != Some(s));
            r.sort_unstable();
            r.dedup();
            let mut p: Vec<usize> = r.iter().filter_map(|&v| producer_step(v)).collect();
            p.sort_unstable();
            p.dedup();
            let w = members
                .iter()
                .flat_map(|&m| graph.nodes[m].outputs.iter().flatten().copied())
                .collect();
            reads.push(r);
            writes.push(w);
            preds.push(p);
        }
        let mut readers = vec![Vec::new(); graph.values.len()];
        for (s, r) in reads.iter().enumerate() {
            for &v in r {
                readers[v].push(s);
            }
        }
        Steps {
            nodes,
            reads,
            writes,
            preds,
            readers,
            of,
        }
    }

    /// The node order running `order`'s steps in turn.
    pub fn expand(&self, order: &[usize]) -> Vec<NodeId> {
        order
            .iter()
            .flat_map(|&s| self.nodes[s].iter().copied())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::test_nodes::unit_beside_a_node;

    /// Worked by hand on [`unit_beside_a_node`]: the unit (nodes 0–2) is step 0, numbered by
    /// its operator (node 1) ahead of B (node 3, step 1) and Add (node 4, step 2). The unit
    /// reads x only (its float tensors xf and uf are made and read inside it) and writes xf,
    /// uf and u; Add waits for both other steps.
    #[test]
    fn a_unit_is_one_step_reading_and_writing_only_across_its_border() {
        let (graph, _) = unit_beside_a_node();
        let steps = Steps::new(&graph);
        let id = |name: &str| graph.value_id(name).unwrap();
        assert_eq!(steps.nodes, vec![vec![0, 1, 2], vec![3], vec![4]]);
        assert_eq!(steps.of, vec![0, 0, 0, 1, 2]);
        assert_eq!(steps.reads[0], vec![id("x")]);
        assert_eq!(steps.writes[0], vec![id("xf"), id("uf"), id("u")]);
        let mut add_reads = vec![id("u"), id("b")];
        add_reads.sort_unstable();
        assert_eq!(steps.reads[2], add_reads);
        assert_eq!(steps.preds, vec![vec![], vec![], vec![0, 1]]);
        assert_eq!(steps.readers[id("x")], vec![0, 1]);
        assert!(steps.readers[id("xf")].is_empty());
        assert_eq!(steps.expand(&[1, 0, 2]), vec![3, 0, 1, 2, 4]);
    }

    /// A unit reading a shared DQ's output reads the DQ's integer input too (the runtime's
    /// kernel dequantizes it itself), and still waits for the DQ's own step.
    #[test]
    fn a_unit_reading_a_shared_dq_reads_its_integer_input() {
        let (mut graph, _) = unit_beside_a_node();
        // Node 3 (B) becomes a shared DQ of the unit: x → b, read by the unit's Relu too.
        let b = graph.value_id("b").unwrap();
        graph.nodes[1].inputs.push(Some(b));
        graph.values[b].consumers.insert(0, 1);
        graph.units[0].shared = vec![3];
        let steps = Steps::new(&graph);
        let x = graph.value_id("x").unwrap();
        let mut reads = vec![x, b];
        reads.sort_unstable();
        assert_eq!(steps.reads[0], reads);
        assert_eq!(steps.preds[0], vec![1]);
        assert_eq!(steps.readers[x], vec![0, 1]);
    }
}
