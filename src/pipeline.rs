//! The whole pass: load → lower → infer → schedule → liveness → solve → verify → table and
//! annotated model.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow};
use bytes::Bytes;
use sha2::{Digest, Sha256};

use crate::emit::{self, ModelInfo, Stats, Table, TableOptions};
use crate::infer::{InferOptions, InferReport, infer_model};
use crate::ir::Model;
use crate::liveness::{Liveness, LivenessOptions, analyse_best, analyse_with};
use crate::onnx::{
    ModelFile, PendingDigest, decode_model, hex, load_model, open_model_file, proto::ModelProto,
};
use crate::plan::{self, Budget, PlanOptions, PlannerChoice, Problem, Progress};
use crate::split::{self, SplitChoice, SplitOptions};
use crate::{bail_input, schedule, verify};

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
    /// Work units the planner searches may spend (default: [`plan::WORK_PER_SECOND`] per
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
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ScheduleChoice {
    /// The model's stored order (made topological if it is not).
    #[default]
    Stored,
    /// The candidate order with the lowest peak of live bytes after sharing.
    Memory,
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

/// A checked plan, ready to be written.
pub struct Planned {
    /// The input model as decoded.
    pub original: ModelProto,
    /// The lowered, typed model.
    pub model: Model,
    /// The allocation table.
    pub table: Table,
    /// What inference noticed (declared types that disagree).
    pub report: InferReport,
    /// How long the pass took (reported, never written to the table).
    pub timings: Timings,
    /// Work units the planner's searches spent (see [`plan::budget`]).
    pub work: u64,
}

/// Wall-clock times of a pass, in milliseconds.
#[derive(Clone, Copy, Debug, Default)]
pub struct Timings {
    /// Time spent in the planner.
    pub plan_ms: f64,
    /// Time of the whole pass, from reading the file to the verified table (set by the caller
    /// that read the file).
    pub total_ms: f64,
}

impl Planned {
    /// The one-line summary: arena, lower bound, naive bytes and the saving (of [`IN_MEMORY`]
    /// for a model without a file).
    pub fn summary(&self) -> String {
        let s = &self.table.stats;
        let arena: u64 = self.table.arenas.iter().map(|a| a.bytes).sum();
        let saving = if s.naive_bytes > 0 {
            100.0 * (1.0 - arena as f64 / s.naive_bytes as f64)
        } else {
            0.0
        };
        let order = if s.schedule.is_empty() || s.schedule == "stored" {
            String::new()
        } else {
            format!(
                ", schedule {} (stored-order bound {} bytes)",
                s.schedule, s.stored_lower_bound_bytes
            )
        };
        format!(
            "{}: arena {} bytes, lower bound {} bytes ({:.3}x), naive {} bytes, saving {saving:.1}% ({} tensors, planner {}{}{order}, {:.1} ms)",
            if self.table.model.file.is_empty() {
                IN_MEMORY
            } else {
                &self.table.model.file
            },
            arena,
            s.lower_bound_bytes,
            if s.lower_bound_bytes > 0 {
                arena as f64 / s.lower_bound_bytes as f64
            } else {
                1.0
            },
            s.naive_bytes,
            self.table.tensors.len(),
            s.planner,
            if s.proven_optimal { ", optimal" } else { "" },
            self.timings.total_ms,
        ) + &crate::modes::summary(&self.table)
            + &crate::split::summary(&self.table)
            + &crate::units::summary(&self.table, &self.model.graph)
    }

    /// The summary as one JSON object (`plan --json`, the Python API's `Plan.summary_dict`):
    /// the numbers of [`Planned::summary`] under the table's field names, plus the outcome of
    /// an advanced mode (`hierarchy`, `offload` without its transfer list, `partition`).
    pub fn summary_json(&self) -> serde_json::Value {
        let t = &self.table;
        let s = &t.stats;
        let arena: u64 = t.arenas.iter().map(|a| a.bytes).sum();
        let mut out = serde_json::json!({
            "model": t.model.file,
            "arena_bytes": arena,
            "arenas": t.arenas.iter().map(|a| serde_json::json!({"id": a.id, "name": a.name, "bytes": a.bytes})).collect::<Vec<_>>(),
            "lower_bound_bytes": s.lower_bound_bytes,
            "naive_bytes": s.naive_bytes,
            "tensors": t.tensors.len(),
            "planner": s.planner,
            "proven_optimal": s.proven_optimal,
            "schedule": s.schedule,
            "stored_lower_bound_bytes": s.stored_lower_bound_bytes,
            "plan_ms": self.timings.plan_ms,
            "total_ms": self.timings.total_ms,
            "warnings": self.report.disagreements,
        });
        if let Some(h) = &t.hierarchy {
            out["hierarchy"] = serde_json::json!(h);
        }
        if let Some(o) = &t.offload {
            let mut o = serde_json::json!(o);
            o["transfers"] = serde_json::json!(t.offload.as_ref().map_or(0, |o| o.transfers.len()));
            out["offload"] = o;
        }
        if let Some(sp) = &t.splits {
            out["splits"] = serde_json::json!({
                "chains": sp.chains.len(),
                "arena_before": sp.arena_before,
                "arena_after": sp.arena_after,
                "total_macs": sp.total_macs,
                "extra_macs": sp.extra_macs,
            });
        }
        if let Some(qdq) = &t.options.qdq {
            out["qdq"] = serde_json::json!({
                "mode": qdq,
                "units": self.model.graph.units.len(),
                "literal_qdq_nodes": crate::units::literal_qdq_nodes(&self.model.graph),
            });
        }
        if let Some(p) = &t.partition {
            out["partition"] = serde_json::json!({
                "units": p.units.iter().map(|u| &u.name).collect::<Vec<_>>(),
                "shared_buffers": t.tensors.iter().filter(|e| !e.placement.shared_with.is_empty()).count(),
                "stored_quantised": t.tensors.iter().filter(|e| e.placement.stored_dtype.is_some()).count(),
            });
        }
        out
    }

    /// The annotated model recording the plan; `table_file` is the sidecar's name.
    pub fn annotated(&self, table_file: &str) -> ModelProto {
        emit::annotate(&self.original, &self.model.graph, &self.table, table_file)
    }

    /// True when the plan is of a rewritten (split) model rather than of the input file.
    pub fn is_rewritten(&self) -> bool {
        self.table
            .splits
            .as_ref()
            .is_some_and(|s| !s.chains.is_empty())
    }

    /// The annotated model's bytes in memory (for callers that need them as bytes; `plan`
    /// streams them with [`Planned::write_annotated`]), to be written as `model_file` beside
    /// `table_file`. For a rewritten model the annotated model is the model the table
    /// describes, so the table's `model` then names that file and its SHA-256.
    pub fn annotated_bytes(&mut self, table_file: &str, model_file: &str) -> Vec<u8> {
        use prost::Message;
        let bytes = self.annotated(table_file).encode_to_vec();
        if self.is_rewritten() {
            self.table.model.file = model_file.to_string();
            self.table.model.sha256 = hex(&Sha256::digest(&bytes));
        }
        bytes
    }

    /// Stages the annotated model as the file `target` (named `model_file`) of `outputs`,
    /// beside the table `table_file`, streamed: payloads that are slices of `source` (the file
    /// the plan was made from) are copied from it. For a rewritten model the annotated model
    /// is the model the table describes, so the table's `model` then names that file and its
    /// SHA-256 (hashed while writing).
    pub fn write_annotated(
        &mut self,
        table_file: &str,
        model_file: &str,
        target: &Path,
        source: Option<&ModelFile>,
        outputs: &mut crate::onnx::Outputs,
    ) -> Result<()> {
        let rewritten = self.is_rewritten();
        let digest = outputs.model(target, &self.annotated(table_file), source, rewritten)?;
        if let Some(digest) = digest {
            self.table.model.file = model_file.to_string();
            self.table.model.sha256 = hex(&digest);
        }
        Ok(())
    }

    /// Records the SHA-256 of the input file in the table: the model's, or for a split plan
    /// the source's (and the model's too when nothing was rewritten).
    pub fn set_input_digest(&mut self, digest: String) {
        match &mut self.table.splits {
            Some(splits) => {
                if splits.chains.is_empty() {
                    self.table.model.sha256 = digest.clone();
                }
                splits.source.sha256 = digest;
            }
            None => self.table.model.sha256 = digest,
        }
    }
}

/// Loads, lowers and infers a model.
pub fn load_typed(path: &Path, infer: &InferOptions) -> Result<(ModelProto, Model, InferReport)> {
    type_model(path, load_model(path)?, infer)
}

/// Decodes, lowers and infers the bytes of the model at `path` (see [`plan_model_bytes`]).
pub fn load_typed_bytes(
    path: &Path,
    bytes: Bytes,
    infer: &InferOptions,
) -> Result<(ModelProto, Model, InferReport)> {
    type_model(path, decode_model(path, bytes)?, infer)
}

/// Lowers and infers a decoded model (`path` names it in messages).
pub(crate) fn type_model(
    path: &Path,
    proto: ModelProto,
    infer: &InferOptions,
) -> Result<(ModelProto, Model, InferReport)> {
    let mut model = Model::from_proto(&proto).map_err(|e| prefix(path, e))?;
    let report = infer_model(&mut model, infer).map_err(|e| prefix(path, e))?;
    Ok((proto, model, report))
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
pub const IN_MEMORY: &str = "<in-memory model>";

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
            crate::ranges::plan_ranges(path, proto, options, &budget)?
        }
        SplitChoice::Off => plan_proto(path, proto, options, &budget)?,
        SplitChoice::Auto => plan_split(path, proto, options, &budget)?,
    };
    planned
        .table
        .splits
        .iter_mut()
        .for_each(|s| s.source.file = file_name(path));
    Ok(planned)
}

