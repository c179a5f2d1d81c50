//! Data-dependent dimensions: the counts of `NonZero`, `NonMaxSuppression`, `Unique`,
//! `Compress`, `TopK` with a run-time `k` and early-exiting `Loop`s, known only when the model
//! runs. Each becomes a fresh symbol bounded by what its operator implies (see
//! docs/format.md, "Data-dependent sizes"); typed at the bound instead
//! ([`super::InferOptions::data_dependent_at_bound`]), the model has the sizes it is planned at.

use crate::ir::Dim;
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

/// The tighter of two bounds of one count: the smaller when both are known or one is
/// provably no larger (`proven_le(a, b)`), else `fallback`.
pub(crate) fn cap(a: &Dim, b: &Dim, proven_le: &dyn Fn(&Dim, &Dim) -> bool, fallback: &Dim) -> Dim {
    match (a, b) {
        (Dim::Known(x), Dim::Known(y)) => Dim::Known(*x.min(y)),
        _ if proven_le(a, b) => a.clone(),
        _ if proven_le(b, a) => b.clone(),
        _ => fallback.clone(),
    }
}
