//! Lower bounds on the arena: no placement of the problem fits in fewer bytes.

use super::problem::{Problem, align_up};
use super::timeline::Timeline;

/// The max-live bound: the largest total size of the buffers live at one step (and at least the
/// largest buffer, which must fit in the arena even if it conflicts with nothing).
///
/// Buffers live at the same step pairwise conflict, so their byte ranges are disjoint and their
/// sizes add up below the arena's end.
pub fn max_live_bound(problem: &Problem) -> u64 {
    peak_load(problem).max(largest_buffer(problem))
}

/// The largest total size of the buffers that take room live at one step: a difference array
/// over the steps when they are few beside the buffers (a model's schedule), else over the
/// [`Timeline`]'s sections (sparse times, as in the DSA benchmarks), which sorts the endpoints.
fn peak_load(problem: &Problem) -> u64 {
    let live = || problem.buffers.iter().filter(|b| !b.is_void());
    let steps = live().map(|b| b.end as usize).max().unwrap_or(0);
    if steps > 4 * problem.buffers.len() + 64 {
        let timeline = Timeline::new(problem);
        return timeline.load(problem).into_iter().max().unwrap_or(0);
    }
    let mut delta = vec![0i128; steps + 1];
    for b in live() {
        delta[b.start as usize] += i128::from(b.size);
        delta[b.end as usize] -= i128::from(b.size);
    }
    let mut load = 0i128;
    let mut peak = 0i128;
    for d in &delta {
        load += d;
        peak = peak.max(load);
    }
    peak as u64
}

/// The best of the lower bounds this module knows: [`aligned_live_bound`], which is never below
/// [`max_live_bound`] (padding only adds to each step's total).
pub fn lower_bound(problem: &Problem) -> u64 {
    aligned_live_bound(problem)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_live_takes_the_busiest_step() {
        // Steps 0..4: live totals 10, 30, 25, 5.
        let p = Problem::of(1, &[(10, 0, 2), (20, 1, 3), (5, 2, 4)]);
        assert_eq!(max_live_bound(&p), 30);
    }

    #[test]
    fn max_live_takes_the_busiest_step_at_sparse_times() {
        // The same lifetimes a million steps on, and one far later: totals 10, 30, 25, 5, 7.
        let m = 1_000_000;
        let p = Problem::of(1, &[(10, m, m + 2), (20, m + 1, m + 3), (5, m + 2, m + 4)]);
        assert_eq!(max_live_bound(&p), 30);
        let p = Problem::of(1, &[(10, 0, 2), (20, 1, 3), (5, 2, 4), (7, 9 * m, 9 * m + 1)]);
        assert_eq!(max_live_bound(&p), 30);
    }

    #[test]
    fn max_live_counts_a_buffer_with_an_empty_lifetime_on_its_own() {
        let p = Problem::of(1, &[(10, 0, 2), (40, 3, 3)]);
        assert_eq!(max_live_bound(&p), 40);
        assert_eq!(max_live_bound(&Problem::of(1, &[])), 0);
    }

    #[test]
    fn aligned_bound_adds_the_padding_of_all_but_one_buffer() {
        // Three 5-byte buffers live together, alignment 8: offsets 0, 8, 16 at best, arena 21.
        let p = Problem::of(8, &[(5, 0, 1), (5, 0, 1), (5, 0, 1)]);
        assert_eq!(max_live_bound(&p), 15);
        assert_eq!(aligned_live_bound(&p), 21);
        assert_eq!(lower_bound(&p), 21);
    }

    #[test]
    fn aligned_bound_keeps_the_largest_padding_for_the_top() {
        // Sizes 9 (pad 7) and 16 (pad 0), alignment 16: 16 + 9 = 25, not 32 + 16.
        let p = Problem::of(16, &[(9, 0, 1), (16, 0, 1)]);
        assert_eq!(aligned_live_bound(&p), 25);
    }

    #[test]
    fn aligned_bound_equals_max_live_without_padding() {
        let p = Problem::of(4, &[(8, 0, 2), (4, 1, 3), (12, 2, 4)]);
        assert_eq!(aligned_live_bound(&p), max_live_bound(&p));
    }
}
