//! QDQ models planned as int8 node units (`--qdq units`, the default): each DequantizeLinear →
//! operator → QuantizeLinear group runs as one integer kernel, so only its integer tensors take
//! arena bytes; the verifier refuses tables that break the units.

mod common;

use common::{
    assert_verifies, assert_verify_refuses, float_info, model, node, plan_written, raw_init,
    read_table, root, run_cli, with_ints,
};
use onnx_memplan::onnx::proto::{GraphProto, ModelProto, NodeProto, TensorProto};
use serde_json::Value;

/// x [1,4,8,8] float → Q → [DQ → Conv 3×3 pad 1 (uint8 weight and int32 bias through DQs) → Q]
/// → c_q [1,8,8,8] uint8 → DQ (read by the Relu and the Add: shared) → [Relu → Q] → r_q →
/// [DQ → Add(·, shared DQ) → Q] → a_q → DQ → y [1,8,8,8] float. Every activation has scale
/// `s` and zero point `z`.
fn qdq_chain() -> ModelProto {
    let (mut nodes, initializer) = conv_unit();
    nodes.extend([
        node("DequantizeLinear", &["c_q", "s", "z"], &["d_c"]),
        node("Relu", &["d_c"], &["r"]),
        node("QuantizeLinear", &["r", "s", "z"], &["r_q"]),
        node("DequantizeLinear", &["r_q", "s", "z"], &["d_r"]),
        node("Add", &["d_c", "d_r"], &["a"]),
        node("QuantizeLinear", &["a", "s", "z"], &["a_q"]),
        node("DequantizeLinear", &["a_q", "s", "z"], &["y"]),
    ]);
    model(GraphProto {
        name: Some("qdq_chain".into()),
        node: nodes,
        initializer,
        input: vec![float_info("x", &[1, 4, 8, 8])],
        output: vec![float_info("y", &[1, 8, 8, 8])],
        ..Default::default()
    })
}

/// The first unit of [`qdq_chain`] and [`qdq_reshape`], with the initializers of both: x
/// [1,4,8,8] float → Q → x_q → [DQ → Conv 3×3 pad 1 (uint8 weight w_q and int32 bias b_q
/// through DQs) → Q] → c_q [1,8,8,8] uint8; scale `s` and zero point `z`, the bias's scale
/// `s_b`.
fn conv_unit() -> (Vec<NodeProto>, Vec<TensorProto>) {
    let nodes = vec![
        node("QuantizeLinear", &["x", "s", "z"], &["x_q"]),
        node("DequantizeLinear", &["x_q", "s", "z"], &["d_x"]),
        node("DequantizeLinear", &["w_q", "s", "z"], &["d_w"]),
        node("DequantizeLinear", &["b_q", "s_b"], &["d_b"]),
        with_ints(
            node("Conv", &["d_x", "d_w", "d_b"], &["c"]),
            "pads",
            &[1, 1, 1, 1],
        ),
        node("QuantizeLinear", &["c", "s", "z"], &["c_q"]),
    ];
    let weights: Vec<u8> = (0..8 * 4 * 9).map(|i| (i * 37 % 256) as u8).collect();
    let bias: Vec<u8> = (0..8i32).flat_map(|i| (i * 5 - 20).to_le_bytes()).collect();
    let initializer = vec![
        raw_init("s", &[], 1, 0.05f32.to_le_bytes().to_vec()),
        raw_init("z", &[], 2, vec![128]),
        raw_init("s_b", &[], 1, 0.0025f32.to_le_bytes().to_vec()),
        raw_init("w_q", &[8, 4, 3, 3], 2, weights),
        raw_init("b_q", &[8], 6, bias),
    ];
    (nodes, initializer)
}

fn entry<'t>(table: &'t Value, name: &str) -> &'t Value {
    &table["tensors"][tensor_index(table, name)]
}

