//! Greedy planners: sort the buffers by a key, then place them one by one (first or best fit).

use std::cmp::Reverse;

use super::budget::Meter;
use super::place::{Fit, Placer};
use super::problem::{Buffer, Problem};
use super::timeline::Timeline;

/// The sort orders of the greedy planners (largest key first unless stated).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Order {
    /// Size, then earliest start (TFLite and XLA's "size" order; the tie rule reproduces the
    /// greedy-by-size numbers published with MiniMalloc's benchmarks).
    Size,
    /// Lifetime length, then size.
    Lifetime,
    /// Size × lifetime length, then size.
    Area,
    /// Earliest start first, then longest, then largest.
    Start,
    /// Steps by total live bytes, largest first; within a step, its unplaced buffers by size
    /// (Pisarchyk and Lee 2020, "greedy by breadth").
    Breadth,
}

/// Places the problem's buffers in the given order with the given fit; returns the offsets, or
/// `None` when `meter` stops it first.
pub(crate) fn greedy(
    problem: &Problem,
    order: Order,
    fit: Fit,
    meter: &mut Meter,
) -> Option<Vec<u64>> {
    let sequence = sorted(problem, order);
    Placer::new(problem).place_all(&sequence, fit, meter)
}

/// The non-void buffers in the order's sequence; ties fall back to the buffer index.
pub(crate) fn sorted(problem: &Problem, order: Order) -> Vec<usize> {
    let buffers = &problem.buffers;
    let mut sequence: Vec<usize> = (0..buffers.len())
        .filter(|&i| !buffers[i].is_void())
        .collect();
    let length = |b: &Buffer| u64::from(b.end - b.start);
    match order {
        Order::Size => sequence.sort_by_key(|&i| (Reverse(buffers[i].size), buffers[i].start, i)),
        Order::Lifetime => sequence.sort_by_key(|&i| {
            let b = &buffers[i];
            (Reverse(length(b)), Reverse(b.size), b.start, i)
        }),
        Order::Area => sequence.sort_by_key(|&i| {
            let b = &buffers[i];
            (
                Reverse(u128::from(b.size) * u128::from(length(b))),
                Reverse(b.size),
                b.start,
                i,
            )
        }),
        Order::Start => sequence.sort_by_key(|&i| {
            let b = &buffers[i];
            (b.start, Reverse(length(b)), Reverse(b.size), i)
        }),
        Order::Breadth => {
            let rank = breadth_rank(problem, &sequence);
            sequence.sort_by_key(|&i| (rank[i], Reverse(buffers[i].size), i));
        }
    }
    sequence
}

/// For each listed buffer, the rank of the first section of its lifetime that greedy-by-breadth
/// visits (sections by live bytes, largest first, earliest on ties); a range minimum per buffer.
fn breadth_rank(problem: &Problem, buffers: &[usize]) -> Vec<u32> {
    let timeline = Timeline::new(problem);
    let load = timeline.load(problem);
    let mut visit: Vec<usize> = (0..load.len()).collect();
    visit.sort_by_key(|&s| (Reverse(load[s]), s));
    let mut rank_of_section = vec![0u32; load.len()];
    for (rank, &s) in visit.iter().enumerate() {
        rank_of_section[s] = rank as u32;
    }
    let ranks = RangeMin::new(rank_of_section);
    let mut rank = vec![u32::MAX; problem.buffers.len()];
    for &i in buffers {
        let (lo, hi) = timeline.range(&problem.buffers[i]);
        rank[i] = ranks.min(lo, hi);
    }
    rank
}

/// Static range minimum over a `u32` array (an iterative segment tree).
struct RangeMin {
    len: usize,
    tree: Vec<u32>,
}

impl RangeMin {
    fn new(values: Vec<u32>) -> Self {
        let len = values.len();
        let mut tree = vec![u32::MAX; 2 * len];
        tree[len..].copy_from_slice(&values);
        for node in (1..len).rev() {
            tree[node] = tree[2 * node].min(tree[2 * node + 1]);
        }
        RangeMin { len, tree }
    }

    /// The minimum over `[lo, hi)`.
    fn min(&self, lo: usize, hi: usize) -> u32 {
        let (mut l, mut r) = (lo + self.len, hi + self.len);
        let mut best = u32::MAX;
        while l < r {
            if l & 1 == 1 {
                best = best.min(self.tree[l]);
                l += 1;
            }
            if r & 1 == 1 {
                r -= 1;
                best = best.min(self.tree[r]);
            }
            l /= 2;
            r /= 2;
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unlimited() -> Meter {
        crate::plan::budget::Budget::unlimited().meter()
    }

    #[test]
    fn greedy_by_size_solves_minimallocs_example() {
        // examples/input.12.csv: equal sizes, so the earliest starts go first.
        let p = Problem::of(
            1,
            &[(4, 0, 3), (4, 3, 9), (4, 0, 9), (4, 9, 21), (4, 0, 21)],
        );
        assert_eq!(sorted(&p, Order::Size), [0, 2, 4, 1, 3]);
        let offsets = greedy(&p, Order::Size, Fit::Lowest, &mut unlimited());
        assert_eq!(offsets.expect("unlimited"), [0, 0, 4, 0, 8]);
    }

    #[test]
    fn breadth_visits_the_fullest_step_first() {
        // Step 0 holds 10 + 3 bytes, step 1 holds 1 + 5.
        let p = Problem::of(1, &[(10, 0, 1), (1, 1, 2), (5, 1, 2), (3, 0, 1)]);
        assert_eq!(sorted(&p, Order::Breadth), [0, 3, 2, 1]);
    }

    #[test]
    fn orders_sort_by_their_keys() {
        let p = Problem::of(1, &[(8, 0, 2), (2, 0, 10), (4, 5, 9), (0, 0, 4)]);
        assert_eq!(
            sorted(&p, Order::Size),
            [0, 2, 1],
            "void buffers are left out"
        );
        assert_eq!(sorted(&p, Order::Lifetime), [1, 2, 0]);
        assert_eq!(sorted(&p, Order::Area), [1, 0, 2]);
        assert_eq!(sorted(&p, Order::Start), [1, 0, 2]);
    }

    #[test]
    fn best_fit_prefers_the_tighter_gap() {
        // Placed in index order; at steps 1..3 the last buffer sees gaps [10, 30) and [40, 45).
        let p = Problem::of(
            1,
            &[
                (10, 0, 4),
                (20, 0, 1),
                (10, 0, 4),
                (5, 0, 1),
                (10, 0, 4),
                (5, 1, 3),
            ],
        );
        let order = [0, 1, 2, 3, 4, 5];
        let best = Placer::new(&p).place_all(&order, Fit::Best, &mut unlimited());
        assert_eq!(best.expect("unlimited"), [0, 10, 30, 40, 45, 40]);
        let lowest = Placer::new(&p).place_all(&order, Fit::Lowest, &mut unlimited());
        assert_eq!(lowest.expect("unlimited")[5], 10);
    }

    #[test]
    fn a_spent_allowance_stops_the_placement() {
        // Placing all three costs 20 + 24 + 28 = 72 ticks, 9 units at 8 ticks a unit: 3 units
        // stop it part way.
        let p = Problem::of(1, &[(4, 0, 3), (4, 3, 9), (4, 0, 9)]);
        let mut meter = crate::plan::budget::Budget {
            work: 3,
            ..crate::plan::budget::Budget::unlimited()
        }
        .meter();
        assert_eq!(greedy(&p, Order::Size, Fit::Lowest, &mut meter), None);
        assert_eq!(meter.ending(), crate::plan::budget::Ending::Work);
    }
}
