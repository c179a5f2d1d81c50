//! S4: planning under a device-memory budget. When the live bytes exceed the budget, some
//! buffers wait in host memory between uses. Following S4, consecutive accesses are merged and
//! small objects accessed back to back are merged into one unit. Two planners then search with
//! S4's genetic scheme (crossover, a mutation rate growing over the rounds, elitism plus fresh
//! random individuals, stopping on rounds, time or stagnation) for the least bytes migrated:
//! *segments* is S4 as written (the device cut into segments sized from the largest units,
//! every unit assigned to a segment whose occupants take turns); *spill* keeps S4's static
//! placement but lets each unit wait in host memory between any two accesses and packs the
//! units freely (see `spill.rs`). The better verified plan wins. A farthest-next-use eviction
//! baseline runs on the same input, and an independent checker validates all of them.

mod baseline;
mod check;
mod genetic;
mod migrate;
mod rng;
mod segments;
mod spill;
mod units;

use std::time::Duration;

use crate::plan::budget::{Budget, Ending};

pub use baseline::farthest_next_use;
pub use check::check;

/// One access by an operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Access {
    /// The step.
    pub step: usize,
    /// True when the step writes the object (its creation, or an in-place overwrite).
    pub write: bool,
}

/// A buffer that must be on the device whenever it is accessed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Object {
    /// Bytes (a multiple of the alignment).
    pub size: u64,
    /// Its accesses in step order, one per step; the first is its creation (a write).
    pub accesses: Vec<Access>,
}

impl Object {
    /// Step of the first access.
    pub fn first(&self) -> usize {
        self.accesses.first().map_or(0, |a| a.step)
    }

    /// Step of the last access.
    pub fn last(&self) -> usize {
        self.accesses.last().map_or(0, |a| a.step)
    }
}

/// The problem: objects and the device budget.
#[derive(Clone, Debug)]
pub struct Offload {
    /// The objects.
    pub objects: Vec<Object>,
    /// Device bytes available.
    pub budget: u64,
    /// Offsets are multiples of this.
    pub alignment: u64,
}

/// A stretch of steps `[from, to]` during which an object is on the device at `offset`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stay {
    /// First step resident.
    pub from: usize,
    /// Last step resident.
    pub to: usize,
    /// Device offset.
    pub offset: u64,
}

/// Where each object is over time: its stays, in step order. Between two stays it waits in
/// host memory (copied out after the first, back in before the second).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Residency {
    /// Per object, its stays.
    pub stays: Vec<Vec<Stay>>,
}

/// A checked plan and the bytes it migrates.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The stays.
    pub residency: Residency,
    /// Bytes copied between host and device, both ways.
    pub migrated: u64,
    /// Highest device byte used.
    pub arena: u64,
}

/// Search limits of the genetic algorithm.
#[derive(Clone, Debug)]
pub struct Options {
    /// Assignments per generation.
    pub population: usize,
    /// Generations at most.
    pub rounds: usize,
    /// Stop after this many generations without improvement.
    pub stagnation: usize,
    /// The search time (`--search-time`): [`Budget::for_time`] of it bounds the two planners'
    /// work, half each, with the deadline as a safety stop.
    pub time_limit: Duration,
    /// Seed of the random generator (runs are reproducible).
    pub seed: u64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            population: 32,
            rounds: 400,
            stagnation: 60,
            time_limit: Duration::from_secs(2),
            seed: 0x5eed_0ff1_0ad5,
        }
    }
}

/// The best plan, each planner's migration and the baseline's.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// The plan with the least migration found.
    pub plan: Plan,
    /// The planner that made it: `segments` or `spill`.
    pub method: &'static str,
    /// Bytes the segment planner migrates (`None`: no conflict-free layout within budget).
    pub segments_migrated: Option<u64>,
    /// Bytes the spill planner migrates (`None`: it found no plan).
    pub spill_migrated: Option<u64>,
    /// Farthest-next-use eviction on the same objects and budget.
    pub baseline: Option<Plan>,
    /// Generations run, summed over the planners.
    pub rounds: usize,
    /// Each planner that searched (`offload-segments`, `offload-spill`) and what ended it.
    pub searches: Vec<(&'static str, Ending)>,
}

