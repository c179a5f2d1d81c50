//! Size expressions: integer-coefficient sums of products of named symbols and of floor
//! quotients of such sums by positive constants, kept in one normal form so that equal
//! expressions compare equal.
//!
//! Normal form:
//! - an [`Expr`] is a map from monomials to non-zero coefficients (the empty monomial is the
//!   constant term);
//! - a monomial is a sorted list of atoms (a symbol, or a floor quotient);
//! - a floor quotient `(P)//d` has `d ≥ 2`, every coefficient of `P` in `0..d`, a non-constant
//!   `P`, and no common factor of `d` and all of `P`'s coefficients (whole multiples of `d`
//!   are moved out, since `(d·Q + R)//d = Q + R//d` for integer `Q`).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// One factor of a monomial.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Atom {
    /// A named symbol (a dynamic dimension such as `sequence`).
    Symbol(String),
    /// `floor(expr / divisor)` with `divisor ≥ 2`, in normal form.
    FloorDiv(Box<Expr>, i64),
}

/// A product of atoms, sorted (the empty product is 1).
pub type Monomial = Vec<Atom>;

/// An integer expression in normal form (see the module documentation).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Expr {
    terms: BTreeMap<Monomial, i64>,
}

impl Expr {
    /// The constant `value`.
    pub fn constant(value: i64) -> Expr {
        let mut terms = BTreeMap::new();
        if value != 0 {
            terms.insert(Vec::new(), value);
        }
        Expr { terms }
    }

    /// The symbol `name`.
    pub fn symbol(name: &str) -> Expr {
        Expr {
            terms: BTreeMap::from([(vec![Atom::Symbol(name.to_string())], 1)]),
        }
    }

    /// The value, when the expression is a constant.
    pub fn as_constant(&self) -> Option<i64> {
        match self.terms.len() {
            0 => Some(0),
            1 => self.terms.get(&Vec::new()).copied(),
            _ => None,
        }
    }

    /// The name, when the expression is exactly one symbol.
    pub fn as_symbol(&self) -> Option<&str> {
        match self.terms.iter().next() {
            Some((m, 1)) if self.terms.len() == 1 && m.len() == 1 => match &m[0] {
                Atom::Symbol(s) => Some(s),
                Atom::FloorDiv(..) => None,
            },
            _ => None,
        }
    }

    /// The terms: each monomial with its non-zero coefficient, the constant term first.
    pub fn terms(&self) -> impl Iterator<Item = (&Monomial, i64)> {
        self.terms.iter().map(|(m, &c)| (m, c))
    }

