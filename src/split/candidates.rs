//! A round's candidates: the chains around the plan's hot steps, each with the grid it would
//! be cut by and its estimated arena, best first ([`candidates`]); and the memo of rounds the
//! searches share ([`Rounds`]). The searches run side by side with options that differ in
//! a few ways (how bands are estimated, when tiles run, how rows are cut), and often pass
//! through the same plans: a search that meets a plan another search ranked with the same
//! options takes that ranking, charged the work it cost, so no result changes.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use super::chain::{Chain, MAX_BUDGET_CHAIN_NODES, MAX_CHAIN_NODES, Walker};
use super::cuts::NodeKeys;
use super::memo::Memo;
use super::estimate::{chain_work, step_operands, strips_work, tiles_work, visit_units};
use super::rows::chain::Recompute;
use super::rows::rules::RuleSet;
use super::rows::{self, Blocking};
use super::target::{Counting, grade, target};
use super::tiling::Tiling;
use super::{Memos, Spend, Spent, SplitOptions, TrialPlan};
use crate::plan::WORK_PER_SECOND;

/// Largest number of tiles along one axis the search tries.
pub const MAX_TILES: usize = 8;
/// Largest number of tiles along one axis under a budget.
const MAX_FINE_TILES: usize = 32;
/// Most row strips without a budget in a search with [`SplitOptions::fine_strips`]: strips
/// that stream ([`super::tiling::stream`]) cost no extra MACs, so finer ones only lower the
/// tiles' working set.
pub const MAX_STRIPS: usize = 16;
/// Each round's target ([`target`]) may charge this fraction (1/n) of the search's allowance.
const TARGET_SHARE: u64 = 4;

/// A candidate: what it cuts, its estimated arena and the estimate of the chain's own part
/// (which ranks candidates of equal estimates).
#[derive(Clone)]
pub struct Candidate {
    /// What it cuts.
    pub cut: Cut,
    /// Whether the chain is one of the target's cover (tried first).
    pub covers: bool,
    /// The schedule step of the chain's first node.
    pub start: usize,
    /// The estimated arena with the cut.
    pub estimate: u64,
    /// The estimate of the chain's own part.
    pub inside: u64,
}

/// A cut's [`Candidate::pattern`]: operators in order, then axes or grid and part count.
pub type Pattern = (Vec<String>, Vec<usize>);

/// What a candidate cuts.
#[derive(Clone)]
pub enum Cut {
    /// A spatial chain into H/W tiles.
    Tiles(Chain, Tiling),
    /// A row chain into blocks of rows.
    Rows(Blocking),
}

impl Candidate {
    /// Multiply-accumulates the cut recomputes.
    pub fn extra_macs(&self) -> u64 {
        match &self.cut {
            Cut::Tiles(_, tiling) => tiling.extra_macs,
            Cut::Rows(b) => b.extra_macs,
        }
    }

    /// What the cut does, independent of where: its nodes' operators, the axes or grid, and
    /// the number of parts. Repeated layers cut alike have equal patterns.
    pub fn pattern(&self, graph: &crate::ir::Graph) -> Pattern {
        let (nodes, shape) = match &self.cut {
            Cut::Tiles(chain, tiling) => (&chain.nodes, tiling.grid.to_vec()),
            Cut::Rows(b) => {
                let mut shape = b.chain.axes.clone();
                shape.push(b.blocks.len());
                (&b.chain.nodes, shape)
            }
        };
        let ops = nodes.iter().map(|&n| graph.nodes[n].op_type.clone());
        (ops.collect(), shape)
    }

    /// Whether the cut recomputes nodes that also stay for readers outside it.
    pub fn shares(&self) -> bool {
        matches!(&self.cut, Cut::Rows(b) if !b.chain.shared.is_empty())
    }

    /// Nodes of the chain.
    pub fn node_count(&self) -> usize {
        match &self.cut {
            Cut::Tiles(chain, _) => chain.nodes.len(),
            Cut::Rows(b) => b.chain.nodes.len(),
        }
    }
}

/// Everything a round's ranking reads besides its plan: the nodes made by earlier splits
/// (`origin`), the MACs left, whether it aims at a target, and the options that rank.
#[derive(Clone, PartialEq, Eq, Hash)]
struct Round {
    /// The plan's model and table, by address (the memo holds them, so no other plan can
    /// take their addresses while the entry stands).
    plan: [usize; 2],
    origin: Vec<Option<usize>>,
    allowance: u64,
    aim: bool,
    budget: Option<u64>,
    fine_strips: bool,
    progressive_bands: bool,
    row_rules: Vec<RuleSet>,
    recompute: Recompute,
    passes: usize,
    nested: bool,
    search_time: Duration,
}

/// A ranked round: the plan it ranked (held), its candidates and the work it was charged.
type Entry = (TrialPlan, Arc<[Candidate]>, u64);

/// The rounds ranked so far, shared by the searches of one model.
#[derive(Default)]
pub struct Rounds {
    memo: Memo<Round, Entry>,
}

