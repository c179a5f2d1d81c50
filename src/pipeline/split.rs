//! The split stage's driver: plans the first (unsplit) model, gives the split search its
//! trials through [`crate::split::TrialPlan`], and plans the chosen model.

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use anyhow::Result;
use bytes::Bytes;
use rayon::prelude::*;

use super::solve::{Purpose, plan_for, plan_proto};
use super::{Options, Planned, ScheduleChoice};
use crate::emit;
use crate::liveness::LivenessOptions;
use crate::onnx::proto::ModelProto;
use crate::plan::{Budget, Meter};
use crate::split::cuts::lock;
use crate::split::{self, SplitOptions, TrialPlan};

/// Work units a split trial is charged per node of its model, beside its planner's own work:
/// inference, liveness and the order search of the rewritten model (about 0.3 ms a node on a
/// loaded 2-core machine, at [`plan::WORK_PER_SECOND`]; 0.15 ms measured unloaded on a
/// 10,000-node rewrite of CaiT).
const TRIAL_WORK_PER_NODE: u64 = 9_000;

/// Plans with the split stage: the search plans candidates without the advanced modes, as
/// trials (`Purpose::Trial`: a quicker order search, fewer liveness flips, no verifier, as a
/// trial is never written); the first (unsplit) plan, which may be written, is planned in
/// full; the chosen model (nodes in execution order, so its stored order is the plan's) is
/// planned once more with every option, and verified. The first plan's planners may spend an
/// eighth of the budget's work and the final plan's the rest, so the two never spend more
/// than the budget. Each candidate's planners get the same allowance as the first plan's,
/// charged to the split search's own allowance (`--split-time`), so the last candidates are
/// planned as well as the first. The trials' safety stop is the split search's deadline, and the final
/// plan's is `--time-limit` counted from the end of the search, so no plan's result depends
/// on the time the search took. Without a mode the result is never larger than the unsplit
/// plan: the rewrite is dropped when its final plan is not smaller.
pub(super) fn plan_split(
    path: &Path,
    proto: ModelProto,
    options: &Options,
    budget: &Budget,
) -> Result<Planned> {
    // With QDQ units each reader of a DQ gets its own, so every tile copy of a chain's unit
    // keeps its DQ (split::dequantize).
    let mut proto = proto;
    if options.qdq_in_effect() == crate::units::QdqChoice::Units {
        split::dequantize::unique_readers(&mut proto);
    }
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
    // the work is spent. The clock decides nothing: its deadline, plan::SAFETY_FACTOR times
    // the allowance, is a safety stop that the work ends the search before, even on a loaded
    // machine (so the result does not depend on the load).
    let split_budget = Budget {
        cancel: budget.cancel.clone(),
        ..Budget::within(options.split.search_time)
    };
    // The trials' planners stop on their work; their safety stop is the split search's
    // deadline, not --time-limit's, which would otherwise stop every trial made after it (the
    // result would then depend on the machine's load).
    let trial_work = budget.work / 8;
    let nodes_of = |m: &ModelProto| m.graph.as_ref().map_or(0, |g| g.node.len() as u64);
    let trial_budget = Budget {
        deadline: split_budget.deadline,
        ..budget.part_of(trial_work)
    };
    let plan_trial = |model: ModelProto, blockwise: bool| -> Result<Planned> {
        let trial = &trials[usize::from(blockwise)];
        plan_for(path, model, trial, &trial_budget, Purpose::Trial)
    };
    // The trials planned so far, by the digest of their model and whether blocks overwrite;
    // the searches running side by side share it.
    let trials_done: Mutex<HashMap<(Digest, bool), (TrialPlan, u64)>> = Default::default();
    let payloads = Payloads::default();
    // A trial charged to `meter`: its nodes' TRIAL_WORK_PER_NODE and its planners' work.
    let budgeted_trial = |mut model: ModelProto,
                          blockwise: bool,
                          meter: &RefCell<Meter>|
     -> Result<Option<TrialPlan>> {
        let spend = |units: u64| meter.borrow_mut().spend(units);
        let nodes = nodes_of(&model);
        if !spend(nodes.saturating_mul(TRIAL_WORK_PER_NODE)) || !meter.borrow_mut().running() {
            return Ok(None);
        }
        // Searches meet the same rewrites again (their first rounds start alike): a trial
        // planned before is taken from the memo at the charge it had, so no result changes.
        let key = (digest(&mut model, &payloads), blockwise);
        let known = lock(&trials_done).get(&key).cloned();
        if let Some((trial, work)) = known {
            spend(work);
            return Ok(Some(trial));
        }
        let planned = plan_trial(model, blockwise)?;
        spend(planned.work);
        let trial = TrialPlan {
            model: Arc::new(planned.model),
            table: Arc::new(planned.table),
        };
        let done = (trial.clone(), planned.work);
        lock(&trials_done).insert(key, done);
        Ok(Some(trial))
    };
    let Planned {
        original,
        model,
        table,
        report,
        timings,
        work,
    } = plan_proto(path, proto, &trials[0], &trial_budget)?;
    let first_trial = TrialPlan {
        model: Arc::new(model),
        table: Arc::new(table),
    };
    let first_work = work.min(trial_work);
    budget.report_phase("splitting");
    let split_options = SplitOptions {
        budget: options.modes.budget,
        scatter_inputs: options.liveness.include_io,
        ..options.split
    };
    // The chain cuts and ranked rounds the searches share (rounds and searches meet the same
    // chains and plans again).
    let memos = split::Memos::default();
    // One search of split::SEARCHES on its own meter: its trials and the estimates that rank
    // them draw on it.
    let run = |search: &split::Search, meter: Meter, alone: bool| -> Result<(split::Outcome, Meter)> {
        let meter = RefCell::new(meter);
        let spend = |units: u64| meter.borrow_mut().spend(units);
        let variant = SplitOptions {
            row_rules: search.row_rules,
            recompute: search.recompute,
            blockwise: search
                .blockwise
                .then_some(options.liveness.alignment.max(1)),
            progressive_bands: search.progressive_bands,
            early_tiles: search.early_tiles,
            fine_strips: search.fine_strips,
            grade_ahead: alone,
            ..split_options
        };
        let trial = |model: ModelProto| budgeted_trial(model, search.blockwise, &meter);
        let found = split::search(&original, &first_trial, &variant, &trial, (&spend, &memos))?;
        Ok((found, meter.into_inner()))
    };
    // The first search runs on the whole allowance. The others each get what it left, on
    // meters of their own, and run side by side: each one's result depends on its options
    // and that work alone, never on the machine's cores or load. The best rank wins (under
    // a budget the one that fits, then the smallest arena; the first of equals, in
    // split::SEARCHES order).
    let (first_search, others) = split::SEARCHES.split_first().expect("a first search");
    let (first_found, first_meter) = run(first_search, split_budget.meter(), true)?;
    let banded = first_found
        .info
        .chains
        .iter()
        .any(|c| c.read_as_bands_by.is_some());
    // Row strips finer than any grid of the search without them.
    let strips = first_found
        .info
        .chains
        .iter()
        .any(|c| c.axis.is_none() && c.grid[1] == 1 && c.grid[0] > split::candidates::MAX_TILES);
    // Without blocks written over their input, row chains, bands or fine strips, these
    // repeat the first search.
    let differs = |search: &&split::Search| {
        let differs = match search.differs_in {
            split::Differs::Nothing => true,
            split::Differs::Rows => first_found.saw_rows,
            split::Differs::Bands => banded,
            split::Differs::Strips => strips,
        };
        differs && (!search.blockwise || can_overwrite_blocks)
    };
    let others: Vec<&split::Search> = others.iter().filter(differs).collect();
    let found: Vec<Result<(split::Outcome, Meter)>> = others
        .par_iter()
        .map(|search| run(search, first_meter.share(1), false))
        .collect();
    let mut ended = first_meter.ending();
    let mut outcome = (first_found, first_search.blockwise);
    let rank = |o: &split::Outcome| (o.over_budget, o.info.arena_after);
    for (search, found) in others.iter().zip(found) {
        let (found, meter) = found?;
        ended = ended.max(meter.ending());
        if rank(&found) < rank(&outcome.0) {
            outcome = (found, search.blockwise);
        }
    }
    let (outcome, blockwise) = outcome;
    // The memos hold the first plan (ranked rounds keep their plans): free them, so the first
    // plan is moved out of its Arcs below, not copied.
    drop(memos);
    let first = Planned {
        original,
        model: Arc::unwrap_or_clone(first_trial.model),
        table: Arc::unwrap_or_clone(first_trial.table),
        report,
        timings,
        work,
    };
    let options = &with_blocks(blockwise);
    // The final plan's planners get the work left, and --time-limit's safety stop anew.
    let budget = &Budget {
        deadline: Budget::within(options.time_limit).deadline,
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

/// The SHA-256 of a model's encoding, with large tensor payloads in it replaced by their own
/// SHA-256 (see [`Payloads`]).
type Digest = [u8; 32];

/// The SHA-256 of tensor payloads, by their address and length, each kept with a handle on
/// its payload so the memory cannot hold other bytes while the entry stands (payloads are
/// immutable [`Bytes`]). Every trial of a model carries the same weights: each is hashed once
/// rather than encoded and hashed per trial.
#[derive(Default)]
struct Payloads(Mutex<HashMap<(usize, usize), (Digest, Bytes)>>);

impl Payloads {
    /// The SHA-256 of `payload`.
    fn digest(&self, payload: &Bytes) -> Digest {
        let key = (payload.as_ptr() as usize, payload.len());
        if let Some((d, _)) = lock(&self.0).get(&key) {
            return *d;
        }
        let d = sha256(payload);
        lock(&self.0).insert(key, (d, payload.clone()));
        d
    }
}

/// Payloads longer than this are digested on their own in [`digest`].
const DIGESTED_PAYLOAD: usize = 64;

/// [`Digest`] of `model`: the encoding with every initializer payload longer than
/// [`DIGESTED_PAYLOAD`] bytes replaced by its SHA-256 (two models share a digest only when
/// they are equal, short of a SHA-256 collision). The payloads are swapped for their digests
/// in place while the model is encoded, then put back: the model is left as it was, and
/// never copied.
fn digest(model: &mut ModelProto, payloads: &Payloads) -> Digest {
    use prost::Message;
    let Some(graph) = model.graph.as_mut() else {
        return sha256(&model.encode_to_vec());
    };
    // The swapped payloads, by initializer index.
    let mut kept = Vec::new();
    for (i, tensor) in graph.initializer.iter_mut().enumerate() {
        if let Some(raw) = tensor.raw_data.as_mut()
            && raw.len() > DIGESTED_PAYLOAD
        {
            let light = Bytes::copy_from_slice(&payloads.digest(raw));
            kept.push((i, std::mem::replace(raw, light)));
        }
    }
    let encoded = sha256(&model.encode_to_vec());
    let graph = model.graph.as_mut().expect("the graph swapped above");
    for (i, raw) in kept {
        graph.initializer[i].raw_data = Some(raw);
    }
    encoded
}

/// The SHA-256 of `bytes`.
fn sha256(bytes: &[u8]) -> Digest {
    use sha2::Digest as _;
    let mut out = [0; 32];
    out.copy_from_slice(&sha2::Sha256::digest(bytes));
    out
}
