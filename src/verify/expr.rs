//! The verifier's own reading of the table's expressions (grammar in docs/format.md, "Size
//! expressions"): a parser, an evaluator, a polynomial normal form to compare sizes, and a
//! monotonicity test. Written apart from `src/symbolic` on purpose: the verifier must not
//! trust the code that produced the expressions.

use std::collections::{BTreeMap, BTreeSet};

/// A parsed expression.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ast {
    /// An integer.
    Num(i128),
    /// A symbol's value.
    Sym(String),
    /// `$k`: the end of tensor `k`'s buffer (its offset plus its bytes rounded up to the
    /// alignment).
    End(usize),
    /// `a + b`.
    Add(Box<Ast>, Box<Ast>),
    /// `a - b`.
    Sub(Box<Ast>, Box<Ast>),
    /// `a * b`.
    Mul(Box<Ast>, Box<Ast>),
    /// `floor(a / b)`, `b > 0`.
    Div(Box<Ast>, Box<Ast>),
    /// `max(a, b, ...)`.
    Max(Vec<Ast>),
}

/// Parses `text`; the message says where it stopped.
pub fn parse(text: &str) -> Result<Ast, String> {
    let mut p = Parser {
        s: text.as_bytes(),
        at: 0,
    };
    let ast = p.sum()?;
    p.space();
    if p.at != p.s.len() {
        return Err(format!("'{text}': unexpected text at byte {}", p.at));
    }
    Ok(ast)
}

struct Parser<'a> {
    s: &'a [u8],
    at: usize,
}

impl Parser<'_> {
    fn space(&mut self) {
        while self.s.get(self.at).is_some_and(u8::is_ascii_whitespace) {
            self.at += 1;
        }
    }

    fn eat(&mut self, token: &str) -> bool {
        self.space();
        if self.s[self.at..].starts_with(token.as_bytes()) {
            self.at += token.len();
            true
        } else {
            false
        }
    }

    fn error(&self, what: &str) -> String {
        format!(
            "'{}': expected {what} at byte {}",
            String::from_utf8_lossy(self.s),
            self.at
        )
    }

    fn sum(&mut self) -> Result<Ast, String> {
        let mut left = if self.eat("-") {
            Ast::Sub(Box::new(Ast::Num(0)), Box::new(self.product()?))
        } else {
            self.product()?
        };
        loop {
            if self.eat("+") {
                left = Ast::Add(Box::new(left), Box::new(self.product()?));
            } else if self.eat("-") {
                left = Ast::Sub(Box::new(left), Box::new(self.product()?));
            } else {
                return Ok(left);
            }
        }
    }

    fn product(&mut self) -> Result<Ast, String> {
        let mut left = self.factor()?;
        loop {
            if self.eat("//") {
                left = Ast::Div(Box::new(left), Box::new(self.factor()?));
            } else if self.eat("*") {
                left = Ast::Mul(Box::new(left), Box::new(self.factor()?));
            } else {
                return Ok(left);
            }
        }
    }

    fn digits(&mut self) -> Option<i128> {
        let start = self.at;
        while self.s.get(self.at).is_some_and(u8::is_ascii_digit) {
            self.at += 1;
        }
        std::str::from_utf8(&self.s[start..self.at])
            .ok()?
            .parse()
            .ok()
    }

    fn factor(&mut self) -> Result<Ast, String> {
        if self.eat("(") {
            let inner = self.sum()?;
            return if self.eat(")") {
                Ok(inner)
            } else {
                Err(self.error("')'"))
            };
        }
        if self.eat("$") {
            let k = self.digits().ok_or_else(|| self.error("a tensor index"))?;
            return usize::try_from(k)
                .map(Ast::End)
                .map_err(|_| self.error("a tensor index"));
        }
        self.space();
        match self.s.get(self.at) {
            Some(c) if c.is_ascii_digit() => self
                .digits()
                .map(Ast::Num)
                .ok_or_else(|| self.error("a number")),
            Some(c) if c.is_ascii_alphabetic() || *c == b'_' => {
                let start = self.at;
                while self
                    .s
                    .get(self.at)
                    .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_')
                {
                    self.at += 1;
                }
                let name = String::from_utf8_lossy(&self.s[start..self.at]).into_owned();
                if name == "max" && self.eat("(") {
                    let mut args = vec![self.sum()?];
                    while self.eat(",") {
                        args.push(self.sum()?);
                    }
                    if !self.eat(")") {
                        return Err(self.error("')'"));
                    }
                    return Ok(Ast::Max(args));
                }
                Ok(Ast::Sym(name))
            }
            _ => Err(self.error("a number, a symbol, '$', 'max(' or '('")),
        }
    }
}

