//! Checks the data-dependent counts of a table (`data_dependent`) and the tensors they size,
//! with the verifier's own expression reader ([`super::expr`]):
//!
//! - each count is named by a node of the model of an operator whose output count is decided
//!   at run time, and its `bound` is one the operator implies, re-derived here from the
//!   node's input shapes (the model typed with the counts as symbols): `NonZero` the input's
//!   element count; `NonMaxSuppression` batches × classes × boxes, or × a constant
//!   `max_output_boxes_per_class` (or the smaller of the two); `Unique` the input's length
//!   along `axis` (its element count without one); `Compress` the condition's length or the
//!   length it selects from (or the smaller); `TopK` the axis length, or the ceiling its `k` input's constants
//!   fix ([`super::ceiling`]), or the smaller; `Loop` its constant `M`;
//! - every symbol of an inferred shape is a range symbol or a listed count;
//! - every tensor sized by a count is marked `upper_bound`, its `shape_expr` is the inferred
//!   shape, and its `bytes_expr` is element bits × that shape with every count at its bound
//!   (counts in a bound at theirs), rounded up to bytes; in a fixed table, the `bytes` the
//!   plan gives it;
//! - every arena tensor whose inferred shape has no expression (an `If` whose branches give
//!   different shapes, ...) is marked `upper_bound` with a reason, its `bytes_expr` the bytes
//!   it is planned at (the model typed at the bounds, checked with every other size);
//! - every size up to the bound fits: at every combination of the counts' values in
//!   `0..=bound` when there are at most [`super::EXHAUSTIVE_POINTS`] (fixed tables), else
//!   because the exact size is monotone in the counts (and so are the bounds in the earlier
//!   counts they mention), so its largest value is at the bounds.

use std::collections::{BTreeMap, BTreeSet};

use super::expr::{Ast, normal, parse};
use crate::emit::Table;
use crate::ir::{Graph, Node, TensorType};

/// Checks the table's counts and the tensors they size against `symbolic`, the model typed
/// with the counts as symbols.
pub fn check_data_dependent(symbolic: &Graph, table: &Table, problems: &mut Vec<String>) {
    let mut bounds: BTreeMap<String, Ast> = BTreeMap::new();
    for d in &table.data_dependent {
        let bound = match parse(&d.bound) {
            Ok(b) => b,
            Err(e) => {
                problems.push(format!("count '{}': bound {e}", d.symbol));
                return;
            }
        };
        if let Err(e) = check_bound(symbolic, &d.tensor, &d.op, &d.symbol, &bound) {
            problems.push(format!(
                "count '{}' ({} of '{}'): {e}",
                d.symbol, d.op, d.tensor
            ));
            return;
        }
        let mut used = BTreeSet::new();
        bound.symbols(&mut used);
        if let Some(s) = used
            .iter()
            .find(|s| !bounds.contains_key(*s) && !table.options.ranges.contains_key(*s))
        {
            problems.push(format!(
                "count '{}': its bound mentions '{s}', neither a range symbol nor an earlier count",
                d.symbol
            ));
            return;
        }
        // In the range symbols alone: earlier counts at their (already resolved) bounds.
        bounds.insert(d.symbol.clone(), substitute(&bound, &bounds));
    }
    let low: BTreeMap<String, i128> = table
        .options
        .ranges
        .iter()
        .map(|(s, r)| (s.clone(), i128::from(r[0])))
        .chain(bounds.keys().map(|s| (s.clone(), 0)))
        .collect();
    for d in &table.data_dependent {
        if !normal(&bounds[&d.symbol]).is_some_and(|p| p.monotone(&low)) {
            problems.push(format!(
                "count '{}': its bound is not monotone in the symbols it mentions",
                d.symbol
            ));
        }
    }
    let mut sized = BTreeSet::new();
    for entry in &table.tensors {
        let Some(ty) = symbolic.value(&entry.name).and_then(|v| v.tensor_type()) else {
            continue;
        };
        match check_tensor(ty, entry, table, &bounds, &low) {
            Ok(true) => {
                sized.insert(entry.name.as_str());
            }
            Ok(false) => {}
            Err(e) => problems.push(format!("tensor '{}': {e}", entry.name)),
        }
    }
    // A slice view's offset inside its whole moves with the sizes before it.
    for entry in &table.tensors {
        let views = entry.alias_offset.is_some() || entry.strides.is_some();
        let whole_sized = entry.alias_of.as_deref().is_some_and(|w| sized.contains(w));
        if views && (sized.contains(entry.name.as_str()) || whole_sized) {
            problems.push(format!(
                "tensor '{}': a slice view involving a data-dependent size, whose offset would move with the count",
                entry.name
            ));
        }
    }
}

