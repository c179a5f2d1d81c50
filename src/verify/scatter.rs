//! Scattered graph inputs (`scattered_by`): the claim is checked against the graph itself, so
//! that the runtime may write the input straight into the Split's outputs before the first
//! step and keep no copy of it.

use crate::emit::Table;
use crate::ir::{Graph, NodeId, ValueKind};

/// Checks each `scattered_by` claim: the tensor is a graph input, not an output, read only by
/// one default-domain Split, as its data input; every step before that Split's is another
/// claimed scatter. Returns the scatter nodes of the valid claims.
pub fn check_scatters(
    graph: &Graph,
    table: &Table,
    steps: &[usize],
    problems: &mut Vec<String>,
) -> Vec<NodeId> {
    let claims: Vec<(&str, &str)> = table
        .tensors
        .iter()
        .filter_map(|t| Some((t.name.as_str(), t.scattered_by.as_deref()?)))
        .collect();
    let mut nodes = Vec::with_capacity(claims.len());
    for &(tensor, by) in &claims {
        let mut named = (0..graph.nodes.len()).filter(|&n| graph.nodes[n].name == by);
        let (Some(node), None) = (named.next(), named.next()) else {
            problems.push(format!(
                "tensor '{tensor}' is scattered by node '{by}', which is not exactly one node"
            ));
            continue;
        };
        let split = &graph.nodes[node];
        let reads_only_it = graph.value(tensor).is_some_and(|v| {
            v.kind == ValueKind::Input
                && !v.is_output
                && v.consumers == [node]
                && split.inputs.first() == Some(&graph.value_id(tensor))
        });
        if split.op_type != "Split" || !split.domain.is_empty() || !reads_only_it {
            problems.push(format!(
                "tensor '{tensor}' is scattered by {}, but only a graph input read by nothing \
                 but one Split can be",
                split.label(node)
            ));
            continue;
        }
        nodes.push(node);
    }
    for &node in &nodes {
        if steps[node] >= nodes.len() {
            problems.push(format!(
                "scatter {} runs at step {}, after nodes that are not scatters",
                graph.nodes[node].label(node),
                steps[node]
            ));
        }
    }
    nodes
}
