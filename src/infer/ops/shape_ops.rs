//! Operators that only rearrange shapes: `Shape`, `Size`, `Reshape`, `Flatten`, `Transpose`,
//! `Squeeze`, `Unsqueeze`, `Expand`, `Concat`, with value propagation for shape computations.

use anyhow::Result;

use super::Entry;
use super::util::{IntsArg, axes, ints_attr, ints_input};
use crate::infer::NodeCtx;
use crate::infer::dims;
use crate::infer::fold;
use crate::ir::{Constant, DType, Dim, Shape};

/// This family's rows of the rule table.
pub const RULES: &[Entry] = &[
    ("", "Shape", shape),
    ("", "Size", size),
    ("", "Reshape", reshape),
    ("", "Flatten", flatten),
    ("", "Transpose", transpose),
    ("", "Squeeze", squeeze),
    ("", "Unsqueeze", unsqueeze),
    ("", "Expand", expand),
    ("", "Concat", concat),
];

/// `Shape`: a 1-D int64 holding the (optionally sliced, opset 15) input shape.
fn shape(ctx: &mut NodeCtx) -> Result<()> {
    let Some(input) = ctx.shape(0)? else {
        ctx.set_shape(0, DType::Int64, vec![Dim::Unknown]);
        return Ok(());
    };
    let rank = input.len() as i64;
    let clamp = |v: i64| (if v < 0 { v + rank } else { v }).clamp(0, rank) as usize;
    let start = clamp(ctx.attr_i("start", 0)?);
    let end = clamp(ctx.attr_i("end", rank)?);
    let dims = input[start..end.max(start)].to_vec();
    ctx.set_shape(0, DType::Int64, vec![Dim::Known(dims.len() as i64)]);
    ctx.set_dims_value(0, dims);
    Ok(())
}

/// `Size`: an int64 scalar, known when the shape is.
fn size(ctx: &mut NodeCtx) -> Result<()> {
    ctx.set_shape(0, DType::Int64, vec![]);
    if let Some(s) = ctx.shape(0)? {
        ctx.set_dims_value(0, vec![dims::product(s)]);
    }
    Ok(())
}

/// `Reshape` with `0` (copy, unless `allowzero`) and `-1` (inferred) entries.
fn reshape(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.dtype(0)?;
    let target: Option<Vec<Dim>> = if ctx.opset() < 5 {
        ctx.attr_ints("shape").map(crate::ir::known_shape)
    } else {
        ctx.dims_value(1).map(|d| d.into_owned())
    };
    let Some(target) = target else {
        let rank = ctx.listed_rank(1)?;
        ctx.set_tensor(0, dtype, rank.map(|r| vec![Dim::Unknown; r]));
        return Ok(());
    };
    let allowzero = ctx.attr_i("allowzero", 0)? == 1;
    let input = ctx.shape(0)?;
    let out = reshaped(ctx, input, &target, allowzero)?;
    ctx.set_shape(0, dtype, out.clone());
    if let (Some(c), Some(sizes)) = (ctx.constant(0), dims::known(&out))
        && let Some(v) = fold::reshape(c, &to_usize(&sizes))
    {
        ctx.set_constant(0, v);
    } else if out.len() <= 1
        && let Some(d) = ctx.dims_value(0)
    {
        let d = d.into_owned();
        ctx.set_dims_value(0, d);
    }
    Ok(())
}

/// The output shape of a reshape of `input` (rank maybe unknown) to `target`.
fn reshaped(ctx: &NodeCtx, input: Option<&[Dim]>, target: &[Dim], allowzero: bool) -> Result<Shape> {
    let mut out: Shape = Vec::with_capacity(target.len());
    let mut infer_at = None;
    for (i, d) in target.iter().enumerate() {
        match d {
            Dim::Known(0) if !allowzero => out.push(match input {
                Some(s) => s.get(i).cloned().ok_or_else(|| {
                    ctx.error(format!("shape entry {i} is 0 but the input has rank {}", s.len()))
                })?,
                None => Dim::Unknown,
            }),
            Dim::Known(-1) => {
                if infer_at.replace(i).is_some() {
                    return Err(ctx.error("the shape has more than one -1"));
                }
                out.push(Dim::Unknown);
            }
            Dim::Known(v) if *v < -1 => return Err(ctx.error(format!("invalid shape entry {v}"))),
            other => out.push(other.clone()),
        }
    }
    if let (Some(at), Some(input)) = (infer_at, input) {
        out[at] = inferred_dim(input, &out, at).map_err(|e| ctx.error(e))?;
    } else if infer_at.is_none()
        && let Some(input) = input
        && let (Dim::Known(have), Dim::Known(want)) = (dims::product(input), dims::product(&out))
        && have != want
    {
        return Err(ctx.error(format!("cannot reshape {have} elements into {want}")));
    }
    Ok(out)
}

