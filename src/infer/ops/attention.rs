//! Attention-style operators: `Attention` (3-D and 4-D, past/present cache, QK output),
//! `RotaryEmbedding`, `LinearAttention`, `CausalConvWithState`, `SwiGLU`, `FlexAttention`.

use anyhow::Result;

use super::Entry;
use super::util::same_as_input;
use crate::infer::NodeCtx;
use crate::infer::dims;
use crate::ir::{Dim, Shape};

/// This family's rows of the rule table.
pub const RULES: &[Entry] = &[
    ("", "Attention", attention),
    ("", "RotaryEmbedding", same),
    ("", "SwiGLU", same),
    ("", "LinearAttention", linear_attention),
    ("", "CausalConvWithState", causal_conv_with_state),
    ("ai.onnx.preview", "FlexAttention", flex_attention),
];

fn same(ctx: &mut NodeCtx) -> Result<()> {
    same_as_input(ctx, 0, 0)
}

/// `d / heads` for a packed hidden size.
fn per_head(d: &Dim, heads: Option<i64>) -> Dim {
    match (d, heads) {
        (Dim::Known(v), Some(h)) if h > 0 => Dim::Known(v / h),
        (other, Some(1)) => other.clone(),
        _ => Dim::Unknown,
    }
}

/// The 4-D view `[batch, heads, seq, head_size]` of a 3-D packed or 4-D input.
fn heads_view(shape: &[Dim], heads: Option<i64>) -> Option<[Dim; 4]> {
    match shape {
        [b, h, s, d] => Some([b.clone(), h.clone(), s.clone(), d.clone()]),
        [b, s, hidden] => Some([
            b.clone(),
            heads.map_or(Dim::Unknown, Dim::Known),
            s.clone(),
            per_head(hidden, heads),
        ]),
        _ => None,
    }
}

/// `Attention(Q, K, V[, mask, past_key, past_value, nonpad_kv_seqlen])`
/// → `Y[, present_key, present_value, qk_matmul_output]`.
fn attention(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.dtype(0)?;
    let q_heads = ctx.attr_opt_i("q_num_heads")?;
    let kv_heads = ctx.attr_opt_i("kv_num_heads")?;
    let (Some(q), Some(k), Some(v)) = (ctx.shape(0)?, ctx.shape(1)?, ctx.shape(2)?) else {
        for i in 0..ctx.output_count() {
            ctx.set_tensor(i, dtype, None);
        }
        return Ok(());
    };
    let (Some(q4), Some(k4), Some(v4)) = (
        heads_view(q, q_heads),
        heads_view(k, kv_heads),
        heads_view(v, kv_heads),
    ) else {
        return Err(ctx.error("Q, K and V must have rank 3 or 4"));
    };
    let y: Shape = if q.len() == 4 {
        vec![q4[0].clone(), q4[1].clone(), q4[2].clone(), v4[3].clone()]
    } else {
        let hidden = match (&v4[3], q_heads) {
            (d, Some(h)) => dims::mul(d, &Dim::Known(h)),
            _ => Dim::Unknown,
        };
        vec![q4[0].clone(), q4[2].clone(), hidden]
    };
    ctx.set_shape(0, dtype, y);
    let past = ctx.opt_shape(4).and_then(|s| s.get(2).cloned());
    let total = match &past {
        Some(p) => dims::add(p, &k4[2]),
        None if ctx.has_input(4) => Dim::Unknown,
        None => k4[2].clone(),
    };
    let cache_dtype = if ctx.has_input(4) { ctx.dtype(4)? } else { dtype };
    ctx.set_shape(1, cache_dtype, vec![k4[0].clone(), k4[1].clone(), total.clone(), k4[3].clone()]);
    ctx.set_shape(2, cache_dtype, vec![v4[0].clone(), v4[1].clone(), total.clone(), v4[3].clone()]);
    ctx.set_shape(3, dtype, vec![q4[0].clone(), q4[1].clone(), q4[2].clone(), total]);
    Ok(())
}

/// `LinearAttention(query, key, value[, past_state, decay, beta])` → output `[B, T, Hq·dv]`,
/// present_state `[B, Hkv, dk, dv]`.
fn linear_attention(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.dtype(0)?;
    let q_heads = ctx.attr_opt_i("q_num_heads")?;
    let kv_heads = ctx.attr_opt_i("kv_num_heads")?;
    let (Some([b, t, qh]), Some([_, _, vh])) = (
        ctx.shape(0)?.and_then(|s| <&[Dim; 3]>::try_from(s).ok()),
        ctx.shape(2)?.and_then(|s| <&[Dim; 3]>::try_from(s).ok()),
    ) else {
        ctx.set_tensor(0, dtype, None);
        let state = if ctx.has_input(3) { ctx.dtype(3)? } else { dtype };
        ctx.set_tensor(1, state, None);
        return Ok(());
    };
    let dv = per_head(vh, kv_heads);
    let dk = per_head(qh, q_heads);
    let hidden = q_heads.map_or(Dim::Unknown, |h| dims::mul(&dv, &Dim::Known(h)));
    ctx.set_shape(0, dtype, vec![b.clone(), t.clone(), hidden]);
    let state = if ctx.has_input(3) { ctx.dtype(3)? } else { dtype };
    let heads = kv_heads.map_or(Dim::Unknown, Dim::Known);
    ctx.set_shape(1, state, vec![b.clone(), heads, dk, dv]);
    Ok(())
}

/// `CausalConvWithState(input [B, C, L], weight [C, 1, k], ...)` → output like the input,
/// present_state `[B, C, k-1]`.
fn causal_conv_with_state(ctx: &mut NodeCtx) -> Result<()> {
    same_as_input(ctx, 0, 0)?;
    let dtype = ctx.dtype(0)?;
    let k = ctx.opt_shape(1).and_then(|w| w.get(2)).and_then(Dim::value);
    let state = ctx.shape(0)?.filter(|s| s.len() == 3).map(|s| {
        vec![s[0].clone(), s[1].clone(), k.map_or(Dim::Unknown, |k| Dim::Known(k - 1))]
    });
    ctx.set_tensor(1, dtype, state);
    Ok(())
}

/// `FlexAttention(Q, K, V)` → `[B, Hq, Sq, Dv]`.
fn flex_attention(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.dtype(0)?;
    let out = match (ctx.shape(0)?, ctx.shape(2)?) {
        (Some([b, h, s, _]), Some([_, _, _, dv])) => Some(vec![b.clone(), h.clone(), s.clone(), dv.clone()]),
        _ => None,
    };
    ctx.set_tensor(0, dtype, out);
    Ok(())
}
