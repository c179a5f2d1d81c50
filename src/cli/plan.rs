//! `onnx-memplan plan`: plan a model and write the annotated model and the table.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Result;

use super::args::ShapeArgs;
use crate::liveness::LivenessOptions;
use crate::pipeline::{Options, ScheduleChoice, plan_model, write_table};
use crate::plan::PlannerChoice;
use crate::split::{SplitChoice, SplitOptions};
use crate::{bail_input, onnx};

/// Arguments of `plan`.
#[derive(clap::Args, Debug)]
pub struct PlanArgs {
    /// The ONNX model to plan.
    pub model: PathBuf,
    /// Annotated model to write (default: `<stem>.memplan.onnx` beside the model).
    #[arg(short = 'o', long = "output")]
    pub output: Option<PathBuf>,
    /// Allocation table to write (default: `<stem>.memplan.json` beside the output).
    #[arg(long)]
    pub table: Option<PathBuf>,
    #[command(flatten)]
    pub shapes: ShapeArgs,
    /// Arena alignment in bytes (offsets are multiples of it).
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..))]
    pub alignment: u64,
    /// Planner: `auto` (best of the portfolio) or one planner by name.
    #[arg(long, default_value = "auto")]
    pub planner: PlannerChoice,
    /// Seconds the planning may take at most (a safety stop: the searches stop on their work
    /// budget first, so their result does not depend on the machine's speed or load).
    #[arg(long, default_value_t = 1.0)]
    pub time_limit: f64,
    /// Work units the planner searches may spend (default: 30 million per second of
    /// --time-limit).
    #[arg(long, value_name = "UNITS")]
    pub work: Option<u64>,
    /// Execution order: the model's stored order, or a memory-aware one with a lower peak.
    #[arg(long, value_enum, default_value = "stored")]
    pub schedule: ScheduleChoice,
    /// Do not let elementwise outputs overwrite dying inputs.
    #[arg(long)]
    pub no_inplace: bool,
    /// Do not let Reshape-like outputs and Concat/Split slices share bytes.
    #[arg(long)]
    pub no_alias: bool,
    /// Leave graph inputs and outputs out of the arena.
    #[arg(long)]
    pub exclude_io: bool,
    /// Split the chains of operators that set the peak into spatial tiles or blocks of rows (a
    /// rewrite of the model, kept only when it helps): `off` or `auto` [default: off; with
    /// --budget, auto].
    #[arg(long, value_enum)]
    pub split: Option<SplitChoice>,
    /// Extra multiply-accumulates the split may add (halo recompute), percent of the model's.
    #[arg(long, default_value_t = 10.0, value_name = "PCT")]
    pub split_overhead: f64,
    #[command(flatten)]
    pub modes: super::modes::ModeArgs,
}

/// Runs `plan`; returns the exit code.
pub fn run(args: &PlanArgs) -> Result<i32> {
    let output = args
        .output
        .clone()
        .unwrap_or_else(|| sibling(&args.model, "memplan.onnx"));
    let table_path = args.table.clone().unwrap_or_else(|| {
        output.with_file_name(format!(
            "{}.memplan.json",
            stem(&output).trim_end_matches(".memplan")
        ))
    });
    for out in [&output, &table_path] {
        if same_file(out, &args.model) {
            bail_input!("{}: refusing to overwrite the input model", out.display());
        }
    }
    let modes = args.modes.options()?;
    let split = args.split.unwrap_or(if modes.budget.is_some() {
        SplitChoice::Auto
    } else {
        SplitChoice::Off
    });
    let options = Options {
        infer: args.shapes.infer_options(),
        liveness: LivenessOptions {
            inplace: !args.no_inplace,
            alias: !args.no_alias,
            include_io: !args.exclude_io,
            alignment: args.alignment,
        },
        planner: args.planner,
        time_limit: Duration::from_secs_f64(args.time_limit.clamp(0.0, 1e9)),
        work: args.work,
        schedule: args.schedule,
        modes,
        split: SplitOptions {
            choice: split,
            overhead_pct: args.split_overhead,
            ..SplitOptions::default()
        },
    };
    if !args.split_overhead.is_finite() || args.split_overhead < 0.0 {
        bail_input!("--split-overhead must be a percentage ≥ 0");
    }
    let mut planned = plan_model(&args.model, &options)?;
    for line in &planned.report.disagreements {
        eprintln!("warning: {line}");
    }
    let table_name = table_path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let model_name = output
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let annotated = planned.annotated_bytes(&table_name, &model_name);
    let mut outputs = onnx::Outputs::new();
    outputs.external_data(&planned.original, &args.model, &output)?;
    write_table(&planned.table, &table_path, &mut outputs)?;
    outputs.bytes(&output, &annotated)?;
    args.modes.write_figures(&planned, &mut outputs)?;
    outputs.commit()?;
    eprintln!("{}", planned.summary());
    Ok(0)
}

fn stem(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// `dir/stem.onnx` → `dir/stem.<suffix>`.
fn sibling(path: &Path, suffix: &str) -> PathBuf {
    path.with_file_name(format!("{}.{suffix}", stem(path)))
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}
