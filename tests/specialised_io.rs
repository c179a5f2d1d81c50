//! The annotated model is specialised to the shapes it was planned for: its graph inputs and
//! outputs carry the bound shapes (as onnxsim's `--overwrite-input-shape` writes them), so a
//! model that declares unknown dims as `dim_value: -1` (Paddle's exporter) stays valid for
//! onnx's checker. `scripts/make_edge_models.py` + `scripts/ort_check.py` run the checker itself
//! (`.ci/run`); this test checks what is written.

mod common;

use common::*;
use onnx_memplan::onnx::proto::{GraphProto, ModelProto, ValueInfoProto, type_proto};

/// x: -1×3×-1×-1 → Relu → Sigmoid → y: -1×3×-1×-1.
fn minus_one_dims() -> ModelProto {
    model(GraphProto {
        name: Some("paddle".into()),
        node: vec![
            node("Relu", &["x"], &["r"]),
            node("Sigmoid", &["r"], &["y"]),
        ],
        input: vec![float_info("x", &[-1, 3, -1, -1])],
        output: vec![float_info("y", &[-1, 3, -1, -1])],
        ..Default::default()
    })
}

fn dims(vi: &ValueInfoProto) -> Vec<i64> {
    let Some(type_proto::Value::TensorType(t)) = vi.r#type.as_ref().unwrap().value.as_ref() else {
        panic!("a tensor")
    };
    t.shape
        .as_ref()
        .unwrap()
        .dim
        .iter()
        .map(|d| match d.value {
            Some(onnx_memplan::onnx::proto::tensor_shape_proto::dimension::Value::DimValue(v)) => v,
            _ => i64::MIN,
        })
        .collect()
}

#[test]
fn bound_shapes_are_written_into_inputs_and_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let (_, table_path) = plan_written(
        dir.path(),
        "paddle",
        &minus_one_dims(),
        &["--input-shape", "x=1x3x48x192"],
    );
    assert!(read_table(&table_path).options.specialised_io);
    let annotated =
        onnx_memplan::onnx::load_model(&dir.path().join("paddle.memplan.onnx")).unwrap();
    let g = annotated.graph.unwrap();
    assert_eq!(dims(&g.input[0]), [1, 3, 48, 192]);
    assert_eq!(dims(&g.output[0]), [1, 3, 48, 192]);
    let r = g.value_info.iter().find(|v| v.name() == "r").unwrap();
    assert_eq!(dims(r), [1, 3, 48, 192]);
}

#[test]
fn unbound_models_keep_their_declarations() {
    let dir = tempfile::tempdir().unwrap();
    let (_, table_path) = plan_written(dir.path(), "chain", &chain_model(), &[]);
    assert!(!read_table(&table_path).options.specialised_io);
}

/// Without a binding, a -1 dim is an unknown size, not a size of -1.
#[test]
fn minus_one_is_an_unknown_dim() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("paddle.onnx");
    write_model(&minus_one_dims(), &path);
    let out = run_cli(&["plan", path.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("cannot size") && err.contains("--input-shape"),
        "{err}"
    );
}
