//! Running planners by name, and `auto`: the fast heuristics, then the exact search. Every
//! planner draws on the options' work budget (a share each, so parallel planners do not depend
//! on each other's progress); when no heuristic finishes within its share, the buffers are
//! stacked one above the other, which is always valid.

use rayon::prelude::*;

use super::bounds::lower_bound;
use super::budget::Budget;
use super::exact::exact;
use super::free_list::s2_free_list;
use super::genetic::{Goal, s3_genetic};
use super::greedy::{Order, greedy};
use super::options::{PlanOptions, PlannerChoice};
use super::place::Fit;
use super::problem::{Problem, Search, Solution, arena_of, stacked};

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

/// The name of the always-valid fallback plan (every buffer above the previous one).
const STACKED: &str = "stacked";

/// Runs the chosen planner on a validated problem.
pub(crate) fn run(problem: &Problem, options: &PlanOptions) -> Solution {
    let bound = lower_bound(problem);
    let budget = &options.budget;
    match options.planner {
        PlannerChoice::Auto => auto(problem, options, bound),
        PlannerChoice::S3Genetic => {
            let found = genetic(problem, options, budget, bound);
            found.unwrap_or_else(|search| with_searches(fallback(problem, bound), vec![search]))
        }
        PlannerChoice::Exact => {
            let start = best_heuristic(problem, &HEURISTICS, &budget.part(1, 4), bound);
            let searches = start.searches.clone();
            let improved =
                improve_exactly(problem, &start.offsets, options, &budget.part(2, 3), bound);
            let mut all = searches;
            all.extend(improved.searches.clone());
            with_searches(improved, all)
        }
        fast => best_heuristic(problem, &[fast], budget, bound),
    }
}

/// Offsets from one of the [`HEURISTICS`] (any other choice falls back to greedy-by-size), or
/// `None` when its budget stops it first; and how it ended.
fn heuristic(
    problem: &Problem,
    choice: PlannerChoice,
    budget: &Budget,
) -> (Option<Vec<u64>>, Search) {
    let mut meter = budget.meter();
    let meter = &mut meter;
    let offsets = match choice {
        PlannerChoice::GreedyByBreadth => greedy(problem, Order::Breadth, Fit::Best, meter),
        PlannerChoice::BestFitSize => greedy(problem, Order::Size, Fit::Best, meter),
        PlannerChoice::BestFitLifetime => greedy(problem, Order::Lifetime, Fit::Best, meter),
        PlannerChoice::BestFitArea => greedy(problem, Order::Area, Fit::Best, meter),
        PlannerChoice::BestFitStart => greedy(problem, Order::Start, Fit::Best, meter),
        PlannerChoice::S2FreeList => s2_free_list(problem, meter),
        _ => greedy(problem, Order::Size, Fit::Lowest, meter),
    };
    let search = Search {
        planner: choice.name().to_string(),
        ended_by: meter.ending(),
        work: meter.spent(),
    };
    (offsets, search)
}

/// Runs the first heuristic; unless it meets the bound (no other can do better), runs the
/// rest in parallel; keeps the smallest arena (the first on ties). A plan is needed, and the
/// heuristics are cheap next to the searches: the first runs to its end whatever the work or
/// time left (only a cancel stops it, and then the plan is [`stacked`]), and each other may
/// spend all of `budget`.
fn best_heuristic(
    problem: &Problem,
    heuristics: &[PlannerChoice],
    budget: &Budget,
    bound: u64,
) -> Solution {
    let run = |&choice: &PlannerChoice, budget: &Budget| {
        let (offsets, search) = heuristic(problem, choice, budget);
        (offsets.map(|o| finish(problem, o, choice, bound)), search)
    };
    let Some((first, rest)) = heuristics.split_first() else {
        return fallback(problem, bound);
    };
    let whole = Budget {
        work: u64::MAX,
        deadline: None,
        ..budget.clone()
    };
    let (first, first_search) = run(first, &whole);
    if let Some(solution) = first.as_ref().filter(|s| s.proven_optimal) {
        return with_searches(solution.clone(), vec![first_search]);
    }
    // Collected in order, so ties go to the earlier heuristic whatever the thread count.
    let others: Vec<_> = rest.par_iter().map(|c| run(c, budget)).collect();
    let mut searches = vec![first_search];
    let mut best = first;
    for (solution, search) in others {
        searches.push(search);
        if let Some(s) = solution
            && best.as_ref().is_none_or(|b| s.arena < b.arena)
        {
            best = Some(s);
        }
    }
    with_searches(best.unwrap_or_else(|| fallback(problem, bound)), searches)
}

fn finish(problem: &Problem, offsets: Vec<u64>, planner: PlannerChoice, bound: u64) -> Solution {
    named(problem, offsets, planner.name(), bound)
}

