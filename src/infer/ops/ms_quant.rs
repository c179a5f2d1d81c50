//! onnxruntime's quantized `com.microsoft` operators: weight-only and integer matrix products
//! (`MatMulNBits`, `MatMulBnb4`, `MatMulInteger16`, `MatMulIntegerToFloat`,
//! `DynamicQuantizeMatMul`, `QGemm`), the `QLinear*` elementwise, concat and reduce operators,
//! its own `QuantizeLinear`/`DequantizeLinear`, `GatherBlockQuantized` and
//! `DynamicQuantizeLSTM`.

use anyhow::Result;

use super::Entry;
use super::matmul::matmul_shape;
use super::microsoft::{MS, onnx_rule};
use super::util::{axes, broadcast_inputs, same_as_input, shape_of_input};
use crate::infer::NodeCtx;
use crate::infer::dims;
use crate::ir::{DType, Dim, Shape};

/// This family's rows of the rule table.
pub const RULES: &[Entry] = &[
    (MS, "MatMulNBits", matmul_n),
    (MS, "MatMulBnb4", matmul_n),
    (MS, "MatMulInteger16", matmul_integer16),
    (MS, "MatMulIntegerToFloat", integer_matmul_to_float),
    (MS, "DynamicQuantizeMatMul", integer_matmul_to_float),
    (MS, "QGemm", qgemm),
    (MS, "QLinearAdd", qlinear_binary),
    (MS, "QLinearMul", qlinear_binary),
    (MS, "QLinearSigmoid", same),
    (MS, "QLinearLeakyRelu", same),
    (MS, "QLinearSoftmax", same),
    (MS, "QLinearWhere", qlinear_where),
    (MS, "QLinearConcat", qlinear_concat),
    (MS, "QLinearReduceMean", reduce_integer),
    (MS, "ReduceSumInteger", reduce_integer),
    (MS, "MulInteger", mul_integer),
    (MS, "QuantizeLinear", quantize),
    (MS, "DequantizeLinear", dequantize),
    (MS, "GatherBlockQuantized", gather_block_quantized),
    (MS, "DynamicQuantizeLSTM", dynamic_quantize_lstm),
];

fn same(ctx: &mut NodeCtx) -> Result<()> {
    same_as_input(ctx, 0, 0)
}

/// `MatMulNBits(A [..., K], B, scales, ...)` and `MatMulBnb4(A, B, absmax)`: `[..., N]` with
/// `N` from the attribute, in `A`'s type.
fn matmul_n(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.dtype(0)?;
    let n = match ctx.attr_opt_i("N")? {
        Some(n) if n > 0 => n,
        _ => return Err(ctx.error("attribute 'N' must be a positive integer")),
    };
    let out = match ctx.shape(0)? {
        Some([]) => return Err(ctx.error("input A is a scalar")),
        Some([batch @ .., _]) => Some([batch, &[Dim::Known(n)]].concat()),
        None => None,
    };
    ctx.set_tensor(0, dtype, out);
    Ok(())
}

/// `A @ B` under numpy rules, in `dtype`.
fn set_matmul(ctx: &mut NodeCtx, a: usize, b: usize, dtype: DType) -> Result<()> {
    let out = match (ctx.shape(a)?, ctx.shape(b)?) {
        (Some(x), Some(y)) => Some(matmul_shape(x, y).map_err(|e| ctx.error(e))?),
        _ => None,
    };
    ctx.set_tensor(0, dtype, out);
    Ok(())
}

/// `MatMulInteger16(A, B)`: int32 (uint32 when both are uint16).
fn matmul_integer16(ctx: &mut NodeCtx) -> Result<()> {
    let unsigned = ctx.dtype(0)? == DType::Uint16 && ctx.dtype(1)? == DType::Uint16;
    set_matmul(ctx, 0, 1, if unsigned { DType::Uint32 } else { DType::Int32 })
}

/// `MatMulIntegerToFloat(A, B, a_scale, ...)` (the scale's type) and
/// `DynamicQuantizeMatMul(A, B, ...)` (`A`'s type): `A @ B`.
fn integer_matmul_to_float(ctx: &mut NodeCtx) -> Result<()> {
    let from = if ctx.node().op_type == "MatMulIntegerToFloat" { 2 } else { 0 };
    let dtype = ctx.dtype(from)?;
    set_matmul(ctx, 0, 1, dtype)
}

