//! QDQ node units: DequantizeLinear → operator → QuantizeLinear patterns that integer
//! runtimes run as one kernel (onnxruntime's QLinear fusions, its execution providers' node
//! units). Derived on the typed graph right after inference; the scheduler keeps each unit's
//! nodes together and liveness plans only its integer tensors. The rule table (`table.rs`)
//! is shared with the verifier, which matches it on its own.

mod find;
pub mod table;

pub use find::find_units;

use crate::ir::Graph;

/// How a model with Q/DQ nodes is run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
pub enum QdqChoice {
    /// Each DQ → operator → Q pattern of the rule table runs as one integer kernel: only its
    /// integer inputs and outputs take arena bytes.
    #[default]
    Units,
    /// Every node runs as written: every tensor, float ones included, is planned.
    Literal,
}

impl QdqChoice {
    /// The table spelling: `units` or `literal`.
    pub fn name(self) -> &'static str {
        match self {
            QdqChoice::Units => "units",
            QdqChoice::Literal => "literal",
        }
    }
}

/// Sets `graph.units` for `choice`: the units found, or none when run literally.
pub fn mark(graph: &mut Graph, choice: QdqChoice) {
    graph.units = match choice {
        QdqChoice::Units => find_units(graph),
        QdqChoice::Literal => Vec::new(),
    };
    graph.unit_index = std::sync::OnceLock::new();
}

/// True when the graph has a QuantizeLinear or DequantizeLinear node.
pub fn has_qdq(graph: &Graph) -> bool {
    graph
        .nodes
        .iter()
        .any(|n| table::is_q(n) || table::is_dq(n))
}

/// The Q and DQ nodes that run literally: those outside every unit, and the shared DQs that
/// nodes outside units read too (the units hold copies of them).
pub fn literal_qdq_nodes(graph: &Graph) -> usize {
    let mut in_unit = vec![false; graph.nodes.len()];
    for u in &graph.units {
        for &n in &u.nodes {
            in_unit[n] = true;
        }
        for &dq in &u.shared {
            let out = graph.nodes[dq].outputs.first().copied().flatten();
            if out.is_some_and(|v| u.internal.contains(&v)) {
                in_unit[dq] = true;
            }
        }
    }
    graph
        .nodes
        .iter()
        .enumerate()
        .filter(|&(i, n)| !in_unit[i] && (table::is_q(n) || table::is_dq(n)))
        .count()
}

/// The summary's part for a model with Q/DQ nodes: how many units ran as one kernel and how
/// many Q/DQ nodes ran literally (empty for a model without them).
pub fn summary(table: &crate::emit::Table, graph: &Graph) -> String {
    match &table.options.qdq {
        Some(mode) => format!(
            "; qdq {mode}: {} node units, {} Q/DQ nodes run literally",
            graph.units.len(),
            literal_qdq_nodes(graph)
        ),
        None => String::new(),
    }
}
