//! Operators that select, split or grow tensors by index: `Gather*`, `Scatter*`, `Slice`,
//! `Split`, `Tile`, `Pad`, `Compress`, `NonZero` and friends.

use anyhow::Result;

use super::Entry;
use super::util::{IntsArg, axes, ints_attr, ints_input, same_as_input};
use crate::infer::NodeCtx;
use crate::infer::dims;
use crate::infer::fold;
use crate::ir::{ConstData, DType, Dim, Shape};

/// This family's rows of the rule table.
pub const RULES: &[Entry] = &[
    ("", "Gather", gather),
    ("", "GatherElements", gather_elements),
    ("", "GatherND", gather_nd),
    ("", "Scatter", data_like),
    ("", "ScatterElements", data_like),
    ("", "ScatterND", data_like),
    ("", "TensorScatter", data_like),
    ("", "Trilu", data_like),
    ("", "ReverseSequence", data_like),
    ("", "Slice", slice),
    ("", "Split", split),
    ("", "Tile", tile),
    ("", "Pad", pad),
    ("", "Compress", compress),
    ("", "NonZero", non_zero),
    ("", "CenterCropPad", center_crop_pad),
];

/// Same type as input 0.
fn data_like(ctx: &mut NodeCtx) -> Result<()> {
    same_as_input(ctx, 0, 0)
}

/// `Gather`: `data[:axis] + indices + data[axis+1:]`, folded for small known values.
fn gather(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.dtype(0)?;
    let (Some(data), Some(indices)) = (ctx.shape(0)?, ctx.shape(1)?) else {
        ctx.set_tensor(0, dtype, None);
        return Ok(());
    };
    let axis = ctx.attr_axis("axis", 0, data.len())?;
    let mut out: Shape = data[..axis].to_vec();
    out.extend_from_slice(indices);
    out.extend_from_slice(&data[axis + 1..]);
    ctx.set_shape(0, dtype, out.clone());
    let Some(idx) = ctx.ints(1) else {
        return Ok(());
    };
    let Some(picked) = normalize_indices(&idx, &data[axis]) else {
        return Ok(());
    };
    if let Some(c) = ctx.constant(0) {
        let sizes: Option<Vec<i64>> = dims::known(&out);
        if let Some(v) = fold::select(c, axis, &picked)
            .zip(sizes)
            .and_then(|(v, s)| fold::reshape(&v, &to_usize(&s)))
        {
            ctx.set_constant(0, v);
        }
    } else if data.len() == 1
        && let Some(values) = ctx.dims_value(0)
    {
        let d: Vec<Dim> = picked.iter().filter_map(|&i| values.get(i).cloned()).collect();
        if d.len() == picked.len() {
            ctx.set_dims_value(0, d);
        }
    }
    Ok(())
}

/// Indices into a dimension of known size, negatives wrapped; `None` when out of range.
fn normalize_indices(idx: &[i64], dim: &Dim) -> Option<Vec<usize>> {
    let n = dim.value()?;
    idx.iter()
        .map(|&i| {
            let j = if i < 0 { i + n } else { i };
            (0..n).contains(&j).then_some(j as usize)
        })
        .collect()
}

fn to_usize(v: &[i64]) -> Vec<usize> {
    v.iter().map(|&d| d.max(0) as usize).collect()
}

/// `GatherElements`: the shape of the indices.
fn gather_elements(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.dtype(0)?;
    let shape = ctx.shape(1)?.map(<[Dim]>::to_vec);
    ctx.set_tensor(0, dtype, shape);
    Ok(())
}

/// `GatherND`: `data[:b] + indices[:-1] + data[b + indices[-1]:]`.
fn gather_nd(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.dtype(0)?;
    let b = ctx.attr_i("batch_dims", 0)?.max(0) as usize;
    let (Some(data), Some(indices)) = (ctx.shape(0)?, ctx.shape(1)?) else {
        ctx.set_tensor(0, dtype, None);
        return Ok(());
    };
    let Some(Dim::Known(k)) = indices.last() else {
        ctx.set_tensor(0, dtype, None);
        return Ok(());
    };
    let k = *k as usize;
    if b + k > data.len() || b >= indices.len() {
        return Err(ctx.error("indices do not fit the data rank"));
    }
    let mut out: Shape = data[..b].to_vec();
    out.extend_from_slice(&indices[b..indices.len() - 1]);
    out.extend_from_slice(&data[b + k..]);
    ctx.set_shape(0, dtype, out);
    Ok(())
}

