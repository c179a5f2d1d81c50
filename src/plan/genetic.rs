//! S3: genetic search over allocation orders.
//!
//! An individual is an order of the buffers; decoding places them in that order, each at the
//! lowest offset free of the placed buffers it conflicts with, and its fitness is the arena.
//! A generation keeps the best orders (elitism) and breeds the rest from tournament-selected
//! parents by order crossover (OX) and mutation. Besides swaps, two mutations follow the S3
//! method: move a buffer right after a *reuse partner* (a buffer it does not conflict with that
//! is at least as large, so it can take that partner's bytes), and re-encode an order as the
//! order of the addresses its decoding produced.

use super::budget::{GENETIC_TICKS_PER_UNIT, Meter};
use super::greedy::{Order, sorted};
use super::place::{Fit, Placer};
use super::problem::Problem;
use super::rng::Rng;

const POPULATION: usize = 24;
const ELITE: usize = 2;
const GENERATIONS: usize = 200;
const PATIENCE: usize = 40;

/// The genetic search's goal and seed.
pub(crate) struct Goal {
    /// Stop as soon as an arena at most this is found.
    pub(crate) good_enough: u64,
    /// Seed of the random choices.
    pub(crate) seed: u64,
}

struct Individual {
    order: Vec<usize>,
    offsets: Vec<u64>,
    arena: u64,
}

/// Runs the genetic search and returns the best offsets found, or `None` when `meter` stopped
/// it before one whole decoding. Every decoding spends work; the search stops with fewer
/// individuals or generations than configured once the allowance is spent.
pub(crate) fn s3_genetic(problem: &Problem, goal: &Goal, meter: &mut Meter) -> Option<Vec<u64>> {
    let mut rng = Rng::new(goal.seed);
    let mut placer = Placer::new(problem).rated(GENETIC_TICKS_PER_UNIT);
    let mut decode = |order: Vec<usize>, meter: &mut Meter| {
        let offsets = placer.place_all(&order, Fit::Lowest, meter)?;
        let arena = super::problem::arena_of(problem, &offsets);
        Some(Individual {
            order,
            offsets,
            arena,
        })
    };
    let seeds = [
        Order::Size,
        Order::Area,
        Order::Lifetime,
        Order::Breadth,
        Order::Start,
    ];
    let mut population = Vec::new();
    for &order in &seeds {
        match decode(sorted(problem, order), meter) {
            Some(individual) => population.push(individual),
            None => break,
        }
    }
    population.sort_by_key(|ind| ind.arena);
    if population.first()?.order.len() < 2 {
        return Some(population.swap_remove(0).offsets);
    }
    let base = population[0].order.clone();
    while population.len() < POPULATION {
        let mut order = base.clone();
        for _ in 0..=order.len() / 8 {
            swap_mutation(&mut order, &mut rng);
        }
        match decode(order, meter) {
            Some(individual) => population.push(individual),
            None => break,
        }
    }
    population.sort_by_key(|ind| ind.arena);
    let mut stale = 0;
    for _ in 0..GENERATIONS {
        if population[0].arena <= goal.good_enough || stale >= PATIENCE || !meter.running() {
            break;
        }
        let previous = population[0].arena;
        let elite = ELITE.min(population.len() - 1);
        let mut next: Vec<Individual> = population.drain(..elite).collect();
        while next.len() < POPULATION {
            let a = tournament(&population, &next[..elite], &mut rng);
            let b = tournament(&population, &next[..elite], &mut rng);
            let mut child = order_crossover(&a.order, &b.order, &mut rng);
            match rng.below(4) {
                0 => swap_mutation(&mut child, &mut rng),
                1 => reuse_mutation(problem, &mut child, &mut rng),
                2 => child = address_order(a),
                _ => {}
            }
            match decode(child, meter) {
                Some(individual) => next.push(individual),
                None => break,
            }
        }
        if next.len() < POPULATION {
            next.append(&mut population);
        }
        next.sort_by_key(|ind| ind.arena);
        next.truncate(POPULATION);
        stale = if next[0].arena < previous {
            0
        } else {
            stale + 1
        };
        population = next;
    }
    Some(population.swap_remove(0).offsets)
}

/// Picks the best of three random members of the previous generation (its elite and the rest).
fn tournament<'a>(
    rest: &'a [Individual],
    elite: &'a [Individual],
    rng: &mut Rng,
) -> &'a Individual {
    let pick = |rng: &mut Rng| {
        let k = rng.index(rest.len() + elite.len());
        if k < rest.len() {
            &rest[k]
        } else {
            &elite[k - rest.len()]
        }
    };
    let mut best = pick(rng);
    for _ in 0..2 {
        let other = pick(rng);
        if other.arena < best.arena {
            best = other;
        }
    }
    best
}