/// Checks one count's bound against its node.
fn check_bound(
    graph: &Graph,
    tensor: &str,
    op: &str,
    symbol: &str,
    bound: &Ast,
) -> Result<(), String> {
    let (g, node) = producer(graph, tensor).ok_or("no node of the model produces it")?;
    if node.op_type != op || !node.domain.is_empty() {
        return Err(format!("its node is {}, not {op}", node.op_type));
    }
    let mut in_outputs = BTreeSet::new();
    for &o in node.outputs.iter().flatten() {
        if let Some(t) = g.values[o].tensor_type() {
            shape_asts(t)?
                .iter()
                .for_each(|d| d.symbols(&mut in_outputs));
        }
    }
    if !in_outputs.contains(symbol) {
        return Err("no output of its node has the count in its shape".into());
    }
    let shape = |i: usize| -> Result<Vec<Ast>, String> {
        let id = node
            .inputs
            .get(i)
            .copied()
            .flatten()
            .ok_or("a missing input")?;
        shape_asts(
            g.values[id]
                .tensor_type()
                .ok_or("an input that is not a tensor")?,
        )
    };
    let constant = |i: usize| -> Option<i128> {
        let id = node.inputs.get(i).copied().flatten()?;
        let c = g.values[id].constant.as_ref()?;
        Some(i128::from(*c.to_i64_vec()?.first()?))
    };
    let product = |dims: &[Ast]| dims.iter().cloned().fold(Ast::Num(1), mul);
    let axis_len = |dims: &[Ast], axis: i64| -> Result<Ast, String> {
        let rank = dims.len() as i64;
        let a = if axis < 0 { axis + rank } else { axis };
        usize::try_from(a)
            .ok()
            .and_then(|a| dims.get(a).cloned())
            .ok_or_else(|| "an axis out of range".to_string())
    };
    let candidates: Vec<Ast> = match op {
        "NonZero" => vec![product(&shape(0)?)],
        "Unique" => {
            let x = shape(0)?;
            vec![match node.attr_int("axis") {
                Some(a) => axis_len(&x, a)?,
                None => product(&x),
            }]
        }
        "Compress" => {
            let x = shape(0)?;
            let length = match node.attr_int("axis") {
                Some(a) => axis_len(&x, a)?,
                None => product(&x),
            };
            let condition = shape(1)?.first().cloned().ok_or("a condition of rank 0")?;
            with_smaller(vec![length, condition])
        }
        "TopK" => {
            let x = shape(0)?;
            let axis = axis_len(&x, node.attr_int("axis").unwrap_or(-1))?;
            let k = node.inputs.get(1).copied().flatten();
            match k.and_then(|k| super::ceiling::ceiling(g, k)) {
                Some(most) => with_smaller(vec![Ast::Num(i128::from(most.max(0))), axis]),
                None => vec![axis],
            }
        }
        "NonMaxSuppression" => {
            let (boxes, scores) = (shape(0)?, shape(1)?);
            let (Some(b), Some(n), Some(c)) = (boxes.first(), boxes.get(1), scores.get(1)) else {
                return Err("boxes or scores of too small a rank".into());
            };
            let per_class = match constant(2) {
                Some(m) => with_smaller(vec![n.clone(), Ast::Num(m.max(0))]),
                None => vec![n.clone()],
            };
            per_class
                .into_iter()
                .map(|k| mul(mul(b.clone(), c.clone()), k))
                .collect()
        }
        "Loop" => vec![Ast::Num(constant(0).ok_or("M is not a constant")?.max(0))],
        other => return Err(format!("{other} decides no count")),
    };
    let want = normal(bound);
    if want.is_some() && candidates.iter().any(|c| normal(c) == want) {
        Ok(())
    } else {
        Err("bound is not one the operator implies for its inputs' shapes".to_string())
    }
}