/// The start and length of a slice of a dimension of size `n` (ONNX clamping rules).
fn slice_dim(n: i64, start: i64, end: i64, step: i64) -> (i64, i64) {
    if n <= 0 {
        return (0, 0);
    }
    let wrap = |v: i64| if v < 0 { v + n } else { v };
    let (s, e) = (wrap(start), wrap(end));
    if step > 0 {
        let s = s.clamp(0, n);
        let e = e.clamp(0, n);
        (s, steps_in((e - s).max(0), step))
    } else {
        let s = s.clamp(0, n - 1);
        let e = e.clamp(-1, n - 1);
        (s, steps_in((s - e).max(0), step.saturating_neg()))
    }
}

/// How many strides of `step` start inside a span of `span` elements.
fn steps_in(span: i64, step: i64) -> i64 {
    if span == 0 { 0 } else { (span - 1) / step + 1 }
}

/// `Slice`: attributes before opset 10, inputs `starts, ends[, axes[, steps]]` from 10.
///
/// `starts`/`ends` may be shape values rather than constants (`Shape(x)[1]`, say): a sliced
/// axis of unknown or symbolic size keeps its size where the slice provably takes the whole
/// axis (see [`takes_whole_axis`]).
fn slice(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.dtype(0)?;
    let Some(input) = ctx.shape(0)? else {
        ctx.set_tensor(0, dtype, None);
        return Ok(());
    };
    let rank = input.len();
    let (starts, ends, axes_arg, steps) = if ctx.opset() < 10 {
        (
            bound_dims(ctx, ints_attr(ctx, "starts"), None),
            bound_dims(ctx, ints_attr(ctx, "ends"), None),
            ints_attr(ctx, "axes"),
            IntsArg::Absent,
        )
    } else {
        (
            bound_dims(ctx, ints_input(ctx, 1), Some(1)),
            bound_dims(ctx, ints_input(ctx, 2), Some(2)),
            ints_input(ctx, 3),
            ints_input(ctx, 4),
        )
    };
    let slice_axes: Option<Vec<usize>> = match axes_arg {
        IntsArg::Known(a) => Some(axes(ctx, &a, rank)?),
        IntsArg::Absent => starts.as_ref().map(|s| (0..s.len().min(rank)).collect()),
        IntsArg::Unknown => None,
    };
    let (Some(starts), Some(ends)) = (starts, ends) else {
        let out = match slice_axes {
            Some(a) => input
                .iter()
                .enumerate()
                .map(|(i, d)| if a.contains(&i) { Dim::Unknown } else { d.clone() })
                .collect(),
            None => vec![Dim::Unknown; rank],
        };
        ctx.set_shape(0, dtype, out);
        return Ok(());
    };
    let Some(slice_axes) = slice_axes else {
        ctx.set_shape(0, dtype, vec![Dim::Unknown; rank]);
        return Ok(());
    };
    let steps = match steps {
        IntsArg::Known(s) => s,
        IntsArg::Absent => vec![1; slice_axes.len()],
        IntsArg::Unknown => {
            let out = input
                .iter()
                .enumerate()
                .map(|(i, d)| if slice_axes.contains(&i) { Dim::Unknown } else { d.clone() })
                .collect();
            ctx.set_shape(0, dtype, out);
            return Ok(());
        }
    };
    if starts.len() != slice_axes.len() || ends.len() != slice_axes.len() || steps.len() != slice_axes.len() {
        return Err(ctx.error("starts, ends, axes and steps differ in length"));
    }
    let mut out = input.to_vec();
    // Element positions per sliced axis, kept only for values small enough to fold.
    let foldable = ctx.constant(0).is_some() || (rank == 1 && ctx.dims_value(0).is_some());
    let mut picks: Vec<(usize, Vec<usize>)> = Vec::new();
    for (k, &axis) in slice_axes.iter().enumerate() {
        let step = steps[k];
        if step == 0 {
            return Err(ctx.error("slice step is 0"));
        }
        out[axis] = match (&input[axis], &starts[k], &ends[k]) {
            (Dim::Known(n), Dim::Known(start), Dim::Known(end)) => {
                let (s, len) = slice_dim(*n, *start, *end, step);
                if foldable {
                    picks.push((axis, (0..len).map(|i| (s + i * step) as usize).collect()));
                }
                Dim::Known(len)
            }
            (d, start, end) if takes_whole_axis(d, start, end, step) => d.clone(),
            (d, start, end) if step == 1 => unclamped_len(ctx, d, start, end),
            _ => Dim::Unknown,
        };
    }
    ctx.set_shape(0, dtype, out);
    if picks.len() != slice_axes.len() {
        return Ok(());
    }
    if let Some(c) = ctx.constant(0) {
        let mut v = c.clone();
        for (axis, idx) in &picks {
            match fold::select(&v, *axis, idx) {
                Some(next) => v = next,
                None => return Ok(()),
            }
        }
        ctx.set_constant(0, v);
    } else if let Some(values) = ctx.dims_value(0)
        && let Some((_, idx)) = picks.first()
    {
        let d: Vec<Dim> = idx.iter().filter_map(|&i| values.get(i).cloned()).collect();
        ctx.set_dims_value(0, d);
    }
    Ok(())
}

