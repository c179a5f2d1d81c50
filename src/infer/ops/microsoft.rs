//! onnxruntime's `com.microsoft` fused operators (what its offline optimizer writes at the
//! basic and extended levels): fused convolution, Gemm and MatMul, the Gelu family, bias
//! fusions, and the small operators onnxruntime keeps in its own domain (`Inverse`, `Trilu`,
//! `GridSample`, `GatherND`, `Range`).

use anyhow::{Result, anyhow};

use super::Entry;
use super::matmul::matmul_shape;
use super::util::{same_as_input, shape_of_input};
use crate::infer::NodeCtx;
use crate::ir::{DType, Dim, Shape};

/// The `com.microsoft` domain.
pub const MS: &str = "com.microsoft";

/// This family's rows of the rule table.
pub const RULES: &[Entry] = &[
    (MS, "FusedConv", like_conv),
    (MS, "FusedGemm", like_gemm),
    (MS, "FusedMatMul", fused_matmul),
    (MS, "TransposeMatMul", fused_matmul),
    (MS, "Gelu", same),
    (MS, "FastGelu", same),
    (MS, "BiasGelu", same),
    (MS, "QuickGelu", same),
    (MS, "BiasAdd", same),
    (MS, "BiasSoftmax", same),
    (MS, "BiasDropout", bias_dropout),
    (MS, "FusedMatMulActivation", fused_matmul),
    (MS, "GemmFastGelu", like_matmul),
    (MS, "BiasSplitGelu", bias_split_gelu),
    (MS, "Inverse", inverse),
    (MS, "Trilu", trilu),
    (MS, "GridSample", like_grid_sample),
    (MS, "GatherND", like_gather_nd),
    (MS, "Range", range),
];

/// Applies the default domain's rule for `op` to this node (for fusions whose inputs and
/// attributes extend that operator's).
pub fn onnx_rule(ctx: &mut NodeCtx, op: &str) -> Result<()> {
    let rule = super::rule("", op)
        .ok_or_else(|| anyhow!("internal error: no rule for '{op}' to apply to {}", ctx.label()))?;
    rule(ctx)
}

fn same(ctx: &mut NodeCtx) -> Result<()> {
    same_as_input(ctx, 0, 0)
}

/// `FusedConv(X, W[, B, Z])`: `Conv` followed by an activation (and an added `Z`).
fn like_conv(ctx: &mut NodeCtx) -> Result<()> {
    onnx_rule(ctx, "Conv")
}

/// `FusedGemm(A, B[, C])`: `Gemm` followed by an activation.
fn like_gemm(ctx: &mut NodeCtx) -> Result<()> {
    onnx_rule(ctx, "Gemm")
}

/// `GemmFastGelu(X, W[, bias])`: `MatMul` followed by `FastGelu`.
fn like_matmul(ctx: &mut NodeCtx) -> Result<()> {
    onnx_rule(ctx, "MatMul")
}

/// `GridSample(X [N, C, H, W], grid [N, H_out, W_out, 2])`: `[N, C, H_out, W_out]`.
fn like_grid_sample(ctx: &mut NodeCtx) -> Result<()> {
    onnx_rule(ctx, "GridSample")
}

/// `GatherND(data, indices)`: ONNX `GatherND` with no batch dims.
fn like_gather_nd(ctx: &mut NodeCtx) -> Result<()> {
    onnx_rule(ctx, "GatherND")
}

/// `FusedMatMul(A, B)`: `alpha·op(A)·op(B)` under numpy rules, where `transA`/`transB`
/// swap the matrix axes and `transBatchA`/`transBatchB` move the first axis behind the
/// batch axes (`[d0, b.., dn] → [b.., d0, dn]`).
fn fused_matmul(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.dtype(0)?;
    let (Some(a), Some(b)) = (ctx.shape(0)?, ctx.shape(1)?) else {
        ctx.set_tensor(0, dtype, None);
        return Ok(());
    };
    let batch_a = ctx.attr_i("transBatchA", 0)? != 0;
    let batch_b = ctx.attr_i("transBatchB", 0)? != 0;
    if (batch_a || batch_b) && (a.len() < 3 || a.len() != b.len()) {
        return Err(ctx.error(format!(
            "transBatchA/transBatchB need inputs of equal rank 3 or more, not {} and {}",
            a.len(),
            b.len()
        )));
    }
    let a = operand(a, ctx.attr_i("transA", 0)? != 0, batch_a);
    let b = operand(b, ctx.attr_i("transB", 0)? != 0, batch_b);
    let out = matmul_shape(&a, &b).map_err(|e| ctx.error(e))?;
    ctx.set_shape(0, dtype, out);
    Ok(())
}

