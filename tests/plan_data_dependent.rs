//! Data-dependent sizes (NonMaxSuppression, NonZero, TopK with a run-time k, Unique, Compress,
//! a Loop over a NonZero count) planned at their proven bounds: the hand-worked NMS head, a
//! tampered table refused, and the detection-style models of scripts/make_detection_models.py
//! run in onnxruntime and inside their arena, with counts below and at their bounds
//! (scripts/ort_bounds.py: every actual shape within the planned one, outputs unchanged),
//! among them an `If` decided by a count, whose both branches are planned.

mod common;

use std::path::Path;
use std::process::Command;

use common::{
    assert_verifies, assert_verify_refuses, float_info, float_init, int_init, model, node,
    ort_python, plan_written, read_table, root, run_cli, with_int,
};
use onnx_memplan::onnx::proto::{AttributeProto, GraphProto, ValueInfoProto};

/// boxes [1, 100, 4], scores [1, 3, 100], at most 10 boxes per class → selected [n, 3] →
/// the selected boxes' rows (Gather) → doubled.
fn nms_head() -> onnx_memplan::onnx::proto::ModelProto {
    let gather = with_int(
        node("Gather", &["boxes2", "box_idx"], &["picked"]),
        "axis",
        0,
    );
    model(GraphProto {
        name: Some("nms_head".into()),
        node: vec![
            node(
                "NonMaxSuppression",
                &["boxes", "scores", "max_out", "iou", "thr"],
                &["selected"],
            ),
            node("Slice", &["selected", "two", "three", "one"], &["box_col"]),
            node("Squeeze", &["box_col", "one"], &["box_idx"]),
            node("Squeeze", &["boxes", "zero"], &["boxes2"]),
            gather,
            node("Mul", &["picked", "scale"], &["detections"]),
        ],
        input: vec![
            float_info("boxes", &[1, 100, 4]),
            float_info("scores", &[1, 3, 100]),
        ],
        output: vec![onnx_memplan::onnx::proto::ValueInfoProto {
            name: Some("detections".into()),
            ..Default::default()
        }],
        initializer: vec![
            int_init("max_out", &[1], &[10]),
            float_init("iou", &[1], &[0.5]),
            float_init("thr", &[1], &[0.0]),
            int_init("zero", &[1], &[0]),
            int_init("one", &[1], &[1]),
            int_init("two", &[1], &[2]),
            int_init("three", &[1], &[3]),
            float_init("scale", &[1], &[2.0]),
        ],
        ..Default::default()
    })
}

#[test]
fn nms_head_plans_at_its_hand_worked_bound_and_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let (model, table_path) = plan_written(dir.path(), "nms", &nms_head(), &[]);
    let table = read_table(&table_path);
    // By hand: 1 batch × 3 classes × min(10 per class, 100 boxes) = 30 selected at most.
    assert_eq!(table.data_dependent.len(), 1);
    let count = &table.data_dependent[0];
    assert_eq!(
        (
            count.op.as_str(),
            count.tensor.as_str(),
            count.bound.as_str()
        ),
        ("NonMaxSuppression", "selected", "30")
    );
    let entry = |name: &str| table.tensors.iter().find(|t| t.name == name).unwrap();
    // int64 [30, 3] = 720 bytes; the gathered float32 boxes [30, 4] = 480 bytes.
    for (name, shape, bytes) in [("selected", [30, 3], 720), ("picked", [30, 4], 480)] {
        let t = entry(name);
        assert_eq!(t.shape.as_deref(), Some(&shape[..]), "{name}");
        assert_eq!(t.bytes, Some(bytes), "{name}");
        assert!(t.symbolic.upper_bound, "{name}");
        assert_eq!(t.symbolic.bytes_expr.as_deref(), Some(&*bytes.to_string()));
        assert_eq!(t.symbolic.shape_expr.as_ref().unwrap()[0], count.symbol);
    }
    // Fixed-size tensors stay unmarked.
    assert!(!entry("boxes2").symbolic.upper_bound);
    let ok = run_cli(&[
        "verify",
        model.to_str().unwrap(),
        table_path.to_str().unwrap(),
    ]);
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stdout)
    );

    // A smaller bound than the operator implies is refused.
    let original = std::fs::read_to_string(&table_path).unwrap();
    std::fs::write(
        &table_path,
        original.replace("\"bound\": \"30\"", "\"bound\": \"20\""),
    )
    .unwrap();
    assert_verify_refuses(&model, &table_path, "bound is not one the operator implies");
    // So is a tensor planned below its size at the bound, or left unmarked.
    let mut json: serde_json::Value = serde_json::from_str(&original).unwrap();
    let tensors = json["tensors"].as_array_mut().unwrap();
    let picked = tensors.iter_mut().find(|t| t["name"] == "picked").unwrap();
    picked["bytes_expr"] = "240".into();
    std::fs::write(&table_path, json.to_string()).unwrap();
    assert_verify_refuses(&model, &table_path, "picked");
    let mut json: serde_json::Value = serde_json::from_str(&original).unwrap();
    let tensors = json["tensors"].as_array_mut().unwrap();
    let selected = tensors
        .iter_mut()
        .find(|t| t["name"] == "selected")
        .unwrap();
    selected.as_object_mut().unwrap().remove("upper_bound");
    std::fs::write(&table_path, json.to_string()).unwrap();
    assert_verify_refuses(&model, &table_path, "not marked upper_bound");
}

