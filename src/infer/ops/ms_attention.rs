//! onnxruntime's `com.microsoft` attention operators: `Attention` (merged QKV projection,
//! 5-D past/present), `MultiHeadAttention`, `DecoderMaskedMultiHeadAttention`,
//! `GroupQueryAttention` (4-D key/value caches), the packed variants, and the position-bias
//! and rotary helpers around them.

use anyhow::Result;

use super::microsoft::MS;
use super::util::same_as_input;
use super::Entry;
use crate::infer::dims;
use crate::infer::NodeCtx;
use crate::ir::{Dim, Shape};

/// This family's rows of the rule table.
pub const RULES: &[Entry] = &[
    (MS, "Attention", attention),
    (MS, "DecoderMaskedSelfAttention", attention),
    (MS, "QAttention", attention),
    (MS, "MultiHeadAttention", multi_head_attention),
    (MS, "DecoderMaskedMultiHeadAttention", multi_head_attention),
    (MS, "GroupQueryAttention", group_query_attention),
    (MS, "PackedAttention", packed_attention),
    (MS, "PackedMultiHeadAttention", packed_multi_head_attention),
    (MS, "LongformerAttention", same),
    (MS, "RotaryEmbedding", same),
    (MS, "GemmaRotaryEmbedding", gemma_rotary_embedding),
    (MS, "RelativePositionBias", relative_position_bias),
    (MS, "GatedRelativePositionBias", gated_relative_position_bias),
];

fn same(ctx: &mut NodeCtx) -> Result<()> {
    same_as_input(ctx, 0, 0)
}

/// A required positive integer attribute.
fn heads(ctx: &NodeCtx, name: &str) -> Result<i64> {
    match ctx.attr_opt_i(name)? {
        Some(n) if n > 0 => Ok(n),
        Some(n) => Err(ctx.error(format!("attribute '{name}' must be positive, not {n}"))),
        None => Err(ctx.error(format!("attribute '{name}' is required"))),
    }
}

/// `d / n`; an error when a known `d` is not a multiple of `n`.
fn split(ctx: &NodeCtx, d: &Dim, n: i64, what: &str) -> Result<Dim> {
    match d {
        Dim::Known(v) if v % n != 0 => Err(ctx.error(format!("{what} {v} is not a multiple of {n}"))),
        Dim::Known(v) => Ok(Dim::Known(v / n)),
        other if n == 1 => Ok(other.clone()),
        _ => Ok(Dim::Unknown),
    }
}

/// Input `i`'s shape when it is given, has a known rank, and that rank is one of `ranks`.
fn shape_of_rank<'a>(ctx: &NodeCtx<'a>, i: usize, ranks: &[usize]) -> Result<Option<&'a [Dim]>> {
    let Some(s) = ctx.opt_shape(i) else {
        return Ok(None);
    };
    if ranks.contains(&s.len()) {
        Ok(Some(s))
    } else {
        Err(ctx.error(format!("input {i} has rank {}, expected {ranks:?}", s.len())))
    }
}

/// The sizes of Q, K and V in a merged projection: attribute `qkv_hidden_sizes`, else a third
/// each of the bias length (or of the weights' second dim).
fn qkv_sizes(ctx: &NodeCtx) -> Result<[Dim; 3]> {
    if let Some(sizes) = ctx.attr_ints("qkv_hidden_sizes").filter(|s| !s.is_empty()) {
        let &[q, k, v] = sizes else {
            return Err(ctx.error("attribute 'qkv_hidden_sizes' must have 3 entries"));
        };
        return Ok([q, k, v].map(Dim::Known));
    }
    let total = match (shape_of_rank(ctx, 2, &[1])?, ctx.opt_shape(1)) {
        (Some([t]), _) => t.clone(),
        (_, Some([_, t])) => t.clone(),
        _ => Dim::Unknown,
    };
    let third = split(ctx, &total, 3, "the merged Q/K/V size")?;
    Ok([third.clone(), third.clone(), third])
}

