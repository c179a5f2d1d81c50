//! Arithmetic on dimensions and shapes. Known and symbolic dimensions combine into symbolic
//! expressions ([`crate::symbolic::Expr`]); anything involving an unknown dimension (or an
//! overflow) is unknown, except the identities `d·1`, `d+0` and `d·0`.

use crate::ir::Dim;
use crate::symbolic::Expr;

/// Normalises a possibly negative axis into `0..rank`.
pub fn normalize_axis(axis: i64, rank: usize) -> Option<usize> {
    let r = rank as i64;
    let a = if axis < 0 { axis + r } else { axis };
    (0..r).contains(&a).then_some(a as usize)
}

/// Combines two dimensions through their expressions; `Unknown` when either is unknown or
/// `f` fails.
fn combine(a: &Dim, b: &Dim, f: impl Fn(&Expr, &Expr) -> Option<Expr>) -> Dim {
    match (a.expr(), b.expr()) {
        (Some(x), Some(y)) => f(&x, &y).map_or(Dim::Unknown, Dim::from_expr),
        _ => Dim::Unknown,
    }
}

/// `a + b`.
pub fn add(a: &Dim, b: &Dim) -> Dim {
    match (a, b) {
        (d, Dim::Known(0)) | (Dim::Known(0), d) => d.clone(),
        _ => combine(a, b, Expr::add),
    }
}

/// `a - b`.
pub fn sub(a: &Dim, b: &Dim) -> Dim {
    match (a, b) {
        (d, Dim::Known(0)) => d.clone(),
        _ => combine(a, b, Expr::sub),
    }
}

/// `a · b`.
pub fn mul(a: &Dim, b: &Dim) -> Dim {
    match (a, b) {
        (d, Dim::Known(1)) | (Dim::Known(1), d) => d.clone(),
        (_, Dim::Known(0)) | (Dim::Known(0), _) => Dim::Known(0),
        _ => combine(a, b, Expr::mul),
    }
}

/// `floor(a / k)` for a positive constant `k`.
pub fn floor_div(a: &Dim, k: i64) -> Dim {
    match a {
        Dim::Known(v) if k > 0 => Dim::Known(v.div_euclid(k)),
        d if k == 1 => d.clone(),
        _ => combine(a, &Dim::Known(k), |x, _| x.floor_div(k)),
    }
}

/// `a / b` when it divides exactly (`768·n / 12 = 64·n`); `Unknown` otherwise.
pub fn div_exact(a: &Dim, b: &Dim) -> Dim {
    match (a, b) {
        (Dim::Known(x), Dim::Known(y)) if *y != 0 && x % y == 0 => Dim::Known(x / y),
        (d, Dim::Known(1)) => d.clone(),
        _ => combine(a, b, Expr::div_exact),
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
    let mut symbol: Option<&Dim> = None;
    let mut mixed = false;
    let mut unknown = false;
    for d in dims {
        match d {
            Dim::Known(1) => {}
            Dim::Known(v) => match known {
                Some(k) if k != *v => return None,
                _ => known = Some(*v),
            },
            Dim::Symbol(_) | Dim::Expr(_) => match symbol {
                Some(prev) if prev != d => mixed = true,
                _ => symbol = Some(d),
            },
            Dim::Unknown => unknown = true,
        }
    }
    Some(match (known, symbol) {
        (Some(k), _) => Dim::Known(k),
        (None, Some(s)) if !mixed && !unknown => s.clone(),
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
    fn symbol_arithmetic_forms_expressions() {
        assert_eq!(mul(&sym("n"), &Dim::Known(1)), sym("n"));
        assert_eq!(mul(&sym("n"), &Dim::Known(2)).to_string(), "2*n");
        assert_eq!(add(&sym("n"), &Dim::Known(0)), sym("n"));
        let twice = add(&sym("n"), &sym("n"));
        assert_eq!(div_exact(&twice, &Dim::Known(2)), sym("n"));
        assert_eq!(sub(&twice, &sym("n")), sym("n"));
        assert_eq!(
            floor_div(&add(&sym("n"), &Dim::Known(1)), 2).to_string(),
            "(n + 1)//2"
        );
        assert_eq!(mul(&sym("n"), &Dim::Unknown), Dim::Unknown);
    }
}
