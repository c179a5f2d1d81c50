//! Placing buffers one at a time below or between the already placed conflicting buffers.

mod index;

use super::budget::{GREEDY_TICKS_PER_UNIT, Meter};
use super::problem::{Problem, align_up};
use index::LiveIndex;

/// Where a buffer goes among the gaps left by the placed buffers it conflicts with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fit {
    /// The lowest offset that fits (first fit).
    Lowest,
    /// The smallest gap that fits (ties: the lowest); above everything when no gap fits.
    Best,
}

/// Places buffers one by one; each sees only the buffers placed before it.
pub(crate) struct Placer<'p> {
    problem: &'p Problem,
    index: LiveIndex,
    offsets: Vec<u64>,
    occupied: Vec<(u64, u64)>,
    ticks_per_unit: u64,
}

impl<'p> Placer<'p> {
    /// A placer with nothing placed; void buffers sit at offset 0 from the start.
    pub(crate) fn new(problem: &'p Problem) -> Self {
        Placer {
            problem,
            index: LiveIndex::new(problem),
            offsets: vec![0; problem.buffers.len()],
            occupied: Vec::new(),
            ticks_per_unit: GREEDY_TICKS_PER_UNIT,
        }
    }

    /// The same placer charging its placements at `ticks_per_unit` (a planner's calibrated
    /// rate; the greedy planners' by default).
    pub(crate) fn rated(self, ticks_per_unit: u64) -> Self {
        Placer {
            ticks_per_unit,
            ..self
        }
    }

    /// Places every non-void buffer in `order` (a permutation of some indices) and returns all
    /// offsets, or `None` when `meter` stops it first. Buffers left out of `order` stay at 0, so
    /// `order` should hold every non-void one. Each placement costs the placed buffers it
    /// conflicts with.
    pub(crate) fn place_all(
        &mut self,
        order: &[usize],
        fit: Fit,
        meter: &mut Meter,
    ) -> Option<Vec<u64>> {
        self.index.clear();
        self.offsets.fill(0);
        for &i in order {
            let ticks = self.place(i, fit);
            if !meter.spend_ticks(ticks, self.ticks_per_unit) {
                return None;
            }
        }
        Some(self.offsets.clone())
    }

    /// Places buffer `i` (ignored when void); returns the ticks it took.
    fn place(&mut self, i: usize, fit: Fit) -> u64 {
        let buffer = self.problem.buffers[i];
        if buffer.is_void() {
            return 1;
        }
        self.occupied.clear();
        let occupied = &mut self.occupied;
        self.index
            .for_each_conflict(i, |offset, top| occupied.push((offset, top)));
        let work = PLACE_WORK + CONFLICT_WORK * self.occupied.len() as u64;
        let offset = choose_gap(&mut self.occupied, buffer.size, self.problem.alignment, fit);
        self.offsets[i] = offset;
        self.index.insert(i, offset, offset + buffer.size);
        work
    }
}

/// Ticks of one placement, besides its conflicts.
const PLACE_WORK: u64 = 20;
/// Ticks per conflicting placed buffer (found, sorted and scanned).
const CONFLICT_WORK: u64 = 4;

/// Picks an offset for `size` bytes among the `occupied` byte ranges (sorted here in place).
fn choose_gap(occupied: &mut [(u64, u64)], size: u64, alignment: u64, fit: Fit) -> u64 {
    occupied.sort_unstable();
    let mut free_from = 0;
    let mut best: Option<(u64, u64)> = None;
    for &(lo, hi) in occupied.iter() {
        let start = align_up(free_from, alignment);
        if lo >= start + size {
            match fit {
                Fit::Lowest => return start,
                Fit::Best => {
                    let room = lo - start;
                    if best.is_none_or(|(r, _)| room < r) {
                        best = Some((room, start));
                    }
                }
            }
        }
        free_from = free_from.max(hi);
    }
    best.map_or(align_up(free_from, alignment), |(_, start)| start)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::budget::Budget;

    #[test]
    fn lowest_fit_takes_the_first_gap_that_holds_the_buffer() {
        let mut occupied = vec![(20, 30), (0, 10), (45, 50)];
        assert_eq!(choose_gap(&mut occupied, 10, 1, Fit::Lowest), 10);
        assert_eq!(choose_gap(&mut occupied, 12, 1, Fit::Lowest), 30);
        assert_eq!(choose_gap(&mut occupied, 16, 1, Fit::Lowest), 50);
    }

    #[test]
    fn best_fit_takes_the_smallest_gap_that_holds_the_buffer() {
        let mut occupied = vec![(0, 10), (30, 40), (45, 60)];
        // Gaps: [10, 30) of 20 and [40, 45) of 5.
        assert_eq!(choose_gap(&mut occupied, 5, 1, Fit::Best), 40);
        assert_eq!(choose_gap(&mut occupied, 6, 1, Fit::Best), 10);
        assert_eq!(choose_gap(&mut occupied, 21, 1, Fit::Best), 60);
    }

    #[test]
    fn gaps_respect_alignment() {
        let mut occupied = vec![(0, 10), (40, 50)];
        assert_eq!(choose_gap(&mut occupied, 20, 16, Fit::Lowest), 16);
        assert_eq!(choose_gap(&mut occupied, 25, 16, Fit::Lowest), 64);
        assert_eq!(choose_gap(&mut occupied, 8, 16, Fit::Best), 16);
    }

    #[test]
    fn placer_sees_only_conflicting_buffers() {
        let problem = Problem::of(1, &[(10, 0, 2), (10, 2, 4), (5, 1, 3), (7, 5, 5)]);
        let offsets = Placer::new(&problem)
            .place_all(&[0, 1, 2, 3], Fit::Lowest, &mut Budget::unlimited().meter())
            .expect("unlimited");
        assert_eq!(offsets, [0, 0, 10, 0]);
    }
}
