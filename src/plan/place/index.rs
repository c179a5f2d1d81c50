//! Finds the placed buffers whose lifetimes intersect a given one, in O((k + 1) log n).

use crate::plan::problem::{Buffer, Problem};

/// The problem's non-void buffers sorted by start, under a segment tree that holds, per node,
/// the largest `end` among the *placed* buffers below it (0 when none is placed).
///
/// A placed buffer `j` intersects `[start, end)` iff `start_j < end` (a prefix of the sorted
/// order) and `end_j > start` (found by descending only into nodes whose maximum exceeds `start`).
pub(crate) struct LiveIndex {
    order: Vec<u32>,
    starts: Vec<u32>,
    position: Vec<u32>,
    leaves: usize,
    max_end: Vec<u32>,
}

impl LiveIndex {
    /// Indexes the problem's non-void buffers, none of them placed.
    pub(crate) fn new(problem: &Problem) -> Self {
        let mut order: Vec<u32> = (0..problem.buffers.len() as u32)
            .filter(|&i| !problem.buffers[i as usize].is_void())
            .collect();
        order.sort_unstable_by_key(|&i| (problem.buffers[i as usize].start, i));
        let starts = order
            .iter()
            .map(|&i| problem.buffers[i as usize].start)
            .collect();
        let mut position = vec![u32::MAX; problem.buffers.len()];
        for (p, &i) in order.iter().enumerate() {
            position[i as usize] = p as u32;
        }
        let leaves = order.len().next_power_of_two();
        LiveIndex {
            order,
            starts,
            position,
            leaves,
            max_end: vec![0; 2 * leaves],
        }
    }

    /// Marks buffer `i` (non-void) as placed, so later queries report it.
    pub(crate) fn insert(&mut self, i: usize, buffer: &Buffer) {
        let mut node = self.position[i] as usize + self.leaves;
        self.max_end[node] = buffer.end;
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
        self.max_end.fill(0);
    }

    /// Calls `visit` with every placed buffer whose lifetime intersects `buffer`'s.
    pub(crate) fn for_each_conflict(&self, buffer: &Buffer, mut visit: impl FnMut(usize)) {
        let prefix = self.starts.partition_point(|&s| s < buffer.end);
        if prefix == 0 {
            return;
        }
        let mut stack = vec![(1usize, 0usize, self.leaves)];
        while let Some((node, lo, hi)) = stack.pop() {
            if lo >= prefix || self.max_end[node] <= buffer.start {
                continue;
            }
            if hi - lo == 1 {
                visit(self.order[lo] as usize);
                continue;
            }
            let mid = (lo + hi) / 2;
            stack.push((2 * node + 1, mid, hi));
            stack.push((2 * node, lo, mid));
        }
    }
}
