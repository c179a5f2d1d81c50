//! Copies of a model that replace its graph's nodes.

use super::proto::{GraphProto, ModelProto, NodeProto};

/// `model` with `node` as its graph's nodes, everything else copied: a rewrite that makes a
/// new node list copies none of the nodes it replaces (initializer payloads are shared, not
/// copied). A model without a graph stays without one.
pub fn with_nodes(model: &ModelProto, node: Vec<NodeProto>) -> ModelProto {
    let graph = model.graph.as_ref().map(|g| GraphProto {
        node,
        name: g.name.clone(),
        initializer: g.initializer.clone(),
        sparse_initializer: g.sparse_initializer.clone(),
        doc_string: g.doc_string.clone(),
        input: g.input.clone(),
        output: g.output.clone(),
        value_info: g.value_info.clone(),
        quantization_annotation: g.quantization_annotation.clone(),
        metadata_props: g.metadata_props.clone(),
    });
    ModelProto {
        ir_version: model.ir_version,
        opset_import: model.opset_import.clone(),
        producer_name: model.producer_name.clone(),
        producer_version: model.producer_version.clone(),
        domain: model.domain.clone(),
        model_version: model.model_version,
        doc_string: model.doc_string.clone(),
        graph,
        metadata_props: model.metadata_props.clone(),
        training_info: model.training_info.clone(),
        functions: model.functions.clone(),
        configuration: model.configuration.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_nodes_change() {
        let node = |name: &str| NodeProto {
            name: Some(name.into()),
            op_type: Some("Relu".into()),
            ..Default::default()
        };
        let model = ModelProto {
            ir_version: Some(8),
            graph: Some(GraphProto {
                node: vec![node("a"), node("b")],
                name: Some("g".into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        let swapped = with_nodes(&model, vec![node("b"), node("a")]);
        let mut expected = model.clone();
        expected.graph.as_mut().unwrap().node.reverse();
        assert_eq!(swapped, expected);
    }
}
