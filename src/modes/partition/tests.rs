//! A small graph marked by hand.

use super::*;
use crate::ir::{DType, Graph, ValueType, known_shape};
use crate::onnx::proto::{GraphProto, NodeProto, ValueInfoProto};

fn node(op: &str, name: &str, inputs: &[&str], outputs: &[&str]) -> NodeProto {
    NodeProto {
        op_type: Some(op.into()),
        name: Some(name.into()),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

/// x → Relu (npu) → a → Sigmoid (npu) → b → QuantizeLinear (npu) → q → DequantizeLinear
/// (cpu) → d → Softmax (cpu) → y; every value float32 [1, 8] (32 bytes) except q (uint8).
fn graph() -> Graph {
    let info = |n: &str| ValueInfoProto {
        name: Some(n.into()),
        ..Default::default()
    };
    let mut g = Graph::from_proto(&GraphProto {
        node: vec![
            node("Relu", "r", &["x"], &["a"]),
            node("Sigmoid", "s", &["a"], &["b"]),
            node("QuantizeLinear", "quant", &["b", "scale"], &["q"]),
            node("DequantizeLinear", "dq", &["q", "scale"], &["d"]),
            node("Softmax", "soft", &["d"], &["y"]),
        ],
        input: vec![info("x"), info("scale")],
        output: vec![info("y")],
        ..Default::default()
    })
    .unwrap();
    for v in &mut g.values {
        let dtype = if v.name == "q" {
            DType::Uint8
        } else {
            DType::Float
        };
        v.ty = Some(ValueType::tensor(dtype, known_shape(&[1, 8])));
    }
    g
}

/// npu (alignment 128, quantises) runs Relu, Sigmoid and QuantizeLinear; cpu (64) the rest.
/// x is fed by the host and read by the npu: shared, lcm(64, 128) = 128. b feeds only the
/// QuantizeLinear, so the npu stores it as uint8: 8 bytes. q crosses to the cpu: shared, 128.
/// d stays on the cpu: 64. y goes back to the host: shared, 64.
#[test]
fn marks_by_hand() {
    let p = Partition::parse(
        r#"{"units":[{"name":"npu","alignment":128,"quantize_outputs":true},{"name":"cpu","alignment":64}],
            "default":"cpu","op_types":{"Relu":"npu","Sigmoid":"npu","QuantizeLinear":"npu"}}"#,
    )
    .unwrap();
    let g = graph();
    let m = mark(&g, &p, 64).unwrap();
    assert_eq!(m.node_unit, vec![0, 0, 0, 1, 1]);
    assert_eq!(m.nodes_per_unit, vec![3, 2]);
    let of = |name: &str| m.values[g.value_id(name).unwrap()].clone().unwrap();
    assert_eq!(of("x").producer, Side::Host);
    assert_eq!(
        (of("x").shared_with, of("x").alignment),
        (vec![Side::Unit(0)], 128)
    );
    assert_eq!(
        (of("a").shared_with.len(), of("a").alignment, of("a").stored),
        (0, 128, None)
    );
    assert_eq!(of("b").stored, Some((DType::Uint8, 8)));
    assert_eq!(
        (of("q").shared_with, of("q").alignment),
        (vec![Side::Unit(1)], 128)
    );
    assert_eq!((of("d").shared_with.len(), of("d").alignment), (0, 64));
    assert_eq!(
        (of("y").shared_with, of("y").alignment),
        (vec![Side::Host], 64)
    );
    // scale is a graph input read by both units.
    assert_eq!(of("scale").shared_with, vec![Side::Unit(0), Side::Unit(1)]);

    let named = Partition::parse(r#"{"units":[{"name":"cpu"}],"nodes":{"nope":"cpu"}}"#).unwrap();
    assert!(mark(&g, &named, 64).unwrap_err().contains("'nope'"));
    let plain = Partition::parse(r#"{"units":[{"name":"cpu"}]}"#).unwrap();
    assert_eq!(
        mark(&g, &plain, 64).unwrap().values[g.value_id("b").unwrap()]
            .clone()
            .unwrap()
            .stored,
        None
    );
}
