//! Data-dependent sizes: a tensor whose shape involves a count known only at run time
//! (`NonZero`, `NonMaxSuppression`, ...; see [`crate::infer::DataDependentDim`]) is planned at
//! its size with every such count at its proven bound. Its table entry is marked
//! `upper_bound` with the shape in the counts (`shape_expr`) and the bytes it is planned at
//! (`bytes_expr`, in the range symbols: a constant without ranges); the table lists every
//! count with its operator and bound (`data_dependent`).

use std::collections::BTreeMap;

use anyhow::{Result, anyhow};

use crate::bail_input;
use crate::emit::{DataDependentEntry, Table};
use crate::infer::DataDependentDim;
use crate::ir::Graph;
use crate::symbolic::{Expr, Ranges, is_monotone};

/// Each count's bound in the range symbols alone ([`crate::infer::resolved_bounds`]).
pub fn resolved_bounds(registry: &[DataDependentDim]) -> Result<BTreeMap<String, Expr>> {
    crate::infer::resolved_bounds(registry)
        .ok_or_else(|| anyhow!("bug: a bound of a data-dependent count overflows"))
}

/// The bytes `name` (of exact size `exact`, an expression in the counts) is planned at: its
/// size with every count at its bound. An input error when the size is not provably
/// non-decreasing in the counts (a smaller count could then need more bytes).
pub fn planned_size(
    name: &str,
    exact: &Expr,
    bounds: &BTreeMap<String, Expr>,
    ranges: &Ranges,
) -> Result<Expr> {
    if !is_monotone(exact, ranges) {
        bail_input!(
            "tensor '{name}': its size {exact} does not provably grow with its data-dependent counts, so their bounds do not bound it"
        );
    }
    crate::infer::at_bounds(exact, bounds)
        .ok_or_else(|| crate::input_error!("tensor '{name}': its size at the bound overflows"))
}

/// The nodes of `symbolic` reading or writing a tensor sized by a count, or typed only at the
/// bounds (no size expression: the output of an `If` whose branches differ, and what is
/// computed from it): no slice alias may form there, since a slice's offset inside its whole
/// would move with the count.
pub fn nodes_touching_counts(
    symbolic: &Graph,
    registry: &[DataDependentDim],
) -> Result<std::collections::BTreeSet<usize>> {
    let bounds = resolved_bounds(registry)?;
    let sized = |v: usize| {
        let ty = symbolic.values[v].tensor_type();
        !super::no_expression::has_expression(ty)
            || ty.is_some_and(|t| t.mentions(&|s| bounds.contains_key(s)))
    };
    Ok(symbolic
        .nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| {
            n.inputs
                .iter()
                .chain(&n.outputs)
                .flatten()
                .any(|&v| sized(v))
        })
        .map(|(id, _)| id)
        .collect())
}

/// Marks the table's tensors sized by counts (typed in `symbolic`, where the counts are
/// symbols), and the arena tensors whose size there has no expression (typed only at the
/// bounds, with the reason), and lists the counts. Without ranges each planned size must be the constant the
/// table's `bytes` holds (the model typed at the bound).
pub fn mark(
    table: &mut Table,
    symbolic: &Graph,
    registry: &[DataDependentDim],
    ranges: &Ranges,
) -> Result<()> {
    if registry.is_empty() {
        return Ok(());
    }
    let bounds = resolved_bounds(registry)?;
    for entry in &mut table.tensors {
        let Some(ty) = symbolic.value(&entry.name).and_then(|v| v.tensor_type()) else {
            continue;
        };
        // Sized by a count when a dimension mentions one, even where the bytes do not (a
        // zero-length axis beside it), as the verifier reads it.
        let sized = ty.mentions(&|s| bounds.contains_key(s));
        if !super::no_expression::has_expression(Some(ty)) && entry.offset.is_some() {
            // Typed only at the bounds (an If whose branches differ, ...): planned there.
            let value = symbolic.value_id(&entry.name).expect("looked up above");
            let sym = &mut entry.symbolic;
            sym.bytes_expr = entry.bytes.map(|b| b.to_string());
            sym.upper_bound = true;
            sym.upper_bound_reason = Some(format!(
                "its size has no expression in the data-dependent counts: {}; planned at its size with every count at its bound",
                super::no_expression::why(symbolic, value)
            ));
            continue;
        }
        let Some(exact) = ty.bytes_expr().filter(|_| sized) else {
            continue;
        };
        let planned = planned_size(&entry.name, &exact, &bounds, ranges)?;
        if ranges.is_empty()
            && planned.as_constant() != entry.bytes.and_then(|b| i64::try_from(b).ok())
        {
            return Err(anyhow!(
                "bug: '{}' planned at {:?} bytes but its size at the bound is {planned}",
                entry.name,
                entry.bytes
            ));
        }
        let counts: Vec<String> = exact
            .symbols()
            .into_iter()
            .filter(|s| bounds.contains_key(s))
            .collect();
        let sym = &mut entry.symbolic;
        sym.shape_expr = ty
            .shape
            .as_ref()
            .map(|s| s.iter().map(ToString::to_string).collect());
        sym.bytes_expr = Some(planned.to_string());
        sym.upper_bound = true;
        sym.upper_bound_reason = Some(format!(
            "its size {exact} depends on the data-dependent count(s) {}; planned at their bounds",
            counts.join(", ")
        ));
    }
    table.data_dependent = registry
        .iter()
        .map(|d| DataDependentEntry {
            symbol: d.symbol.clone(),
            op: d.op.clone(),
            tensor: d.tensor.clone(),
            bound: d.bound.to_string(),
        })
        .collect();
    Ok(())
}
