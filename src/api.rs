//! The library's front door: [`plan`] a model given as a path, bytes or a decoded
//! `ModelProto`, with [`PlanOptions`] built in a chain, and get back a verified [`Plan`]
//! holding the allocation table and the annotated model.
//!
//! This file only wraps `crate::pipeline`; the pass itself lives there.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Result;
use bytes::Bytes;
use prost::Message;

use crate::emit::Table;
use crate::onnx::{Outputs, proto::ModelProto};
use crate::pipeline::{self, Options, Planned, ScheduleChoice};
use crate::split::SplitChoice;
use crate::units::QdqChoice;

/// A model to plan: a file, serialized bytes, or a decoded `ModelProto`.
///
/// Built with `From`: `&Path`, `PathBuf`, `&str` (a path), `Vec<u8>`, `&[u8]` and
/// `ModelProto` all convert.
pub enum ModelSource {
    /// A model file; its folder holds its external data.
    Path(PathBuf),
    /// A serialized model without a file; external data, if any, is looked up in `base_dir`.
    Bytes {
        /// The `ModelProto` bytes.
        bytes: Bytes,
        /// Where external-data files are read from.
        base_dir: PathBuf,
    },
}

impl From<&Path> for ModelSource {
    fn from(path: &Path) -> Self {
        ModelSource::Path(path.to_path_buf())
    }
}

impl From<PathBuf> for ModelSource {
    fn from(path: PathBuf) -> Self {
        ModelSource::Path(path)
    }
}

impl From<&str> for ModelSource {
    fn from(path: &str) -> Self {
        ModelSource::Path(PathBuf::from(path))
    }
}

impl From<Vec<u8>> for ModelSource {
    fn from(bytes: Vec<u8>) -> Self {
        ModelSource::Bytes {
            bytes: Bytes::from(bytes),
            base_dir: PathBuf::from("."),
        }
    }
}

impl From<&[u8]> for ModelSource {
    fn from(bytes: &[u8]) -> Self {
        ModelSource::from(bytes.to_vec())
    }
}

impl From<&ModelProto> for ModelSource {
    fn from(model: &ModelProto) -> Self {
        ModelSource::from(model.encode_to_vec())
    }
}

impl From<ModelProto> for ModelSource {
    fn from(model: ModelProto) -> Self {
        ModelSource::from(&model)
    }
}

/// The options of [`plan`], set in a chain; the defaults are the CLI's (`plan` with no flags).
///
/// ```
/// let options = onnx_memplan::PlanOptions::new()
///     .dim("batch", 1)
///     .alignment(64)
///     .split_auto()
///     .schedule_memory();
/// # let _ = options;
/// ```
#[derive(Clone, Debug, Default)]
pub struct PlanOptions {
    options: Options,
}

impl PlanOptions {
    /// The defaults (the same as `PlanOptions::default()`).
    pub fn new() -> Self {
        Self::default()
    }

    /// Binds a symbolic dimension (`--dim name=value`).
    pub fn dim(mut self, name: &str, value: i64) -> Self {
        self.options.infer.dims.insert(name.to_string(), value);
        self
    }

    /// Gives an input's full shape (`--input-shape name=AxBxC`).
    pub fn input_shape(mut self, name: &str, shape: &[i64]) -> Self {
        self.options
            .infer
            .input_shapes
            .insert(name.to_string(), shape.to_vec());
        self
    }

    /// Arena alignment in bytes (`--alignment`, default 64).
    pub fn alignment(mut self, bytes: u64) -> Self {
        self.options.liveness.alignment = bytes;
        self
    }

    /// Leaves graph inputs and outputs out of the arena (`--exclude-io`).
    pub fn exclude_io(mut self) -> Self {
        self.options.liveness.include_io = false;
        self
    }

    /// Splits the chains that set the peak into tiles when that lowers the arena
    /// (`--split auto`); the annotated model is then the rewritten one.
    pub fn split_auto(mut self) -> Self {
        self.options.split.choice = SplitChoice::Auto;
        self
    }

