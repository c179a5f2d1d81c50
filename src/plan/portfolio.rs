//! Running planners by name, and `auto`: the fast heuristics, then the exact search.

use std::time::{Duration, Instant};

use rayon::prelude::*;

use super::bounds::lower_bound;
use super::exact::exact;
use super::free_list::s2_free_list;
use super::genetic::{Budget, s3_genetic};
use super::greedy::{Order, greedy};
use super::options::{PlanOptions, PlannerChoice};
use super::place::Fit;
use super::problem::{Problem, Solution, arena_of};

/// The fast (greedy, O(n log n)-ish) planners `auto` always runs.
pub const HEURISTICS: [PlannerChoice; 7] = [
    PlannerChoice::GreedyBySize,
    PlannerChoice::GreedyByBreadth,
    PlannerChoice::BestFitSize,
    PlannerChoice::BestFitLifetime,
    PlannerChoice::BestFitArea,
    PlannerChoice::BestFitStart,
    PlannerChoice::S2FreeList,
];

/// Up to this many buffers `auto` improves on the heuristics with the exact search alone.
const EXACT_ALONE_BUFFERS: usize = 1500;

/// Up to this many buffers `auto` runs the exact and the genetic search side by side; above it,
/// the genetic one alone (the exact search's nodes cost time linear in the problem size, so it
/// rarely finishes a descent in time).
const EXACT_MAX_BUFFERS: usize = 5000;

/// Above this many buffers `auto` runs only [`LARGE_HEURISTICS`] and no search: each heuristic
/// then takes seconds, and a genetic generation many times that.
const LARGE: usize = 100_000;

/// The heuristics `auto` runs on large problems: those that are usually best on network-like
/// lifetimes.
const LARGE_HEURISTICS: [PlannerChoice; 3] = [
    PlannerChoice::GreedyBySize,
    PlannerChoice::BestFitSize,
    PlannerChoice::GreedyByBreadth,
];

/// Runs the chosen planner on a validated problem.
pub(crate) fn run(problem: &Problem, options: &PlanOptions) -> Solution {
    let now = Instant::now();
    let deadline = now
        .checked_add(options.time_limit)
        .unwrap_or_else(|| now + Duration::from_secs(100 * 365 * 86_400));
    let bound = lower_bound(problem);
    let good_enough = bound.max(options.capacity.unwrap_or(0));
    match options.planner {
        PlannerChoice::Auto => auto(problem, options, deadline, bound),
        PlannerChoice::S3Genetic => {
            let budget = Budget {
                deadline,
                good_enough,
                seed: options.seed,
            };
            finish(
                problem,
                s3_genetic(problem, &budget),
                options.planner,
                bound,
            )
        }
        PlannerChoice::Exact => {
            let start = best_heuristic(problem, &HEURISTICS, bound);
            improve_exactly(problem, &start.offsets, options, deadline, bound)
        }
        fast => finish(problem, heuristic(problem, fast), fast, bound),
    }
}

/// Offsets from one of the [`HEURISTICS`] (any other choice falls back to greedy-by-size).
fn heuristic(problem: &Problem, choice: PlannerChoice) -> Vec<u64> {
    match choice {
        PlannerChoice::GreedyByBreadth => greedy(problem, Order::Breadth, Fit::Best),
        PlannerChoice::BestFitSize => greedy(problem, Order::Size, Fit::Best),
        PlannerChoice::BestFitLifetime => greedy(problem, Order::Lifetime, Fit::Best),
        PlannerChoice::BestFitArea => greedy(problem, Order::Area, Fit::Best),
        PlannerChoice::BestFitStart => greedy(problem, Order::Start, Fit::Best),
        PlannerChoice::S2FreeList => s2_free_list(problem),
        _ => greedy(problem, Order::Size, Fit::Lowest),
    }
}

/// Runs the first heuristic; unless it meets the bound (no other can do better), runs the
/// rest in parallel; keeps the smallest arena (the first on ties).
fn best_heuristic(problem: &Problem, heuristics: &[PlannerChoice], bound: u64) -> Solution {
    let run = |&choice: &PlannerChoice| finish(problem, heuristic(problem, choice), choice, bound);
    let Some((first, rest)) = heuristics.split_first() else {
        return finish(problem, Vec::new(), PlannerChoice::Auto, bound);
    };
    let first = run(first);
    if first.proven_optimal {
        return first;
    }
    let best_rest = rest.par_iter().map(run).min_by_key(|s| s.arena);
    match best_rest {
        Some(other) if other.arena < first.arena => other,
        _ => first,
    }
}

fn finish(problem: &Problem, offsets: Vec<u64>, planner: PlannerChoice, bound: u64) -> Solution {
    let arena = arena_of(problem, &offsets);
    Solution {
        offsets,
        arena,
        planner: planner.name().to_string(),
        proven_optimal: arena <= bound,
        lower_bound: bound,
    }
}

