//! Checking a table against a model file, and reading and writing tables.

use std::path::Path;

use anyhow::{Context, Result};
use bytes::Bytes;
use sha2::{Digest, Sha256};

use super::{at_bound, load_typed_bytes, type_model};
use crate::emit::{self, Table};
use crate::infer::InferOptions;
use crate::onnx::{hex, open_model_file};
use crate::{bail_input, verify};

/// Checks a table against a model file: same file (SHA-256), then the independent verifier.
/// Returns the problems found (empty when the plan is valid).
///
/// ```
/// use onnx_memplan::pipeline::{Options, plan_model, verify_table};
///
/// let model = std::path::Path::new("models/mobilenet_v2.onnx");
/// let planned = plan_model(model, &Options::default())?;
/// assert!(verify_table(model, &planned.table)?.is_empty());
/// # Ok::<(), anyhow::Error>(())
/// ```
pub fn verify_table(path: &Path, table: &Table) -> Result<Vec<String>> {
    verify_table_bytes(path, open_model_file(path)?.bytes, table)
}

/// [`verify_table`] on the bytes of the model at `path`: the model the table was made for, or
/// the annotated model written with it (`model.annotated_sha256`), whose nodes are put back
/// in the input's order before the check.
pub fn verify_table_bytes(path: &Path, bytes: Bytes, table: &Table) -> Result<Vec<String>> {
    let sha = hex(&Sha256::digest(&bytes));
    let bytes = if sha == table.model.sha256 {
        bytes
    } else if table.model.annotated_sha256.as_deref() == Some(sha.as_str()) {
        match in_input_order(path, bytes, table)? {
            Ok(bytes) => bytes,
            Err(problem) => return Ok(vec![problem]),
        }
    } else {
        bail_input!(
            "{}: the table was made for a different file (sha256 {} in the table{}, {sha} here)",
            path.display(),
            table.model.sha256,
            match &table.model.annotated_sha256 {
                Some(a) => format!(", {a} for its annotated model"),
                None => String::new(),
            }
        );
    };
    let infer = InferOptions {
        dims: table.options.dims.clone(),
        ranges: table
            .options
            .ranges
            .iter()
            .map(|(s, &[lo, hi])| (s.clone(), (lo, hi)))
            .collect(),
        input_shapes: table.options.input_shapes.clone(),
        input_values: table.options.input_values.clone(),
        ..InferOptions::default()
    };
    if infer.ranges.is_empty() {
        let (proto, model, report) = load_typed_bytes(path, bytes, &infer)?;
        let mut problems = if report.data_dependent.is_empty() {
            verify::check_table(&model.graph, table)
        } else {
            let (_, at_bound, _) = type_model(path, proto, &at_bound(&infer, &report))?;
            verify::check_table(&at_bound.graph, table)
        };
        verify::check_data_dependent(&model.graph, table, &mut problems);
        return Ok(problems);
    }
    let upper = infer
        .ranges
        .iter()
        .map(|(s, &(_, hi))| (s.clone(), hi))
        .collect();
    let (_, at_max, _) = load_typed_bytes(
        path,
        bytes.clone(),
        &crate::ranges::bound_at(&infer, &upper),
    )?;
    let (_, symbolic, _) = load_typed_bytes(path, bytes, &infer)?;
    let (mut problems, proof) = verify::check_range_table(&at_max.graph, &symbolic.graph, table);
    let claimed = table.parametric.as_ref().map(|p| p.proof.as_str());
    if problems.is_empty() && proof.as_deref() != claimed {
        problems.push(format!(
            "parametric.proof is {claimed:?} but the verifier's proof is {proof:?}"
        ));
    }
    Ok(problems)
}

/// The annotated model `bytes` (its digest is the table's `annotated_sha256`) with its nodes
/// back in the input model's order: annotated node `k` is input node `schedule[k]`. `Err` is
/// the problem when the annotation does not fit the table.
fn in_input_order(
    path: &Path,
    bytes: Bytes,
    table: &Table,
) -> Result<std::result::Result<Bytes, String>> {
    use prost::Message;
    let mut model = crate::onnx::decode_model(path, bytes)?;
    if !model
        .metadata_props
        .iter()
        .any(|p| p.key() == "memplan.format" && p.value() == emit::FORMAT)
    {
        return Ok(Err(format!(
            "{}: the annotated model has no memplan.format = {} metadata",
            path.display(),
            emit::FORMAT
        )));
    }
    let graph = model.graph.as_mut().expect("decode_model checks the graph");
    let n = graph.node.len();
    if table.schedule.len() != n {
        return Ok(Err(format!(
            "schedule has {} steps but the annotated model {n} nodes",
            table.schedule.len()
        )));
    }
    let mut slots: Vec<_> = vec![None; n];
    for (k, node) in std::mem::take(&mut graph.node).into_iter().enumerate() {
        match table.schedule.get(k) {
            Some(&i) if i < n && slots[i].is_none() => slots[i] = Some(node),
            _ => {
                return Ok(Err(format!(
                    "schedule is not a permutation of the annotated model's {n} nodes"
                )));
            }
        }
    }
    graph.node = slots
        .into_iter()
        .map(|s| s.expect("a permutation"))
        .collect();
    Ok(Ok(Bytes::from(model.encode_to_vec())))
}

/// Reads an allocation table file.
pub fn read_table(path: &Path) -> Result<Table> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| crate::input_error!("{}: cannot read: {e}", path.display()))?;
    parse_table(&text, &path.display().to_string())
}

/// Parses an allocation table's JSON text; `source` names it in messages.
pub fn parse_table(text: &str, source: &str) -> Result<Table> {
    let table: Table = serde_json::from_str(text)
        .map_err(|e| crate::input_error!("{source}: not an onnx-memplan table: {e}"))?;
    if table.format != emit::FORMAT {
        bail_input!("{source}: unknown table format '{}'", table.format);
    }
    Ok(table)
}

/// Stages the table as pretty JSON for `outputs` to write.
pub fn write_table(table: &Table, path: &Path, outputs: &mut crate::onnx::Outputs) -> Result<()> {
    let text = serde_json::to_string_pretty(table).context("encoding the table")?;
    outputs.bytes(path, text.as_bytes())
}
