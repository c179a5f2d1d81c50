//! The spill planner: between two accesses a unit may wait in host memory (a spilled gap),
//! freeing its bytes there, and each resident interval is placed on its own, so a unit may
//! come back at another offset. Decoding a weight vector: while some step holds more live
//! bytes than the target, spill, among the gaps spanning the fullest step, the one that
//! removes the most excess bytes per byte moved (scaled by its unit's weight); then place the
//! resident intervals with the planner heuristics (each interval a buffer). When
//! fragmentation makes the arena exceed the budget, the target drops by the difference and
//! more gaps are spilled. The weights are searched with S4's genetic scheme (crossover of
//! size bands, a growing mutation rate, elitism plus fresh random individuals, stopping on
//! rounds, time or stagnation).

use super::rng::Rng;
use super::units::Unit;
use super::{Offload, Options, Residency, Stay, check, evaluation_work};
use crate::plan::budget::{Budget, Ending};
use crate::plan::{Buffer, HEURISTICS, PlanOptions, Problem, Solution};

/// The least-migrating decoded plan found with the generations run, and what ended the
/// search (each weight vector decoded spends [`evaluation_work`] units of `budget`).
pub fn search(
    problem: &Offload,
    units: &[Unit],
    options: &Options,
    budget: &Budget,
) -> (Option<(Residency, u64, usize)>, Ending) {
    let mut meter = budget.meter();
    let work = evaluation_work(units);
    let mut rng = Rng::new(options.seed ^ 0x5a11);
    let size = options.population.max(4);
    let decode = |w: &[f64]| {
        let r = decode(problem, units, w)?;
        let migrated = check(problem, &r).ok()?;
        Some((r, migrated))
    };
    let mut by_size: Vec<usize> = (0..units.len()).collect();
    by_size.sort_by_key(|&u| std::cmp::Reverse(units[u].size));
    let score = |d: &Option<(Residency, u64)>| d.as_ref().map_or(u64::MAX, |d| d.1);
    let mut population: Vec<(u64, Vec<f64>)> = Vec::with_capacity(size);
    let ones = vec![1.0; units.len()];
    let mut best = decode(&ones);
    population.push((score(&best), ones));
    while population.len() < size && meter.spend(work) {
        let w: Vec<f64> = (0..units.len()).map(|_| factor(&mut rng)).collect();
        let d = decode(&w);
        if score(&d) < score(&best) {
            best = d.clone();
        }
        population.push((score(&d), w));
    }
    population.sort_by_key(|p| p.0);
    let (mut rounds, mut best_round) = (0, 0);
    'rounds: for round in 0..options.rounds {
        if population.len() < size || round - best_round > options.stagnation {
            break;
        }
        rounds = round + 1;
        let rate = ((1.0 + 8.0 * round as f64 / options.rounds.max(1) as f64)
            / units.len().max(1) as f64)
            .min(0.5);
        let (elite, fresh) = (size / 4, size / 8);
        let mut next: Vec<(u64, Vec<f64>)> = population[..elite].to_vec();
        while next.len() < size {
            if !meter.spend(work) {
                break 'rounds;
            }
            let mut child = if next.len() < size - fresh {
                let a = &population[rng.below(size).min(rng.below(size))].1;
                let b = &population[rng.below(size).min(rng.below(size))].1;
                let (lo, hi) = band(&mut rng, by_size.len());
                let mut child = a.clone();
                for &u in &by_size[lo..hi] {
                    child[u] = b[u];
                }
                child
            } else {
                (0..units.len()).map(|_| factor(&mut rng)).collect()
            };
            for w in &mut child {
                if rng.chance(rate) {
                    *w = (*w * factor(&mut rng)).clamp(1e-3, 1e3);
                }
            }
            let d = decode(&child);
            if score(&d) < score(&best) {
                best = d.clone();
                best_round = round;
            }
            next.push((score(&d), child));
        }
        next.sort_by_key(|p| p.0);
        population = next;
    }
    (best.map(|(r, m)| (r, m, rounds)), meter.ending())
}

/// A random factor between 1/4 and 4, log-uniform.
fn factor(rng: &mut Rng) -> f64 {
    4f64.powf(2.0 * (rng.next() >> 11) as f64 / (1u64 << 53) as f64 - 1.0)
}

/// A random band of the units sorted by size.
fn band(rng: &mut Rng, n: usize) -> (usize, usize) {
    let (a, b) = (rng.below(n.max(1)), rng.below(n.max(1)));
    (a.min(b), a.max(b) + 1)
}

/// Decodes a weight vector into stays, or `None` when no spilling fits the budget.
pub fn decode(problem: &Offload, units: &[Unit], weights: &[f64]) -> Option<Residency> {
    let steps = units
        .iter()
        .filter_map(|u| u.accesses.last())
        .map(|a| a.step + 1)
        .max()
        .unwrap_or(0);
    let mut live = vec![0u64; steps];
    // Gaps: (unit, index of the access before it).
    let mut covering: Vec<Vec<(usize, usize)>> = vec![Vec::new(); steps];
    for (u, unit) in units.iter().enumerate() {
        let (first, last) = (unit.accesses[0].step, unit.accesses.last()?.step);
        for l in &mut live[first..=last] {
            *l += unit.size;
        }
        for (i, pair) in unit.accesses.windows(2).enumerate() {
            for c in &mut covering[pair[0].step + 1..pair[1].step] {
                c.push((u, i));
            }
        }
    }
    let mut spilled: Vec<Vec<bool>> = units
        .iter()
        .map(|u| vec![false; u.accesses.len()])
        .collect();
    let mut target = problem.budget;
    loop {
        spill(units, weights, target, &mut live, &covering, &mut spilled)?;
        let (offsets, arena) = place(problem, units, &spilled);
        if arena <= problem.budget {
            return Some(stays(problem, units, &spilled, &offsets));
        }
        let excess = arena.saturating_sub(problem.budget);
        target = target.checked_sub(excess.max(problem.alignment.max(1)))?;
    }
}

