//! onnxruntime's channels-last and quantized window operators in `com.microsoft`:
//! `NhwcConv`, `NhwcFusedConv`, `NhwcMaxPool`, `QLinearConv`, `QLinearAveragePool`,
//! `QLinearGlobalAveragePool` (the last three with a `channels_last` attribute), and
//! `MaxpoolWithMask`.

use anyhow::Result;

use super::Entry;
use super::microsoft::{MS, onnx_rule};
use super::spatial::window_dims;
use crate::infer::NodeCtx;
use crate::infer::dims;
use crate::ir::{Dim, Shape};

/// This family's rows of the rule table.
pub const RULES: &[Entry] = &[
    (MS, "NhwcConv", conv),
    (MS, "NhwcFusedConv", conv),
    (MS, "QLinearConv", conv),
    (MS, "NhwcMaxPool", pool),
    (MS, "QLinearAveragePool", pool),
    (MS, "QLinearGlobalAveragePool", global_pool),
    (MS, "MaxpoolWithMask", maxpool_with_mask),
];

/// True when the node's tensors are `[N, d1.., dn, C]`: always for the `Nhwc*` operators,
/// else by attribute `channels_last` (default 0).
fn channels_last(ctx: &NodeCtx) -> Result<bool> {
    Ok(ctx.node().op_type.starts_with("Nhwc") || ctx.attr_i("channels_last", 0)? != 0)
}

/// Input `i`'s shape split into batch, spatial dims and channels (`None` for unknown rank).
fn split<'a>(ctx: &NodeCtx<'a>, i: usize, last: bool) -> Result<Option<(&'a Dim, &'a [Dim], &'a Dim)>> {
    let Some(x) = ctx.shape(i)? else {
        return Ok(None);
    };
    if x.len() < 3 {
        return Err(ctx.error(format!("input {i} has rank {}, expected 3 or more", x.len())));
    }
    let n = x.len();
    Ok(Some(if last { (&x[0], &x[1..n - 1], &x[n - 1]) } else { (&x[0], &x[2..], &x[1]) }))
}

/// `[N, spatial.., C]` or `[N, C, spatial..]`.
fn assemble(batch: &Dim, spatial: Vec<Dim>, channels: Dim, last: bool) -> Shape {
    let mut out = vec![batch.clone()];
    if last {
        out.extend(spatial);
        out.push(channels);
    } else {
        out.push(channels);
        out.extend(spatial);
    }
    out
}

/// A convolution over either layout with weights `[M, C/group, k..]`: `NhwcConv(X, W[, B])`,
/// `NhwcFusedConv(X, W[, B, Z])` (`X`'s type) and `QLinearConv(x, x_scale, x_zp, w, w_scale,
/// w_zp, y_scale, y_zp[, B])` (`y_zp`'s type).
fn conv(ctx: &mut NodeCtx) -> Result<()> {
    let last = channels_last(ctx)?;
    let quantized = ctx.node().op_type == "QLinearConv";
    if quantized && !last {
        return onnx_rule(ctx, "QLinearConv");
    }
    let (w, dtype) = if quantized { (3, ctx.dtype(7)?) } else { (1, ctx.dtype(0)?) };
    let (Some((batch, spatial, _)), Some(weights)) = (split(ctx, 0, last)?, ctx.shape(w)?) else {
        let rank = ctx.opt_shape(0).map(|s| vec![Dim::Unknown; s.len()]);
        ctx.set_tensor(0, dtype, rank);
        return Ok(());
    };
    if weights.len() != spatial.len() + 2 {
        return Err(ctx.error(format!("weight rank {} does not fit {} spatial axes", weights.len(), spatial.len())));
    }
    let kernel = match ctx.attr_ints("kernel_shape").filter(|k| !k.is_empty()) {
        Some(k) => Some(k.to_vec()),
        None => dims::known(&weights[2..]),
    };
    let out_spatial = match kernel {
        Some(k) => window_dims(ctx, spatial, &k, false)?,
        None => vec![Dim::Unknown; spatial.len()],
    };
    ctx.set_shape(0, dtype, assemble(batch, out_spatial, weights[0].clone(), last));
    Ok(())
}

/// `NhwcMaxPool(x)` and `QLinearAveragePool(X, x_scale, x_zp, y_scale, y_zp)`: windows of
/// attribute `kernel_shape` over the spatial dims, channels kept.
fn pool(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.dtype(0)?;
    let last = channels_last(ctx)?;
    let Some((batch, spatial, channels)) = split(ctx, 0, last)? else {
        ctx.set_tensor(0, dtype, None);
        return Ok(());
    };
    let kernel = ctx
        .attr_ints("kernel_shape")
        .ok_or_else(|| ctx.error("attribute 'kernel_shape' is required"))?
        .to_vec();
    let ceil_mode = ctx.attr_i("ceil_mode", 0)? != 0;
    let out_spatial = window_dims(ctx, spatial, &kernel, ceil_mode)?;
    ctx.set_shape(0, dtype, assemble(batch, out_spatial, channels.clone(), last));
    Ok(())
}

/// `QLinearGlobalAveragePool(X, ...)`: spatial dims 1, channels kept.
fn global_pool(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.dtype(0)?;
    let last = channels_last(ctx)?;
    let out = split(ctx, 0, last)?.map(|(batch, spatial, channels)| {
        assemble(batch, vec![Dim::Known(1); spatial.len()], channels.clone(), last)
    });
    ctx.set_tensor(0, dtype, out);
    Ok(())
}

/// `MaxpoolWithMask(X, M)`: `MaxPool` over `X`.
fn maxpool_with_mask(ctx: &mut NodeCtx) -> Result<()> {
    onnx_rule(ctx, "MaxPool")
}
