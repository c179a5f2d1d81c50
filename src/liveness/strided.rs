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

/// Where a view of `shape` that starts `offset` bytes into a row-major tensor of `whole`
/// dimensions (row-major byte `inner` strides) starts under byte `strides` instead: the index
/// per axis its offset stands for, weighed by `strides`. `None` when the offset is not an
/// element boundary or the view would reach past the whole.
pub fn restrided(
    offset: u64,
    inner: &[u64],
    whole: &[i64],
    shape: &[i64],
    strides: &[u64],
) -> Option<u64> {
    if inner.len() != whole.len() || shape.len() != whole.len() || strides.len() != whole.len() {
        return None;
    }
    let mut rest = offset;
    let mut at = 0u64;
    for (((&s, &w), &d), &to) in inner.iter().zip(whole).zip(shape).zip(strides) {
        let i = i64::try_from(rest / s.max(1)).ok()?;
        rest %= s.max(1);
        if i + d > w {
            return None;
        }
        at += i as u64 * to;
    }
    (rest == 0).then_some(at)
}

/// Whether `strides` are the row-major byte strides of `shape` with `elem`-byte elements.
pub fn is_row_major(strides: &[u64], shape: &[i64], elem: u64) -> bool {
    let mut expected = elem;
    strides.len() == shape.len()
        && strides.iter().zip(shape).rev().all(|(&s, &d)| {
            let ok = s == expected;
            expected = expected.saturating_mul(d.max(0) as u64);
            ok
        })
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
        // Footprint: 96 (second channel) + 3·24 (last row) + 2·4 (last column) + 4 = 180,
        // so it ends at 12 + 180 = 192, the whole's last byte.
        assert_eq!(footprint(&tile, &strides, 4), 180);
        // Its start, index (0, 0, 0, 3), under the strides of a 1×2×4×10 whole (320, 160,
        // 40, 4) is 3·4 = 12 bytes in; a view starting at index (0, 1, 1, 0), 96 + 24 = 120
        // bytes into the 1×2×4×6 whole, starts 160 + 40 = 200 bytes into the wider one.
        let wider = row_major(&[1, 2, 4, 10], 4);
        assert_eq!(wider, vec![320, 160, 40, 4]);
        assert_eq!(restrided(12, &strides, &whole, &tile, &wider), Some(12));
        let rows = [1, 1, 3, 6];
        assert_eq!(restrided(120, &strides, &whole, &rows, &wider), Some(200));
        // Starting at column 4 the tile would reach past the last column; 2 bytes in is
        // inside an element.
        assert_eq!(restrided(16, &strides, &whole, &tile, &wider), None);
        assert_eq!(restrided(2, &strides, &whole, &tile, &wider), None);
        assert!(is_row_major(&strides, &whole, 4));
        assert!(!is_row_major(&wider, &whole, 4));
    }
}
