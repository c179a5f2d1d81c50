//! An independent check of a solution: shares no code with the planners.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

use super::problem::{Problem, Solution};

/// The first way in which a solution breaks the problem's rules.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    /// The solution has a different number of offsets than the problem has buffers.
    #[error("solution has {got} offsets for {expected} buffers")]
    LengthMismatch {
        /// Buffers in the problem.
        expected: usize,
        /// Offsets in the solution.
        got: usize,
    },
    /// The problem's alignment is zero.
    #[error("alignment must be at least 1")]
    ZeroAlignment,
    /// An offset is not a multiple of the alignment.
    #[error("buffer {buffer} at offset {offset} is not aligned to {alignment}")]
    Misaligned {
        /// Index of the buffer.
        buffer: usize,
        /// Its offset.
        offset: u64,
        /// The required alignment.
        alignment: u64,
    },
    /// A buffer ends past the arena.
    #[error("buffer {buffer} ends at byte {end}, past the arena of {arena} bytes")]
    OutsideArena {
        /// Index of the buffer.
        buffer: usize,
        /// Its `offset + size` (saturated at `u64::MAX`).
        end: u64,
        /// The solution's arena size.
        arena: u64,
    },
    /// Two buffers live at the same step share bytes.
    #[error("buffers {first} and {second} are live together and overlap in memory")]
    Overlap {
        /// Index of one buffer.
        first: usize,
        /// Index of the other.
        second: usize,
    },
}

/// Checks that `solution` is a valid placement for `problem`: one aligned offset per buffer,
/// every buffer inside the arena, and no two buffers that are live at the same step (both of
/// non-zero size) sharing a byte. Runs a sweep over time in O(n log n).
pub fn verify(problem: &Problem, solution: &Solution) -> Result<(), VerifyError> {
    let buffers = &problem.buffers;
    let offsets = &solution.offsets;
    if offsets.len() != buffers.len() {
        return Err(VerifyError::LengthMismatch {
            expected: buffers.len(),
            got: offsets.len(),
        });
    }
    if problem.alignment == 0 {
        return Err(VerifyError::ZeroAlignment);
    }
    for (i, (b, &offset)) in buffers.iter().zip(offsets).enumerate() {
        if offset % problem.alignment != 0 {
            return Err(VerifyError::Misaligned {
                buffer: i,
                offset,
                alignment: problem.alignment,
            });
        }
        let end = offset.saturating_add(b.size);
        if offset.checked_add(b.size).is_none() || end > solution.arena {
            return Err(VerifyError::OutsideArena {
                buffer: i,
                end,
                arena: solution.arena,
            });
        }
    }
    check_disjoint(problem, offsets)
}

/// Sweeps the steps in order, keeping the live buffers in a map from offset to (end byte, index).
/// The live buffers are pairwise disjoint, so a newcomer only needs checking against its two
/// neighbours in offset order.
fn check_disjoint(problem: &Problem, offsets: &[u64]) -> Result<(), VerifyError> {
    let mut arrivals: Vec<usize> = (0..problem.buffers.len())
        .filter(|&i| {
            let b = &problem.buffers[i];
            b.size > 0 && b.start < b.end
        })
        .collect();
    arrivals.sort_by_key(|&i| (problem.buffers[i].start, i));
    let mut departures: BinaryHeap<Reverse<(u32, usize)>> = BinaryHeap::new();
    let mut live: BTreeMap<u64, (u64, usize)> = BTreeMap::new();
    for i in arrivals {
        let b = &problem.buffers[i];
        while let Some(&Reverse((end, j))) = departures.peek() {
            if end > b.start {
                break;
            }
            departures.pop();
            live.remove(&offsets[j]);
        }
        let lo = offsets[i];
        let hi = lo + b.size;
        if let Some((_, &(below_end, j))) = live.range(..=lo).next_back()
            && below_end > lo
        {
            return Err(VerifyError::Overlap {
                first: j.min(i),
                second: j.max(i),
            });
        }
        if let Some((_, &(_, j))) = live.range(lo..hi).next() {
            return Err(VerifyError::Overlap {
                first: j.min(i),
                second: j.max(i),
            });
        }
        live.insert(lo, (hi, i));
        departures.push(Reverse((b.end, i)));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Buffer;

    fn setup() -> (Problem, Solution) {
        let problem = Problem {
            buffers: vec![
                Buffer {
                    size: 8,
                    start: 0,
                    end: 2,
                },
                Buffer {
                    size: 8,
                    start: 1,
                    end: 3,
                },
                Buffer {
                    size: 16,
                    start: 2,
                    end: 4,
                },
                Buffer {
                    size: 0,
                    start: 0,
                    end: 4,
                },
            ],
            alignment: 8,
        };
        let solution = Solution {
            offsets: vec![0, 8, 16, 0],
            arena: 32,
            planner: "test".into(),
            proven_optimal: false,
            lower_bound: 24,
            searches: Vec::new(),
        };
        (problem, solution)
    }

    #[test]
    fn accepts_a_valid_solution() {
        let (p, s) = setup();
        assert_eq!(verify(&p, &s), Ok(()));
    }

    #[test]
    fn buffers_that_only_touch_in_time_may_share_bytes() {
        let p = Problem {
            buffers: vec![
                Buffer {
                    size: 8,
                    start: 0,
                    end: 2,
                },
                Buffer {
                    size: 8,
                    start: 2,
                    end: 4,
                },
            ],
            alignment: 1,
        };
        let s = Solution {
            offsets: vec![0, 0],
            arena: 8,
            planner: "test".into(),
            proven_optimal: true,
            lower_bound: 8,
            searches: Vec::new(),
        };
        assert_eq!(verify(&p, &s), Ok(()));
    }

    #[test]
    fn rejects_an_injected_overlap() {
        let (p, mut s) = setup();
        s.offsets[1] = 0;
        assert_eq!(
            verify(&p, &s),
            Err(VerifyError::Overlap {
                first: 0,
                second: 1
            })
        );
        let (p, mut s) = setup();
        s.offsets[2] = 8; // overlaps buffer 1 at step 2
        assert_eq!(
            verify(&p, &s),
            Err(VerifyError::Overlap {
                first: 1,
                second: 2
            })
        );
    }

    #[test]
    fn rejects_misaligned_outside_and_short_solutions() {
        let (p, mut s) = setup();
        s.offsets[2] = 20;
        s.arena = 40;
        assert!(matches!(
            verify(&p, &s),
            Err(VerifyError::Misaligned { buffer: 2, .. })
        ));
        let (p, mut s) = setup();
        s.arena = 31;
        assert!(matches!(
            verify(&p, &s),
            Err(VerifyError::OutsideArena { buffer: 2, .. })
        ));
        let (p, mut s) = setup();
        s.offsets.pop();
        assert_eq!(
            verify(&p, &s),
            Err(VerifyError::LengthMismatch {
                expected: 4,
                got: 3
            })
        );
    }

    #[test]
    fn zero_size_buffers_conflict_with_nothing() {
        let (p, mut s) = setup();
        s.offsets[3] = 8;
        assert_eq!(verify(&p, &s), Ok(()));
    }
}