/// Work units a split trial is charged per node of its model, beside its planner's own work:
/// inference, liveness and the order search of the rewritten model (about 0.3 ms a node on a
/// loaded 2-core machine, at [`plan::WORK_PER_SECOND`]; 0.15 ms measured unloaded on a
/// 10,000-node rewrite of CaiT).
const TRIAL_WORK_PER_NODE: u64 = 9_000;

/// Plans with the split stage: the search plans candidates without the advanced modes; the
/// chosen model (nodes in execution order, so its stored order is the plan's) is planned
/// once more with every option. The first (unsplit) plan's planners may spend an eighth of
/// the budget's work and the final plan's the rest, so the two never spend more than the
/// budget. Each candidate's planners get the same allowance as the first plan's, charged to
/// the split search's own allowance (`--split-time`), so the last candidates are planned as
/// well as the first. The trials' safety stop is the split search's deadline, and the final
/// plan's is `--time-limit` counted from the end of the search, so no plan's result depends
/// on the time the search took. Without a mode the result is never larger than the unsplit
/// plan: the rewrite is dropped when its final plan is not smaller.
fn plan_split(
    path: &Path,
    proto: ModelProto,
    options: &Options,
    budget: &Budget,
) -> Result<Planned> {
    // Split tiles land in their chain's output as strided views (where that lowers the
    // bound; see `liveness::analyse_best`). Row blocks may write over their input's rows in
    // the searches that let them (`blockwise`; not under a budget, where each step's operands
    // must fit rather than the peak), and then in the final plan if one of those wins.
    let can_overwrite_blocks =
        options.liveness.alias && options.liveness.inplace && options.modes.budget.is_none();
    let with_blocks = |blockwise: bool| Options {
        liveness: LivenessOptions {
            strided: options.liveness.alias,
            blockwise,
            ..options.liveness
        },
        ..options.clone()
    };
    let options = &with_blocks(false);
    let trials = [false, true].map(|blockwise| Options {
        modes: crate::modes::ModeOptions::default(),
        ..with_blocks(blockwise)
    });
    // The split search's own allowance (`--split-time`): each trial is charged its planner's
    // work and TRIAL_WORK_PER_NODE per node for the rest of its pass; no trial starts once
    // the work is spent or the time is up (the safety stop).
    let split_budget = Budget {
        cancel: budget.cancel.clone(),
        ..Budget::within(options.split.search_time)
    };
    // The trials' planners stop on their work; their safety stop is the split search's
    // deadline, not --time-limit's, which would otherwise stop every trial made after it (the
    // result would then depend on the machine's load).
    // Each trial also adds to the pace, the seconds per node the trials took so far: a trial
    // that would end past the deadline does not start (one cannot be stopped halfway).
    let trial_work = budget.work / 8;
    let pace = std::cell::Cell::new((0.0f64, 0u64));
    let nodes_of = |m: &ModelProto| m.graph.as_ref().map_or(0, |g| g.node.len() as u64);
    let plan_trial = |model: ModelProto, blockwise: bool| -> Result<Planned> {
        let (nodes, started) = (nodes_of(&model), Instant::now());
        let trial_budget = Budget {
            deadline: split_budget.deadline,
            ..budget.part_of(trial_work)
        };
        let trial = &trials[usize::from(blockwise)];
        let planned = plan_proto(path, model, trial, &trial_budget)?;
        let (seconds, counted) = pace.get();
        pace.set((seconds + started.elapsed().as_secs_f64(), counted + nodes));
        Ok(planned)
    };
    // One meter for the search: trials and the estimates that rank them draw on it.
    let meter = std::cell::RefCell::new(split_budget.meter());
    let late = std::cell::Cell::new(false);
    let spend = |units: u64| meter.borrow_mut().spend(units);
    let budgeted_trial = |model: ModelProto, blockwise: bool| -> Result<Option<Planned>> {
        let nodes = nodes_of(&model);
        if !spend(nodes.saturating_mul(TRIAL_WORK_PER_NODE)) || !meter.borrow_mut().running() {
            return Ok(None);
        }
        let (seconds, counted) = pace.get();
        let expected = Duration::from_secs_f64(seconds * nodes as f64 / counted.max(1) as f64);
        if split_budget
            .deadline
            .is_some_and(|d| Instant::now() + expected >= d)
        {
            late.set(true);
            return Ok(None);
        }
        let planned = plan_trial(model, blockwise)?;
        spend(planned.work);
        Ok(Some(planned))
    };
    let first = plan_trial(proto, false)?;
    let first_work = first.work.min(trial_work);
    budget.report_phase("splitting");
    let split_options = SplitOptions {
        budget: options.modes.budget,
        scatter_inputs: options.liveness.include_io,
        ..options.split
    };
    // The search is greedy: each of split::SEARCHES searches on the work left by those
    // before it, and the best rank wins (under a budget the one that fits, then the
    // smallest arena; the first of equals).
    let mut outcome: Option<(split::Outcome, bool)> = None;
    // What the first search saw: row chains, chains read as bands, fine row strips.
    let mut first_saw: Option<(bool, bool, bool)> = None;
    for search in split::SEARCHES {
        let (rows, bands, strips) = first_saw.unwrap_or((true, true, true));
        // Without blocks written over their input, row chains, bands or fine strips, these
        // repeat the searches before.
        let repeats = match search.differs_in {
            split::Differs::Nothing => false,
            split::Differs::Rows => !rows,
            split::Differs::Bands => !bands,
            split::Differs::Strips => !strips,
        };
        if repeats || (search.blockwise && !can_overwrite_blocks) {
            continue;
        }
        let variant = SplitOptions {
            row_rules: search.row_rules,
            recompute: search.recompute,
            blockwise: search
                .blockwise
                .then_some(options.liveness.alignment.max(1)),
            progressive_bands: search.progressive_bands,
            early_tiles: search.early_tiles,
            fine_strips: search.fine_strips,
            ..split_options
        };
        let trial = |model: ModelProto| budgeted_trial(model, search.blockwise);
        let found = split::search(&first, &variant, &trial, &spend)?;
        let banded = found
            .info
            .chains
            .iter()
            .any(|c| c.read_as_bands_by.is_some());
        // Row strips finer than any grid of the search without them.
        let strips =
            found.info.chains.iter().any(|c| {
                c.axis.is_none() && c.grid[1] == 1 && c.grid[0] > split::search::MAX_TILES
            });
        first_saw.get_or_insert((found.saw_rows, banded, strips));
        let rank = |o: &split::Outcome| (o.over_budget, o.info.arena_after);
        if outcome.as_ref().is_none_or(|o| rank(&found) < rank(&o.0)) {
            outcome = Some((found, search.blockwise));
        }
    }
    let (outcome, blockwise) = outcome.expect("at least one search");
    let options = &with_blocks(blockwise);
    let ended = match meter.borrow().ending() {
        plan::Ending::Complete if late.get() => plan::Ending::Time,
        ending => ending,
    };
    // The final plan's planners get the work left and --time-limit anew as their safety stop.
    let budget = &Budget {
        deadline: Instant::now().checked_add(options.time_limit),
        ..budget.part_of(budget.work - first_work)
    };
    let chains = outcome.info.chains.len();
    // Without a mode the first plan was made with the final options: it is the unsplit
    // plan, and the split is kept only when its final plan is smaller still.
    let modes = &options.modes;
    let unsplit_is_final =
        modes.tiers.is_empty() && modes.budget.is_none() && modes.partition.is_none();
    let arena = |p: &Planned| p.table.arenas.iter().map(|a| a.bytes).sum::<u64>();
    let mut info = outcome.info;
    let mut planned = if chains == 0 && unsplit_is_final {
        first
    } else if chains == 0 {
        plan_proto(path, first.original, options, budget)?
    } else {
        let stored = Options {
            schedule: ScheduleChoice::Stored,
            ..options.clone()
        };
        let split = plan_proto(path, outcome.model, &stored, budget).map_err(|e| {
            if crate::error::is_input_error(&e) {
                crate::input_error!(
                    "{e:#} (after splitting {chains} chain(s) within --split-overhead {}%)",
                    options.split.overhead_pct
                )
            } else {
                e
            }
        })?;
        if unsplit_is_final && arena(&first) <= arena(&split) {
            info.chains.clear();
            info.extra_macs = 0;
            first
        } else {
            split
        }
    };
    info.arena_after = arena(&planned);
    planned.table.splits = Some(info);
    planned.table.stats.searches.push(emit::SearchEnd {
        planner: "split".into(),
        ended_by: ended.name().into(),
    });
    Ok(planned)
}

