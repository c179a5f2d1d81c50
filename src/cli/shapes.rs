//! `onnx-memplan shapes`: print (or write into the model) every inferred type.

use std::path::PathBuf;

use std::io::Write;

use anyhow::Result;
use serde_json::json;

use super::args::ShapeArgs;
use crate::ir::{Dim, ValueType};
use crate::liveness::tensor_kind;
use crate::pipeline::load_typed;
use crate::{bail_input, emit, onnx};

/// Arguments of `shapes`.
#[derive(clap::Args, Debug)]
pub struct ShapesArgs {
    /// The ONNX model.
    pub model: PathBuf,
    /// Write the model with every inferred type (value_info for each intermediate).
    #[arg(short = 'o', long = "output")]
    pub output: Option<PathBuf>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub shapes: ShapeArgs,
}

/// Runs `shapes`.
pub fn run(args: &ShapesArgs) -> Result<i32> {
    let options = args.shapes.infer_options();
    let (proto, model, report) = load_typed(&args.model, &options)?;
    for line in &report.disagreements {
        eprintln!("warning: {line}");
    }
    let graph = &model.graph;
    let rows: Vec<_> = graph
        .values
        .iter()
        .enumerate()
        .filter_map(|(id, v)| Some((v, tensor_kind(graph, id)?.name())))
        .collect();
    if let Some(out) = &args.output {
        if std::fs::canonicalize(out).ok() == std::fs::canonicalize(&args.model).ok() {
            bail_input!("{}: refusing to overwrite the input model", out.display());
        }
        let mut outputs = onnx::Outputs::new();
        outputs.external_data(&proto, &args.model, out)?;
        outputs.model(
            out,
            &emit::with_inferred_types(&proto, graph, options.binds_shapes()),
            None,
            false,
        )?;
        outputs.commit()?;
    }
    let mut text = String::new();
    if args.json {
        let list: Vec<_> = rows
            .iter()
            .map(|(v, kind)| {
                json!({
                    "name": v.name,
                    "kind": kind,
                    "type": v.ty.as_ref().map(type_json),
                })
            })
            .collect();
        text = serde_json::to_string_pretty(&list)? + "\n";
    } else {
        let width = rows
            .iter()
            .map(|(v, _)| v.name.len())
            .max()
            .unwrap_or(4)
            .min(60);
        for (v, kind) in &rows {
            let ty =
                v.ty.as_ref()
                    .map_or_else(|| "unknown".to_string(), ValueType::to_string);
            text += &format!("{:<width$}  {:<12}  {ty}\n", v.name, kind);
        }
    }
    // A reader that stops early (`| head`) is not an error.
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => return Err(e.into()),
        _ => {}
    }
    Ok(0)
}

fn type_json(ty: &ValueType) -> serde_json::Value {
    match ty {
        ValueType::Tensor(t) | ValueType::SparseTensor(t) => json!({
            "kind": if matches!(ty, ValueType::Tensor(_)) { "tensor" } else { "sparse_tensor" },
            "dtype": t.dtype.name(),
            "shape": t.shape.as_ref().map(|s| s.iter().map(|d| match d {
                Dim::Known(v) => json!(v),
                Dim::Symbol(s) => json!(s),
                Dim::Expr(e) => json!(e.to_string()),
                Dim::Unknown => serde_json::Value::Null,
            }).collect::<Vec<_>>()),
        }),
        ValueType::Sequence(e) => json!({"kind": "sequence", "elem": type_json(e)}),
        ValueType::Optional(e) => json!({"kind": "optional", "elem": type_json(e)}),
        ValueType::Map(k, v) => json!({"kind": "map", "key": k.name(), "value": type_json(v)}),
        ValueType::Opaque => json!({"kind": "opaque"}),
    }
}
