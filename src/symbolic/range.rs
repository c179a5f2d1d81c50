//! Integer ranges of symbols: bounds of expressions over a box of values, monotonicity, and
//! enumeration of every point of a small box.

use std::collections::BTreeMap;

use super::expr::{Atom, Expr};

/// Each symbol's inclusive integer range `lo..=hi` (`lo ≥ 0`).
pub type Ranges = BTreeMap<String, (i64, i64)>;

/// The value of `expr` with every symbol at its lower (`upper == false`) or upper end; a
/// symbol without a range is taken as `0..=∞` (a size), so it has no upper end.
pub fn at_corner(expr: &Expr, ranges: &Ranges, upper: bool) -> Option<i64> {
    expr.eval(&|s| match ranges.get(s) {
        Some(&(lo, hi)) => Some(if upper { hi } else { lo }),
        None => (!upper).then_some(0),
    })
}

/// True when `expr` provably never decreases as any symbol grows within `ranges` (a symbol
/// without a range ranges over every size): every non-constant term has a positive
/// coefficient, every floor quotient is of such an expression, and in a product of several
/// atoms every atom is non-negative at the lower corner (hence everywhere, being monotone).
pub fn is_monotone(expr: &Expr, ranges: &Ranges) -> bool {
    expr.terms().all(|(m, c)| {
        m.is_empty()
            || (c > 0
                && m.iter().all(|atom| {
                    let monotone = match atom {
                        Atom::Symbol(_) => true,
                        Atom::FloorDiv(inner, _) => is_monotone(inner, ranges),
                    };
                    monotone
                        && (m.len() == 1
                            || at_corner(&atom_expr(atom), ranges, false).is_some_and(|v| v >= 0))
                }))
    })
}

/// A proven lower bound of `expr` over `ranges` (its minimum when it is monotone either way).
pub fn min_value(expr: &Expr, ranges: &Ranges) -> Option<i64> {
    if is_monotone(expr, ranges) {
        at_corner(expr, ranges, false)
    } else if is_monotone(&expr.scale(-1)?, ranges) {
        at_corner(expr, ranges, true)
    } else {
        None
    }
}

/// A proven upper bound of `expr` over `ranges` (its maximum when it is monotone either way).
pub fn max_value(expr: &Expr, ranges: &Ranges) -> Option<i64> {
    min_value(&expr.scale(-1)?, ranges)?.checked_neg()
}

fn atom_expr(atom: &Atom) -> Expr {
    match atom {
        Atom::Symbol(s) => Expr::symbol(s),
        Atom::FloorDiv(inner, d) => inner.floor_div(*d).unwrap_or_default(),
    }
}

/// Number of points in the box (saturating).
pub fn point_count(ranges: &Ranges) -> u128 {
    ranges.values().fold(1u128, |n, &(lo, hi)| {
        n.saturating_mul(u128::try_from(hi - lo + 1).unwrap_or(0))
    })
}

/// Every point of the box, the last symbol varying fastest; call only on small boxes.
pub fn points(ranges: &Ranges) -> Vec<BTreeMap<String, i64>> {
    let mut out = vec![BTreeMap::new()];
    for (name, &(lo, hi)) in ranges {
        out = out
            .into_iter()
            .flat_map(|p| {
                (lo..=hi).map(move |v| {
                    let mut p = p.clone();
                    p.insert(name.clone(), v);
                    p
                })
            })
            .collect();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn box1(name: &str, lo: i64, hi: i64) -> Ranges {
        Ranges::from([(name.to_string(), (lo, hi))])
    }

    #[test]
    fn monotone_checks_signs_and_products() {
        let n = Expr::symbol("n");
        let r = box1("n", 1, 64);
        assert!(is_monotone(
            &n.scale(4).unwrap().add(&Expr::constant(-7)).unwrap(),
            &r
        ));
        assert!(!is_monotone(&n.mul(&n).unwrap().sub(&n).unwrap(), &r));
        // (n - 5)//2 = (n + 1)//2 - 3 is negative at n = 1: its square is refused (the
        // normal form's expansion has a negative term).
        let q = n.add(&Expr::constant(-5)).unwrap().floor_div(2).unwrap();
        assert!(is_monotone(&q, &r));
        assert!(!is_monotone(&q.mul(&q).unwrap(), &r));
        // (n + 1)//2 is non-negative everywhere, so its square is monotone.
        let h = n.add(&Expr::constant(1)).unwrap().floor_div(2).unwrap();
        assert!(is_monotone(&h.mul(&h).unwrap(), &r));
        // A symbol with no range is any size: monotone, bounded below by 0, not above.
        let m = Expr::symbol("m");
        assert!(is_monotone(&m, &r));
        assert_eq!(min_value(&m, &r), Some(0));
        assert_eq!(max_value(&m, &r), None);
        // 128 - n over 1..64 lies in 64..127.
        let rest = Expr::constant(128).sub(&n).unwrap();
        assert_eq!(
            (min_value(&rest, &r), max_value(&rest, &r)),
            (Some(64), Some(127))
        );
    }

    #[test]
    fn points_enumerate_the_box() {
        let mut r = box1("a", 1, 3);
        r.insert("b".into(), (0, 1));
        assert_eq!(point_count(&r), 6);
        let p = points(&r);
        assert_eq!(p.len(), 6);
        assert_eq!(p[1], BTreeMap::from([("a".into(), 1), ("b".into(), 1)]));
    }
}