/// The positive values of x [200] (NonZero, GatherND: n of them), then TopK with
/// k = ReduceMin(Concat([candidates], Shape(values))) = min(candidates, n), as torchvision's
/// SSDlite head computes it, doubled.
fn topk_min_k(candidates: i64) -> onnx_memplan::onnx::proto::ModelProto {
    model(GraphProto {
        name: Some("topk_min_k".into()),
        node: vec![
            node("Greater", &["x", "zero"], &["positive"]),
            node("NonZero", &["positive"], &["where"]),
            node("Transpose", &["where"], &["coords"]),
            node("GatherND", &["x", "coords"], &["values"]),
            node("Shape", &["values"], &["count"]),
            with_int(
                node("Concat", &["candidates", "count"], &["both"]),
                "axis",
                0,
            ),
            with_int(node("ReduceMin", &["both"], &["least"]), "keepdims", 0),
            node("Reshape", &["least", "one_dim"], &["k"]),
            with_int(
                node("TopK", &["values", "k"], &["top", "top_idx"]),
                "axis",
                0,
            ),
            node("Mul", &["top", "two"], &["y"]),
        ],
        input: vec![float_info("x", &[200])],
        output: ["y", "top_idx"]
            .map(|name| onnx_memplan::onnx::proto::ValueInfoProto {
                name: Some(name.into()),
                ..Default::default()
            })
            .to_vec(),
        initializer: vec![
            float_init("zero", &[1], &[0.0]),
            float_init("two", &[1], &[2.0]),
            int_init("candidates", &[1], &[candidates]),
            int_init("one_dim", &[1], &[1]),
        ],
        ..Default::default()
    })
}

#[test]
fn a_topk_whose_k_is_a_minimum_with_a_constant_is_bounded_by_the_constant() {
    let dir = tempfile::tempdir().unwrap();
    // By hand: n <= 200 positions; k = min(30, n) <= 30 < 200, so TopK's count is at most
    // 30: `top` float32 [30] = 120 bytes, `top_idx` int64 [30] = 240 bytes.
    let (model, table_path) = plan_written(dir.path(), "min30", &topk_min_k(30), &[]);
    let table = read_table(&table_path);
    let bounds: Vec<(&str, &str)> = table
        .data_dependent
        .iter()
        .map(|d| (d.op.as_str(), d.bound.as_str()))
        .collect();
    assert_eq!(bounds, [("NonZero", "200"), ("TopK", "30")]);
    let bytes = |name: &str| table.tensors.iter().find(|t| t.name == name).unwrap().bytes;
    assert_eq!((bytes("top"), bytes("top_idx")), (Some(120), Some(240)));
    assert_verifies(&model, &table_path);
    // 29 is not a bound the operator implies for these inputs.
    let original = std::fs::read_to_string(&table_path).unwrap();
    std::fs::write(
        &table_path,
        original.replace("\"bound\": \"30\"", "\"bound\": \"29\""),
    )
    .unwrap();
    assert_verify_refuses(&model, &table_path, "bound is not one the operator implies");

    // With 500 candidates the axis is the tighter bound: the count is at most n <= 200, so
    // the bound names the NonZero count and `top` is planned at 200 floats = 800 bytes.
    let (model, table_path) = plan_written(dir.path(), "min500", &topk_min_k(500), &[]);
    let table = read_table(&table_path);
    let topk = &table.data_dependent[1];
    assert_eq!(topk.bound, table.data_dependent[0].symbol);
    let top = table.tensors.iter().find(|t| t.name == "top").unwrap();
    assert_eq!(top.bytes, Some(800));
    assert_verifies(&model, &table_path);
}