/// The length `end - start` of a unit-step slice of an axis of size `d` whose bounds provably
/// need no clamping for any value of the symbols (`0 ≤ start ≤ end ≤ d` over their ranges),
/// such as `position_ids[:, 0:sequence]` of a 128-long table with `sequence ≤ 128`; a
/// negative known bound counts from the end, one past any real size clamps. `Unknown` when
/// that cannot be proven.
fn unclamped_len(ctx: &NodeCtx, d: &Dim, start: &Dim, end: &Dim) -> Dim {
    const FAR: i64 = i32::MAX as i64;
    let from_end = |b: &Dim| match b {
        Dim::Known(v) if *v >= FAR => d.clone(),
        Dim::Known(v) if *v <= -FAR => Dim::Known(0),
        Dim::Known(v) if *v < 0 => dims::add(d, b),
        other => other.clone(),
    };
    let (start, end) = (from_end(start), from_end(end));
    let len = dims::sub(&end, &start);
    let fits = ctx.proven_nonneg(&start) && ctx.proven_nonneg(&len) && ctx.proven_nonneg(&dims::sub(d, &end));
    if fits { len } else { Dim::Unknown }
}

/// Slice bounds as dimensions: the integers when known, else the shape value of `input` (such
/// as `Unsqueeze(Shape(x)[1])`, whose element is `x`'s symbolic dim); `None` when neither is
/// known or the argument is absent.
fn bound_dims(ctx: &NodeCtx, arg: IntsArg, input: Option<usize>) -> Option<Vec<Dim>> {
    match (arg, input) {
        (IntsArg::Known(v), _) => Some(v.into_iter().map(Dim::Known).collect()),
        (IntsArg::Unknown, Some(i)) => ctx.dims_value(i).map(|d| d.into_owned()),
        _ => None,
    }
}

/// True when slicing an axis of size `d` (unknown or symbolic) from `start` to `end` by `step`
/// provably selects every element, whatever `d` is: forwards from 0 (or from a start so
/// negative that it clamps to 0) to the axis's own size or past any real size (`INT64_MAX`),
/// or backwards from the last element (-1, or a start past any real size) to before the first
/// (`INT64_MIN`). "Past any real size" is taken as beyond `i32::MAX`, as exporters write
/// `INT64_MAX`/`INT64_MIN` (or `INT32_MAX`) for "to the end".
fn takes_whole_axis(d: &Dim, start: &Dim, end: &Dim, step: i64) -> bool {
    const FAR: i64 = i32::MAX as i64;
    match (start, step) {
        (Dim::Known(s), 1) if *s == 0 || *s <= -FAR => match end {
            Dim::Known(e) => *e >= FAR,
            Dim::Symbol(_) | Dim::Expr(_) => end == d,
            Dim::Unknown => false,
        },
        (Dim::Known(s), -1) if *s == -1 || *s >= FAR => matches!(end, Dim::Known(e) if *e <= -FAR),
        _ => false,
    }
}

