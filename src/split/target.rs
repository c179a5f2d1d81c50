//! The global grid choice: one target arena for every chain. Each chain that must be split
//! takes its cheapest grid whose estimated peak is at most the target, and the target is the
//! smallest one whose chains fit the MAC allowance together; so the first chain split does not
//! spend the allowance that a later peak needs.

use std::cell::Cell;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::TrialPlan;
use super::chain::{Chain, MAX_CHAIN_NODES, Walker};
use super::cuts::{Cuts, NodeKeys};
use super::grades::ChainMemo;
use super::estimate::{Banding, ChainEstimate, chain_work, strips_work, tiles_work, visit_units};
use super::tiling::Strips;
use super::{Spend, Spent};
use crate::emit::Table;
use crate::ir::{Graph, NodeId};
use rayon::prelude::*;

/// One grid of a chain, estimated.
#[derive(Clone, Copy, Debug)]
pub struct Graded {
    /// The grid (rows, columns).
    pub grid: [usize; 2],
    /// The estimated arena with the chain cut by it.
    pub estimate: u64,
    /// The chain's own part of the estimate (without the peak outside the chain).
    pub inside: u64,
    /// The multiply-accumulates its halos recompute.
    pub extra_macs: u64,
}

/// How a grading counts the inputs earlier splits assembled: which nodes may be split (those
/// earlier splits made may not) and whether bands are counted progressively ([`Banding`]).
pub type Counting<'a> = (&'a dyn Fn(NodeId) -> bool, bool);

/// A chain's grades over a list of grids, with what charging them again needs.
#[derive(Clone, Debug)]
pub struct ChainGrades {
    /// The work units of one visit of the chain's nodes ([`visit_units`]; each grid's work is
    /// charged by it).
    pub visit: u64,
    /// Whether the estimates counted bands progressively (then they depend on
    /// [`Banding::progressive`]; otherwise they are those of either counting).
    pub banded: bool,
    /// The grids graded, in order.
    pub grids: &'static [[usize; 2]],
    /// Each grid that cut the chain within the allowance, estimated, in grid order.
    pub graded: Vec<Graded>,
}

impl ChainGrades {
    /// Whether these grades answer `grids`: those graded begin with them (a grading reads
    /// its grids in order, so its first ones are graded as on their own).
    pub fn covers(&self, grids: &[[usize; 2]]) -> bool {
        self.grids.starts_with(grids)
    }

    /// The grades on `grids` (which these grades cover), charging `spend` exactly what
    /// [`grade`] charges for them.
    pub fn replay(&self, grids: &[[usize; 2]], spend: Spend) -> Result<Vec<Graded>, Spent> {
        let mut kept = self.graded.iter().peekable();
        charge_grids(self.visit, grids, spend, |grid| {
            kept.next_if(|g| g.grid == grid).map(|&g| move || g)
        })
    }
}

/// The grading loop of [`grade`], which [`ChainGrades::replay`] repeats: each grid of `grids`
/// not at least as fine as one that failed is charged its strips, then `cut(grid)` gives
/// nothing when it fails, else (once the grid is charged its tiles) a way to estimate it.
fn charge_grids<E: FnOnce() -> Graded>(
    visit: u64,
    grids: &[[usize; 2]],
    spend: Spend,
    mut cut: impl FnMut([usize; 2]) -> Option<E>,
) -> Result<Vec<Graded>, Spent> {
    let mut failed: Vec<[usize; 2]> = Vec::new();
    let mut graded = Vec::new();
    for &grid in grids {
        if failed.iter().any(|f| grid[0] >= f[0] && grid[1] >= f[1]) {
            continue;
        }
        if !spend(strips_work(visit, grid)) {
            return Err(Spent);
        }
        let Some(estimate) = cut(grid) else {
            failed.push(grid);
            continue;
        };
        if !spend(tiles_work(visit, grid)) {
            return Err(Spent);
        }
        graded.push(estimate());
    }
    Ok(graded)
}