/// The liveness of the order `schedule` chooses, and its method: the stored order (whose
/// analysis is given), or the memory-aware search's best under `bound` of `rank` (a quick
/// analysis), kept when `bound` of its full analysis `analyse` beats the stored order's.
pub(crate) fn chosen_order(
    graph: &crate::ir::Graph,
    (stored, stored_liveness): (&[usize], Liveness),
    schedule: ScheduleChoice,
    budget: &Budget,
    (rank, analyse): Analyses,
    bound: &dyn Fn(&Liveness) -> u64,
) -> Result<(Liveness, &'static str)> {
    if schedule == ScheduleChoice::Stored {
        return Ok((stored_liveness, "stored"));
    }
    budget.report_phase("ordering");
    let mut score = |order: &[usize]| rank(order).map(|l| bound(&l));
    let (best, _) = schedule::memory_order(graph, stored, &mut score)?;
    if best.method == "stored" {
        return Ok((stored_liveness, "stored"));
    }
    let chosen = analyse(&best.order)?;
    if bound(&chosen) < bound(&stored_liveness) {
        Ok((chosen, best.method))
    } else {
        Ok((stored_liveness, "stored"))
    }
}

/// A quick analysis of an order (to rank candidate orders by) and the full one.
pub(crate) type Analyses<'a> = (
    &'a dyn Fn(&[usize]) -> Result<Liveness>,
    &'a dyn Fn(&[usize]) -> Result<Liveness>,
);

