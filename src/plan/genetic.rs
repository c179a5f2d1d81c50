//! S3: genetic search over allocation orders.
//!
//! An individual is an order of the buffers; decoding places them in that order, each at the
//! lowest offset free of the placed buffers it conflicts with, and its fitness is the arena.
//! A generation keeps the best orders (elitism) and breeds the rest from tournament-selected
//! parents by order crossover (OX) and mutation. Besides swaps, two mutations follow the S3
//! method: move a buffer right after a *reuse partner* (a buffer it does not conflict with that
//! is at least as large, so it can take that partner's bytes), and re-encode an order as the
//! order of the addresses its decoding produced.

use super::greedy::{Order, sorted};
use super::place::{Fit, Placer};
use super::problem::Problem;
use super::rng::Rng;
use std::time::Instant;

const POPULATION: usize = 24;
const ELITE: usize = 2;
const GENERATIONS: usize = 200;
const PATIENCE: usize = 40;

/// Limits for the genetic search.
pub(crate) struct Budget {
    /// Stop at this instant.
    pub(crate) deadline: Instant,
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

/// Runs the genetic search and returns the best offsets found. The deadline is checked before
/// every decoding after the first, so on large problems the search may stop with fewer
/// individuals or generations than configured.
pub(crate) fn s3_genetic(problem: &Problem, budget: &Budget) -> Vec<u64> {
    let mut rng = Rng::new(budget.seed);
    let mut placer = Placer::new(problem);
    let mut decode = |order: Vec<usize>| {
        let offsets = placer.place_all(&order, Fit::Lowest);
        let arena = super::problem::arena_of(problem, &offsets);
        Individual {
            order,
            offsets,
            arena,
        }
    };
    let out_of_time = || Instant::now() >= budget.deadline;
    let seeds = [
        Order::Size,
        Order::Area,
        Order::Lifetime,
        Order::Breadth,
        Order::Start,
    ];
    let mut population = vec![decode(sorted(problem, seeds[0]))];
    for &order in &seeds[1..] {
        if out_of_time() {
            break;
        }
        population.push(decode(sorted(problem, order)));
    }
    population.sort_by_key(|ind| ind.arena);
    if population[0].order.len() < 2 {
        return population.swap_remove(0).offsets;
    }
    let base = population[0].order.clone();
    while population.len() < POPULATION && !out_of_time() {
        let mut order = base.clone();
        for _ in 0..=order.len() / 8 {
            swap_mutation(&mut order, &mut rng);
        }
        population.push(decode(order));
    }
    population.sort_by_key(|ind| ind.arena);
    let mut stale = 0;
    for _ in 0..GENERATIONS {
        if population[0].arena <= budget.good_enough || stale >= PATIENCE || out_of_time() {
            break;
        }
        let previous = population[0].arena;
        let elite = ELITE.min(population.len() - 1);
        let mut next: Vec<Individual> = population.drain(..elite).collect();
        while next.len() < POPULATION && !out_of_time() {
            let a = tournament(&population, &next[..elite], &mut rng);
            let b = tournament(&population, &next[..elite], &mut rng);
            let mut child = order_crossover(&a.order, &b.order, &mut rng);
            match rng.below(4) {
                0 => swap_mutation(&mut child, &mut rng),
                1 => reuse_mutation(problem, &mut child, &mut rng),
                2 => child = address_order(a),
                _ => {}
            }
            next.push(decode(child));
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
    population.swap_remove(0).offsets
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
    use crate::plan::greedy::greedy;
    use crate::plan::problem::arena_of;
    use crate::plan::synth;
    use std::time::Duration;

    fn budget(seed: u64) -> Budget {
        Budget {
            deadline: Instant::now() + Duration::from_secs(60),
            good_enough: 0,
            seed,
        }
    }

    #[test]
    fn never_worse_than_greedy_by_size_and_deterministic() {
        for seed in 0..5 {
            let p = synth::random(60, 30, 100, 1, seed);
            let evolved = s3_genetic(&p, &budget(7));
            let greedy = greedy(&p, Order::Size, Fit::Lowest);
            assert!(arena_of(&p, &evolved) <= arena_of(&p, &greedy));
            assert_eq!(evolved, s3_genetic(&p, &budget(7)), "same seed, same plan");
        }
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