/// Every grid of `grids` that cuts `chain` (over `steps` of the plan whose live bytes per
/// step are `live`) within `allowance` extra MACs, estimated, in the order of `grids`. A grid
/// with at least the rows and columns of one that failed is not tried: it recomputes more.
/// The inputs earlier splits assembled are counted as [`Counting`] says. The work is charged
/// to `spend`.
#[allow(clippy::too_many_arguments)]
pub fn grade(
    graph: &Graph,
    table: &Table,
    live: &[u64],
    chain: &Chain,
    steps: [usize; 2],
    (grids, allowance): (&'static [[usize; 2]], u64),
    ((allowed, progressive), cuts, keys): (Counting, &Cuts, &NodeKeys),
    spend: Spend,
) -> Result<ChainGrades, Spent> {
    let made_by_split = |n: NodeId| !allowed(n);
    let banding = Banding {
        made_by_split: &made_by_split,
        progressive,
    };
    let estimates = ChainEstimate::new(graph, (table, live), chain, steps, &banding);
    let signature = Cuts::signature(keys, chain);
    let visit = visit_units(graph, chain);
    let strips = Strips::new(graph, chain);
    let graded = charge_grids(visit, grids, spend, |grid| {
        let cost = cuts.cost((&strips, &signature), grid, allowance, &estimates)?;
        let (estimates, strips) = (&estimates, &strips);
        Some(move || {
            let bands = match estimates.reads_bands() {
                true => {
                    let tiling = strips.cut_within(grid, allowance);
                    estimates.bands_by_tile(chain, &tiling.expect("a costed grid cuts its chain"))
                }
                false => vec![0; cost.working.len()],
            };
            let (estimate, inside) = estimates.of(&cost.working, &bands);
            Graded {
                grid,
                estimate,
                inside,
                extra_macs: cost.extra_macs,
            }
        })
    })?;
    Ok(ChainGrades {
        visit,
        banded: estimates.reads_bands(),
        grids,
        graded,
    })
}

/// What [`target`] found: the target arena and the first and last steps of the chains that
/// cover the steps above it, if one fits, and the grids it estimated, by chain steps.
pub struct Aim {
    /// The target and its cover.
    pub target: Option<(u64, Vec<[usize; 2]>)>,
    /// Each chain's grids, keyed by the chain's first and last steps.
    pub graded: HashMap<[usize; 2], Vec<Graded>>,
}

/// The target arena of a plan's chains and the first and last steps of the chains that cover the
/// steps above it: the smallest estimated peak that every chain which must be split reaches with
/// its cheapest grid of `grids`, all within `allowance` extra MACs (see [`smallest_target`]);
/// `None` when no target below the plan's peak fits. Chains are worked out around the steps above
/// each candidate target only, highest live bytes first, so the steps under the answer are never
/// looked at. `live` is the plan's live bytes per step ([`super::estimate::live_bytes`]); chains
/// are walked by `walker`, cut through `cuts`, signed by `keys` and their grades kept in `memo`
/// (the plan's). The estimates are charged to `spend`; once they would pass `share` units, no lower
/// level is looked at and the answer of the levels done stands (deep networks of cheap halos, where
/// every chain fits, would otherwise spend the whole search on ranking). With `ahead` (the first
/// search, see `SplitOptions::first`), the chains around each step are graded side by side before
/// the walk takes them in turn: the same grades, charged the same work in the same order.
#[allow(clippy::too_many_arguments)]
pub fn target(
    planned: &TrialPlan,
    live: &[u64],
    (allowed, progressive, ahead): (&(dyn Fn(usize) -> bool + Sync), bool, bool),
    grids: &'static [[usize; 2]],
    allowance: u64,
    (spend, cuts, keys, memo, walker): (Spend, &Cuts, &NodeKeys, &ChainMemo, &Walker),
    share: u64,
) -> Result<Aim, Spent> {
    let charged = Cell::new(0u64);
    let capped = Cell::new(false);
    let spend = &|units: u64| {
        if charged.get().saturating_add(units) > share {
            capped.set(true);
            return false;
        }
        charged.set(charged.get() + units);
        spend(units)
    };
    let graph = &planned.model.graph;
    let opset = planned.model.opsets.version("").unwrap_or(1);
    let mut levels: Vec<u64> = live.to_vec();
    levels.sort_unstable_by(|a, b| b.cmp(a));
    levels.dedup();
    let mut chains = Vec::new();
    let mut graded: HashMap<[usize; 2], Vec<Graded>> = HashMap::new();
    let mut answer = None;
    // A chain's grades (a pure function of the chain and the plan, charged to `spend`).
    let grade_chain = |chain: &Chain, steps: [usize; 2], spend: Spend| {
        let counting: Counting = (allowed, progressive);
        let how = (counting, cuts, keys);
        let limits = (grids, allowance);
        grade(graph, &planned.table, live, chain, steps, limits, how, spend)
    };
    'levels: for (i, &level) in levels.iter().enumerate() {
        for step in (0..live.len()).filter(|&s| live[s] == level) {
            let limits = (MAX_CHAIN_NODES, opset);
            // The chains around the step not graded yet (nor in the memo), graded side by
            // side ahead of the walk below and kept in the memo, from which the walk takes
            // them in its order, charged what grading each charges: the grades and the work
            // are those of grading them in turn (a grading reads the cuts' memo, whose answers
            // never depend on what is in it). A chain the walk stops before is kept for the
            // other searches; steps that make no chain are noted, not built again.
            let mut unseen: Vec<([usize; 2], Option<Chain>)> = Vec::new();
            let mut look = |steps: [usize; 2], build: &dyn Fn() -> Option<Chain>| {
                if let Some(g) = graded.get(&steps) {
                    return Ok::<bool, Spent>(!g.is_empty());
                }
                if memo.find(steps, grids, progressive).is_none() {
                    unseen.push((steps, build()));
                }
                Ok(true)
            };
            if ahead {
                walker.around(step, allowed, limits, &mut look)?;
            }
            let early: Vec<([usize; 2], Option<ChainGrades>)> = unseen
                .into_par_iter()
                .map(|(steps, chain)| {
                    let graded = chain.map(|chain| {
                        let g = grade_chain(&chain, steps, &|_| true);
                        g.expect("a grading charged nothing it cannot spend")
                    });
                    (steps, graded)
                })
                .collect();
            let mut no_chain: HashSet<[usize; 2]> = HashSet::new();
            for (steps, g) in early {
                match g {
                    Some(g) => memo.keep(steps, progressive, Arc::new(g)),
                    None => {
                        no_chain.insert(steps);
                    }
                }
            }
            // Each chain is graded once; one that no grid cuts within the allowance is not
            // grown further back.
            let mut visit = |steps: [usize; 2], build: &dyn Fn() -> Option<Chain>| {
                if let Some(g) = graded.get(&steps) {
                    return Ok(!g.is_empty());
                }
                if !spend(chain_work(steps[1] - steps[0] + 1)) {
                    return Err(Spent);
                }
                if no_chain.contains(&steps) {
                    return Ok(true);
                }
                let make = |spend: Spend| {
                    let chain = build();
                    chain.map(|c| grade_chain(&c, steps, spend)).transpose()
                };
                let Some(g) = memo.grades((steps, grids, progressive), spend, make)? else {
                    return Ok(true);
                };
                let costs: Vec<_> = g.iter().map(|g| (g.inside, g.extra_macs)).collect();
                let fits = !costs.is_empty();
                chains.push(ChainCost::new(steps, costs));
                graded.insert(steps, g);
                Ok(fits)
            };
            match walker.around(step, allowed, limits, &mut visit) {
                Ok(()) => {}
                Err(Spent) if capped.get() => break 'levels,
                Err(spent) => return Err(spent),
            }
        }
        // Targets in [next, level) leave exactly the steps at `level` or above to cover.
        let next = levels.get(i + 1).copied().unwrap_or(0);
        if let Some(t) = smallest_target(live, &chains, allowance, [next, level]) {
            answer = Some(t);
        }
        if answer != Some(next) {
            break;
        }
    }
    let target = answer.and_then(|t| cover(live, &chains, t).map(|c| (t, c.1)));
    Ok(Aim { target, graded })
}

