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

use super::problem::{Problem, align_up};
use shift_list::ShiftList;

/// Runs S2 and returns the offsets. Sizes are padded to the alignment internally, so every block
/// boundary (and thus every offset) stays aligned.
pub(crate) fn s2_free_list(problem: &Problem) -> Vec<u64> {
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
    }
    released.write_offsets(&mut offsets);
    offsets
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
