//! The body of a call to a model-local function, as a typed graph: the function's nodes with
//! attribute references resolved from the call, omitted optional inputs removed, inputs typed
//! from the call site, then inferred.

use crate::infer::{InferOptions, infer_model};
use crate::ir::{Graph, Model, Node, Opsets};
use crate::onnx::proto::{AttributeProto, GraphProto, NodeProto, ValueInfoProto};

/// The typed body when `node` calls one of the model's functions (`None` when it does not).
pub fn call_body(model: &Model, graph: &Graph, node: &Node) -> Option<Result<Graph, String>> {
    let key = (node.domain.clone(), node.op_type.clone());
    let function = model.functions.get(&key)?;
    let present = |i: usize| node.inputs.get(i).copied().flatten();
    let resolve = |attr: &AttributeProto| -> Option<AttributeProto> {
        let reference = attr.ref_attr_name();
        if reference.is_empty() {
            return Some(attr.clone());
        }
        let found = node.attr(reference).or_else(|| {
            function
                .attribute_proto
                .iter()
                .find(|a| a.name() == reference)
        })?;
        Some(AttributeProto {
            name: attr.name.clone(),
            ..found.clone()
        })
    };
    let omitted: Vec<&str> = function
        .input
        .iter()
        .enumerate()
        .filter(|&(i, _)| present(i).is_none())
        .map(|(_, n)| n.as_str())
        .collect();
    let nodes = function
        .node
        .iter()
        .map(|n| {
            let mut n: NodeProto = n.clone();
            for input in &mut n.input {
                if omitted.contains(&input.as_str()) {
                    input.clear();
                }
            }
            n.attribute = n.attribute.iter().filter_map(&resolve).collect();
            n
        })
        .collect();
    let inputs = function
        .input
        .iter()
        .enumerate()
        .filter_map(|(i, name)| {
            let ty = graph.values[present(i)?].ty.as_ref().map(|t| t.to_proto());
            Some(ValueInfoProto {
                name: Some(name.clone()),
                r#type: ty,
                ..Default::default()
            })
        })
        .collect();
    let outputs = function
        .output
        .iter()
        .map(|name| ValueInfoProto {
            name: Some(name.clone()),
            ..Default::default()
        })
        .collect();
    let proto = GraphProto {
        name: function.name.clone(),
        node: nodes,
        input: inputs,
        output: outputs,
        ..Default::default()
    };
    Some((|| {
        let mut opsets = model.opsets.clone();
        opsets
            .0
            .extend(Opsets::from_proto(&function.opset_import).0);
        let body = Graph::from_proto(&proto).map_err(|e| format!("{e:#}"))?;
        let mut inner = Model {
            graph: body,
            opsets,
            functions: model.functions.clone(),
        };
        infer_model(&mut inner, &InferOptions::default()).map_err(|e| format!("{e:#}"))?;
        Ok(inner.graph)
    })())
}