/// The pass on a decoded model; the table's `model.sha256` is left empty for the caller.
pub(crate) fn plan_proto(
    path: &Path,
    proto: ModelProto,
    options: &Options,
    budget: &Budget,
) -> Result<Planned> {
    let (original, mut model, report) = type_model(path, proto, &options.infer)?;
    // The budget and partition modes place tensors node by node: they run Q/DQ literally.
    let qdq = match options.modes.budget.is_some() || options.modes.partition.is_some() {
        true => crate::units::QdqChoice::Literal,
        false => options.qdq,
    };
    crate::units::mark(&mut model.graph, qdq);
    // Data-dependent counts are planned at their bounds: the model typed there.
    let at_bound = if report.data_dependent.is_empty() {
        None
    } else {
        let mut typed = type_model(path, original.clone(), &at_bound(&options.infer, &report))?.1;
        crate::units::mark(&mut typed.graph, qdq);
        Some(typed)
    };
    let typed = at_bound.as_ref().unwrap_or(&model);
    let graph = &typed.graph;
    let alignment = options.liveness.alignment.max(1);
    let stored = schedule::topological_order(graph).map_err(|e| prefix(path, e))?;
    let stored = schedule::keep_units_together(graph, &stored)?;
    let bound = |l: &Liveness| plan::max_live_bound(&problem_of(l, alignment));
    let counted =
        crate::ranges::data_dependent::nodes_touching_counts(&model.graph, &report.data_dependent)
            .map_err(|e| prefix(path, e))?;
    let liveness_of = |order: &[usize], flips: bool| {
        let order = &schedule::keep_units_together(graph, order)?;
        if counted.is_empty() {
            analyse_best(graph, order, options.liveness, &bound, flips)
        } else {
            // Sizes vary below the bounds: no strided views, no slice aliases at nodes
            // touching a data-dependent size.
            let fixed_layout = LivenessOptions {
                strided: false,
                blockwise: false,
                ..options.liveness
            };
            analyse_with(graph, order.to_vec(), fixed_layout, &|n| {
                !counted.contains(&n)
            })
        }
    };
    let (quick, best_liveness) = (
        |order: &[usize]| liveness_of(order, false),
        |order: &[usize]| liveness_of(order, true),
    );
    let stored_liveness = best_liveness(&stored).map_err(|e| prefix(path, e))?;
    let stored_bound = bound(&stored_liveness);
    let (liveness, method) = chosen_order(
        graph,
        (&stored, stored_liveness),
        options.schedule,
        budget,
        (&quick, &best_liveness),
        &bound,
    )
    .map_err(|e| prefix(path, e))?;
    let mut problem = problem_of(&liveness, alignment);
    let shared = crate::modes::prepare(typed, &liveness, &options.modes, &mut problem)?;

    let plan_started = Instant::now();
    let solution = solve_checked(path, &problem, options, budget)?;
    let plan_ms = plan_started.elapsed().as_secs_f64() * 1e3;

    let mut table = fixed_table(
        path,
        &original,
        typed,
        &liveness,
        (&problem, &solution),
        options,
        (method, stored_bound),
    );
    crate::ranges::data_dependent::mark(
        &mut table,
        &model.graph,
        &report.data_dependent,
        &Default::default(),
    )
    .map_err(|e| prefix(path, e))?;
    crate::modes::finish(
        graph,
        crate::modes::FlatPlan {
            liveness: &liveness,
            shared,
            offsets: &solution.offsets,
        },
        options.liveness,
        &options.modes,
        budget,
        &mut table,
    )
    .map_err(|e| prefix(path, e))?;
    let mut problems = verify::check_table(graph, &table);
    verify::check_data_dependent(&model.graph, &table, &mut problems);
    if !problems.is_empty() {
        return Err(anyhow!(
            "bug: the plan for {} failed verification: {}",
            path.display(),
            problems.join("; ")
        ));
    }
    Ok(Planned {
        original,
        model,
        table,
        report,
        timings: Timings {
            plan_ms,
            total_ms: 0.0,
        },
        work: solution.work_spent(),
    })
}

