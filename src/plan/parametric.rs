//! The parametric planner: one placement valid for every value of the size symbols in their
//! ranges, each offset a `max` of the ends of the conflicting buffers placed before it.
//!
//! Buffers are placed in an order; buffer `i` starts at `max(end_j)` over the buffers `j`
//! placed before it whose lifetimes meet its own (0 when there is none), where
//! `end_j = offset_j + size_j`. Whatever the symbols' values, every such `j` ends at or below
//! `i`'s start, so no two live buffers overlap: the plan is valid by construction. Sizes are
//! rounded up to the alignment (as expressions), so every offset is aligned too.
//!
//! The order decides how tight the arena is at each value. Candidate orders are read off
//! concrete plans made at a few points of the range (the corners and two geometric middles:
//! buffers by offset, then larger first) and by size at the upper corner; the order whose
//! arena is closest to the lower bound (the most bytes live at one step) at every sample point
//! (each symbol at every power of two in its range, and at its ends) wins.

use std::collections::BTreeMap;

use super::{Buffer, PlanError, PlanOptions, Problem, max_live_bound};
use crate::symbolic::{Expr, Ranges, at_corner};

/// A buffer whose size is an expression in the symbols.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SymBuffer {
    /// Bytes, as an expression (non-negative over the ranges).
    pub size: Expr,
    /// First step at which the buffer is live.
    pub start: u32,
    /// First step at which the buffer is no longer live.
    pub end: u32,
}

/// A planning problem over a box of symbol values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SymProblem {
    /// The buffers, in the caller's order.
    pub buffers: Vec<SymBuffer>,
    /// Every offset must be a multiple of this (at least 1).
    pub alignment: u64,
    /// The symbols' inclusive ranges.
    pub ranges: Ranges,
}

/// A point: one value per symbol.
pub type Point = BTreeMap<String, i64>;

/// A sample point with the chosen plan's arena there and the lower bound there.
pub type SampleArena = (Point, u64, u64);

/// A placement valid for every point of the ranges.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParametricPlan {
    /// Buffer indices in placement order.
    pub order: Vec<usize>,
    /// Per buffer: the conflicting buffers placed before it (its offset is the max of their
    /// ends).
    pub below: Vec<Vec<usize>>,
    /// Per buffer: its size rounded up to the alignment.
    pub sizes: Vec<Expr>,
}

impl ParametricPlan {
    /// Every buffer's offset and the arena at `point`; `None` when a size cannot be evaluated.
    pub fn evaluate(&self, point: &Point) -> Option<(Vec<u64>, u64)> {
        let value = |s: &str| point.get(s).copied();
        let mut offsets = vec![0u64; self.sizes.len()];
        let mut ends = vec![0u64; self.sizes.len()];
        let mut arena = 0;
        for &i in &self.order {
            let size = u64::try_from(self.sizes[i].eval(&value)?).ok()?;
            offsets[i] = self.below[i].iter().map(|&j| ends[j]).max().unwrap_or(0);
            ends[i] = offsets[i].checked_add(size)?;
            arena = arena.max(ends[i]);
        }
        Some((offsets, arena))
    }

    /// Buffer `i`'s offset in the table grammar: `max(E, F)` over the ends `E`, `F` of the
    /// buffers below it (each written by `end_of`, e.g. `$3`), or `0`.
    pub fn offset_text(&self, i: usize, end_of: &dyn Fn(usize) -> String) -> String {
        max_of(&self.below[i], end_of)
    }

    /// The buffers nothing is placed on, in placement order: the arena is the max of their
    /// ends (every other buffer ends below some buffer's start).
    pub fn tops(&self) -> Vec<usize> {
        let mut covered = vec![false; self.sizes.len()];
        for below in &self.below {
            for &j in below {
                covered[j] = true;
            }
        }
        self.order
            .iter()
            .copied()
            .filter(|&i| !covered[i])
            .collect()
    }

    /// The arena in the table grammar: the max of the ends of the [`tops`](Self::tops).
    pub fn arena_text(&self, end_of: &dyn Fn(usize) -> String) -> String {
        max_of(&self.tops(), end_of)
    }
}

fn max_of(ends: &[usize], end_of: &dyn Fn(usize) -> String) -> String {
    let terms: Vec<String> = ends.iter().map(|&j| end_of(j)).collect();
    match terms.len() {
        0 => "0".to_string(),
        1 => terms[0].clone(),
        _ => format!("max({})", terms.join(", ")),
    }
}