    /// Every symbol the expression mentions.
    pub fn symbols(&self) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        self.collect_symbols(&mut out);
        out
    }

    fn collect_symbols(&self, out: &mut BTreeSet<String>) {
        for atom in self.terms.keys().flatten() {
            match atom {
                Atom::Symbol(s) => {
                    out.insert(s.clone());
                }
                Atom::FloorDiv(e, _) => e.collect_symbols(out),
            }
        }
    }

    /// `self + other`; `None` on coefficient overflow.
    pub fn add(&self, other: &Expr) -> Option<Expr> {
        let mut terms = self.terms.clone();
        for (m, &c) in &other.terms {
            add_term(&mut terms, m.clone(), c)?;
        }
        Some(Expr { terms })
    }

    /// `self - other`; `None` on coefficient overflow.
    pub fn sub(&self, other: &Expr) -> Option<Expr> {
        self.add(&other.scale(-1)?)
    }

    /// `k · self`; `None` on overflow.
    pub fn scale(&self, k: i64) -> Option<Expr> {
        if k == 0 {
            return Some(Expr::default());
        }
        let terms = self
            .terms
            .iter()
            .map(|(m, &c)| Some((m.clone(), c.checked_mul(k)?)))
            .collect::<Option<_>>()?;
        Some(Expr { terms })
    }

    /// `self · other`; `None` on coefficient overflow.
    pub fn mul(&self, other: &Expr) -> Option<Expr> {
        let mut terms = BTreeMap::new();
        for (a, &x) in &self.terms {
            for (b, &y) in &other.terms {
                let mut m: Monomial = a.iter().chain(b).cloned().collect();
                m.sort();
                add_term(&mut terms, m, x.checked_mul(y)?)?;
            }
        }
        Some(Expr { terms })
    }

    /// `floor(self / d)` for `d ≥ 1`; `None` when `d < 1` or on overflow.
    pub fn floor_div(&self, d: i64) -> Option<Expr> {
        if d < 1 {
            return None;
        }
        if d == 1 {
            return Some(self.clone());
        }
        let mut quotient = BTreeMap::new();
        let mut rest = BTreeMap::new();
        for (m, &c) in &self.terms {
            add_term(&mut quotient, m.clone(), c.div_euclid(d))?;
            add_term(&mut rest, m.clone(), c.rem_euclid(d))?;
        }
        let quotient = Expr { terms: quotient };
        let rest = Expr { terms: rest };
        if rest.as_constant().is_some() {
            // Every coefficient of `rest` is in `0..d`: a constant remainder floors to 0.
            return Some(quotient);
        }
        // `floor((floor(P / a) + r) / b) = floor((P + a·r) / (a·b))` for positive `a`, `b`.
        if let Some((inner, a, r)) = rest.single_quotient() {
            let merged = inner.add(&Expr::constant(a.checked_mul(r)?))?;
            return quotient.add(&merged.floor_div(a.checked_mul(d)?)?);
        }
        let g = rest.terms.values().fold(d, |g, &c| gcd(g, c));
        let (rest, d) = if g > 1 {
            (
                Expr {
                    terms: rest.terms.into_iter().map(|(m, c)| (m, c / g)).collect(),
                },
                d / g,
            )
        } else {
            (rest, d)
        };
        let atom = if d == 1 {
            rest
        } else {
            Expr {
                terms: BTreeMap::from([(vec![Atom::FloorDiv(Box::new(rest), d)], 1)]),
            }
        };
        quotient.add(&atom)
    }

    /// `(P, a, r)` when the expression is `(P)//a + r` for a constant `r`.
    fn single_quotient(&self) -> Option<(&Expr, i64, i64)> {
        let mut r = 0;
        let mut quotient = None;
        for (m, &c) in &self.terms {
            match m.as_slice() {
                [] => r = c,
                [Atom::FloorDiv(inner, a)] if c == 1 && quotient.is_none() => {
                    quotient = Some((inner.as_ref(), *a))
                }
                _ => return None,
            }
        }
        quotient.map(|(inner, a)| (inner, a, r))
    }

    /// `ceil(self / d)` for `d ≥ 1`.
    pub fn ceil_div(&self, d: i64) -> Option<Expr> {
        self.add(&Expr::constant(d.checked_sub(1)?))?.floor_div(d)
    }

    /// `self / other` when the division is exact term by term: `other` a single term whose
    /// atoms divide every monomial of `self` and whose coefficient divides every coefficient,
    /// or `self` a constant multiple of `other`. `None` otherwise.
    pub fn div_exact(&self, other: &Expr) -> Option<Expr> {
        if other.terms.is_empty() {
            return None;
        }
        if self.terms.is_empty() {
            return Some(Expr::default());
        }
        if other.terms.len() == 1 {
            let (den, &k) = other.terms.iter().next().expect("one term");
            let mut terms = BTreeMap::new();
            for (m, &c) in &self.terms {
                if c % k != 0 {
                    return None;
                }
                let mut rest = m.clone();
                for atom in den {
                    let at = rest.iter().position(|a| a == atom)?;
                    rest.remove(at);
                }
                add_term(&mut terms, rest, c / k)?;
            }
            return Some(Expr { terms });
        }
        // A constant multiple: compare the leading terms, then check.
        let (m, &c) = self.terms.iter().next_back().expect("non-empty");
        let k = *other.terms.get(m)?;
        if c % k != 0 {
            return None;
        }
        let q = Expr::constant(c / k);
        (other.mul(&q)? == *self).then_some(q)
    }

    /// The value with every symbol given by `value_of`; `None` when a symbol has no value or
    /// on overflow.
    pub fn eval(&self, value_of: &dyn Fn(&str) -> Option<i64>) -> Option<i64> {
        let mut total: i64 = 0;
        for (m, &c) in &self.terms {
            let mut product = c;
            for atom in m {
                let v = match atom {
                    Atom::Symbol(s) => value_of(s)?,
                    Atom::FloorDiv(e, d) => e.eval(value_of)?.div_euclid(*d),
                };
                product = product.checked_mul(v)?;
            }
            total = total.checked_add(product)?;
        }
        Some(total)
    }

    /// The expression with the symbols `replacement_of` knows replaced by its expressions
    /// (once: a replacement is not itself rewritten); `None` on overflow.
    pub fn replace(&self, replacement_of: &dyn Fn(&str) -> Option<Expr>) -> Option<Expr> {
        let mut out = Expr::default();
        for (m, &c) in &self.terms {
            let mut product = Expr::constant(c);
            for atom in m {
                let factor = match atom {
                    Atom::Symbol(s) => replacement_of(s).unwrap_or_else(|| Expr::symbol(s)),
                    Atom::FloorDiv(e, d) => e.replace(replacement_of)?.floor_div(*d)?,
                };
                product = product.mul(&factor)?;
            }
            out = out.add(&product)?;
        }
        Some(out)
    }

    /// The expression with the symbols `value_of` knows replaced by their values.
    pub fn substitute(&self, value_of: &dyn Fn(&str) -> Option<i64>) -> Option<Expr> {
        let mut out = Expr::default();
        for (m, &c) in &self.terms {
            let mut product = Expr::constant(c);
            for atom in m {
                let factor = match atom {
                    Atom::Symbol(s) => value_of(s).map_or_else(|| Expr::symbol(s), Expr::constant),
                    Atom::FloorDiv(e, d) => e.substitute(value_of)?.floor_div(*d)?,
                };
                product = product.mul(&factor)?;
            }
            out = out.add(&product)?;
        }
        Some(out)
    }
}

