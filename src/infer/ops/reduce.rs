//! Reductions (`Reduce*` with attribute or input axes, `keepdims`, `noop_with_empty_axes`),
//! `ArgMax`/`ArgMin`, `TopK` and the cumulative ops.

use anyhow::Result;
use ndarray::{ArrayD, Axis};

use super::Entry;
use super::util::{IntsArg, axes, ints_attr, ints_input, same_as_input};
use crate::infer::NodeCtx;
use crate::ir::{ConstData, Constant, DType, Dim, Shape};

/// This family's rows of the rule table.
pub const RULES: &[Entry] = &[
    ("", "ReduceSum", reduce),
    ("", "ReduceMean", reduce),
    ("", "ReduceMax", reduce),
    ("", "ReduceMin", reduce),
    ("", "ReduceProd", reduce),
    ("", "ReduceL1", reduce),
    ("", "ReduceL2", reduce),
    ("", "ReduceLogSum", reduce),
    ("", "ReduceLogSumExp", reduce),
    ("", "ReduceSumSquare", reduce),
    ("", "ArgMax", arg_reduce),
    ("", "ArgMin", arg_reduce),
    ("", "TopK", top_k),
    ("", "CumSum", cumulative),
    ("", "CumProd", cumulative),
];

/// The opset from which an operator takes its axes as an input.
fn axes_input_from(op: &str) -> i64 {
    if op == "ReduceSum" { 13 } else { 18 }
}

fn reduce(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.dtype(0)?;
    let keep = ctx.attr_i("keepdims", 1)? == 1;
    let noop = ctx.attr_i("noop_with_empty_axes", 0)? == 1;
    let op = ctx.node().op_type.as_str();
    let arg = if ctx.opset() >= axes_input_from(op) {
        ints_input(ctx, 1)
    } else {
        ints_attr(ctx, "axes")
    };
    let Some(input) = ctx.shape(0)? else {
        ctx.set_tensor(0, dtype, None);
        return Ok(());
    };
    let rank = input.len();
    let reduced: Vec<usize> = match arg {
        IntsArg::Known(a) if !a.is_empty() => axes(ctx, &a, rank)?,
        IntsArg::Known(_) | IntsArg::Absent if noop => {
            same_as_input(ctx, 0, 0)?;
            if let Some(c) = ctx.constant(0) {
                ctx.set_constant(0, c.clone());
            }
            return Ok(());
        }
        IntsArg::Known(_) | IntsArg::Absent => (0..rank).collect(),
        IntsArg::Unknown => {
            let out = if keep {
                Some(vec![Dim::Unknown; rank])
            } else {
                let count = ctx.opt_shape(1).and_then(|s| s.first()).and_then(Dim::value);
                count.map(|k| vec![Dim::Unknown; rank.saturating_sub(k as usize)])
            };
            ctx.set_tensor(0, dtype, out);
            return Ok(());
        }
    };
    ctx.set_shape(0, dtype, reduced_shape(input, &reduced, keep));
    if let Some(c) = ctx.constant(0)
        && let Some(v) = fold_reduce(op, c, &reduced, keep)
    {
        ctx.set_constant(0, v);
    }
    Ok(())
}

/// The input shape with `axes` removed (or set to 1 when `keep`).
fn reduced_shape(input: &[Dim], axes: &[usize], keep: bool) -> Shape {
    input
        .iter()
        .enumerate()
        .filter_map(|(i, d)| match (axes.contains(&i), keep) {
            (false, _) => Some(d.clone()),
            (true, true) => Some(Dim::Known(1)),
            (true, false) => None,
        })
        .collect()
}

/// Folds integer Sum/Prod/Max/Min reductions (the ones shape computations use) and float
/// Max/Min ones (exact in any float type; exporters take the larger side of an image that way).
fn fold_reduce(op: &str, c: &Constant, axes: &[usize], keep: bool) -> Option<Constant> {
    let mut sorted = axes.to_vec();
    sorted.sort_unstable();
    match &c.data {
        ConstData::Int(a) => {
            let (init, f): (i64, fn(i64, i64) -> i64) = match op {
                "ReduceSum" => (0, i64::wrapping_add),
                "ReduceProd" => (1, i64::wrapping_mul),
                "ReduceMax" => (i64::MIN, i64::max),
                "ReduceMin" => (i64::MAX, i64::min),
                _ => return None,
            };
            Some(Constant::ints(c.dtype, fold_axes(a, &sorted, keep, init, f)))
        }
        ConstData::Float(a) => {
            let (init, f): (f64, fn(f64, f64) -> f64) = match op {
                "ReduceMax" => (f64::NEG_INFINITY, f64::max),
                "ReduceMin" => (f64::INFINITY, f64::min),
                _ => return None,
            };
            Some(Constant {
                dtype: c.dtype,
                data: ConstData::Float(fold_axes(a, &sorted, keep, init, f)),
            })
        }
        ConstData::Str(_) => None,
    }
}

/// Reduces `a` over the sorted `axes` with `f` from `init`, keeping them as 1 when `keep`.
fn fold_axes<T: Copy>(a: &ArrayD<T>, axes: &[usize], keep: bool, init: T, f: fn(T, T) -> T) -> ArrayD<T> {
    let mut out = a.clone();
    for &axis in axes.iter().rev() {
        out = out.fold_axis(Axis(axis), init, |&acc, &v| f(acc, v));
        if keep {
            out = out.insert_axis(Axis(axis));
        }
    }
    out
}

/// `ArgMax`/`ArgMin`: int64, the axis reduced (kept as 1 by default).
fn arg_reduce(ctx: &mut NodeCtx) -> Result<()> {
    let keep = ctx.attr_i("keepdims", 1)? == 1;
    let out = match ctx.shape(0)? {
        Some(input) => {
            let axis = ctx.attr_axis("axis", 0, input.len())?;
            Some(reduced_shape(input, &[axis], keep))
        }
        None => None,
    };
    ctx.set_tensor(0, DType::Int64, out);
    Ok(())
}

/// `TopK`: values and int64 indices with `k` at `axis` (`k` an attribute before opset 10); a
/// `k` known only at run time is data-dependent, bounded by the axis length.
fn top_k(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.dtype(0)?;
    let k = if ctx.opset() < 10 {
        Some(ctx.attr_i("k", 0)?)
    } else {
        ctx.ints(1).and_then(|v| v.first().copied())
    };
    let run_time_k = ctx.dims_value(1).and_then(|v| v.first().cloned());
    let out = match ctx.shape(0)? {
        Some(input) => {
            let axis = ctx.attr_axis("axis", -1, input.len())?;
            let mut out = input.to_vec();
            out[axis] = match (k, run_time_k) {
                (Some(k), _) => Dim::Known(k),
                (None, Some(d)) if d != Dim::Unknown => d,
                (None, _) => {
                    // At most the axis, and at most what bounds `k` (`min(candidates, n)`).
                    let bound = match ctx.input_upper_bound(1) {
                        Some(k) => ctx.tighter_bound(&Dim::Known(k.max(0)), &input[axis]),
                        None => input[axis].clone(),
                    };
                    ctx.data_dependent(&bound)
                }
            };
            Some(out)
        }
        None => None,
    };
    ctx.set_tensor(0, dtype, out.clone());
    ctx.set_tensor(1, DType::Int64, out);
    Ok(())
}

/// `CumSum`/`CumProd`: same type as the input.
fn cumulative(ctx: &mut NodeCtx) -> Result<()> {
    same_as_input(ctx, 0, 0)
}
