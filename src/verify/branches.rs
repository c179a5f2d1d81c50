//! The table's `branches` list matches the `If` branches that inference ruled out.

use crate::emit::Table;
use crate::ir::Graph;

/// Appends a problem when the table's branch choices differ from the re-derived ones.
pub fn check_branches(graph: &Graph, table: &Table, problems: &mut Vec<String>) {
    let mut derived = Vec::new();
    walk(graph, String::new(), &mut derived);
    let listed: Vec<(String, String)> = table
        .branches
        .iter()
        .map(|b| (b.node.clone(), b.taken.clone()))
        .collect();
    if listed != derived {
        problems.push(format!(
            "the table lists taken If branches {listed:?}, the model gives {derived:?}"
        ));
    }
}

/// (node path, taken branch) for every If with a ruled-out branch, depth first in node order.
fn walk(graph: &Graph, prefix: String, out: &mut Vec<(String, String)>) {
    for (id, node) in graph.nodes.iter().enumerate() {
        let path = match node.name.as_str() {
            "" => format!("{prefix}#{id}"),
            name => format!("{prefix}{name}"),
        };
        let open: Vec<_> = node
            .subgraphs
            .iter()
            .filter(|s| s.ruled_out.is_none())
            .collect();
        if open.len() < node.subgraphs.len()
            && let [taken] = open[..]
        {
            out.push((path.clone(), taken.attribute.clone()));
        }
        for sub in open {
            walk(&sub.graph, format!("{path}/{}/", sub.attribute), out);
        }
    }
}