/// `Attention(input, weights[, bias, mask_index, past, attention_bias, past_sequence_length])`:
/// output `[B, S, v_hidden]`; present `[2, B, N, past + S, head]` (the past's shape when
/// `past_present_share_buffer` is set). `QAttention(input, weight, bias, input_scale, ...,
/// past)` has its past at input 8 and the scales' float type.
fn attention(ctx: &mut NodeCtx) -> Result<()> {
    let (past_input, dtype) = match ctx.node().op_type.as_str() {
        "QAttention" => (8, ctx.dtype(3)?),
        _ => (4, ctx.dtype(0)?),
    };
    let input = shape_of_rank(ctx, 0, &[3])?;
    let [_, _, v_hidden] = qkv_sizes(ctx)?;
    let (batch, seq) = match input {
        Some([b, s, _]) => (b.clone(), s.clone()),
        _ => (Dim::Unknown, Dim::Unknown),
    };
    ctx.set_tensor(0, dtype, Some(vec![batch.clone(), seq.clone(), v_hidden.clone()]));
    if !ctx.has_output(1) {
        return Ok(());
    }
    let num_heads = heads(ctx, "num_heads")?;
    let present = match shape_of_rank(ctx, past_input, &[5])? {
        Some(past) if ctx.attr_i("past_present_share_buffer", 0)? != 0 => past.to_vec(),
        Some(past) => {
            let mut p = past.to_vec();
            p[3] = dims::add(&past[3], &seq);
            p
        }
        None if ctx.has_input(past_input) => vec![Dim::Unknown; 5],
        None => {
            let head = split(ctx, &v_hidden, num_heads, "the value hidden size")?;
            vec![Dim::Known(2), batch, Dim::Known(num_heads), seq, head]
        }
    };
    ctx.set_tensor(1, dtype, Some(present));
    Ok(())
}

/// The sequence length of keys/values fed to a multi-head attention, and the cache layout
/// `[B, N, L, H]` they would take, from `key` (input 1, or the packed `query`).
struct KeyView {
    batch: Dim,
    kv_seq: Dim,
    /// `[B, N, L, H]` when key is already in cache layout (cross attention).
    cache: Option<Shape>,
    key_hidden: Dim,
    value_hidden: Dim,
}

/// `MultiHeadAttention(query, key, value, bias, key_padding_mask, attention_bias, past_key,
/// past_value, past_sequence_length, cache_indirection)` and
/// `DecoderMaskedMultiHeadAttention(query, key, value, mask_index, attention_bias, past_key,
/// past_value, past_sequence_length, ...)`: output `[B, S, v_hidden]`; present key/value
/// `[B, N, past + L, H]` (the past's shape when the buffer is shared); `qk`
/// `[B, N, S, total]`.
fn multi_head_attention(ctx: &mut NodeCtx) -> Result<()> {
    let decoder = ctx.node().op_type == "DecoderMaskedMultiHeadAttention";
    let (past_key, past_len) = if decoder { (5, 7) } else { (6, 8) };
    let dtype = ctx.dtype(0)?;
    let num_heads = heads(ctx, "num_heads")?;
    let query = shape_of_rank(ctx, 0, &[3, 5])?;
    let key = if ctx.has_input(1) { shape_of_rank(ctx, 1, &[3, 4, 5])? } else { None };
    let value = if ctx.has_input(2) { shape_of_rank(ctx, 2, &[3, 4])? } else { None };
    let seq = query.map_or(Dim::Unknown, |q| q[1].clone());
    let view = key_view(ctx, query, key, value, num_heads, decoder)?;
    let output = query.map(|q| vec![q[0].clone(), q[1].clone(), view.value_hidden.clone()]);
    ctx.set_tensor(0, dtype, output);

    let share = ctx.attr_i("past_present_share_buffer", 0)? != 0 || (!decoder && ctx.has_input(past_len));
    let past = shape_of_rank(ctx, past_key, &[4])?;
    let (present_k, present_v, total) = match (past, &view.cache) {
        (Some(p), _) if share => (p.to_vec(), p.to_vec(), Dim::Unknown),
        (Some(p), _) => {
            let total = dims::add(&p[2], &view.kv_seq);
            let mut k = p.to_vec();
            k[2] = total.clone();
            (k.clone(), k, total)
        }
        (None, _) if ctx.has_input(past_key) => (vec![Dim::Unknown; 4], vec![Dim::Unknown; 4], Dim::Unknown),
        (None, Some(cache)) => {
            let v = value.map_or_else(|| cache.clone(), <[Dim]>::to_vec);
            (cache.clone(), v, cache[2].clone())
        }
        (None, None) => {
            let cache = |hidden: &Dim| -> Result<Shape> {
                let head = split(ctx, hidden, num_heads, "the hidden size")?;
                Ok(vec![view.batch.clone(), Dim::Known(num_heads), view.kv_seq.clone(), head])
            };
            (cache(&view.key_hidden)?, cache(&view.value_hidden)?, view.kv_seq.clone())
        }
    };
    ctx.set_tensor(1, dtype, Some(present_k));
    ctx.set_tensor(2, dtype, Some(present_v));
    let qk = vec![view.batch.clone(), Dim::Known(num_heads), seq, total];
    ctx.set_tensor(3, dtype, Some(qk));
    Ok(())
}

