//! Checks a table planned over ranges of sizes (`options.ranges`) for every integer point of
//! the ranges, with the verifier's own expression reader ([`super::expr`]):
//!
//! - each arena tensor's `shape_expr` is the shape inference finds over the ranges, and its
//!   `bytes_expr` is element bits × the product of that shape, rounded up to bytes (equal
//!   normal forms); a tensor planned at its upper bound has a constant `bytes_expr` at least
//!   its size at the upper corner;
//! - a tensor sharing another's bytes has the same `offset_expr` and is never larger;
//! - the upper-bound plan (the fixed `offset`s, checked at the upper corner by the fixed
//!   verifier) holds at every point because no size there exceeds the size at the corner;
//! - no two tensors whose lifetimes meet overlap under the `offset_expr`s, every offset is
//!   aligned and within `arena_expr`.
//!
//! With at most [`EXHAUSTIVE_POINTS`] points every point is evaluated. Otherwise the proof is
//! symbolic: every size is monotone (never decreasing in any symbol) and non-negative at the
//! lower corner; every offset is `0` or a `max` of ends `$k`, so a tensor's offset is at least
//! the end of every tensor reachable through these references (ends are offsets plus
//! non-negative sizes); every conflicting pair must be ordered by that reachability.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::expr::{Ast, Poly, difference, normal, parse, poly_value};
use crate::emit::Table;
use crate::ir::Graph;

/// The most points checked one by one; larger ranges get the symbolic proof.
pub const EXHAUSTIVE_POINTS: u128 = 4096;

/// Checks the range part of `table` against `graph`, typed over the ranges; returns how the
/// plan was proven (`exhaustive` or `symbolic`), or `None` when it was not.
pub fn check_ranges(graph: &Graph, table: &Table, problems: &mut Vec<String>) -> Option<String> {
    let ranges: BTreeMap<String, (i128, i128)> = table
        .options
        .ranges
        .iter()
        .map(|(s, &[lo, hi])| (s.clone(), (i128::from(lo), i128::from(hi))))
        .collect();
    if let Some((s, _)) = ranges.iter().find(|(_, (lo, hi))| *lo < 0 || hi < lo) {
        problems.push(format!("range of '{s}' is empty or negative"));
        return None;
    }
    let before = problems.len();
    let sizes = Sizes::read(graph, table, &ranges, problems)?;
    if problems.len() > before {
        return None;
    }
    let points = ranges.values().fold(1u128, |n, (lo, hi)| {
        n.saturating_mul(u128::try_from(hi - lo + 1).unwrap_or(u128::MAX))
    });
    let high: BTreeMap<String, i128> = ranges.iter().map(|(s, r)| (s.clone(), r.1)).collect();
    match sizes.evaluate(&high, table.options.alignment) {
        Ok(at)
            if at.arena
                == table
                    .parametric
                    .as_ref()
                    .map(|p| i128::from(p.arena_at_max)) => {}
        Ok(at) => problems.push(format!(
            "arena_at_max is not arena_expr at the upper corner ({:?})",
            at.arena
        )),
        Err(e) => problems.push(e),
    }
    let proof = if points <= EXHAUSTIVE_POINTS {
        for point in box_points(&ranges) {
            if let Err(e) = sizes.check_point(table, &point) {
                problems.push(e);
                break;
            }
        }
        "exhaustive"
    } else {
        sizes.prove(table, &ranges, problems);
        "symbolic"
    };
    (problems.len() == before).then(|| proof.to_string())
}

/// Every point of the box.
fn box_points(ranges: &BTreeMap<String, (i128, i128)>) -> Vec<BTreeMap<String, i128>> {
    let mut out = vec![BTreeMap::new()];
    for (s, &(lo, hi)) in ranges {
        out = out
            .into_iter()
            .flat_map(|p| {
                (lo..=hi).map(move |v| {
                    let mut p = p.clone();
                    p.insert(s.clone(), v);
                    p
                })
            })
            .collect();
    }
    out
}

/// The arena tensors' parsed expressions and the pairs that must not overlap.
struct Sizes {
    /// Table index of each arena tensor.
    index: Vec<usize>,
    /// Position in `index` of each table tensor in the arena, by table index.
    slot: Vec<Option<usize>>,
    bytes: Vec<Ast>,
    offsets: Vec<Ast>,
    arena: Ast,
    /// `(member, target)`: the member shares the target's bytes.
    shares: Vec<(usize, usize)>,
    /// Pairs of slots whose lifetimes meet and that share no bytes.
    conflicts: Vec<(usize, usize)>,
    /// Per slot: the slot owning the bytes it shares (itself when it shares none).
    roots: Vec<usize>,
    /// Per slot: the slots whose ends its `offset_expr` names.
    deps: Vec<Vec<usize>>,
    /// The slots in an order where each comes after the slots it names; slots on or behind a
    /// cycle of references are left out (their offsets have no value).
    order: Vec<usize>,
}

