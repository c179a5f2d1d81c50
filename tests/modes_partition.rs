//! Heterogeneous-units mode (S5): a partition file assigns nodes to units; buffers crossing a
//! unit boundary are marked shared and take the stricter alignment; an output feeding only a
//! QuantizeLinear on a quantising unit is stored quantised; the verifier checks all of it.

mod common;

use common::*;
use onnx_memplan::emit::Table;
use onnx_memplan::onnx::proto::{GraphProto, TensorProto};

/// x (1×256 f32) → Relu → a → Sigmoid → b → QuantizeLinear → q (uint8) → DequantizeLinear →
/// d → Softmax → y.
fn quantised_model() -> onnx_memplan::onnx::proto::ModelProto {
    let scale = float_init("scale", &[], &[0.05]);
    let zero = TensorProto {
        name: Some("zero".into()),
        dims: vec![],
        data_type: Some(2),
        raw_data: Some(vec![128u8].into()),
        ..Default::default()
    };
    model(GraphProto {
        name: Some("qdq".into()),
        node: vec![
            node("Relu", &["x"], &["a"]),
            node("Sigmoid", &["a"], &["b"]),
            node("QuantizeLinear", &["b", "scale", "zero"], &["q"]),
            node("DequantizeLinear", &["q", "scale", "zero"], &["d"]),
            node("Softmax", &["d"], &["y"]),
        ],
        initializer: vec![scale, zero],
        input: vec![float_info("x", &[1, 256])],
        output: vec![float_info("y", &[1, 256])],
        ..Default::default()
    })
}

const PARTITION: &str = r#"{
  "units": [
    {"name": "npu", "alignment": 256, "quantize_outputs": true},
    {"name": "cpu", "alignment": 64}
  ],
  "default": "cpu",
  "op_types": {"Relu": "npu", "Sigmoid": "npu", "QuantizeLinear": "npu"}
}"#;

#[test]
fn units_share_align_and_quantise() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("qdq.onnx");
    write_model(&quantised_model(), &path);
    let partition = dir.path().join("units.json");
    std::fs::write(&partition, PARTITION).unwrap();
    let out = dir.path().join("qdq.memplan.onnx");
    let html = dir.path().join("qdq.html");
    let run = run_cli(&[
        "plan",
        path.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--partition",
        partition.to_str().unwrap(),
        "--no-inplace",
        "--html",
        html.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{err}");
    assert!(
        err.contains("2 units, 3 shared buffers, 1 stored quantised"),
        "{err}"
    );
    let table_path = dir.path().join("qdq.memplan.json");
    let table: Table =
        serde_json::from_str(&std::fs::read_to_string(&table_path).unwrap()).unwrap();
    let entry = |n: &str| table.tensors.iter().find(|t| t.name == n).unwrap().clone();
    let (x, b, q, d, y) = (entry("x"), entry("b"), entry("q"), entry("d"), entry("y"));
    assert_eq!(
        (x.placement.unit.as_deref(), x.placement.shared_with.clone()),
        (Some("host"), vec!["npu".to_string()])
    );
    assert_eq!(x.placement.alignment, Some(256));
    assert_eq!(
        (
            b.placement.stored_dtype.as_deref(),
            b.placement.stored_bytes,
            b.bytes
        ),
        (Some("uint8"), Some(256), Some(1024))
    );
    assert_eq!(q.placement.shared_with, vec!["cpu".to_string()]);
    assert_eq!(
        (
            d.placement.unit.as_deref(),
            d.placement.shared_with.len(),
            d.placement.alignment
        ),
        (Some("cpu"), 0, None)
    );
    assert_eq!(y.placement.shared_with, vec!["host".to_string()]);
    for t in table.tensors.iter().filter(|t| t.offset.is_some()) {
        assert_eq!(t.offset.unwrap() % 256, 0, "{}", t.name);
    }
    let p = table.partition.as_ref().unwrap();
    assert_eq!(
        p.units.iter().map(|u| u.nodes).collect::<Vec<_>>(),
        vec![3, 2]
    );
    assert!(
        std::fs::read_to_string(&html)
            .unwrap()
            .contains("shared with")
    );
    let verify = run_cli(&[
        "verify",
        path.to_str().unwrap(),
        table_path.to_str().unwrap(),
    ]);
    assert!(
        verify.status.success(),
        "{}",
        String::from_utf8_lossy(&verify.stdout)
    );

    // A quantised claim on a tensor that feeds more than a QuantizeLinear is refused.
    let mut tampered = table.clone();
    let i = tampered.tensors.iter().position(|t| t.name == "a").unwrap();
    tampered.tensors[i].placement.stored_dtype = Some("uint8".into());
    tampered.tensors[i].placement.stored_bytes = Some(256);
    let bad = dir.path().join("tampered.json");
    std::fs::write(&bad, serde_json::to_string(&tampered).unwrap()).unwrap();
    let verify = run_cli(&["verify", path.to_str().unwrap(), bad.to_str().unwrap()]);
    assert_eq!(verify.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&verify.stdout).contains("'a' is stored as"));
}

#[test]
fn bad_partitions_are_input_errors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("qdq.onnx");
    write_model(&quantised_model(), &path);
    for (text, needle) in [
        (
            r#"{"units":[{"name":"npu"}],"nodes":{"nowhere":"npu"}}"#,
            "node 'nowhere'",
        ),
        (
            r#"{"units":[{"name":"npu"}],"op_types":{"Relu":"gpu"}}"#,
            "unknown unit 'gpu'",
        ),
        ("{", "not a partition file"),
    ] {
        let file = dir.path().join("p.json");
        std::fs::write(&file, text).unwrap();
        let run = run_cli(&[
            "plan",
            path.to_str().unwrap(),
            "--partition",
            file.to_str().unwrap(),
        ]);
        let err = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains(needle), "{err}");
    }
}