/// Reads the key/value layout of a (decoder-masked) multi-head attention.
fn key_view(
    ctx: &NodeCtx,
    query: Option<&[Dim]>,
    key: Option<&[Dim]>,
    value: Option<&[Dim]>,
    num_heads: i64,
    decoder: bool,
) -> Result<KeyView> {
    let batch = query.map_or(Dim::Unknown, |q| q[0].clone());
    let n = Dim::Known(num_heads);
    let packed_heads = |h: &Dim| dims::mul(&n, h);
    Ok(match (query, key, value) {
        // Packed QKV [B, L, N, 3, H].
        (Some([b, l, _, _, h]), _, _) => {
            let hidden = packed_heads(h);
            KeyView { batch: b.clone(), kv_seq: l.clone(), cache: None, key_hidden: hidden.clone(), value_hidden: hidden }
        }
        // Packed KV [B, L, N, 2, H].
        (_, Some([_, l, _, _, h]), _) => {
            let hidden = packed_heads(h);
            KeyView { batch, kv_seq: l.clone(), cache: None, key_hidden: hidden.clone(), value_hidden: hidden }
        }
        // Key and value already in cache layout [B, N, L, H].
        (_, Some(k @ [_, _, l, h]), v) => {
            let value_hidden = match v {
                Some([_, vn, _, vh]) => dims::mul(vn, vh),
                _ => packed_heads(h),
            };
            KeyView { batch, kv_seq: l.clone(), cache: Some(k.to_vec()), key_hidden: packed_heads(h), value_hidden }
        }
        (_, Some([_, l, kh]), Some(v)) => {
            let value_hidden = match v {
                [_, _, vh] => vh.clone(),
                [_, vn, _, vh] => dims::mul(vn, vh),
                _ => Dim::Unknown,
            };
            KeyView { batch, kv_seq: l.clone(), cache: None, key_hidden: kh.clone(), value_hidden }
        }
        // Decoder-masked packed QKV [B, S, 2·hidden + v_hidden] with equal sizes.
        (Some([_, s, d]), None, None) if decoder => {
            let third = split(ctx, d, 3, "the packed Q/K/V size")?;
            KeyView { batch, kv_seq: s.clone(), cache: None, key_hidden: third.clone(), value_hidden: third }
        }
        _ => KeyView {
            batch,
            kv_seq: Dim::Unknown,
            cache: None,
            key_hidden: Dim::Unknown,
            value_hidden: Dim::Unknown,
        },
    })
}

/// `GroupQueryAttention(query, key, value, past_key, past_value, seqlens_k,
/// total_sequence_length, ...)`: output `[B, S, N·H]`; present key/value
/// `[B, kv_heads, max(past, total), H]` in the cache's element type; `output_qk`
/// `[B, N, S, total]`.
fn group_query_attention(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.dtype(0)?;
    let num_heads = heads(ctx, "num_heads")?;
    let kv_heads = heads(ctx, "kv_num_heads")?;
    let query = shape_of_rank(ctx, 0, &[3])?;
    let packed = !ctx.has_input(2);
    let (heads_in_query, what) = if packed {
        let total = kv_heads
            .checked_mul(2)
            .and_then(|k| k.checked_add(num_heads))
            .ok_or_else(|| ctx.error("the head counts overflow"))?;
        (total, "the packed QKV size")
    } else {
        (num_heads, "the query hidden size")
    };
    let (batch, seq, head) = match query {
        Some([b, s, d]) => (b.clone(), s.clone(), split(ctx, d, heads_in_query, what)?),
        _ => (Dim::Unknown, Dim::Unknown, Dim::Unknown),
    };
    let output = query.map(|_| vec![batch.clone(), seq.clone(), dims::mul(&head, &Dim::Known(num_heads))]);
    ctx.set_tensor(0, dtype, output);
    let kv_seq = match (packed, shape_of_rank(ctx, 2, &[3])?) {
        (false, Some(v)) => v[1].clone(),
        (false, None) => Dim::Unknown,
        (true, _) => seq.clone(),
    };
    let total = ctx
        .dims_value(6)
        .and_then(|d| (d.len() == 1).then(|| d[0].clone()))
        .unwrap_or(Dim::Unknown);
    let past = shape_of_rank(ctx, 3, &[4])?;
    let window_cache = ctx.attr_i("sliding_window_cache", 0)? == 1;
    let (present_seq, head) = match past {
        Some(p) if window_cache => (p[2].clone(), p[3].clone()),
        Some(p) => (present_length(&p[2], &total), p[3].clone()),
        None if ctx.has_input(3) => (Dim::Unknown, head),
        None => (if total == Dim::Unknown { kv_seq } else { total.clone() }, head),
    };
    let cache_dtype = if ctx.has_input(3) { ctx.dtype(3)? } else { dtype };
    let present = vec![batch.clone(), Dim::Known(kv_heads), present_seq, head];
    ctx.set_tensor(1, cache_dtype, Some(present.clone()));
    ctx.set_tensor(2, cache_dtype, Some(present));
    ctx.set_tensor(3, dtype, Some(vec![batch, Dim::Known(num_heads), seq, total]));
    Ok(())
}

