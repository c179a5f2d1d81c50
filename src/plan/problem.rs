//! The planner's input and output: buffers with sizes and lifetimes, and their offsets.

/// One buffer to place: `size` bytes live over the half-open step interval `[start, end)`.
///
/// The size is used as given (the caller pads it if the runtime needs padding). A buffer whose
/// size is zero or whose interval is empty conflicts with nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Buffer {
    /// Bytes the buffer occupies.
    pub size: u64,
    /// First step at which the buffer is live.
    pub start: u32,
    /// First step at which the buffer is no longer live.
    pub end: u32,
}

impl Buffer {
    /// True when the buffer takes no room: zero bytes or an empty lifetime.
    pub fn is_void(&self) -> bool {
        self.size == 0 || self.start >= self.end
    }

    /// True when both buffers take room and their lifetimes intersect, so their bytes must not.
    pub fn conflicts(&self, other: &Buffer) -> bool {
        !self.is_void() && !other.is_void() && self.start < other.end && other.start < self.end
    }
}

/// A dynamic storage allocation problem: place every buffer in one arena.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Problem {
    /// The buffers, in the caller's order; solutions use the same indices.
    pub buffers: Vec<Buffer>,
    /// Every offset must be a multiple of this (1 means no constraint; 0 is invalid).
    pub alignment: u64,
}

/// A placement: one offset per buffer and the arena size it needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Solution {
    /// Byte offset of each buffer in the arena, indexed like [`Problem::buffers`].
    pub offsets: Vec<u64>,
    /// Arena bytes: the largest `offset + size` (0 for an empty problem).
    pub arena: u64,
    /// Name of the planner that produced the offsets.
    pub planner: String,
    /// True when `arena` equals a proven lower bound, so no placement needs fewer bytes.
    pub proven_optimal: bool,
    /// The best lower bound on the arena that the planner proved.
    pub lower_bound: u64,
    /// Every planner that ran, and what ended it.
    pub searches: Vec<Search>,
}

impl Solution {
    /// Work units the searches spent, together.
    pub fn work_spent(&self) -> u64 {
        self.searches.iter().map(|s| s.work).sum()
    }
}

/// One planner's run within a solve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Search {
    /// The planner's name.
    pub planner: String,
    /// Whether it finished, spent its work allowance, or was stopped by the clock.
    pub ended_by: super::budget::Ending,
    /// Work units it spent.
    pub work: u64,
}

/// Every buffer at the aligned top of the one before: valid for any problem (nothing shares
/// bytes), and the naive arena.
pub(crate) fn stacked(problem: &Problem) -> Vec<u64> {
    let mut top = 0;
    problem
        .buffers
        .iter()
        .map(|b| {
            if b.is_void() {
                return 0;
            }
            let offset = align_up(top, problem.alignment);
            top = offset + b.size;
            offset
        })
        .collect()
}

/// The largest padded total size [`Problem::validate`] accepts: 2^62 bytes.
pub const MAX_TOTAL: u64 = 1 << 62;

/// Why a problem cannot be planned at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// The alignment is zero.
    #[error("alignment must be at least 1")]
    ZeroAlignment,
    /// The sizes add up to more than [`MAX_TOTAL`] bytes.
    #[error("buffer sizes add up to more than 2^62 bytes")]
    Overflow,
}

#[cfg(test)]
impl Problem {
    /// A problem from `(size, start, end)` triples, lifetimes half-open (for tests).
    pub(crate) fn of(alignment: u64, buffers: &[(u64, u32, u32)]) -> Problem {
        Problem {
            buffers: buffers
                .iter()
                .map(|&(size, start, end)| Buffer { size, start, end })
                .collect(),
            alignment,
        }
    }
}

impl Problem {
    /// Checks what every planner assumes: a non-zero alignment, and sizes whose padded total is
    /// at most [`MAX_TOTAL`].
    ///
    /// The worst any planner does is stack every buffer on top of the others with alignment
    /// padding; keeping that total well inside 64 bits lets planners add two such amounts.
    pub fn validate(&self) -> Result<(), PlanError> {
        if self.alignment == 0 {
            return Err(PlanError::ZeroAlignment);
        }
        let mut total: u64 = 0;
        for b in &self.buffers {
            let padded = b
                .size
                .checked_add(self.alignment)
                .ok_or(PlanError::Overflow)?;
            total = total.checked_add(padded).ok_or(PlanError::Overflow)?;
        }
        if total > MAX_TOTAL {
            return Err(PlanError::Overflow);
        }
        Ok(())
    }
}

/// Rounds `value` up to a multiple of `alignment` (which must be at least 1).
pub(crate) fn align_up(value: u64, alignment: u64) -> u64 {
    value.div_ceil(alignment) * alignment
}

/// Arena size of a set of offsets: the largest `offset + size` over buffers that take room.
pub(crate) fn arena_of(problem: &Problem, offsets: &[u64]) -> u64 {
    problem
        .buffers
        .iter()
        .zip(offsets)
        .map(|(b, &o)| o + b.size)
        .max()
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conflicts_need_room_and_a_shared_step() {
        let a = Buffer {
            size: 4,
            start: 0,
            end: 3,
        };
        let b = Buffer {
            size: 4,
            start: 2,
            end: 5,
        };
        let c = Buffer {
            size: 4,
            start: 3,
            end: 6,
        };
        let empty = Buffer {
            size: 0,
            start: 0,
            end: 9,
        };
        let instant = Buffer {
            size: 4,
            start: 2,
            end: 2,
        };
        assert!(a.conflicts(&b) && b.conflicts(&a));
        assert!(
            !a.conflicts(&c),
            "half-open lifetimes that touch do not overlap"
        );
        assert!(!a.conflicts(&empty) && !a.conflicts(&instant));
        assert!(empty.is_void() && instant.is_void() && !a.is_void());
    }

    #[test]
    fn validate_rejects_zero_alignment_and_overflow() {
        let ok = Problem {
            buffers: vec![Buffer {
                size: 8,
                start: 0,
                end: 1,
            }],
            alignment: 1,
        };
        assert_eq!(ok.validate(), Ok(()));
        let zero = Problem {
            alignment: 0,
            ..ok.clone()
        };
        assert_eq!(zero.validate(), Err(PlanError::ZeroAlignment));
        let huge = Problem {
            buffers: vec![
                Buffer {
                    size: u64::MAX / 2,
                    start: 0,
                    end: 1
                };
                3
            ],
            alignment: 1,
        };
        assert_eq!(huge.validate(), Err(PlanError::Overflow));
        let over = Problem {
            buffers: vec![
                Buffer {
                    size: 1 << 61,
                    start: 0,
                    end: 1
                };
                2
            ],
            alignment: 1,
        };
        assert_eq!(over.validate(), Err(PlanError::Overflow));
    }

    #[test]
    fn align_up_rounds_to_multiples() {
        assert_eq!(align_up(0, 64), 0);
        assert_eq!(align_up(1, 64), 64);
        assert_eq!(align_up(128, 64), 128);
        assert_eq!(align_up(7, 1), 7);
    }
}
