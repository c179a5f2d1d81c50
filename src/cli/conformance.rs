//! `onnx-memplan conformance`: runs shape inference over the ONNX node conformance tests and
//! compares every output's dtype and shape with what a conforming runtime produced.
//!
//! Uses only the library's public API (`crate::...`), so tests can include this file too.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

use crate::infer::{InferOptions, infer_model};
use crate::ir::{DType, Dim, Model, ValueType};
use crate::onnx::proto::{ModelProto, tensor_proto::DataType};
use anyhow::{Context, Result};
use serde::Deserialize;

/// Arguments of `onnx-memplan conformance`.
#[derive(clap::Args, Debug, Clone)]
pub struct ConformanceArgs {
    /// Folder holding `expected.jsonl` and the test models.
    #[arg(default_value = "../shared/conformance/onnx-node")]
    pub dir: PathBuf,
    /// Write each failing test with its reason to this file.
    #[arg(long)]
    pub failures: Option<PathBuf>,
    /// Fail (exit 1) when fewer tests pass than the integer in this file.
    #[arg(long)]
    pub floor: Option<PathBuf>,
}

/// One line of `expected.jsonl`.
#[derive(Deserialize)]
struct Case {
    test: String,
    model: String,
    op_types: Vec<String>,
    inputs: Vec<Io>,
    outputs: Vec<Io>,
}

/// A recorded input or output value (or a sequence/optional element).
#[derive(Deserialize)]
struct Io {
    #[serde(default)]
    name: String,
    #[serde(default = "tensor_kind")]
    kind: String,
    elem_type: Option<String>,
    shape: Option<Vec<i64>>,
    #[serde(default)]
    elements: Vec<Io>,
    element: Option<Box<Io>>,
}

fn tensor_kind() -> String {
    "tensor".to_string()
}

/// Overall result of a run.
pub struct Summary {
    /// Tests whose every output matched.
    pub passed: usize,
    /// Tests run.
    pub total: usize,
    /// Per operator (as listed in `op_types`): tests and failures.
    pub per_op: BTreeMap<String, (usize, usize)>,
    /// Failing tests with their reasons.
    pub failures: Vec<(String, String)>,
    /// Failing tests whose inferred types are right but less specific than the recorded ones
    /// (sizes that depend on run-time values); the others are wrong or errors.
    pub undetermined: usize,
}

/// Runs the harness; returns the exit code (0 ok, 1 below the floor). A folder without
/// `expected.jsonl` is an input error (exit 2) saying where it looked.
pub fn run(args: &ConformanceArgs) -> Result<i32> {
    let manifest = args.dir.join("expected.jsonl");
    if !manifest.is_file() {
        let looked = std::path::absolute(&manifest).unwrap_or(manifest);
        crate::bail_input!(
            "conformance data not found: no {} (give the folder of the ONNX node tests' expected.jsonl)",
            looked.display()
        );
    }
    let summary = evaluate(&args.dir)?;
    print!("{}", table(&summary));
    if let Some(path) = &args.failures {
        let mut text = String::new();
        for (test, reason) in &summary.failures {
            writeln!(text, "{test}\t{reason}")?;
        }
        std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &args.floor {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let floor: usize = text
            .trim()
            .parse()
            .with_context(|| format!("{}: expected one integer", path.display()))?;
        if summary.passed < floor {
            println!(
                "FAILED: {} passed, below the floor of {floor}",
                summary.passed
            );
            return Ok(1);
        }
    }
    Ok(0)
}

/// Runs every test of the folder.
pub fn evaluate(dir: &Path) -> Result<Summary> {
    let manifest = std::fs::read_to_string(dir.join("expected.jsonl"))
        .with_context(|| format!("reading {}/expected.jsonl", dir.display()))?;
    let mut summary = Summary {
        passed: 0,
        total: 0,
        per_op: BTreeMap::new(),
        failures: Vec::new(),
        undetermined: 0,
    };
    for (n, line) in manifest
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let case: Case =
            serde_json::from_str(line).with_context(|| format!("expected.jsonl line {}", n + 1))?;
        let outcome = catch_unwind(AssertUnwindSafe(|| check(dir, &case)))
            .unwrap_or_else(|_| Err("inference panicked".to_string()));
        summary.total += 1;
        let failed = outcome.is_err();
        for op in &case.op_types {
            let entry = summary.per_op.entry(op.clone()).or_default();
            entry.0 += 1;
            entry.1 += usize::from(failed);
        }
        match outcome {
            Ok(()) => summary.passed += 1,
            Err(reason) => {
                summary.undetermined += usize::from(reason.starts_with(UNDETERMINED));
                summary.failures.push((case.test.clone(), reason));
            }
        }
    }
    Ok(summary)
}

