//! Arithmetic on dimensions and shapes. Arithmetic involving a symbol yields `Unknown`, except
//! for identities (`n·1`, `n+0`, `n/1`), which keep the symbol.

use crate::ir::Dim;

/// Normalises a possibly negative axis into `0..rank`.
pub fn normalize_axis(axis: i64, rank: usize) -> Option<usize> {
    let r = rank as i64;
    let a = if axis < 0 { axis + r } else { axis };
    (0..r).contains(&a).then_some(a as usize)
}

/// `a + b`.
pub fn add(a: &Dim, b: &Dim) -> Dim {
    match (a, b) {
        (Dim::Known(x), Dim::Known(y)) => x.checked_add(*y).map_or(Dim::Unknown, Dim::Known),
        (d, Dim::Known(0)) | (Dim::Known(0), d) => d.clone(),
        _ => Dim::Unknown,
    }
}

/// `a · b`.
pub fn mul(a: &Dim, b: &Dim) -> Dim {
    match (a, b) {
        (Dim::Known(x), Dim::Known(y)) => x.checked_mul(*y).map_or(Dim::Unknown, Dim::Known),
        (d, Dim::Known(1)) | (Dim::Known(1), d) => d.clone(),
        (_, Dim::Known(0)) | (Dim::Known(0), _) => Dim::Known(0),
        _ => Dim::Unknown,
    }
}

/// The number of elements of a concrete shape, `None` on overflow.
pub fn element_count(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d))
}

/// The product of a shape's dimensions.
pub fn product<'a>(dims: impl IntoIterator<Item = &'a Dim>) -> Dim {
    dims.into_iter().fold(Dim::Known(1), |acc, d| mul(&acc, d))
}

/// The known sizes of a shape, when every one is known.
pub fn known(dims: &[Dim]) -> Option<Vec<i64>> {
    crate::ir::concrete(dims)
}

/// Multidirectional (numpy) broadcasting of several shapes.
pub fn broadcast(shapes: &[&[Dim]]) -> Result<Vec<Dim>, String> {
    let rank = shapes.iter().map(|s| s.len()).max().unwrap_or(0);
    let mut out = Vec::with_capacity(rank);
    for axis in 0..rank {
        let dims = shapes.iter().filter_map(|s| {
            let offset = rank - s.len();
            (axis >= offset).then(|| &s[axis - offset])
        });
        out.push(broadcast_dims(dims).ok_or_else(|| {
            let text: Vec<String> = shapes.iter().map(|s| crate::ir::format_shape(s)).collect();
            format!("shapes {} cannot be broadcast", text.join(", "))
        })?);
    }
    Ok(out)
}

/// The broadcast of the dimensions meeting at one axis; `None` when they conflict.
fn broadcast_dims<'a>(dims: impl Iterator<Item = &'a Dim>) -> Option<Dim> {
    let mut known: Option<i64> = None;
    let mut symbol: Option<&String> = None;
    let mut mixed = false;
    let mut unknown = false;
    for d in dims {
        match d {
            Dim::Known(1) => {}
            Dim::Known(v) => match known {
                Some(k) if k != *v => return None,
                _ => known = Some(*v),
            },
            Dim::Symbol(s) => match symbol {
                Some(prev) if prev != s => mixed = true,
                _ => symbol = Some(s),
            },
            Dim::Unknown => unknown = true,
        }
    }
    Some(match (known, symbol) {
        (Some(k), _) => Dim::Known(k),
        (None, Some(s)) if !mixed && !unknown => Dim::Symbol(s.clone()),
        (None, None) if !unknown => Dim::Known(1),
        _ => Dim::Unknown,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::known_shape;

    fn sym(s: &str) -> Dim {
        Dim::Symbol(s.into())
    }

    #[test]
    fn broadcasts_known_and_symbolic() {
        let a = vec![sym("n"), Dim::Known(1), Dim::Known(4)];
        let b = known_shape(&[3, 1]);
        assert_eq!(
            broadcast(&[&a, &b]).unwrap(),
            vec![sym("n"), Dim::Known(3), Dim::Known(4)]
        );
        assert_eq!(
            broadcast(&[&[sym("n")], &[sym("m")]]).unwrap(),
            vec![Dim::Unknown]
        );
        assert!(broadcast(&[&known_shape(&[2]), &known_shape(&[3])]).is_err());
    }

    #[test]
    fn symbol_arithmetic_keeps_identities_only() {
        assert_eq!(mul(&sym("n"), &Dim::Known(1)), sym("n"));
        assert_eq!(mul(&sym("n"), &Dim::Known(2)), Dim::Unknown);
        assert_eq!(add(&sym("n"), &Dim::Known(0)), sym("n"));
    }
}
