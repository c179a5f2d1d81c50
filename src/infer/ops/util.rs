//! Small helpers the rule families share.

use anyhow::Result;

use crate::infer::NodeCtx;
use crate::infer::dims;
use crate::ir::{Dim, Shape, TensorType, ValueType};

/// Output `to` gets the tensor type of input `from`.
pub fn same_as_input(ctx: &mut NodeCtx, from: usize, to: usize) -> Result<()> {
    let t = ctx.tensor(from)?;
    ctx.set(to, ValueType::Tensor(t.clone()));
    Ok(())
}

/// Output `to` gets input `from`'s shape with another element type.
pub fn shape_of_input(
    ctx: &mut NodeCtx,
    from: usize,
    to: usize,
    dtype: crate::ir::DType,
) -> Result<()> {
    let shape = ctx.shape(from)?.map(<[Dim]>::to_vec);
    ctx.set_tensor(to, dtype, shape);
    Ok(())
}

/// The multidirectional broadcast of the given (present) inputs' shapes; `None` when a rank
/// is unknown.
pub fn broadcast_inputs(
    ctx: &NodeCtx,
    inputs: impl IntoIterator<Item = usize>,
) -> Result<Option<Shape>> {
    let mut shapes = Vec::new();
    for i in inputs {
        if !ctx.has_input(i) {
            continue;
        }
        match ctx.shape(i)? {
            Some(s) => shapes.push(s),
            None => return Ok(None),
        }
    }
    dims::broadcast(&shapes).map(Some).map_err(|e| ctx.error(e))
}

/// An integer-list argument that may come from an attribute or from an input.
pub enum IntsArg {
    /// Neither the attribute nor the input is given.
    Absent,
    /// The input is given but its value is not known before run time.
    Unknown,
    /// The values.
    Known(Vec<i64>),
}

/// Integers from attribute `name`.
pub fn ints_attr(ctx: &NodeCtx, name: &str) -> IntsArg {
    match ctx.attr_ints(name) {
        Some(v) => IntsArg::Known(v.to_vec()),
        None => IntsArg::Absent,
    }
}

/// Integers from input `i`.
pub fn ints_input(ctx: &NodeCtx, i: usize) -> IntsArg {
    if !ctx.has_input(i) {
        return IntsArg::Absent;
    }
    match ctx.ints(i) {
        Some(v) => IntsArg::Known(v),
        None => IntsArg::Unknown,
    }
}

/// Normalises a list of axes into `0..rank`, rejecting duplicates.
pub fn axes(ctx: &NodeCtx, axes: &[i64], rank: usize) -> Result<Vec<usize>> {
    let mut out = Vec::with_capacity(axes.len());
    for &a in axes {
        let axis = ctx.axis(a, rank)?;
        if out.contains(&axis) {
            return Err(ctx.error(format!("axis {a} is repeated")));
        }
        out.push(axis);
    }
    Ok(out)
}

/// The most specific type covering both: equal dims stay, differing ones become unknown,
/// differing ranks give an unknown rank. `None` when the kinds or element types differ.
pub fn merge_types(a: &ValueType, b: &ValueType) -> Option<ValueType> {
    merge_types_by(a, b, &|_, _| Dim::Unknown)
}

/// [`merge_types`] with `differ` giving the dimension covering two that differ (the larger,
/// say, where either may be the size at run time and the larger is what to plan for).
pub fn merge_types_by(
    a: &ValueType,
    b: &ValueType,
    differ: &dyn Fn(&Dim, &Dim) -> Dim,
) -> Option<ValueType> {
    Some(match (a, b) {
        (ValueType::Tensor(x), ValueType::Tensor(y)) if x.dtype == y.dtype => {
            ValueType::Tensor(merge_tensors(x, y, differ))
        }
        (ValueType::SparseTensor(x), ValueType::SparseTensor(y)) if x.dtype == y.dtype => {
            ValueType::SparseTensor(merge_tensors(x, y, differ))
        }
        (ValueType::Sequence(x), ValueType::Sequence(y)) => {
            ValueType::Sequence(Box::new(merge_types_by(x, y, differ)?))
        }
        (ValueType::Optional(x), ValueType::Optional(y)) => {
            ValueType::Optional(Box::new(merge_types_by(x, y, differ)?))
        }
        (ValueType::Map(k, x), ValueType::Map(l, y)) if k == l => {
            ValueType::Map(*k, Box::new(merge_types_by(x, y, differ)?))
        }
        (ValueType::Opaque, ValueType::Opaque) => ValueType::Opaque,
        _ => return None,
    })
}

fn merge_tensors(x: &TensorType, y: &TensorType, differ: &dyn Fn(&Dim, &Dim) -> Dim) -> TensorType {
    let shape = match (&x.shape, &y.shape) {
        (Some(p), Some(q)) if p.len() == q.len() => Some(
            p.iter()
                .zip(q)
                .map(|(a, b)| if a == b { a.clone() } else { differ(a, b) })
                .collect(),
        ),
        _ => None,
    };
    TensorType {
        dtype: x.dtype,
        shape,
    }
}
