//! The exact solver's view of one independent group of buffers: sizes, section ranges,
//! and symmetry classes, with local indices.

use crate::plan::problem::{Buffer, Problem};
use crate::plan::timeline::Timeline;

/// Marks "no earlier twin" in [`Instance::twin_before`].
pub(super) const NONE: u32 = u32::MAX;

/// Buffers re-indexed `0..n`, with everything the search looks up in its inner loop.
pub(super) struct Instance {
    /// Size of each buffer.
    pub(super) size: Vec<u64>,
    /// First section each buffer covers.
    pub(super) lo: Vec<u32>,
    /// One past the last section each buffer covers.
    pub(super) hi: Vec<u32>,
    /// Number of steps each buffer is live.
    pub(super) length: Vec<u64>,
    /// Number of sections.
    pub(super) sections: usize,
    /// Required offset alignment.
    pub(super) alignment: u64,
    /// For each buffer, the buffers whose section ranges intersect its own.
    pub(super) conflicts: Vec<Vec<u32>>,
    /// For each section, the buffers covering it.
    pub(super) covering: Vec<Vec<u32>>,
    /// For each buffer, the previous identical buffer (same size and lifetime), or [`NONE`]:
    /// identical buffers are interchangeable, so the search places them in index order.
    pub(super) twin_before: Vec<u32>,
}

impl Instance {
    /// Builds the instance for the given non-void buffers of `problem`.
    pub(super) fn new(problem: &Problem, members: &[usize]) -> Self {
        let sub = Problem {
            buffers: members.iter().map(|&i| problem.buffers[i]).collect(),
            alignment: problem.alignment,
        };
        let timeline = Timeline::new(&sub);
        let n = members.len();
        let (mut lo, mut hi) = (Vec::with_capacity(n), Vec::with_capacity(n));
        for b in &sub.buffers {
            let (l, h) = timeline.range(b);
            lo.push(l as u32);
            hi.push(h as u32);
        }
        let size: Vec<u64> = sub.buffers.iter().map(|b| b.size).collect();
        let length = sub
            .buffers
            .iter()
            .map(|b| u64::from(b.end - b.start))
            .collect();
        let sections = timeline.sections();
        let twin_before = twins(&sub.buffers);
        let conflicts = conflict_lists(&lo, &hi);
        let mut covering = vec![Vec::new(); sections];
        for b in 0..n {
            for s in lo[b]..hi[b] {
                covering[s as usize].push(b as u32);
            }
        }
        Instance {
            size,
            length,
            lo,
            hi,
            sections,
            alignment: problem.alignment,
            conflicts,
            covering,
            twin_before,
        }
    }

    /// Number of buffers.
    pub(super) fn len(&self) -> usize {
        self.size.len()
    }
}

/// For each buffer, the others whose section ranges intersect it (a sweep over starts).
fn conflict_lists(lo: &[u32], hi: &[u32]) -> Vec<Vec<u32>> {
    let n = lo.len();
    let mut by_start: Vec<usize> = (0..n).collect();
    by_start.sort_by_key(|&b| lo[b]);
    let mut conflicts = vec![Vec::new(); n];
    let mut active: Vec<usize> = Vec::new();
    for b in by_start {
        active.retain(|&a| hi[a] > lo[b]);
        for &a in &active {
            conflicts[a].push(b as u32);
            conflicts[b].push(a as u32);
        }
        active.push(b);
    }
    conflicts
}

/// Links each buffer to the previous buffer with the same size and lifetime.
fn twins(buffers: &[Buffer]) -> Vec<u32> {
    let mut order: Vec<usize> = (0..buffers.len()).collect();
    order.sort_by_key(|&b| (buffers[b].start, buffers[b].end, buffers[b].size, b));
    let mut twin_before = vec![NONE; buffers.len()];
    for pair in order.windows(2) {
        if buffers[pair[0]] == buffers[pair[1]] {
            twin_before[pair[1]] = pair[0] as u32;
        }
    }
    twin_before
}
