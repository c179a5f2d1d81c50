//! Bad input gets exit code 2 and a one-line message naming the file and the node or tensor;
//! the input is never modified and no partial output is written.

mod common;

use common::*;
use onnx_memplan::onnx::proto::{
    GraphProto, OperatorSetIdProto, StringStringEntryProto, tensor_proto::DataLocation,
};

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn assert_input_error(out: &std::process::Output, needles: &[&str]) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(2), "stderr: {err}");
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    for n in needles {
        assert!(err.contains(n), "'{n}' missing from: {err}");
    }
}

#[test]
fn not_a_protobuf() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("junk.onnx");
    std::fs::write(&path, b"\xff\xff\xff this is not protobuf").unwrap();
    let out = run_cli(&["plan", path.to_str().unwrap()]);
    assert_input_error(&out, &["junk.onnx", "not a valid ONNX model"]);
    assert!(!dir.path().join("junk.memplan.onnx").exists());
}

#[test]
fn truncated_file() {
    let dir = tempfile::tempdir().unwrap();
    let full = root().join("models/mobilenet_v2.onnx");
    let bytes = std::fs::read(&full).unwrap();
    let path = dir.path().join("cut.onnx");
    std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    let out = run_cli(&["plan", path.to_str().unwrap()]);
    assert_input_error(&out, &["cut.onnx"]);
}

#[test]
fn unknown_tensor_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = chain_model();
    m.graph.as_mut().unwrap().node[1].input[0] = "ghost".into();
    let path = dir.path().join("ghost.onnx");
    write_model(&m, &path);
    let out = run_cli(&["plan", path.to_str().unwrap()]);
    assert_input_error(&out, &["ghost.onnx", "'ghost'", "Sigmoid"]);
}

#[test]
fn cycle_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let m = model(GraphProto {
        node: vec![
            node("Relu", &["b"], &["a"]),
            node("Relu", &["a"], &["b"]),
            node("Relu", &["x"], &["y"]),
        ],
        input: vec![float_info("x", &[4])],
        output: vec![float_info("y", &[4])],
        ..Default::default()
    });
    let path = dir.path().join("cycle.onnx");
    write_model(&m, &path);
    let out = run_cli(&["plan", path.to_str().unwrap()]);
    assert_input_error(&out, &["cycle.onnx", "cycle", "Relu"]);
}

#[test]
fn missing_external_data_file() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = chain_model();
    let mut w = float_init("w", &[1, 8], &[0.0; 8]);
    w.raw_data = None;
    w.data_location = Some(DataLocation::External as i32);
    w.external_data = vec![StringStringEntryProto {
        key: Some("location".into()),
        value: Some("weights.bin".into()),
    }];
    let g = m.graph.as_mut().unwrap();
    g.initializer.push(w);
    g.node[3].input[1] = "w".into();
    let path = dir.path().join("ext.onnx");
    write_model(&m, &path);
    let out = run_cli(&["plan", path.to_str().unwrap()]);
    assert_input_error(&out, &["ext.onnx", "'w'", "weights.bin"]);
}

#[test]
fn refuses_to_overwrite_input() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("chain.onnx");
    write_model(&chain_model(), &path);
    let before = std::fs::read(&path).unwrap();
    let out = run_cli(&["plan", path.to_str().unwrap(), "-o", path.to_str().unwrap()]);
    assert_input_error(&out, &["refusing to overwrite"]);
    assert_eq!(std::fs::read(&path).unwrap(), before);
}

#[test]
fn unbound_symbol_names_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let path = root().join("models/bert_tiny.onnx");
    let out_path = dir.path().join("b.onnx");
    let out = run_cli(&[
        "plan",
        path.to_str().unwrap(),
        "-o",
        out_path.to_str().unwrap(),
    ]);
    assert_input_error(&out, &["bert_tiny.onnx", "--dim"]);
    assert!(!out_path.exists());
}

/// A bit-flipped model seen in the wild: a `Constant` node with a second output. The operator
/// defines one output, so this is bad input (exit 2) naming the node, not an internal error.
#[test]
fn extra_output_of_a_constant_is_named() {
    use onnx_memplan::onnx::proto::AttributeProto;
    let dir = tempfile::tempdir().unwrap();
    let mut m = chain_model();
    let graph = m.graph.as_mut().unwrap();
    let mut constant = node("Constant", &[], &["k", "k2"]);
    constant.name = Some("broken".into());
    constant.attribute.push(AttributeProto {
        name: Some("value".into()),
        r#type: Some(4),
        t: Some(Box::new(float_init("", &[1, 8], &[1.0; 8]))),
        ..Default::default()
    });
    graph.node.insert(0, constant);
    graph.node[4].input[1] = "k".into();
    let path = dir.path().join("extra.onnx");
    write_model(&m, &path);
    let out = run_cli(&["plan", path.to_str().unwrap()]);
    assert_input_error(
        &out,
        &[
            "extra.onnx",
            "node 'broken' (Constant)",
            "2 outputs",
            "'k2'",
        ],
    );
    assert!(!stderr(&out).contains("internal"));
}