/// What one chain costs: the steps it covers and, per grid, the estimated bytes the chain
/// holds once split (its own peak) and the extra MACs.
#[derive(Clone, Debug)]
pub struct ChainCost {
    /// The chain's first and last step.
    pub steps: [usize; 2],
    /// (estimated bytes, extra MACs) of each grid, sorted by bytes, each with the fewest
    /// MACs of the grids holding at most its bytes.
    grids: Vec<(u64, u64)>,
}

impl ChainCost {
    /// The chain over `steps` with its grids' (estimated bytes, extra MACs).
    pub fn new(steps: [usize; 2], mut grids: Vec<(u64, u64)>) -> ChainCost {
        grids.sort_unstable();
        let mut cheapest = u64::MAX;
        for g in &mut grids {
            cheapest = cheapest.min(g.1);
            g.1 = cheapest;
        }
        ChainCost { steps, grids }
    }

    /// The fewest extra MACs of a grid holding at most `target` bytes.
    pub fn cost(&self, target: u64) -> Option<u64> {
        let fit = self.grids.partition_point(|g| g.0 <= target);
        fit.checked_sub(1).map(|i| self.grids[i].1)
    }
}

/// The fewest extra MACs that bring every step whose `live` bytes exceed `target` down to it:
/// those steps are covered by chains that share no step, each split with its cheapest grid
/// holding at most `target` bytes; `None` when no such cover exists. A shortest path over
/// the steps: position `p` is reached with every step before it at or under the target.
pub fn cover_cost(live: &[u64], chains: &[ChainCost], target: u64) -> Option<u64> {
    cover(live, chains, target).map(|c| c.0)
}