/// Offsets and arena at one point.
struct AtPoint {
    bytes: Vec<i128>,
    offsets: Vec<i128>,
    arena: Option<i128>,
}

impl Sizes {
    /// The slot of table tensor `k`, when it is in the arena.
    fn slot_of(&self, k: usize) -> Option<usize> {
        self.slot.get(k).copied().flatten()
    }

    fn read(
        graph: &Graph,
        table: &Table,
        ranges: &BTreeMap<String, (i128, i128)>,
        problems: &mut Vec<String>,
    ) -> Option<Sizes> {
        let Some(info) = &table.parametric else {
            problems.push("a table over ranges has no 'parametric' section".into());
            return None;
        };
        let arena = parse(&info.arena_expr)
            .map_err(|e| problems.push(format!("arena_expr: {e}")))
            .ok()?;
        let names: HashMap<&str, usize> = table
            .tensors
            .iter()
            .enumerate()
            .map(|(i, t)| (t.name.as_str(), i))
            .collect();
        let mut sizes = Sizes {
            index: Vec::new(),
            slot: vec![None; table.tensors.len()],
            bytes: Vec::new(),
            offsets: Vec::new(),
            arena,
            shares: Vec::new(),
            conflicts: Vec::new(),
            roots: Vec::new(),
            deps: Vec::new(),
            order: Vec::new(),
        };
        for (i, entry) in table.tensors.iter().enumerate() {
            if entry.offset.is_none() {
                continue;
            }
            let name = &entry.name;
            let sym = &entry.symbolic;
            let (Some(bytes), Some(offset)) = (&sym.bytes_expr, &sym.offset_expr) else {
                problems.push(format!("tensor '{name}' has no bytes_expr or offset_expr"));
                continue;
            };
            let (bytes, offset) = match (parse(bytes), parse(offset)) {
                (Ok(b), Ok(o)) => (b, o),
                (Err(e), _) | (_, Err(e)) => {
                    problems.push(format!("tensor '{name}': {e}"));
                    continue;
                }
            };
            if let Err(e) = check_size(graph, entry, &bytes, ranges) {
                problems.push(format!("tensor '{name}': {e}"));
            }
            if entry.alias_offset.is_some() {
                problems.push(format!(
                    "tensor '{name}': slice aliases are not part of range tables"
                ));
            }
            sizes.slot[i] = Some(sizes.index.len());
            sizes.index.push(i);
            sizes.bytes.push(bytes);
            sizes.offsets.push(offset);
        }
        let mut refs = BTreeSet::new();
        refs_of(&sizes.arena, &mut refs);
        sizes.offsets.iter().for_each(|o| refs_of(o, &mut refs));
        if let Some(k) = refs.iter().find(|&&k| sizes.slot_of(k).is_none()) {
            problems.push(format!("${k} names no tensor in the arena"));
            return None;
        }
        sizes.deps = sizes
            .offsets
            .iter()
            .map(|o| {
                let mut refs = BTreeSet::new();
                refs_of(o, &mut refs);
                refs.iter().filter_map(|&k| sizes.slot_of(k)).collect()
            })
            .collect();
        sizes.order = evaluation_order(&sizes.deps);
        // Sharing classes, by following inplace_of / alias_of to the tensor owning the bytes.
        let mut class: Vec<usize> = (0..sizes.index.len()).collect();
        for (s, &i) in sizes.index.iter().enumerate() {
            let entry = &table.tensors[i];
            let target = entry.inplace_of.as_ref().or(entry.alias_of.as_ref());
            let Some(t) = target.and_then(|n| names.get(n.as_str())) else {
                continue;
            };
            let Some(ts) = sizes.slot_of(*t) else {
                problems.push(format!(
                    "tensor '{}' shares a tensor outside the arena",
                    entry.name
                ));
                continue;
            };
            if sizes.offsets[s] != sizes.offsets[ts] {
                problems.push(format!(
                    "tensor '{}' shares the bytes of '{}' but its offset_expr differs",
                    entry.name, table.tensors[*t].name
                ));
            }
            sizes.shares.push((s, ts));
            class[s] = ts;
        }
        let root = |mut s: usize| {
            for _ in 0..class.len() {
                if class[s] == s {
                    break;
                }
                s = class[s];
            }
            s
        };
        let roots: Vec<usize> = (0..sizes.index.len()).map(root).collect();
        let mut by_first: Vec<usize> = (0..sizes.index.len()).collect();
        by_first.sort_by_key(|&s| table.tensors[sizes.index[s]].first);
        for (k, &a) in by_first.iter().enumerate() {
            let ea = &table.tensors[sizes.index[a]];
            for &b in &by_first[k + 1..] {
                let eb = &table.tensors[sizes.index[b]];
                if eb.first > ea.last {
                    break;
                }
                if roots[a] != roots[b] {
                    sizes.conflicts.push((a, b));
                }
            }
        }
        sizes.roots = roots;
        Some(sizes)
    }

