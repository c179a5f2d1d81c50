//! `plan --dim NAME=LO..HI` end to end on the real models: the table over the range verifies
//! (exhaustively for bert_tiny's 128 sequence lengths, symbolically for resnet_small's
//! 129 × 129 image sizes), a tampered offset is refused, and `--at` writes fixed tables that
//! the fixed verifier accepts, whose arenas are compared with plans made for each size alone
//! (`plan --dim sequence=V`, the baseline).

mod common;

use std::path::{Path, PathBuf};

use common::{assert_verifies, assert_verify_refuses, read_table, root, run_cli};

fn plan(model: &Path, out: &Path, args: &[&str]) {
    let mut all = vec![
        "plan",
        model.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "-q",
    ];
    all.extend(args);
    let run = run_cli(&all);
    assert!(
        run.status.success(),
        "{all:?}: {}",
        String::from_utf8_lossy(&run.stderr)
    );
}

fn table_of(out: &Path) -> PathBuf {
    out.with_extension("json")
}

/// Rewrites one tensor's `offset_expr` in the table at `path` to `0`, the one most likely to
/// collide: the first arena tensor placed above another.
fn tamper(path: &Path) {
    let mut json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let tensors = json["tensors"].as_array_mut().unwrap();
    let victim = tensors
        .iter_mut()
        .find(|t| {
            t["offset_expr"]
                .as_str()
                .is_some_and(|e| e.starts_with("max("))
        })
        .expect("a tensor placed above others");
    victim["offset_expr"] = "0".into();
    std::fs::write(path, serde_json::to_string_pretty(&json).unwrap()).unwrap();
}

#[test]
fn bert_over_sequence_lengths_verifies_and_evaluates_tightly() {
    let dir = tempfile::tempdir().unwrap();
    let model = root().join("models/bert_tiny.onnx");
    let out = dir.path().join("bert.memplan.onnx");
    let range = ["--dim", "batch=1", "--dim", "sequence=1..128"];
    plan(&model, &out, &range);
    let table = read_table(&table_of(&out));
    let parametric = table.parametric.as_ref().expect("a parametric section");
    assert_eq!(parametric.proof, "exhaustive");
    assert!(table.tensors.iter().all(|t| t.offset.is_none()
        || (t.symbolic.offset_expr.is_some() && t.symbolic.bytes_expr.is_some())));
    // The input ids are int64 [1, sequence]: 8·sequence bytes, by hand.
    let ids = table
        .tensors
        .iter()
        .find(|t| t.name == "input_ids")
        .unwrap();
    assert_eq!(ids.symbolic.bytes_expr.as_deref(), Some("8*sequence"));
    assert_eq!(
        ids.symbolic.shape_expr,
        Some(vec!["1".to_string(), "sequence".to_string()])
    );
    assert_verifies(&model, &table_of(&out));

    for v in [1, 2, 16, 64, 128] {
        let at = dir.path().join(format!("at{v}.memplan.onnx"));
        let point = format!("sequence={v}");
        let mut args = range.to_vec();
        args.extend(["--at", point.as_str()]);
        plan(&model, &at, &args);
        assert_verifies(&model, &table_of(&at));
        let fixed = read_table(&table_of(&at));
        assert_eq!(fixed.options.dims["sequence"], v);
        assert!(fixed.parametric.is_none() && fixed.options.ranges.is_empty());
        let alone = dir.path().join(format!("alone{v}.memplan.onnx"));
        plan(&model, &alone, &["--dim", "batch=1", "--dim", &point]);
        let baseline = read_table(&table_of(&alone)).arenas[0].bytes;
        let evaluated = fixed.arenas[0].bytes;
        assert!(
            evaluated as f64 <= 1.05 * baseline as f64,
            "sequence {v}: {evaluated} bytes against {baseline} planned alone"
        );
    }

    tamper(&table_of(&out));
    assert_verify_refuses(&model, &table_of(&out), "overlap");
}