/// The candidates plus the smaller of the two when both are constants.
fn with_smaller(mut candidates: Vec<Ast>) -> Vec<Ast> {
    if let [Ast::Num(a), Ast::Num(b)] = candidates[..] {
        candidates.push(Ast::Num(a.min(b)));
    }
    candidates
}

fn mul(a: Ast, b: Ast) -> Ast {
    Ast::Mul(Box::new(a), Box::new(b))
}

/// The node producing `tensor`, in `graph` or any subgraph, with its graph.
fn producer<'g>(graph: &'g Graph, tensor: &str) -> Option<(&'g Graph, &'g Node)> {
    if let Some(p) = graph.value(tensor).and_then(|v| v.producer) {
        return Some((graph, &graph.nodes[p]));
    }
    graph
        .nodes
        .iter()
        .flat_map(|n| &n.subgraphs)
        .find_map(|s| producer(&s.graph, tensor))
}

/// Checks an arena tensor whose shape has no expression in the counts (an `If` whose
/// branches differ, ...): it can only be planned at its size typed at the bounds, so it must
/// be marked `upper_bound` with a reason, and a fixed table's `bytes_expr` must be its `bytes`.
/// True when it is such a tensor (its size may vary with the counts).
fn unexpressed(entry: &crate::emit::TensorEntry, table: &Table) -> Result<bool, String> {
    if entry.offset.is_none() || table.data_dependent.is_empty() {
        return Ok(false);
    }
    let sym = &entry.symbolic;
    if !sym.upper_bound || sym.upper_bound_reason.is_none() {
        return Err(
            "its shape has no expression in the data-dependent counts but it is not marked upper_bound with a reason"
                .into(),
        );
    }
    let planned = parse(sym.bytes_expr.as_deref().ok_or("no bytes_expr")?)?;
    if table.options.ranges.is_empty()
        && planned.value(&BTreeMap::new()) != entry.bytes.map(i128::from)
    {
        return Err("bytes_expr is not the bytes it is planned at".into());
    }
    Ok(true)
}

/// Each dimension parsed.
fn shape_asts(t: &TensorType) -> Result<Vec<Ast>, String> {
    t.shape
        .as_ref()
        .ok_or("a shape of unknown rank")?
        .iter()
        .map(|d| parse(&d.to_string()).map_err(|_| format!("dimension '{d}' has no expression")))
        .collect()
}

/// `ast` with the symbols of `values` replaced.
fn substitute(ast: &Ast, values: &BTreeMap<String, Ast>) -> Ast {
    let two = |a: &Ast, b: &Ast| {
        (
            Box::new(substitute(a, values)),
            Box::new(substitute(b, values)),
        )
    };
    match ast {
        Ast::Sym(s) => values.get(s).cloned().unwrap_or_else(|| ast.clone()),
        Ast::Num(_) | Ast::End(_) => ast.clone(),
        Ast::Add(a, b) => {
            let (a, b) = two(a, b);
            Ast::Add(a, b)
        }
        Ast::Sub(a, b) => {
            let (a, b) = two(a, b);
            Ast::Sub(a, b)
        }
        Ast::Mul(a, b) => {
            let (a, b) = two(a, b);
            Ast::Mul(a, b)
        }
        Ast::Div(a, b) => {
            let (a, b) = two(a, b);
            Ast::Div(a, b)
        }
        Ast::Max(args) => Ast::Max(args.iter().map(|a| substitute(a, values)).collect()),
    }
}

