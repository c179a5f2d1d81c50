//! Finds the byte ranges of the placed buffers whose lifetimes intersect a given buffer's.
//!
//! The non-void buffers are sorted by start and cut into blocks of [`BLOCK`]; a segment tree over
//! the blocks holds per node the largest `end` among the *placed* buffers below it (0 when none
//! is placed). A placed buffer `j` intersects buffer `i` iff `start_j < end_i` (a prefix of the
//! order, precomputed per buffer) and `end_j > start_i` (found by descending only into nodes whose
//! maximum exceeds `start_i`). Each position also keeps its placed byte range, so a query reads
//! contiguous memory instead of chasing buffer indices.

use crate::plan::problem::Problem;

/// Buffers per leaf block.
const BLOCK: usize = 16;

/// The placed-buffer index of a problem.
pub(crate) struct LiveIndex {
    /// Start and end step of each position (buffers sorted by start).
    steps: Vec<(u32, u32)>,
    /// End step of each placed position (0 if unplaced) and its byte range.
    placed: Vec<(u32, u64, u64)>,
    /// Position of each buffer (`u32::MAX` for void buffers).
    position: Vec<u32>,
    /// Number of positions whose start is before each buffer's end.
    prefix: Vec<u32>,
    leaves: usize,
    max_end: Vec<u32>,
}

impl LiveIndex {
    /// Indexes the problem's non-void buffers, none of them placed.
    pub(crate) fn new(problem: &Problem) -> Self {
        let buffers = &problem.buffers;
        let mut order: Vec<u32> = (0..buffers.len() as u32)
            .filter(|&i| !buffers[i as usize].is_void())
            .collect();
        order.sort_unstable_by_key(|&i| (buffers[i as usize].start, i));
        let mut position = vec![u32::MAX; buffers.len()];
        for (p, &i) in order.iter().enumerate() {
            position[i as usize] = p as u32;
        }
        let steps: Vec<(u32, u32)> = order
            .iter()
            .map(|&i| (buffers[i as usize].start, buffers[i as usize].end))
            .collect();
        let mut by_end: Vec<u32> = order.clone();
        by_end.sort_unstable_by_key(|&i| buffers[i as usize].end);
        let mut prefix = vec![0u32; buffers.len()];
        let mut count = 0;
        for i in by_end {
            let end = buffers[i as usize].end;
            while count < steps.len() && steps[count].0 < end {
                count += 1;
            }
            prefix[i as usize] = count as u32;
        }
        let leaves = steps.len().div_ceil(BLOCK).next_power_of_two();
        LiveIndex {
            placed: vec![(0, 0, 0); steps.len()],
            steps,
            position,
            prefix,
            leaves,
            max_end: vec![0; 2 * leaves],
        }
    }

    /// Records non-void buffer `i` as placed at bytes `[offset, top)`.
    pub(crate) fn insert(&mut self, i: usize, offset: u64, top: u64) {
        let p = self.position[i] as usize;
        let end = self.steps[p].1;
        self.placed[p] = (end, offset, top);
        let mut node = p / BLOCK + self.leaves;
        self.max_end[node] = self.max_end[node].max(end);
        while node > 1 {
            node /= 2;
            let m = self.max_end[2 * node].max(self.max_end[2 * node + 1]);
            if self.max_end[node] == m {
                break;
            }
            self.max_end[node] = m;
        }
    }

    /// Forgets every placed buffer.
    pub(crate) fn clear(&mut self) {
        self.placed.fill((0, 0, 0));
        self.max_end.fill(0);
    }

    /// Calls `visit(offset, top)` for every placed buffer whose lifetime intersects buffer `i`'s.
    pub(crate) fn for_each_conflict(&self, i: usize, mut visit: impl FnMut(u64, u64)) {
        let prefix = self.prefix[i] as usize;
        let start = self.steps[self.position[i] as usize].0;
        let blocks = prefix.div_ceil(BLOCK);
        let mut stack = Vec::new();
        stack.push((1usize, 0usize, self.leaves));
        while let Some((node, lo, hi)) = stack.pop() {
            if lo >= blocks || self.max_end[node] <= start {
                continue;
            }
            if hi - lo == 1 {
                for &(end, offset, top) in &self.placed[lo * BLOCK..prefix.min(hi * BLOCK)] {
                    if end > start {
                        visit(offset, top);
                    }
                }
                continue;
            }
            let mid = (lo + hi) / 2;
            stack.push((2 * node + 1, mid, hi));
            stack.push((2 * node, lo, mid));
        }
    }
}