/// `QGemm(A, a_scale, a_zp, B, b_scale, b_zp[, C, y_scale, y_zero_point])`: `[M, N]`; float,
/// or quantized like `y_zero_point` (uint8 without it) when `y_scale` is given.
fn qgemm(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = match (ctx.has_input(7), ctx.has_input(8)) {
        (false, _) => DType::Float,
        (true, true) => ctx.dtype(8)?,
        (true, false) => DType::Uint8,
    };
    let pick = |s: Option<&[Dim]>, transposed: bool, rows: bool| match s {
        Some([r, c]) => Ok(if transposed == rows { c.clone() } else { r.clone() }),
        Some(s) => Err(ctx.error(format!("QGemm inputs must be matrices, not rank {}", s.len()))),
        None => Ok(Dim::Unknown),
    };
    let m = pick(ctx.shape(0)?, ctx.attr_i("transA", 0)? != 0, true)?;
    let n = pick(ctx.shape(3)?, ctx.attr_i("transB", 0)? != 0, false)?;
    ctx.set_shape(0, dtype, vec![m, n]);
    Ok(())
}

/// `QLinearAdd`/`QLinearMul(A, A_scale, A_zp, B, B_scale, B_zp, C_scale, C_zp)`: the
/// broadcast of `A` and `B`, quantized like `A`.
fn qlinear_binary(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.dtype(0)?;
    let out = broadcast_inputs(ctx, [0, 3])?;
    ctx.set_tensor(0, dtype, out);
    Ok(())
}

/// `QLinearWhere(condition, X, x_scale, x_zp, Y, y_scale, y_zp, z_scale, z_zp)`: the
/// broadcast of the condition, `X` and `Y`, quantized like `X`.
fn qlinear_where(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.dtype(1)?;
    let out = broadcast_inputs(ctx, [0, 1, 4])?;
    ctx.set_tensor(0, dtype, out);
    Ok(())
}

/// `MulInteger(A, A_zp, B, B_zp)`: the broadcast of `A` and `B`, int32.
fn mul_integer(ctx: &mut NodeCtx) -> Result<()> {
    let out = broadcast_inputs(ctx, [0, 2])?;
    ctx.set_tensor(0, DType::Int32, out);
    Ok(())
}

/// `QLinearConcat(Y_scale, Y_zero_point, (X, X_scale, X_zero_point)...)`: the inputs `X`
/// joined along `axis`, quantized like `Y_zero_point`.
fn qlinear_concat(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.dtype(1)?;
    let count = ctx.input_count();
    if count < 5 || !(count - 2).is_multiple_of(3) {
        return Err(ctx.error(format!("{count} inputs do not form (tensor, scale, zero point) triples")));
    }
    let mut out: Option<Shape> = None;
    for i in (2..count).step_by(3) {
        let Some(s) = ctx.shape(i)? else {
            ctx.set_tensor(0, dtype, None);
            return Ok(());
        };
        let Some(acc) = out else {
            out = Some(s.to_vec());
            continue;
        };
        let axis = ctx.attr_axis("axis", 0, s.len())?;
        if acc.len() != s.len() {
            return Err(ctx.error(format!("inputs of ranks {} and {} cannot be joined", acc.len(), s.len())));
        }
        let mut joined = Vec::with_capacity(s.len());
        for (k, (x, y)) in acc.iter().zip(s).enumerate() {
            joined.push(match (k == axis, x, y) {
                (true, _, _) => dims::add(x, y),
                (false, Dim::Known(p), Dim::Known(q)) if p != q => {
                    return Err(ctx.error(format!("inputs differ on axis {k}: {p} and {q}")));
                }
                (false, Dim::Known(_), _) => x.clone(),
                (false, _, _) if x == y => x.clone(),
                (false, _, Dim::Known(_)) => y.clone(),
                _ => Dim::Unknown,
            });
        }
        out = Some(joined);
    }
    ctx.set_tensor(0, dtype, out);
    Ok(())
}

