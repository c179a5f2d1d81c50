//! Which planner to run and under which limits.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use super::budget::Budget;

/// A planner by name, or `Auto` to run a portfolio and keep the best.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PlannerChoice {
    /// Fast heuristics first, then the exact search while time remains and the bound is not met.
    Auto,
    /// Largest buffer first, each at the lowest offset free of placed conflicting buffers.
    GreedyBySize,
    /// Steps by total live bytes (largest first), their buffers largest first, best fit.
    GreedyByBreadth,
    /// Largest buffer first, best fit.
    BestFitSize,
    /// Longest lifetime first, best fit.
    BestFitLifetime,
    /// Largest size × lifetime first, best fit.
    BestFitArea,
    /// Earliest start first, best fit.
    BestFitStart,
    /// S2: walk the steps with an offset-sorted coalescing free list.
    S2FreeList,
    /// S3: genetic search over allocation orders.
    S3Genetic,
    /// Branch-and-bound over canonical placements, from the best heuristic plan; proves
    /// optimality when it finishes.
    Exact,
}

const NAMES: [(PlannerChoice, &str); 10] = [
    (PlannerChoice::Auto, "auto"),
    (PlannerChoice::GreedyBySize, "greedy-by-size"),
    (PlannerChoice::GreedyByBreadth, "greedy-by-breadth"),
    (PlannerChoice::BestFitSize, "best-fit-size"),
    (PlannerChoice::BestFitLifetime, "best-fit-lifetime"),
    (PlannerChoice::BestFitArea, "best-fit-area"),
    (PlannerChoice::BestFitStart, "best-fit-start"),
    (PlannerChoice::S2FreeList, "s2-free-list"),
    (PlannerChoice::S3Genetic, "s3-genetic"),
    (PlannerChoice::Exact, "exact"),
];

/// The names [`PlannerChoice`] parses, `auto` first.
pub fn planner_names() -> &'static [&'static str] {
    const LIST: [&str; 10] = {
        let mut list = [""; 10];
        let mut i = 0;
        while i < NAMES.len() {
            list[i] = NAMES[i].1;
            i += 1;
        }
        list
    };
    &LIST
}

impl PlannerChoice {
    /// The planner's name as the CLI spells it.
    pub fn name(self) -> &'static str {
        NAMES
            .iter()
            .find(|(choice, _)| *choice == self)
            .map_or("auto", |(_, name)| name)
    }
}

impl fmt::Display for PlannerChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The error for a planner name that is not in [`planner_names`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown planner `{0}` (known: {known})", known = planner_names().join(", "))]
pub struct UnknownPlanner(pub String);

impl FromStr for PlannerChoice {
    type Err = UnknownPlanner;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        NAMES
            .iter()
            .find(|(_, name)| *name == s)
            .map(|(choice, _)| *choice)
            .ok_or_else(|| UnknownPlanner(s.to_string()))
    }
}

/// How to plan: which planner, how much work, which seed, and an optional arena capacity.
#[derive(Debug, Clone)]
pub struct PlanOptions {
    /// The planner to run.
    pub planner: PlannerChoice,
    /// The work the planners may do, and the safety stops.
    pub budget: Budget,
    /// Seed for the randomised planners; the same seed gives the same plan.
    pub seed: u64,
    /// Stop as soon as the arena fits in this many bytes (the search still minimises otherwise).
    pub capacity: Option<u64>,
}

impl Default for PlanOptions {
    fn default() -> Self {
        PlanOptions {
            planner: PlannerChoice::Auto,
            budget: Budget::within(Duration::from_secs(1)),
            seed: 0,
            capacity: None,
        }
    }
}