/// `Split` by sizes (attribute before 13, input from 13), `num_outputs` (18) or equally.
fn split(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.dtype(0)?;
    let n = ctx.output_count();
    let Some(input) = ctx.shape(0)? else {
        for i in 0..n {
            ctx.set_tensor(i, dtype, None);
        }
        return Ok(());
    };
    let axis = ctx.attr_axis("axis", 0, input.len())?;
    let arg = if ctx.opset() < 13 { ints_attr(ctx, "split") } else { ints_input(ctx, 1) };
    let sizes: Vec<Dim> = match arg {
        IntsArg::Known(s) => {
            if s.len() != n {
                return Err(ctx.error(format!("{} split sizes for {n} outputs", s.len())));
            }
            if let Some(d) = input[axis].value()
                && s.iter().sum::<i64>() != d
            {
                return Err(ctx.error(format!("split sizes {s:?} do not add up to {d}")));
            }
            s.into_iter().map(Dim::Known).collect()
        }
        IntsArg::Unknown => vec![Dim::Unknown; n],
        IntsArg::Absent => {
            let parts = ctx.attr_i("num_outputs", n as i64)?.max(1);
            match input[axis].value() {
                Some(d) => {
                    let chunk = (d + parts - 1) / parts;
                    if ctx.attr("num_outputs").is_none() && d % parts != 0 {
                        return Err(ctx.error(format!("cannot split {d} into {parts} equal parts")));
                    }
                    (0..n as i64)
                        .map(|i| Dim::Known(chunk.min(d - chunk * i).max(0)))
                        .collect()
                }
                None => vec![Dim::Unknown; n],
            }
        }
    };
    let mut offset = 0i64;
    for (i, size) in sizes.into_iter().enumerate() {
        let mut out = input.to_vec();
        out[axis] = size.clone();
        ctx.set_shape(i, dtype, out);
        if let (Some(c), Dim::Known(len)) = (ctx.constant(0), &size) {
            let idx: Vec<usize> = (offset..offset + len).map(|j| j as usize).collect();
            if let Some(v) = fold::select(c, axis, &idx) {
                ctx.set_constant(i, v);
            }
            offset += len;
        }
    }
    Ok(())
}

/// `Tile`: each dimension times its repeat count.
fn tile(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.dtype(0)?;
    let Some(input) = ctx.shape(0)? else {
        ctx.set_tensor(0, dtype, None);
        return Ok(());
    };
    let out = match ctx.dims_value(1) {
        Some(r) if r.len() == input.len() => input.iter().zip(r.iter()).map(|(d, k)| dims::mul(d, k)).collect(),
        Some(r) => return Err(ctx.error(format!("{} repeats for rank {}", r.len(), input.len()))),
        None => vec![Dim::Unknown; input.len()],
    };
    ctx.set_shape(0, dtype, out);
    Ok(())
}

/// `Pad`: pads from attribute `pads`/`paddings` (before 11) or input 1, optional axes (18).
fn pad(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.dtype(0)?;
    let Some(input) = ctx.shape(0)? else {
        ctx.set_tensor(0, dtype, None);
        return Ok(());
    };
    let rank = input.len();
    let pads = if ctx.opset() < 11 {
        match ints_attr(ctx, "pads") {
            IntsArg::Absent => ints_attr(ctx, "paddings"),
            p => p,
        }
    } else {
        ints_input(ctx, 1)
    };
    let pad_axes: Vec<usize> = match ints_input(ctx, 3) {
        IntsArg::Known(a) => axes(ctx, &a, rank)?,
        IntsArg::Absent => (0..rank).collect(),
        IntsArg::Unknown => {
            ctx.set_shape(0, dtype, vec![Dim::Unknown; rank]);
            return Ok(());
        }
    };
    let IntsArg::Known(pads) = pads else {
        let out = input
            .iter()
            .enumerate()
            .map(|(i, d)| if pad_axes.contains(&i) { Dim::Unknown } else { d.clone() })
            .collect();
        ctx.set_shape(0, dtype, out);
        return Ok(());
    };
    let k = pad_axes.len();
    if pads.len() != 2 * k {
        return Err(ctx.error(format!("{} pads for {k} axes", pads.len())));
    }
    let mut out = input.to_vec();
    for (j, &axis) in pad_axes.iter().enumerate() {
        let Some(both) = pads[j].checked_add(pads[j + k]) else {
            return Err(ctx.error(format!("pads of axis {axis} overflow 64 bits")));
        };
        out[axis] = dims::add(&out[axis], &Dim::Known(both));
    }
    ctx.set_shape(0, dtype, out);
    Ok(())
}

