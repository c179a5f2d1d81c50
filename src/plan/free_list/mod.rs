//! S2: static pre-allocation by lifetimes with an offset-sorted, coalescing free list.
//!
//! Walk the buffers in execution order (by start step). Before each one, release the blocks whose
//! lifetime has ended into the free list, merging neighbours. Give the buffer the smallest free
//! block that fits (its lower end). If none fits, extend the largest free block by the shortfall:
//! every block above it (live, released or free) moves up by the shortfall and the arena grows by
//! it. When the largest free block ends at the top of the arena nothing moves, and with no free
//! block at all the buffer goes on top. Moving everything above a point up by the same amount
//! keeps all earlier placements disjoint, so the plan stays valid. The arena is the high-water mark.

mod shift_list;

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};

use super::budget::{FREE_LIST_TICKS_PER_UNIT, Meter};
use super::problem::{Problem, align_up};
use shift_list::ShiftList;

/// Runs S2 and returns the offsets, or `None` when `meter` stops it first. Sizes are padded to
/// the alignment internally, so every block boundary (and thus every offset) stays aligned.
pub(crate) fn s2_free_list(problem: &Problem, meter: &mut Meter) -> Option<Vec<u64>> {
    let buffers = &problem.buffers;
    let padded = |i: usize| align_up(buffers[i].size, problem.alignment);
    let mut queue: Vec<usize> = (0..buffers.len())
        .filter(|&i| !buffers[i].is_void())
        .collect();
    queue.sort_by_key(|&i| (buffers[i].start, i));

    let mut offsets = vec![0u64; buffers.len()];
    let mut live: BTreeMap<u64, usize> = BTreeMap::new();
    let mut departures: BinaryHeap<Reverse<(u32, usize)>> = BinaryHeap::new();
    let mut free = FreeList::default();
    let mut released = ShiftList::default();
    let mut arena = 0u64;

    for i in queue {
        // A block's arrival and departure are a few ordered-map operations each; an extension
        // moves every block above it.
        let mut work = 100;
        while let Some(&Reverse((end, j))) = departures.peek() {
            if end > buffers[i].start {
                break;
            }
            departures.pop();
            live.remove(&offsets[j]);
            released.insert(offsets[j], j);
            free.release(offsets[j], padded(j));
        }
        let size = padded(i);
        let offset = match free.take_best_fit(size) {
            Some(offset) => offset,
            None => {
                let (offset, len) = free.take_largest().unwrap_or((arena, 0));
                let shortfall = size - len;
                let above = offset + len;
                for (o, j) in live.split_off(&above) {
                    work += 50;
                    offsets[j] = o + shortfall;
                    live.insert(o + shortfall, j);
                }
                free.shift_from(above, shortfall);
                released.shift_from(above, shortfall);
                arena += shortfall;
                offset
            }
        };
        offsets[i] = offset;
        live.insert(offset, i);
        departures.push(Reverse((buffers[i].end, i)));
        if !meter.spend_ticks(work, FREE_LIST_TICKS_PER_UNIT) {
            return None;
        }
    }
    released.write_offsets(&mut offsets);
    Some(offsets)
}

/// Free blocks indexed by offset (to merge neighbours) and by (length, offset) (to find fits).
#[derive(Default)]
struct FreeList {
    by_offset: BTreeMap<u64, u64>,
    by_length: BTreeSet<(u64, u64)>,
}

impl FreeList {
    fn add(&mut self, offset: u64, len: u64) {
        self.by_offset.insert(offset, len);
        self.by_length.insert((len, offset));
    }

    fn remove(&mut self, offset: u64, len: u64) {
        self.by_offset.remove(&offset);
        self.by_length.remove(&(len, offset));
    }

    /// Frees `[offset, offset + len)`, merging it with free neighbours.
    fn release(&mut self, mut offset: u64, mut len: u64) {
        if let Some((&lo, &lo_len)) = self.by_offset.range(..offset).next_back()
            && lo + lo_len == offset
        {
            self.remove(lo, lo_len);
            offset = lo;
            len += lo_len;
        }
        if let Some(&hi_len) = self.by_offset.get(&(offset + len)) {
            self.remove(offset + len, hi_len);
            len += hi_len;
        }
        self.add(offset, len);
    }

    /// Takes `len` bytes from the lower end of the smallest free block that holds them.
    fn take_best_fit(&mut self, len: u64) -> Option<u64> {
        let &(block_len, offset) = self.by_length.range((len, 0)..).next()?;
        self.remove(offset, block_len);
        if block_len > len {
            self.add(offset + len, block_len - len);
        }
        Some(offset)
    }

