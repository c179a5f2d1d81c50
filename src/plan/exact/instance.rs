//! The exact solver's view of one independent group of buffers: sizes, section ranges,
//! symmetry classes and the order candidates are tried in, with local indices.

use std::cmp::Reverse;

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
    /// Number of sections.
    pub(super) sections: usize,
    /// Required offset alignment.
    pub(super) alignment: u64,
    /// For each buffer, the previous identical buffer (same size and lifetime), or [`NONE`]:
    /// identical buffers are interchangeable, so the search places them in index order.
    pub(super) twin_before: Vec<u32>,
    /// Each buffer's position in the order the search tries candidates.
    pub(super) rank: Vec<u32>,
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
        let sections = timeline.sections();
        let twin_before = twins(&sub.buffers);
        let mut rank = vec![0u32; n];
        for (r, b) in preference(&lo, &hi, &size, sections)
            .into_iter()
            .enumerate()
        {
            rank[b as usize] = r as u32;
        }
        Instance {
            size,
            lo,
            hi,
            sections,
            alignment: problem.alignment,
            twin_before,
            rank,
        }
    }

    /// Number of buffers.
    pub(super) fn len(&self) -> usize {
        self.size.len()
    }
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

/// The order in which the search tries candidates: by the largest total size live in any
/// section the buffer covers, then by area (size × sections), then by size.
fn preference(lo: &[u32], hi: &[u32], size: &[u64], sections: usize) -> Vec<u32> {
    let mut load = vec![0u64; sections];
    for b in 0..size.len() {
        for s in lo[b]..hi[b] {
            load[s as usize] += size[b];
        }
    }
    let key = |b: usize| {
        let (l, h) = (lo[b] as usize, hi[b] as usize);
        let total = load[l..h].iter().copied().max().unwrap_or(0);
        let area = size[b] * (h - l) as u64;
        let mode = std::env::var("MEMPLAN_ORDER").unwrap_or_default();
        match mode.as_str() {
            "A" => (Reverse(area), Reverse(total), Reverse(size[b]), b),
            "W" => (Reverse((h - l) as u64), Reverse(total), Reverse(area), b),
            "S" => (Reverse(size[b]), Reverse(total), Reverse(area), b),
            "R" => {
                let seed: u64 = std::env::var("MEMPLAN_SEED")
                    .ok()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0);
                let mut z = (b as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)
                    ^ seed.wrapping_mul(0xbf58_476d_1ce4_e5b9);
                z = (z ^ (z >> 31)).wrapping_mul(0x94d0_49bb_1331_11eb);
                (Reverse(z ^ (z >> 29)), Reverse(total), Reverse(area), b)
            }
            _ => (Reverse(total), Reverse(area), Reverse(size[b]), b),
        }
    };
    let mut order: Vec<u32> = (0..size.len() as u32).collect();
    order.sort_by_key(|&b| key(b as usize));
    order
}