/// The `-1` entry: input elements divided by the other output dims, symbolically where
/// needed (`[batch, seq, 768]` to `[batch, seq, 12, -1]` gives 64).
fn inferred_dim(input: &[Dim], out: &[Dim], at: usize) -> Result<Dim, String> {
    let others = out.iter().enumerate().filter(|&(i, _)| i != at).map(|(_, d)| d);
    if others.clone().all(|d| d.value().is_some()) && dims::product(others.clone()) == Dim::Unknown {
        return Err("the requested shape's element count overflows".into());
    }
    match (dims::product(input), dims::product(others)) {
        (Dim::Known(0), Dim::Known(0)) => Ok(Dim::Known(0)),
        (Dim::Known(_), Dim::Known(0)) => Err("cannot infer -1 next to a 0 dimension".into()),
        (Dim::Known(n), Dim::Known(k)) if n % k == 0 => Ok(Dim::Known(n / k)),
        (Dim::Known(n), Dim::Known(k)) => {
            Err(format!("cannot reshape {n} elements with {k} per -1 step"))
        }
        (have, per) => Ok(dims::div_exact(&have, &per)),
    }
}

fn to_usize(v: &[i64]) -> Vec<usize> {
    v.iter().map(|&d| d.max(0) as usize).collect()
}

/// `Flatten`: two dims, split at `axis`.
fn flatten(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.dtype(0)?;
    let Some(input) = ctx.shape(0)? else {
        ctx.set_shape(0, dtype, vec![Dim::Unknown, Dim::Unknown]);
        return Ok(());
    };
    let axis = ctx.attr_i("axis", 1)?;
    let r = input.len() as i64;
    let a = if axis < 0 { axis + r } else { axis };
    if !(0..=r).contains(&a) {
        return Err(ctx.error(format!("axis {axis} is out of range for rank {r}")));
    }
    let (outer, inner) = input.split_at(a as usize);
    let out = vec![dims::product(outer), dims::product(inner)];
    ctx.set_shape(0, dtype, out.clone());
    if let (Some(c), Some(sizes)) = (ctx.constant(0), dims::known(&out))
        && let Some(v) = fold::reshape(c, &to_usize(&sizes))
    {
        ctx.set_constant(0, v);
    }
    Ok(())
}

/// `Transpose` by `perm` (default: reversed axes).
fn transpose(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.dtype(0)?;
    let Some(input) = ctx.shape(0)? else {
        let rank = ctx.attr_ints("perm").map(|p| vec![Dim::Unknown; p.len()]);
        ctx.set_tensor(0, dtype, rank);
        return Ok(());
    };
    let perm: Vec<usize> = match ctx.attr_ints("perm") {
        Some(p) if !p.is_empty() || input.is_empty() => {
            if p.len() != input.len() {
                return Err(ctx.error(format!("perm has {} entries for rank {}", p.len(), input.len())));
            }
            axes(ctx, p, input.len())?
        }
        _ => (0..input.len()).rev().collect(),
    };
    ctx.set_shape(0, dtype, perm.iter().map(|&p| input[p].clone()).collect());
    if let Some(c) = ctx.constant(0)
        && let Some(v) = fold::transpose(c, &perm)
    {
        ctx.set_constant(0, v);
    }
    Ok(())
}

/// The axes of Squeeze/Unsqueeze: attribute before opset 13, input from 13.
fn squeeze_axes(ctx: &NodeCtx) -> IntsArg {
    if ctx.opset() < 13 {
        ints_attr(ctx, "axes")
    } else {
        ints_input(ctx, 1)
    }
}

/// `Squeeze`: removes the given axes (or every dimension known to be 1).
fn squeeze(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.dtype(0)?;
    let arg = squeeze_axes(ctx);
    let Some(input) = ctx.shape(0)? else {
        ctx.set_tensor(0, dtype, None);
        return Ok(());
    };
    let out: Shape = match arg {
        IntsArg::Known(a) => {
            let remove = axes(ctx, &a, input.len())?;
            for &axis in &remove {
                if let Dim::Known(v) = input[axis]
                    && v != 1
                {
                    return Err(ctx.error(format!("cannot squeeze axis {axis} of size {v}")));
                }
            }
            input
                .iter()
                .enumerate()
                .filter(|(i, _)| !remove.contains(i))
                .map(|(_, d)| d.clone())
                .collect()
        }
        IntsArg::Absent => input.iter().filter(|d| **d != Dim::Known(1)).cloned().collect(),
        IntsArg::Unknown => {
            ctx.set_tensor(0, dtype, None);
            return Ok(());
        }
    };
    finish_rank_change(ctx, dtype, out)
}

