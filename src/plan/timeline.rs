//! Compressed time: the distinct lifetime endpoints split time into sections, and each buffer
//! covers a contiguous range of sections.

use super::problem::{Buffer, Problem};

/// The sorted distinct endpoints of the buffers that take room.
///
/// Section `i` is the step interval `[points[i], points[i + 1])`; in each section the set of live
/// buffers is constant, so per-step quantities only need computing per section.
pub(crate) struct Timeline {
    points: Vec<u32>,
}

impl Timeline {
    /// Builds the timeline of the problem's non-void buffers.
    pub(crate) fn new(problem: &Problem) -> Self {
        let mut points: Vec<u32> = problem
            .buffers
            .iter()
            .filter(|b| !b.is_void())
            .flat_map(|b| [b.start, b.end])
            .collect();
        points.sort_unstable();
        points.dedup();
        Timeline { points }
    }

    /// Number of sections.
    pub(crate) fn sections(&self) -> usize {
        self.points.len().saturating_sub(1)
    }

    /// The half-open range of sections a non-void buffer covers.
    pub(crate) fn range(&self, buffer: &Buffer) -> (usize, usize) {
        let lo = self.points.partition_point(|&p| p < buffer.start);
        let hi = self.points.partition_point(|&p| p < buffer.end);
        (lo, hi)
    }

    /// Total bytes live in each section (a difference array over the sections).
    pub(crate) fn load(&self, problem: &Problem) -> Vec<u64> {
        let mut delta = vec![0i128; self.sections() + 1];
        for b in problem.buffers.iter().filter(|b| !b.is_void()) {
            let (lo, hi) = self.range(b);
            delta[lo] += i128::from(b.size);
            delta[hi] -= i128::from(b.size);
        }
        let mut live = 0i128;
        delta[..self.sections()]
            .iter()
            .map(|d| {
                live += d;
                live as u64
            })
            .collect()
    }
}