#[test]
fn resnet_over_image_sizes_is_proven_symbolically() {
    let dir = tempfile::tempdir().unwrap();
    let model = common::symbolic_dims::symbolic_image(&root().join("models/resnet_small.onnx"));
    let out = dir.path().join("resnet.memplan.onnx");
    let range = [
        "--dim",
        "batch=1",
        "--dim",
        "H=32..160",
        "--dim",
        "W=32..160",
    ];
    plan(&model, &out, &range);
    let table = read_table(&table_of(&out));
    // 129 × 129 points are more than the exhaustive limit of 4096.
    assert_eq!(table.parametric.as_ref().unwrap().proof, "symbolic");
    // The stride-2 stem halves H: a floor quotient appears in some shape.
    assert!(table.tensors.iter().any(|t| {
        t.symbolic
            .shape_expr
            .iter()
            .flatten()
            .any(|d| d.contains("//2"))
    }));
    assert_verifies(&model, &table_of(&out));
    let at = dir.path().join("at.memplan.onnx");
    let mut args = range.to_vec();
    args.extend(["--at", "H=77", "--at", "W=45"]);
    plan(&model, &at, &args);
    assert_verifies(&model, &table_of(&at));

    tamper(&table_of(&out));
    assert_verify_refuses(&model, &table_of(&out), "neither is placed above");
}

#[test]
fn bad_range_options_are_input_errors() {
    let dir = tempfile::tempdir().unwrap();
    let model = root().join("models/bert_tiny.onnx");
    let out = dir.path().join("x.memplan.onnx");
    let cases: [(&[&str], &str); 4] = [
        (
            &[
                "--dim",
                "batch=1",
                "--dim",
                "sequence=8",
                "--at",
                "sequence=8",
            ],
            "--at",
        ),
        (
            &[
                "--dim",
                "batch=1",
                "--dim",
                "sequence=1..128",
                "--at",
                "sequence=200",
            ],
            "outside",
        ),
        (
            &[
                "--dim",
                "batch=1",
                "--dim",
                "sequence=1..128",
                "--at",
                "batch=1",
            ],
            "not planned over a range",
        ),
        (
            &[
                "--dim",
                "batch=1",
                "--dim",
                "sequence=1..128",
                "--split",
                "auto",
            ],
            "one size",
        ),
    ];
    for (args, needle) in cases {
        let mut all = vec!["plan", model.to_str().unwrap(), "-o", out.to_str().unwrap()];
        all.extend(args);
        let run = run_cli(&all);
        let err = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(!out.exists(), "{args:?} wrote a file");
    }
}

