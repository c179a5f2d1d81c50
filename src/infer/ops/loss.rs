//! Loss operators: `NegativeLogLikelihoodLoss`, `SoftmaxCrossEntropyLoss`.

use anyhow::Result;

use super::Entry;
use super::util::same_as_input;
use crate::infer::NodeCtx;

/// This family's rows of the rule table.
pub const RULES: &[Entry] = &[
    ("", "NegativeLogLikelihoodLoss", loss),
    ("", "SoftmaxCrossEntropyLoss", loss),
];

/// Scalar loss for `mean`/`sum`, the target's shape for `none`; SoftmaxCrossEntropyLoss's
/// optional second output (log probabilities) is like the scores.
fn loss(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.dtype(0)?;
    let reduction = ctx.attr_s("reduction").unwrap_or_else(|| "mean".into());
    match reduction.as_str() {
        "none" => {
            let shape = ctx.shape(1)?.map(<[_]>::to_vec);
            ctx.set_tensor(0, dtype, shape);
        }
        "mean" | "sum" => ctx.set_shape(0, dtype, vec![]),
        other => return Err(ctx.error(format!("unknown reduction '{other}'"))),
    }
    if ctx.output_count() > 1 {
        same_as_input(ctx, 0, 1)?;
    }
    Ok(())
}
