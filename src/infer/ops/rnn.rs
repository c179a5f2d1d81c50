//! Recurrent layers: `RNN`, `GRU`, `LSTM` (both layouts, bidirectional).

use anyhow::Result;

use super::Entry;
use crate::infer::NodeCtx;
use crate::ir::{Dim, Shape};

/// This family's rows of the rule table.
pub const RULES: &[Entry] = &[("", "RNN", recurrent), ("", "GRU", recurrent), ("", "LSTM", recurrent)];

/// `Y [seq, dirs, batch, hidden]` (layout 1: `[batch, seq, dirs, hidden]`), `Y_h` and LSTM's
/// `Y_c` `[dirs, batch, hidden]` (layout 1: `[batch, dirs, hidden]`).
fn recurrent(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.dtype(0)?;
    let dirs = Dim::Known(if ctx.attr_s("direction").as_deref() == Some("bidirectional") { 2 } else { 1 });
    let hidden = match ctx.attr_opt_i("hidden_size")? {
        Some(h) => Dim::Known(h),
        None => ctx.opt_shape(2).and_then(|r| r.get(2).cloned()).unwrap_or(Dim::Unknown),
    };
    let layout = ctx.attr_i("layout", 0)?;
    let (seq, batch) = match ctx.shape(0)? {
        Some([a, b, _]) if layout == 0 => (a.clone(), b.clone()),
        Some([a, b, _]) => (b.clone(), a.clone()),
        Some(s) => return Err(ctx.error(format!("input X has rank {}, expected 3", s.len()))),
        None => (Dim::Unknown, Dim::Unknown),
    };
    let (y, state): (Shape, Shape) = if layout == 0 {
        (
            vec![seq, dirs.clone(), batch.clone(), hidden.clone()],
            vec![dirs, batch, hidden],
        )
    } else {
        (
            vec![batch.clone(), seq, dirs.clone(), hidden.clone()],
            vec![batch, dirs, hidden],
        )
    };
    ctx.set_shape(0, dtype, y);
    for out in 1..ctx.output_count() {
        ctx.set_shape(out, dtype, state.clone());
    }
    Ok(())
}