/// `-o` and `--table` naming one file: the second write would replace the annotated model
/// (it used to exit 0 with the model lost). Refused before anything is written.
#[test]
fn two_outputs_naming_one_file_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("chain.onnx");
    write_model(&chain_model(), &path);
    let same = dir.path().join("ok.onnx");
    let out = run_cli(&[
        "plan",
        path.to_str().unwrap(),
        "-o",
        same.to_str().unwrap(),
        "--table",
        same.to_str().unwrap(),
    ]);
    assert_input_error(&out, &["ok.onnx", "-o", "--table", "same file"]);
    assert!(!same.exists());
    // The same file reached through `..` is the same file.
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let svg = dir.path().join("sub/../ok.svg");
    let out = run_cli(&[
        "plan",
        path.to_str().unwrap(),
        "-o",
        same.to_str().unwrap(),
        "--svg",
        dir.path().join("ok.svg").to_str().unwrap(),
        "--html",
        svg.to_str().unwrap(),
    ]);
    assert_input_error(&out, &["--svg", "--html", "same file"]);
    assert!(!same.exists());
}

/// A dimension of 0 makes empty tensors: `--dim batch=0` used to plan "arena 0 bytes".
#[test]
fn a_dimension_of_zero_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = root().join("models/bert_tiny.onnx");
    let out_path = dir.path().join("b.onnx");
    for dim in ["batch=0", "sequence=0..8"] {
        let out = run_cli(&[
            "plan",
            path.to_str().unwrap(),
            "-o",
            out_path.to_str().unwrap(),
            "--dim",
            dim,
        ]);
        assert_eq!(out.status.code(), Some(2), "{dim}: {}", stderr(&out));
        assert!(stderr(&out).contains("≥ 1"), "{dim}: {}", stderr(&out));
        assert!(!out_path.exists());
    }
}

/// A `--dim` name the model lacks is a warning listing the model's symbols (bert_tiny declares
/// `batch` and `sequence`), and the plan is still written.
#[test]
fn an_unknown_dim_name_is_a_warning_listing_the_symbols() {
    let dir = tempfile::tempdir().unwrap();
    let path = root().join("models/bert_tiny.onnx");
    let out_path = dir.path().join("b.onnx");
    let out = run_cli(&[
        "plan",
        path.to_str().unwrap(),
        "-o",
        out_path.to_str().unwrap(),
        "--dim",
        "batch=1",
        "--dim",
        "sequence=8",
        "--dim",
        "nosuch=3",
    ]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let warning = err
        .lines()
        .find(|l| l.contains("nosuch"))
        .unwrap_or_else(|| panic!("no warning for nosuch: {err}"));
    assert!(warning.starts_with("warning:"), "{warning}");
    assert!(
        warning.contains("batch") && warning.contains("sequence"),
        "{warning}"
    );
    assert!(out_path.exists());
}

#[test]
fn conformance_without_its_folder_says_where_it_looked() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nowhere");
    let out = run_cli(&["conformance", missing.to_str().unwrap()]);
    assert_input_error(&out, &["nowhere", "expected.jsonl"]);
}

#[test]
fn an_operator_without_a_rule_suggests_the_declared_types() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = model(GraphProto {
        node: vec![node("Mystery", &["x"], &["y"])],
        input: vec![float_info("x", &[1, 8])],
        output: vec![float_info("y", &[1, 8])],
        ..Default::default()
    });
    m.graph.as_mut().unwrap().node[0].domain = Some("com.example".into());
    m.opset_import.push(OperatorSetIdProto {
        domain: Some("com.example".into()),
        version: Some(1),
    });
    let path = dir.path().join("mystery.onnx");
    write_model(&m, &path);
    let out = run_cli(&["plan", path.to_str().unwrap()]);
    assert_input_error(&out, &["no shape rule", "--trust-value-info"]);
    // And the suggestion works.
    let out = run_cli(&["plan", path.to_str().unwrap(), "--trust-value-info", "-q"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

#[test]
fn help_lists_every_exit_code_and_whole_sentences() {
    let out = run_cli(&["--help"]);
    let help = String::from_utf8_lossy(&out.stdout);
    for code in ["0  ", "1  ", "2  ", "3  solve", "4  solve"] {
        assert!(help.contains(code), "exit code '{code}' missing: {help}");
    }
    let out = run_cli(&["plan", "--help"]);
    let help = String::from_utf8_lossy(&out.stdout);
    let overhead = help
        .split("--split-overhead")
        .nth(1)
        .and_then(|t| t.split("\n      --").next())
        .unwrap_or_default();
    let text = overhead.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        !text.contains("model's [default") && text.contains("total multiply-accumulates"),
        "{text}"
    );
}

#[test]
fn gitignore_covers_python_builds() {
    let text = std::fs::read_to_string(root().join(".gitignore")).unwrap();
    for entry in [".venv/", "dist/"] {
        assert!(text.lines().any(|l| l == entry), "{entry} missing");
    }
}
