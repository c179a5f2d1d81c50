//! `onnx-memplan plan`: plan a model and write the annotated model and the table.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Result;

use super::args::ShapeArgs;
use crate::liveness::LivenessOptions;
use crate::pipeline::{Options, Planned, ScheduleChoice, plan_model_deferred, write_table};
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
    /// Seconds of work the planner searches may spend (30 million work units per second); they
    /// stop on that work, so their result does not depend on the machine's speed or load. A
    /// wall-clock safety stop at ten times this fires only on a machine several times slower
    /// than calibrated.
    #[arg(long, default_value_t = 1.0)]
    pub time_limit: f64,
    /// Work units the planner searches may spend (default: 30 million per second of
    /// --time-limit).
    #[arg(long, value_name = "UNITS")]
    pub work: Option<u64>,
    /// Execution order: the model's stored order, or a memory-aware one with a lower peak.
    #[arg(long, value_enum, default_value = "stored")]
    pub schedule: ScheduleChoice,
    /// How a quantised (QDQ) model runs: `units` plans each DequantizeLinear → operator →
    /// QuantizeLinear pattern as one integer kernel whose float tensors take no arena bytes;
    /// `literal` plans every node and tensor as written.
    #[arg(long, value_enum, default_value = "units")]
    pub qdq: crate::units::QdqChoice,
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
    /// Extra multiply-accumulates the split may add (halo recompute), in percent of the model's
    /// total multiply-accumulates.
    #[arg(long, default_value_t = 10.0, value_name = "PCT")]
    pub split_overhead: f64,
    /// Seconds of work the split search may spend (30 million work units per second); it
    /// stops with the chains split so far. A wall-clock safety stop at ten times this fires
    /// only on a machine several times slower than calibrated, so the result does not depend
    /// on the machine's speed or load.
    #[arg(long, default_value_t = 16.0, value_name = "SECONDS")]
    pub split_time: f64,
    /// With `--dim NAME=LO..HI`: write the plan over the range evaluated at this size
    /// (`--at sequence=128`, one per range symbol), a fixed table and the model specialised to
    /// it (repeatable).
    #[arg(long = "at", value_name = "NAME=N", value_parser = super::args::parse_at)]
    pub at: Vec<(String, i64)>,
    #[command(flatten)]
    pub modes: super::modes::ModeArgs,
    /// Write a C header: each arena's size, the alignment, the model's SHA-256 and the offset
    /// of every graph input and output (docs/format.md, "C header").
    #[arg(long, value_name = "FILE")]
    pub header: Option<PathBuf>,
    /// With --header: list every tensor placed in an arena, not only the inputs and outputs.
    #[arg(long, requires = "header")]
    pub header_all: bool,
    /// Print the summary as one JSON object on stdout (instead of the line on stderr).
    #[arg(long)]
    pub json: bool,
    /// Print no summary line and no progress line.
    #[arg(long, short = 'q')]
    pub quiet: bool,
}

impl PlanArgs {
    /// The pass options these flags describe; bad values are input errors.
    pub fn options(&self) -> Result<Options> {
        if !self.time_limit.is_finite() || self.time_limit < 0.0 {
            bail_input!("--time-limit must be a number of seconds ≥ 0");
        }
        if !self.split_overhead.is_finite() || self.split_overhead < 0.0 {
            bail_input!("--split-overhead must be a percentage ≥ 0");
        }
        if !self.split_time.is_finite() || self.split_time < 0.0 {
            bail_input!("--split-time must be a number of seconds ≥ 0");
        }
        let modes = self.modes.options()?;
        let infer = self.shapes.infer_options();
        if !self.at.is_empty() && infer.ranges.is_empty() {
            bail_input!("--at evaluates a plan over ranges: give a range with --dim NAME=LO..HI");
        }
        // A budget the plan cannot meet is helped by splitting, so `--budget` splits unless
        // told otherwise.
        let split = self.split.unwrap_or(if modes.budget.is_some() {
            SplitChoice::Auto
        } else {
            SplitChoice::Off
        });
        Ok(Options {
            infer,
            liveness: LivenessOptions {
                inplace: !self.no_inplace,
                alias: !self.no_alias,
                include_io: !self.exclude_io,
                alignment: self.alignment,
                strided: false,
                blockwise: false,
            },
            planner: self.planner,
            time_limit: Duration::from_secs_f64(self.time_limit),
            work: self.work,
            schedule: self.schedule,
            qdq: self.qdq,
            modes,
            split: SplitOptions {
                choice: split,
                overhead_pct: self.split_overhead,
                search_time: Duration::from_secs_f64(self.split_time),
                ..SplitOptions::default()
            },
            progress: None,
            cancel: None,
            at: self.at.iter().cloned().collect(),
        })
    }
}