/// The evaluators of docs/eval (Python, and C when a compiler is present) read the table over
/// the range and must give, at sequence = 37, the offsets and arena of the fixed table that
/// `--at sequence=37` wrote and the fixed verifier accepted.
#[test]
fn the_documented_evaluators_agree_with_at() {
    let dir = tempfile::tempdir().unwrap();
    let model = root().join("models/bert_tiny.onnx");
    let out = dir.path().join("bert.memplan.onnx");
    let at = dir.path().join("at.memplan.onnx");
    let range = ["--dim", "batch=1", "--dim", "sequence=1..128"];
    plan(&model, &out, &range);
    let mut args = range.to_vec();
    args.extend(["--at", "sequence=37"]);
    plan(&model, &at, &args);
    let range_table = read_table(&table_of(&out));
    let fixed = read_table(&table_of(&at));
    let mut want: Vec<String> = Vec::new();
    for (k, t) in fixed.tensors.iter().enumerate() {
        if let Some(offset) = t.offset {
            let size = t.bytes.unwrap();
            want.push(format!("{k} {offset} {size}"));
        }
    }
    want.push(format!("arena {}", fixed.arenas[0].bytes));

    let python = std::process::Command::new("python3")
        .arg(root().join("docs/eval/memplan_eval.py"))
        .arg(table_of(&out))
        .arg("sequence=37")
        .output();
    match python {
        Ok(run) if run.status.success() => {
            let names: Vec<String> = String::from_utf8_lossy(&run.stdout)
                .lines()
                .map(|l| {
                    let parts: Vec<&str> = l.splitn(3, ' ').collect();
                    if parts[0] == "arena" {
                        l.to_string()
                    } else {
                        let k = range_table
                            .tensors
                            .iter()
                            .position(|t| t.name == parts[2])
                            .unwrap();
                        format!("{k} {} {}", parts[0], parts[1])
                    }
                })
                .collect();
            assert_eq!(names, want, "docs/eval/memplan_eval.py");
        }
        Ok(run) => panic!("memplan_eval.py: {}", String::from_utf8_lossy(&run.stderr)),
        Err(_) => eprintln!("SKIPPED the Python evaluator: no python3 on PATH"),
    }

    let binary = dir.path().join("memplan_eval");
    let compiled = std::process::Command::new("cc")
        .args(["-O2", "-o"])
        .arg(&binary)
        .arg(root().join("docs/eval/memplan_eval.c"))
        .status();
    if !compiled.is_ok_and(|s| s.success()) {
        eprintln!("SKIPPED the C evaluator: no working C compiler (cc)");
        return;
    }
    let mut listing = format!("{} sequence=37\n", range_table.options.alignment);
    for (k, t) in range_table.tensors.iter().enumerate() {
        if let (Some(b), Some(o)) = (&t.symbolic.bytes_expr, &t.symbolic.offset_expr) {
            listing.push_str(&format!("{k}|{b}|{o}\n"));
        }
    }
    listing.push_str(&format!(
        "arena|{}\n",
        range_table.parametric.as_ref().unwrap().arena_expr
    ));
    let listing_path = dir.path().join("listing.txt");
    std::fs::write(&listing_path, listing).unwrap();
    let run = std::process::Command::new(&binary)
        .stdin(std::fs::File::open(&listing_path).unwrap())
        .output()
        .unwrap();
    assert!(run.status.success());
    let got: Vec<String> = String::from_utf8_lossy(&run.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(got, want, "docs/eval/memplan_eval.c");
}

/// The hand-worked case. `x: float32[s, 1]` and `xt: float32[1, s]` are inputs and `y`
/// the output, all outside the arena (`--exclude-io`); the arena holds `a = Relu(x)` (4·s
/// bytes, live over steps 0..2) and `b = Mul(a, xt)` (4·s·s bytes, steps 1..2): crossing
/// lifetimes, so one sits on the other. Worked by hand with alignment 1: the one placed first
/// is at 0 and the other at its size, so the offsets are {b: 0, a: 4·s·s} (larger first) or
/// {a: 0, b: 4·s}, and the arena is 4·s + 4·s·s at every s, which no plan for one s can beat
/// (both are live at step 1). Checked at every s in 1..64 through `--at` (evaluated by the
/// tool, then checked by the fixed verifier).
#[test]
fn s_and_s_squared_with_crossing_lifetimes_by_hand() {
    let dir = tempfile::tempdir().unwrap();
    let path = crossing_model(dir.path());
    let out = dir.path().join("crossing.memplan.onnx");
    let range = CROSSING_RANGE;
    plan(&path, &out, &range);
    assert_verifies(&path, &table_of(&out));
    let table = read_table(&table_of(&out));
    let index = |n: &str| table.tensors.iter().position(|t| t.name == n).unwrap();
    let (a, b) = (&table.tensors[index("a")], &table.tensors[index("b")]);
    assert_eq!(a.symbolic.bytes_expr.as_deref(), Some("4*s"));
    assert_eq!(b.symbolic.bytes_expr.as_deref(), Some("4*s*s"));
    let b_first = b.symbolic.offset_expr.as_deref() == Some("0");
    if b_first {
        assert_eq!(a.symbolic.offset_expr, Some(format!("${}", index("b"))));
    } else {
        assert_eq!(a.symbolic.offset_expr.as_deref(), Some("0"));
        assert_eq!(b.symbolic.offset_expr, Some(format!("${}", index("a"))));
    }
    for s in 1..=64u64 {
        let at = dir.path().join(format!("at{s}.memplan.onnx"));
        let point = format!("s={s}");
        let mut args = range.to_vec();
        args.extend(["--at", point.as_str()]);
        plan(&path, &at, &args);
        let fixed = read_table(&table_of(&at));
        let offset = |n: &str| fixed.tensors[index(n)].offset.unwrap();
        let (want_a, want_b) = if b_first { (4 * s * s, 0) } else { (0, 4 * s) };
        assert_eq!((offset("a"), offset("b")), (want_a, want_b), "s = {s}");
        assert_eq!(fixed.arenas[0].bytes, 4 * s + 4 * s * s, "s = {s}");
    }
}

/// The range options of the crossing model's plan (64 points: the exhaustive proof).
const CROSSING_RANGE: [&str; 5] = ["--dim", "s=1..64", "--alignment", "1", "--exclude-io"];

/// Writes the crossing model of [`s_and_s_squared_with_crossing_lifetimes_by_hand`] into `dir`.
fn crossing_model(dir: &Path) -> PathBuf {
    use common::{model, node, symbolic_float_info as info, write_model};
    use onnx_memplan::onnx::proto::GraphProto;

    let graph = GraphProto {
        name: Some("crossing".into()),
        node: vec![
            node("Relu", &["x"], &["a"]),
            node("Mul", &["a", "xt"], &["b"]),
            node("Add", &["b", "a"], &["y"]),
        ],
        input: vec![info("x", &["s", "1"]), info("xt", &["1", "s"])],
        output: vec![info("y", &["s", "s"])],
        ..Default::default()
    };
    let path = dir.join("crossing.onnx");
    write_model(&model(graph), &path);
    path
}

/// The exhaustive proof evaluates each offset after the ends it names, and refuses offsets
/// that have no value. On the crossing model `a` and `b` are the only arena tensors, one on
/// the other: the plan as written verifies. Rewriting the offsets to `a: $b` and `b: $a`
/// makes each need the other's end first, a cycle, so neither has a value at any s (by hand)
/// and the verifier must say so (the fixed offsets, which the fixed verifier checks at s = 64,
/// are untouched).
#[test]
fn exhaustive_proof_refuses_offsets_that_name_each_other() {
    let dir = tempfile::tempdir().unwrap();
    let path = crossing_model(dir.path());
    let out = dir.path().join("crossing.memplan.onnx");
    plan(&path, &out, &CROSSING_RANGE);
    let table_path = table_of(&out);
    assert_verifies(&path, &table_path);
    let table = read_table(&table_path);
    assert_eq!(table.parametric.as_ref().unwrap().proof, "exhaustive");
    let index = |n: &str| table.tensors.iter().position(|t| t.name == n).unwrap();
    let (a, b) = (index("a"), index("b"));
    let mut json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&table_path).unwrap()).unwrap();
    json["tensors"][a]["offset_expr"] = format!("${b}").into();
    json["tensors"][b]["offset_expr"] = format!("${a}").into();
    std::fs::write(&table_path, serde_json::to_string_pretty(&json).unwrap()).unwrap();
    assert_verify_refuses(&path, &table_path, "offset_expr has no value");
}

