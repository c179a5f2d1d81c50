//! Output sizes of sliding windows (convolution and pooling), as ONNX's reference inference
//! computes them: explicit or automatic padding, strides, dilations, ceil mode.

use anyhow::Result;

use crate::infer::NodeCtx;
use crate::infer::dims;
use crate::ir::Dim;

/// An integer-list attribute with one entry per spatial axis, or `default` everywhere.
pub fn per_axis(ctx: &NodeCtx, name: &str, n: usize, default: i64) -> Result<Vec<i64>> {
    match ctx.attr_ints(name) {
        Some(v) if v.len() == n => Ok(v.to_vec()),
        Some([]) => Ok(vec![default; n]),
        Some(v) => Err(ctx.error(format!(
            "attribute '{name}' has {} entries for {n} spatial axes",
            v.len()
        ))),
        None => Ok(vec![default; n]),
    }
}

/// The begin and end pads per axis: attribute `pads`, else derived from `auto_pad`.
/// `transposed` selects ConvTranspose's SAME rule (total pad `ek - stride`).
pub fn pads(
    ctx: &NodeCtx,
    spatial: &[Dim],
    effective: &[i64],
    strides: &[i64],
    transposed: bool,
) -> Result<Vec<i64>> {
    let n = spatial.len();
    if let Some(p) = ctx.attr_ints("pads")
        && !p.is_empty()
    {
        if p.len() != 2 * n {
            return Err(ctx.error(format!(
                "attribute 'pads' has {} entries for {n} spatial axes",
                p.len()
            )));
        }
        if p.iter().any(|&v| v < 0) {
            return Err(ctx.error("attribute 'pads' has negative entries"));
        }
        return Ok(p.to_vec());
    }
    let mut pads = vec![0; 2 * n];
    let mode = ctx.attr_s("auto_pad").unwrap_or_default();
    if mode != "SAME_UPPER" && mode != "SAME_LOWER" {
        return Ok(pads);
    }
    for i in 0..n {
        let residual = if strides[i] > 1 && !transposed {
            match spatial[i].value() {
                Some(v) if v >= 0 => v % strides[i],
                _ => continue,
            }
        } else {
            0
        };
        let total = effective[i]
            .saturating_sub(if residual == 0 { strides[i] } else { residual })
            .max(0);
        let (small, big) = (total / 2, total - total / 2);
        (pads[i], pads[i + n]) = if mode == "SAME_UPPER" {
            (small, big)
        } else {
            (big, small)
        };
    }
    Ok(pads)
}

/// Kernel sizes widened by the dilations.
pub fn effective_kernel(kernel: &[i64], dilations: &[i64]) -> Vec<i64> {
    kernel
        .iter()
        .zip(dilations)
        .map(|(&k, &d)| k.saturating_sub(1).saturating_mul(d).saturating_add(1))
        .collect()
}

/// Output sizes of a convolution or pooling window over `spatial`.
pub fn window_dims(
    ctx: &NodeCtx,
    spatial: &[Dim],
    kernel: &[i64],
    ceil_mode: bool,
) -> Result<Vec<Dim>> {
    let n = spatial.len();
    if kernel.len() != n {
        return Err(ctx.error(format!(
            "kernel has {} axes for {n} spatial axes",
            kernel.len()
        )));
    }
    if kernel.iter().any(|&k| k <= 0) {
        return Err(ctx.error("kernel sizes must be positive"));
    }
    let strides = per_axis(ctx, "strides", n, 1)?;
    let dilations = per_axis(ctx, "dilations", n, 1)?;
    if strides.iter().chain(&dilations).any(|&v| v <= 0) {
        return Err(ctx.error("strides and dilations must be positive"));
    }
    let effective = effective_kernel(kernel, &dilations);
    let pads = pads(ctx, spatial, &effective, &strides, false)?;
    let explicit = ctx.attr_ints("pads").is_some_and(|p| !p.is_empty());
    let mode = ctx.attr_s("auto_pad").unwrap_or_default();
    let same = !explicit && (mode == "SAME_UPPER" || mode == "SAME_LOWER");
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let (pb, pe) = (pads[i], pads[i + n]);
        let s = strides[i];
        out.push(match &spatial[i] {
            Dim::Known(size) => {
                let w = i128::from;
                let (size, pb, pe, k, s) = (w(*size), w(pb), w(pe), w(effective[i]), w(s));
                let mut numerator = size + pb + pe - k;
                if ceil_mode {
                    numerator += s - 1;
                }
                let mut o = numerator.div_euclid(s) + 1;
                if ceil_mode && (o - 1) * s >= size + pb {
                    o -= 1;
                }
                match i64::try_from(o) {
                    Ok(o) if o >= 0 => Dim::Known(o),
                    _ => {
                        return Err(ctx.error(format!(
                            "the window does not fit the padded input on axis {i}"
                        )));
                    }
                }
            }
            // SAME padding makes the output `ceil(size / stride)` whatever the size.
            d if same => dims::floor_div(&dims::add(d, &Dim::Known(s - 1)), s),
            // Ceil mode drops a last window that would start in the end padding: a test on
            // the size that no single expression captures.
            _ if ceil_mode && s > 1 => Dim::Unknown,
            d => {
                let delta = pb.saturating_add(pe).saturating_sub(effective[i]);
                let o = dims::floor_div(&dims::add(d, &Dim::Known(delta)), s);
                dims::add(&o, &Dim::Known(1))
            }
        });
    }
    Ok(out)
}