#[test]
fn detection_models_run_in_onnxruntime_within_their_bounds() {
    let Some(python) = ort_python() else {
        eprintln!(
            "SKIPPED the onnxruntime run of the detection models: no Python with onnxruntime \
             (run scripts/ort_check.sh once to create .ci/venv, or set MEMPLAN_PYTHON)"
        );
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let models = dir.path().join("models");
    let script = |name: &str| root().join("scripts").join(name);
    let made = Command::new(&python)
        .arg(script("make_detection_models.py"))
        .arg(&models)
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let binary = Path::new(env!("CARGO_BIN_EXE_onnx-memplan"));
    let said = common::assert_succeeds(
        "",
        Command::new(&python)
            .arg(script("ort_bounds.py"))
            .arg("--bin")
            .arg(binary)
            .arg("--dir")
            .arg(&models)
            .arg("--out")
            .arg(dir.path().join("out")),
    );
    // Every model of the generator was planned and checked.
    assert_eq!(said.matches("PASS").count(), 8, "{said}");
}

#[test]
fn a_count_beside_a_zero_length_axis_is_still_marked() {
    // Unique along axis 1 of X [2, 4, 0] (a fuzz finding): Y is [2, unique_0, 0] with
    // unique_0 <= 4, so it holds 0 bytes whatever the count, but its shape names the count:
    // it is marked upper_bound (the verifier refused the unmarked tensor as a bug).
    let dir = tempfile::tempdir().unwrap();
    let unique = model(GraphProto {
        name: Some("unique_empty".into()),
        node: vec![with_int(
            node("Unique", &["X"], &["Y", "indices", "inverse", "counts"]),
            "axis",
            1,
        )],
        input: vec![float_info("X", &[2, 4, 0])],
        output: ["Y", "counts"]
            .map(|name| onnx_memplan::onnx::proto::ValueInfoProto {
                name: Some(name.into()),
                ..Default::default()
            })
            .to_vec(),
        ..Default::default()
    });
    let (model, table_path) = plan_written(dir.path(), "unique_empty", &unique, &[]);
    let table = read_table(&table_path);
    assert_eq!(table.data_dependent[0].bound, "4");
    let y = table.tensors.iter().find(|t| t.name == "Y").unwrap();
    assert!(y.symbolic.upper_bound);
    assert_eq!(
        (y.bytes, y.symbolic.bytes_expr.as_deref()),
        (Some(0), Some("0"))
    );
    assert_verifies(&model, &table_path);
}

/// x [8]; NonZero's count n of the positive values decides `If(n == 0)`: the then-branch
/// (no positive value) gives x tiled 4 times [32], the else-branch the positive values [n].
fn if_count() -> onnx_memplan::onnx::proto::ModelProto {
    let branch = |name: &str, nodes, output: &str| AttributeProto {
        name: Some(name.into()),
        r#type: Some(5),
        g: Some(Box::new(GraphProto {
            name: Some(name.into()),
            node: nodes,
            output: vec![ValueInfoProto {
                name: Some(output.into()),
                ..Default::default()
            }],
            ..Default::default()
        })),
        ..Default::default()
    };
    let mut if_node = node("If", &["empty"], &["chosen"]);
    if_node.attribute = vec![
        branch(
            "then_branch",
            vec![node("Tile", &["x", "four"], &["tiled"])],
            "tiled",
        ),
        branch(
            "else_branch",
            vec![
                node("Squeeze", &["where", "zero_axis"], &["idx"]),
                with_int(node("Gather", &["x", "idx"], &["picked"]), "axis", 0),
            ],
            "picked",
        ),
    ];
    model(GraphProto {
        name: Some("if_count".into()),
        node: vec![
            node("Greater", &["x", "zero"], &["positive"]),
            node("NonZero", &["positive"], &["where"]),
            node("Size", &["where"], &["numel"]),
            node("Equal", &["numel", "none"], &["empty"]),
            if_node,
            node("Mul", &["chosen", "two"], &["y"]),
        ],
        input: vec![float_info("x", &[8])],
        output: vec![ValueInfoProto {
            name: Some("y".into()),
            ..Default::default()
        }],
        initializer: vec![
            float_init("zero", &[], &[0.0]),
            float_init("two", &[], &[2.0]),
            int_init("four", &[1], &[4]),
            int_init("zero_axis", &[1], &[0]),
            int_init("none", &[], &[0]),
        ],
        ..Default::default()
    })
}

#[test]
fn an_if_decided_by_a_count_plans_both_branches_at_the_larger() {
    let dir = tempfile::tempdir().unwrap();
    let (model, table_path) = plan_written(dir.path(), "if_count", &if_count(), &[]);
    let table = read_table(&table_path);
    // By hand: n <= 8 positive values. At n = 8 the condition is false, but with no positive
    // value (n = 0) the then-branch runs: the If stays undecided, and `chosen` (and `y`) is
    // planned at the larger branch, the tiled x: float32 [32] = 128 bytes, not [8] = 32.
    assert_eq!(table.data_dependent[0].bound, "8");
    assert!(table.branches.is_empty(), "{:?}", table.branches);
    let entry = |name: &str| table.tensors.iter().find(|t| t.name == name).unwrap();
    for name in ["chosen", "y"] {
        assert_eq!(entry(name).shape.as_deref(), Some(&[32][..]), "{name}");
        assert_eq!(entry(name).bytes, Some(128), "{name}");
        // No single expression in n covers [32] and [n]: planned at the bound, and the table
        // says so and why (the If and its two branch shapes).
        let sym = &entry(name).symbolic;
        assert!(sym.upper_bound, "{name}");
        assert_eq!(sym.bytes_expr.as_deref(), Some("128"), "{name}");
        assert_eq!(sym.shape_expr, None, "{name}");
        let reason = sym.upper_bound_reason.as_deref().unwrap();
        for part in ["(If)", "then_branch [32]", "else_branch [nonzero_0]"] {
            assert!(reason.contains(part), "{name}: {reason}");
        }
    }
    assert!(
        entry("y")
            .symbolic
            .upper_bound_reason
            .as_deref()
            .unwrap()
            .contains("derives from 'chosen'")
    );
    assert_verifies(&model, &table_path);

    // Unmarked, the table is refused: nothing would tell a runtime that `chosen` is planned
    // at a bound.
    let text = std::fs::read_to_string(&table_path).unwrap();
    let mut json: serde_json::Value = serde_json::from_str(&text).unwrap();
    for t in json["tensors"].as_array_mut().unwrap() {
        if t["name"] == "chosen" {
            t["upper_bound"] = false.into();
        }
    }
    std::fs::write(&table_path, json.to_string()).unwrap();
    assert_verify_refuses(
        &model,
        &table_path,
        "tensor 'chosen': its shape has no expression in the data-dependent counts but it is not marked upper_bound",
    );
    std::fs::write(&table_path, text).unwrap();

    // The plan of the If decided at the bound (the else-branch taken, its outputs sized at
    // n = 8) is refused: it would not hold the then-branch's output.
    let mut json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&table_path).unwrap()).unwrap();
    json["branches"] = serde_json::json!([{
        "node": "#4",
        "taken": "else_branch",
        "reason": "condition 'empty' is false",
    }]);
    for t in json["tensors"].as_array_mut().unwrap() {
        if t["name"] == "chosen" || t["name"] == "y" {
            t["shape"] = serde_json::json!([8]);
            t["bytes"] = 32.into();
        }
    }
    std::fs::write(&table_path, json.to_string()).unwrap();
    assert_verify_refuses(&model, &table_path, "tensor 'chosen' has Some(32) bytes");
    assert_verify_refuses(&model, &table_path, "the table lists taken If branches");
}