/// How a position of [`cover`] is reached: the cost, and the chain (first and last steps)
/// that ends just before it, if one does.
type Reached = (u64, Option<[usize; 2]>);

/// [`cover_cost`] and the first and last steps of the cover's chains.
fn cover(live: &[u64], chains: &[ChainCost], target: u64) -> Option<(u64, Vec<[usize; 2]>)> {
    let n = live.len();
    let mut from: Vec<Vec<&ChainCost>> = vec![Vec::new(); n];
    for c in chains {
        if c.steps[0] <= c.steps[1] && c.steps[1] < n {
            from[c.steps[0]].push(c);
        }
    }
    // Per position: the cost of reaching it and the chain (steps) that reached it, if any.
    let mut best: Vec<Option<Reached>> = vec![None; n + 1];
    best[0] = Some((0, None));
    let relax = |best: &mut Vec<Option<Reached>>, at: usize, cost: u64, by: Option<[usize; 2]>| {
        if best[at].is_none_or(|(b, _)| cost < b) {
            best[at] = Some((cost, by));
        }
    };
    for p in 0..n {
        let Some((here, _)) = best[p] else { continue };
        if live[p] <= target {
            relax(&mut best, p + 1, here, None);
        }
        for c in &from[p] {
            if let Some(cost) = c.cost(target) {
                relax(
                    &mut best,
                    c.steps[1] + 1,
                    here.saturating_add(cost),
                    Some(c.steps),
                );
            }
        }
    }
    let (total, _) = best[n]?;
    let mut used = Vec::new();
    let mut p = n;
    while p > 0 {
        let (_, by) = best[p].expect("a reached position has a reached predecessor");
        p = match by {
            Some(steps) => {
                used.push(steps);
                steps[0]
            }
            None => p - 1,
        };
    }
    used.reverse();
    Some((total, used))
}

