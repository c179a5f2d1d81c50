//! Quantization: `QuantizeLinear`, `DequantizeLinear`, `DynamicQuantizeLinear`.

use anyhow::Result;

use super::Entry;
use super::util::shape_of_input;
use crate::infer::NodeCtx;
use crate::ir::DType;

/// This family's rows of the rule table.
pub const RULES: &[Entry] = &[
    ("", "QuantizeLinear", quantize),
    ("", "DequantizeLinear", dequantize),
    ("", "DynamicQuantizeLinear", dynamic_quantize),
];

/// The zero point's type, else attribute `output_dtype`, else uint8.
fn quantize(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = if ctx.has_input(2) {
        ctx.dtype(2)?
    } else {
        ctx.attr_dtype("output_dtype")?.unwrap_or(DType::Uint8)
    };
    shape_of_input(ctx, 0, 0, dtype)
}

/// Attribute `output_dtype`, else the scale's type (float before opset 19).
fn dequantize(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = match ctx.attr_dtype("output_dtype")? {
        Some(d) => d,
        None if ctx.opset() >= 19 => ctx.dtype(1)?,
        None => DType::Float,
    };
    shape_of_input(ctx, 0, 0, dtype)
}

/// uint8 data like the input, float scale and uint8 zero point scalars.
fn dynamic_quantize(ctx: &mut NodeCtx) -> Result<()> {
    shape_of_input(ctx, 0, 0, DType::Uint8)?;
    ctx.set_shape(1, DType::Float, vec![]);
    ctx.set_shape(2, DType::Uint8, vec![]);
    Ok(())
}