/// `Unsqueeze`: inserts size-1 axes (positions in the output's rank).
fn unsqueeze(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.dtype(0)?;
    let arg = squeeze_axes(ctx);
    let a = match arg {
        IntsArg::Known(a) => a,
        IntsArg::Absent => return Err(ctx.error("axes are required")),
        IntsArg::Unknown => {
            ctx.set_tensor(0, dtype, None);
            return Ok(());
        }
    };
    let Some(input) = ctx.shape(0)? else {
        ctx.set_tensor(0, dtype, None);
        return Ok(());
    };
    let rank = input.len() + a.len();
    let insert = axes(ctx, &a, rank)?;
    let mut rest = input.iter();
    let out: Shape = (0..rank)
        .map(|i| {
            if insert.contains(&i) {
                Dim::Known(1)
            } else {
                rest.next().cloned().unwrap_or(Dim::Unknown)
            }
        })
        .collect();
    finish_rank_change(ctx, dtype, out)
}

/// Sets the output of a reshape-like op, folding its value or passing a shape value on.
fn finish_rank_change(ctx: &mut NodeCtx, dtype: DType, out: Shape) -> Result<()> {
    ctx.set_shape(0, dtype, out.clone());
    if let (Some(c), Some(sizes)) = (ctx.constant(0), dims::known(&out)) {
        if let Some(v) = fold::reshape(c, &to_usize(&sizes)) {
            ctx.set_constant(0, v);
        }
    } else if out.len() <= 1
        && let Some(d) = ctx.dims_value(0)
    {
        let d = d.into_owned();
        ctx.set_dims_value(0, d);
    }
    Ok(())
}

/// `Expand`: broadcast of the input shape and the requested shape.
fn expand(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.dtype(0)?;
    let Some(target) = ctx.dims_value(1) else {
        let len = ctx.listed_rank(1)?;
        let out = match (len, ctx.shape(0)?) {
            (Some(n), Some(input)) => {
                let unknown = vec![Dim::Unknown; n];
                Some(dims::broadcast(&[input, &unknown]).map_err(|e| ctx.error(e))?)
            }
            _ => None,
        };
        ctx.set_tensor(0, dtype, out);
        return Ok(());
    };
    let out = match ctx.shape(0)? {
        Some(input) => Some(dims::broadcast(&[input, &target]).map_err(|e| ctx.error(e))?),
        None => None,
    };
    if let (Some(c), Some(sizes)) = (ctx.constant(0), out.as_deref().and_then(dims::known))
        && let Some(v) = fold::expand(c, &to_usize(&sizes))
    {
        ctx.set_constant(0, v);
        return Ok(());
    }
    ctx.set_tensor(0, dtype, out);
    Ok(())
}

/// `Concat` along `axis`: dims add up on the axis and agree elsewhere.
fn concat(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.dtype(0)?;
    let present: Vec<usize> = (0..ctx.input_count()).filter(|&i| ctx.has_input(i)).collect();
    let mut shapes = Vec::with_capacity(present.len());
    for &i in &present {
        match ctx.shape(i)? {
            Some(s) => shapes.push(s),
            None => {
                let rank = shapes.first().map(|s: &&[Dim]| vec![Dim::Unknown; s.len()]);
                ctx.set_tensor(0, dtype, rank);
                return Ok(());
            }
        }
    }
    let Some(first) = shapes.first() else {
        return Err(ctx.error("needs at least one input"));
    };
    let rank = first.len();
    // Concat-1 defaults to axis 1; from opset 4 the axis is required.
    let default_axis = if ctx.opset() < 4 { 1 } else { 0 };
    let axis = ctx.attr_axis("axis", default_axis, rank)?;
    let mut out: Shape = first.to_vec();
    out[axis] = Dim::Known(0);
    for s in &shapes {
        if s.len() != rank {
            return Err(ctx.error(format!("inputs have ranks {rank} and {}", s.len())));
        }
        for (i, d) in s.iter().enumerate() {
            if i == axis {
                out[i] = dims::add(&out[i], d);
            } else {
                out[i] = agree(&out[i], d).ok_or_else(|| {
                    ctx.error(format!("inputs disagree on dimension {i}: {} and {d}", out[i]))
                })?;
            }
        }
    }
    ctx.set_shape(0, dtype, out);
    let consts: Option<Vec<&Constant>> = present.iter().map(|&i| ctx.constant(i)).collect();
    if let Some(parts) = consts {
        if let Some(v) = fold::concat(&parts, axis) {
            ctx.set_constant(0, v);
        }
    } else if rank == 1 {
        let values: Option<Vec<_>> = present.iter().map(|&i| ctx.dims_value(i)).collect();
        if let Some(values) = values {
            let joined: Vec<Dim> = values.iter().flat_map(|v| v.iter().cloned()).collect();
            ctx.set_dims_value(0, joined);
        }
    }
    Ok(())
}

/// Two views of a dimension that must be equal: the more specific one, or `None` on conflict.
fn agree(a: &Dim, b: &Dim) -> Option<Dim> {
    match (a, b) {
        (Dim::Known(x), Dim::Known(y)) => (x == y).then(|| a.clone()),
        (Dim::Known(_), _) => Some(a.clone()),
        (_, Dim::Known(_)) => Some(b.clone()),
        (Dim::Symbol(_) | Dim::Expr(_), _) => Some(a.clone()),
        _ => Some(b.clone()),
    }
}
