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
