//! A lowered model: the main graph, the operator sets it imports and its local functions.

use std::collections::BTreeMap;

use anyhow::Result;

use super::{Decoded, Graph};
use crate::onnx::proto::{FunctionProto, ModelProto, OperatorSetIdProto};

/// Imported operator-set versions by domain (`ai.onnx` is stored as the empty string).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Opsets(pub BTreeMap<String, i64>);

impl Opsets {
    /// Reads `opset_import` entries.
    pub fn from_proto(imports: &[OperatorSetIdProto]) -> Opsets {
        Opsets(
            imports
                .iter()
                .map(|o| (normalise_domain(o.domain()).to_string(), o.version()))
                .collect(),
        )
    }

    /// The version imported for a domain.
    pub fn version(&self, domain: &str) -> Option<i64> {
        self.0.get(normalise_domain(domain)).copied()
    }
}

/// Maps `ai.onnx` to the empty string, the default domain.
pub fn normalise_domain(domain: &str) -> &str {
    if domain == "ai.onnx" { "" } else { domain }
}

/// A model ready for the passes.
#[derive(Clone, Debug)]
pub struct Model {
    /// The main graph.
    pub graph: Graph,
    /// Imported operator sets.
    pub opsets: Opsets,
    /// Model-local functions, by (domain, name).
    pub functions: BTreeMap<(String, String), FunctionProto>,
}

impl Model {
    /// Lowers a decoded model.
    pub fn from_proto(proto: &ModelProto) -> Result<Model> {
        Model::from_proto_sharing(proto, None)
    }

    /// [`Model::from_proto`], taking its initializers' decoded values from `decoded` when
    /// given (see [`Decoded`]).
    pub fn from_proto_sharing(proto: &ModelProto, decoded: Option<&Decoded>) -> Result<Model> {
        let Some(graph) = proto.graph.as_ref() else {
            crate::bail_input!("the model has no graph");
        };
        let mut lowered = Graph::from_proto_sharing(graph, decoded)?;
        lowered.scatters = super::scatter_nodes(proto, &lowered)?;
        Ok(Model {
            graph: lowered,
            opsets: Opsets::from_proto(&proto.opset_import),
            functions: proto
                .functions
                .iter()
                .map(|f| ((f.domain().to_string(), f.name().to_string()), f.clone()))
                .collect(),
        })
    }
}
