//! One memory level's state: the busy list (block, start, size), with the free spaces between
//! busy spans (coalesced by construction), and S1's rules for choosing a spot.

/// A busy span: `[start, end)` held by `block` until the end of step `last`.
#[derive(Clone, Copy, Debug)]
pub struct Span {
    /// First byte.
    pub start: u64,
    /// One past the last byte.
    pub end: u64,
    /// The block holding it.
    pub block: usize,
    /// Last step it is held.
    pub last: usize,
}

/// A maximal free space and when its neighbours are freed (`None`: the level's own boundary).
#[derive(Clone, Copy, Debug)]
struct Gap {
    start: u64,
    end: u64,
    below: Option<usize>,
    above: Option<usize>,
}

/// The busy list of one level, sorted by start.
#[derive(Clone, Debug)]
pub struct Level {
    /// Bytes the level holds.
    pub capacity: u64,
    /// Busy spans, sorted by start, disjoint.
    pub spans: Vec<Span>,
}

impl Level {
    /// An empty level.
    pub fn new(capacity: u64) -> Level {
        Level {
            capacity,
            spans: Vec::new(),
        }
    }

    /// Frees every span whose holder's lifetime ended before `step`.
    pub fn release(&mut self, step: usize) {
        self.spans.retain(|s| s.last >= step);
    }

    fn gaps(&self) -> Vec<Gap> {
        let mut gaps = Vec::with_capacity(self.spans.len() + 1);
        let (mut at, mut below) = (0, None);
        for s in &self.spans {
            if s.start > at {
                gaps.push(Gap {
                    start: at,
                    end: s.start,
                    below,
                    above: Some(s.last),
                });
            }
            (at, below) = (s.end, Some(s.last));
        }
        if self.capacity > at {
            gaps.push(Gap {
                start: at,
                end: self.capacity,
                below,
                above: None,
            });
        }
        gaps
    }

    /// S1's spot for `size` bytes: the smallest free space that fits (lowest on a tie); inside
    /// it, against its low end, except that when both neighbours hold data the block sits
    /// next to the one freed later (low end on a tie).
    pub fn choose(&self, size: u64, align: u64) -> Option<u64> {
        let gap = self
            .gaps()
            .into_iter()
            .filter(|g| fit(g, size, align).is_some())
            .min_by_key(|g| (g.end - g.start, g.start))?;
        let (low, high) = fit(&gap, size, align)?;
        Some(match (gap.below, gap.above) {
            (Some(b), Some(a)) if a > b => high,
            _ => low,
        })
    }

    /// Every spot against an end of a free space that fits `size` bytes, smallest spaces first.
    pub fn spots(&self, size: u64, align: u64) -> Vec<u64> {
        let mut gaps: Vec<Gap> = self.gaps();
        gaps.sort_by_key(|g| (g.end - g.start, g.start));
        let mut spots = Vec::new();
        for g in gaps {
            if let Some((low, high)) = fit(&g, size, align) {
                spots.push(low);
                if high != low {
                    spots.push(high);
                }
            }
        }
        spots
    }

    /// Takes `[start, start + size)` for `block` until step `last`; false when not all free.
    pub fn take(&mut self, start: u64, size: u64, block: usize, last: usize) -> bool {
        let end = start.saturating_add(size);
        if end > self.capacity {
            return false;
        }
        let at = self.spans.partition_point(|s| s.start < start);
        let clear_below = at == 0 || self.spans[at - 1].end <= start;
        let clear_above = at == self.spans.len() || self.spans[at].start >= end;
        if !(clear_below && clear_above) {
            return false;
        }
        self.spans.insert(
            at,
            Span {
                start,
                end,
                block,
                last,
            },
        );
        true
    }

    /// Hands the first `size` bytes of `from`'s span to `block` (in-place overwrite); the
    /// rest stays with `from` until its own end. Returns the span's start.
    pub fn hand_over(&mut self, from: usize, size: u64, block: usize, last: usize) -> Option<u64> {
        let at = self.spans.iter().position(|s| s.block == from)?;
        let old = self.spans[at];
        if old.end - old.start < size {
            return None;
        }
        self.spans[at] = Span {
            start: old.start,
            end: old.start + size,
            block,
            last,
        };
        if old.start + size < old.end {
            self.spans.insert(
                at + 1,
                Span {
                    start: old.start + size,
                    ..old
                },
            );
        }
        Some(old.start)
    }
}

/// The lowest and highest aligned starts of `size` bytes inside the gap, if it fits.
fn fit(g: &Gap, size: u64, align: u64) -> Option<(u64, u64)> {
    let low = g.start.next_multiple_of(align);
    let high = (g.end.checked_sub(size)? / align) * align;
    (low <= high && high >= g.start).then_some((low, high))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Free space [1024, 3072) between a block freed at step 5 (below) and one freed at step 9
    /// (above): a 1024-byte block sits next to the later one, at 2048. With the neighbours
    /// swapped it sits low, at 1024.
    #[test]
    fn sits_next_to_the_neighbour_freed_later() {
        let mut level = Level::new(4096);
        assert!(level.take(0, 1024, 0, 5));
        assert!(level.take(3072, 1024, 1, 9));
        assert_eq!(level.choose(1024, 64), Some(2048));
        let mut level = Level::new(4096);
        assert!(level.take(0, 1024, 0, 9));
        assert!(level.take(3072, 1024, 1, 5));
        assert_eq!(level.choose(1024, 64), Some(1024));
        assert!(!level.take(1000, 64, 2, 1));
        assert_eq!(level.spots(1024, 64), vec![1024, 2048]);
    }

    #[test]
    fn smallest_space_first_and_hand_over() {
        let mut level = Level::new(10_000);
        assert!(level.take(1000, 1000, 0, 3));
        assert!(level.take(2500, 1000, 1, 3));
        // Spaces: [0,1000) 1000 B, [2000,2500) 500 B, [3500,10000): 400 B goes to the 500 B one.
        assert_eq!(level.choose(400, 1), Some(2000));
        assert_eq!(level.hand_over(0, 600, 7, 8), Some(1000));
        assert_eq!(level.spans[0].block, 7);
        assert_eq!((level.spans[1].start, level.spans[1].block), (1600, 0));
        level.release(4);
        assert_eq!(level.spans.len(), 1);
    }
}
