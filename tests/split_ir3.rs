//! The split rewrite keeps the model's IR rules: before IR version 4 every initializer must
//! also be listed among the graph inputs (weights are graph inputs with defaults), so the
//! constants a split adds (its Slice bounds) are listed there too, and `onnx.checker`'s full
//! check accepts the annotated model. The model is the wide chain of `split_tiles.rs`
//! (X[1,3,64,64] → Conv s2 → Relu → Conv → Add → Conv s2 → Y[1,8,16,16], whose peak the
//! split lowers) written as IR version 3, its weights listed as inputs.

mod common;

use common::{float_info, model, node, wave_init};
use onnx_memplan::onnx::proto::{AttributeProto, GraphProto, ModelProto, attribute_proto};

fn conv(
    input: &str,
    weight: &str,
    output: &str,
    stride: i64,
) -> onnx_memplan::onnx::proto::NodeProto {
    let ints = |name: &str, values: &[i64]| AttributeProto {
        name: Some(name.into()),
        r#type: Some(attribute_proto::AttributeType::Ints as i32),
        ints: values.to_vec(),
        ..Default::default()
    };
    let mut n = node("Conv", &[input, weight], &[output]);
    n.attribute = vec![
        ints("kernel_shape", &[3, 3]),
        ints("pads", &[1, 1, 1, 1]),
        ints("strides", &[stride, stride]),
    ];
    n
}

/// The wide chain as an IR-3 model: each weight is an initializer and a graph input.
fn ir3_wide_chain() -> ModelProto {
    let weights = [
        ("w1", [32, 3, 3, 3]),
        ("w2", [32, 32, 3, 3]),
        ("w3", [8, 32, 3, 3]),
    ];
    let mut input = vec![float_info("x", &[1, 3, 64, 64])];
    input.extend(weights.iter().map(|(n, d)| float_info(n, d)));
    let mut m = model(GraphProto {
        name: Some("ir3_wide_chain".into()),
        node: vec![
            conv("x", "w1", "c1", 2),
            node("Relu", &["c1"], &["r1"]),
            conv("r1", "w2", "c2", 1),
            node("Add", &["c2", "r1"], &["a"]),
            conv("a", "w3", "y", 2),
        ],
        input,
        output: vec![float_info("y", &[1, 8, 16, 16])],
        initializer: weights
            .iter()
            .enumerate()
            .map(|(i, (n, d))| wave_init(n, d, i as f32 + 1.0))
            .collect(),
        ..Default::default()
    });
    m.ir_version = Some(3);
    m
}

#[test]
fn an_ir3_models_split_constants_are_graph_inputs_too() {
    let dir = tempfile::tempdir().unwrap();
    let (path, table) = common::plan_written(
        dir.path(),
        "ir3",
        &ir3_wide_chain(),
        &["--split", "auto", "--split-overhead", "50"],
    );
    let t = common::read_table(&table);
    let splits = t.splits.as_ref().expect("a splits section");
    assert_eq!(splits.chains.len(), 1, "the chain is split: {splits:?}");
    let annotated = dir.path().join("ir3.memplan.onnx");
    let written: ModelProto = {
        use prost::Message;
        ModelProto::decode(std::fs::read(&annotated).unwrap().as_slice()).unwrap()
    };
    assert_eq!(written.ir_version, Some(3));
    let g = written.graph.as_ref().unwrap();
    let inputs: Vec<&str> = g.input.iter().map(|i| i.name()).collect();
    let added: Vec<&str> = g
        .initializer
        .iter()
        .map(|t| t.name())
        .filter(|n| n.starts_with("split1/"))
        .collect();
    assert!(!added.is_empty(), "the split adds its Slice bounds");
    for name in g.initializer.iter().map(|t| t.name()) {
        assert!(inputs.contains(&name), "{name} is not a graph input");
    }
    common::assert_verifies(&annotated, &table);
    // onnx.checker (full check) accepts it, and onnxruntime gives the original's outputs.
    common::load_in_onnx(&annotated);
    common::compare_in_onnxruntime(&path, &annotated);
}
