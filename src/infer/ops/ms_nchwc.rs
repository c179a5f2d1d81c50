//! onnxruntime's blocked-channel layout (`com.microsoft.nchwc`), written by its NCHWc
//! transformer at `ORT_ENABLE_ALL`: `ReorderInput` / `ReorderOutput` convert to and from
//! `[N, C padded to the block, H, W]` (channels in blocks of 8 or 16 floats, whichever the
//! optimising machine's CPU uses), and `Conv`, `MaxPool`, `AveragePool`, `GlobalMaxPool`,
//! `GlobalAveragePool` and `Upsample` work in that layout.
//!
//! Only `ReorderInput` depends on the block size. It is read from the model, never from this
//! machine: a `Conv` reading the reordered tensor has as many weight input channels (or, when
//! depthwise, filters) as the padded channel count; otherwise every `Conv`'s filter count is a
//! multiple of the block, so a count that is an odd multiple of 8 means blocks of 8.

use anyhow::Result;

use super::Entry;
use super::microsoft::onnx_rule;
use super::spatial::window_dims;
use crate::infer::NodeCtx;
use crate::infer::dims;
use crate::ir::{Dim, Graph, Shape};

const NCHWC: &str = "com.microsoft.nchwc";

/// This family's rows of the rule table.
pub const RULES: &[Entry] = &[
    (NCHWC, "ReorderInput", reorder_input),
    (NCHWC, "ReorderOutput", reorder_output),
    (NCHWC, "Conv", conv),
    (NCHWC, "MaxPool", max_pool),
    (NCHWC, "AveragePool", average_pool),
    (NCHWC, "GlobalMaxPool", global_pool),
    (NCHWC, "GlobalAveragePool", global_pool),
    (NCHWC, "Upsample", upsample),
];

/// The block sizes onnxruntime's CPU kernels use.
const BLOCKS: [i64; 2] = [8, 16];

/// Input 0's shape, which must have rank 4 or more (`None` for unknown rank).
fn shape<'a>(ctx: &NodeCtx<'a>) -> Result<Option<&'a [Dim]>> {
    match ctx.shape(0)? {
        Some(x) if x.len() < 3 => Err(ctx.error(format!("input has rank {}, expected 3 or more", x.len()))),
        x => Ok(x),
    }
}

/// `ReorderInput(X)` (`channels_last` 0: X is `[N, C, ..]`, else `[N, .., C]`) →
/// `[N, C rounded up to the block, ..]`.
fn reorder_input(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.dtype(0)?;
    let last = ctx.attr_i("channels_last", 0)? != 0;
    let Some(x) = shape(ctx)? else {
        ctx.set_tensor(0, dtype, None);
        return Ok(());
    };
    let n = x.len();
    let (channels, spatial) = if last { (&x[n - 1], &x[1..n - 1]) } else { (&x[1], &x[2..]) };
    let blocked = match channels {
        Dim::Known(c) => Dim::Known(blocked_channels(ctx, *c)?),
        _ => Dim::Unknown,
    };
    let mut out: Shape = vec![x[0].clone(), blocked];
    out.extend(spatial.iter().cloned());
    ctx.set_shape(0, dtype, out);
    Ok(())
}

/// `c` rounded up to the model's block size.
fn blocked_channels(ctx: &NodeCtx, c: i64) -> Result<i64> {
    let candidates: Vec<i64> = BLOCKS.iter().map(|&b| round_up(c, b)).collect();
    if candidates.iter().all(|&v| v == candidates[0]) {
        return Ok(candidates[0]);
    }
    if let Some(seen) = reader_channels(ctx) {
        return if candidates.contains(&seen) {
            Ok(seen)
        } else {
            Err(ctx.error(format!("{c} channels, but a Conv reading them expects {seen}")))
        };
    }
    match model_block(ctx.graph) {
        Some(b) => Ok(round_up(c, b)),
        None => Err(ctx.error(format!(
            "cannot tell the NCHWc block size (8 or 16) for {c} channels: no Conv reads the result and every Conv's filter count is a multiple of 16"
        ))),
    }
}

fn round_up(c: i64, block: i64) -> i64 {
    (c + block - 1) / block * block
}

/// The padded channel count an `nchwc` `Conv` reading the node's output expects: its weights'
/// input channels, or its filter count when it is depthwise (`group` = filters, one input
/// channel per filter).
fn reader_channels(ctx: &NodeCtx) -> Option<i64> {
    let graph = ctx.graph;
    let out = (*ctx.node().outputs.first()?)?;
    graph.values[out].consumers.iter().find_map(|&c| {
        let node = &graph.nodes[c];
        if node.domain != NCHWC || node.op_type != "Conv" || node.inputs.first() != Some(&Some(out)) {
            return None;
        }
        let w = weight_shape(graph, node.inputs.get(1).copied().flatten()?)?;
        let group = node.attr_int("group").unwrap_or(1);
        match (w.first(), w.get(1)) {
            (_, Some(&cin)) if group == 1 => Some(cin),
            (Some(&m), Some(&1)) if group == m => Some(m),
            _ => None,
        }
    })
}