/// The position of tensor `name` in the table's `tensors`.
fn tensor_index(table: &Value, name: &str) -> usize {
    table["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .position(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("no tensor {name}"))
}

/// Worked by hand. Units: conv = {DQ_x, DQ_w, DQ_b, Conv, Q_c} at steps 1–5, relu = {Relu,
/// Q_r} at 7–8, add = {DQ_r, Add, Q_a} at 9–11; DQ_c (step 6) is shared by relu and add.
/// Planned (bytes; a unit reads until its last step, writes from its first; DQ_c's input
/// lives until add ends):
///   x 1024 [0,0], x_q 256 [0,5], c_q 512 [1,11], r_q 512 [7,11], a_q 512 [9,12],
///   y 2048 [12,12].
/// Live per step: 0: 1280; 1–5: 768; 6: 512; 7–8: 1024; 9–11: 1536; 12: a_q + y = 2560.
/// The peak 2560 is reachable (y and a_q alone at step 12), so arena = bound = 2560.
/// Run literally, step 8 holds d_c 2048 [6,10] + r 2048 [7,8] + r_q 512 [8,9] = 4608, the
/// largest step (Conv's step 4 holds d_x 1024 + d_w 1152 + d_b 64 + c 2048 = 4288 at most).
#[test]
fn a_chain_of_units_is_planned_at_its_integer_sizes() {
    let dir = tempfile::tempdir().unwrap();
    let (path, table_path) = plan_written(dir.path(), "chain", &qdq_chain(), &[]);
    let table: Value =
        serde_json::from_str(&std::fs::read_to_string(&table_path).unwrap()).unwrap();
    assert_eq!(table["options"]["qdq"], "units");
    assert_eq!(table["arenas"][0]["bytes"], 2560);
    assert_eq!(table["stats"]["lower_bound_bytes"], 2560);
    for (name, unit) in [
        ("d_x", "Conv_c"),
        ("d_w", "Conv_c"),
        ("d_b", "Conv_c"),
        ("c", "Conv_c"),
        ("d_c", "Relu_r"),
        ("r", "Relu_r"),
        ("d_r", "Add_a"),
        ("a", "Add_a"),
    ] {
        let t = entry(&table, name);
        assert_eq!(t["kind"], "fused", "{name}");
        assert_eq!(t["node_unit"], unit, "{name}");
        assert!(t["arena"].is_null() && t["offset"].is_null(), "{name}");
    }
    for (name, first, last) in [
        ("x_q", 0, 5),
        ("c_q", 1, 11),
        ("r_q", 7, 11),
        ("a_q", 9, 12),
    ] {
        let t = entry(&table, name);
        assert_eq!(
            (t["first"].as_u64(), t["last"].as_u64()),
            (Some(first), Some(last)),
            "{name}"
        );
        assert_eq!(t["kind"], "intermediate");
    }
    assert_verifies(&path, &table_path);

    let literal = dir.path().join("literal.memplan.onnx");
    let run = run_cli(&[
        "plan",
        path.to_str().unwrap(),
        "-o",
        literal.to_str().unwrap(),
        "--qdq",
        "literal",
        "--json",
    ]);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let summary: Value = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(summary["lower_bound_bytes"], 4608);
    assert_eq!(summary["qdq"]["mode"], "literal");
    assert_eq!(summary["qdq"]["literal_qdq_nodes"], 10);
    let table = read_table(&dir.path().join("literal.memplan.json"));
    assert!(table.tensors.iter().all(|t| t.kind != "fused"));
    assert_verifies(&path, &dir.path().join("literal.memplan.json"));
}

/// MobileNetV3's hard-swish as onnxruntime's QDQ quantizer writes it: x → Q → x_q [1,8,8,8]
/// uint8 → DQ_x → d_x, read by a HardSigmoid that forms no unit and by the Mul unit
/// {DQ_h, Mul, Q_m}: HardSigmoid(d_x) → Q → h_q → DQ_h → Mul(d_x, d_h) → Q → m_q → DQ → y.
fn hard_swish() -> ModelProto {
    let nodes = vec![
        node("QuantizeLinear", &["x", "s", "z"], &["x_q"]),
        node("DequantizeLinear", &["x_q", "s", "z"], &["d_x"]),
        node("HardSigmoid", &["d_x"], &["h"]),
        node("QuantizeLinear", &["h", "s", "z"], &["h_q"]),
        node("DequantizeLinear", &["h_q", "s", "z"], &["d_h"]),
        node("Mul", &["d_x", "d_h"], &["m"]),
        node("QuantizeLinear", &["m", "s", "z"], &["m_q"]),
        node("DequantizeLinear", &["m_q", "s", "z"], &["y"]),
    ];
    model(GraphProto {
        name: Some("hard_swish".into()),
        node: nodes,
        initializer: vec![
            raw_init("s", &[], 1, 0.05f32.to_le_bytes().to_vec()),
            raw_init("z", &[], 2, vec![128]),
        ],
        input: vec![float_info("x", &[1, 8, 8, 8])],
        output: vec![float_info("y", &[1, 8, 8, 8])],
        ..Default::default()
    })
}

/// Worked by hand. onnxruntime copies a DQ for each of its readers, so the Mul unit (steps
/// 4–6) reads its own copy of DQ_x: x_q lives until the unit ends, while d_x, which DQ_x
/// still makes for the HardSigmoid, is planned and dies at step 2. Bytes [first, last]:
///   x 2048 [0,0], x_q 512 [0,6], d_x 2048 [1,2], h 2048 [2,3] (in place of d_x, which dies
///   at its step), h_q 512 [3,6], m_q 512 [4,7], y 2048 [7,7]; d_h and m are fused.
/// Live per step: 0: 2560; 1: 2560; 2: 512 + 2048 = 2560; 3: 512 + 2048 + 512 = 3072;
/// 4–6: 1536; 7: 2560. Arena = bound = 3072. Had the Mul read d_x itself, d_x would live to
/// step 6 and step 3 would hold 512 + 2048 + 2048 + 512 = 5120.
#[test]
fn a_unit_reads_its_own_copy_of_a_dq_that_a_literal_node_reads() {
    let dir = tempfile::tempdir().unwrap();
    let (path, table_path) = plan_written(dir.path(), "hswish", &hard_swish(), &[]);
    let table: Value =
        serde_json::from_str(&std::fs::read_to_string(&table_path).unwrap()).unwrap();
    assert_eq!(table["arenas"][0]["bytes"], 3072);
    assert_eq!(table["stats"]["lower_bound_bytes"], 3072);
    for (name, kind, first, last) in [
        ("x_q", "intermediate", 0, 6),
        ("d_x", "intermediate", 1, 2),
        ("h", "intermediate", 2, 3),
        ("h_q", "intermediate", 3, 6),
        ("m_q", "intermediate", 4, 7),
    ] {
        let t = entry(&table, name);
        assert_eq!(t["kind"], kind, "{name}");
        assert_eq!(
            (t["first"].as_u64(), t["last"].as_u64()),
            (Some(first), Some(last)),
            "{name}"
        );
    }
    for name in ["d_h", "m"] {
        let t = entry(&table, name);
        assert_eq!(
            (&t["kind"], &t["node_unit"]),
            (&"fused".into(), &"Mul_m".into())
        );
    }
    assert_verifies(&path, &table_path);
    // x_q cut short at the HardSigmoid's Q, as if the unit read d_x: the verifier derives the
    // copy itself and refuses it.
    let cut_short = |t: &mut Value| {
        for e in t["tensors"].as_array_mut().unwrap() {
            if e["name"] == "x_q" {
                e["last"] = 3.into();
            }
        }
    };
    assert_refuses_edited(dir.path(), &path, &table, &cut_short, "x_q");
}

/// Writes `good` edited by `edit` beside the model and asserts `verify` refuses it, naming
/// `needle`.
fn assert_refuses_edited(
    dir: &std::path::Path,
    model: &std::path::Path,
    good: &Value,
    edit: &dyn Fn(&mut Value),
    needle: &str,
) {
    let mut bad = good.clone();
    edit(&mut bad);
    let bad_path = dir.join("bad.json");
    std::fs::write(&bad_path, serde_json::to_string(&bad).unwrap()).unwrap();
    assert_verify_refuses(model, &bad_path, needle);
}

/// The summary counts the Q/DQ nodes outside every unit: the input's Q and the output's DQ.
#[test]
fn the_summary_counts_the_nodes_run_literally() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("chain.onnx");
    common::write_model(&qdq_chain(), &path);
    let run = run_cli(&[
        "plan",
        path.to_str().unwrap(),
        "-o",
        dir.path().join("o.onnx").to_str().unwrap(),
    ]);
    assert!(run.status.success());
    let line = String::from_utf8_lossy(&run.stderr);
    assert!(
        line.contains("qdq units: 3 node units, 2 Q/DQ nodes run literally"),
        "{line}"
    );
}

