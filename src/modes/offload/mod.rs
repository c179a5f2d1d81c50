//! S4: planning under a device-memory budget. When the live bytes exceed the budget, some
//! buffers wait in host memory between uses. Following S4, consecutive accesses are merged and
//! small objects accessed back to back are merged into one; the device memory is cut into
//! segments sized from the largest objects; every object is assigned to a segment whose
//! occupants take turns; a genetic search (crossover of whole segments, swap mutations at a
//! growing rate, elitism plus fresh random assignments, stopping on rounds, time or
//! stagnation) minimises the bytes migrated. A farthest-next-use eviction baseline runs on
//! the same input, and an independent checker validates both.

mod baseline;
mod check;
mod genetic;
mod migrate;
mod rng;
mod segments;
mod units;

use std::time::Duration;

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
    /// Stop after this long.
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

/// The search's plan, the baseline's (when it finds one) and how long the search ran.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// The segment plan with the least migration found.
    pub plan: Plan,
    /// Farthest-next-use eviction on the same objects and budget.
    pub baseline: Option<Plan>,
    /// Generations run.
    pub rounds: usize,
    /// Segment sizes.
    pub segments: Vec<u64>,
}

/// Plans the objects within the budget. Errors (one line) when no segment layout can hold the
/// objects some step accesses together.
pub fn solve(problem: &Offload, options: &Options) -> Result<Outcome, String> {
    let units = units::merge(problem);
    let segments = segments::layout(problem, &units)?;
    let (assignment, rounds) = genetic::search(problem, &units, &segments, options);
    let residency = migrate::residency(problem, &units, &segments, &assignment)
        .ok_or("bug: the best assignment puts two operands of one step in one segment")?;
    let migrated =
        check(problem, &residency).map_err(|e| format!("bug: offload plan invalid: {e}"))?;
    let plan = Plan {
        arena: arena(problem, &residency),
        residency,
        migrated,
    };
    let baseline = farthest_next_use(problem).map(|residency| {
        let migrated = check(problem, &residency).unwrap_or(u64::MAX);
        Plan {
            arena: arena(problem, &residency),
            residency,
            migrated,
        }
    });
    Ok(Outcome {
        plan,
        baseline,
        rounds,
        segments: segments.sizes,
    })
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