/// `--schedule memory` over a range, worked by hand. x: [s, 64] float32 (inputs and outputs
/// excluded, alignment 1); a1 = 2x and b1 = 3x (256·s bytes each), a2 and b2 their sums
/// ([1, 1], 4 bytes each), y = a2 + b2. Stored order a1, b1, a2, b2, y: at a2 the live tensors
/// are a1, b1 and a2, 512·s + 4 bytes. Summing each product before making the other (a1, a2,
/// b1, b2, y) leaves at most one product live: the peak is at b2, with b1, a2 and b2,
/// 256·s + 8 bytes. Both plans use that order at every size.
#[test]
fn a_memory_schedule_over_a_range_by_hand() {
    use common::{float_init, model, node, symbolic_float_info as info, write_model};
    use onnx_memplan::onnx::proto::GraphProto;

    let dir = tempfile::tempdir().unwrap();
    let graph = GraphProto {
        name: Some("two_sums".into()),
        node: vec![
            node("Mul", &["x", "two"], &["a1"]),
            node("Mul", &["x", "three"], &["b1"]),
            node("ReduceSum", &["a1"], &["a2"]),
            node("ReduceSum", &["b1"], &["b2"]),
            node("Add", &["a2", "b2"], &["y"]),
        ],
        input: vec![info("x", &["s", "64"])],
        output: vec![info("y", &["1", "1"])],
        initializer: vec![
            float_init("two", &[], &[2.0]),
            float_init("three", &[], &[3.0]),
        ],
        ..Default::default()
    };
    let path = dir.path().join("two_sums.onnx");
    write_model(&model(graph), &path);
    let range = ["--dim", "s=1..64", "--alignment", "1", "--exclude-io"];
    let stored = dir.path().join("stored.memplan.onnx");
    plan(&path, &stored, &range);
    let stored = read_table(&table_of(&stored));
    assert_eq!(stored.arenas[0].bytes, 512 * 64 + 4);

    let out = dir.path().join("memory.memplan.onnx");
    let memory = [&range[..], &["--schedule", "memory"]].concat();
    plan(&path, &out, &memory);
    assert_verifies(&path, &table_of(&out));
    let table = read_table(&table_of(&out));
    assert_ne!(table.schedule, stored.schedule);
    assert_eq!(table.arenas[0].bytes, 256 * 64 + 8);
    assert_eq!(
        table.parametric.as_ref().unwrap().arena_at_max,
        256 * 64 + 8
    );
    for s in [1u64, 5, 37] {
        let at = dir.path().join(format!("at{s}.memplan.onnx"));
        let point = format!("s={s}");
        plan(
            &path,
            &at,
            &[&memory[..], &["--at", point.as_str()]].concat(),
        );
        assert_verifies(&path, &table_of(&at));
        let fixed = read_table(&table_of(&at));
        assert_eq!(fixed.schedule, table.schedule, "s = {s}");
        assert_eq!(fixed.arenas[0].bytes, 256 * s + 8, "s = {s}");
    }
}