/// The smallest target in `[low, high)` whose cover fits `allowance` extra MACs: a binary
/// search over the bytes that can be targets (`low` and the grids' estimates), as the
/// cover's cost only falls as the target rises. `None` when none in the range fits.
pub fn smallest_target(
    live: &[u64],
    chains: &[ChainCost],
    allowance: u64,
    [low, high]: [u64; 2],
) -> Option<u64> {
    let mut targets: Vec<u64> = chains
        .iter()
        .flat_map(|c| c.grids.iter().map(|g| g.0))
        .chain([low])
        .filter(|&t| low <= t && t < high)
        .collect();
    targets.sort_unstable();
    targets.dedup();
    let fits = |t: u64| cover_cost(live, chains, t).is_some_and(|c| c <= allowance);
    let first = targets.partition_point(|&t| !fits(t));
    targets.get(first).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A two-node chain whose grid 2×1 failed: 2×2 and 3×1 are not tried; node visits worked
    /// by hand (strips: nodes × (rows + columns), tiles: nodes × rows × columns), charged at
    /// `UNITS_PER_NODE_VISIT` each.
    #[test]
    fn replayed_grades_charge_what_grading_charged() {
        static GRIDS: [[usize; 2]; 5] = [[1, 2], [2, 1], [2, 2], [3, 1], [1, 3]];
        let graded = |grid| Graded {
            grid,
            estimate: 7,
            inside: 5,
            extra_macs: 3,
        };
        let u = crate::split::estimate::UNITS_PER_NODE_VISIT;
        let grades = ChainGrades {
            visit: 2 * u,
            banded: false,
            grids: &GRIDS,
            graded: vec![graded([1, 2]), graded([1, 3])],
        };
        let charges = std::cell::RefCell::new(Vec::new());
        let record = |units: u64| {
            charges.borrow_mut().push(units);
            true
        };
        let got = grades.replay(&GRIDS, &record).unwrap();
        assert_eq!(got.iter().map(|g| g.grid).collect::<Vec<_>>(), [[1, 2], [1, 3]]);
        assert_eq!(charges.take(), [6 * u, 4 * u, 6 * u, 8 * u, 6 * u]);
        // The first two grids alone: their grades and charges.
        let got = grades.replay(&GRIDS[..2], &record).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(charges.take(), [6 * u, 4 * u, 6 * u]);
        // A spent allowance stops the replay where grading would stop.
        let left = std::cell::Cell::new(2);
        let two = |_| {
            left.set(left.get() - 1);
            left.get() >= 0
        };
        assert!(grades.replay(&GRIDS, &two).is_err());
        assert!(grades.covers(&GRIDS[..3]) && !grades.covers(&[[2, 1]]));
    }

    /// Two peaks (steps 1 and 4) with a chain each; worked by hand.
    fn two_peaks() -> (Vec<u64>, Vec<ChainCost>) {
        let live = vec![10, 100, 10, 10, 60, 10];
        let chains = vec![
            ChainCost::new([0, 2], vec![(50, 5), (30, 20), (20, 60)]),
            ChainCost::new([3, 5], vec![(40, 10), (25, 30)]),
        ];
        (live, chains)
    }

    #[test]
    fn the_cover_takes_each_chains_cheapest_grid_under_the_target() {
        let (live, chains) = two_peaks();
        // Target 50: chain 1 at 5 MACs, chain 2 at 10.
        assert_eq!(cover_cost(&live, &chains, 50), Some(15));
        // Target 60: step 4 fits unsplit; chain 1 at 5.
        assert_eq!(cover_cost(&live, &chains, 60), Some(5));
        // Target 30: 20 + 30.
        assert_eq!(cover_cost(&live, &chains, 30), Some(50));
        // Target 22: chain 2 cannot reach it.
        assert_eq!(cover_cost(&live, &chains, 22), None);
        // The cover names its chains.
        assert_eq!(cover(&live, &chains, 50), Some((15, vec![[0, 2], [3, 5]])));
        assert_eq!(cover(&live, &chains, 60), Some((5, vec![[0, 2]])));
    }

    #[test]
    fn the_target_is_the_smallest_that_fits() {
        let (live, chains) = two_peaks();
        // Allowance 49: 30 costs 50, 40 costs 20 + 10 = 30.
        let below_peak = [0, 100];
        assert_eq!(smallest_target(&live, &chains, 49, below_peak), Some(40));
        assert_eq!(smallest_target(&live, &chains, 50, below_peak), Some(30));
        assert_eq!(smallest_target(&live, &chains, 4, below_peak), None);
        // Only targets in the range count; its low end is one (35 costs what 30 does).
        assert_eq!(smallest_target(&live, &chains, 50, [35, 100]), Some(35));
        assert_eq!(smallest_target(&live, &chains, 49, [35, 100]), Some(40));
        assert_eq!(smallest_target(&live, &chains, 15, [45, 100]), Some(50));
    }
}
