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

/// [`verify_table`] on the bytes of the model at `path`.
pub fn verify_table_bytes(path: &Path, bytes: Bytes, table: &Table) -> Result<Vec<String>> {
    let sha = hex(&Sha256::digest(&bytes));
    if sha != table.model.sha256 {
        bail_input!(
            "{}: the table was made for a different file (sha256 {} in the table, {sha} here)",
            path.display(),
            table.model.sha256
        );
    }
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
