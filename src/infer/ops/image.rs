//! Spatial resampling and rearrangement: `Resize`, `Upsample`, `DepthToSpace`, `SpaceToDepth`,
//! `GridSample`, `AffineGrid`, `Col2Im`, `ImageDecoder`.

use anyhow::Result;

use super::Entry;
use super::util::axes;
use crate::infer::NodeCtx;
use crate::infer::dims;
use crate::ir::{DType, Dim, Shape};

/// This family's rows of the rule table.
pub const RULES: &[Entry] = &[
    ("", "Resize", resize),
    ("", "Upsample", upsample),
    ("", "DepthToSpace", depth_to_space),
    ("", "SpaceToDepth", space_to_depth),
    ("", "GridSample", grid_sample),
    ("", "AffineGrid", affine_grid),
    ("", "Col2Im", col2im),
    ("", "ImageDecoder", image_decoder),
];

/// `floor(dim · scale)` per axis.
fn scaled(input: &[Dim], scales: &[f64]) -> Shape {
    input
        .iter()
        .zip(scales)
        .map(|(d, &s)| match d {
            Dim::Known(v) => Dim::Known((*v as f64 * s).floor() as i64),
            other if s == 1.0 => other.clone(),
            _ => Dim::Unknown,
        })
        .collect()
}

/// `Resize`: from `sizes` (with `keep_aspect_ratio_policy`) or `scales`, optionally on `axes`.
fn resize(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.dtype(0)?;
    let Some(input) = ctx.shape(0)? else {
        ctx.set_tensor(0, dtype, None);
        return Ok(());
    };
    let rank = input.len();
    let (scales_at, sizes_at) = if ctx.opset() < 11 { (1, usize::MAX) } else { (2, 3) };
    let resized: Vec<usize> = match ctx.attr_ints("axes") {
        Some(a) => axes(ctx, a, rank)?,
        None => (0..rank).collect(),
    };
    let given = |i: usize| ctx.has_input(i) && ctx.opt_shape(i).is_none_or(|s| s != [Dim::Known(0)]);
    if given(sizes_at) {
        let Some(sizes) = ctx.dims_value(sizes_at) else {
            ctx.set_shape(0, dtype, unknown_at(input, &resized));
            return Ok(());
        };
        if sizes.len() != resized.len() {
            return Err(ctx.error(format!("{} sizes for {} axes", sizes.len(), resized.len())));
        }
        let policy = ctx.attr_s("keep_aspect_ratio_policy").unwrap_or_else(|| "stretch".into());
        let mut out = input.to_vec();
        if policy == "stretch" {
            for (&axis, size) in resized.iter().zip(sizes.iter()) {
                out[axis] = size.clone();
            }
        } else {
            let known: Option<Vec<i64>> = resized.iter().map(|&a| input[a].value()).collect();
            let (Some(known), Some(sizes)) = (known, dims::known(&sizes)) else {
                ctx.set_shape(0, dtype, unknown_at(input, &resized));
                return Ok(());
            };
            let ratios = sizes.iter().zip(&known).map(|(&s, &d)| s as f64 / d as f64);
            let scale = match policy.as_str() {
                "not_larger" => ratios.fold(f64::MAX, f64::min),
                "not_smaller" => ratios.fold(f64::MIN, f64::max),
                other => return Err(ctx.error(format!("unknown keep_aspect_ratio_policy '{other}'"))),
            };
            for (&axis, &d) in resized.iter().zip(&known) {
                out[axis] = Dim::Known((scale * d as f64 + 0.5) as i64);
            }
        }
        ctx.set_shape(0, dtype, out);
        return Ok(());
    }
    let Some(scales) = (given(scales_at)).then(|| ctx.floats(scales_at)).flatten() else {
        ctx.set_shape(0, dtype, unknown_at(input, &resized));
        return Ok(());
    };
    if scales.len() != resized.len() {
        return Err(ctx.error(format!("{} scales for {} axes", scales.len(), resized.len())));
    }
    let mut full = vec![1.0; rank];
    for (&axis, &s) in resized.iter().zip(&scales) {
        full[axis] = s;
    }
    ctx.set_shape(0, dtype, scaled(input, &full));
    Ok(())
}

/// The input shape with the given axes unknown.
fn unknown_at(input: &[Dim], unknown: &[usize]) -> Shape {
    input
        .iter()
        .enumerate()
        .map(|(i, d)| if unknown.contains(&i) { Dim::Unknown } else { d.clone() })
        .collect()
}

/// `Upsample`: scales from the attribute (before opset 9) or input 1.
fn upsample(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.dtype(0)?;
    let Some(input) = ctx.shape(0)? else {
        ctx.set_tensor(0, dtype, None);
        return Ok(());
    };
    let scales: Option<Vec<f64>> = match ctx.attr_floats("scales") {
        Some(s) => Some(s.iter().map(|&v| f64::from(v)).collect()),
        None => ctx.floats(1),
    };
    let out = match scales {
        Some(s) if s.len() == input.len() => scaled(input, &s),
        Some(s) => return Err(ctx.error(format!("{} scales for rank {}", s.len(), input.len()))),
        None => vec![Dim::Unknown; input.len()],
    };
    ctx.set_shape(0, dtype, out);
    Ok(())
}