/// The options typing every data-dependent count at its proven bound, knowing no more of
/// any value's contents than `symbolic` (the report of the typing with the counts as symbols).
pub(crate) fn at_bound(infer: &InferOptions, symbolic: &InferReport) -> InferOptions {
    InferOptions {
        data_dependent_at_bound: true,
        count_dependent: symbolic.contents_unknown.clone(),
        ..infer.clone()
    }
}

/// Solves `problem` with the chosen planner within `budget`, and checks the offsets with the
/// planner core's own check (the independent verifier runs on the table later).
pub(crate) fn solve_checked(
    path: &Path,
    problem: &Problem,
    options: &Options,
    budget: &Budget,
) -> Result<plan::Solution> {
    let solution = plan::solve(problem, &plan_options(options, budget))
        .map_err(|e| crate::input_error!("{}: cannot plan: {e}", path.display()))?;
    plan::verify(problem, &solution).map_err(|e| {
        anyhow!(
            "bug: planner {} produced an invalid plan: {e}",
            solution.planner
        )
    })?;
    Ok(solution)
}

/// The planner options of the pass.
pub(crate) fn plan_options(options: &Options, budget: &Budget) -> PlanOptions {
    PlanOptions {
        planner: options.planner,
        budget: budget.clone(),
        ..PlanOptions::default()
    }
}

