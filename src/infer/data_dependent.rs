//! Data-dependent dimensions: the counts of `NonZero`, `NonMaxSuppression`, `Unique`,
//! `Compress`, `TopK` with a run-time `k` and early-exiting `Loop`s, known only when the model
//! runs. Each becomes a fresh symbol bounded by what its operator implies (see
//! docs/format.md, "Data-dependent sizes"); typed at the bound instead
//! ([`super::InferOptions::data_dependent_at_bound`]), the model has the sizes it is planned at.

use std::collections::BTreeMap;

use crate::ir::{Dim, Graph, ValueId};
use crate::symbolic::Expr;

/// One data-dependent dimension found by inference.
#[derive(Clone, Debug, PartialEq)]
pub struct DataDependentDim {
    /// The fresh symbol standing for the count (`nonzero_0`).
    pub symbol: String,
    /// The operator that decides it at run time (`NonZero`, ...).
    pub op: String,
    /// The first output of the node deciding it, which names it.
    pub tensor: String,
    /// The proven upper bound, in the model's other symbols (and earlier data-dependent
    /// ones); the count ranges over `0..=bound`.
    pub bound: Expr,
}

/// The dimension standing for a data-dependent count of the node whose first output is
/// `tensor`: its bound when typing at the bound, else its symbol (registered once per node).
/// `Unknown` when the bound is.
pub(crate) fn count_dim(
    registry: &mut Vec<DataDependentDim>,
    reserved: &dyn Fn(&str) -> bool,
    at_bound: bool,
    (op, tensor): (&str, &str),
    bound: &Dim,
) -> Dim {
    let Some(bound_expr) = bound.expr() else {
        return Dim::Unknown;
    };
    if at_bound {
        return bound.clone();
    }
    if let Some(known) = registry.iter_mut().find(|d| d.tensor == tensor) {
        known.bound = bound_expr;
        return Dim::Symbol(known.symbol.clone());
    }
    let stem = match op {
        "NonMaxSuppression" => "nms".to_string(),
        other => other.to_ascii_lowercase(),
    };
    let symbol = (registry.len()..)
        .map(|n| format!("{stem}_{n}"))
        .find(|s| !reserved(s) && registry.iter().all(|d| d.symbol != *s))
        .expect("an unused name");
    registry.push(DataDependentDim {
        symbol: symbol.clone(),
        op: op.to_string(),
        tensor: tensor.to_string(),
        bound: bound_expr,
    });
    Dim::Symbol(symbol)
}

/// `a` or `b`, both proven bounds of one count, whichever is the tighter: the provably
/// smaller, else the smaller with every count at its bound (so the model typed at the bounds
/// gets the same size), else `a`.
pub(crate) fn tighter(
    a: &Dim,
    b: &Dim,
    proven_le: &dyn Fn(&Dim, &Dim) -> bool,
    registry: &[DataDependentDim],
) -> Dim {
    let at_bounds = |d: &Dim| d.expr().and_then(|e| counts_at_bounds(&e, registry));
    match (a, b) {
        (Dim::Known(x), Dim::Known(y)) => Dim::Known(*x.min(y)),
        _ if proven_le(a, b) => a.clone(),
        _ if proven_le(b, a) => b.clone(),
        _ => match (at_bounds(a), at_bounds(b)) {
            (Some(x), Some(y)) if y < x => b.clone(),
            _ => a.clone(),
        },
    }
}

/// The constant `expr` takes with every count at its bound; `None` when it still depends on
/// other symbols (ranges) or overflows.
fn counts_at_bounds(expr: &Expr, registry: &[DataDependentDim]) -> Option<i64> {
    at_bounds(expr, &resolved_bounds(registry)?)?.as_constant()
}