/// Spills gaps until no step holds more than `target` live bytes.
fn spill(
    units: &[Unit],
    weights: &[f64],
    target: u64,
    live: &mut [u64],
    covering: &[Vec<(usize, usize)>],
    spilled: &mut [Vec<bool>],
) -> Option<()> {
    loop {
        let (step, &peak) = live
            .iter()
            .enumerate()
            .max_by_key(|&(s, &l)| (l, std::cmp::Reverse(s)))?;
        if peak <= target {
            return Some(());
        }
        let (u, i) = covering[step]
            .iter()
            .copied()
            .filter(|&(u, i)| !spilled[u][i])
            .max_by(|&a, &b| {
                value(units, weights, target, live, spilled, a)
                    .total_cmp(&value(units, weights, target, live, spilled, b))
            })?;
        spilled[u][i] = true;
        let a = &units[u].accesses;
        for l in &mut live[a[i].step + 1..a[i + 1].step] {
            *l -= units[u].size;
        }
    }
}

/// Excess bytes a gap removes per byte it would move, times its unit's weight.
fn value(
    units: &[Unit],
    weights: &[f64],
    target: u64,
    live: &[u64],
    spilled: &[Vec<bool>],
    (u, i): (usize, usize),
) -> f64 {
    let unit = &units[u];
    let a = &unit.accesses;
    let relief: u64 = live[a[i].step + 1..a[i + 1].step]
        .iter()
        .map(|&l| l.saturating_sub(target).min(unit.size))
        .sum();
    let since = (0..i).rev().find(|&j| spilled[u][j]).map_or(0, |j| j + 1);
    let dirty = a[since..=i].iter().any(|x| x.write);
    weights[u] * relief as f64 / (unit.size * (1 + u64::from(dirty))) as f64
}

/// Resident intervals of a unit: runs of steps between spilled gaps.
fn intervals(unit: &Unit, spilled: &[bool]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut from = unit.accesses[0].step;
    for (i, pair) in unit.accesses.windows(2).enumerate() {
        if spilled[i] {
            out.push((from, pair[0].step));
            from = pair[1].step;
        }
    }
    out.push((from, unit.accesses.last().map_or(from, |a| a.step)));
    out
}

/// Offsets of every resident interval (per unit, in order), and the arena they need: the
/// intervals form a dynamic storage allocation problem, given to the planner heuristics in
/// turn (greedy by size first) until one fits the budget; the smallest arena wins otherwise.
/// A unit comes back from host memory wherever its next interval fits, not necessarily where
/// it left from.
fn place(problem: &Offload, units: &[Unit], spilled: &[Vec<bool>]) -> (Vec<Vec<u64>>, u64) {
    let spans: Vec<Vec<(usize, usize)>> = units
        .iter()
        .zip(spilled)
        .map(|(u, s)| intervals(u, s))
        .collect();
    let step = |s: usize| u32::try_from(s).unwrap_or(u32::MAX - 1);
    let dsa = Problem {
        buffers: spans
            .iter()
            .zip(units)
            .flat_map(|(s, u)| {
                s.iter().map(move |&(from, to)| Buffer {
                    size: u.size,
                    start: step(from),
                    end: step(to) + 1,
                })
            })
            .collect(),
        alignment: problem.alignment.max(1),
    };
    let mut best: Option<Solution> = None;
    for planner in HEURISTICS {
        let options = PlanOptions {
            planner,
            capacity: Some(problem.budget),
            ..PlanOptions::default()
        };
        let Ok(solution) = crate::plan::solve(&dsa, &options) else {
            break;
        };
        if best.as_ref().is_none_or(|b| solution.arena < b.arena) {
            best = Some(solution);
        }
        if best.as_ref().is_some_and(|b| b.arena <= problem.budget) {
            break;
        }
    }
    let Some(best) = best else {
        return (Vec::new(), u64::MAX);
    };
    let mut next = best.offsets.into_iter();
    let offsets = spans
        .iter()
        .map(|s| next.by_ref().take(s.len()).collect())
        .collect();
    (offsets, best.arena)
}

/// Per-object stays from the units' intervals and their offsets.
fn stays(
    problem: &Offload,
    units: &[Unit],
    spilled: &[Vec<bool>],
    offsets: &[Vec<u64>],
) -> Residency {
    let mut stays = vec![Vec::new(); problem.objects.len()];
    for (u, unit) in units.iter().enumerate() {
        for ((from, to), &offset) in intervals(unit, &spilled[u]).into_iter().zip(&offsets[u]) {
            for &(m, inner) in &unit.members {
                let object = &problem.objects[m];
                let (from, to) = (from.max(object.first()), to.min(object.last()));
                if from <= to {
                    stays[m].push(Stay {
                        from,
                        to,
                        offset: offset + inner,
                    });
                }
            }
        }
    }
    Residency { stays }
}