/// [`rank`] of a round, from `rounds` when a search ranked the same round before: then
/// charged at once the work the ranking was charged, which spends the allowance exactly as
/// ranking again would (its charges only add up, and the ranking never reads the meter but
/// to stop), and fails exactly when ranking again would run out.
#[allow(clippy::too_many_arguments)]
pub fn candidates(
    planned: &TrialPlan,
    live: &[u64],
    origin: &[Option<usize>],
    allowance: u64,
    options: &SplitOptions,
    aim: bool,
    (spend, memos): (Spend, &Memos),
) -> Result<Vec<Candidate>, Spent> {
    let round = Round {
        plan: planned.address(),
        origin: origin.to_vec(),
        allowance,
        aim,
        budget: options.budget,
        fine_strips: options.fine_strips,
        // Bands are read only from nodes an earlier split made: before the first split, how
        // they are estimated changes nothing.
        progressive_bands: options.progressive_bands && origin.iter().any(Option::is_none),
        row_rules: options.row_rules.to_vec(),
        recompute: options.recompute,
        passes: options.passes,
        nested: options.nested,
        search_time: options.search_time,
    };
    // A round another search is ranking is waited for, not ranked twice.
    let made = memos.rounds.memo.get_or_make(round, !options.first, || {
        let charged = std::cell::Cell::new(0u64);
        let counted = |units: u64| {
            charged.set(charged.get().saturating_add(units));
            spend(units)
        };
        let found = rank(planned, live, origin, allowance, options, aim, (&counted, memos))?;
        Ok((planned.clone(), found.into(), charged.get()))
    });
    let ((_, found, work), known) = made?;
    if known && !spend(work) {
        return Err(Spent);
    }
    Ok(found.to_vec())
}

