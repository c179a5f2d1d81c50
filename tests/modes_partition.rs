//! Heterogeneous-units mode (S5): a partition file assigns nodes to units; buffers crossing a
//! unit boundary are marked shared and take the stricter alignment; an output feeding only a
//! QuantizeLinear on a quantising unit is stored quantised; the verifier checks all of it.

mod common;

use common::*;
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
    let table = read_table(&table_path);
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
    assert_verifies(&path, &table_path);

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

/// y = If(cond, then: Sigmoid(Relu(x)), else: Tanh(x)) over 1×256 floats. The branches are
/// planned as their own level: then needs 2048 bytes (its Relu output and its result live
/// together), else 1024, so the If node gets a 2048-byte workspace at its step, clear of x,
/// cond and y.
#[test]
fn subgraphs_are_planned_level_by_level() {
    use onnx_memplan::onnx::proto::{AttributeProto, attribute_proto::AttributeType};
    let branch = |name: &str, nodes, out: &str| GraphProto {
        name: Some(name.into()),
        node: nodes,
        output: vec![float_info(out, &[1, 256])],
        ..Default::default()
    };
    let then_branch = branch(
        "then",
        vec![
            node("Relu", &["x"], &["t1"]),
            node("Sigmoid", &["t1"], &["then_out"]),
        ],
        "then_out",
    );
    let else_branch = branch(
        "else",
        vec![node("Tanh", &["x"], &["else_out"])],
        "else_out",
    );
    let mut iff = node("If", &["cond"], &["y"]);
    for (name, g) in [("then_branch", then_branch), ("else_branch", else_branch)] {
        iff.attribute.push(AttributeProto {
            name: Some(name.into()),
            r#type: Some(AttributeType::Graph as i32),
            g: Some(Box::new(g)),
            ..Default::default()
        });
    }
    let mut cond = float_info("cond", &[]);
    if let Some(onnx_memplan::onnx::proto::type_proto::Value::TensorType(t)) =
        cond.r#type.as_mut().and_then(|t| t.value.as_mut())
    {
        t.elem_type = Some(9);
    }
    let m = model(GraphProto {
        name: Some("if".into()),
        node: vec![iff],
        input: vec![cond, float_info("x", &[1, 256])],
        output: vec![float_info("y", &[1, 256])],
        ..Default::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let partition = dir.path().join("units.json");
    std::fs::write(&partition, r#"{"units":[{"name":"cpu","alignment":64}]}"#).unwrap();
    let args = ["--partition", partition.to_str().unwrap()];
    let (path, table_path) = plan_written(dir.path(), "if", &m, &args);
    let table = read_table(&table_path);
    let p = table.partition.as_ref().unwrap();
    assert!(p.unplanned.is_empty(), "{:?}", p.unplanned);
    let w = &p.workspaces[0];
    assert_eq!((w.node, w.step, w.bytes), (0, 0, 2048));
    let bytes: Vec<(&str, u64, usize)> = w
        .bodies
        .iter()
        .map(|b| (b.attribute.as_str(), b.bytes, b.tensors.len()))
        .collect();
    assert_eq!(
        bytes,
        vec![("then_branch", 2048, 2), ("else_branch", 1024, 1)]
    );
    // x (1024) + y (1024) + cond (64) + the workspace (2048), all live at step 0.
    assert_eq!(table.arenas[0].bytes, 1024 + 1024 + 64 + 2048);
    assert_verifies(&path, &table_path);

    // Moving the workspace onto x is caught.
    let mut tampered = table.clone();
    let x = tampered
        .tensors
        .iter()
        .find(|t| t.name == "x")
        .unwrap()
        .offset
        .unwrap();
    tampered.partition.as_mut().unwrap().workspaces[0].offset = x;
    let bad = dir.path().join("tampered.json");
    std::fs::write(&bad, serde_json::to_string(&tampered).unwrap()).unwrap();
    let verify = run_cli(&["verify", path.to_str().unwrap(), bad.to_str().unwrap()]);
    assert_eq!(verify.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&verify.stdout).contains("shares bytes with the workspace"));
}

/// y = ReluSig(x), a model-local function whose body is Relu then Sigmoid: the call's body is
/// instantiated and planned as its own level. Its input and output are the caller's x and y,
/// so only the Relu result t (1024 bytes) needs the workspace.
#[test]
fn local_function_calls_are_planned_level_by_level() {
    use onnx_memplan::onnx::proto::{FunctionProto, OperatorSetIdProto};
    let mut call = node("ReluSig", &["x"], &["y"]);
    call.domain = Some("local".into());
    let mut m = model(GraphProto {
        name: Some("calls".into()),
        node: vec![call],
        input: vec![float_info("x", &[1, 256])],
        output: vec![float_info("y", &[1, 256])],
        ..Default::default()
    });
    let opset = |domain: &str, version| OperatorSetIdProto {
        domain: Some(domain.into()),
        version: Some(version),
    };
    m.opset_import.push(opset("local", 1));
    m.functions.push(FunctionProto {
        name: Some("ReluSig".into()),
        domain: Some("local".into()),
        input: vec!["X".into()],
        output: vec!["Y".into()],
        node: vec![
            node("Relu", &["X"], &["t"]),
            node("Sigmoid", &["t"], &["Y"]),
        ],
        opset_import: vec![opset("", 17)],
        ..Default::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let partition = dir.path().join("units.json");
    std::fs::write(&partition, r#"{"units":[{"name":"cpu","alignment":64}]}"#).unwrap();
    let args = ["--partition", partition.to_str().unwrap()];
    let (path, table_path) = plan_written(dir.path(), "calls", &m, &args);
    let table = read_table(&table_path);
    let p = table.partition.as_ref().unwrap();
    assert!(p.unplanned.is_empty(), "{:?}", p.unplanned);
    let w = &p.workspaces[0];
    assert_eq!(
        (w.bytes, w.bodies[0].attribute.as_str()),
        (1024, "function:ReluSig")
    );
    let names: Vec<&str> = w.bodies[0]
        .tensors
        .iter()
        .map(|t| t.name.as_str())
        .collect();
    assert_eq!(names, vec!["t"]);
    assert_verifies(&path, &table_path);
}
