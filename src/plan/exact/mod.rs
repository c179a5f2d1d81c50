//! The exact planner: branch and bound over canonical placements (ideas from MiniMalloc,
//! Moffitt, ASPLOS 2023), run separately on each group of buffers that no lifetime links.

mod instance;
mod search;

use std::time::Instant;

use super::bounds::lower_bound;
use super::problem::Problem;
use instance::Instance;
use search::{Solver, Timeout};

/// What the exact planner returns: the best placement and what it proved.
pub(crate) struct Exact {
    /// One offset per problem buffer.
    pub(crate) offsets: Vec<u64>,
    /// The largest `offset + size`.
    pub(crate) arena: u64,
    /// A proven lower bound on the arena.
    pub(crate) lower_bound: u64,
}

/// Improves on `incumbent` (a valid placement) until `deadline`.
///
/// With a `capacity`, each group is searched with that cap and the search stops once it is met;
/// a group whose search is exhausted proves the capacity impossible. Without one, each group is
/// first tried at the overall lower bound (a quarter of the remaining time), then its cap is
/// lowered below its best arena until its search space is exhausted (which proves it optimal)
/// or time runs out.
pub(crate) fn exact(
    problem: &Problem,
    incumbent: &[u64],
    capacity: Option<u64>,
    deadline: Instant,
) -> Exact {
    let mut offsets = incumbent.to_vec();
    let groups = independent_groups(problem);
    let bounds: Vec<u64> = groups
        .iter()
        .map(|members| lower_bound(&sub_problem(problem, members)))
        .collect();
    let global_bound = bounds.iter().copied().max().unwrap_or(0);
    let good_enough = global_bound.max(capacity.unwrap_or(0));
    let mut proven = global_bound;
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
        if upper <= good_enough {
            continue;
        }
        let inst = Instance::new(problem, members);
        let mut solver = Solver::new(&inst);
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
            match solver.satisfy(cap, deadline) {
                Ok(Some(local)) => {
                    adopt(&local);
                }
                Ok(None) => proven = proven.max(cap + 1),
                Err(Timeout) => {}
            }
            continue;
        }
        let now = Instant::now();
        let probe_deadline = now + deadline.saturating_duration_since(now) / 4;
        let mut known = match solver.satisfy(good_enough, probe_deadline) {
            Ok(Some(local)) => {
                adopt(&local);
                continue;
            }
            Ok(None) => good_enough + 1,
            Err(Timeout) => bounds[g],
        };
        let mut best = upper;
        while best > known && best > good_enough {
            match solver.satisfy(best - 1, deadline) {
                Ok(Some(local)) => best = adopt(&local),
                Ok(None) => known = best,
                Err(Timeout) => break,
            }
        }
        proven = proven.max(known);
    }
    let arena = crate::plan::problem::arena_of(problem, &offsets);
    Exact {
        offsets,
        arena,
        lower_bound: proven,
    }
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