/// The sample points: every symbol at `2^k` clamped into its range, for `k = 0, 1, ...` until
/// every symbol is at its upper end (so `1..512` samples 1, 2, 4, ..., 512 and `32..224`
/// samples 32, 64, 128, 224).
pub fn sample_points(ranges: &Ranges) -> Vec<Point> {
    let mut points: Vec<Point> = Vec::new();
    for k in 0..63 {
        let point: Point = ranges
            .iter()
            .map(|(s, &(lo, hi))| (s.clone(), (1i64 << k).clamp(lo, hi)))
            .collect();
        let done = point.iter().all(|(s, &v)| v == ranges[s].1);
        if points.last() != Some(&point) {
            points.push(point);
        }
        if done {
            break;
        }
    }
    points
}

/// The points whose concrete plans give candidate orders: both corners and the sample points
/// a third and two thirds of the way along the list.
fn seed_points(samples: &[Point]) -> Vec<Point> {
    let n = samples.len();
    let mut picks = vec![0, n / 3, 2 * n / 3, n - 1];
    picks.dedup();
    picks.into_iter().map(|i| samples[i].clone()).collect()
}

impl SymProblem {
    /// The concrete problem at `point`, sizes rounded up to the alignment.
    pub fn at(&self, point: &Point) -> Result<Problem, PlanError> {
        let align = i64::try_from(self.alignment).map_err(|_| PlanError::Overflow)?;
        let value = |s: &str| point.get(s).copied();
        let buffers = self
            .buffers
            .iter()
            .map(|b| {
                let bytes = b.size.eval(&value).and_then(|v| u64::try_from(v).ok());
                let size = bytes
                    .ok_or(PlanError::Overflow)?
                    .next_multiple_of(align as u64);
                Ok(Buffer {
                    size,
                    start: b.start,
                    end: b.end,
                })
            })
            .collect::<Result<_, PlanError>>()?;
        Ok(Problem {
            buffers,
            alignment: self.alignment,
        })
    }
}

/// Plans `problem` for its whole range (see the module documentation); also returns, per
/// sample point, the point with the arena of the chosen plan and the lower bound there.
pub fn plan_parametric(
    problem: &SymProblem,
    options: &PlanOptions,
) -> Result<(ParametricPlan, Vec<SampleArena>), PlanError> {
    if problem.alignment == 0 {
        return Err(PlanError::ZeroAlignment);
    }
    let align = i64::try_from(problem.alignment).map_err(|_| PlanError::Overflow)?;
    let sizes: Vec<Expr> = problem
        .buffers
        .iter()
        .map(|b| b.size.ceil_div(align).and_then(|q| q.scale(align)))
        .collect::<Option<_>>()
        .ok_or(PlanError::Overflow)?;
    let n = sizes.len();
    let samples = sample_points(&problem.ranges);
    let bounds: Vec<u64> = samples
        .iter()
        .map(|p| Ok(max_live_bound(&problem.at(p)?)))
        .collect::<Result<_, PlanError>>()?;
    let mut candidates: Vec<Vec<usize>> = Vec::new();
    for point in seed_points(&samples) {
        let concrete = problem.at(&point)?;
        let solution = super::solve(&concrete, options)?;
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by_key(|&i| {
            (
                solution.offsets[i],
                std::cmp::Reverse(concrete.buffers[i].size),
            )
        });
        candidates.push(order);
    }
    let at_max: Vec<i64> = sizes
        .iter()
        .map(|s| at_corner(s, &problem.ranges, true).unwrap_or(i64::MAX))
        .collect();
    let mut by_size: Vec<usize> = (0..n).collect();
    by_size.sort_by_key(|&i| std::cmp::Reverse(at_max[i]));
    candidates.push(by_size);
    candidates.dedup();

    let mut best: Option<(f64, ParametricPlan, Vec<u64>)> = None;
    for order in candidates {
        let plan = place(problem, &sizes, order);
        let arenas: Vec<u64> = samples
            .iter()
            .map(|p| plan.evaluate(p).map(|(_, a)| a).ok_or(PlanError::Overflow))
            .collect::<Result<_, _>>()?;
        let worst = arenas
            .iter()
            .zip(&bounds)
            .map(|(&a, &b)| if b == 0 { 1.0 } else { a as f64 / b as f64 })
            .fold(1.0f64, f64::max);
        if best.as_ref().is_none_or(|(w, ..)| worst < *w) {
            best = Some((worst, plan, arenas));
        }
    }
    let (_, plan, arenas) = best.expect("at least one candidate order");
    let report = samples
        .into_iter()
        .zip(arenas)
        .zip(bounds)
        .map(|((p, a), b)| (p, a, b))
        .collect();
    Ok((plan, report))
}

