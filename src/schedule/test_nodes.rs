//! Test support for the ordering tests' hand-built graphs.

use crate::onnx::proto::{NodeProto, ValueInfoProto};

/// A node of operator `op` in the `test` domain (no shape rule: the graphs declare every
/// value's type) reading `inputs` and writing `outputs`.
pub fn node(op: &str, inputs: &[&str], outputs: &[&str]) -> NodeProto {
    NodeProto {
        op_type: Some(op.into()),
        domain: Some("test".into()),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

/// A graph input or output named `name`, its type left to the graph's declarations.
pub fn info(name: &str) -> ValueInfoProto {
    ValueInfoProto {
        name: Some(name.into()),
        ..Default::default()
    }
}

/// Graph input x (int8) read by a QDQ unit (DequantizeLinear, Relu, QuantizeLinear: nodes
/// 0–2, making u) and by a node B outside it (node 3, making b); Add (node 4) joins u and b
/// into y. The unit's float tensors are xf and uf. Bytes, as the order searches price them:
/// x, u and b 100 each, y 1, the unit's float tensors nothing.
pub fn unit_beside_a_node() -> (crate::ir::Graph, impl Fn(crate::ir::ValueId) -> u64) {
    use crate::ir::{Graph, NodeUnit};
    use crate::onnx::proto::GraphProto;
    let mut graph = Graph::from_proto(&GraphProto {
        node: vec![
            node("DequantizeLinear", &["x"], &["xf"]),
            node("Relu", &["xf"], &["uf"]),
            node("QuantizeLinear", &["uf"], &["u"]),
            node("B", &["x"], &["b"]),
            node("Add", &["u", "b"], &["y"]),
        ],
        input: vec![info("x")],
        output: vec![info("y")],
        ..Default::default()
    })
    .expect("a valid graph");
    let internal = ["xf", "uf"].map(|name| graph.value_id(name).expect("a value"));
    graph.units = vec![NodeUnit {
        name: "Relu".into(),
        op: 1,
        nodes: vec![0, 1, 2],
        shared: Vec::new(),
        internal: internal.to_vec(),
    }];
    let names: Vec<String> = graph.values.iter().map(|v| v.name.clone()).collect();
    let bytes = move |v: crate::ir::ValueId| match names[v].as_str() {
        "xf" | "uf" => 0,
        "y" => 1,
        _ => 100,
    };
    (graph, bytes)
}
