//! Sequences and optionals: `Sequence*`, `SplitToSequence`, `ConcatFromSequence`,
//! `SequenceMap`, `Optional`, `OptionalHasElement`, `OptionalGetElement`.
//!
//! The shape value of a sequence is its length (one dimension), so `SequenceLength` folds and
//! an insertion into a known-empty sequence takes the inserted tensor's exact type.

use anyhow::Result;

use super::Entry;
use super::util::merge_types;
use crate::infer::NodeCtx;
use crate::ir::{DType, Dim, TensorType, ValueType};

/// This family's rows of the rule table.
pub const RULES: &[Entry] = &[
    ("", "SequenceEmpty", sequence_empty),
    ("", "SequenceConstruct", sequence_construct),
    ("", "SequenceInsert", sequence_insert),
    ("", "SequenceAt", sequence_at),
    ("", "SequenceErase", sequence_erase),
    ("", "SequenceLength", sequence_length),
    ("", "SplitToSequence", split_to_sequence),
    ("", "ConcatFromSequence", concat_from_sequence),
    ("", "SequenceMap", sequence_map),
    ("", "Optional", optional),
    ("", "OptionalHasElement", optional_has_element),
    ("", "OptionalGetElement", optional_get_element),
];

fn seq_of(ty: ValueType) -> ValueType {
    ValueType::Sequence(Box::new(ty))
}

/// The element type of sequence input `i`.
fn element<'a>(ctx: &NodeCtx<'a>, i: usize) -> Result<&'a ValueType> {
    match ctx.input(i)? {
        ValueType::Sequence(e) => Ok(e),
        other => Err(ctx.error(format!("input {i} must be a sequence, not {other}"))),
    }
}

/// A sequence of unknown-rank tensors of attribute `dtype` (default float).
fn sequence_empty(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.attr_dtype("dtype")?.unwrap_or(DType::Float);
    ctx.set(0, seq_of(ValueType::Tensor(TensorType { dtype, shape: None })));
    ctx.set_dims_value(0, vec![Dim::Known(0)]);
    Ok(())
}

/// The length of sequence input `i`, when known.
pub(super) fn length(ctx: &NodeCtx, i: usize) -> Option<Dim> {
    ctx.dims_value(i).and_then(|d| d.first().cloned())
}

/// A sequence whose element type covers every input.
fn sequence_construct(ctx: &mut NodeCtx) -> Result<()> {
    let mut ty = ctx.input(0)?.clone();
    for i in 1..ctx.input_count() {
        let next = ctx.input(i)?;
        ty = merge_types(&ty, next).ok_or_else(|| ctx.error(format!("inputs of types {ty} and {next} cannot form one sequence")))?;
    }
    ctx.set(0, seq_of(ty));
    ctx.set_dims_value(0, vec![Dim::Known(ctx.input_count() as i64)]);
    Ok(())
}

/// The sequence's element type merged with the inserted tensor's (just the tensor's type
/// when the sequence is known to be empty).
fn sequence_insert(ctx: &mut NodeCtx) -> Result<()> {
    let seq = ctx.input(0)?;
    let len = length(ctx, 0);
    if len == Some(Dim::Known(0)) {
        let ty = seq_of(ctx.input(1)?.clone());
        ctx.set(0, ty);
        ctx.set_dims_value(0, vec![Dim::Known(1)]);
        return Ok(());
    }
    if let Some(n) = &len {
        ctx.set_dims_value(0, vec![crate::infer::dims::add(n, &Dim::Known(1))]);
    }
    let ty = merge_types(seq, &seq_of(ctx.input(1)?.clone()))
        .ok_or_else(|| ctx.error(format!("cannot insert {} into {seq}", ctx.input(1).map_or(String::new(), |t| t.to_string()))))?;
    ctx.set(0, ty);
    Ok(())
}

fn sequence_at(ctx: &mut NodeCtx) -> Result<()> {
    let ty = element(ctx, 0)?.clone();
    ctx.set(0, ty);
    Ok(())
}

fn sequence_erase(ctx: &mut NodeCtx) -> Result<()> {
    let ty = ctx.input(0)?.clone();
    ctx.set(0, ty);
    if let Some(Dim::Known(n)) = length(ctx, 0)
        && n > 0
    {
        ctx.set_dims_value(0, vec![Dim::Known(n - 1)]);
    }
    Ok(())
}