/// Tables breaking the units: a fused tensor given bytes, a unit tensor listed as an
/// ordinary one, a unit split across the schedule.
#[test]
fn the_verifier_refuses_tables_that_break_units() {
    let dir = tempfile::tempdir().unwrap();
    let (path, table_path) = plan_written(dir.path(), "chain", &qdq_chain(), &[]);
    let good: Value = serde_json::from_str(&std::fs::read_to_string(&table_path).unwrap()).unwrap();
    let refuses = |edit: &dyn Fn(&mut Value), needle: &str| {
        assert_refuses_edited(dir.path(), &path, &good, edit, needle)
    };
    // The Conv's float output given arena bytes.
    refuses(
        &|t| {
            let i = tensor_index(t, "c");
            t["tensors"][i]["arena"] = 0.into();
            t["tensors"][i]["offset"] = 0.into();
        },
        "fused tensor 'c' is placed in an arena",
    );
    // The shared DQ's output listed as an ordinary tensor.
    refuses(
        &|t| {
            let i = tensor_index(t, "d_c");
            t["tensors"][i]["kind"] = "intermediate".into();
            t["tensors"][i].as_object_mut().unwrap().remove("node_unit");
        },
        "tensor 'd_c' is listed as intermediate but is fused",
    );
    // The weight's DQ (node 2) run first, away from its Conv: still a topological order.
    refuses(
        &|t| {
            t["schedule"] = serde_json::json!([2, 0, 1, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
        },
        "the nodes of QDQ unit 'Conv_c' run at steps",
    );
    // Run literally, every tensor must be planned: a table claiming `literal` with fused
    // tensors is refused.
    refuses(
        &|t| t["options"]["qdq"] = "literal".into(),
        "tensor 'c' is listed as fused but is intermediate",
    );
}

/// The QDQ MobileNetV2 of models/make_models.py plans within 1% of its QOperator form.
#[test]
fn qdq_mobilenet_plans_like_its_qoperator_form() {
    let (qdq, qop) = (
        root().join("models/mobilenet_v2_qdq.onnx"),
        root().join("models/mobilenet_v2_qop.onnx"),
    );
    if !qdq.exists() || !qop.exists() {
        eprintln!(
            "SKIPPED: models/mobilenet_v2_qdq.onnx or models/mobilenet_v2_qop.onnx is absent (models/make_models.py makes them)"
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let arena = |model: &std::path::Path, stem: &str| -> u64 {
        let out = dir.path().join(format!("{stem}.memplan.onnx"));
        let run = common::plan_to(model, &out, &[]);
        assert!(
            run.status.success(),
            "{}",
            String::from_utf8_lossy(&run.stderr)
        );
        let table = dir.path().join(format!("{stem}.memplan.json"));
        assert_verifies(model, &table);
        read_table(&table).arenas.iter().map(|a| a.bytes).sum()
    };
    let (units, qoperator) = (arena(&qdq, "qdq"), arena(&qop, "qop"));
    assert!(
        units as f64 <= qoperator as f64 * 1.01,
        "QDQ arena {units} bytes, QOperator {qoperator}"
    );
}

/// The chain stored as quantize_static writes it, weight DQs first: the schedule moves them
/// to their unit. Worked by hand: stored nodes 0 DQ_w, 1 DQ_b, 2 Q_x, 3 DQ_x, 4 Conv, 5 Q_c,
/// 6 DQ_c, 7 Relu, 8 Q_r, 9 DQ_r, 10 Add, 11 Q_a, 12 DQ_y. Q_x runs first (the conv unit waits
/// for x_q), then the conv unit in slot order DQ_x, DQ_w, DQ_b, Conv, Q_c, then the rest as
/// stored. The arena stays 2560 bytes, under the memory-aware order too (step 12 needs
/// a_q 512 + y 2048 in any order).
#[test]
fn weight_dqs_run_with_their_unit() {
    let mut m = qdq_chain();
    let g = m.graph.as_mut().unwrap();
    let (dq_w, dq_b) = (g.node.remove(2), g.node.remove(2));
    g.node.insert(0, dq_b);
    g.node.insert(0, dq_w);
    let dir = tempfile::tempdir().unwrap();
    for schedule in ["stored", "memory"] {
        let (path, table_path) = plan_written(dir.path(), schedule, &m, &["--schedule", schedule]);
        let table = read_table(&table_path);
        assert_eq!(
            table.schedule,
            [2, 3, 0, 1, 4, 5, 6, 7, 8, 9, 10, 11, 12],
            "{schedule}"
        );
        assert_eq!(table.arenas[0].bytes, 2560, "{schedule}");
        assert_verifies(&path, &table_path);
    }
}

/// x [1,256] float → Q → x_q int8 → DQ → d, read by two nodes that form no unit: Relu → y1
/// and Sigmoid → y2 (graph outputs).
fn shared_dq_of_literal_readers() -> ModelProto {
    model(GraphProto {
        name: Some("shared_dq".into()),
        node: vec![
            node("QuantizeLinear", &["x", "s", "z"], &["x_q"]),
            node("DequantizeLinear", &["x_q", "s", "z"], &["d"]),
            node("Relu", &["d"], &["y1"]),
            node("Sigmoid", &["d"], &["y2"]),
        ],
        input: vec![float_info("x", &[1, 256])],
        output: vec![float_info("y1", &[1, 256]), float_info("y2", &[1, 256])],
        initializer: vec![
            raw_init("s", &[], 1, 0.05f32.to_le_bytes().to_vec()),
            raw_init("z", &[], 3, vec![0]),
        ],
        ..Default::default()
    })
}

/// The split stage gives each reader of a DQ its own copy, so that tile copies of a unit keep
/// theirs; a reader that forms no unit then reads a float copy of its own. When the split
/// cuts no chain (here its work ends at once), the table is the plain plan's, made from the
/// model as given: the same tensors (x, x_q, d, y1, y2 and the two constants: no copy of d)
/// and the same arena.
#[test]
fn a_split_that_cuts_nothing_writes_the_plain_plan() {
    let dir = tempfile::tempdir().unwrap();
    let m = shared_dq_of_literal_readers();
    let (_, plain) = plan_written(dir.path(), "plain", &m, &[]);
    let split_args = ["--split", "auto", "--split-time", "0.0001"];
    let (_, split) = plan_written(dir.path(), "split", &m, &split_args);
    let (plain, split) = (read_table(&plain), read_table(&split));
    assert_eq!(split.splits.as_ref().map(|s| s.chains.len()), Some(0));
    let names = |t: &onnx_memplan::emit::Table| {
        let mut n: Vec<String> = t.tensors.iter().map(|t| t.name.clone()).collect();
        n.sort();
        n
    };
    assert_eq!(names(&split), ["d", "s", "x", "x_q", "y1", "y2", "z"]);
    assert_eq!(names(&plain), names(&split));
    let arena = |t: &onnx_memplan::emit::Table| t.arenas.iter().map(|a| a.bytes).sum::<u64>();
    assert_eq!(arena(&plain), arena(&split));
}

/// x [1,4,8,8] float → Q → x_q → [DQ → Conv 3×3 pad 1 (uint8 weight, int32 bias) → Q] → c_q
/// [1,8,8,8] uint8 → [DQ → Reshape to [1,512] → Q] → f_q [1,512] uint8 → DQ → y. The Reshape
/// unit's DQ and Q share scale `s` and zero point `z`, so it moves no byte.
fn qdq_reshape() -> ModelProto {
    let (mut nodes, mut initializer) = conv_unit();
    nodes.extend([
        node("DequantizeLinear", &["c_q", "s", "z"], &["d_c"]),
        node("Reshape", &["d_c", "shape"], &["f"]),
        node("QuantizeLinear", &["f", "s", "z"], &["f_q"]),
        node("DequantizeLinear", &["f_q", "s", "z"], &["y"]),
    ]);
    let shape: Vec<u8> = [1i64, 512].iter().flat_map(|d| d.to_le_bytes()).collect();
    initializer.push(raw_init("shape", &[2], 7, shape));
    model(GraphProto {
        name: Some("qdq_reshape".into()),
        node: nodes,
        initializer,
        input: vec![float_info("x", &[1, 4, 8, 8])],
        output: vec![float_info("y", &[1, 512])],
        ..Default::default()
    })
}

/// Worked by hand, with `--exclude-io`. Units: conv = {DQ_x, DQ_w, DQ_b, Conv, Q_c} at steps
/// 1–5, reshape = {DQ_c, Reshape, Q_f} at 6–8. Planned: x_q 256 [0,5], c_q 512 [1,8],
/// f_q 512 [6,9]. onnxruntime drops the reshape unit's Q/DQ pair (same scale and zero
/// point) and reshapes the integers, which a Reshape does in place: f_q is c_q's bytes. Live
/// per step: 0: 256; 1–5: 768; 6–9: 512 (c_q and f_q one buffer); arena 768. Were f_q a
/// buffer of its own, steps 6–8 would hold c_q + f_q = 1024.
#[test]
fn a_reshape_unit_gives_its_output_its_inputs_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let extra = ["--exclude-io"];
    let (path, table_path) = plan_written(dir.path(), "reshape", &qdq_reshape(), &extra);
    let table: Value =
        serde_json::from_str(&std::fs::read_to_string(&table_path).unwrap()).unwrap();
    assert_eq!(entry(&table, "f")["kind"], "fused");
    assert_eq!(entry(&table, "d_c")["kind"], "fused");
    let (c_q, f_q) = (entry(&table, "c_q"), entry(&table, "f_q"));
    assert_eq!(f_q["alias_of"], "c_q");
    assert_eq!(f_q["offset"], c_q["offset"]);
    assert_eq!(table["arenas"][0]["bytes"], 768);
    assert_verifies(&path, &table_path);
    // The verifier derives the alias from the unit: a claim on another integer tensor, or
    // at another offset, is refused.
    let good = table.clone();
    let f = tensor_index(&good, "f_q");
    assert_refuses_edited(
        dir.path(),
        &path,
        &good,
        &|t| t["tensors"][f]["alias_of"] = "x_q".into(),
        "not the integer input of its QDQ unit",
    );
    assert_refuses_edited(
        dir.path(),
        &path,
        &good,
        &|t| t["tensors"][f]["offset"] = 256.into(),
        "alias_of 'c_q'",
    );
}