/// Each count's bound in the model's other symbols alone (the range symbols): the counts a
/// bound mentions (earlier ones, e.g. `NonZero` of what `NonMaxSuppression` selected)
/// replaced by their own resolved bounds, in the registry's order. `None` when one overflows.
pub fn resolved_bounds(registry: &[DataDependentDim]) -> Option<BTreeMap<String, Expr>> {
    let mut resolved = BTreeMap::new();
    for d in registry {
        let bound = at_bounds(&d.bound, &resolved)?;
        resolved.insert(d.symbol.clone(), bound);
    }
    Some(resolved)
}

/// `expr` with every count `bounds` (from [`resolved_bounds`]) names at its bound; `None` on
/// overflow.
pub fn at_bounds(expr: &Expr, bounds: &BTreeMap<String, Expr>) -> Option<Expr> {
    expr.replace(&|s| bounds.get(s).cloned())
}

/// Operators whose output holds exactly the elements of input 0, rearranged.
const REARRANGING: &[&str] = &[
    "Identity",
    "Reshape",
    "Squeeze",
    "Unsqueeze",
    "Flatten",
    "Transpose",
];

/// How many producers [`value_upper_bound`] follows at most.
const BOUND_DEPTH: usize = 32;

/// A proven upper bound of every element of integer value `v`, read from the constants it is
/// computed from through operators that rearrange elements, `Concat`, `Min` and `ReduceMin`:
/// detection heads pass `TopK` a `k` of `min(candidates, count)`, bounded by the constant
/// whatever the count. `None` when nothing bounds it.
pub(crate) fn value_upper_bound(graph: &Graph, v: ValueId) -> Option<i64> {
    bound_of(graph, v, BOUND_DEPTH, false)
}

/// An upper bound of every element of `v` (`of_min` false) or of its smallest element
/// (`of_min` true), following at most `depth` producers.
fn bound_of(graph: &Graph, v: ValueId, depth: usize, of_min: bool) -> Option<i64> {
    let value = graph.values.get(v)?;
    if let Some(c) = value.constant.as_deref() {
        if !c.dtype.is_integer() {
            return None;
        }
        let elements = c.to_i64_vec()?.into_iter();
        return if of_min {
            elements.min()
        } else {
            elements.max()
        };
    }
    // A bound of the smallest element needs one to exist.
    if of_min && !known_non_empty(value) {
        return None;
    }
    let depth = depth.checked_sub(1)?;
    let node = &graph.nodes[value.producer?];
    if !node.domain.is_empty() {
        return None;
    }
    let input = |i: usize| node.inputs.get(i).copied().flatten();
    let inputs = || node.inputs.iter().flatten().copied();
    let of = |u: ValueId, of_min: bool| bound_of(graph, u, depth, of_min);
    match node.op_type.as_str() {
        op if REARRANGING.contains(&op) => of(input(0)?, of_min),
        // The smallest element of a concatenation is at most each part's smallest; every
        // element is at most the largest part bound.
        "Concat" if of_min => inputs().filter_map(|u| of(u, true)).min(),
        "Concat" => inputs()
            .map(|u| of(u, false))
            .collect::<Option<Vec<_>>>()?
            .into_iter()
            .max(),
        // Each output element is at most the same element of every input.
        "Min" => inputs().filter_map(|u| of(u, false)).min(),
        "ReduceMin" => {
            let x = input(0)?;
            let rank = graph.values[x].tensor_type()?.shape.as_ref()?.len();
            let whole = rank == 1
                && node.attr_int("noop_with_empty_axes").unwrap_or(0) == 0
                && known_non_empty(&graph.values[x]);
            // A rank-1 input reduced whole gives its smallest element; any other reduction
            // gives elements of the input's.
            of(x, whole)
        }
        _ => None,
    }
}

/// True when `value`'s inferred shape is known and holds at least one element.
fn known_non_empty(value: &crate::ir::Value) -> bool {
    value
        .tensor_type()
        .and_then(|t| t.shape.as_ref())
        .is_some_and(|s| s.iter().all(|d| d.value().is_some_and(|n| n > 0)))
}