/// `QLinearReduceMean(data, ...)` (quantized like `data`) and `ReduceSumInteger(data)`
/// (int32): reduced over attribute `axes` (all when absent), kept as 1s when `keepdims`.
fn reduce_integer(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = if ctx.node().op_type == "ReduceSumInteger" { DType::Int32 } else { ctx.dtype(0)? };
    let Some(x) = ctx.shape(0)? else {
        ctx.set_tensor(0, dtype, None);
        return Ok(());
    };
    let reduced = match ctx.attr_ints("axes").filter(|a| !a.is_empty()) {
        Some(a) => axes(ctx, a, x.len())?,
        None => (0..x.len()).collect(),
    };
    let keep = ctx.attr_i("keepdims", 1)? != 0;
    let out = x
        .iter()
        .enumerate()
        .filter_map(|(i, d)| match (reduced.contains(&i), keep) {
            (false, _) => Some(d.clone()),
            (true, true) => Some(Dim::Known(1)),
            (true, false) => None,
        })
        .collect();
    ctx.set_shape(0, dtype, out);
    Ok(())
}

/// `QuantizeLinear(x, y_scale[, y_zero_point])`: the zero point's type, else uint8.
fn quantize(ctx: &mut NodeCtx) -> Result<()> {
    onnx_rule(ctx, "QuantizeLinear")
}

/// `DequantizeLinear(x, x_scale[, x_zero_point])`: the scale's type.
fn dequantize(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.dtype(1)?;
    shape_of_input(ctx, 0, 0, dtype)
}

/// `GatherBlockQuantized(data, indices, scales[, zero_points])`: `Gather` along
/// `gather_axis`, in the scales' type; uint8 data packs `8 / bits` values per byte along the
/// last axis, which the output unpacks.
fn gather_block_quantized(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.dtype(2)?;
    let (Some(data), Some(indices)) = (ctx.shape(0)?, ctx.shape(1)?) else {
        ctx.set_tensor(0, dtype, None);
        return Ok(());
    };
    let axis = ctx.attr_axis("gather_axis", 0, data.len())?;
    let mut data = data.to_vec();
    if ctx.dtype(0)? == DType::Uint8 {
        let bits = ctx.attr_i("bits", 4)?;
        if ![2, 4, 8].contains(&bits) {
            return Err(ctx.error(format!("attribute 'bits' is {bits}, expected 2, 4 or 8")));
        }
        if let Some(last) = data.last_mut() {
            *last = dims::mul(last, &Dim::Known(8 / bits));
        }
    }
    let mut out: Shape = data[..axis].to_vec();
    out.extend_from_slice(indices);
    out.extend_from_slice(&data[axis + 1..]);
    ctx.set_shape(0, dtype, out);
    Ok(())
}

/// `DynamicQuantizeLSTM(X [seq, batch, in], W, R [dirs, hidden, 4·hidden], ...)`: `Y`
/// `[seq, dirs, batch, hidden]`, `Y_h` and `Y_c` `[dirs, batch, hidden]`.
fn dynamic_quantize_lstm(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.dtype(0)?;
    let dirs = Dim::Known(if ctx.attr_s("direction").as_deref() == Some("bidirectional") { 2 } else { 1 });
    let hidden = match ctx.attr_opt_i("hidden_size")? {
        Some(h) => Dim::Known(h),
        None => ctx.opt_shape(2).and_then(|r| r.get(1).cloned()).unwrap_or(Dim::Unknown),
    };
    let (seq, batch) = match ctx.shape(0)? {
        Some([s, b, _]) => (s.clone(), b.clone()),
        Some(s) => return Err(ctx.error(format!("input X has rank {}, expected 3", s.len()))),
        None => (Dim::Unknown, Dim::Unknown),
    };
    ctx.set_shape(0, dtype, vec![seq, dirs.clone(), batch.clone(), hidden.clone()]);
    for out in 1..ctx.output_count() {
        ctx.set_shape(out, dtype, vec![dirs.clone(), batch.clone(), hidden.clone()]);
    }
    Ok(())
}