/// The table of a solved plan: the options, the model's identity (`sha256` left empty), the
/// order and the `method` that chose it (with the stored order's bound), the arena, the stats
/// and every tensor at its solved offset.
pub(crate) fn fixed_table(
    path: &Path,
    original: &ModelProto,
    model: &Model,
    liveness: &Liveness,
    (problem, solution): (&Problem, &plan::Solution),
    options: &Options,
    (method, stored_bound): (&str, u64),
) -> Table {
    let graph = &model.graph;
    let alignment = options.liveness.alignment.max(1);
    let table_options = TableOptions {
        alignment,
        inplace: options.liveness.inplace,
        alias: options.liveness.alias,
        include_io: options.liveness.include_io,
        dims: options.infer.dims.clone(),
        input_shapes: options.infer.input_shapes.clone(),
        input_values: options.infer.input_values.clone(),
        specialised_io: options.infer.binds_shapes(),
        ranges: Default::default(),
        // How the Q/DQ nodes ran: as units when any formed (`--qdq units`, outside plans over
        // ranges), else literally.
        qdq: crate::units::has_qdq(graph).then(|| {
            let ran = match graph.units.is_empty() {
                true => crate::units::QdqChoice::Literal,
                false => crate::units::QdqChoice::Units,
            };
            ran.name().to_string()
        }),
    };
    Table {
        format: emit::FORMAT.to_string(),
        model: ModelInfo {
            file: file_name(path),
            sha256: String::new(),
            ir_version: original.ir_version(),
            opsets: model.opsets.0.clone(),
        },
        schedule: liveness.order.clone(),
        arenas: emit::main_arena(solution.arena),
        stats: Stats {
            lower_bound_bytes: solution.lower_bound.max(plan::max_live_bound(problem)),
            naive_bytes: emit::naive_bytes(liveness, &table_options),
            planner: solution.planner.clone(),
            schedule: method.to_string(),
            stored_lower_bound_bytes: stored_bound,
            proven_optimal: solution.proven_optimal,
            searches: solution
                .searches
                .iter()
                .map(|s| emit::SearchEnd {
                    planner: s.planner.clone(),
                    ended_by: s.ended_by.name().to_string(),
                })
                .collect(),
        },
        tensors: emit::tensor_entries(
            graph,
            liveness,
            &emit::member_offsets(liveness, &solution.offsets),
        ),
        options: table_options,
        branches: emit::branch_choices(graph),
        hierarchy: None,
        offload: None,
        partition: None,
        splits: None,
        parametric: None,
        data_dependent: Vec::new(),
    }
}

/// The DSA problem of the analysis: one buffer per group, padded to the alignment, live over
/// the half-open step range `[first, last + 1)`.
pub fn problem_of(liveness: &Liveness, alignment: u64) -> Problem {
    Problem {
        buffers: liveness
            .buffers
            .iter()
            .map(|b| plan::Buffer {
                size: b.bytes.next_multiple_of(alignment),
                start: b.first as u32,
                end: b.last as u32 + 1,
            })
            .collect(),
        alignment,
    }
}

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