impl Ast {
    /// The value with symbols from `point` and `$k` from `end`; `None` on a missing value,
    /// a division by a non-positive number or overflow.
    pub fn eval(
        &self,
        point: &BTreeMap<String, i128>,
        end: &mut impl FnMut(usize) -> Option<i128>,
    ) -> Option<i128> {
        Some(match self {
            Ast::Num(v) => *v,
            Ast::Sym(s) => *point.get(s)?,
            Ast::End(k) => end(*k)?,
            Ast::Add(a, b) => a.eval(point, end)?.checked_add(b.eval(point, end)?)?,
            Ast::Sub(a, b) => a.eval(point, end)?.checked_sub(b.eval(point, end)?)?,
            Ast::Mul(a, b) => a.eval(point, end)?.checked_mul(b.eval(point, end)?)?,
            Ast::Div(a, b) => {
                let d = b.eval(point, end)?;
                if d <= 0 {
                    return None;
                }
                a.eval(point, end)?.div_euclid(d)
            }
            Ast::Max(args) => {
                let mut best = None;
                for a in args {
                    let v = a.eval(point, end)?;
                    best = Some(best.map_or(v, |b: i128| b.max(v)));
                }
                best?
            }
        })
    }

    /// The value of an expression without `$k` references.
    pub fn value(&self, point: &BTreeMap<String, i128>) -> Option<i128> {
        self.eval(point, &mut |_| None)
    }

    /// Every symbol it mentions.
    pub fn symbols(&self, out: &mut BTreeSet<String>) {
        match self {
            Ast::Sym(s) => {
                out.insert(s.clone());
            }
            Ast::Num(_) | Ast::End(_) => {}
            Ast::Add(a, b) | Ast::Sub(a, b) | Ast::Mul(a, b) | Ast::Div(a, b) => {
                a.symbols(out);
                b.symbols(out);
            }
            Ast::Max(args) => args.iter().for_each(|a| a.symbols(out)),
        }
    }

    /// The tensors `$k` when the expression is `0`, one `$k`, or `max` of `$k`s only (the
    /// form the symbolic proof accepts).
    pub fn ends_only(&self) -> Option<Vec<usize>> {
        match self {
            Ast::Num(0) => Some(Vec::new()),
            Ast::End(k) => Some(vec![*k]),
            Ast::Max(args) => args
                .iter()
                .map(|a| match a {
                    Ast::End(k) => Some(*k),
                    _ => None,
                })
                .collect(),
            _ => None,
        }
    }
}

/// A factor of a monomial: a symbol or a floor quotient of a polynomial by a constant.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Factor {
    /// A symbol.
    Sym(String),
    /// `floor(p / d)`, `d ≥ 2`.
    Floor(Poly, i128),
}

/// A polynomial: monomials (sorted factor lists) to non-zero coefficients.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Poly(pub BTreeMap<Vec<Factor>, i128>);

impl Poly {
    fn constant(v: i128) -> Poly {
        let mut p = Poly::default();
        if v != 0 {
            p.0.insert(Vec::new(), v);
        }
        p
    }

    fn factor(f: Factor) -> Poly {
        Poly(BTreeMap::from([(vec![f], 1)]))
    }

    fn as_constant(&self) -> Option<i128> {
        match self.0.len() {
            0 => Some(0),
            1 => self.0.get(&Vec::new()).copied(),
            _ => None,
        }
    }

    fn add_scaled(&self, other: &Poly, k: i128) -> Option<Poly> {
        let mut out = self.0.clone();
        for (m, &c) in &other.0 {
            let e = out.entry(m.clone()).or_insert(0);
            *e = e.checked_add(c.checked_mul(k)?)?;
        }
        out.retain(|_, c| *c != 0);
        Some(Poly(out))
    }

    fn mul(&self, other: &Poly) -> Option<Poly> {
        let mut out: BTreeMap<Vec<Factor>, i128> = BTreeMap::new();
        for (a, &x) in &self.0 {
            for (b, &y) in &other.0 {
                let mut m: Vec<Factor> = a.iter().chain(b).cloned().collect();
                m.sort();
                let e = out.entry(m).or_insert(0);
                *e = e.checked_add(x.checked_mul(y)?)?;
            }
        }
        out.retain(|_, c| *c != 0);
        Some(Poly(out))
    }

    /// The value at `point`.
    fn value(&self, point: &BTreeMap<String, i128>) -> Option<i128> {
        let mut total: i128 = 0;
        for (m, &c) in &self.0 {
            let mut v = c;
            for f in m {
                v = v.checked_mul(f.value(point)?)?;
            }
            total = total.checked_add(v)?;
        }
        Some(total)
    }

    /// True when the polynomial provably never decreases as any symbol grows within `low`
    /// (each symbol's lower end) upward: every non-constant term has a positive coefficient,
    /// each quotient is of such a polynomial, and in a product of several factors each factor
    /// is non-negative at the lower corner (hence everywhere above it, being monotone).
    pub fn monotone(&self, low: &BTreeMap<String, i128>) -> bool {
        self.0.iter().all(|(m, &c)| {
            m.is_empty()
                || (c > 0
                    && m.iter().all(|f| {
                        let ok = match f {
                            Factor::Sym(_) => true,
                            Factor::Floor(p, _) => p.monotone(low),
                        };
                        ok && (m.len() == 1 || f.value(low).is_some_and(|v| v >= 0))
                    }))
        })
    }
}