/// The `[N, C, H, W]` input and the block size.
fn nchw_block<'a>(ctx: &NodeCtx<'a>) -> Result<Option<(&'a [Dim], i64)>> {
    let block = ctx.attr_i("blocksize", 0)?;
    if block <= 0 {
        return Err(ctx.error("attribute 'blocksize' must be positive"));
    }
    match ctx.shape(0)? {
        Some(s) if s.len() == 4 => Ok(Some((s, block))),
        Some(s) => Err(ctx.error(format!("input rank {} is not 4", s.len()))),
        None => Ok(None),
    }
}

fn div_exact(d: &Dim, k: i64) -> Dim {
    match d {
        Dim::Known(v) => Dim::Known(v / k),
        other => dims::floor_div(other, k),
    }
}

/// `DepthToSpace`: `[N, C/b², H·b, W·b]`.
fn depth_to_space(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.dtype(0)?;
    let out = nchw_block(ctx)?.map(|(s, b)| {
        let k = Dim::Known(b);
        vec![s[0].clone(), div_exact(&s[1], b * b), dims::mul(&s[2], &k), dims::mul(&s[3], &k)]
    });
    ctx.set_tensor(0, dtype, out);
    Ok(())
}

/// `SpaceToDepth`: `[N, C·b², H/b, W/b]`.
fn space_to_depth(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.dtype(0)?;
    let out = nchw_block(ctx)?.map(|(s, b)| {
        vec![s[0].clone(), dims::mul(&s[1], &Dim::Known(b * b)), div_exact(&s[2], b), div_exact(&s[3], b)]
    });
    ctx.set_tensor(0, dtype, out);
    Ok(())
}

/// `GridSample`: `[N, C, grid spatial dims...]`.
fn grid_sample(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.dtype(0)?;
    let out = match (ctx.shape(0)?, ctx.shape(1)?) {
        (Some(x), Some(grid)) if x.len() == grid.len() && x.len() >= 3 => {
            let mut out = vec![x[0].clone(), x[1].clone()];
            out.extend_from_slice(&grid[1..grid.len() - 1]);
            Some(out)
        }
        (Some(_), Some(_)) => return Err(ctx.error("input and grid ranks differ or are below 3")),
        _ => None,
    };
    ctx.set_tensor(0, dtype, out);
    Ok(())
}

/// `AffineGrid(theta, size)`: `[N, (D,) H, W, 2 or 3]`.
fn affine_grid(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.dtype(0)?;
    let out = match ctx.ints(1) {
        Some(size) if size.len() == 4 || size.len() == 5 => {
            let mut out: Shape = vec![Dim::Known(size[0])];
            out.extend(size.iter().skip(2).map(|&d| Dim::Known(d)));
            out.push(Dim::Known(size.len() as i64 - 2));
            Some(out)
        }
        Some(size) => {
            return Err(ctx.error(format!(
                "size has {} values, expected 4 (N, C, H, W) or 5 (N, C, D, H, W)",
                size.len()
            )));
        }
        None => None,
    };
    ctx.set_tensor(0, dtype, out);
    Ok(())
}

/// `Col2Im(input, image_shape, block_shape)`: `[N, C, image_shape...]`.
fn col2im(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.dtype(0)?;
    let (Some(input), Some(image), Some(block)) = (ctx.shape(0)?, ctx.ints(1), ctx.ints(2)) else {
        ctx.set_tensor(0, dtype, None);
        return Ok(());
    };
    let Some(first) = input.first() else {
        return Err(ctx.error("input must have rank 3"));
    };
    let Some(per_channel) = block.iter().try_fold(1i64, |a, &b| a.checked_mul(b)) else {
        return Err(ctx.error("block_shape's product overflows 64 bits"));
    };
    let channels = match input.get(1) {
        Some(Dim::Known(v)) if per_channel > 0 => Dim::Known(v / per_channel),
        _ => Dim::Unknown,
    };
    let mut out = vec![first.clone(), channels];
    out.extend(image.iter().map(|&d| Dim::Known(d)));
    ctx.set_shape(0, dtype, out);
    Ok(())
}

/// `ImageDecoder`: uint8 `[H, W, channels]`; the height and width are in the encoded bytes.
fn image_decoder(ctx: &mut NodeCtx) -> Result<()> {
    let channels = match ctx.attr_s("pixel_format").as_deref() {
        Some("Grayscale") => 1,
        _ => 3,
    };
    ctx.set_shape(0, DType::Uint8, vec![Dim::Unknown, Dim::Unknown, Dim::Known(channels)]);
    Ok(())
}