/// The printed report: overall line and the per-operator table, most failures first.
fn table(summary: &Summary) -> String {
    let mut rows: Vec<(&String, &(usize, usize))> = summary.per_op.iter().collect();
    rows.sort_by(|a, b| b.1.1.cmp(&a.1.1).then(a.0.cmp(b.0)));
    let mut out = String::new();
    let _ = writeln!(out, "{:<44} {:>6} {:>6}", "operator", "tests", "failed");
    for (op, (tests, failed)) in rows {
        let _ = writeln!(out, "{op:<44} {tests:>6} {failed:>6}");
    }
    let pct = 100.0 * summary.passed as f64 / summary.total.max(1) as f64;
    let _ = writeln!(
        out,
        "conformance: {}/{} tests passed ({pct:.1}%); of the {} failures, {} are sizes left \
         unknown (run-time values) and {} are wrong or errors",
        summary.passed,
        summary.total,
        summary.failures.len(),
        summary.undetermined,
        summary.failures.len() - summary.undetermined
    );
    out
}

/// Infers one test model and compares its outputs.
fn check(dir: &Path, case: &Case) -> Result<(), String> {
    let mut proto =
        crate::onnx::load_model(&dir.join(&case.model)).map_err(|e| format!("load: {e:#}"))?;
    strip_declarations(&mut proto);
    let mut model = Model::from_proto(&proto).map_err(|e| format!("lower: {e:#}"))?;
    let mut options = InferOptions::default();
    for input in &case.inputs {
        if input.kind == "tensor" {
            let shape = input.shape.clone().ok_or("tensor input without shape")?;
            options.input_shapes.insert(input.name.clone(), shape);
        } else if let Some(id) = model.graph.value_id(&input.name)
            && let Some(ty) = expected_type(input)
        {
            model.graph.values[id].ty = Some(ty);
        }
    }
    infer_model(&mut model, &options).map_err(|e| format!("infer: {e:#}"))?;
    for out in &case.outputs {
        let got = model.graph.value(&out.name).and_then(|v| v.ty.as_ref());
        if let Err(e) = compare(out, got) {
            let kind = match (got, expected_type(out)) {
                (Some(g), Some(want)) if generalizes(g, &want) => UNDETERMINED,
                _ => "wrong",
            };
            return Err(format!("{kind}: output '{}': {e}", out.name));
        }
    }
    Ok(())
}

/// The failure prefix of outputs inferred correctly but less specifically than recorded.
const UNDETERMINED: &str = "undetermined (depends on run-time values)";

/// True when `got` is a correct but possibly less specific type for a value of type `want`:
/// same kinds and element types, and every known dimension of `got` equal to `want`'s.
fn generalizes(got: &ValueType, want: &ValueType) -> bool {
    match (got, want) {
        (ValueType::Tensor(g), ValueType::Tensor(w)) => {
            g.dtype == w.dtype
                && match (&g.shape, &w.shape) {
                    (None, _) => true,
                    (Some(gs), Some(ws)) => {
                        gs.len() == ws.len()
                            && gs
                                .iter()
                                .zip(ws)
                                .all(|(a, b)| a.value().is_none() || a == b)
                    }
                    (Some(_), None) => false,
                }
        }
        (ValueType::Sequence(g), ValueType::Sequence(w))
        | (ValueType::Optional(g), ValueType::Optional(w)) => generalizes(g, w),
        _ => false,
    }
}

