//! The exact planner: branch and bound over canonical placements (ideas from MiniMalloc,
//! Moffitt, ASPLOS 2023), run separately on each group of buffers that no lifetime links.

mod instance;
mod search;
mod strategy;

use super::bounds::lower_bound;
use super::budget::Meter;
use super::problem::Problem;
use instance::Instance;
use search::{Solver, Stop};
use strategy::{Strategy, strategies};

/// What the exact planner returns: the best placement and what it proved.
pub(crate) struct Exact {
    /// One offset per problem buffer.
    pub(crate) offsets: Vec<u64>,
    /// The largest `offset + size`.
    pub(crate) arena: u64,
    /// A proven lower bound on the arena.
    pub(crate) lower_bound: u64,
}

/// Improves on `incumbent` (a valid placement) until `meter` stops it.
///
/// With a `capacity`, each group is searched with that cap and the search stops once it is met;
/// a group whose search is exhausted proves the capacity impossible. Without one, groups are
/// taken by decreasing lower bound; each only needs to get down to a *target*: the overall lower
/// bound, or the arena an earlier group already settled at, whichever is larger. A group is
/// first tried at its target (a quarter of the remaining time), then its cap is lowered below its
/// best arena until its search space is exhausted (which proves it optimal) or time runs out.
pub(crate) fn exact(
    problem: &Problem,
    incumbent: &[u64],
    capacity: Option<u64>,
    meter: &mut Meter,
) -> Exact {
    let mut offsets: Vec<u64> = incumbent
        .iter()
        .zip(&problem.buffers)
        .map(|(&o, b)| if b.is_void() { 0 } else { o })
        .collect();
    let groups = independent_groups(problem);
    let bounds: Vec<u64> = groups
        .iter()
        .map(|members| lower_bound(&sub_problem(problem, members)))
        .collect();
    let global_bound = lower_bound(problem);
    let good_enough = global_bound.max(capacity.unwrap_or(0));
    let mut proven = global_bound;
    let mut target = good_enough;
    let mut order: Vec<usize> = (0..groups.len()).collect();
    order.sort_by_key(|&g| std::cmp::Reverse(bounds[g]));
    for g in order {
        let members = &groups[g];
        let arena_of = |offsets: &[u64]| {
            members
                .iter()
                .map(|&i| offsets[i] + problem.buffers[i].size)
                .max()
                .unwrap_or(0)
        };
        let upper = arena_of(&offsets);
        if upper <= target {
            continue;
        }
        let inst = Instance::new(problem, members);
        let mut solver = Solver::new(&inst);
        let portfolio = strategies(&inst);
        let mut satisfy =
            |cap: u64, meter: &mut Meter| restarts(&mut solver, &portfolio, cap, meter);
        let mut adopt = |local: &[u64]| {
            for (k, &i) in members.iter().enumerate() {
                offsets[i] = local[k];
            }
            local
                .iter()
                .zip(&inst.size)
                .map(|(o, s)| o + s)
                .max()
                .unwrap_or(0)
        };
        if let Some(cap) = capacity {
            match satisfy(cap, meter) {
                Answer::Found(local) => {
                    adopt(&local);
                }
                Answer::Impossible => {
                    proven = proven.max(cap + 1);
                    break;
                }
                Answer::Unknown => {}
            }
            continue;
        }
        let mut probe = meter.share(4);
        let granted = probe.left();
        let answer = satisfy(target, &mut probe);
        meter.absorb(probe, granted);
        let mut known = match answer {
            Answer::Found(local) => {
                adopt(&local);
                continue;
            }
            Answer::Impossible => target + 1,
            Answer::Unknown => bounds[g],
        };
        let mut best = upper;
        while best > known && best > target {
            match satisfy(best - 1, meter) {
                Answer::Found(local) => best = adopt(&local),
                Answer::Impossible => known = best,
                Answer::Unknown => break,
            }
        }
        proven = proven.max(known);
        target = target.max(best);
    }
    let arena = crate::plan::problem::arena_of(problem, &offsets);
    Exact {
        offsets,
        arena,
        lower_bound: proven,
    }
}

/// The smallest node budget of a first attempt; each round through the strategies doubles it.
const FIRST_BUDGET: u64 = 1000;

/// Runs the search with each strategy in turn under a node budget that doubles every round, so
/// a strategy that thrashes on this problem costs little; stops only at an answer or when
/// `meter` stops it.
fn restarts(
    solver: &mut Solver<'_>,
    portfolio: &[Strategy],
    cap: u64,
    meter: &mut Meter,
) -> Answer {
    // A budget below twice the number of buffers could not even finish one descent.
    let mut budget = FIRST_BUDGET.max(2 * solver.len() as u64);
    loop {
        for strategy in portfolio {
            match solver.satisfy(cap, strategy, budget, meter) {
                Ok(Some(offsets)) => return Answer::Found(offsets),
                Ok(None) => return Answer::Impossible,
                Err(Stop::Spent) => return Answer::Unknown,
                Err(Stop::Budget) => {}
            }
        }
        budget = budget.saturating_mul(2);
    }
}

/// The outcome of a search for a placement within a cap.
enum Answer {
    /// A placement (local offsets).
    Found(Vec<u64>),
    /// Proven: no placement fits the cap.
    Impossible,
    /// The work allowance ran out (or a safety stop fired).
    Unknown,
}