/// The known shape of a weight value.
fn weight_shape(graph: &Graph, id: usize) -> Option<Vec<i64>> {
    let t = graph.values[id].tensor_type()?;
    dims::known(t.shape.as_deref()?)
}

/// 8 when some `nchwc` `Conv` of the graph has an odd multiple of 8 filters (only blocks of 8
/// allow that), 16 when its filter counts say nothing.
fn model_block(graph: &Graph) -> Option<i64> {
    graph
        .nodes
        .iter()
        .filter(|n| n.domain == NCHWC && n.op_type == "Conv")
        .filter_map(|n| weight_shape(graph, n.inputs.get(1).copied().flatten()?)?.first().copied())
        .any(|m| m % 16 == 8)
        .then_some(8)
}

/// `ReorderOutput(X)` with attribute `channels` (the unpadded count) → `[N, channels, ..]`, or
/// `[N, .., channels]` with `channels_last`.
fn reorder_output(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.dtype(0)?;
    let channels = ctx
        .attr_opt_i("channels")?
        .filter(|&c| c > 0)
        .ok_or_else(|| ctx.error("attribute 'channels' is required and positive"))?;
    let last = ctx.attr_i("channels_last", 0)? != 0;
    let Some(x) = shape(ctx)? else {
        ctx.set_tensor(0, dtype, None);
        return Ok(());
    };
    if let Dim::Known(blocked) = x[1]
        && (blocked < channels || blocked - channels >= 16)
    {
        return Err(ctx.error(format!("{channels} channels cannot come from {blocked} blocked ones")));
    }
    let mut out: Shape = vec![x[0].clone()];
    if !last {
        out.push(Dim::Known(channels));
    }
    out.extend(x[2..].iter().cloned());
    if last {
        out.push(Dim::Known(channels));
    }
    ctx.set_shape(0, dtype, out);
    Ok(())
}

/// `Conv(X, W[, B, Sum])`: `[N, W's filter count, windows over X's spatial dims]`; X is either
/// blocked or (for a first convolution with few channels) plain `[N, C, H, W]`.
fn conv(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.dtype(0)?;
    let (Some(x), Some(w)) = (shape(ctx)?, ctx.shape(1)?) else {
        let rank = ctx.opt_shape(0).map(|s| vec![Dim::Unknown; s.len()]);
        ctx.set_tensor(0, dtype, rank);
        return Ok(());
    };
    let spatial = &x[2..];
    if w.len() != spatial.len() + 2 {
        return Err(ctx.error(format!("weight rank {} does not fit {} spatial axes", w.len(), spatial.len())));
    }
    let kernel = match ctx.attr_ints("kernel_shape").filter(|k| !k.is_empty()) {
        Some(k) => Some(k.to_vec()),
        None => dims::known(&w[2..]),
    };
    let out_spatial = match kernel {
        Some(k) => window_dims(ctx, spatial, &k, false)?,
        None => vec![Dim::Unknown; spatial.len()],
    };
    let mut out: Shape = vec![x[0].clone(), w[0].clone()];
    out.extend(out_spatial);
    ctx.set_shape(0, dtype, out);
    Ok(())
}

/// Blocked `MaxPool`: the ONNX rule over `[N, C blocked, ..]` (one output).
fn max_pool(ctx: &mut NodeCtx) -> Result<()> {
    onnx_rule(ctx, "MaxPool")
}

/// Blocked `AveragePool`: the ONNX rule over `[N, C blocked, ..]`.
fn average_pool(ctx: &mut NodeCtx) -> Result<()> {
    onnx_rule(ctx, "AveragePool")
}

/// Blocked `GlobalMaxPool` / `GlobalAveragePool`: spatial dims 1, blocked channels kept.
fn global_pool(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.dtype(0)?;
    let out = shape(ctx)?.map(|x| {
        let mut s: Shape = x[..2].to_vec();
        s.extend(std::iter::repeat_n(Dim::Known(1), x.len() - 2));
        s
    });
    ctx.set_tensor(0, dtype, out);
    Ok(())
}

/// Blocked `Upsample(X)` with integer attribute `scales` (one per axis): each dim times its
/// scale.
fn upsample(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.dtype(0)?;
    let scales = ctx
        .attr_ints("scales")
        .ok_or_else(|| ctx.error("attribute 'scales' is required"))?
        .to_vec();
    let Some(x) = shape(ctx)? else {
        ctx.set_tensor(0, dtype, None);
        return Ok(());
    };
    if scales.len() != x.len() || scales.iter().any(|&s| s < 1) {
        return Err(ctx.error(format!("scales {scales:?} do not fit rank {}", x.len())));
    }
    let out = x.iter().zip(&scales).map(|(d, &s)| dims::mul(d, &Dim::Known(s))).collect();
    ctx.set_shape(0, dtype, out);
    Ok(())
}
