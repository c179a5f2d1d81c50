//! The whole pass: load → lower → infer → schedule → liveness → solve → verify → table and
//! annotated model. One file per stage it strings together: [`load`] (decode, lower, infer),
//! [`solve`] (order, liveness, planners, the checked table), [`split`] (the split stage's
//! driver, giving [`crate::split`] its trials), [`ranges`] (planning over ranges of sizes),
//! [`check`] (verifying and reading tables) and [`planned`] (the result and its summaries).

mod check;
mod load;
mod planned;
mod ranges;
mod solve;
mod split;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use anyhow::Result;
use bytes::Bytes;

use crate::infer::InferOptions;
use crate::liveness::LivenessOptions;
use crate::onnx::{PendingDigest, decode_model, open_model_file};
use crate::plan::{Budget, PlannerChoice, Progress};
use crate::split::{SplitChoice, SplitOptions};

pub use check::{parse_table, read_table, verify_table, verify_table_bytes, write_table};
pub(crate) use load::{at_bound, type_model};
pub use load::{load_typed, load_typed_bytes};
pub use planned::{Planned, Timings};
pub use solve::problem_of;

/// Everything `plan_model` needs to know.
#[derive(Clone, Debug)]
pub struct Options {
    /// Symbolic dims and input shapes.
    pub infer: InferOptions,
    /// Sharing switches and alignment.
    pub liveness: LivenessOptions,
    /// Which planner to run.
    pub planner: PlannerChoice,
    /// Time allowed to exact search.
    pub time_limit: Duration,
    /// Work units the planner searches may spend (default: [`crate::plan::WORK_PER_SECOND`] per
    /// second of `time_limit`); the time limit is then only a safety stop.
    pub work: Option<u64>,
    /// Keep the stored order, or search for one with a lower peak.
    pub schedule: ScheduleChoice,
    /// Run QDQ patterns as node units (one integer kernel each) or node by node.
    pub qdq: crate::units::QdqChoice,
    /// Advanced modes: memory tiers, device budget, compute units.
    pub modes: crate::modes::ModeOptions,
    /// Split the operators that set the peak into tiles (a rewrite of the model).
    pub split: SplitOptions,
    /// Where the pass reports its phase and best arena for a display (never changes the plan).
    pub progress: Option<Arc<Progress>>,
    /// Set from another thread to stop the planner searches at their next check (the Python
    /// API sets it on Ctrl-C); the pass then finishes with the best plans found so far, still
    /// verified, and the table's `stats.searches` say `cancelled`.
    pub cancel: Option<Arc<AtomicBool>>,
    /// With ranges (`infer.ranges`): write the plan evaluated at this point (`--at`), one
    /// value per range symbol, instead of the plan over the ranges.
    pub at: std::collections::BTreeMap<String, i64>,
}

/// How the execution order is chosen.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
pub enum ScheduleChoice {
    /// The model's stored order (made topological if it is not).
    #[default]
    Stored,
    /// The candidate order with the lowest peak of live bytes after sharing.
    Memory,
}

impl Options {
    /// How Q/DQ patterns run: as `qdq` says, except that the budget and partition modes,
    /// which place tensors node by node, run them literally.
    pub fn qdq_in_effect(&self) -> crate::units::QdqChoice {
        match self.modes.budget.is_some() || self.modes.partition.is_some() {
            true => crate::units::QdqChoice::Literal,
            false => self.qdq,
        }
    }
}

impl Default for Options {
    fn default() -> Self {
        Options {
            infer: InferOptions::default(),
            liveness: LivenessOptions::default(),
            planner: PlannerChoice::Auto,
            time_limit: Duration::from_secs(1),
            work: None,
            schedule: ScheduleChoice::Stored,
            qdq: crate::units::QdqChoice::Units,
            modes: crate::modes::ModeOptions::default(),
            split: SplitOptions::default(),
            progress: None,
            cancel: None,
            at: Default::default(),
        }
    }
}

/// Runs the whole pass on a model file and verifies the plan independently.
///
/// ```
/// use onnx_memplan::pipeline::{Options, plan_model};
///
/// let planned = plan_model("models/mobilenet_v2.onnx".as_ref(), &Options::default())?;
/// let arena: u64 = planned.table.arenas.iter().map(|a| a.bytes).sum();
/// assert!(arena >= planned.table.stats.lower_bound_bytes);
/// assert!(arena <= planned.table.stats.naive_bytes);
/// println!("{}", planned.summary());
/// # Ok::<(), anyhow::Error>(())
/// ```
pub fn plan_model(path: &Path, options: &Options) -> Result<Planned> {
    plan_model_bytes(path, open_model_file(path)?.bytes, options)
}

/// Runs the whole pass on the bytes of the model file at `path` (which names the model in
/// messages and in the table, and whose folder holds its external data).
pub fn plan_model_bytes(path: &Path, bytes: Bytes, options: &Options) -> Result<Planned> {
    let started = Instant::now();
    let (mut planned, digest) = plan_model_deferred(path, bytes, options)?;
    planned.set_input_digest(digest.wait());
    planned.timings.total_ms = started.elapsed().as_secs_f64() * 1e3;
    Ok(planned)
}

/// The pass of [`plan_model_bytes`] without waiting for the file's SHA-256, which is computed
/// on another core meanwhile: the caller can write the annotated model while it runs, then
/// records it with [`Planned::set_input_digest`] (the table's digests are empty until then).
pub fn plan_model_deferred(
    path: &Path,
    bytes: Bytes,
    options: &Options,
) -> Result<(Planned, PendingDigest)> {
    let digest = PendingDigest::start(bytes.clone());
    Ok((plan_bytes(path, bytes, options)?, digest))
}

/// The name messages give a model that has no file (the Python API's bytes or ModelProto).
pub const IN_MEMORY: &str = "<model>";

/// The path standing for a model held in memory whose external data lies in `base_dir`.
pub fn in_memory_path(base_dir: &Path) -> std::path::PathBuf {
    base_dir.join(IN_MEMORY)
}

/// Runs the whole pass on a serialized model that has no file; its external data, if any, is
/// in `base_dir`. The table's `model.file` is empty.
pub fn plan_in_memory(bytes: Bytes, base_dir: &Path, options: &Options) -> Result<Planned> {
    let mut planned = plan_model_bytes(&in_memory_path(base_dir), bytes, options)?;
    planned.table.model.file = String::new();
    Ok(planned)
}

/// The pass after reading; the table's digests stay empty.
fn plan_bytes(path: &Path, bytes: Bytes, options: &Options) -> Result<Planned> {
    let proto = decode_model(path, bytes)?;
    // The time limit counts from here, once the file is read and decoded.
    let mut budget = Budget::for_time(options.time_limit, Instant::now());
    if let Some(work) = options.work {
        budget.work = work;
    }
    budget.progress = options.progress.clone();
    budget.cancel = options.cancel.clone();
    let mut planned = match options.split.choice {
        _ if !options.infer.ranges.is_empty() => {
            ranges::plan_ranges(path, proto, options, &budget)?
        }
        SplitChoice::Off => solve::plan_proto(path, proto, options, &budget)?,
        SplitChoice::Auto => split::plan_split(path, proto, options, &budget)?,
    };
    planned
        .table
        .splits
        .iter_mut()
        .for_each(|s| s.source.file = file_name(path));
    Ok(planned)
}

pub(crate) fn prefix(path: &Path, e: anyhow::Error) -> anyhow::Error {
    if crate::error::is_input_error(&e) {
        crate::input_error!("{}: {e:#}", path.display())
    } else {
        e
    }
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}
