//! Rectangles over the two split axes (H and W) of an NCHW tensor.

use serde::{Deserialize, Serialize};

/// A half-open range `[start, end)` of rows or columns; may reach outside the tensor (into the
/// padding) before it is clipped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Span {
    /// First index.
    pub start: i64,
    /// One past the last index.
    pub end: i64,
}

impl Span {
    /// The span `[start, end)`.
    pub fn new(start: i64, end: i64) -> Span {
        Span { start, end }
    }

    /// Number of indices.
    pub fn len(self) -> i64 {
        (self.end - self.start).max(0)
    }

    /// True when it holds no index.
    pub fn is_empty(self) -> bool {
        self.len() == 0
    }

    /// The smallest span holding both.
    pub fn hull(self, other: Span) -> Span {
        Span::new(self.start.min(other.start), self.end.max(other.end))
    }

    /// The part inside `[0, size)`.
    pub fn clip(self, size: i64) -> Span {
        Span::new(self.start.clamp(0, size), self.end.clamp(0, size))
    }

    /// `n` near-equal consecutive parts of `[0, size)` (the first ones one longer).
    pub fn parts(size: i64, n: i64) -> Vec<Span> {
        let (base, extra) = (size / n, size % n);
        let mut start = 0;
        (0..n)
            .map(|i| {
                let end = start + base + i64::from(i < extra);
                let span = Span::new(start, end);
                start = end;
                span
            })
            .collect()
    }
}

/// A rectangle: rows (axis 2) and columns (axis 3).
pub type Region = [Span; 2];

/// The smallest region holding both.
pub fn hull(a: Region, b: Region) -> Region {
    [a[0].hull(b[0]), a[1].hull(b[1])]
}

/// Number of positions in the region.
pub fn area(r: Region) -> i64 {
    r[0].len() * r[1].len()
}

/// The whole `[0, h) × [0, w)`.
pub fn full(h: i64, w: i64) -> Region {
    [Span::new(0, h), Span::new(0, w)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_cover_the_axis_in_order() {
        // 7 rows in 3 parts, worked by hand: 3 + 2 + 2.
        assert_eq!(
            Span::parts(7, 3),
            vec![Span::new(0, 3), Span::new(3, 5), Span::new(5, 7)]
        );
    }

    #[test]
    fn clip_and_hull() {
        assert_eq!(Span::new(-2, 9).clip(8), Span::new(0, 8));
        assert_eq!(Span::new(1, 3).hull(Span::new(5, 6)), Span::new(1, 6));
        assert_eq!(area([Span::new(0, 2), Span::new(1, 4)]), 6);
    }
}
