//! `ai.onnx.preview.training` optimizers: each output has the type of the matching state input.

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