    /// Sizes, offsets and the arena at `point`.
    fn evaluate(&self, point: &BTreeMap<String, i128>, alignment: u64) -> Result<AtPoint, String> {
        let name = |s: usize| format!("tensor #{}", self.index[s]);
        let bytes: Vec<i128> = self
            .bytes
            .iter()
            .enumerate()
            .map(|(s, b)| match b.value(point) {
                Some(v) if v >= 0 => Ok(v),
                _ => Err(format!(
                    "{}: bytes_expr is not a size at {point:?}",
                    name(s)
                )),
            })
            .collect::<Result<_, _>>()?;
        let align = i128::from(alignment.max(1));
        // Each buffer's bytes rounded up to the alignment, once per point.
        let padded: Vec<i128> = bytes
            .iter()
            .map(|b| b.saturating_add(align - 1).div_euclid(align) * align)
            .collect();
        let end_of = |s: usize, offset: i128| offset + padded[s];
        let mut offsets: Vec<Option<i128>> = vec![None; self.index.len()];
        for &s in &self.order {
            if self.deps[s].iter().any(|&d| offsets[d].is_none()) {
                continue;
            }
            let v = self.offsets[s].eval(point, &mut |k| {
                let d = self.slot_of(k)?;
                Some(end_of(d, offsets[d]?))
            });
            offsets[s] = v;
        }
        if let Some(s) = offsets.iter().position(Option::is_none) {
            return Err(format!(
                "{}: offset_expr has no value at {point:?}",
                name(s)
            ));
        }
        let offsets: Vec<i128> = offsets.into_iter().map(|o| o.unwrap_or(0)).collect();
        let mut end = |k: usize| {
            let s = self.slot_of(k)?;
            Some(end_of(s, offsets[s]))
        };
        let arena = self.arena.eval(point, &mut end);
        Ok(AtPoint {
            bytes,
            offsets,
            arena,
        })
    }

    /// Checks every claim at one point.
    fn check_point(&self, table: &Table, point: &BTreeMap<String, i128>) -> Result<(), String> {
        let at = self.evaluate(point, table.options.alignment)?;
        let entry = |s: usize| &table.tensors[self.index[s]];
        let align = i128::from(table.options.alignment.max(1));
        for s in 0..self.index.len() {
            let (o, b) = (at.offsets[s], at.bytes[s]);
            let e = entry(s);
            if o < 0 || o % align != 0 {
                return Err(format!(
                    "'{}' at {point:?}: offset {o} is not aligned",
                    e.name
                ));
            }
            if b > i128::from(e.bytes.unwrap_or(0)) {
                return Err(format!(
                    "'{}' at {point:?}: {b} bytes exceed its size at the upper corner, so the upper-bound plan does not hold",
                    e.name
                ));
            }
            if at.arena.is_none_or(|a| o + b > a) {
                return Err(format!("'{}' at {point:?}: ends past arena_expr", e.name));
            }
        }
        for &(m, t) in &self.shares {
            if at.bytes[m] > at.bytes[t] {
                return Err(format!(
                    "'{}' at {point:?}: larger than '{}' whose bytes it shares",
                    entry(m).name,
                    entry(t).name
                ));
            }
        }
        for &(a, b) in &self.conflicts {
            let (oa, ob) = (at.offsets[a], at.offsets[b]);
            if oa < ob + at.bytes[b] && ob < oa + at.bytes[a] {
                return Err(format!(
                    "'{}' and '{}' overlap at {point:?}",
                    entry(a).name,
                    entry(b).name
                ));
            }
        }
        Ok(())
    }