/// `Compress`: the count of true conditions, known when the condition is; otherwise a
/// data-dependent count bounded by the condition's length capped by the axis length (the
/// element count without an axis): the elements beyond the condition are dropped.
fn compress(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.dtype(0)?;
    let count = ctx.constant(1).and_then(|c| match &c.data {
        ConstData::Int(a) => Some(a.iter().filter(|&&v| v != 0).count() as i64),
        _ => None,
    });
    let axis = match (ctx.attr_opt_i("axis")?, ctx.shape(0)?) {
        (Some(axis), Some(input)) => Some(Some(ctx.axis(axis, input.len())?)),
        (Some(_), None) => None,
        (None, _) => Some(None),
    };
    let length = match (axis, ctx.shape(0)?) {
        (Some(Some(a)), Some(input)) => input[a].clone(),
        (Some(None), Some(input)) => dims::product(input),
        _ => Dim::Unknown,
    };
    let kept = match count {
        Some(n) => Dim::Known(n),
        None => {
            let condition = ctx
                .shape(1)?
                .and_then(|s| s.first().cloned())
                .unwrap_or(Dim::Unknown);
            let bound = match condition {
                Dim::Unknown => length.clone(),
                c => ctx.tighter_bound(&length, &c),
            };
            ctx.data_dependent(&bound)
        }
    };
    let out = match (axis, ctx.shape(0)?) {
        (Some(None), _) => Some(vec![kept]),
        (Some(Some(a)), Some(input)) => {
            let mut out = input.to_vec();
            out[a] = kept;
            Some(out)
        }
        _ => None,
    };
    ctx.set_tensor(0, dtype, out);
    Ok(())
}

/// `NonZero`: `[rank, count]`, the count known for a known input, else data-dependent and
/// bounded by the input's element count.
fn non_zero(ctx: &mut NodeCtx) -> Result<()> {
    let rank = ctx.shape(0)?.map_or(Dim::Unknown, |s| Dim::Known(s.len() as i64));
    let Some(c) = ctx.constant(0) else {
        let elements = ctx.shape(0)?.map_or(Dim::Unknown, dims::product);
        let count = ctx.data_dependent(&elements);
        ctx.set_shape(0, DType::Int64, vec![rank, count]);
        return Ok(());
    };
    let nonzero: Vec<bool> = match &c.data {
        ConstData::Int(a) => a.iter().map(|&v| v != 0).collect(),
        ConstData::Float(a) => a.iter().map(|&v| v != 0.0).collect(),
        ConstData::Str(a) => a.iter().map(|v| !v.is_empty()).collect(),
    };
    let shape = c.shape().to_vec();
    let mut coords: Vec<Vec<i64>> = vec![Vec::new(); shape.len()];
    for (flat, _) in nonzero.iter().enumerate().filter(|(_, nz)| **nz) {
        let mut rest = flat;
        for axis in (0..shape.len()).rev() {
            coords[axis].push((rest % shape[axis]) as i64);
            rest /= shape[axis];
        }
    }
    let count = nonzero.iter().filter(|&&v| v).count();
    let values: Vec<i64> = coords.into_iter().flatten().collect();
    match fold::int_tensor(DType::Int64, &[shape.len(), count], values) {
        Some(v) => ctx.set_constant(0, v),
        None => ctx.set_shape(0, DType::Int64, vec![rank, Dim::Known(count as i64)]),
    }
    Ok(())
}

/// `CenterCropPad(input, shape[, axes])`: the given axes take the requested sizes.
fn center_crop_pad(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.dtype(0)?;
    let Some(input) = ctx.shape(0)? else {
        ctx.set_tensor(0, dtype, None);
        return Ok(());
    };
    let rank = input.len();
    let crop_axes: Vec<usize> = match ctx.attr_ints("axes") {
        Some(a) => axes(ctx, a, rank)?,
        None => (0..rank).collect(),
    };
    let sizes = ctx.dims_value(1);
    let mut out = input.to_vec();
    for (j, &axis) in crop_axes.iter().enumerate() {
        out[axis] = sizes.as_ref().and_then(|s| s.get(j).cloned()).unwrap_or(Dim::Unknown);
    }
    ctx.set_shape(0, dtype, out);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::slice_dim;

    #[test]
    fn slice_clamps_like_the_spec() {
        assert_eq!(slice_dim(10, 0, i64::MAX, 1), (0, 10));
        assert_eq!(slice_dim(10, -3, i64::MAX, 1), (7, 3));
        assert_eq!(slice_dim(10, 1, 1000, 3), (1, 3));
        assert_eq!(slice_dim(10, -1, i64::MIN, -1), (9, 10));
        assert_eq!(slice_dim(10, 20, 0, -2), (9, 5));
        assert_eq!(slice_dim(10, 5, 2, 1), (5, 0));
        assert_eq!(slice_dim(0, -1, i64::MIN, -1), (0, 0));
    }
}
