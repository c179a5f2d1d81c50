//! S4's genetic search over segment assignments. Individuals give each unit a segment it fits
//! in. Crossover copies one segment's membership from the second parent into the first;
//! mutation swaps two units of different segments when both fit (or moves a unit to another
//! segment it fits when no swap does), at a rate that grows over the rounds. Each generation
//! keeps the best quarter, breeds children from tournament-chosen parents and adds fresh
//! random assignments. Greedy assignments seed the first generation.

use super::migrate::{Score, score, score_segment};
use super::rng::Rng;
use super::segments::Segments;
use super::units::Unit;
use super::{Offload, Options, evaluation_work};
use crate::plan::budget::{Budget, Ending};

/// The best assignment found, the number of generations run and what ended the search
/// (each assignment scored spends [`evaluation_work`] units of `budget`).
pub fn search(
    problem: &Offload,
    units: &[Unit],
    segments: &Segments,
    options: &Options,
    budget: &Budget,
) -> (Vec<usize>, usize, Ending) {
    let mut meter = budget.meter();
    let work = evaluation_work(units);
    let ga = Ga {
        problem,
        units,
        segments,
        fits: units
            .iter()
            .map(|u| segments.sizes.iter().filter(|&&s| s >= u.size).count())
            .collect(),
        penalty: 1 + 2 * units.iter().map(|u| u.size).sum::<u64>(),
    };
    let mut rng = Rng::new(options.seed);
    let size = options.population.max(4);
    let mut population: Vec<(u64, Vec<usize>)> = Vec::with_capacity(size);
    let mut by_size: Vec<usize> = (0..units.len()).collect();
    by_size.sort_by_key(|&u| (std::cmp::Reverse(units[u].size), u));
    let mut by_time: Vec<usize> = (0..units.len()).collect();
    by_time.sort_by_key(|&u| (units[u].accesses[0].step, u));
    for order in [by_size, by_time] {
        let a = ga.greedy(&order);
        population.push((ga.fitness(&a), a));
    }
    while population.len() < size && meter.spend(work) {
        let a = ga.random(&mut rng);
        population.push((ga.fitness(&a), a));
    }
    population.sort_by_key(|p| p.0);
    let (mut best_round, mut rounds) = (0, 0);
    'rounds: for round in 0..options.rounds {
        if population.len() < size || round - best_round > options.stagnation {
            break;
        }
        rounds = round + 1;
        let rate = ((1.0 + 8.0 * round as f64 / options.rounds.max(1) as f64)
            / units.len().max(1) as f64)
            .min(0.5);
        let elite = size / 4;
        let fresh = size / 8;
        let mut next: Vec<(u64, Vec<usize>)> = population[..elite].to_vec();
        while next.len() < size - fresh {
            if !meter.spend(work) {
                break 'rounds;
            }
            let a = &population[tournament(&mut rng, population.len())].1;
            let b = &population[tournament(&mut rng, population.len())].1;
            let mut child = ga.crossover(a, b, &mut rng);
            ga.mutate(&mut child, rate, &mut rng);
            next.push((ga.fitness(&child), child));
        }
        while next.len() < size {
            if !meter.spend(work) {
                break 'rounds;
            }
            let a = ga.random(&mut rng);
            next.push((ga.fitness(&a), a));
        }
        next.sort_by_key(|p| p.0);
        if next[0].0 < population[0].0 {
            best_round = round;
        }
        population = next;
    }
    (population.swap_remove(0).1, rounds, meter.ending())
}

/// The lower index of two random picks (the population is sorted best first).
fn tournament(rng: &mut Rng, n: usize) -> usize {
    rng.below(n).min(rng.below(n))
}

struct Ga<'a> {
    problem: &'a Offload,
    units: &'a [Unit],
    segments: &'a Segments,
    /// Per unit, how many segments (largest first) it fits in.
    fits: Vec<usize>,
    /// Cost of one conflict: more than any conflict-free assignment migrates.
    penalty: u64,
}

impl Ga<'_> {
    fn fitness(&self, assignment: &[usize]) -> u64 {
        let Score {
            migrated,
            conflicts,
        } = score(self.problem, self.units, self.segments, assignment);
        migrated.saturating_add(conflicts.saturating_mul(self.penalty))
    }

    /// Units in `order`, each to the segment where it adds the least (conflicts first).
    fn greedy(&self, order: &[usize]) -> Vec<usize> {
        let mut members: Vec<Vec<usize>> = vec![Vec::new(); self.segments.sizes.len()];
        let mut cost: Vec<u64> = vec![0; members.len()];
        let mut dirty = vec![false; self.problem.objects.len()];
        let mut assignment = vec![0; self.units.len()];
        for &u in order {
            let mut best = (u64::MAX, 0);
            for k in 0..self.fits[u] {
                members[k].push(u);
                let s = score_segment(self.problem, self.units, &members[k], &mut dirty);
                members[k].pop();
                let total = s
                    .migrated
                    .saturating_add(s.conflicts.saturating_mul(self.penalty));
                let added = total.saturating_sub(cost[k]);
                if added < best.0 {
                    best = (added, k);
                }
            }
            let k = best.1;
            members[k].push(u);
            cost[k] = cost[k].saturating_add(best.0);
            assignment[u] = k;
        }
        assignment
    }

    fn random(&self, rng: &mut Rng) -> Vec<usize> {
        self.fits.iter().map(|&f| rng.below(f)).collect()
    }

    /// `a` with segment k's membership taken from `b`.
    fn crossover(&self, a: &[usize], b: &[usize], rng: &mut Rng) -> Vec<usize> {
        let k = rng.below(self.segments.sizes.len());
        a.iter()
            .zip(b)
            .map(|(&x, &y)| if x == k || y == k { y } else { x })
            .collect()
    }

    fn mutate(&self, a: &mut [usize], rate: f64, rng: &mut Rng) {
        let sizes = &self.segments.sizes;
        for u in 0..a.len() {
            if !rng.chance(rate) {
                continue;
            }
            let v = rng.below(a.len());
            let swap = a[u] != a[v]
                && self.units[u].size <= sizes[a[v]]
                && self.units[v].size <= sizes[a[u]];
            if swap {
                a.swap(u, v);
            } else {
                a[u] = rng.below(self.fits[u]);
            }
        }
    }
}