/// The best heuristic; then, unless it meets the bound or the capacity, the exact search and/or
/// the genetic one (by problem size; nothing on the largest) until the deadline.
fn auto(problem: &Problem, options: &PlanOptions, deadline: Instant, bound: u64) -> Solution {
    let nonvoid = problem.buffers.iter().filter(|b| !b.is_void()).count();
    let heuristics: &[PlannerChoice] = if nonvoid > LARGE {
        &LARGE_HEURISTICS
    } else {
        &HEURISTICS
    };
    let best = best_heuristic(problem, heuristics, bound);
    let met = options
        .capacity
        .is_some_and(|c| best.arena <= c || bound > c);
    if best.proven_optimal || met || nonvoid > LARGE {
        return best;
    }
    let genetic = || {
        let budget = Budget {
            deadline,
            good_enough: bound.max(options.capacity.unwrap_or(0)),
            seed: options.seed,
        };
        let offsets = s3_genetic(problem, &budget);
        finish(problem, offsets, PlannerChoice::S3Genetic, bound)
    };
    let exact = || improve_exactly(problem, &best.offsets, options, deadline, bound);
    let found = if nonvoid <= EXACT_ALONE_BUFFERS {
        vec![exact()]
    } else if nonvoid <= EXACT_MAX_BUFFERS {
        let (exact, evolved) = rayon::join(exact, genetic);
        vec![exact, evolved]
    } else {
        vec![genetic()]
    };
    let lower_bound = found.iter().map(|s| s.lower_bound).fold(bound, u64::max);
    let winner = found
        .into_iter()
        .fold(best, |a, b| if b.arena < a.arena { b } else { a });
    Solution {
        proven_optimal: winner.arena <= lower_bound,
        lower_bound,
        ..winner
    }
}

fn improve_exactly(
    problem: &Problem,
    start: &[u64],
    options: &PlanOptions,
    deadline: Instant,
    bound: u64,
) -> Solution {
    let result = exact(problem, start, options.capacity, deadline);
    let lower_bound = result.lower_bound.max(bound);
    Solution {
        proven_optimal: result.arena <= lower_bound,
        offsets: result.offsets,
        arena: result.arena,
        planner: PlannerChoice::Exact.name().to_string(),
        lower_bound,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{planner_names, synth, verify};
    use std::time::Duration;

    #[test]
    fn every_planner_verifies_on_random_problems() {
        let planners: Vec<PlannerChoice> = planner_names()
            .iter()
            .map(|name| name.parse().expect("known"))
            .collect();
        for seed in 0..300u64 {
            let n = 1 + (seed % 40) as usize;
            let alignment = [1, 4, 16][(seed % 3) as usize];
            let p = synth::random(n, 1 + (seed % 25) as u32, 1 + seed % 200, alignment, seed);
            let mut fastest = u64::MAX;
            for &planner in &planners {
                let options = PlanOptions {
                    planner,
                    time_limit: Duration::from_millis(20),
                    seed,
                    capacity: None,
                };
                let s = run(&p, &options);
                assert_eq!(verify(&p, &s), Ok(()), "{planner} seed {seed}");
                assert!(s.lower_bound <= s.arena, "{planner} seed {seed}");
                assert_eq!(s.proven_optimal, s.arena == s.lower_bound, "{planner}");
                if HEURISTICS.contains(&planner) {
                    fastest = fastest.min(s.arena);
                } else if planner == PlannerChoice::Auto {
                    assert!(s.arena <= fastest, "auto keeps the best heuristic");
                }
            }
        }
    }

    #[test]
    fn an_unbounded_time_limit_is_accepted() {
        let p = synth::random(12, 8, 50, 4, 1);
        for planner in [
            PlannerChoice::Auto,
            PlannerChoice::Exact,
            PlannerChoice::S3Genetic,
        ] {
            let options = PlanOptions {
                planner,
                time_limit: Duration::MAX,
                ..PlanOptions::default()
            };
            assert_eq!(verify(&p, &run(&p, &options)), Ok(()));
        }
    }

    #[test]
    fn auto_stops_at_a_met_capacity_and_reports_an_impossible_one() {
        let p = synth::network_like(300, 5);
        let bound = lower_bound(&p);
        let roomy = PlanOptions {
            capacity: Some(u64::MAX / 4),
            ..PlanOptions::default()
        };
        let s = run(&p, &roomy);
        assert!(HEURISTICS.iter().any(|h| h.name() == s.planner));
        let impossible = PlanOptions {
            capacity: Some(bound - 1),
            ..PlanOptions::default()
        };
        let s = run(&p, &impossible);
        assert!(s.lower_bound > bound - 1);
    }
}