/// Found on torchvision's FCOS export, whose batched NMS sits in an `If` on the box count and
/// is then sliced: a Slice of a tensor typed only at the bounds (here `y`, from the `If` of
/// [`if_count`], [32] at the bound) must not become a view at an offset inside it, since that
/// offset would move with the count; before, the pass planned one and its own verifier
/// refused it ("a slice view involving a data-dependent size"), an internal error. By hand:
/// `part` = y[16:24] (64 bytes into y: a view the default 64-byte alignment would allow) is
/// an arena tensor of 8 float32 = 32 bytes of its own, marked `upper_bound` (it derives from
/// `chosen`), and the table verifies.
#[test]
fn a_slice_of_a_tensor_typed_only_at_the_bounds_is_no_view() {
    let mut sliced = if_count();
    let graph = sliced.graph.as_mut().unwrap();
    graph.node.push(node(
        "Slice",
        &["y", "sixteen", "twenty_four", "axis0"],
        &["part"],
    ));
    graph.node.push(node("Mul", &["part", "two"], &["z"]));
    graph.output = vec![ValueInfoProto {
        name: Some("z".into()),
        ..Default::default()
    }];
    graph.initializer.extend([
        int_init("sixteen", &[1], &[16]),
        int_init("twenty_four", &[1], &[24]),
        int_init("axis0", &[1], &[0]),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let (model, table_path) = plan_written(dir.path(), "if_slice", &sliced, &[]);
    let table = read_table(&table_path);
    let part = table.tensors.iter().find(|t| t.name == "part").unwrap();
    assert_eq!(part.bytes, Some(32));
    assert_eq!(part.alias_offset, None, "{part:?}");
    assert!(part.offset.is_some());
    assert!(part.symbolic.upper_bound);
    assert_verifies(&model, &table_path);
}
