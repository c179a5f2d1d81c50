//! Released blocks whose offsets may still move: a sorted list in chunks with a lazy shift each.

const CHUNK: usize = 512;

/// `(offset, buffer)` pairs sorted by offset, supporting "move everything at or above `from` up by
/// `by`" in O(chunks + CHUNK): whole chunks take a lazy shift, one chunk is updated in place.
#[derive(Default)]
pub(super) struct ShiftList {
    chunks: Vec<Chunk>,
}

#[derive(Default)]
struct Chunk {
    shift: u64,
    items: Vec<(u64, usize)>,
}

impl Chunk {
    fn first(&self) -> u64 {
        self.items[0].0 + self.shift
    }

    fn last(&self) -> u64 {
        self.items[self.items.len() - 1].0 + self.shift
    }

    /// Folds the lazy shift into the items.
    fn settle(&mut self) {
        if self.shift != 0 {
            for item in &mut self.items {
                item.0 += self.shift;
            }
            self.shift = 0;
        }
    }
}

impl ShiftList {
    /// Adds a block at `offset`.
    pub(super) fn insert(&mut self, offset: u64, buffer: usize) {
        let at = self
            .chunks
            .partition_point(|c| c.first() <= offset)
            .saturating_sub(1);
        if self.chunks.is_empty() {
            self.chunks.push(Chunk::default());
        }
        let chunk = &mut self.chunks[at];
        chunk.settle();
        let pos = chunk.items.partition_point(|&(o, _)| o <= offset);
        chunk.items.insert(pos, (offset, buffer));
        if chunk.items.len() > 2 * CHUNK {
            let tail = chunk.items.split_off(CHUNK);
            self.chunks.insert(
                at + 1,
                Chunk {
                    shift: 0,
                    items: tail,
                },
            );
        }
    }

    /// Moves every block at or above `from` up by `by`.
    pub(super) fn shift_from(&mut self, from: u64, by: u64) {
        let first = self.chunks.partition_point(|c| c.last() < from);
        for (k, chunk) in self.chunks.iter_mut().enumerate().skip(first) {
            if k == first && chunk.first() < from {
                chunk.settle();
                for item in chunk.items.iter_mut().filter(|item| item.0 >= from) {
                    item.0 += by;
                }
            } else {
                chunk.shift += by;
            }
        }
    }

    /// Writes each block's final offset into `offsets[buffer]`.
    pub(super) fn write_offsets(&self, offsets: &mut [u64]) {
        for chunk in &self.chunks {
            for &(offset, buffer) in &chunk.items {
                offsets[buffer] = offset + chunk.shift;
            }
        }
    }
}