    /// The symbolic proof (see the module documentation).
    fn prove(
        &self,
        table: &Table,
        ranges: &BTreeMap<String, (i128, i128)>,
        problems: &mut Vec<String>,
    ) {
        let low: BTreeMap<String, i128> = ranges.iter().map(|(s, r)| (s.clone(), r.0)).collect();
        let high: BTreeMap<String, i128> = ranges.iter().map(|(s, r)| (s.clone(), r.1)).collect();
        let entry = |s: usize| &table.tensors[self.index[s]];
        let polys: Vec<Option<Poly>> = self.bytes.iter().map(normal).collect();
        for (s, p) in polys.iter().enumerate() {
            let name = &entry(s).name;
            let Some(p) = p else {
                problems.push(format!("'{name}': bytes_expr has no normal form"));
                continue;
            };
            if !p.monotone(&low) || poly_value(p, &low).is_none_or(|v| v < 0) {
                problems.push(format!(
                    "'{name}': bytes_expr is not provably monotone and non-negative"
                ));
            } else if poly_value(p, &high)
                .is_none_or(|v| v > i128::from(entry(s).bytes.unwrap_or(0)))
            {
                problems.push(format!(
                    "'{name}': bytes_expr exceeds its size at the upper corner"
                ));
            }
        }
        for &(m, t) in &self.shares {
            let fits = match (&polys[t], &polys[m]) {
                (Some(t), Some(m)) => difference(t, m).is_some_and(|d| {
                    d.monotone(&low) && poly_value(&d, &low).is_some_and(|v| v >= 0)
                }),
                _ => false,
            };
            if !fits {
                problems.push(format!(
                    "'{}' is not provably within the bytes of '{}' it shares",
                    entry(m).name,
                    entry(t).name
                ));
            }
        }
        // reach[s]: the slots whose end is at or below slot s's offset.
        let n = self.index.len();
        let mut refs: Vec<Vec<usize>> = Vec::with_capacity(n);
        for (s, o) in self.offsets.iter().enumerate() {
            match o.ends_only() {
                Some(ks) => refs.push(ks.iter().filter_map(|&k| self.slot_of(k)).collect()),
                None => {
                    problems.push(format!(
                        "'{}': offset_expr is not 0 or a max of ends, which the symbolic proof needs",
                        entry(s).name
                    ));
                    return;
                }
            }
        }
        let Some(reach) = reachability(&refs) else {
            problems.push("the offset_exprs refer to each other in a cycle".into());
            return;
        };
        // b ends at or below a's offset when b, or the tensor whose bytes it shares (never
        // smaller, proven above), is reachable from a.
        let below = |a: usize, b: usize| reach[a].contains(&b) || reach[a].contains(&self.roots[b]);
        for &(a, b) in &self.conflicts {
            if !below(a, b) && !below(b, a) {
                problems.push(format!(
                    "'{}' and '{}' are live together but neither is placed above the other",
                    entry(a).name,
                    entry(b).name
                ));
            }
        }
        let Some(tops) = self.arena.ends_only() else {
            problems.push("arena_expr is not a max of ends".into());
            return;
        };
        let tops: Vec<usize> = tops.iter().filter_map(|&k| self.slot_of(k)).collect();
        for s in 0..n {
            if !tops
                .iter()
                .any(|&t| t == s || t == self.roots[s] || below(t, s))
            {
                problems.push(format!(
                    "'{}' is not provably within arena_expr",
                    entry(s).name
                ));
            }
        }
    }
}

/// Every `$k` of `ast`.
fn refs_of(ast: &Ast, out: &mut BTreeSet<usize>) {
    match ast {
        Ast::End(k) => {
            out.insert(*k);
        }
        Ast::Num(_) | Ast::Sym(_) => {}
        Ast::Add(a, b) | Ast::Sub(a, b) | Ast::Mul(a, b) | Ast::Div(a, b) => {
            refs_of(a, out);
            refs_of(b, out);
        }
        Ast::Max(args) => args.iter().for_each(|a| refs_of(a, out)),
    }
}

