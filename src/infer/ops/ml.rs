//! `ai.onnx.ml` operators whose output shapes follow from their inputs and attributes.

use anyhow::Result;

use super::Entry;
use super::util::{same_as_input, shape_of_input};
use crate::infer::NodeCtx;
use crate::ir::{DType, Dim, ValueType};

const ML: &str = "ai.onnx.ml";

/// This family's rows of the rule table.
pub const RULES: &[Entry] = &[
    (ML, "LabelEncoder", label_encoder),
    (ML, "Binarizer", same),
    (ML, "Normalizer", float_like),
    (ML, "Scaler", float_like),
    (ML, "TreeEnsemble", tree_ensemble),
    (ML, "ArrayFeatureExtractor", array_feature_extractor),
    (ML, "Imputer", same),
    (ML, "CategoryMapper", category_mapper),
    (ML, "OneHotEncoder", one_hot_encoder),
    (ML, "FeatureVectorizer", feature_vectorizer),
    (ML, "LinearRegressor", regressor),
    (ML, "SVMRegressor", regressor),
    (ML, "TreeEnsembleRegressor", regressor),
    (ML, "LinearClassifier", classifier),
    (ML, "SVMClassifier", classifier),
    (ML, "TreeEnsembleClassifier", classifier),
    (ML, "ZipMap", zip_map),
    (ML, "CastMap", cast_map),
    (ML, "DictVectorizer", dict_vectorizer),
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

/// Strings map to int64 and back, same shape.
fn category_mapper(ctx: &mut NodeCtx) -> Result<()> {
    let to = if ctx.dtype(0)? == DType::String { DType::Int64 } else { DType::String };
    shape_of_input(ctx, 0, 0, to)
}

/// Float `[..., number of categories]`.
fn one_hot_encoder(ctx: &mut NodeCtx) -> Result<()> {
    let cats = ctx
        .attr("cats_int64s")
        .map(|a| a.ints.len())
        .or_else(|| ctx.attr("cats_strings").map(|a| a.strings.len()))
        .map_or(Dim::Unknown, |n| Dim::Known(n as i64));
    let out = ctx.shape(0)?.map(|s| {
        let mut s = s.to_vec();
        s.push(cats);
        s
    });
    ctx.set_tensor(0, DType::Float, out);
    Ok(())
}

/// The batch size of input 0 (the first dim, or 1 for a 1-D input).
fn batch(ctx: &NodeCtx) -> Dim {
    match ctx.opt_shape(0) {
        Some([_]) => Dim::Known(1),
        Some([n, ..]) => n.clone(),
        _ => Dim::Unknown,
    }
}

/// Float `[N, sum(inputdimensions)]`.
fn feature_vectorizer(ctx: &mut NodeCtx) -> Result<()> {
    let width = ctx
        .attr_ints("inputdimensions")
        .map_or(Dim::Unknown, |d| Dim::Known(d.iter().sum()));
    let n = batch(ctx);
    ctx.set_shape(0, DType::Float, vec![n, width]);
    Ok(())
}

/// Float `[N, targets]` (`targets`/`n_targets` attribute, default 1).
fn regressor(ctx: &mut NodeCtx) -> Result<()> {
    let targets = match ctx.attr_opt_i("targets")? {
        Some(t) => t,
        None => ctx.attr_i("n_targets", 1)?,
    };
    let n = batch(ctx);
    ctx.set_shape(0, DType::Float, vec![n, Dim::Known(targets)]);
    Ok(())
}

/// Labels `[N]` (int64 or string by the class labels given) and float scores
/// `[N, classes]`.
fn classifier(ctx: &mut NodeCtx) -> Result<()> {
    let (dtype, classes) = match (ctx.attr("classlabels_strings"), ctx.attr("classlabels_ints")) {
        (Some(a), _) => (DType::String, a.strings.len()),
        (None, Some(a)) => (DType::Int64, a.ints.len()),
        (None, None) => return Err(ctx.error("no classlabels_* attribute")),
    };
    let n = batch(ctx);
    ctx.set_shape(0, dtype, vec![n.clone()]);
    ctx.set_shape(1, DType::Float, vec![n, Dim::Known(classes as i64)]);
    Ok(())
}

/// A sequence of maps from the class labels to float scores.
fn zip_map(ctx: &mut NodeCtx) -> Result<()> {
    let key = if ctx.attr("classlabels_strings").is_some() { DType::String } else { DType::Int64 };
    let map = ValueType::Map(key, Box::new(ValueType::tensor(DType::Float, vec![])));
    ctx.set(0, ValueType::Sequence(Box::new(map)));
    Ok(())
}

/// `[1, max_map]` for the sparse form, `[1, ?]` (the map's size) for the dense one; the element
/// type chosen by `cast_to`.
fn cast_map(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = match ctx.attr_s("cast_to").as_deref() {
        None | Some("TO_FLOAT") => DType::Float,
        Some("TO_INT64") => DType::Int64,
        Some("TO_STRING") => DType::String,
        Some(other) => return Err(ctx.error(format!("unknown cast_to '{other}'"))),
    };
    let width = match ctx.attr_s("map_form").as_deref() {
        Some("SPARSE") => Dim::Known(ctx.attr_i("max_map", 1)?),
        _ => Dim::Unknown,
    };
    ctx.set_shape(0, dtype, vec![Dim::Known(1), width]);
    Ok(())
}

/// `[1, vocabulary size]` in the map's value type.
fn dict_vectorizer(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = match ctx.input(0)? {
        ValueType::Map(_, v) => match &**v {
            ValueType::Tensor(t) => t.dtype,
            other => return Err(ctx.error(format!("map values must be tensors, not {other}"))),
        },
        other => return Err(ctx.error(format!("input must be a map, not {other}"))),
    };
    let width = ctx
        .attr("string_vocabulary")
        .map(|a| a.strings.len())
        .or_else(|| ctx.attr("int64_vocabulary").map(|a| a.ints.len()))
        .map_or(Dim::Unknown, |n| Dim::Known(n as i64));
    ctx.set_shape(0, dtype, vec![Dim::Known(1), width]);
    Ok(())
}
