//! Convolutions: `Conv`, `ConvInteger`, `QLinearConv`, `DeformConv`, `ConvTranspose`.

use anyhow::Result;

use super::Entry;
use super::spatial::{effective_kernel, pads, per_axis, window_dims};
use crate::infer::NodeCtx;
use crate::infer::dims;
use crate::ir::{DType, Dim, Shape};

/// This family's rows of the rule table.
pub const RULES: &[Entry] = &[
    ("", "Conv", conv),
    ("", "ConvInteger", conv),
    ("", "QLinearConv", conv),
    ("", "DeformConv", conv),
    ("", "ConvTranspose", conv_transpose),
];

/// `[N, M, o1..on]` from `X [N, C, d1..dn]` and `W [M, C/group, k1..kn]`.
fn conv(ctx: &mut NodeCtx) -> Result<()> {
    let (w, dtype) = match ctx.node().op_type.as_str() {
        "ConvInteger" => (1, DType::Int32),
        "QLinearConv" => (3, if ctx.has_input(7) { ctx.dtype(7)? } else { ctx.dtype(0)? }),
        _ => (1, ctx.dtype(0)?),
    };
    let (Some(x), Some(weights)) = (ctx.shape(0)?, ctx.shape(w)?) else {
        let rank = ctx.opt_shape(0).or(ctx.opt_shape(w)).map(|s| vec![Dim::Unknown; s.len()]);
        ctx.set_tensor(0, dtype, rank);
        return Ok(());
    };
    if x.len() < 3 || weights.len() != x.len() {
        return Err(ctx.error(format!("input rank {} and weight rank {} do not fit a convolution", x.len(), weights.len())));
    }
    let kernel = kernel_shape(ctx, &weights[2..])?;
    let mut out: Shape = vec![x[0].clone(), weights[0].clone()];
    match kernel {
        Some(k) => out.extend(window_dims(ctx, &x[2..], &k, false)?),
        None => out.extend(vec![Dim::Unknown; x.len() - 2]),
    }
    ctx.set_shape(0, dtype, out);
    Ok(())
}

/// Attribute `kernel_shape`, else the weight's spatial dims (`None` when not all known).
fn kernel_shape(ctx: &NodeCtx, weight_spatial: &[Dim]) -> Result<Option<Vec<i64>>> {
    match ctx.attr_ints("kernel_shape") {
        Some(k) if !k.is_empty() => Ok(Some(k.to_vec())),
        _ => Ok(dims::known(weight_spatial)),
    }
}

/// `ConvTranspose`: `[N, W[1]·group, o1..on]` with
/// `o = stride·(i-1) + output_padding + (k-1)·dilation + 1 - pads`, or `output_shape`.
fn conv_transpose(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.dtype(0)?;
    let (Some(x), Some(weights)) = (ctx.shape(0)?, ctx.shape(1)?) else {
        ctx.set_tensor(0, dtype, ctx.opt_shape(0).map(|s| vec![Dim::Unknown; s.len()]));
        return Ok(());
    };
    if x.len() < 3 || weights.len() != x.len() {
        return Err(ctx.error(format!("input rank {} and weight rank {} do not fit a convolution", x.len(), weights.len())));
    }
    let n = x.len() - 2;
    let group = ctx.attr_i("group", 1)?;
    if group <= 0 {
        return Err(ctx.error("attribute 'group' must be positive"));
    }
    let mut out: Shape = vec![x[0].clone(), dims::mul(&weights[1], &Dim::Known(group))];
    if let Some(shape) = ctx.attr_ints("output_shape").filter(|s| !s.is_empty()) {
        let spatial = if shape.len() == n + 2 { &shape[2..] } else { shape };
        if spatial.len() != n {
            return Err(ctx.error(format!("attribute 'output_shape' has {} entries for {n} spatial axes", shape.len())));
        }
        out.extend(spatial.iter().map(|&d| Dim::Known(d)));
        ctx.set_shape(0, dtype, out);
        return Ok(());
    }
    let Some(kernel) = kernel_shape(ctx, &weights[2..])? else {
        out.extend(vec![Dim::Unknown; n]);
        ctx.set_shape(0, dtype, out);
        return Ok(());
    };
    if kernel.len() != n {
        return Err(ctx.error(format!("kernel has {} axes for {n} spatial axes", kernel.len())));
    }
    let strides = per_axis(ctx, "strides", n, 1)?;
    let dilations = per_axis(ctx, "dilations", n, 1)?;
    let output_padding = per_axis(ctx, "output_padding", n, 0)?;
    let effective = effective_kernel(&kernel, &dilations);
    let pads = pads(ctx, &x[2..], &effective, &strides, true)?;
    for i in 0..n {
        out.push(match x[2 + i].value() {
            Some(size) => {
                let w = i128::from;
                let o = w(strides[i]) * (w(size) - 1) + w(output_padding[i]) + w(effective[i])
                    - w(pads[i])
                    - w(pads[i + n]);
                let o = i64::try_from(o).map_err(|_| ctx.error("the output size overflows"))?;
                Dim::Known(o)
            }
            None => {
                let fixed = output_padding[i] + effective[i] - pads[i] - pads[i + n];
                let grown = dims::mul(&dims::sub(&x[2 + i], &Dim::Known(1)), &Dim::Known(strides[i]));
                dims::add(&grown, &Dim::Known(fixed))
            }
        });
    }
    ctx.set_shape(0, dtype, out);
    Ok(())
}