/// The placement for one order: each buffer above the conflicting buffers placed before it.
fn place(problem: &SymProblem, sizes: &[Expr], order: Vec<usize>) -> ParametricPlan {
    let n = sizes.len();
    let mut below = vec![Vec::new(); n];
    for (k, &i) in order.iter().enumerate() {
        let bi = &problem.buffers[i];
        for &j in &order[..k] {
            let bj = &problem.buffers[j];
            if bi.start < bj.end && bj.start < bi.end && bi.start < bi.end && bj.start < bj.end {
                below[i].push(j);
            }
        }
    }
    ParametricPlan {
        order,
        below,
        sizes: sizes.to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s() -> Expr {
        Expr::symbol("s")
    }

    /// Two buffers sized `s` and `s·s` (bytes) whose lifetimes cross ([0, 2) and [1, 3)),
    /// with alignment 1, over s in 1..64. Worked by hand: whichever is placed first sits at
    /// 0 and the other on top of it, so the offsets are {0, s·s} (larger first) or {0, s};
    /// the arena is s + s·s either way, which is also what any plan for a single s needs
    /// (both are live at step 1).
    #[test]
    fn crossing_s_and_s_squared_are_stacked_at_every_s() {
        let problem = SymProblem {
            buffers: vec![
                SymBuffer {
                    size: s(),
                    start: 0,
                    end: 2,
                },
                SymBuffer {
                    size: s().mul(&s()).unwrap(),
                    start: 1,
                    end: 3,
                },
            ],
            alignment: 1,
            ranges: Ranges::from([("s".to_string(), (1, 64))]),
        };
        let (plan, report) = plan_parametric(&problem, &PlanOptions::default()).unwrap();
        for (_, arena, alone) in &report {
            assert_eq!(arena, alone);
        }
        for v in 1..=64i64 {
            let point = Point::from([("s".to_string(), v)]);
            let (offsets, arena) = plan.evaluate(&point).unwrap();
            let (v, square) = (v as u64, (v * v) as u64);
            assert_eq!(arena, v + square, "s = {v}");
            // Larger first at the upper corner, which every sample favours for s ≥ 2.
            assert!(
                offsets == vec![square, 0] || offsets == vec![0, v],
                "s = {v}: {offsets:?}"
            );
            assert_eq!(offsets, plan_offsets_by_hand(&plan, v, square));
        }
        assert_eq!(
            plan.arena_text(&|j| format!("${j}")),
            format!("${}", plan.order[1])
        );
    }

    /// The hand rule: the first-placed buffer at 0, the second at the first's size.
    fn plan_offsets_by_hand(plan: &ParametricPlan, v: u64, square: u64) -> Vec<u64> {
        if plan.order[0] == 1 {
            vec![square, 0]
        } else {
            vec![0, v]
        }
    }

    #[test]
    fn disjoint_lifetimes_share_offset_zero_and_alignment_rounds_sizes() {
        let problem = SymProblem {
            buffers: vec![
                SymBuffer {
                    size: s().scale(3).unwrap(),
                    start: 0,
                    end: 1,
                },
                SymBuffer {
                    size: s(),
                    start: 1,
                    end: 2,
                },
                SymBuffer {
                    size: s(),
                    start: 0,
                    end: 2,
                },
            ],
            alignment: 64,
            ranges: Ranges::from([("s".to_string(), (1, 100))]),
        };
        let (plan, _) = plan_parametric(&problem, &PlanOptions::default()).unwrap();
        for v in 1..=100i64 {
            let (offsets, arena) = plan.evaluate(&Point::from([("s".into(), v)])).unwrap();
            let up = |x: i64| (x as u64).div_ceil(64) * 64;
            assert!(offsets.iter().all(|o| o % 64 == 0));
            // Buffer 2 overlaps both in time; 0 and 1 never meet.
            let end = |i: usize, size: u64| offsets[i] + size;
            let (e0, e1, e2) = (end(0, up(3 * v)), end(1, up(v)), end(2, up(v)));
            assert!(e2 <= offsets[0] || e0 <= offsets[2]);
            assert!(e2 <= offsets[1] || e1 <= offsets[2]);
            assert_eq!(arena, e0.max(e1).max(e2));
            // By hand: the best arena is up(3v) + up(v); the plan reaches it.
            assert_eq!(arena, up(3 * v) + up(v), "s = {v}");
        }
    }
}
