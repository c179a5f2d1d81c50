//! The split stage's driver: plans the first (unsplit) model, gives the split search its
//! trials through [`crate::split::TrialPlan`], and plans the chosen model.

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::Result;
use bytes::Bytes;

use super::solve::{Purpose, plan_for, plan_proto};
use super::{Options, Planned, ScheduleChoice};
use crate::emit;
use crate::liveness::LivenessOptions;
use crate::onnx::proto::ModelProto;
use crate::plan::{Budget, Ending, Meter};
use crate::split::cuts::lock;
use crate::split::memo::Memo;
use crate::split::{self, SplitOptions, TrialOrder, TrialPlan};

/// Work units a split trial is charged per node of its model, beside its planner's own work:
/// inference, liveness and the order search of the rewritten model, about 30 µs a node of one
/// core at [`plan::WORK_PER_SECOND`] (16–35 µs measured on seven models, ARCHITECTURE.md,
/// "Work units"). A tile trial, which skips the order search ([`TrialOrder::Written`]), is
/// charged alike, so no search ends at another point than before it skipped it.
const TRIAL_WORK_PER_NODE: u64 = 900;

/// Plans with the split stage: the search plans candidates without the advanced modes, as
/// trials (`Purpose::Trial`: a quicker order search, fewer liveness flips, no verifier, as a
/// trial is never written); the first (unsplit) plan, which may be written, is planned in
/// full; the chosen model (nodes in execution order, so its stored order is the plan's) is
/// planned once more with every option, and verified. The first plan's planners may spend an
/// eighth of the budget's work and the final plan's the rest, so the two never spend more
/// than the budget. Each candidate's planners get the same allowance as the first plan's,
/// charged to the split search's own allowance (`--split-time`), so the last candidates are
/// planned as well as the first. The trials' safety stop is the split search's deadline, and
/// the final plan's is `--time-limit` counted from the end of the search, so no plan's result
/// depends on the time the search took. Without a mode the result is never larger than the
/// unsplit plan: the rewrite is dropped when its final plan is not smaller.
pub(super) fn plan_split(
    path: &Path,
    proto: ModelProto,
    options: &Options,
    budget: &Budget,
) -> Result<Planned> {
    // With QDQ units each reader of a DQ gets its own, so every tile copy of a chain's unit
    // keeps its DQ (split::dequantize).
    let mut proto = proto;
    // The model as given, when the copies changed it: its unsplit plan is planned from it,
    // as without the split (a reader that forms no unit would read a float copy of its own).
    let given = match options.qdq_in_effect() == crate::units::QdqChoice::Units {
        true => {
            let given = proto.clone();
            (split::dequantize::unique_readers(&mut proto) > 0).then_some(given)
        }
        false => None,
    };
    let given_options = options;
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
    // The trials share their initializers' decoded values (each trial is a rewrite of the
    // input model, whose initializers it keeps).
    let decoded = Arc::new(crate::ir::Decoded::default());
    // By whether blocks overwrite, then by the trial's order: the rewrite's (planned as
    // stored), then the order search's.
    let trials = [false, true].map(|blockwise| {
        let options = with_blocks(blockwise);
        let searched = Options {
            modes: crate::modes::ModeOptions::default(),
            infer: crate::infer::InferOptions {
                decoded: Some(Arc::clone(&decoded)),
                ..options.infer.clone()
            },
            ..options
        };
        let written = Options {
            schedule: ScheduleChoice::Stored,
            ..searched.clone()
        };
        [written, searched]
    });
    let trial_options = |blockwise: bool, order: TrialOrder| {
        &trials[usize::from(blockwise)][usize::from(order == TrialOrder::Searched)]
    };
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
    // A trial's planners stop early only on the safety stops, and in a search made ahead
    // when it is abandoned (`stop` replaces the cancel flag: see [`Role::Ahead`]).
    let plan_trial = |model: ModelProto,
                      (blockwise, order): (bool, TrialOrder),
                      stop: Option<&Arc<AtomicBool>>| {
        let trial = trial_options(blockwise, order);
        let budget = match stop {
            Some(stop) => &Budget {
                cancel: Some(Arc::clone(stop)),
                ..trial_budget.clone()
            },
            None => &trial_budget,
        };
        plan_for(path, model, trial, budget, Purpose::Trial)
    };
    // The trials planned so far, by the digest of their model, whether blocks overwrite and
    // their order; the searches running side by side share it.
    let trials_done: Memo<(Digest, bool, TrialOrder), (TrialPlan, u64)> = Memo::default();
    let payloads = Payloads::default();
    // A trial charged to `meter`: its nodes' TRIAL_WORK_PER_NODE and its planners' work.
    // `None` when the meter is spent, or when `role`'s search is abandoned meanwhile: its
    // trial, cut short, is not kept.
    let budgeted_trial = |model: &mut ModelProto,
                          (blockwise, order, role): (bool, TrialOrder, Role),
                          (spend, meter): (split::Spend, &RefCell<Meter>)|
     -> Result<Option<TrialPlan>> {
        let nodes = nodes_of(model);
        if !spend(nodes.saturating_mul(TRIAL_WORK_PER_NODE)) || !meter.borrow_mut().running() {
            return Ok(None);
        }
        // Searches meet the same rewrites again (their first rounds start alike): a trial
        // planned before, or being planned by another search, is taken at the charge it had,
        // so no result changes.
        let key = (digest(model, &payloads), blockwise, order);
        let made = trials_done.get_or_make(key, !role.is_first(), || -> Result<_> {
            // Planned from the model itself, which the plan gives back.
            let planned = plan_trial(std::mem::take(model), (blockwise, order), role.stop());
            if role.abandoned() {
                return Err(Abandoned.into());
            }
            let planned = planned?;
            *model = planned.original;
            let trial = TrialPlan {
                model: Arc::new(planned.model),
                table: Arc::new(planned.table),
            };
            Ok((trial, planned.work))
        });
        let ((trial, work), _) = match made {
            Err(e) if e.is::<Abandoned>() => return Ok(None),
            made => made?,
        };
        spend(work);
        Ok(Some(trial))
    };
    let Planned {
        original,
        model,
        table,
        report,
        timings,
        work,
    } = plan_proto(
        path,
        proto,
        trial_options(false, TrialOrder::Searched),
        &trial_budget,
    )?;
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
    // them draw on it; `role` says how it runs beside the first (see [`Role`]), and `seen`
    // hears what it has shown.
    let run = |search: &split::Search,
               meter: Meter,
               (role, seen): (Role, split::Seen)|
     -> Result<(split::Outcome, Meter)> {
        let meter = RefCell::new(meter);
        let spend = |units: u64| {
            let mut meter = meter.borrow_mut();
            let granted = meter.spend(units);
            granted && role.keeps_pace(&meter, units)
        };
        let variant = SplitOptions {
            row_rules: search.row_rules,
            recompute: search.recompute,
            passes: search.passes,
            blockwise: search
                .blockwise
                .then_some(options.liveness.alignment.max(1)),
            progressive_bands: search.progressive_bands,
            early_tiles: search.early_tiles,
            fine_strips: search.fine_strips,
            row_order: search.row_order,
            nested: search.nested,
            first: role.is_first(),
            ..split_options
        };
        let trial = |model: &mut ModelProto, order: TrialOrder| match role.abandoned() {
            true => Ok(None),
            false => budgeted_trial(model, (search.blockwise, order, role), (&spend, &meter)),
        };
        let found = split::search(
            &original,
            &first_trial,
            &variant,
            &trial,
            (&spend, &memos, seen),
        )?;
        Ok((found, meter.into_inner()))
    };
    // The first search runs on the whole allowance. The others each get what it left, on
    // meters of their own: each one's result depends on its options and that work alone,
    // never on the machine's cores or load. A search that differs from the first only in
    // what the first may never show (row chains, bands, fine strips) is made only when the
    // first shows it. Each starts as soon as the first shows what it differs in, side by side
    // with the first, on the whole allowance; once the first ends, a search it did not call
    // for is abandoned, and one that spent more than the first left (or did not complete) is
    // made again on what the first left, so its result is the one it would have had after
    // the first. The best rank wins (under a budget the one that fits, then the smallest
    // arena; the first of equals, in split::SEARCHES order).
    let (first_search, others) = split::SEARCHES.split_first().expect("a first search");
    // Whether the first search, having shown `shown`, calls for `search`.
    let wanted = |search: &split::Search, shown: split::Shown| {
        (!search.blockwise || can_overwrite_blocks) && shown.differs(search.differs_in)
    };
    let ahead: Vec<Ahead> = others.iter().map(|_| Ahead::default()).collect();
    // What the first search has left, as it goes.
    let first_left = AtomicU64::new(u64::MAX);
    let no_one = |_: split::Shown| {};
    let first = std::thread::scope(|scope| {
        let seen = |shown: split::Shown| {
            for (search, slot) in others.iter().zip(&ahead) {
                if wanted(search, shown) && !slot.started.swap(true, Ordering::Relaxed) {
                    let (run, first_left) = (&run, &first_left);
                    let (meter, no_one) = (split_budget.meter(), &no_one);
                    scope.spawn(move || {
                        yield_to_first();
                        let role = Role::Ahead(&slot.abandoned, first_left, &slot.behind);
                        let found = run(search, meter, (role, no_one));
                        *lock(&slot.found) = Some(found);
                    });
                }
            }
        };
        let role = Role::First(&first_left);
        let first = run(first_search, split_budget.meter(), (role, &seen));
        // What the first's outcome does not call for is abandoned, and every search once a
        // safety stop has ended the first.
        let shown = first.as_ref().ok().map(|(f, _)| f.shown);
        let stopped = first
            .as_ref()
            .is_ok_and(|(_, meter)| matches!(meter.ending(), Ending::Time | Ending::Cancelled));
        for (search, slot) in others.iter().zip(&ahead) {
            if stopped || !shown.is_some_and(|shown| wanted(search, shown)) {
                slot.abandoned.store(true, Ordering::Relaxed);
            }
        }
        first
    });
    let (first_found, first_meter) = first?;
    let shown = first_found.shown;
    // A search made ahead stands when it completed within what the first left (then every
    // charge it made would have been granted after the first too). One that fell behind
    // what the first left at a charge, having spent no more than that before it, stands as
    // a search made after the first would end: that charge refused, the rest with it, and
    // its meter's work spent.
    let complete = first_meter.ending() == Ending::Complete;
    let stands = |meter: &Meter, abandoned: bool, behind: u64| {
        let spent = match abandoned {
            false => meter.spent(),
            true => behind,
        };
        complete && meter.ending() == Ending::Complete && spent <= first_meter.left()
    };
    let mut found: Vec<Option<Result<(split::Outcome, Ending)>>> = Vec::new();
    for (search, slot) in others.iter().zip(ahead) {
        let abandoned = slot.abandoned.load(Ordering::Relaxed);
        let behind = slot.behind.load(Ordering::Relaxed);
        let ahead = slot.found.into_inner().unwrap_or_else(|e| e.into_inner());
        found.push(match ahead {
            Some(Ok((f, meter)))
                if (!abandoned || wanted(search, shown)) && stands(&meter, abandoned, behind) =>
            {
                let ending = match abandoned {
                    true => Ending::Work,
                    false => meter.ending(),
                };
                Some(Ok((f, ending)))
            }
            _ => None,
        });
    }
    let again: Vec<usize> = (0..others.len())
        .filter(|&i| found[i].is_none() && wanted(&others[i], shown))
        .collect();
    // On threads of their own, as the searches made ahead: a search waits in the memos for a
    // trial another is planning, which a rayon worker must not do (it could be the worker
    // that planning waits for).
    let made_again: Vec<Result<(split::Outcome, Meter)>> = std::thread::scope(|scope| {
        let handles: Vec<_> = again
            .iter()
            .map(|&i| {
                let (run, no_one) = (&run, &no_one);
                let meter = first_meter.share(1);
                scope.spawn(move || run(&others[i], meter, (Role::After, no_one)))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
            .collect()
    });
    for (i, made) in again.into_iter().zip(made_again) {
        found[i] = Some(made.map(|(f, meter)| (f, meter.ending())));
    }
    let mut ended = first_meter.ending();
    let mut outcome = (first_found, first_search.blockwise);
    let rank = |o: &split::Outcome| (o.over_budget, o.info.arena_after);
    for (search, found) in others.iter().zip(found) {
        let Some(found) = found else { continue };
        let (found, ending) = found?;
        ended = ended.max(ending);
        if rank(&found) < rank(&outcome.0) {
            outcome = (found, search.blockwise);
        }
    }
    let (outcome, blockwise) = outcome;
    // The memos and the trials hold every plan the searches made, in tens of thousands of
    // allocations (on MobileNetV2 their freeing took a tenth of a second after the searches):
    // freed on a thread of their own while the final plan is made. They hold the first plan
    // too, which is then copied out of its Arcs below (the same plan either way).
    let held = (memos, trials_done, payloads);
    std::thread::spawn(move || drop(held));
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
    // The unsplit plan: the first plan, or the given model's plan when the DQ copies changed it.
    let unsplit = |first: Planned, given: Option<ModelProto>| match given {
        Some(given) => plan_proto(path, given, given_options, budget),
        None => Ok(first),
    };
    let mut planned = if chains == 0 && unsplit_is_final {
        unsplit(first, given)?
    } else if chains == 0 {
        let model = given.unwrap_or(first.original);
        plan_proto(path, model, options, budget)?
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
        let unsplit = match unsplit_is_final {
            true => Some(unsplit(first, given)?),
            false => None,
        };
        match unsplit {
            Some(unsplit) if arena(&unsplit) <= arena(&split) => {
                info.chains.clear();
                info.extra_macs = 0;
                unsplit
            }
            Some(unsplit) => {
                info.arena_before = arena(&unsplit);
                split
            }
            None => split,
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

/// The nice value of a search made ahead: a tenth of the weight of a normal thread, so it
/// gives way to the first search, yet is not starved when every core is busy. The driver
/// waits for these searches (to stop when abandoned, or to end); at nice 19 (a seventieth of
/// the weight) they got so little of a loaded machine that MobileNetV2 beside three busy
/// processes on 2 cores took over 70 s instead of 10, and ResNet-small at `--split-time 0.3`
/// ran into the safety stop (another file). Beside no load or one busy process both are
/// alike (MobileNetV3-Small QDQ with `--exclude-io`: 9.1 s at nice 10, 9.4 s at 19; without
/// the lower priority 14.4 s).
#[cfg(target_os = "linux")]
const AHEAD_NICE: libc::c_int = 10;

/// Lowers the calling thread's scheduling priority (nice [`AHEAD_NICE`], Linux), so a search
/// made ahead takes little of the first search's core: when the first runs to the end of its
/// allowance, nothing made ahead can stand, and the first should not have shared its core. No
/// result depends on it.
#[cfg(target_os = "linux")]
fn yield_to_first() {
    // SAFETY: gettid takes no argument; setpriority on one thread's id changes that
    // thread's nice value only, and lowering it needs no privilege (an error changes
    // nothing).
    unsafe {
        let thread = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, thread, AHEAD_NICE);
    }
}

/// Priorities are left as they are outside Linux.
#[cfg(not(target_os = "linux"))]
fn yield_to_first() {}

/// How a search of split::SEARCHES runs beside the first.
#[derive(Clone, Copy)]
enum Role<'a> {
    /// The first search: it publishes what its meter has left after each charge.
    First(&'a AtomicU64),
    /// A search made ahead, side by side with the first, on the whole allowance: it stops,
    /// abandoned, once it has spent more than the first has left (its result could then not
    /// stand whole: the first's leftover only shrinks, its own spending only grows), or when
    /// the driver abandons it. The flag is its trials' cancel flag, so a trial being planned
    /// stops too: the driver waits for the searches made ahead before it goes on. The last
    /// is where it fell behind: what it had spent before the charge that passed the first's
    /// leftover.
    Ahead(&'a Arc<AtomicBool>, &'a AtomicU64, &'a AtomicU64),
    /// A search made after the first, on what the first left.
    After,
}

impl<'a> Role<'a> {
    /// After a charge of `units` to `meter`: false once a search made ahead is abandoned.
    fn keeps_pace(self, meter: &Meter, units: u64) -> bool {
        match self {
            Role::First(left) => {
                left.store(meter.left(), Ordering::Relaxed);
                true
            }
            Role::Ahead(abandoned, first_left, behind) => {
                if meter.spent() > first_left.load(Ordering::Relaxed)
                    && !abandoned.swap(true, Ordering::Relaxed)
                {
                    behind.store(meter.spent() - units, Ordering::Relaxed);
                }
                !abandoned.load(Ordering::Relaxed)
            }
            Role::After => true,
        }
    }

    /// Whether this is the first search.
    fn is_first(self) -> bool {
        matches!(self, Role::First(_))
    }

    /// Whether the search was abandoned (its result will not be used).
    fn abandoned(self) -> bool {
        matches!(self, Role::Ahead(a, _, _) if a.load(Ordering::Relaxed))
    }

    /// The flag that stops a search made ahead's trials when it is abandoned.
    fn stop(self) -> Option<&'a Arc<AtomicBool>> {
        match self {
            Role::Ahead(abandoned, _, _) => Some(abandoned),
            _ => None,
        }
    }
}

/// A trial cut short because its search was abandoned (never kept in the trial memo).
#[derive(Debug, thiserror::Error)]
#[error("the search was abandoned")]
struct Abandoned;

/// A search of split::SEARCHES made ahead, side by side with the first.
struct Ahead {
    /// Whether it was started.
    started: AtomicBool,
    /// Set when the first search's outcome does not call for it, or once it has spent more
    /// than the first left: it then stops, and so does the trial it is planning.
    abandoned: Arc<AtomicBool>,
    /// What it had spent before the charge that took it past what the first left
    /// (`u64::MAX` while it has not).
    behind: AtomicU64,
    /// What it found, with its meter.
    found: Mutex<Option<Result<(split::Outcome, Meter)>>>,
}

impl Default for Ahead {
    fn default() -> Self {
        Ahead {
            started: AtomicBool::new(false),
            abandoned: Arc::default(),
            behind: AtomicU64::new(u64::MAX),
            found: Mutex::default(),
        }
    }
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