/// The cache length after a step: the larger of the past buffer and the total length.
fn present_length(past: &Dim, total: &Dim) -> Dim {
    match (past, total) {
        (Dim::Known(p), Dim::Known(t)) => Dim::Known(*p.max(t)),
        (Dim::Known(0), t) => t.clone(),
        (p, t) if p == t => p.clone(),
        _ => Dim::Unknown,
    }
}

/// `PackedAttention(input [T, D], weights, bias, token_offset, cumulative_sequence_length
/// [, attention_bias])`: `[T, v_hidden]`.
fn packed_attention(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.dtype(0)?;
    let [_, _, v_hidden] = qkv_sizes(ctx)?;
    let out = shape_of_rank(ctx, 0, &[2])?.map(|x| vec![x[0].clone(), v_hidden]);
    ctx.set_tensor(0, dtype, out);
    Ok(())
}

/// `PackedMultiHeadAttention(query, key, value, ...)`: `[T, v_hidden]`, from a packed query
/// `[T, N, 3, H]` or the value `[T, v_hidden]`.
fn packed_multi_head_attention(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.dtype(0)?;
    let out = match (shape_of_rank(ctx, 0, &[2, 4])?, ctx.opt_shape(2)) {
        (Some([t, n, _, h]), _) => Some(vec![t.clone(), dims::mul(n, h)]),
        (Some([t, _]), Some([_, v])) => Some(vec![t.clone(), v.clone()]),
        (Some([t, _]), _) => Some(vec![t.clone(), Dim::Unknown]),
        _ => None,
    };
    ctx.set_tensor(0, dtype, out);
    Ok(())
}

/// `GemmaRotaryEmbedding(emb, q, q_rot, k, k_rot)`: both outputs like `q`.
fn gemma_rotary_embedding(ctx: &mut NodeCtx) -> Result<()> {
    same_as_input(ctx, 1, 0)?;
    same_as_input(ctx, 1, 1)
}

/// `RelativePositionBias(bias_table [buckets, N], query_length, key_length)`:
/// `[1, N, query_length, key_length]`.
fn relative_position_bias(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.dtype(0)?;
    let heads = match ctx.shape(0)? {
        Some([_, n, ..]) => n.clone(),
        Some(s) => return Err(ctx.error(format!("bias_table has rank {}, expected 2", s.len()))),
        None => Dim::Unknown,
    };
    let length = |i: usize| {
        ctx.dims_value(i)
            .and_then(|d| (d.len() == 1).then(|| d[0].clone()))
            .unwrap_or(Dim::Unknown)
    };
    let out = vec![Dim::Known(1), heads, length(1), length(2)];
    ctx.set_tensor(0, dtype, Some(out));
    Ok(())
}

/// `GatedRelativePositionBias(query_layer, query_bias, rel_pos, weight, bias, eco_a
/// [, token_offset])`: `[B, N, S, S]`, with `B` and `S` from `token_offset [B, S]` when the
/// query is packed, else from `query_layer [B, S, hidden]`.
fn gated_relative_position_bias(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.dtype(0)?;
    let num_heads = heads(ctx, "num_heads")?;
    let from = if ctx.has_input(6) { ctx.shape(6)? } else { shape_of_rank(ctx, 0, &[3])? };
    let out = match from {
        Some([b, s, ..]) => Some(vec![b.clone(), Dim::Known(num_heads), s.clone(), s.clone()]),
        Some(s) => return Err(ctx.error(format!("token_offset has rank {}, expected 2", s.len()))),
        None => None,
    };
    ctx.set_tensor(0, dtype, out);
    Ok(())
}
