//! Symbolic dimensions flow through a CNN unchanged where the size is preserved.

mod infer_support;
use infer_support::*;
use onnx_memplan::infer::InferOptions;

fn cnn() -> onnx_memplan::onnx::proto::ModelProto {
    G::default()
        .input("image", FLOAT, &["batch", "3", "224", "224"])
        .floats("w1", &[32, 3, 3, 3])
        .floats("w2", &[10, 32])
        .floats("b2", &[10])
        .node(
            "Conv",
            &["image", "w1"],
            &["c"],
            vec![a_ints("pads", &[1, 1, 1, 1]), a_ints("strides", &[2, 2])],
        )
        .node(
            "BatchNormalization",
            &["c", "b2", "b2", "b2", "b2"],
            &["bn"],
            vec![],
        )
        .node("Relu", &["bn"], &["r"], vec![])
        .node(
            "MaxPool",
            &["r"],
            &["p"],
            vec![a_ints("kernel_shape", &[2, 2]), a_ints("strides", &[2, 2])],
        )
        .node("GlobalAveragePool", &["p"], &["g"], vec![])
        .node("Flatten", &["g"], &["f"], vec![])
        .node(
            "Gemm",
            &["f", "w2", "b2"],
            &["logits"],
            vec![a_int("transB", 1)],
        )
        .node("Softmax", &["logits"], &["probs"], vec![a_int("axis", -1)])
        .declared_output("probs", FLOAT, &["batch", "10"])
        .model(17)
}

#[test]
fn batch_symbol_survives_the_network() {
    let (m, report) = infer_with(&cnn(), &InferOptions::default()).unwrap();
    assert_eq!(shape(&m, "c"), "batch×32×112×112");
    assert_eq!(shape(&m, "p"), "batch×32×56×56");
    assert_eq!(shape(&m, "f"), "batch×32");
    assert_eq!(shape(&m, "probs"), "batch×10");
    assert!(
        report.disagreements.is_empty(),
        "{:?}",
        report.disagreements
    );
}

#[test]
fn binding_the_symbol_makes_every_shape_concrete() {
    let mut options = InferOptions::default();
    options.dims.insert("batch".into(), 8);
    let (m, report) = infer_with(&cnn(), &options).unwrap();
    assert_eq!(shape(&m, "probs"), "8×10");
    assert!(
        report.disagreements.is_empty(),
        "declared batch×10 binds to 8×10 too"
    );
    for v in &m.graph.values {
        let t = v.tensor_type().expect("typed");
        assert!(t.bytes().is_some(), "{} has a concrete size", v.name);
    }
}

#[test]
fn broadcasting_equal_symbols_keeps_them_and_different_ones_do_not() {
    let proto = G::default()
        .input("a", FLOAT, &["n", "1", "4"])
        .input("b", FLOAT, &["n", "m", "1"])
        .input("c", FLOAT, &["k", "1", "1"])
        .node("Add", &["a", "b"], &["ab"], vec![])
        .node("Mul", &["ab", "c"], &["abc"], vec![])
        .output("abc")
        .model(17);
    let m = infer(&proto);
    assert_eq!(shape(&m, "ab"), "n×m×4");
    assert_eq!(shape(&m, "abc"), "?×m×4");
}