/// `plan`'s command line on its own, for callers that are not `onnx-memplan` (the Python API).
#[derive(clap::Parser)]
#[command(name = "onnx-memplan plan", no_binary_name = true)]
struct PlanLine {
    #[command(flatten)]
    args: PlanArgs,
}

/// Parses `plan`'s arguments (the model, then flags) exactly as `onnx-memplan plan` does; a bad
/// flag or value is an input error carrying the command line's one-line message.
pub fn parse_args(args: &[String]) -> Result<PlanArgs> {
    use clap::Parser;
    PlanLine::try_parse_from(args)
        .map(|line| line.args)
        .map_err(|e| {
            // The message's first line, and the possible values clap lists below it.
            let text = e.to_string();
            let line: Vec<&str> = text
                .lines()
                .map(str::trim)
                .enumerate()
                .filter(|(i, l)| *i == 0 || l.starts_with("[possible values"))
                .map(|(_, l)| l)
                .collect();
            crate::input_error!("{}", line.join(" ").trim_start_matches("error: "))
        })
}

/// The long names of `plan`'s flags (`--dim`, `--alignment`, ...) with their default values
/// (`None` for a flag without one), for checking that another front end (the Python API) offers
/// every one with the same defaults.
pub fn flag_defaults() -> Vec<(String, Option<String>)> {
    use clap::CommandFactory;
    PlanLine::command()
        .get_arguments()
        .filter_map(|a| {
            let default = a
                .get_default_values()
                .first()
                .map(|v| v.to_string_lossy().into_owned());
            Some((format!("--{}", a.get_long()?), default))
        })
        .collect()
}

/// Runs `plan`; returns the exit code.
pub fn run(args: &PlanArgs) -> Result<i32> {
    let output = args
        .output
        .clone()
        .unwrap_or_else(|| sibling(&args.model, "memplan.onnx"));
    let table_path = args.table.clone().unwrap_or_else(|| table_beside(&output));
    let mut named = vec![("-o", &output), ("--table", &table_path)];
    named.extend(args.modes.svg.iter().map(|p| ("--svg", p)));
    named.extend(args.modes.html.iter().map(|p| ("--html", p)));
    named.extend(args.header.iter().map(|p| ("--header", p)));
    refuse_same_outputs(&named)?;
    let paths: Vec<&Path> = named.iter().map(|(_, p)| p.as_path()).collect();
    refuse_overwrite(&args.model, &paths)?;
    let mut options = args.options()?;
    options.progress = super::progress::for_terminal(args.quiet);
    let progress = options.progress.clone();
    let started = Instant::now();
    let input = onnx::open_model_file(&args.model)?;
    let (mut planned, digest) = super::progress::show_while(progress, || {
        plan_model_deferred(&args.model, input.bytes.clone(), &options)
    })?;
    for line in args.shapes.unknown_dim_warnings(&planned.original) {
        eprintln!("warning: {line}");
    }
    for line in &planned.report.disagreements {
        eprintln!("warning: {line}");
    }
    let mut outputs = onnx::Outputs::new();
    stage_outputs_from(
        &mut planned,
        &args.model,
        Some((&input, digest)),
        &output,
        &table_path,
        &mut outputs,
    )?;
    planned.timings.total_ms = started.elapsed().as_secs_f64() * 1e3;
    args.modes.write_figures(&planned, &mut outputs)?;
    if let Some(path) = &args.header {
        stage_header(
            &planned,
            &stem(&args.model),
            path,
            args.header_all,
            &mut outputs,
        )?;
    }
    outputs.commit()?;
    if args.json {
        let mut line = planned.summary_json().to_string();
        line.push('\n');
        // A reader that stops early (`| head`) is not an error.
        match std::io::stdout().lock().write_all(line.as_bytes()) {
            Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => return Err(e.into()),
            _ => {}
        }
    } else if !args.quiet {
        eprintln!("{}", planned.summary());
    }
    Ok(0)
}

