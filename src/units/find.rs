//! Matching the rule table against a typed graph: the node units of the QDQ patterns.

use super::table::{
    DqInputs, QOutputs, Types, attributes_allow, is_dq, is_q, rule_for, types_agree,
};
use crate::ir::{DType, Graph, NodeId, NodeUnit, ValueId};

/// Every node unit of the graph, in the order of their operators in the stored order. A DQ
/// read by several nodes is copied for each reader, as onnxruntime's
/// `EnsureUniqueDQForNodeUnit` does: each unit reading it holds a copy (the DQ is in its
/// `shared`), and when a reader outside every unit reads it too, the DQ also runs literally
/// for that reader, so its float output is a planned tensor rather than an internal one. A
/// unit left with no internal tensor is dropped (it would run as written), until none is.
pub fn find_units(graph: &Graph) -> Vec<NodeUnit> {
    let mut units: Vec<NodeUnit> = (0..graph.nodes.len())
        .filter_map(|n| unit_at(graph, n))
        .collect();
    loop {
        let mut is_op = vec![false; graph.nodes.len()];
        units.iter().for_each(|u| is_op[u.op] = true);
        for u in &mut units {
            let literal = |&dq: &NodeId| {
                graph.nodes[dq]
                    .outputs
                    .iter()
                    .flatten()
                    .any(|&v| graph.values[v].consumers.iter().any(|&c| !is_op[c]))
            };
            let read_literally: Vec<ValueId> = u
                .shared
                .iter()
                .filter(|dq| literal(dq))
                .filter_map(|&dq| graph.nodes[dq].outputs.first().copied().flatten())
                .collect();
            u.internal.retain(|v| !read_literally.contains(v));
        }
        let kept = units.len();
        units.retain(|u| !u.internal.is_empty());
        if units.len() == kept {
            return units;
        }
    }
}

/// The dtype of a value, when known.
fn dtype(graph: &Graph, v: ValueId) -> Option<DType> {
    graph.values[v].tensor_type().map(|t| t.dtype)
}

/// True when `v` is read by `node` alone (once or more) and is not a graph output.
fn read_only_by(graph: &Graph, v: ValueId, node: NodeId) -> bool {
    let value = &graph.values[v];
    !value.is_output && !value.consumers.is_empty() && value.consumers.iter().all(|&c| c == node)
}

/// The DQ node producing `v` (not a graph output), and whether `op` is its only reader.
fn dq_feeding(graph: &Graph, v: ValueId, op: NodeId) -> Option<(NodeId, bool)> {
    let p = graph.values[v].producer?;
    (is_dq(&graph.nodes[p]) && !graph.values[v].is_output).then(|| (p, read_only_by(graph, v, op)))
}

/// Two optional inputs hold the same value: the same tensor, or equal constants.
fn same_param(graph: &Graph, a: Option<ValueId>, b: Option<ValueId>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => {
            a == b
                || matches!(
                    (&graph.values[a].constant, &graph.values[b].constant),
                    (Some(x), Some(y)) if x == y
                )
        }
        _ => false,
    }
}

/// The unit whose operator is node `op`, when the pattern around it matches its row.
fn unit_at(graph: &Graph, op: NodeId) -> Option<NodeUnit> {
    let node = &graph.nodes[op];
    let rule = rule_for(node)?;
    if !attributes_allow(node) {
        return None;
    }
    // The DQ of each input slot.
    let fed: Vec<Option<(NodeId, bool)>> = node
        .inputs
        .iter()
        .map(|v| v.and_then(|v| dq_feeding(graph, v, op)))
        .collect();
    let dqs: Vec<Option<NodeId>> = fed.iter().map(|f| f.map(|(d, _)| d)).collect();
    let wanted = |slot: usize| match rule.dq {
        DqInputs::All => node.inputs[slot].is_some(),
        DqInputs::Slots(slots) => slots.contains(&slot),
    };
    for (slot, dq) in dqs.iter().enumerate() {
        if wanted(slot) != dq.is_some() {
            return None;
        }
    }
    if let DqInputs::Slots(slots) = rule.dq
        && slots.iter().any(|&s| s >= node.inputs.len())
    {
        return None;
    }
    let mut seen: Vec<NodeId> = dqs.iter().flatten().copied().collect();
    seen.sort_unstable();
    seen.dedup();
    if seen.len() != dqs.iter().flatten().count() {
        return None;
    }
    // The Q reading each present output.
    let outputs: Vec<ValueId> = node.outputs.iter().flatten().copied().collect();
    let qs: Vec<Option<NodeId>> = outputs
        .iter()
        .map(|&v| {
            let value = &graph.values[v];
            match value.consumers.as_slice() {
                [c] if !value.is_output
                    && is_q(&graph.nodes[*c])
                    && graph.nodes[*c].inputs.first() == Some(&Some(v)) =>
                {
                    Some(*c)
                }
                _ => None,
            }
        })
        .collect();
    let quantised = !outputs.is_empty() && qs.iter().all(Option::is_some);
    let unquantised = outputs.iter().all(|&v| {
        let value = &graph.values[v];
        !value.consumers.iter().any(|&c| is_q(&graph.nodes[c]))
    });
    let with_q = match rule.q {
        QOutputs::Required => quantised,
        QOutputs::Optional => quantised || unquantised,
    };
    if !with_q {
        return None;
    }
    let qs: Vec<NodeId> = if quantised {
        qs.into_iter().flatten().collect()
    } else {
        Vec::new()
    };
    let input_types: Vec<Option<DType>> = dqs
        .iter()
        .map(|dq| dq.and_then(|d| graph.nodes[d].inputs.first().copied().flatten()))
        .map(|v| v.and_then(|v| dtype(graph, v)))
        .collect();
    if dqs
        .iter()
        .zip(&input_types)
        .any(|(d, t)| d.is_some() && t.is_none())
    {
        return None;
    }
    let output_types: Option<Vec<DType>> = qs
        .iter()
        .map(|&q| {
            graph.nodes[q]
                .outputs
                .first()
                .copied()
                .flatten()
                .and_then(|v| dtype(graph, v))
        })
        .collect();
    if !types_agree(rule.types, &input_types, &output_types?) {
        return None;
    }
    if rule.types == Types::SameParams {
        let param = |n: NodeId, i: usize| graph.nodes[n].inputs.get(i).copied().flatten();
        let dq = dqs.iter().flatten().next().copied()?;
        if !qs.iter().all(|&q| {
            same_param(graph, param(dq, 1), param(q, 1))
                && same_param(graph, param(dq, 2), param(q, 2))
        }) {
            return None;
        }
    }
    let dq_nodes: Vec<NodeId> = fed.iter().flatten().filter(|f| f.1).map(|f| f.0).collect();
    let shared: Vec<NodeId> = fed.iter().flatten().filter(|f| !f.1).map(|f| f.0).collect();
    let mut internal: Vec<ValueId> = dq_nodes
        .iter()
        .chain(&shared)
        .filter_map(|&d| graph.nodes[d].outputs.first().copied().flatten())
        .collect();
    if !qs.is_empty() {
        internal.extend(&outputs);
    }
    let nodes = dq_nodes
        .iter()
        .copied()
        .chain(std::iter::once(op))
        .chain(qs.iter().copied())
        .collect();
    let name = if node.name.is_empty() {
        format!("#{op}")
    } else {
        node.name.clone()
    };
    Some(NodeUnit {
        name,
        op,
        nodes,
        shared,
        internal,
    })
}
