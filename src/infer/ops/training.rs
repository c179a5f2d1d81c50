//! `ai.onnx.preview.training`: optimizers (each output typed like the matching state input)
//! and `Gradient` (each output typed like the tensor it differentiates by).

use anyhow::Result;

use super::Entry;
use super::util::same_as_input;
use crate::infer::NodeCtx;

const TRAINING: &str = "ai.onnx.preview.training";

/// This family's rows of the rule table.
pub const RULES: &[Entry] = &[
    (TRAINING, "Adagrad", optimizer),
    (TRAINING, "Adam", optimizer),
    (TRAINING, "Momentum", optimizer),
    (TRAINING, "Gradient", gradient),
];

/// Inputs are `R, T` then groups of n tensors (X, G, states...); outputs are the new X and the
/// new states: every group but the gradients, so n = inputs - 2 - outputs.
fn optimizer(ctx: &mut NodeCtx) -> Result<()> {
    let outputs = ctx.output_count();
    let n = (ctx.input_count().saturating_sub(2)).saturating_sub(outputs);
    if n == 0 || !outputs.is_multiple_of(n) {
        return Err(ctx.error("inputs and outputs do not form groups of equal size"));
    }
    for out in 0..outputs {
        let (group, j) = (out / n, out % n);
        let input_group = if group == 0 { 0 } else { group + 1 };
        same_as_input(ctx, 2 + input_group * n + j, out)?;
    }
    Ok(())
}

/// `Gradient`: output i is the gradient with respect to the tensor named `xs[i]`.
fn gradient(ctx: &mut NodeCtx) -> Result<()> {
    let xs: Vec<String> = ctx
        .attr("xs")
        .ok_or_else(|| ctx.error("attribute 'xs' is required"))?
        .strings
        .iter()
        .map(|s| String::from_utf8_lossy(s).into_owned())
        .collect();
    for (i, name) in xs.iter().enumerate().take(ctx.output_count()) {
        let ty = ctx
            .graph
            .value(name)
            .and_then(|v| v.ty.clone())
            .ok_or_else(|| ctx.error(format!("xs names '{name}', which has no known type")))?;
        ctx.set(i, ty);
    }
    Ok(())
}