/// An int64 scalar, folded when the length is known.
fn sequence_length(ctx: &mut NodeCtx) -> Result<()> {
    element(ctx, 0)?;
    ctx.set_shape(0, DType::Int64, vec![]);
    if let Some(n) = length(ctx, 0) {
        ctx.set_dims_value(0, vec![n]);
    }
    Ok(())
}

/// `SplitToSequence`: pieces along `axis` (size 1 and dropped without `keepdims` when no
/// split is given).
fn split_to_sequence(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.dtype(0)?;
    let Some(input) = ctx.shape(0)? else {
        ctx.set(0, seq_of(ValueType::Tensor(TensorType { dtype, shape: None })));
        return Ok(());
    };
    let axis = ctx.attr_axis("axis", 0, input.len())?;
    let mut shape = input.to_vec();
    if !ctx.has_input(1) {
        if ctx.attr_i("keepdims", 1)? == 1 {
            shape[axis] = Dim::Known(1);
        } else {
            shape.remove(axis);
        }
    } else {
        shape[axis] = match (ctx.ints(1), input[axis].value()) {
            (Some(split), Some(n)) if ctx.opt_shape(1).is_some_and(<[Dim]>::is_empty) => {
                let size = split.first().copied().unwrap_or(0);
                if size > 0 && n % size == 0 { Dim::Known(size) } else { Dim::Unknown }
            }
            (Some(split), _) if !split.is_empty() && split.iter().all(|&s| s == split[0]) => Dim::Known(split[0]),
            _ => Dim::Unknown,
        };
    }
    ctx.set(0, seq_of(ValueType::tensor(dtype, shape)));
    Ok(())
}

/// `ConcatFromSequence`: the element shape with an unknown count on `axis` (inserted with
/// `new_axis`).
fn concat_from_sequence(ctx: &mut NodeCtx) -> Result<()> {
    let ValueType::Tensor(t) = element(ctx, 0)? else {
        return Err(ctx.error("sequence elements must be tensors"));
    };
    let new_axis = ctx.attr_i("new_axis", 0)? == 1;
    let shape = match &t.shape {
        Some(s) => {
            let mut s = s.clone();
            let axis = ctx.attr_i("axis", 0)?;
            if new_axis {
                let a = ctx.axis(axis, s.len() + 1)?;
                s.insert(a, Dim::Unknown);
            } else {
                let a = ctx.axis(axis, s.len())?;
                s[a] = Dim::Unknown;
            }
            Some(s)
        }
        None => None,
    };
    ctx.set_tensor(0, t.dtype, shape);
    Ok(())
}

/// `SequenceMap`: the body sees one element of each sequence input (tensor inputs as they
/// are); each body output becomes a sequence.
fn sequence_map(ctx: &mut NodeCtx) -> Result<()> {
    let inputs: Vec<Option<ValueType>> = (0..ctx.input_count())
        .map(|i| match ctx.input(i)? {
            ValueType::Sequence(e) => Ok(Some((**e).clone())),
            other => Ok(Some(other.clone())),
        })
        .collect::<Result<_>>()?;
    let outs = ctx.infer_subgraph("body", &inputs)?;
    for (i, ty) in outs.into_iter().enumerate() {
        let ty = ty.ok_or_else(|| ctx.error(format!("body output {i} has no type")))?;
        ctx.set(i, seq_of(ty));
    }
    Ok(())
}

/// `Optional(input?)`: wraps the input's type, or attribute `type` when empty.
fn optional(ctx: &mut NodeCtx) -> Result<()> {
    let inner = if ctx.has_input(0) {
        ctx.input(0)?.clone()
    } else {
        ctx.attr("type")
            .and_then(|a| a.tp.as_deref())
            .and_then(ValueType::from_proto)
            .ok_or_else(|| ctx.error("an empty Optional needs attribute 'type'"))?
    };
    ctx.set(0, ValueType::Optional(Box::new(inner)));
    Ok(())
}

fn optional_has_element(ctx: &mut NodeCtx) -> Result<()> {
    ctx.set_shape(0, DType::Bool, vec![]);
    Ok(())
}

/// The optional's element type (inputs that are not optionals pass through, opset 18).
fn optional_get_element(ctx: &mut NodeCtx) -> Result<()> {
    let ty = match ctx.input(0)? {
        ValueType::Optional(e) => (**e).clone(),
        other => other.clone(),
    };
    ctx.set(0, ty);
    Ok(())
}