/// Chains around every hot step, each with its best grid within `allowance` extra MACs, best
/// estimate first: when `aim`ing (without a budget, until a round finds nothing), its
/// cheapest grid whose estimate of the chain's own peak reaches the plan's target arena
/// ([`target`]), else (or when no target fits) its grid of the best estimate;
/// the chains of the target's cover first. The hot steps are those whose operands exceed the
/// budget, if any do; else those where the plan's live bytes per step (`live`) peak. The
/// estimates are charged to `spend`.
fn rank(
    planned: &TrialPlan,
    live: &[u64],
    origin: &[Option<usize>],
    allowance: u64,
    options: &SplitOptions,
    aim: bool,
    (spend, memos): (Spend, &Memos),
) -> Result<Vec<Candidate>, Spent> {
    let budget = options.budget;
    let cuts = &memos.cuts;
    let memo = memos.grades.of(planned, origin, allowance);
    let memo = &memo.chains;
    let graph = &planned.model.graph;
    let order = &planned.table.schedule;
    let opset = planned.model.opsets.version("").unwrap_or(1);
    let peak = live.iter().copied().max().unwrap_or(0);
    let operands = budget.map(|_| step_operands(graph, &planned.table));
    let over: Vec<usize> = match (budget, &operands) {
        (Some(b), Some(operands)) => (0..operands.len()).filter(|&s| operands[s] > b).collect(),
        _ => Vec::new(),
    };
    let peaks: Vec<usize> = (0..live.len()).filter(|&s| live[s] == peak).collect();
    // Row chains reach far from their step (see `rows::candidates`): under a budget they are
    // sought around the steps with the most operands only.
    let (hot, rows_hot) = match &operands {
        Some(operands) if !over.is_empty() => {
            let most = over.iter().map(|&s| operands[s]).max().unwrap_or(0);
            let worst = over
                .iter()
                .copied()
                .filter(|&s| operands[s] == most)
                .collect();
            (over, worst)
        }
        _ => (peaks.clone(), peaks),
    };
    let table = &planned.table;
    let held = match budget {
        Some(_) => rows::estimate::Held::Span,
        None => rows::estimate::Held::Steps,
    };
    let allowed = |n: usize| origin[n].is_some();
    let keys = NodeKeys::new(graph, cuts);
    let mut found = Vec::new();
    // Under a budget, finer grids and longer chains too.
    let tried = grids(budget.is_some(), options.fine_strips);
    let progressive = options.progressive_bands;
    let walker = Walker::new(graph, order);
    let longest = match budget {
        Some(_) => MAX_BUDGET_CHAIN_NODES,
        None => MAX_CHAIN_NODES,
    };
    // Without a budget, every chain aims at one target arena (cheapest grid reaching it).
    let (aimed, mut graded) = match aim {
        true => {
            let share = options.search_time.as_secs_f64() * WORK_PER_SECOND as f64;
            let share = (share / TARGET_SHARE as f64) as u64;
            let grids = grids(false, options.fine_strips);
            let found = target(
                planned,
                live,
                (&allowed, progressive, options.first),
                grids,
                allowance,
                (spend, cuts, &keys, memo, &walker),
                share,
            )?;
            (found.target, found.graded)
        }
        false => (None, HashMap::new()),
    };
    let (target, cover) = aimed.map_or((None, Vec::new()), |(t, cover)| (Some(t), cover));
    let rank = |estimate: u64, inside: u64, macs: u64| match target {
        Some(t) if inside <= t => (false, macs, inside, estimate),
        _ => (true, estimate, inside, macs),
    };
    // Whether each chain seen so far has a grid within the allowance.
    let mut seen: HashMap<[usize; 2], bool> = HashMap::new();
    for &step in &hot {
        let mut visit = |steps: [usize; 2], build: &dyn Fn() -> Option<Chain>| {
            if let Some(&fits) = seen.get(&steps) {
                return Ok(fits);
            }
            if !spend(chain_work(steps[1] - steps[0] + 1)) {
                return Err(Spent);
            }
            let Some(chain) = build() else {
                return Ok(true);
            };
            let grades = match graded.remove(&steps) {
                Some(g) => g,
                None => {
                    let make = |spend: Spend| {
                        let grids = (tried, allowance);
                        let counting: Counting = (&allowed, progressive);
                        let how = (counting, cuts, &keys);
                        grade(graph, table, live, &chain, steps, grids, how, spend).map(Some)
                    };
                    let key = (steps, tried, progressive);
                    let made = memo.grades(key, spend, make)?;
                    made.expect("a built chain is graded")
                }
            };
            // The best by rank, the first of equals in grid order.
            let best = grades
                .into_iter()
                .enumerate()
                .min_by_key(|(i, g)| (rank(g.estimate, g.inside, g.extra_macs), *i));
            seen.insert(steps, best.is_some());
            let Some((_, best)) = best else {
                return Ok(false);
            };
            let visit = visit_units(graph, &chain);
            if !spend(strips_work(visit, best.grid) + tiles_work(visit, best.grid)) {
                return Err(Spent);
            }
            let tiling = super::tiling::cut_within(graph, &chain, best.grid, allowance)
                .expect("a graded grid cuts its chain");
            found.push(Candidate {
                cut: Cut::Tiles(chain, tiling),
                covers: cover.contains(&steps),
                start: steps[0],
                estimate: best.estimate,
                inside: best.inside,
            });
            Ok(true)
        };
        let limits = (longest, opset);
        walker.around(step, &allowed, limits, &mut visit)?;
    }
    // Row chains may cut again what earlier splits made, in a search that nests them.
    let allowed_rows = |n: usize| options.nested || allowed(n);
    found.extend(
        rows::candidates(
            planned,
            (live, &rows_hot, held),
            &allowed_rows,
            (options.row_rules, options.recompute, options.passes),
            (allowance, spend),
        )?
        .into_iter()
        .map(|b| Candidate {
            covers: false,
            start: b.start,
            estimate: b.estimate,
            // A chain quantizing after passes is there to lower what its layer holds, which an
            // equal peak elsewhere hides: it ranks by its own part, as tiles do.
            inside: match b.chain.passes.is_empty() {
                false => b.inside,
                true => b.estimate,
            },
            cut: Cut::Rows(b),
        }),
    );
    // Of equal row chains from one start, without a budget the longest first: it leaves none
    // of its tensors whole for a later round to cut again (the scores of an attention ending
    // at its Add, read whole by the Softmax's blocks). Under a budget, where each step's
    // operands must fit, the shortest first (a longer chain's assembling Concat may be the
    // step that does not), as of tile chains, where the shortest recomputes least.
    found.sort_by_key(|c| {
        let length = match c.cut {
            Cut::Rows(_) if budget.is_none() => usize::MAX - c.node_count(),
            _ => c.node_count(),
        };
        let key = (c.estimate, c.inside, c.extra_macs(), c.start, length);
        (!c.covers, key)
    });
    // Chains of one run that differ by a node that changes nothing (estimates and extra MACs
    // equal) plan alike: the trials go to the first of them and to other chains.
    found.dedup_by(|b, a| {
        matches!((&a.cut, &b.cut), (Cut::Tiles(..), Cut::Tiles(..)))
            && (a.estimate, a.inside, a.extra_macs()) == (b.estimate, b.inside, b.extra_macs())
    });
    Ok(found)
}

/// The grids tried: every grid up to 8×8; under a budget also square grids and row strips up
/// to 32 (down to single rows of small outputs), otherwise, with `fine_strips`, row strips up
/// to 16. Every list begins with the grids up to 8×8 in one order, so the grades of a longer
/// list answer a shorter one ([`super::grades`]).
fn grids(fine: bool, fine_strips: bool) -> &'static [[usize; 2]] {
    static LISTS: LazyLock<[Vec<[usize; 2]>; 3]> = LazyLock::new(|| {
        let coarse: Vec<[usize; 2]> = (1..=MAX_TILES)
            .flat_map(|r| (1..=MAX_TILES).map(move |c| [r, c]))
            .filter(|&[r, c]| r * c > 1)
            .collect();
        let mut strips = coarse.clone();
        strips.extend((MAX_TILES + 1..=MAX_STRIPS).map(|g| [g, 1]));
        let mut fine = coarse.clone();
        for g in MAX_TILES + 1..=MAX_FINE_TILES {
            fine.extend([[g, g], [g, 1]]);
        }
        [coarse, strips, fine]
    });
    match (fine, fine_strips) {
        (true, _) => &LISTS[2],
        (false, true) => &LISTS[1],
        (false, false) => &LISTS[0],
    }
}