/// One `FusedMatMul` operand as plain `MatMul` sees it (vectors are never transposed).
fn operand(s: &[Dim], trans: bool, trans_batch: bool) -> Shape {
    let r = s.len();
    if r < 2 {
        return s.to_vec();
    }
    let (mut out, rows, cols): (Shape, _, _) = if trans_batch {
        (s[1..r - 1].to_vec(), &s[0], &s[r - 1])
    } else {
        (s[..r - 2].to_vec(), &s[r - 2], &s[r - 1])
    };
    let (rows, cols) = if trans { (cols, rows) } else { (rows, cols) };
    out.push(rows.clone());
    out.push(cols.clone());
    out
}

/// `BiasDropout(data, bias[, residual, ratio, training_mode])`: output like `data`, the
/// optional mask bool of the same shape.
fn bias_dropout(ctx: &mut NodeCtx) -> Result<()> {
    same_as_input(ctx, 0, 0)?;
    shape_of_input(ctx, 0, 1, DType::Bool)
}

/// `BiasSplitGelu(X [B, HW, D], bias [D])`: `[B, HW, D/2]` (the halves of `X + bias`
/// multiplied, one through Gelu).
fn bias_split_gelu(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.dtype(0)?;
    let out = match ctx.shape(0)? {
        Some([b, s, Dim::Known(d)]) if d % 2 == 0 => Some(vec![b.clone(), s.clone(), Dim::Known(d / 2)]),
        Some([_, _, Dim::Known(d)]) => return Err(ctx.error(format!("the last dim {d} is odd"))),
        Some([b, s, _]) => Some(vec![b.clone(), s.clone(), Dim::Unknown]),
        Some(x) => return Err(ctx.error(format!("input has rank {}, expected 3", x.len()))),
        None => None,
    };
    ctx.set_tensor(0, dtype, out);
    Ok(())
}

/// `Range(start, limit[, delta])`: ONNX `Range`, with `delta` 1 when omitted.
fn range(ctx: &mut NodeCtx) -> Result<()> {
    if ctx.has_input(2) {
        return onnx_rule(ctx, "Range");
    }
    let dtype = ctx.dtype(0)?;
    let n = match (ctx.floats(0).as_deref(), ctx.floats(1).as_deref()) {
        (Some(&[s]), Some(&[l])) => Dim::Known((l - s).ceil().max(0.0) as i64),
        _ => match (ctx.dims_value(0).as_deref(), ctx.dims_value(1).as_deref()) {
            (Some([Dim::Known(0)]), Some([l])) => l.clone(),
            _ => Dim::Unknown,
        },
    };
    ctx.set_shape(0, dtype, vec![n]);
    Ok(())
}

/// `Inverse(X [*, M, M])`: same type and shape.
fn inverse(ctx: &mut NodeCtx) -> Result<()> {
    if let Some(x) = ctx.shape(0)? {
        let [.., h, w] = x else {
            return Err(ctx.error(format!("input has rank {}, expected 2 or more", x.len())));
        };
        if let (Dim::Known(h), Dim::Known(w)) = (h, w)
            && h != w
        {
            return Err(ctx.error(format!("the matrices are {h}×{w}, not square")));
        }
    }
    same(ctx)
}

/// `Trilu(X [*, N, M][, k])`: same type and shape.
fn trilu(ctx: &mut NodeCtx) -> Result<()> {
    if let Some(x) = ctx.shape(0)?
        && x.len() < 2
    {
        return Err(ctx.error(format!("input has rank {}, expected 2 or more", x.len())));
    }
    same(ctx)
}