/// Adds `c · m` into `terms`, dropping a coefficient that becomes zero.
fn add_term(terms: &mut BTreeMap<Monomial, i64>, m: Monomial, c: i64) -> Option<()> {
    if c == 0 {
        return Some(());
    }
    let entry = terms.entry(m).or_insert(0);
    *entry = entry.checked_add(c)?;
    if *entry == 0 {
        terms.retain(|_, c| *c != 0);
    }
    Some(())
}

fn gcd(a: i64, b: i64) -> i64 {
    let (mut a, mut b) = (a.unsigned_abs(), b.unsigned_abs());
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a as i64
}

/// Writes the expression in the table grammar (docs/format.md, "Size expressions"): terms
/// joined by ` + ` and ` - `, constant last, each term `coefficient*atom*atom`, a quotient
/// `(P)//d`, bracketed `((P)//d)` inside a product.
impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.terms.is_empty() {
            return f.write_str("0");
        }
        let constant = self.terms.get(&Vec::new()).copied();
        let ordered = self
            .terms
            .iter()
            .filter(|(m, _)| !m.is_empty())
            .map(|(m, &c)| (Some(m), c))
            .chain(constant.map(|c| (None, c)));
        for (i, (m, c)) in ordered.enumerate() {
            let magnitude = c.unsigned_abs();
            match (i, c < 0) {
                (0, true) => f.write_str("-")?,
                (0, false) => {}
                (_, true) => f.write_str(" - ")?,
                (_, false) => f.write_str(" + ")?,
            }
            let Some(m) = m else {
                write!(f, "{magnitude}")?;
                continue;
            };
            if magnitude != 1 {
                write!(f, "{magnitude}*")?;
            }
            for (j, atom) in m.iter().enumerate() {
                if j > 0 {
                    f.write_str("*")?;
                }
                match atom {
                    Atom::Symbol(s) => f.write_str(s)?,
                    // In a product a quotient is bracketed: `3*((H + 1)//2)*W`, since
                    // `3*(H + 1)//2*W` would read as `(3*(H + 1))//2*W`.
                    Atom::FloorDiv(e, d) if m.len() > 1 || magnitude != 1 => {
                        write!(f, "(({e})//{d})")?
                    }
                    Atom::FloorDiv(e, d) => write!(f, "({e})//{d}")?,
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(name: &str) -> Expr {
        Expr::symbol(name)
    }

    fn c(v: i64) -> Expr {
        Expr::constant(v)
    }

    #[test]
    fn normal_form_makes_equal_expressions_equal() {
        // (a + b)·(a + b) = a·a + 2·a·b + b·b, in any order of construction.
        let ab = s("a").add(&s("b")).unwrap();
        let square = ab.mul(&ab).unwrap();
        let expanded = s("a")
            .mul(&s("a"))
            .unwrap()
            .add(&s("b").mul(&s("b")).unwrap())
            .unwrap()
            .add(&s("b").mul(&s("a")).unwrap().scale(2).unwrap())
            .unwrap();
        assert_eq!(square, expanded);
        assert_eq!(square.to_string(), "a*a + 2*a*b + b*b");
        assert_eq!(ab.sub(&ab).unwrap(), c(0));
    }

    #[test]
    fn floor_division_simplifies_by_hand_rules() {
        // (4·768·n + 63)//64 = 48·n: 3072 = 48·64 and 63//64 = 0.
        let bytes = s("n").scale(3072).unwrap().add(&c(63)).unwrap();
        assert_eq!(bytes.floor_div(64).unwrap(), s("n").scale(48).unwrap());
        // A 3×3 stride-2 conv with pad 1: (H + 2 - 3)//2 + 1 = (H + 1)//2 after moving
        // (H - 1) = (H + 1) - 2 out: (H - 1)//2 + 1 = (H + 1)//2.
        let h = s("H");
        let out = h
            .add(&c(-1))
            .unwrap()
            .floor_div(2)
            .unwrap()
            .add(&c(1))
            .unwrap();
        assert_eq!(out.to_string(), "(H + 1)//2");
        // Nested quotients merge: ((H + 1)//2 + 1)//2 = (H + 3)//4.
        let twice = out.add(&c(1)).unwrap().floor_div(2).unwrap();
        assert_eq!(twice.to_string(), "(H + 3)//4");
        // A common factor cancels: (2H + 2)//4 = (H + 1)//2.
        let even = h
            .scale(2)
            .unwrap()
            .add(&c(2))
            .unwrap()
            .floor_div(4)
            .unwrap();
        assert_eq!(even, out);
    }

    #[test]
    fn evaluation_matches_integer_arithmetic_at_every_point() {
        let h = s("H");
        let e = h
            .add(&c(-1))
            .unwrap()
            .floor_div(2)
            .unwrap()
            .add(&c(1))
            .unwrap();
        let e = e
            .add(&c(1))
            .unwrap()
            .floor_div(2)
            .unwrap()
            .mul(&s("W"))
            .unwrap();
        for hv in 1..40i64 {
            for wv in 1..5i64 {
                let get = |n: &str| Some(if n == "H" { hv } else { wv });
                let first = (hv - 1).div_euclid(2) + 1;
                let want = (first + 1).div_euclid(2) * wv;
                assert_eq!(e.eval(&get), Some(want), "H={hv} W={wv}");
            }
        }
    }

    #[test]
    fn exact_division_cancels_factors() {
        let bsh = s("b").mul(&s("s")).unwrap().scale(768).unwrap();
        let bs12 = s("b").mul(&s("s")).unwrap().scale(12).unwrap();
        assert_eq!(bsh.div_exact(&bs12), Some(c(64)));
        assert_eq!(bsh.div_exact(&s("s").scale(7).unwrap()), None);
        let sum = s("a").add(&c(1)).unwrap();
        assert_eq!(sum.scale(3).unwrap().div_exact(&sum), Some(c(3)));
    }
}
