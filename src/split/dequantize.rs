//! DequantizeLinear nodes in split chains of a QDQ model. A QDQ unit's float tensors take no
//! arena bytes only while each DQ feeds its unit alone: a tile copy reading a Slice of a
//! DQ's float output, or the rows earlier strips made of it, is no unit any more. So before
//! the split, every DQ of a tensor made at run time that several nodes read gets one copy per
//! reader (as onnxruntime's `EnsureUniqueDQForNodeUnit` does before it forms node units), and
//! in a chain each tile recomputes its DQ over exactly the region its one reader needs,
//! reading the integer tensor (see [`recomputed`]). At a unit's other end, a tile's crop of
//! an operator's output waits for the unit's QuantizeLinear ([`crops_after_quantize`]).

use std::collections::{HashMap, HashSet};

use super::chain::{Chain, Read};
use crate::ir::Graph;
use crate::onnx::proto::{ModelProto, NodeProto};

/// Gives each reader of a DequantizeLinear of a tensor made at run time its own copy of the
/// DQ (same inputs and attributes), inserted right after the original. DQs of initializers
/// or Constant outputs (weights, read whole by every tile), DQs whose output is a graph
/// output or is read inside a subgraph, are left alone. Returns the number of copies added.
pub fn unique_readers(proto: &mut ModelProto) -> usize {
    let Some(graph) = proto.graph.as_mut() else {
        return 0;
    };
    let mut constant: HashSet<String> = graph
        .initializer
        .iter()
        .filter_map(|t| t.name.clone())
        .collect();
    for n in &graph.node {
        if n.op_type() == "Constant" {
            constant.extend(n.output.iter().cloned());
        }
    }
    let outputs: HashSet<&str> = graph.output.iter().map(|o| o.name()).collect();
    // Names read by subgraphs: such a DQ output keeps its one node.
    let mut in_subgraph: HashSet<String> = HashSet::new();
    for n in &graph.node {
        for a in &n.attribute {
            for g in a.g.as_deref().into_iter().chain(&a.graphs) {
                super::glue::names_read(g, &mut in_subgraph);
            }
        }
    }
    // Readers per tensor: (node index, input slot).
    let mut readers: HashMap<&str, Vec<(usize, usize)>> = HashMap::new();
    for (i, n) in graph.node.iter().enumerate() {
        for (s, input) in n.input.iter().enumerate() {
            if !input.is_empty() {
                readers.entry(input.as_str()).or_default().push((i, s));
            }
        }
    }
    let mut taken: HashSet<String> = graph
        .node
        .iter()
        .flat_map(|n| n.output.iter().cloned().chain(n.name.clone()))
        .chain(graph.input.iter().map(|v| v.name().to_string()))
        .chain(constant.iter().cloned())
        .collect();
    let mut fresh = |base: &str| {
        let mut k = 1;
        loop {
            let name = format!("{base}/reader{k}");
            if taken.insert(name.clone()) {
                return name;
            }
            k += 1;
        }
    };
    // Per DQ to copy: its index and, per extra reader node, the copy's node.
    let mut copies: Vec<(usize, Vec<NodeProto>)> = Vec::new();
    let mut rewired: Vec<(usize, usize, String)> = Vec::new();
    for (i, n) in graph.node.iter().enumerate() {
        let dequantize =
            n.op_type() == "DequantizeLinear" && matches!(n.domain(), "" | "com.microsoft");
        let (Some(input), [output]) = (n.input.first(), n.output.as_slice()) else {
            continue;
        };
        if !dequantize
            || constant.contains(input)
            || outputs.contains(output.as_str())
            || in_subgraph.contains(output)
        {
            continue;
        }
        let Some(reads) = readers.get(output.as_str()) else {
            continue;
        };
        let mut nodes: Vec<usize> = reads.iter().map(|r| r.0).collect();
        nodes.dedup();
        if nodes.len() < 2 {
            continue;
        }
        let mut added = Vec::new();
        for &reader in &nodes[1..] {
            let out = fresh(output);
            let name = fresh(n.name.as_deref().unwrap_or(output));
            for &(r, s) in reads.iter().filter(|r| r.0 == reader) {
                rewired.push((r, s, out.clone()));
            }
            added.push(NodeProto {
                output: vec![out],
                name: Some(name),
                ..n.clone()
            });
        }
        copies.push((i, added));
    }
    for (r, s, name) in rewired {
        graph.node[r].input[s] = name;
    }
    let count = copies.iter().map(|c| c.1.len()).sum();
    for (i, added) in copies.into_iter().rev() {
        graph.node.splice(i + 1..i + 1, added);
    }
    count
}

/// Whether chain node `k` is a DequantizeLinear that each tile recomputes over the region its
/// reader needs rather than streaming its rows: a DQ whose float output stays inside the
/// chain (not one of the chain's outputs), so its tile copy joins the reader's node unit.
pub fn recomputed(graph: &Graph, chain: &Chain, k: usize) -> bool {
    crate::units::table::is_dq(&graph.nodes[chain.nodes[k]])
        && k != chain.last
        && !chain.extra.contains(&k)
}

/// Whether chain node `k`'s copies, when they make more positions than their tile needs (an
/// upsample aligned to whole input rows), leave the crop to the QuantizeLinear that is the
/// only reader of `k`'s output, the next chain node: the crop then cuts the integers, and a
/// QDQ unit (DequantizeLinear → Resize → QuantizeLinear) keeps its float tensor inside it
/// rather than a Slice of it planned in the arena. QuantizeLinear acts per element (its
/// chains quantize by one scale, or per channel along an axis the tiles do not cut), so
/// quantizing then cropping gives the integers cropping then quantizing gives.
pub fn crops_after_quantize(graph: &Graph, chain: &Chain, k: usize) -> bool {
    let Some(&next) = chain.nodes.get(k + 1) else {
        return false;
    };
    let value = &graph.values[chain.value_of(graph, k)];
    graph.nodes[next].op_type == "QuantizeLinear"
        && chain.reads[k + 1].first() == Some(&Read::Inside(k))
        && chain.reads[k + 1].iter().filter(|r| **r == Read::Inside(k)).count() == 1
        && value.consumers == [next]
        && !value.is_output
}