/// Checks one tensor: marked when a count sizes it, with the right expressions, and every
/// size up to the bounds within what it is planned at. True when a count sizes it.
fn check_tensor(
    ty: &TensorType,
    entry: &crate::emit::TensorEntry,
    table: &Table,
    bounds: &BTreeMap<String, Ast>,
    low: &BTreeMap<String, i128>,
) -> Result<bool, String> {
    let Ok(dims) = shape_asts(ty) else {
        return unexpressed(entry, table);
    };
    let mut used = BTreeSet::new();
    dims.iter().for_each(|d| d.symbols(&mut used));
    if let Some(s) = used
        .iter()
        .find(|s| !bounds.contains_key(*s) && !table.options.ranges.contains_key(*s))
    {
        return Err(format!(
            "its shape mentions '{s}', neither a range symbol nor a listed count"
        ));
    }
    let counts: Vec<&String> = used.iter().filter(|s| bounds.contains_key(*s)).collect();
    if counts.is_empty() {
        return Ok(false);
    }
    let sym = &entry.symbolic;
    if !sym.upper_bound {
        return Err("sized by a data-dependent count but not marked upper_bound".into());
    }
    let table_shape = sym.shape_expr.as_ref().ok_or("no shape_expr")?;
    if table_shape.len() != dims.len()
        || table_shape
            .iter()
            .zip(&dims)
            .any(|(have, want)| parse(have).ok().and_then(|h| normal(&h)) != normal(want))
    {
        return Err("shape_expr is not the inferred shape".into());
    }
    let bits = i128::from(ty.dtype.bits().ok_or("no fixed element size")?);
    let exact = Ast::Div(
        Box::new(Ast::Add(
            Box::new(dims.iter().cloned().fold(Ast::Num(bits), mul)),
            Box::new(Ast::Num(7)),
        )),
        Box::new(Ast::Num(8)),
    );
    let planned = parse(sym.bytes_expr.as_deref().ok_or("no bytes_expr")?)?;
    let at_bound = substitute(&exact, bounds);
    if normal(&planned).is_none() || normal(&planned) != normal(&at_bound) {
        return Err("bytes_expr is not its size with every count at its bound".into());
    }
    if table.options.ranges.is_empty() {
        let fixed = planned.value(&BTreeMap::new());
        if fixed.is_none() || fixed != entry.bytes.map(i128::from) {
            return Err("bytes_expr is not the bytes it is planned at".into());
        }
        let highs: Vec<i128> = counts
            .iter()
            .map(|s| bounds[*s].value(&BTreeMap::new()).unwrap_or(-1))
            .collect();
        let points = highs
            .iter()
            .try_fold(1u128, |n, &h| n.checked_mul(u128::try_from(h + 1).ok()?));
        if let Some(points) = points.filter(|&p| p <= super::EXHAUSTIVE_POINTS) {
            // Every combination of the counts' values.
            let mut point: BTreeMap<String, i128> =
                counts.iter().map(|s| ((*s).clone(), 0)).collect();
            for mut k in 0..points {
                for (s, &h) in counts.iter().zip(&highs) {
                    let h = h as u128 + 1;
                    point.insert((*s).clone(), (k % h) as i128);
                    k /= h;
                }
                match exact.value(&point) {
                    Some(v) if (0..=fixed.unwrap_or(0)).contains(&v) => {}
                    _ => {
                        return Err(format!(
                            "at {point:?} its size exceeds what it is planned at"
                        ));
                    }
                }
            }
            return Ok(true);
        }
    }
    if !normal(&exact).is_some_and(|p| p.monotone(low)) {
        return Err("its size is not monotone in its counts, so the bounds do not bound it".into());
    }
    Ok(true)
}
