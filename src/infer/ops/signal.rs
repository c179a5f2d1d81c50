//! Spectral operators: `DFT` (attribute axis before opset 20, input axis from 20), `STFT`.

use anyhow::Result;

use super::Entry;
use crate::infer::NodeCtx;
use crate::ir::Dim;

/// This family's rows of the rule table.
pub const RULES: &[Entry] = &[("", "DFT", dft), ("", "STFT", stft)];

fn scalar(ctx: &NodeCtx, i: usize) -> Option<i64> {
    ctx.ints(i).and_then(|v| v.first().copied())
}

/// The input shape with the transformed axis resized and the last (complex) axis 2, or 1 for
/// the inverse one-sided transform.
fn dft(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.dtype(0)?;
    let onesided = ctx.attr_i("onesided", 0)? == 1;
    let inverse = ctx.attr_i("inverse", 0)? == 1;
    let Some(input) = ctx.shape(0)? else {
        ctx.set_tensor(0, dtype, None);
        return Ok(());
    };
    let rank = input.len();
    if rank < 2 {
        return Err(ctx.error("input must have rank 2 or more"));
    }
    let axis = if ctx.opset() < 20 {
        Some(ctx.attr_i("axis", 1)?)
    } else if ctx.has_input(2) {
        scalar(ctx, 2)
    } else {
        Some(-2)
    };
    let mut out = input.to_vec();
    out[rank - 1] = Dim::Known(if inverse && onesided { 1 } else { 2 });
    let Some(axis) = axis else {
        ctx.set_shape(0, dtype, out.iter().enumerate().map(|(i, d)| if i + 1 == rank { d.clone() } else { Dim::Unknown }).collect());
        return Ok(());
    };
    let a = ctx.axis(axis, rank)?;
    let length = if ctx.has_input(1) {
        scalar(ctx, 1)
    } else {
        input[a].value().map(|n| if inverse && onesided { 2 * (n - 1) } else { n })
    };
    out[a] = match length {
        Some(n) if onesided && !inverse => Dim::Known(n / 2 + 1),
        Some(n) => Dim::Known(n),
        None => Dim::Unknown,
    };
    ctx.set_shape(0, dtype, out);
    Ok(())
}

/// `STFT(signal [batch, length, 1|2], frame_step, window?, frame_length?)` →
/// `[batch, frames, bins, 2]`.
fn stft(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.dtype(0)?;
    let onesided = ctx.attr_i("onesided", 1)? == 1;
    let signal = ctx.shape(0)?;
    let batch = signal.and_then(|s| s.first().cloned()).unwrap_or(Dim::Unknown);
    let length = signal.and_then(|s| s.get(1)).and_then(Dim::value);
    let frame_length = if ctx.has_input(3) {
        scalar(ctx, 3)
    } else {
        ctx.opt_shape(2).and_then(|w| w.first()).and_then(Dim::value)
    };
    let step = scalar(ctx, 1);
    let frames = match (length, frame_length, step) {
        (Some(n), Some(f), Some(s)) if s > 0 => Dim::Known((n - f) / s + 1),
        _ => Dim::Unknown,
    };
    let bins = match frame_length {
        Some(f) if onesided => Dim::Known(f / 2 + 1),
        Some(f) => Dim::Known(f),
        None => Dim::Unknown,
    };
    ctx.set_shape(0, dtype, vec![batch, frames, bins, Dim::Known(2)]);
    Ok(())
}
