//! Lower bounds on the arena: no placement of the problem fits in fewer bytes.

use super::problem::{Problem, align_up};
use super::timeline::Timeline;

/// The max-live bound: the largest total size of the buffers live at one step (and at least the
/// largest buffer, which must fit in the arena even if it conflicts with nothing).
///
/// Buffers live at the same step pairwise conflict, so their byte ranges are disjoint and their
/// sizes add up below the arena's end.
pub fn max_live_bound(problem: &Problem) -> u64 {
    let timeline = Timeline::new(problem);
    let peak = timeline.load(problem).into_iter().max().unwrap_or(0);
    peak.max(largest_buffer(problem))
}

/// The best of the lower bounds this module knows; never below [`max_live_bound`].
pub fn lower_bound(problem: &Problem) -> u64 {
    max_live_bound(problem).max(aligned_live_bound(problem))
}

fn largest_buffer(problem: &Problem) -> u64 {
    problem.buffers.iter().map(|b| b.size).max().unwrap_or(0)
}

/// The max-live bound with alignment padding: at every step, the live buffers need
/// `Σ align_up(size) − max(align_up(size) − size)` bytes.
///
/// Proof: let the buffers live at one step, sorted by offset, be `b_1 … b_k`. They are pairwise
/// disjoint, so `o_{j+1} ≥ o_j + size_j`; both offsets are multiples of the alignment `a`, hence
/// `o_{j+1} ≥ o_j + align_up(size_j, a)`. With `o_1 ≥ 0` the arena is at least
/// `o_k + size_k ≥ Σ_{j<k} align_up(size_j) + size_k`, which is `Σ_j align_up(size_j)` minus the
/// padding of `b_k` alone, and that padding is at most the largest padding of any live buffer.
/// It is strictly better than max-live whenever two or more live buffers at the peak have sizes
/// that are not multiples of the alignment.
pub fn aligned_live_bound(problem: &Problem) -> u64 {
    let a = problem.alignment.max(1);
    if a == 1 {
        return max_live_bound(problem);
    }
    let timeline = Timeline::new(problem);
    let padded = Problem {
        buffers: problem
            .buffers
            .iter()
            .map(|b| super::Buffer {
                size: align_up(b.size, a),
                ..*b
            })
            .collect(),
        alignment: a,
    };
    let padded_load = timeline.load(&padded);
    let mut largest_pad = RangeMax::new(timeline.sections());
    for b in problem.buffers.iter().filter(|b| !b.is_void()) {
        let (lo, hi) = timeline.range(b);
        largest_pad.raise(lo, hi, align_up(b.size, a) - b.size);
    }
    let peak = padded_load
        .iter()
        .enumerate()
        .map(|(s, &load)| load - largest_pad.get(s))
        .max()
        .unwrap_or(0);
    peak.max(largest_buffer(problem))
}

/// Range "raise to at least" updates with point reads: a segment tree whose nodes hold the
/// largest value raised over their whole range.
struct RangeMax {
    len: usize,
    tags: Vec<u64>,
}

impl RangeMax {
    fn new(len: usize) -> Self {
        RangeMax {
            len,
            tags: vec![0; 2 * len.max(1)],
        }
    }

    /// Raises every position in `[lo, hi)` to at least `value`.
    fn raise(&mut self, lo: usize, hi: usize, value: u64) {
        let (mut l, mut r) = (lo + self.len, hi + self.len);
        while l < r {
            if l & 1 == 1 {
                self.tags[l] = self.tags[l].max(value);
                l += 1;
            }
            if r & 1 == 1 {
                r -= 1;
                self.tags[r] = self.tags[r].max(value);
            }
            l /= 2;
            r /= 2;
        }
    }

    fn get(&self, position: usize) -> u64 {
        let mut node = position + self.len;
        let mut best = 0;
        while node >= 1 {
            best = best.max(self.tags[node]);
            node /= 2;
        }
        best
    }
}
