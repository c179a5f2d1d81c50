//! Strided views (a tile's result written straight into the tensor a Concat assembles): the
//! layout facts the claims and the overlap check need, derived from the table entry alone.

use crate::emit::TensorEntry;

/// Bytes per element of an entry (`bytes` over its element count), when both are known.
fn elem_bytes(entry: &TensorEntry) -> Option<u64> {
    let count: i64 = entry.shape.as_ref()?.iter().product();
    let count = u64::try_from(count).ok().filter(|&c| c > 0)?;
    let bytes = entry.bytes?;
    bytes.is_multiple_of(count).then_some(bytes / count)
}

/// The byte strides an entry is laid out with: its `strides`, else row-major.
pub fn layout(entry: &TensorEntry) -> Option<Vec<u64>> {
    if let Some(s) = &entry.strides {
        return Some(s.clone());
    }
    let shape = entry.shape.as_ref()?;
    let mut strides = vec![elem_bytes(entry)?; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        strides[i] = strides[i + 1].checked_mul(u64::try_from(shape[i + 1]).ok()?)?;
    }
    Some(strides)
}

/// Bytes from the entry's first element to the end of its last (its `bytes` when row-major).
pub fn span(entry: &TensorEntry) -> u64 {
    let Some(strides) = &entry.strides else {
        return entry.extent();
    };
    let (Some(shape), Some(elem)) = (&entry.shape, elem_bytes(entry)) else {
        return entry.bytes.unwrap_or(0);
    };
    shape
        .iter()
        .zip(strides)
        .map(|(&d, &s)| (d.max(1) as u64 - 1).saturating_mul(s))
        .fold(elem, u64::saturating_add)
}

/// Problems with an entry's `strides` themselves: one per axis, the element size dividing
/// the offset, and no two elements at the same byte (strides, sorted, each at least the
/// span of the axes inside it).
pub fn check_strides(entry: &TensorEntry) -> Option<String> {
    let strides = entry.strides.as_ref()?;
    let (Some(shape), Some(elem)) = (&entry.shape, elem_bytes(entry)) else {
        return Some("strides need a known shape and size".into());
    };
    if strides.len() != shape.len() {
        return Some(format!(
            "{} strides for {} axes",
            strides.len(),
            shape.len()
        ));
    }
    if entry.offset.is_some_and(|o| !o.is_multiple_of(elem)) {
        return Some(format!(
            "offset is not a multiple of its {elem}-byte elements"
        ));
    }
    let mut axes: Vec<(u64, i64)> = strides.iter().copied().zip(shape.iter().copied()).collect();
    axes.sort_unstable();
    let mut reach = elem;
    for (stride, dim) in axes.into_iter().filter(|&(_, d)| d > 1) {
        if stride < reach {
            return Some("strides make elements share bytes".into());
        }
        reach = stride.saturating_mul(dim as u64);
    }
    None
}

/// The byte ranges `[start, end)` an entry placed at `offset` writes, merged where they
/// touch: one range for a row-major entry, one per row of the innermost axis for a view.
pub fn byte_ranges(entry: &TensorEntry, offset: u64) -> Vec<(u64, u64)> {
    let (Some(strides), Some(shape), Some(elem)) =
        (&entry.strides, &entry.shape, elem_bytes(entry))
    else {
        return vec![(offset, offset.saturating_add(entry.extent()))];
    };
    let Some((&inner, outer)) = shape.split_last() else {
        return vec![(offset, offset.saturating_add(elem))];
    };
    let row = if strides[shape.len() - 1] == elem {
        (inner.max(0) as u64 * elem, 1)
    } else {
        (elem, inner.max(0) as u64)
    };
    let mut ranges = Vec::new();
    let mut index = vec![0i64; outer.len()];
    if shape.iter().any(|&d| d <= 0) {
        return ranges;
    }
    loop {
        let base = index
            .iter()
            .zip(strides)
            .map(|(&i, &s)| (i as u64).saturating_mul(s))
            .fold(offset, u64::saturating_add);
        for k in 0..row.1 {
            let start = base.saturating_add(k.saturating_mul(strides[shape.len() - 1]));
            ranges.push((start, start.saturating_add(row.0)));
        }
        let mut axis = outer.len();
        loop {
            if axis == 0 {
                ranges.sort_unstable();
                return merge(ranges);
            }
            axis -= 1;
            index[axis] += 1;
            if index[axis] < outer[axis] {
                break;
            }
            index[axis] = 0;
        }
    }
}

fn merge(ranges: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(ranges.len());
    for (s, e) in ranges {
        match out.last_mut() {
            Some(last) if last.1 >= s => last.1 = last.1.max(e),
            _ => out.push((s, e)),
        }
    }
    out
}

/// True when two sorted, merged lists of byte ranges share a byte.
pub fn intersect(a: &[(u64, u64)], b: &[(u64, u64)]) -> bool {
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        if a[i].0 < b[j].1 && b[j].0 < a[i].1 {
            return true;
        }
        if a[i].1 <= b[j].1 {
            i += 1;
        } else {
            j += 1;
        }
    }
    false
}