/// Removes the model's own value_info and output types, so only inference speaks.
fn strip_declarations(proto: &mut ModelProto) {
    if let Some(graph) = proto.graph.as_mut() {
        graph.value_info.clear();
        for out in &mut graph.output {
            out.r#type = None;
        }
    }
}

fn dtype(name: Option<&str>) -> Option<DType> {
    DType::from_onnx(DataType::from_str_name(name?)? as i32)
}

/// The type a recorded value has (shapes of sequence elements merged: differing dims unknown).
fn expected_type(io: &Io) -> Option<ValueType> {
    let dt = dtype(io.elem_type.as_deref());
    match io.kind.as_str() {
        "tensor" => Some(ValueType::tensor(
            dt?,
            crate::ir::known_shape(io.shape.as_ref()?),
        )),
        "sequence" => Some(ValueType::Sequence(Box::new(ValueType::Tensor(
            crate::ir::TensorType {
                dtype: dt?,
                shape: merged_shape(&io.elements),
            },
        )))),
        "optional" => Some(ValueType::Optional(Box::new(expected_type(
            io.element.as_deref()?,
        )?))),
        _ => None,
    }
}

/// The shape shared by sequence elements, unknown where they differ.
fn merged_shape(elements: &[Io]) -> Option<Vec<Dim>> {
    let first = elements.first()?.shape.as_ref()?;
    let mut merged = crate::ir::known_shape(first);
    for e in elements {
        let shape = e.shape.as_ref()?;
        if shape.len() != merged.len() {
            return None;
        }
        for (m, &d) in merged.iter_mut().zip(shape) {
            if *m != Dim::Known(d) {
                *m = Dim::Unknown;
            }
        }
    }
    Some(merged)
}

/// Compares an inferred type with a recorded value.
fn compare(expected: &Io, got: Option<&ValueType>) -> Result<(), String> {
    let Some(got) = got else {
        return Err("no type inferred".to_string());
    };
    let want_dtype = dtype(expected.elem_type.as_deref());
    match (expected.kind.as_str(), got) {
        ("tensor", ValueType::Tensor(t)) => {
            let want = expected.shape.as_deref().unwrap_or_default();
            let ok_shape =
                t.shape.as_deref().and_then(crate::ir::concrete).as_deref() == Some(want);
            if Some(t.dtype) != want_dtype || !ok_shape {
                return Err(format!(
                    "expected {} {want:?}, inferred {got}",
                    expected.elem_type.as_deref().unwrap_or("?")
                ));
            }
            Ok(())
        }
        ("sequence", ValueType::Sequence(inner)) => {
            let Some(t) = inner.as_tensor() else {
                return Err(format!("expected a sequence of tensors, inferred {got}"));
            };
            if Some(t.dtype) != want_dtype {
                return Err(format!(
                    "expected element type {:?}, inferred {got}",
                    expected.elem_type
                ));
            }
            if expected.elements.is_empty() {
                return Ok(());
            }
            if merged_shape(&expected.elements) != t.shape {
                return Err(format!(
                    "element shapes {:?}, inferred {got}",
                    expected
                        .elements
                        .iter()
                        .map(|e| &e.shape)
                        .collect::<Vec<_>>()
                ));
            }
            Ok(())
        }
        ("optional", ValueType::Optional(inner)) => match expected.element.as_deref() {
            None => Ok(()),
            Some(e) => compare(e, Some(inner)),
        },
        (kind, _) => Err(format!("expected a {kind}, inferred {got}")),
    }
}
