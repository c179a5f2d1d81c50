//! `ai.onnx.ml` operators whose output shapes follow from their inputs and attributes.

use anyhow::Result;

use super::Entry;
use super::util::{same_as_input, shape_of_input};
use crate::infer::NodeCtx;
use crate::ir::{DType, Dim};

const ML: &str = "ai.onnx.ml";

/// This family's rows of the rule table.
pub const RULES: &[Entry] = &[
    (ML, "LabelEncoder", label_encoder),
    (ML, "Binarizer", same),
    (ML, "Normalizer", float_like),
    (ML, "Scaler", float_like),
    (ML, "TreeEnsemble", tree_ensemble),
    (ML, "ArrayFeatureExtractor", array_feature_extractor),
];

fn same(ctx: &mut NodeCtx) -> Result<()> {
    same_as_input(ctx, 0, 0)
}

fn float_like(ctx: &mut NodeCtx) -> Result<()> {
    shape_of_input(ctx, 0, 0, DType::Float)
}

/// The input's shape; the element type of whichever `values_*` attribute is set.
fn label_encoder(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = if let Some(t) = ctx.node().attr_tensor("values_tensor") {
        DType::from_onnx(t.data_type()).ok_or_else(|| ctx.error("values_tensor has an unknown type"))?
    } else if ctx.attr("values_strings").is_some() {
        DType::String
    } else if ctx.attr("values_int64s").is_some() {
        DType::Int64
    } else if ctx.attr("values_floats").is_some() {
        DType::Float
    } else {
        return Err(ctx.error("no values_* attribute"));
    };
    shape_of_input(ctx, 0, 0, dtype)
}

/// `[N, n_targets]` in the input's type.
fn tree_ensemble(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.dtype(0)?;
    let n = ctx.shape(0)?.and_then(|s| s.first().cloned()).unwrap_or(Dim::Unknown);
    let targets = ctx.attr_opt_i("n_targets")?.map_or(Dim::Unknown, Dim::Known);
    ctx.set_shape(0, dtype, vec![n, targets]);
    Ok(())
}

/// `X [..., C]`, `Y [k]` → `[..., k]` (`[1, k]` for a 1-D `X`).
fn array_feature_extractor(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.dtype(0)?;
    let k = ctx.shape(1)?.map_or(Dim::Unknown, crate::infer::dims::product);
    let out = ctx.shape(0)?.map(|x| match x {
        [_] => vec![Dim::Known(1), k.clone()],
        _ => {
            let mut s = x.to_vec();
            if let Some(last) = s.last_mut() {
                *last = k.clone();
            }
            s
        }
    });
    ctx.set_tensor(0, dtype, out);
    Ok(())
}