/// The nodes in post-order of `deps` (each after the nodes it names), leaving out the nodes on
/// a cycle and the nodes that reach one.
fn evaluation_order(deps: &[Vec<usize>]) -> Vec<usize> {
    // 0: not seen, 1: being visited, 2: done, 3: on or behind a cycle.
    fn visit(s: usize, deps: &[Vec<usize>], state: &mut [u8], order: &mut Vec<usize>) -> bool {
        match state[s] {
            2 => return true,
            1 | 3 => return false,
            _ => {}
        }
        state[s] = 1;
        for &d in &deps[s] {
            if !visit(d, deps, state, order) {
                state[s] = 3;
                return false;
            }
        }
        state[s] = 2;
        order.push(s);
        true
    }
    let mut state = vec![0u8; deps.len()];
    let mut order = Vec::with_capacity(deps.len());
    for s in 0..deps.len() {
        visit(s, deps, &mut state, &mut order);
    }
    order
}

/// For each node, every node reachable through `refs`; `None` on a cycle.
fn reachability(refs: &[Vec<usize>]) -> Option<Vec<BTreeSet<usize>>> {
    let n = refs.len();
    let mut reach: Vec<Option<BTreeSet<usize>>> = vec![None; n];
    let mut state = vec![0u8; n];
    fn visit(
        s: usize,
        refs: &[Vec<usize>],
        reach: &mut Vec<Option<BTreeSet<usize>>>,
        state: &mut Vec<u8>,
    ) -> Option<()> {
        match state[s] {
            2 => return Some(()),
            1 => return None,
            _ => {}
        }
        state[s] = 1;
        let mut set = BTreeSet::new();
        for &k in &refs[s] {
            visit(k, refs, reach, state)?;
            set.insert(k);
            set.extend(reach[k].as_ref().expect("visited").iter().copied());
        }
        reach[s] = Some(set);
        state[s] = 2;
        Some(())
    }
    for s in 0..n {
        visit(s, refs, &mut reach, &mut state)?;
    }
    Some(reach.into_iter().map(|r| r.unwrap_or_default()).collect())
}

/// Checks one tensor's `shape_expr` and `bytes_expr` against the shape inferred over the
/// ranges.
fn check_size(
    graph: &Graph,
    entry: &crate::emit::TensorEntry,
    bytes: &Ast,
    ranges: &BTreeMap<String, (i128, i128)>,
) -> Result<(), String> {
    let tensor = graph
        .value(&entry.name)
        .and_then(|v| v.tensor_type())
        .ok_or("not a tensor of the model")?;
    let inferred: Option<Vec<String>> = tensor.shape.as_ref().and_then(|dims| {
        dims.iter()
            .map(|d| (*d != crate::ir::Dim::Unknown).then(|| d.to_string()))
            .collect()
    });
    let sym = &entry.symbolic;
    let mut used = BTreeSet::new();
    bytes.symbols(&mut used);
    let (Some(inferred), false) = (inferred, sym.upper_bound) else {
        // Planned at its upper bound: a constant at least the size at the upper corner.
        return match bytes.value(&BTreeMap::new()) {
            Some(v) if sym.upper_bound && v >= i128::from(entry.bytes.unwrap_or(u64::MAX)) => {
                Ok(())
            }
            _ if !sym.upper_bound => {
                Err("its shape has no expression but it is not marked upper_bound".into())
            }
            _ => Err("upper_bound but bytes_expr is not a constant covering its size".into()),
        };
    };
    let Some(table_shape) = &sym.shape_expr else {
        return Err("no shape_expr".into());
    };
    if table_shape.len() != inferred.len() {
        return Err(format!(
            "shape_expr has rank {}, inference {}",
            table_shape.len(),
            inferred.len()
        ));
    }
    let mut product = Ast::Num(i128::from(
        tensor.dtype.bits().ok_or("no fixed element size")?,
    ));
    for (have, want) in table_shape.iter().zip(&inferred) {
        let (h, w) = (parse(have)?, parse(want)?);
        if normal(&h) != normal(&w) || normal(&h).is_none() {
            return Err(format!(
                "shape_expr dim '{have}' is not the inferred '{want}'"
            ));
        }
        h.symbols(&mut used);
        product = Ast::Mul(Box::new(product), Box::new(h));
    }
    if let Some(s) = used.iter().find(|s| !ranges.contains_key(*s)) {
        return Err(format!("symbol '{s}' has no range"));
    }
    let built = Ast::Div(
        Box::new(Ast::Add(Box::new(product), Box::new(Ast::Num(7)))),
        Box::new(Ast::Num(8)),
    );
    match (normal(bytes), normal(&built)) {
        (Some(a), Some(b)) if a == b => Ok(()),
        _ => Err("bytes_expr is not element bits × shape_expr rounded up to bytes".into()),
    }
}