fn named(problem: &Problem, offsets: Vec<u64>, planner: &str, bound: u64) -> Solution {
    let arena = arena_of(problem, &offsets);
    Solution {
        offsets,
        arena,
        planner: planner.to_string(),
        proven_optimal: arena <= bound,
        lower_bound: bound,
        searches: Vec::new(),
    }
}

/// Every buffer above the previous one: valid whatever the problem, and as poor as it gets.
fn fallback(problem: &Problem, bound: u64) -> Solution {
    named(problem, stacked(problem), STACKED, bound)
}

fn with_searches(solution: Solution, searches: Vec<Search>) -> Solution {
    Solution {
        searches,
        ..solution
    }
}

/// The genetic search under `budget`, or how it ended when it found no whole plan.
fn genetic(
    problem: &Problem,
    options: &PlanOptions,
    budget: &Budget,
    bound: u64,
) -> Result<Solution, Search> {
    let goal = Goal {
        good_enough: bound.max(options.capacity.unwrap_or(0)),
        seed: options.seed,
    };
    let mut meter = budget.meter();
    let offsets = s3_genetic(problem, &goal, &mut meter);
    let search = Search {
        planner: PlannerChoice::S3Genetic.name().to_string(),
        ended_by: meter.ending(),
        work: meter.spent(),
    };
    match offsets {
        Some(offsets) => Ok(with_searches(
            finish(problem, offsets, PlannerChoice::S3Genetic, bound),
            vec![search],
        )),
        None => Err(search),
    }
}

/// The best heuristic (each may spend a quarter of the budget); then, unless it meets the bound or the capacity,
/// the exact search and/or the genetic one (by problem size; nothing on the largest) with the
/// rest, split evenly between the two when both run.
fn auto(problem: &Problem, options: &PlanOptions, bound: u64) -> Solution {
    let budget = &options.budget;
    let nonvoid = problem.buffers.iter().filter(|b| !b.is_void()).count();
    let heuristics: &[PlannerChoice] = if nonvoid > LARGE {
        &LARGE_HEURISTICS
    } else {
        &HEURISTICS
    };
    budget.report_phase("planning: heuristics");
    let best = best_heuristic(problem, heuristics, &budget.part(1, 4), bound);
    budget.report_arena(best.arena);
    let met = options
        .capacity
        .is_some_and(|c| best.arena <= c || bound > c);
    if best.proven_optimal || met || nonvoid > LARGE {
        return best;
    }
    let mut searches = best.searches.clone();
    // A safety stop that fired during the heuristics ends the planning; the table says so.
    if let Some(ending) = budget.stopped() {
        searches.push(Search {
            planner: PlannerChoice::Auto.name().to_string(),
            ended_by: ending,
            work: 0,
        });
        return Solution { searches, ..best };
    }
    let exact = |share: &Budget| improve_exactly(problem, &best.offsets, options, share, bound);
    let evolve = |share: &Budget| genetic(problem, options, share, bound);
    let mut found = Vec::new();
    let mut take = |result: Result<Solution, Search>| match result {
        Ok(solution) => {
            searches.extend(solution.searches.iter().cloned());
            found.push(solution);
        }
        Err(search) => searches.push(search),
    };
    budget.report_phase("planning: search");
    if nonvoid <= EXACT_ALONE_BUFFERS {
        take(Ok(exact(&budget.part(2, 3))));
    } else if nonvoid <= EXACT_MAX_BUFFERS {
        let share = budget.part(1, 3);
        let (exact, evolved) = rayon::join(|| exact(&share), || evolve(&share));
        take(Ok(exact));
        take(evolved);
    } else {
        take(evolve(&budget.part(2, 3)));
    }
    let lower_bound = found.iter().map(|s| s.lower_bound).fold(bound, u64::max);
    let winner = found
        .into_iter()
        .fold(best, |a, b| if b.arena < a.arena { b } else { a });
    budget.report_arena(winner.arena);
    Solution {
        proven_optimal: winner.arena <= lower_bound,
        lower_bound,
        searches,
        ..winner
    }
}

fn improve_exactly(
    problem: &Problem,
    start: &[u64],
    options: &PlanOptions,
    budget: &Budget,
    bound: u64,
) -> Solution {
    let mut meter = budget.meter();
    let result = exact(problem, start, options.capacity, &mut meter);
    let lower_bound = result.lower_bound.max(bound);
    Solution {
        proven_optimal: result.arena <= lower_bound,
        offsets: result.offsets,
        arena: result.arena,
        planner: PlannerChoice::Exact.name().to_string(),
        lower_bound,
        searches: vec![Search {
            planner: PlannerChoice::Exact.name().to_string(),
            ended_by: meter.ending(),
            work: meter.spent(),
        }],
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
                    budget: Budget::within(Duration::from_millis(20)),
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
                budget: Budget::within(Duration::MAX),
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
