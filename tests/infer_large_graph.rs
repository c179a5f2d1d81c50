//! Inference over a 20k-node transformer-shaped graph gives every value a concrete shape
//! (its speed is measured by `cargo bench --bench infer`, not here).

mod infer_support;
use infer_support::*;

#[test]
fn twenty_thousand_node_encoder_infers_concrete_shapes() {
    let (proto, nodes, x) = transformer::encoder_model(20_000);
    assert!(nodes >= 20_000);
    let mut options = onnx_memplan::infer::InferOptions::default();
    options.dims.insert("batch".into(), 2);
    let mut model = onnx_memplan::ir::Model::from_proto(&proto).unwrap();
    onnx_memplan::infer::infer_model(&mut model, &options).unwrap();
    assert_eq!(shape(&model, &x), "2×128×256");
    let unsized_values = model
        .graph
        .values
        .iter()
        .filter(|v| v.tensor_type().and_then(|t| t.bytes()).is_none())
        .count();
    assert_eq!(unsized_values, 0, "every value has a concrete size");
}
