//! Strided views: the layout arithmetic of a tensor whose elements sit at byte strides inside
//! a larger tensor (an H or W tile inside the NCHW tensor that a Concat assembles).

/// Row-major byte strides of a tensor of `shape` with `elem` bytes per element.
pub fn row_major(shape: &[i64], elem: u64) -> Vec<u64> {
    let mut strides = vec![elem; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        strides[i] = strides[i + 1] * shape[i + 1].max(0) as u64;
    }
    strides
}

/// Bytes from a view's first element to the end of its last: its footprint (0 when empty).
pub fn footprint(shape: &[i64], strides: &[u64], elem: u64) -> u64 {
    if shape.iter().any(|&d| d <= 0) {
        return 0;
    }
    shape
        .iter()
        .zip(strides)
        .map(|(&d, &s)| (d as u64 - 1) * s)
        .sum::<u64>()
        + elem
}

/// The index (per axis) at which a view of `shape` starts inside a row-major tensor of
/// `whole` dimensions, from its byte `offset` and the whole's row-major `strides`; `None`
/// when the offset is not an element boundary or the view would reach past the whole.
pub fn index_of(offset: u64, strides: &[u64], whole: &[i64], shape: &[i64]) -> Option<Vec<i64>> {
    let mut rest = offset;
    let mut index = Vec::with_capacity(strides.len());
    for ((&s, &w), &d) in strides.iter().zip(whole).zip(shape) {
        let i = i64::try_from(rest / s.max(1)).ok()?;
        rest %= s.max(1);
        if i + d > w {
            return None;
        }
        index.push(i);
    }
    (rest == 0 && index.len() == whole.len()).then_some(index)
}

/// The byte offset of `index` under `strides`.
pub fn offset_of(index: &[i64], strides: &[u64]) -> u64 {
    index.iter().zip(strides).map(|(&i, &s)| i as u64 * s).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Worked by hand: a float32 1×2×4×6 tensor has row-major strides 192, 96, 24, 4; its
    /// W tile 3..6 of all rows (shape 1×2×4×3) starts 12 bytes in and reaches to the end of
    /// the whole's last element.
    #[test]
    fn tile_layout_worked_by_hand() {
        let whole = [1, 2, 4, 6];
        let strides = row_major(&whole, 4);
        assert_eq!(strides, vec![192, 96, 24, 4]);
        let tile = [1, 2, 4, 3];
        assert_eq!(offset_of(&[0, 0, 0, 3], &strides), 12);
        // Footprint: 96 (second channel) + 3·24 (last row) + 2·4 (last column) + 4 = 180,
        // so it ends at 12 + 180 = 192, the whole's last byte.
        assert_eq!(footprint(&tile, &strides, 4), 180);
        assert_eq!(
            index_of(12, &strides, &whole, &tile),
            Some(vec![0, 0, 0, 3])
        );
        // Starting at column 4 the tile would reach past the last column.
        assert_eq!(index_of(16, &strides, &whole, &tile), None);
        assert_eq!(index_of(2, &strides, &whole, &tile), None);
    }
}