/// The non-void buffers split into groups that share no step: sorted by start, a new group
/// begins where a buffer starts at or after every earlier buffer has ended.
fn independent_groups(problem: &Problem) -> Vec<Vec<usize>> {
    let mut order: Vec<usize> = (0..problem.buffers.len())
        .filter(|&i| !problem.buffers[i].is_void())
        .collect();
    order.sort_by_key(|&i| (problem.buffers[i].start, i));
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut reach = 0u32;
    for i in order {
        let b = &problem.buffers[i];
        match groups.last_mut() {
            Some(group) if b.start < reach => group.push(i),
            _ => groups.push(vec![i]),
        }
        reach = reach.max(b.end);
    }
    groups
}

fn sub_problem(problem: &Problem, members: &[usize]) -> Problem {
    Problem {
        buffers: members.iter().map(|&i| problem.buffers[i]).collect(),
        alignment: problem.alignment,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::budget::Budget;
    use crate::plan::synth;
    use crate::plan::{Solution, verify};
    use std::time::Duration;

    /// Everything stacked in index order: a valid but poor starting point.
    fn stacked(problem: &Problem) -> Vec<u64> {
        let mut top = 0;
        problem
            .buffers
            .iter()
            .map(|b| {
                let offset = crate::plan::problem::align_up(top, problem.alignment);
                top = offset + b.size;
                offset
            })
            .collect()
    }

    fn run(problem: &Problem, capacity: Option<u64>) -> Exact {
        let budget = Budget::for_time(Duration::from_secs(10), std::time::Instant::now());
        let result = exact(problem, &stacked(problem), capacity, &mut budget.meter());
        let solution = Solution {
            offsets: result.offsets.clone(),
            arena: result.arena,
            planner: String::new(),
            proven_optimal: false,
            lower_bound: result.lower_bound,
            searches: Vec::new(),
        };
        assert_eq!(verify(problem, &solution), Ok(()));
        assert!(result.lower_bound <= result.arena || capacity.is_some());
        result
    }

    /// The smallest arena by trying every aligned offset (tiny problems only).
    fn brute_force(problem: &Problem) -> u64 {
        fn fits(p: &Problem, height: u64, i: usize, offsets: &mut Vec<u64>) -> bool {
            let Some(b) = p.buffers.get(i) else {
                return true;
            };
            let mut offset = 0;
            while offset + b.size <= height {
                let free = (0..i).all(|j| {
                    let other = &p.buffers[j];
                    !b.conflicts(other)
                        || offsets[j] + other.size <= offset
                        || offset + b.size <= offsets[j]
                });
                if free {
                    offsets[i] = offset;
                    if fits(p, height, i + 1, offsets) {
                        return true;
                    }
                }
                if b.is_void() {
                    break;
                }
                offset += p.alignment;
            }
            false
        }
        let mut height = 0;
        let mut offsets = vec![0; problem.buffers.len()];
        while !fits(problem, height, 0, &mut offsets) {
            height += 1;
        }
        height
    }

    #[test]
    fn solves_minimallocs_example_optimally() {
        let p = Problem::of(
            1,
            &[(4, 0, 3), (4, 3, 9), (4, 0, 9), (4, 9, 21), (4, 0, 21)],
        );
        let result = run(&p, None);
        assert_eq!((result.arena, result.lower_bound), (12, 12));
        assert_eq!(run(&p, Some(12)).arena, 12);
    }

    #[test]
    fn proves_an_arena_above_every_step_bound() {
        // Alignment 2: every step fits in 5 bytes, but no placement does.
        let p = Problem::of(
            2,
            &[
                (1, 3, 5),
                (3, 4, 6),
                (2, 5, 6),
                (2, 0, 1),
                (1, 0, 1),
                (4, 1, 4),
            ],
        );
        assert_eq!(lower_bound(&p), 5);
        let result = run(&p, None);
        assert_eq!((result.arena, result.lower_bound), (6, 6));
        let capped = run(&p, Some(5));
        assert_eq!(capped.lower_bound, 6, "capacity 5 is proven impossible");
    }

    #[test]
    fn independent_groups_are_solved_separately() {
        let p = Problem::of(1, &[(5, 0, 2), (5, 1, 3), (7, 3, 5), (2, 4, 6), (9, 6, 7)]);
        assert_eq!(independent_groups(&p).len(), 3);
        let result = run(&p, None);
        assert_eq!((result.arena, result.lower_bound), (10, 10));
    }

    #[test]
    fn matches_brute_force_on_small_random_problems() {
        for seed in 0..300 {
            let n = 2 + (seed % 6) as usize;
            let p = synth::random(n, 6, 4, 1 + seed % 3, seed);
            let optimum = brute_force(&p);
            let result = run(&p, None);
            assert_eq!(result.arena, optimum, "seed {seed}: {p:?}");
            assert_eq!(result.lower_bound, optimum, "seed {seed}: proven");
            let capped = run(&p, Some(optimum));
            assert!(capped.arena <= optimum, "seed {seed}: capacity met");
            if optimum > 0 {
                let below = run(&p, Some(optimum - 1));
                assert!(
                    below.lower_bound >= optimum,
                    "seed {seed}: below is impossible"
                );
            }
        }
    }
}
