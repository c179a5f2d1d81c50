//! Normalizations and softmax-like operators, whose main output keeps the input's type, plus
//! their statistics outputs; `Dropout` with its mask.

use anyhow::Result;

use super::Entry;
use super::util::{same_as_input, shape_of_input};
use crate::infer::NodeCtx;
use crate::ir::{DType, Dim};

/// This family's rows of the rule table.
pub const RULES: &[Entry] = &[
    ("", "BatchNormalization", batch_norm),
    ("", "InstanceNormalization", same),
    ("", "GroupNormalization", same),
    ("", "RMSNormalization", layer_norm),
    ("", "LayerNormalization", layer_norm),
    ("", "LpNormalization", same),
    ("", "MeanVarianceNormalization", same),
    ("", "LRN", same),
    ("", "Softmax", same),
    ("", "LogSoftmax", same),
    ("", "Hardmax", same),
    ("", "Dropout", dropout),
];

fn same(ctx: &mut NodeCtx) -> Result<()> {
    same_as_input(ctx, 0, 0)
}

/// `BatchNormalization`: `Y` like `X`; the statistics outputs like the mean input.
fn batch_norm(ctx: &mut NodeCtx) -> Result<()> {
    same_as_input(ctx, 0, 0)?;
    for out in 1..ctx.output_count() {
        let from = if ctx.has_input(3) { 3 } else { 1 };
        same_as_input(ctx, from, out)?;
    }
    Ok(())
}

/// `LayerNormalization`/`RMSNormalization`: `Y` has `X`'s shape; `Mean`/`InvStdDev` keep the
/// dims before `axis` and have 1 from it on, in the `stash_type` element type.
///
/// `Y`'s element type is `X`'s for `LayerNormalization` from opset 17, whose schema binds `X`,
/// `Scale` and `Y` to one type `T`. Below opset 17 the operator is onnxruntime's contrib form
/// (written into the default domain by its optimizer): `X: T`, `Scale: V`, `Y: V`, so `Y` takes
/// the scale's type; `RMSNormalization` (opset 23) types them the same way (`X: T`, `scale: V`,
/// `Y: V`).
fn layer_norm(ctx: &mut NodeCtx) -> Result<()> {
    let y_from_scale = ctx.node().op_type == "RMSNormalization" || ctx.opset() < 17;
    if y_from_scale && ctx.has_input(1) {
        let dtype = ctx.dtype(1)?;
        shape_of_input(ctx, 0, 0, dtype)?;
    } else {
        same_as_input(ctx, 0, 0)?;
    }
    if ctx.output_count() < 2 {
        return Ok(());
    }
    let stash = ctx.attr_dtype("stash_type")?.unwrap_or(DType::Float);
    let stats = match ctx.shape(0)? {
        Some(x) => {
            let axis = ctx.attr_axis("axis", -1, x.len())?;
            Some(
                x.iter()
                    .enumerate()
                    .map(|(i, d)| if i < axis { d.clone() } else { Dim::Known(1) })
                    .collect(),
            )
        }
        None => None,
    };
    for out in 1..ctx.output_count() {
        ctx.set_tensor(out, stash, stats.clone());
    }
    Ok(())
}

/// `Dropout`: output like the input; the mask is bool from opset 10 (input type before).
fn dropout(ctx: &mut NodeCtx) -> Result<()> {
    same_as_input(ctx, 0, 0)?;
    if ctx.output_count() > 1 {
        let mask = if ctx.opset() >= 10 { DType::Bool } else { ctx.dtype(0)? };
        shape_of_input(ctx, 0, 1, mask)?;
    }
    Ok(())
}
