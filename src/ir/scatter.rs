//! Scattered graph inputs: a graph input written by the runtime straight into the outputs of
//! the one `Split` that reads it, so the whole input never sits in the arena and each part is
//! freed once its last reader has run. The split stage makes them; the model carries them in
//! its `memplan.scatter` metadata entry (a JSON array of the Split nodes' names).

use anyhow::Result;

use super::{Graph, NodeId, ValueKind};
use crate::bail_input;
use crate::onnx::proto::ModelProto;

/// The model metadata key listing the scatter nodes.
pub const SCATTER_KEY: &str = "memplan.scatter";

/// The scatter nodes `proto`'s metadata names, checked against `graph` (its lowered main
/// graph): each must be a default-domain Split, named once in the graph, whose data input is a
/// graph input that no other node reads and that is not a graph output.
pub fn scatter_nodes(proto: &ModelProto, graph: &Graph) -> Result<Vec<NodeId>> {
    let Some(entry) = proto.metadata_props.iter().find(|p| p.key() == SCATTER_KEY) else {
        return Ok(Vec::new());
    };
    let names: Vec<String> = match serde_json::from_str(entry.value()) {
        Ok(names) => names,
        Err(e) => bail_input!("model metadata '{SCATTER_KEY}' is not a JSON array of names: {e}"),
    };
    let mut nodes = Vec::with_capacity(names.len());
    for name in &names {
        let mut found = graph
            .nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| &n.name == name);
        let (Some((id, node)), None) = (found.next(), found.next()) else {
            bail_input!(
                "model metadata '{SCATTER_KEY}' names node '{name}', which is not exactly one node of the graph"
            );
        };
        let input = node.inputs.first().copied().flatten();
        let scattered = input.is_some_and(|v| {
            let value = &graph.values[v];
            value.kind == ValueKind::Input && !value.is_output && value.consumers == [id]
        });
        if node.op_type != "Split" || !node.domain.is_empty() || !scattered {
            bail_input!(
                "model metadata '{SCATTER_KEY}' names {}, which is not a Split whose input is a graph input read by nothing else",
                node.label(id)
            );
        }
        if nodes.contains(&id) {
            bail_input!("model metadata '{SCATTER_KEY}' names node '{name}' twice");
        }
        nodes.push(id);
    }
    Ok(nodes)
}

impl Graph {
    /// The scatter node reading `value`, when it is a scattered graph input (it then takes no
    /// arena bytes).
    pub fn scatter_reading(&self, value: super::ValueId) -> Option<NodeId> {
        self.scatters
            .iter()
            .copied()
            .find(|&s| self.nodes[s].inputs.first() == Some(&Some(value)))
    }
}