    /// Searches for an execution order with a lower peak (`--schedule memory`).
    pub fn schedule_memory(mut self) -> Self {
        self.options.schedule = ScheduleChoice::Memory;
        self
    }

    /// Seconds of work the planner searches may spend (`--time-limit`, default 1 s; 30 million
    /// work units a second, with a wall-clock safety stop at ten times the limit).
    pub fn time_limit(mut self, limit: Duration) -> Self {
        self.options.time_limit = limit;
        self
    }

    /// Lets `--split auto` spend up to `percent` extra multiply-accumulates (`--split-overhead`).
    pub fn split_overhead(mut self, percent: f64) -> Self {
        self.options.split.overhead_pct = percent;
        self
    }

    /// Runs every Q/DQ node as written instead of as int8 node units (`--qdq literal`).
    pub fn qdq_literal(mut self) -> Self {
        self.options.qdq = QdqChoice::Literal;
        self
    }

    /// Work units the planner searches may spend (`--work`); about 33 ns of search each.
    pub fn work(mut self, units: u64) -> Self {
        self.options.work = Some(units);
        self
    }
}

/// A verified plan: the allocation table and the annotated model.
pub struct Plan {
    planned: Planned,
    /// The model file planned (external data is read from its folder), if any.
    source: PathBuf,
}

impl Plan {
    /// The allocation table (docs/format.md describes every field).
    pub fn table(&self) -> &Table {
        &self.planned.table
    }

    /// The total arena size in bytes (all arenas).
    pub fn arena_bytes(&self) -> u64 {
        self.planned.table.arenas.iter().map(|a| a.bytes).sum()
    }

    /// The table as the pretty JSON `plan` writes.
    pub fn table_json(&self) -> Result<String> {
        Ok(serde_json::to_string_pretty(&self.planned.table)?)
    }

    /// The annotated model's bytes, naming `table_file` as its sidecar table. For a split
    /// plan this is the rewritten model, and the table's `model` then names `model_file`.
    pub fn model_bytes(&mut self, table_file: &str, model_file: &str) -> Vec<u8> {
        self.planned.annotated_bytes(table_file, model_file)
    }

    /// The one-line summary the CLI prints (arena, lower bound, naive bytes, saving).
    pub fn summary(&self) -> String {
        self.planned.summary()
    }

    /// Writes the annotated model to `model` and the table to `<stem>.memplan.json` beside
    /// it (as `onnx-memplan plan -o model` does), with any external data; returns the table's
    /// path. Nothing is left half-written: the files are named only once all are complete.
    pub fn write(&mut self, model: &Path) -> Result<PathBuf> {
        let stem = model
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let table = model.with_file_name(format!(
            "{}.memplan.json",
            stem.trim_end_matches(".memplan")
        ));
        let name = |p: &Path| {
            p.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        };
        let mut outputs = Outputs::new();
        outputs.external_data(&self.planned.original, &self.source, model)?;
        self.planned
            .write_annotated(&name(&table), &name(model), model, None, &mut outputs)?;
        pipeline::write_table(&self.planned.table, &table, &mut outputs)?;
        outputs.commit()?;
        Ok(table)
    }
}

/// Plans a model: every intermediate tensor gets a fixed offset in one arena, and the plan is
/// checked by the independent verifier before it is returned.
///
/// ```
/// let plan = onnx_memplan::plan("models/mobilenet_v2.onnx", &Default::default())?;
/// assert!(plan.arena_bytes() >= plan.table().stats.lower_bound_bytes);
/// assert!(plan.arena_bytes() <= plan.table().stats.naive_bytes);
/// # Ok::<(), anyhow::Error>(())
/// ```
pub fn plan(model: impl Into<ModelSource>, options: &PlanOptions) -> Result<Plan> {
    match model.into() {
        ModelSource::Path(path) => Ok(Plan {
            planned: pipeline::plan_model(&path, &options.options)?,
            source: path,
        }),
        ModelSource::Bytes { bytes, base_dir } => Ok(Plan {
            planned: pipeline::plan_in_memory(bytes, &base_dir, &options.options)?,
            source: pipeline::in_memory_path(&base_dir),
        }),
    }
}
