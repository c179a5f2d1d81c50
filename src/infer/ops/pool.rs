//! Pooling: `MaxPool`, `AveragePool`, `LpPool`, the global pools, `MaxRoiPool`, `RoiAlign`,
//! `MaxUnpool`.

use anyhow::Result;

use super::Entry;
use super::spatial::{per_axis, window_dims};
use crate::infer::NodeCtx;
use crate::infer::dims;
use crate::ir::{DType, Dim, Shape};

/// This family's rows of the rule table.
pub const RULES: &[Entry] = &[
    ("", "MaxPool", pool),
    ("", "AveragePool", pool),
    ("", "LpPool", pool),
    ("", "GlobalAveragePool", global_pool),
    ("", "GlobalMaxPool", global_pool),
    ("", "GlobalLpPool", global_pool),
    ("", "MaxRoiPool", roi_pool),
    ("", "RoiAlign", roi_pool),
    ("", "MaxUnpool", max_unpool),
];

/// Windowed pooling; MaxPool's optional second output (int64 indices) has the same shape.
fn pool(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.dtype(0)?;
    let Some(x) = ctx.shape(0)? else {
        ctx.set_tensor(0, dtype, None);
        ctx.set_tensor(1, DType::Int64, None);
        return Ok(());
    };
    if x.len() < 3 {
        return Err(ctx.error(format!("input rank {} is below 3", x.len())));
    }
    let kernel = ctx
        .attr_ints("kernel_shape")
        .ok_or_else(|| ctx.error("attribute 'kernel_shape' is required"))?
        .to_vec();
    let ceil_mode = ctx.attr_i("ceil_mode", 0)? == 1;
    let mut out: Shape = x[..2].to_vec();
    out.extend(window_dims(ctx, &x[2..], &kernel, ceil_mode)?);
    ctx.set_shape(1, DType::Int64, out.clone());
    ctx.set_shape(0, dtype, out);
    Ok(())
}

/// `[N, C, 1, ..., 1]`.
fn global_pool(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.dtype(0)?;
    let out = ctx.shape(0)?.map(|x| {
        x.iter()
            .enumerate()
            .map(|(i, d)| if i < 2 { d.clone() } else { Dim::Known(1) })
            .collect()
    });
    ctx.set_tensor(0, dtype, out);
    Ok(())
}

/// `MaxRoiPool`/`RoiAlign`: `[num_rois, C, pooled sizes...]`.
fn roi_pool(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.dtype(0)?;
    let rois = ctx.shape(1)?.and_then(|r| r.first().cloned()).unwrap_or(Dim::Unknown);
    let channels = ctx.shape(0)?.and_then(|x| x.get(1).cloned()).unwrap_or(Dim::Unknown);
    let pooled: Vec<i64> = if ctx.node().op_type == "RoiAlign" {
        vec![ctx.attr_i("output_height", 1)?, ctx.attr_i("output_width", 1)?]
    } else {
        ctx.attr_ints("pooled_shape")
            .ok_or_else(|| ctx.error("attribute 'pooled_shape' is required"))?
            .to_vec()
    };
    let mut out = vec![rois, channels];
    out.extend(pooled.into_iter().map(Dim::Known));
    ctx.set_shape(0, dtype, out);
    Ok(())
}

/// `MaxUnpool(X, I[, output_shape])`: `o = (i-1)·stride + kernel - pads`, or `output_shape`.
fn max_unpool(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.dtype(0)?;
    if ctx.has_input(2) {
        let out = match ctx.dims_value(2) {
            Some(d) => Some(d.into_owned()),
            None => ctx.opt_shape(0).map(|s| vec![Dim::Unknown; s.len()]),
        };
        ctx.set_tensor(0, dtype, out);
        return Ok(());
    }
    let Some(x) = ctx.shape(0)? else {
        ctx.set_tensor(0, dtype, None);
        return Ok(());
    };
    let n = x.len().saturating_sub(2);
    let kernel = per_axis(ctx, "kernel_shape", n, 1)?;
    let strides = per_axis(ctx, "strides", n, 1)?;
    let pads = per_axis(ctx, "pads", 2 * n, 0)?;
    let mut out: Shape = x[..2.min(x.len())].to_vec();
    for i in 0..n {
        out.push(match x[2 + i].value() {
            Some(size) => Dim::Known((size - 1) * strides[i] + kernel[i] - pads[i] - pads[i + n]),
            None => {
                let grown = dims::mul(&dims::sub(&x[2 + i], &Dim::Known(1)), &Dim::Known(strides[i]));
                dims::add(&grown, &Dim::Known(kernel[i] - pads[i] - pads[i + n]))
            }
        });
    }
    ctx.set_shape(0, dtype, out);
    Ok(())
}