/// Why no plan fits the budget.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Infeasible {
    /// The objects one step accesses together take more than the budget.
    Step {
        /// The step.
        step: usize,
        /// Bytes it accesses.
        bytes: u64,
    },
    /// Both planners gave up (fragmentation), though each step alone fits.
    NoPlan,
}

/// Work units one scored candidate costs the searches: a few per unit and per access, the
/// passes a decode or a score makes over them.
pub fn evaluation_work(units: &[units::Unit]) -> u64 {
    units
        .iter()
        .map(|u| WORK_PER_ACCESS * (1 + u.accesses.len() as u64))
        .sum()
}

/// Work units per unit access of a scored candidate (calibrated so a unit of work takes a few
/// nanoseconds, as [`crate::plan::budget`] assumes).
const WORK_PER_ACCESS: u64 = 8;

/// Plans the objects within the device budget, or says why no plan can fit it; the searches
/// share `work` (half each).
pub fn solve(problem: &Offload, options: &Options, work: &Budget) -> Result<Outcome, Infeasible> {
    let units = units::merge(problem);
    let (bytes, step) = floor(&units);
    if bytes > problem.budget {
        return Err(Infeasible::Step { step, bytes });
    }
    if units.is_empty() {
        let residency = Residency {
            stays: vec![Vec::new(); problem.objects.len()],
        };
        let plan = Plan {
            residency,
            migrated: 0,
            arena: 0,
        };
        let outcome = Outcome {
            baseline: Some(plan.clone()),
            plan,
            method: "none needed",
            segments_migrated: Some(0),
            spill_migrated: Some(0),
            rounds: 0,
            searches: Vec::new(),
        };
        return Ok(outcome);
    }
    let mut rounds = 0;
    let mut searches = Vec::new();
    let half = work.part(1, 2);
    let segments = segments::layout(problem, &units).ok().and_then(|segments| {
        let (assignment, r, ended) = genetic::search(problem, &units, &segments, options, &half);
        rounds += r;
        searches.push(("offload-segments", ended));
        plan_of(
            problem,
            migrate::residency(problem, &units, &segments, &assignment)?,
        )
    });
    let (spill, ended) = spill::search(problem, &units, options, &half);
    searches.push(("offload-spill", ended));
    let spill = spill.map(|(residency, migrated, r)| {
        rounds += r;
        Plan {
            arena: arena(problem, &residency),
            residency,
            migrated,
        }
    });
    let segments_migrated = segments.as_ref().map(|p| p.migrated);
    let spill_migrated = spill.as_ref().map(|p| p.migrated);
    let (plan, method) = match (segments, spill) {
        (Some(a), Some(b)) if b.migrated < a.migrated => (b, "spill"),
        (Some(a), _) => (a, "segments"),
        (None, Some(b)) => (b, "spill"),
        (None, None) => return Err(Infeasible::NoPlan),
    };
    let baseline = farthest_next_use(problem).and_then(|r| plan_of(problem, r));
    Ok(Outcome {
        plan,
        method,
        segments_migrated,
        spill_migrated,
        baseline,
        rounds,
        searches,
    })
}

/// The checked plan of some stays (`None` when they fail the checker).
fn plan_of(problem: &Offload, residency: Residency) -> Option<Plan> {
    let migrated = check(problem, &residency).ok()?;
    Some(Plan {
        arena: arena(problem, &residency),
        residency,
        migrated,
    })
}

/// The most bytes one step accesses, and that step: no budget below it can work.
fn floor(units: &[units::Unit]) -> (u64, usize) {
    let steps = units
        .iter()
        .filter_map(|u| u.accesses.last())
        .map(|a| a.step + 1)
        .max()
        .unwrap_or(0);
    let mut at = vec![0u64; steps];
    for u in units {
        for a in &u.accesses {
            at[a.step] += u.size;
        }
    }
    at.iter()
        .enumerate()
        .map(|(s, &b)| (b, s))
        .max_by_key(|&(b, s)| (b, std::cmp::Reverse(s)))
        .unwrap_or((0, 0))
}

/// Highest device byte any stay uses.
fn arena(problem: &Offload, residency: &Residency) -> u64 {
    residency
        .stays
        .iter()
        .zip(&problem.objects)
        .flat_map(|(stays, o)| stays.iter().map(move |s| s.offset + o.size))
        .max()
        .unwrap_or(0)
}

#[cfg(test)]
mod tests;
