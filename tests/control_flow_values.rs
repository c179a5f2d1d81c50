//! Control flow of real models: an `If` branch that cannot run for the planned inputs does not
//! stop the plan, and `--input-value` binds an input's value so that conditions and trip counts
//! fold and only the taken branch is planned. The model mirrors a voice-activity detector that
//! switches on its sample rate (`scripts/make_edge_models.py` builds the same one, and
//! `scripts/ort_check.py` compares the taken branches with onnxruntime's).

mod common;

use common::*;
use onnx_memplan::onnx::proto::{
    AttributeProto, GraphProto, ModelProto, TensorShapeProto, TypeProto, ValueInfoProto,
    tensor_shape_proto::Dimension, tensor_shape_proto::dimension, type_proto,
};

fn info(name: &str, elem: i32, dims: &[&str]) -> ValueInfoProto {
    let dim = dims
        .iter()
        .map(|d| Dimension {
            value: Some(match d.parse::<i64>() {
                Ok(v) => dimension::Value::DimValue(v),
                Err(_) => dimension::Value::DimParam(d.to_string()),
            }),
            denotation: None,
        })
        .collect();
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(elem),
                shape: Some(TensorShapeProto { dim }),
            })),
            denotation: None,
        }),
        ..Default::default()
    }
}

fn attr_graph(name: &str, g: GraphProto) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(5),
        g: Some(Box::new(g)),
        ..Default::default()
    }
}

fn attr_int(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(2),
        i: Some(v),
        ..Default::default()
    }
}

fn with_attrs(
    mut n: onnx_memplan::onnx::proto::NodeProto,
    name: &str,
    attrs: Vec<AttributeProto>,
) -> onnx_memplan::onnx::proto::NodeProto {
    n.name = Some(name.into());
    n.attribute = attrs;
    n
}

const HIDDEN: i64 = 8;

fn lstm(name: &str, x: &str, w: &str, r: &str, h: &str) -> onnx_memplan::onnx::proto::NodeProto {
    with_attrs(
        node("LSTM", &[x, w, r], &["", h]),
        name,
        vec![attr_int("hidden_size", HIDDEN)],
    )
}

/// `y = If(sr == 16000, LSTM over x as 4×1×128, If(sr == 8000, LSTM over x reshaped to
/// shape5[:samples / 100], zeros))` with x: 1×samples. For 512 samples the 8 kHz branch feeds
/// its LSTM a rank-5 tensor: it fails whenever it runs with that input.
fn vad_like() -> ModelProto {
    let w = vec![0.01f32; (4 * HIDDEN * 128) as usize];
    let r = vec![0.01f32; (4 * HIDDEN * HIDDEN) as usize];
    let rate16 = GraphProto {
        name: Some("rate16k".into()),
        node: vec![
            with_attrs(
                node("Reshape", &["x", "seq_shape"], &["seq16"]),
                "to_seq16",
                vec![],
            ),
            lstm("lstm16", "seq16", "w16", "r16", "h16"),
            with_attrs(
                node("Reshape", &["h16", "out_shape"], &["y16"]),
                "flat16",
                vec![],
            ),
        ],
        initializer: vec![
            float_init("w16", &[1, 4 * HIDDEN, 128], &w),
            float_init("r16", &[1, 4 * HIDDEN, HIDDEN], &r),
            int_init("seq_shape", &[3], &[4, 1, 128]),
            int_init("out_shape", &[2], &[1, HIDDEN]),
        ],
        output: vec![float_info("y16", &[1, HIDDEN])],
        ..Default::default()
    };
    let mut gather = node("Gather", &["xs", "one"], &["width"]);
    gather.attribute.push(attr_int("axis", 0));
    let rate8 = GraphProto {
        name: Some("rate8k".into()),
        node: vec![
            node("Shape", &["x"], &["xs"]),
            gather,
            node("Div", &["width", "hundred"], &["rank"]),
            node("Reshape", &["rank", "one_elem"], &["end"]),
            node("Slice", &["shape5", "zero", "end"], &["target"]),
            node("Reshape", &["x", "target"], &["seq8"]),
            lstm("lstm8", "seq8", "w8", "r8", "h8"),
            node("Reshape", &["h8", "out_shape8"], &["y8"]),
        ],
        initializer: vec![
            float_init("w8", &[1, 4 * HIDDEN, 128], &w),
            float_init("r8", &[1, 4 * HIDDEN, HIDDEN], &r),
            int_init("one", &[], &[1]),
            int_init("hundred", &[], &[100]),
            int_init("one_elem", &[1], &[1]),
            int_init("zero", &[1], &[0]),
            int_init("shape5", &[5], &[1, 1, 4, 1, 128]),
            int_init("out_shape8", &[2], &[1, HIDDEN]),
        ],
        output: vec![float_info("y8", &[1, HIDDEN])],
        ..Default::default()
    };
    let other = GraphProto {
        name: Some("other_rate".into()),
        node: vec![node("ConstantOfShape", &["zshape"], &["y0"])],
        initializer: vec![int_init("zshape", &[2], &[1, HIDDEN])],
        output: vec![float_info("y0", &[1, HIDDEN])],
        ..Default::default()
    };
    let not16 = GraphProto {
        name: Some("not16k".into()),
        node: vec![with_attrs(
            node("If", &["is8k"], &["y_low"]),
            "if8k",
            vec![
                attr_graph("then_branch", rate8),
                attr_graph("else_branch", other),
            ],
        )],
        output: vec![float_info("y_low", &[1, HIDDEN])],
        ..Default::default()
    };
    model(GraphProto {
        name: Some("vad_like".into()),
        node: vec![
            node("Equal", &["sr", "k16000"], &["is16k"]),
            node("Equal", &["sr", "k8000"], &["is8k"]),
            with_attrs(
                node("If", &["is16k"], &["y"]),
                "if16k",
                vec![
                    attr_graph("then_branch", rate16),
                    attr_graph("else_branch", not16),
                ],
            ),
        ],
        initializer: vec![
            int_init("k16000", &[], &[16000]),
            int_init("k8000", &[], &[8000]),
        ],
        input: vec![info("x", 1, &["1", "samples"]), info("sr", 7, &[])],
        output: vec![float_info("y", &[1, HIDDEN])],
        ..Default::default()
    })
}

