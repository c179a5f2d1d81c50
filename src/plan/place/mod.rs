//! Placing buffers one at a time below or between the already placed conflicting buffers.

mod index;

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
}

impl<'p> Placer<'p> {
    /// A placer with nothing placed; void buffers sit at offset 0 from the start.
    pub(crate) fn new(problem: &'p Problem) -> Self {
        Placer {
            problem,
            index: LiveIndex::new(problem),
            offsets: vec![0; problem.buffers.len()],
            occupied: Vec::new(),
        }
    }

    /// Places every non-void buffer in `order` (a permutation of some indices) and returns all
    /// offsets. Buffers left out of `order` stay at 0, so `order` should hold every non-void one.
    pub(crate) fn place_all(&mut self, order: &[usize], fit: Fit) -> Vec<u64> {
        self.index.clear();
        self.offsets.fill(0);
        for &i in order {
            self.place(i, fit);
        }
        self.offsets.clone()
    }

    /// Places buffer `i` (ignored when void) and returns its offset.
    fn place(&mut self, i: usize, fit: Fit) -> u64 {
        let buffer = self.problem.buffers[i];
        if buffer.is_void() {
            return 0;
        }
        self.occupied.clear();
        let offsets = &self.offsets;
        let occupied = &mut self.occupied;
        self.index.for_each_conflict(&buffer, |j| {
            occupied.push((offsets[j], offsets[j] + self.problem.buffers[j].size));
        });
        let offset = choose_gap(&mut self.occupied, buffer.size, self.problem.alignment, fit);
        self.offsets[i] = offset;
        self.index.insert(i, &buffer);
        offset
    }
}

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
