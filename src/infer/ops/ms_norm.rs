//! onnxruntime's normalization fusions: `SkipLayerNormalization`,
//! `SkipSimplifiedLayerNormalization`, `EmbedLayerNormalization`, `GroupNorm`,
//! `SkipGroupNorm` in `com.microsoft`, and `SimplifiedLayerNormalization` (RMS norm), which
//! onnxruntime registers in the default domain although ONNX has no such operator.

use anyhow::Result;

use super::Entry;
use super::microsoft::MS;
use super::util::{same_as_input, shape_of_input};
use crate::infer::NodeCtx;
use crate::ir::{DType, Dim, Shape};

/// This family's rows of the rule table.
pub const RULES: &[Entry] = &[
    ("", "SimplifiedLayerNormalization", simplified_layer_norm),
    (MS, "SkipLayerNormalization", skip_layer_norm),
    (MS, "SkipSimplifiedLayerNormalization", skip_layer_norm),
    (MS, "EmbedLayerNormalization", embed_layer_norm),
    (MS, "GroupNorm", group_norm),
    (MS, "SkipGroupNorm", group_norm),
];

/// The shape of per-row statistics (mean, inverse deviation) of input 0 normalised from
/// `axis` on: the dims before it, then 1s.
fn stats_shape(ctx: &NodeCtx, axis: i64) -> Result<Option<Shape>> {
    let Some(x) = ctx.shape(0)? else {
        return Ok(None);
    };
    let axis = ctx.axis(axis, x.len())?;
    Ok(Some(
        x.iter()
            .enumerate()
            .map(|(i, d)| if i < axis { d.clone() } else { Dim::Known(1) })
            .collect(),
    ))
}

/// `SimplifiedLayerNormalization(X, scale)`: `Y` has `X`'s shape and the scale's element
/// type; the optional `inv_std_var` keeps the dims before `axis` and has 1 from it on, in the
/// `stash_type` element type (float by default).
fn simplified_layer_norm(ctx: &mut NodeCtx) -> Result<()> {
    let y = ctx.dtype(1)?;
    shape_of_input(ctx, 0, 0, y)?;
    let stash = ctx.attr_dtype("stash_type")?.unwrap_or(DType::Float);
    let stats = stats_shape(ctx, ctx.attr_i("axis", -1)?)?;
    ctx.set_tensor(1, stash, stats);
    Ok(())
}

/// `Skip(Simplified)LayerNormalization(input, skip, gamma[, beta][, bias])`: `output` and
/// `input_skip_bias_sum` like the input; `mean` and `inv_std_var` float with the last dim 1.
fn skip_layer_norm(ctx: &mut NodeCtx) -> Result<()> {
    if let Some(x) = ctx.shape(0)?
        && !(2..=3).contains(&x.len())
    {
        return Err(ctx.error(format!("input has rank {}, expected 2 or 3", x.len())));
    }
    same_as_input(ctx, 0, 0)?;
    let stats = stats_shape(ctx, -1)?;
    ctx.set_tensor(1, DType::Float, stats.clone());
    ctx.set_tensor(2, DType::Float, stats);
    same_as_input(ctx, 0, 3)
}

/// `EmbedLayerNormalization(input_ids [B, S], segment_ids, word_embedding [V, D], ...)`:
/// `output` and `embedding_sum` `[B, S, D]` in the embeddings' type, `mask_index` int32
/// `[B]`.
fn embed_layer_norm(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.dtype(2)?;
    let ids = match ctx.shape(0)? {
        Some([b, s]) => Some((b.clone(), s.clone())),
        Some(x) => return Err(ctx.error(format!("input_ids has rank {}, expected 2", x.len()))),
        None => None,
    };
    let hidden = match ctx.shape(2)? {
        Some([_, d]) => d.clone(),
        Some(x) => {
            return Err(ctx.error(format!("word_embedding has rank {}, expected 2", x.len())));
        }
        None => Dim::Unknown,
    };
    let out = ids.as_ref().map(|(b, s)| vec![b.clone(), s.clone(), hidden]);
    ctx.set_tensor(0, dtype, out.clone());
    ctx.set_tensor(1, DType::Int32, ids.map(|(b, _)| vec![b]));
    ctx.set_tensor(2, dtype, out);
    Ok(())
}

/// `GroupNorm(X, gamma, beta)` and `SkipGroupNorm(X, gamma, beta, skip[, bias])`: every
/// output (`Y`, and `SkipGroupNorm`'s sum `S`) like `X`.
fn group_norm(ctx: &mut NodeCtx) -> Result<()> {
    for out in 0..ctx.output_count() {
        same_as_input(ctx, 0, out)?;
    }
    Ok(())
}
