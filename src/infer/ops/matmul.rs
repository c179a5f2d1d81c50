//! Matrix products: `MatMul` (numpy semantics), `Gemm`, `MatMulInteger`, `QLinearMatMul`,
//! `Einsum`.

use anyhow::Result;

use super::Entry;
use super::einsum;
use crate::infer::NodeCtx;
use crate::infer::dims;
use crate::ir::{DType, Dim, Shape};

/// This family's rows of the rule table.
pub const RULES: &[Entry] = &[
    ("", "MatMul", matmul),
    ("", "MatMulInteger", matmul),
    ("", "QLinearMatMul", matmul),
    ("", "Gemm", gemm),
    ("", "Einsum", einsum_rule),
];

/// Batched matrix product with broadcast batch dims and the 1-D special cases.
fn matmul(ctx: &mut NodeCtx) -> Result<()> {
    let (b, dtype) = match ctx.node().op_type.as_str() {
        "MatMulInteger" => (1, DType::Int32),
        "QLinearMatMul" => (3, ctx.dtype(7)?),
        _ => (1, ctx.dtype(0)?),
    };
    let (Some(x), Some(y)) = (ctx.shape(0)?, ctx.shape(b)?) else {
        ctx.set_tensor(0, dtype, None);
        return Ok(());
    };
    let out = matmul_shape(x, y).map_err(|e| ctx.error(e))?;
    ctx.set_shape(0, dtype, out);
    Ok(())
}

/// The shape of `x @ y` under numpy rules.
pub fn matmul_shape(x: &[Dim], y: &[Dim]) -> Result<Shape, String> {
    if x.is_empty() || y.is_empty() {
        return Err("MatMul inputs must have rank 1 or more".into());
    }
    let one = [Dim::Known(1)];
    let xs: Vec<Dim> = if x.len() == 1 { [&one[..], x].concat() } else { x.to_vec() };
    let ys: Vec<Dim> = if y.len() == 1 { [y, &one[..]].concat() } else { y.to_vec() };
    let (xb, xm) = xs.split_at(xs.len() - 2);
    let (yb, ym) = ys.split_at(ys.len() - 2);
    if let (Dim::Known(k1), Dim::Known(k2)) = (&xm[1], &ym[0])
        && k1 != k2
    {
        return Err(format!(
            "inner dimensions differ: {} and {}",
            crate::ir::format_shape(x),
            crate::ir::format_shape(y)
        ));
    }
    let mut out = dims::broadcast(&[xb, yb])?;
    if x.len() > 1 {
        out.push(xm[0].clone());
    }
    if y.len() > 1 {
        out.push(ym[1].clone());
    }
    Ok(out)
}

/// `Gemm`: `[M, N]` from `A` (or `Aᵀ`) and `B` (or `Bᵀ`).
fn gemm(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.dtype(0)?;
    let pick = |s: Option<&[Dim]>, transposed: bool, first: bool| -> Dim {
        match s {
            Some([r, c]) => {
                if transposed == first { c.clone() } else { r.clone() }
            }
            _ => Dim::Unknown,
        }
    };
    let m = pick(ctx.shape(0)?, ctx.attr_i("transA", 0)? == 1, true);
    let n = pick(ctx.shape(1)?, ctx.attr_i("transB", 0)? == 1, false);
    ctx.set_shape(0, dtype, vec![m, n]);
    Ok(())
}

/// `Einsum` by its equation.
fn einsum_rule(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.dtype(0)?;
    let equation = ctx
        .attr_s("equation")
        .ok_or_else(|| ctx.error("attribute 'equation' is required"))?;
    let mut shapes = Vec::with_capacity(ctx.input_count());
    for i in 0..ctx.input_count() {
        match ctx.shape(i)? {
            Some(s) => shapes.push(s),
            None => {
                ctx.set_tensor(0, dtype, None);
                return Ok(());
            }
        }
    }
    let out = einsum::output_shape(&equation, &shapes).map_err(|e| ctx.error(e))?;
    ctx.set_shape(0, dtype, out);
    Ok(())
}