    /// Removes and returns the largest free block (the highest one on ties).
    fn take_largest(&mut self) -> Option<(u64, u64)> {
        let (len, offset) = self.by_length.pop_last()?;
        self.by_offset.remove(&offset);
        Some((offset, len))
    }

    /// Moves every free block at or above `from` up by `by`.
    fn shift_from(&mut self, from: u64, by: u64) {
        for (offset, len) in self.by_offset.split_off(&from) {
            self.by_length.remove(&(len, offset));
            self.add(offset + by, len);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::problem::arena_of;

    /// Lifetimes are inclusive `(first, last)` as in the method's text.
    /// Blocks given with inclusive last steps, as the seed lists them.
    fn problem(alignment: u64, blocks: &[(u64, u32, u32)]) -> Problem {
        let half_open: Vec<(u64, u32, u32)> = blocks
            .iter()
            .map(|&(size, first, last)| (size, first, last + 1))
            .collect();
        Problem::of(alignment, &half_open)
    }

    #[test]
    fn s2_worked_example() {
        let p = problem(
            1,
            &[
                (2048, 0, 2),
                (2048, 1, 4),
                (1024, 2, 3),
                (2048, 3, 4),
                (1024, 4, 5),
                (4096, 5, 5),
            ],
        );
        let offsets = s2_free_list(&p, &mut crate::plan::budget::Budget::unlimited().meter())
            .expect("unlimited");
        assert_eq!(offsets, [0, 2048, 4096, 0, 4096, 0]);
        assert_eq!(arena_of(&p, &offsets), 5120);
    }

    #[test]
    fn extending_the_top_free_block_grows_the_arena_by_the_shortfall() {
        // Block 1 (100 B) is freed at the top; block 2 needs 160 B: the top block grows by 60.
        let p = problem(1, &[(50, 0, 5), (100, 0, 0), (160, 1, 2)]);
        let offsets = s2_free_list(&p, &mut crate::plan::budget::Budget::unlimited().meter())
            .expect("unlimited");
        assert_eq!(offsets, [0, 50, 50]);
        assert_eq!(arena_of(&p, &offsets), 210);
    }

    #[test]
    fn extending_a_middle_free_block_moves_everything_above_it() {
        // Block 0 leaves [0, 100) free under live block 1 at [100, 150); block 2 needs 120 B:
        // the largest free block grows by 20, so block 1 moves up to 120 (for its whole life).
        let p = problem(1, &[(100, 0, 1), (50, 0, 9), (120, 2, 3)]);
        let offsets = s2_free_list(&p, &mut crate::plan::budget::Budget::unlimited().meter())
            .expect("unlimited");
        assert_eq!(offsets, [0, 120, 0]);
        assert_eq!(arena_of(&p, &offsets), 170);
    }

    #[test]
    fn released_blocks_above_the_extension_move_too() {
        // Blocks 2 and 3 are released at [130, 170) and [130, 160) above live block 1; block 4
        // extends the largest free block [0, 100) by 20, so blocks 1, 2 and 3 all move up by 20.
        let p = problem(
            1,
            &[(100, 0, 1), (30, 0, 5), (40, 0, 0), (30, 2, 2), (120, 3, 4)],
        );
        let offsets = s2_free_list(&p, &mut crate::plan::budget::Budget::unlimited().meter())
            .expect("unlimited");
        assert_eq!(offsets, [0, 120, 150, 150, 0]);
        let solution = crate::plan::Solution {
            arena: arena_of(&p, &offsets),
            offsets,
            planner: String::new(),
            proven_optimal: false,
            lower_bound: 0,
            searches: Vec::new(),
        };
        assert_eq!(solution.arena, 190);
        assert_eq!(crate::plan::verify(&p, &solution), Ok(()));
    }

    #[test]
    fn shift_list_shifts_suffixes_across_chunks() {
        let mut list = ShiftList::default();
        for i in 0..3000usize {
            list.insert((i as u64 * 7919) % 3000, i);
        }
        list.shift_from(1500, 10);
        list.shift_from(2990, 5);
        let mut offsets = vec![0u64; 3000];
        list.write_offsets(&mut offsets);
        for (i, &o) in offsets.iter().enumerate() {
            let base = (i as u64 * 7919) % 3000;
            let after_first = base + if base >= 1500 { 10 } else { 0 };
            let expected = after_first + if after_first >= 2990 { 5 } else { 0 };
            assert_eq!(o, expected, "block {i}");
        }
    }
}