/// Plans the model with `extra` flags; returns the table's (node, taken, reason) triples and
/// checks that `verify` accepts the table.
fn plan_branches(stem: &str, extra: &[&str]) -> Vec<(String, String, String)> {
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec!["--dim", "samples=512"];
    args.extend(extra);
    let (path, table_path) = plan_written(dir.path(), stem, &vad_like(), &args);
    assert_verifies(&path, &table_path);
    let table = read_table(&table_path);
    let y = table.tensors.iter().find(|t| t.name == "y").unwrap();
    assert_eq!(y.shape, Some(vec![1, HIDDEN]));
    table
        .branches
        .into_iter()
        .map(|b| (b.node, b.taken, b.reason))
        .collect()
}

/// Without a value the sample rate is unknown: the 8 kHz branch is ruled out because it fails
/// for 512 samples (rank 5 into an LSTM), and the model plans.
#[test]
fn a_branch_that_fails_for_these_shapes_is_ruled_out() {
    let branches = plan_branches("vad", &[]);
    assert_eq!(branches.len(), 1, "{branches:?}");
    let (node, taken, reason) = &branches[0];
    assert_eq!(node, "if16k/else_branch/if8k");
    assert_eq!(taken, "else_branch");
    assert!(
        reason.contains("lstm8") && reason.contains("rank 5"),
        "{reason}"
    );
}

/// With `--input-value sr=16000` the outer condition folds (16000 == 16000: then_branch);
/// with 4000 both fold to false (worked by hand).
#[test]
fn input_values_fold_conditions() {
    let branches = plan_branches("vad16", &["--input-value", "sr=16000"]);
    assert_eq!(
        branches,
        [(
            "if16k".to_string(),
            "then_branch".to_string(),
            "condition 'is16k' is true".to_string()
        )]
    );
    let branches = plan_branches("vad4", &["--input-value", "sr=4000"]);
    let taken: Vec<(&str, &str)> = branches
        .iter()
        .map(|(n, t, _)| (n.as_str(), t.as_str()))
        .collect();
    assert_eq!(
        taken,
        [
            ("if16k", "else_branch"),
            ("if16k/else_branch/if8k", "else_branch")
        ]
    );
}

/// At 8 kHz the broken branch is the one that runs: the model is invalid for these inputs
/// (onnxruntime fails in lstm8 too), an input error naming the node.
#[test]
fn the_taken_branch_must_infer() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("vad8.onnx");
    write_model(&vad_like(), &path);
    let p = path.to_str().unwrap();
    let out = run_cli(&[
        "plan",
        p,
        "--dim",
        "samples=512",
        "--input-value",
        "sr=8000",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("lstm8") && err.contains("rank 5"), "{err}");
    for (value, needle) in [
        ("ghost=1", "'ghost'"),
        ("sr=abc", "sr=abc"),
        ("sr=1,2", "scalar"),
    ] {
        let out = run_cli(&["plan", p, "--dim", "samples=512", "--input-value", value]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains(needle), "{value}: {err}");
    }
}

/// The value is recorded in the table's options: `verify` re-derives the same branches, and a
/// table whose value was dropped no longer matches the model.
#[test]
fn verify_rederives_with_the_recorded_value() {
    let dir = tempfile::tempdir().unwrap();
    let (path, table_path) = plan_written(
        dir.path(),
        "vad",
        &vad_like(),
        &["--dim", "samples=512", "--input-value", "sr=16000"],
    );
    let mut table = read_table(&table_path);
    assert_eq!(table.options.input_values["sr"], "16000");
    table.options.input_values.clear();
    std::fs::write(&table_path, serde_json::to_string(&table).unwrap()).unwrap();
    assert_verify_refuses(&path, &table_path, "If branches");
}

/// A Loop's trip count from a bound input: scan outputs get a known length (worked by hand:
/// n = 3 iterations of a 2-element x → 3×2).
#[test]
fn input_values_fold_trip_counts() {
    let body = GraphProto {
        name: Some("body".into()),
        node: vec![
            node("Identity", &["cond_in"], &["cond_out"]),
            node("Identity", &["x"], &["step"]),
        ],
        input: vec![info("i", 7, &[]), info("cond_in", 9, &[])],
        output: vec![info("cond_out", 9, &[]), float_info("step", &[2])],
        ..Default::default()
    };
    let m = model(GraphProto {
        name: Some("loop".into()),
        node: vec![with_attrs(
            node("Loop", &["n", ""], &["stacked"]),
            "loop",
            vec![attr_graph("body", body)],
        )],
        input: vec![info("n", 7, &[]), float_info("x", &[2])],
        output: vec![info("stacked", 1, &["steps", "2"])],
        ..Default::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let (_, table_path) = plan_written(dir.path(), "loop", &m, &["--input-value", "n=3"]);
    let table = read_table(&table_path);
    let stacked = table.tensors.iter().find(|t| t.name == "stacked").unwrap();
    assert_eq!(stacked.shape, Some(vec![3, 2]));
}