/// The table's default path: `<stem>.memplan.json` beside the annotated model `output`.
pub fn table_beside(output: &Path) -> PathBuf {
    output.with_file_name(format!(
        "{}.memplan.json",
        stem(output).trim_end_matches(".memplan")
    ))
}

/// Refuses outputs that are the input model itself.
pub fn refuse_overwrite(model: &Path, outputs: &[&Path]) -> Result<()> {
    for out in outputs {
        if same_file(out, model) {
            bail_input!("{}: refusing to overwrite the input model", out.display());
        }
    }
    Ok(())
}

/// Refuses two output options naming one file (`(flag, path)` pairs, defaults included): the
/// second write would replace the first.
pub fn refuse_same_outputs(named: &[(&str, &PathBuf)]) -> Result<()> {
    let keys: Vec<PathBuf> = named.iter().map(|(_, p)| canonical_target(p)).collect();
    for (j, key) in keys.iter().enumerate() {
        if let Some(i) = keys[..j].iter().position(|k| k == key) {
            bail_input!(
                "{}: {} and {} name the same file",
                named[j].1.display(),
                named[i].0,
                named[j].0
            );
        }
    }
    Ok(())
}

/// The path a file would be written at, whether it exists or not: the folder canonicalised
/// (links and `..` resolved) joined with the file name.
fn canonical_target(path: &Path) -> PathBuf {
    if let Ok(path) = std::fs::canonicalize(path) {
        return path;
    }
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    match (absolute.parent(), absolute.file_name()) {
        (Some(dir), Some(name)) => std::fs::canonicalize(dir)
            .map(|d| d.join(name))
            .unwrap_or(absolute.clone()),
        _ => absolute,
    }
}

/// Stages the files `plan` writes for the model at `model` (whose folder holds its external
/// data): the external-data files beside `output`, the annotated model naming the table, and
/// the table; `outputs.commit()` then names them all. For a split plan the table's `model`
/// becomes the written model.
pub fn stage_outputs(
    planned: &mut Planned,
    model: &Path,
    output: &Path,
    table: &Path,
    outputs: &mut onnx::Outputs,
) -> Result<()> {
    stage_outputs_from(planned, model, None, output, table, outputs)
}

/// [`stage_outputs`] for a plan made from `input`, the file opened and its SHA-256 still
/// being computed (see [`plan_model_deferred`]): payloads are copied from the file, and the
/// digest is awaited after the model is written, before the table.
pub fn stage_outputs_from(
    planned: &mut Planned,
    model: &Path,
    input: Option<(&onnx::ModelFile, onnx::PendingDigest)>,
    output: &Path,
    table: &Path,
    outputs: &mut onnx::Outputs,
) -> Result<()> {
    let table_name = table
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let model_name = output
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    outputs.external_data(&planned.original, model, output)?;
    let (source, digest) = input.unzip();
    planned.write_annotated(&table_name, &model_name, output, source, outputs)?;
    if let Some(digest) = digest {
        planned.set_input_digest(digest.wait());
    }
    write_table(&planned.table, table, outputs)
}

/// Stages the C header of the verified plan `planned` (its table final: call after
/// [`stage_outputs`]) at `path`, its macros prefixed after the model stem `stem`; `all` lists
/// every placed tensor, not only the graph inputs and outputs.
pub fn stage_header(
    planned: &Planned,
    stem: &str,
    path: &Path,
    all: bool,
    outputs: &mut onnx::Outputs,
) -> Result<()> {
    let which = if all {
        crate::emit::HeaderTensors::All
    } else {
        crate::emit::HeaderTensors::Io
    };
    let text = crate::emit::render_header(&planned.table, stem, which);
    outputs.bytes(path, text.as_bytes())
}

/// A path's file stem (`dir/model.onnx` → `model`).
pub fn stem(path: &Path) -> String {
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