/// Order crossover: a random slice of `a` stays in place, the rest follows `b`'s order.
fn order_crossover(a: &[usize], b: &[usize], rng: &mut Rng) -> Vec<usize> {
    let n = a.len();
    let (mut lo, mut hi) = (rng.index(n), rng.index(n));
    if lo > hi {
        std::mem::swap(&mut lo, &mut hi);
    }
    let mut taken = vec![false; a.iter().max().map_or(0, |&m| m + 1)];
    for &x in &a[lo..=hi] {
        taken[x] = true;
    }
    let mut rest = b.iter().copied().filter(|&x| !taken[x]);
    let mut child = Vec::with_capacity(n);
    for (k, &x) in a.iter().enumerate() {
        if (lo..=hi).contains(&k) {
            child.push(x);
        } else if let Some(y) = rest.next() {
            child.push(y);
        }
    }
    child
}

fn swap_mutation(order: &mut [usize], rng: &mut Rng) {
    let (i, j) = (rng.index(order.len()), rng.index(order.len()));
    order.swap(i, j);
}

/// Moves a random buffer right after a reuse partner found among a few random tries.
fn reuse_mutation(problem: &Problem, order: &mut Vec<usize>, rng: &mut Rng) {
    let j = rng.index(order.len());
    let later = problem.buffers[order[j]];
    for _ in 0..8 {
        let i = rng.index(order.len());
        let earlier = problem.buffers[order[i]];
        if i != j && earlier.size >= later.size && !earlier.conflicts(&later) {
            let moved = order.remove(j);
            let at = if i < j { i + 1 } else { i };
            order.insert(at, moved);
            return;
        }
    }
}

/// The order of an individual's buffers by the addresses its decoding gave them.
fn address_order(parent: &Individual) -> Vec<usize> {
    let mut order = parent.order.clone();
    order.sort_by_key(|&i| parent.offsets[i]);
    order
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::budget::Budget;
    use crate::plan::greedy::greedy;
    use crate::plan::problem::arena_of;
    use crate::plan::synth;

    fn goal(seed: u64) -> Goal {
        Goal {
            good_enough: 0,
            seed,
        }
    }

    fn evolve(p: &Problem, seed: u64, work: u64) -> Option<Vec<u64>> {
        let budget = Budget {
            work,
            ..Budget::unlimited()
        };
        s3_genetic(p, &goal(seed), &mut budget.meter())
    }

    #[test]
    fn never_worse_than_greedy_by_size_and_deterministic() {
        for seed in 0..5 {
            let p = synth::random(60, 30, 100, 1, seed);
            let evolved = evolve(&p, 7, u64::MAX).expect("unlimited");
            let greedy = greedy(
                &p,
                Order::Size,
                Fit::Lowest,
                &mut Budget::unlimited().meter(),
            );
            assert!(arena_of(&p, &evolved) <= arena_of(&p, &greedy.expect("unlimited")));
            assert_eq!(
                Some(evolved),
                evolve(&p, 7, u64::MAX),
                "same seed, same plan"
            );
        }
    }

    #[test]
    fn a_work_allowance_gives_the_same_plan_every_time() {
        let p = synth::network_like(400, 3);
        for work in [50_000, 2_000_000, 20_000_000] {
            let first = evolve(&p, 1, work);
            for _ in 0..3 {
                assert_eq!(evolve(&p, 1, work), first, "{work} units");
            }
        }
        assert_eq!(evolve(&p, 1, 10), None, "no whole decoding in 10 units");
    }

    #[test]
    fn order_crossover_keeps_a_permutation() {
        let mut rng = Rng::new(3);
        let a: Vec<usize> = (0..20).collect();
        let b: Vec<usize> = (0..20).rev().collect();
        for _ in 0..50 {
            let mut child = order_crossover(&a, &b, &mut rng);
            child.sort_unstable();
            assert_eq!(child, a);
        }
    }

    #[test]
    fn reuse_mutation_moves_a_buffer_after_a_larger_one_it_does_not_meet() {
        let p = Problem::of(1, &[(8, 0, 2), (4, 1, 3), (4, 2, 4)]);
        // Buffer 2 can only reuse buffer 0; buffer 1 conflicts with both, buffer 0 with 1.
        for seed in 0..20 {
            let mut order = vec![2, 1, 0];
            reuse_mutation(&p, &mut order, &mut Rng::new(seed));
            let mut sorted = order.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, [0, 1, 2]);
            if order != [2, 1, 0] {
                assert_eq!(order, [1, 0, 2], "seed {seed}");
            }
        }
    }
}