/// A range over a symbol no size depends on (unet_small's input is 1×3×128×128: `foo` names
/// nothing) plans as one size, says so, and loses nothing: before, the plan over the range gave
/// up slice sharing for offsets that never move, and unet_small's arena grew from 4,718,592 B
/// to 6,291,456 B. An `--at` outside the range is still refused.
#[test]
fn a_range_no_size_depends_on_plans_as_one_size() {
    let dir = tempfile::tempdir().unwrap();
    let model = root().join("models/unet_small.onnx");
    let fixed = dir.path().join("fixed.memplan.onnx");
    plan(&model, &fixed, &[]);
    let ranged = dir.path().join("ranged.memplan.onnx");
    let over_foo = |at: &[&str]| {
        let mut args = vec![
            "plan",
            model.to_str().unwrap(),
            "-o",
            ranged.to_str().unwrap(),
            "--dim",
            "foo=1..3",
        ];
        args.extend(at);
        run_cli(&args)
    };
    let run = over_foo(&[]);
    assert!(run.status.success());
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(
        err.contains("no tensor's size depends on foo: planned as one size"),
        "{err}"
    );
    let arena = |t: &onnx_memplan::emit::Table| t.arenas.iter().map(|a| a.bytes).sum::<u64>();
    let (a, b) = (
        read_table(&table_of(&fixed)),
        read_table(&table_of(&ranged)),
    );
    assert_eq!(arena(&b), arena(&a));
    assert!(b.options.ranges.is_empty() && b.parametric.is_none());
    assert_verifies(&model, &table_of(&ranged));
    assert_eq!(over_foo(&["--at", "foo=9"]).status.code(), Some(2));
}