impl Factor {
    fn value(&self, point: &BTreeMap<String, i128>) -> Option<i128> {
        match self {
            Factor::Sym(s) => point.get(s).copied(),
            Factor::Floor(p, d) => Some(p.value(point)?.div_euclid(*d)),
        }
    }
}

/// The normal form of an expression without `$k` or `max`; `None` when it has them, divides
/// by a non-constant or non-positive number, or overflows. Two expressions with equal normal
/// forms are equal at every point.
pub fn normal(ast: &Ast) -> Option<Poly> {
    Some(match ast {
        Ast::Num(v) => Poly::constant(*v),
        Ast::Sym(s) => Poly::factor(Factor::Sym(s.clone())),
        Ast::End(_) | Ast::Max(_) => return None,
        Ast::Add(a, b) => normal(a)?.add_scaled(&normal(b)?, 1)?,
        Ast::Sub(a, b) => normal(a)?.add_scaled(&normal(b)?, -1)?,
        Ast::Mul(a, b) => normal(a)?.mul(&normal(b)?)?,
        Ast::Div(a, b) => {
            let d = normal(b)?.as_constant().filter(|&d| d > 0)?;
            let p = normal(a)?;
            // floor((d·q + r) / d) = q + floor(r / d): whole multiples of `d` come out.
            let mut whole = Poly::default();
            let mut rest = Poly::default();
            for (m, &c) in &p.0 {
                let (q, r) = (c.div_euclid(d), c.rem_euclid(d));
                if !m.is_empty() && q != 0 {
                    whole.0.insert(m.clone(), q);
                }
                let keep = if m.is_empty() { c } else { r };
                if keep != 0 {
                    rest.0.insert(m.clone(), keep);
                }
            }
            match (d, rest.as_constant()) {
                (1, _) => p,
                (_, Some(v)) => whole.add_scaled(&Poly::constant(v.div_euclid(d)), 1)?,
                _ => whole.add_scaled(&Poly::factor(Factor::Floor(rest, d)), 1)?,
            }
        }
    })
}

/// `a - b` in normal form.
pub fn difference(a: &Poly, b: &Poly) -> Option<Poly> {
    a.add_scaled(b, -1)
}

/// The value of a normal form at `point`.
pub fn poly_value(p: &Poly, point: &BTreeMap<String, i128>) -> Option<i128> {
    p.value(point)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(pairs: &[(&str, i128)]) -> BTreeMap<String, i128> {
        pairs.iter().map(|&(s, v)| (s.to_string(), v)).collect()
    }

    #[test]
    fn parses_and_evaluates_by_hand() {
        // 3*((H + 1)//2)*W at H = 6, W = 5: (7//2 = 3) → 3·3·5 = 45.
        let e = parse("3*((H + 1)//2)*W").unwrap();
        assert_eq!(e.value(&at(&[("H", 6), ("W", 5)])), Some(45));
        // Left to right: 3*(H + 1)//2*W = ((3·7)//2)·5 = 10·5 = 50.
        let e = parse("3*(H + 1)//2*W").unwrap();
        assert_eq!(e.value(&at(&[("H", 6), ("W", 5)])), Some(50));
        // Floor division of a negative number rounds down: (-3)//2 = -2.
        assert_eq!(parse("(0 - 3)//2").unwrap().value(&at(&[])), Some(-2));
        assert_eq!(parse("-s + 10").unwrap().value(&at(&[("s", 4)])), Some(6));
        let ends = [64, 192];
        let m = parse("max($0, $1, 100)").unwrap();
        assert_eq!(m.eval(&at(&[]), &mut |k| ends.get(k).copied()), Some(192));
        assert_eq!(parse("max($0, $1)").unwrap().ends_only(), Some(vec![0, 1]));
        assert_eq!(m.ends_only(), None);
        assert!(parse("2 +").is_err());
        assert!(parse("max(1, 2").is_err());
        assert!(parse("s $").is_err());
    }

    #[test]
    fn normal_forms_compare_and_prove_monotone() {
        let a = normal(&parse("4*sequence*768").unwrap()).unwrap();
        // Bytes of a float32 tensor as (32·elements + 7)//8 come out exact.
        let c = normal(&parse("(32*sequence*768 + 7)//8").unwrap()).unwrap();
        assert_eq!(a, c);
        let b = normal(&parse("4*sequence*12*64").unwrap()).unwrap();
        assert_eq!(a, b);
        let low = at(&[("s", 1)]);
        assert!(normal(&parse("s*s + 3*s").unwrap()).unwrap().monotone(&low));
        assert!(!normal(&parse("s*s - s").unwrap()).unwrap().monotone(&low));
        // ((s - 5)//2)·((s - 5)//2) is negative-times-negative at s = 1: not monotone.
        let q = "((s - 5)//2)";
        let sq = normal(&parse(&format!("{q}*{q}")).unwrap()).unwrap();
        assert!(!sq.monotone(&low));
        assert!(
            normal(&parse("((s + 1)//2)*((s + 1)//2)").unwrap())
                .unwrap()
                .monotone(&low)
        );
    }
}
