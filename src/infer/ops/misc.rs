//! Operators with data-dependent or special shapes: `Unique` (folded for known inputs),
//! `NonMaxSuppression`, `Det`, `BitCast`.

use std::collections::HashSet;

use anyhow::Result;
use ndarray::Axis;

use super::Entry;
use super::util::shape_of_input;
use crate::infer::{NodeCtx, dims};
use crate::ir::{ConstData, Constant, DType, Dim};

/// This family's rows of the rule table.
pub const RULES: &[Entry] = &[
    ("", "Unique", unique),
    ("", "NonMaxSuppression", non_max_suppression),
    ("", "Det", det),
    ("", "BitCast", bit_cast),
];

/// Comparable text keys of every element.
fn keys(c: &Constant) -> ndarray::ArrayD<String> {
    match &c.data {
        ConstData::Int(a) => a.mapv(|v| v.to_string()),
        ConstData::Float(a) => a.mapv(|v| v.to_bits().to_string()),
        ConstData::Str(a) => a.clone(),
    }
}

/// The number of distinct elements (or distinct slices along `axis`).
fn distinct(c: &Constant, axis: Option<usize>) -> usize {
    let k = keys(c);
    match axis {
        None => k.iter().collect::<HashSet<_>>().len(),
        Some(a) => k
            .axis_iter(Axis(a))
            .map(|s| s.iter().cloned().collect::<Vec<_>>())
            .collect::<HashSet<_>>()
            .len(),
    }
}

/// `Unique`: `Y`, `indices`, `inverse_indices`, `counts`; the distinct count is known for a
/// known input, else data-dependent and bounded by the input's length along `axis` (its
/// element count without one).
fn unique(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.dtype(0)?;
    let input = ctx.shape(0)?;
    let axis = match (ctx.attr_opt_i("axis")?, input) {
        (Some(a), Some(s)) => Some(ctx.axis(a, s.len())?),
        _ => None,
    };
    let count = match (ctx.constant(0), axis, input) {
        (Some(c), _, _) => Dim::Known(distinct(c, axis) as i64),
        (None, Some(a), Some(s)) => ctx.data_dependent(&s[a].clone()),
        (None, None, Some(s)) => ctx.data_dependent(&crate::infer::dims::product(s)),
        (None, _, None) => Dim::Unknown,
    };
    let y = match (axis, input) {
        (None, _) => Some(vec![count.clone()]),
        (Some(a), Some(s)) => {
            let mut s = s.to_vec();
            s[a] = count.clone();
            Some(s)
        }
        (Some(_), None) => None,
    };
    ctx.set_tensor(0, dtype, y);
    ctx.set_shape(1, DType::Int64, vec![count.clone()]);
    let inverse = match (axis, input) {
        (None, Some(s)) => crate::infer::dims::product(s),
        (Some(a), Some(s)) => s[a].clone(),
        _ => Dim::Unknown,
    };
    ctx.set_shape(2, DType::Int64, vec![inverse]);
    ctx.set_shape(3, DType::Int64, vec![count]);
    Ok(())
}

/// int64 `[selected, 3]`; the count depends on the boxes and scores: at most
/// `max_output_boxes_per_class` (absent: 0) per batch and class, and no more than the boxes.
/// Boxes are `[batches, boxes, 4]`, scores `[batches, classes, boxes]`.
fn non_max_suppression(ctx: &mut NodeCtx) -> Result<()> {
    let dim = |s: Option<&[Dim]>, i: usize| s.and_then(|s| s.get(i).cloned());
    let boxes = ctx.shape(0)?;
    let scores = ctx.shape(1)?;
    let batches = dim(boxes, 0).or(dim(scores, 0)).unwrap_or(Dim::Unknown);
    let count = dim(boxes, 1).or(dim(scores, 2)).unwrap_or(Dim::Unknown);
    let classes = dim(scores, 1).unwrap_or(Dim::Unknown);
    let per_class = if ctx.has_input(2) {
        match ctx.ints(2).and_then(|v| v.first().copied()) {
            Some(m) => ctx.tighter_bound(&Dim::Known(m.max(0)), &count),
            None => count,
        }
    } else {
        Dim::Known(0)
    };
    let bound = dims::product(&[batches, classes, per_class]);
    let selected = match bound {
        Dim::Known(0) => Dim::Known(0),
        b => ctx.data_dependent(&b),
    };
    ctx.set_shape(0, DType::Int64, vec![selected, Dim::Known(3)]);
    Ok(())
}

/// `Det`: the input without its last two (square) dims.
fn det(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.dtype(0)?;
    let out = match ctx.shape(0)? {
        Some(s) if s.len() >= 2 => Some(s[..s.len() - 2].to_vec()),
        Some(_) => return Err(ctx.error("input must have rank 2 or more")),
        None => None,
    };
    ctx.set_tensor(0, dtype, out);
    Ok(())
}

/// `BitCast`: same shape, element type from attribute `to` (equal bit widths).
fn bit_cast(ctx: &mut NodeCtx) -> Result<()> {
    let to = ctx
        .attr_dtype("to")?
        .ok_or_else(|| ctx.error("attribute 'to' is required"))?;
    let from = ctx.dtype(0)?;
    if from.bits() != to.bits() {
        return Err(ctx.error(format!("cannot bit-cast {from} to {to}: bit widths differ")));
    }
    shape_of_input(ctx, 0, 0, to)
}
