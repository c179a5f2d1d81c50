//! `ai.onnx.ml` classifiers, regressors and feature transforms whose output shapes follow from
//! the batch size and the model's attributes (the ones `ml` does not cover), with the shapes
//! onnxruntime's kernels produce.

use anyhow::Result;

use super::Entry;
use super::util::shape_of_input;
use crate::infer::NodeCtx;
use crate::ir::{DType, Dim, TensorType, ValueType};

const ML: &str = "ai.onnx.ml";

/// This family's rows of the rule table.
pub const RULES: &[Entry] = &[
    (ML, "LinearClassifier", linear_classifier),
    (ML, "LinearRegressor", linear_regressor),
    (ML, "SVMClassifier", svm_classifier),
    (ML, "SVMRegressor", svm_regressor),
    (ML, "TreeEnsembleClassifier", tree_ensemble_classifier),
    (ML, "TreeEnsembleRegressor", tree_ensemble_regressor),
    (ML, "OneHotEncoder", one_hot_encoder),
    (ML, "Imputer", imputer),
    (ML, "CategoryMapper", category_mapper),
    (ML, "FeatureVectorizer", feature_vectorizer),
    (ML, "DictVectorizer", dict_vectorizer),
    (ML, "CastMap", cast_map),
    (ML, "ZipMap", zip_map),
];

/// The batch size `N` of an input `[N, C]` (`1` for a vector `[C]`).
fn batch(ctx: &NodeCtx) -> Result<Dim> {
    Ok(match ctx.shape(0)? {
        Some([_]) => Dim::Known(1),
        Some([n, _]) => n.clone(),
        Some(s) => return Err(ctx.error(format!("input has rank {}, expected 1 or 2", s.len()))),
        None => Dim::Unknown,
    })
}

/// The number of class labels and the labels' element type (string or int64), from the
/// `classlabels_strings` attribute or the integer one named `ints`.
fn labels(ctx: &NodeCtx, ints: &str) -> Result<(usize, DType)> {
    let strings = ctx.attr("classlabels_strings").map_or(0, |a| a.strings.len());
    if strings > 0 {
        return Ok((strings, DType::String));
    }
    match ctx.attr_ints(ints) {
        Some(v) if !v.is_empty() => Ok((v.len(), DType::Int64)),
        _ => Err(ctx.error(format!("one of 'classlabels_strings' and '{ints}' is required"))),
    }
}

/// Sets a classifier's outputs: labels `[N]` and float scores `[N, scores]`.
fn classifier_outputs(ctx: &mut NodeCtx, label: DType, scores: usize) -> Result<()> {
    let n = batch(ctx)?;
    ctx.set_shape(0, label, vec![n.clone()]);
    ctx.set_shape(1, DType::Float, vec![n, Dim::Known(scores as i64)]);
    Ok(())
}

/// A count attribute as a dimension.
fn count(ctx: &NodeCtx, name: &str, default: i64) -> Result<Dim> {
    match ctx.attr_i(name, default)? {
        v if v >= 0 => Ok(Dim::Known(v)),
        v => Err(ctx.error(format!("attribute '{name}' is negative ({v})"))),
    }
}

/// `LinearClassifier`: labels `[N]`, scores `[N, E]` with one score per intercept (two for a
/// single intercept with two labels).
fn linear_classifier(ctx: &mut NodeCtx) -> Result<()> {
    let (classes, label) = labels(ctx, "classlabels_ints")?;
    let intercepts = ctx.attr_floats("intercepts").map_or(0, <[f32]>::len);
    let scores = if intercepts == 1 && classes == 2 { 2 } else { intercepts };
    classifier_outputs(ctx, label, scores)
}

/// `LinearRegressor`: `[N, targets]` float.
fn linear_regressor(ctx: &mut NodeCtx) -> Result<()> {
    let out = vec![batch(ctx)?, count(ctx, "targets", 1)?];
    ctx.set_shape(0, DType::Float, out);
    Ok(())
}

/// `SVMClassifier`: labels `[N]`, scores `[N, E]`: one per class, except for a support-vector
/// model without probabilities, which gives one per class pair (two for two classes).
fn svm_classifier(ctx: &mut NodeCtx) -> Result<()> {
    let (classes, label) = labels(ctx, "classlabels_ints")?;
    let vectors: i64 = ctx.attr_ints("vectors_per_class").map_or(0, |v| v.iter().sum());
    let probabilities = ctx.attr_floats("prob_a").is_some_and(|p| !p.is_empty());
    let scores = match (vectors > 0, probabilities) {
        (true, false) if classes > 2 => classes * (classes - 1) / 2,
        (true, false) => 2,
        _ => classes,
    };
    classifier_outputs(ctx, label, scores)
}

/// `SVMRegressor`: `[N, 1]` float.
fn svm_regressor(ctx: &mut NodeCtx) -> Result<()> {
    let out = vec![batch(ctx)?, Dim::Known(1)];
    ctx.set_shape(0, DType::Float, out);
    Ok(())
}

/// `TreeEnsembleClassifier`: labels `[N]`, scores `[N, classes]`.
fn tree_ensemble_classifier(ctx: &mut NodeCtx) -> Result<()> {
    let (classes, label) = labels(ctx, "classlabels_int64s")?;
    classifier_outputs(ctx, label, classes)
}

/// `TreeEnsembleRegressor`: `[N, n_targets]` float.
fn tree_ensemble_regressor(ctx: &mut NodeCtx) -> Result<()> {
    let out = vec![batch(ctx)?, count(ctx, "n_targets", 1)?];
    ctx.set_shape(0, DType::Float, out);
    Ok(())
}

/// `OneHotEncoder`: the input's shape plus one axis of the category count, float.
fn one_hot_encoder(ctx: &mut NodeCtx) -> Result<()> {
    let ints = ctx.attr_ints("cats_int64s").map(<[i64]>::len);
    let strings = ctx.attr("cats_strings").map(|a| a.strings.len());
    let cats = match (ints, strings) {
        (Some(n), None) | (None, Some(n)) => n as i64,
        _ => return Err(ctx.error("exactly one of 'cats_int64s' and 'cats_strings' is required")),
    };
    let out = ctx.shape(0)?.map(|x| [x, &[Dim::Known(cats)]].concat());
    ctx.set_tensor(0, DType::Float, out);
    Ok(())
}

/// `Imputer`: the input's type and shape.
fn imputer(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.dtype(0)?;
    shape_of_input(ctx, 0, 0, dtype)
}

/// `CategoryMapper`: the input's shape; strings become int64 and int64 become strings.
fn category_mapper(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = match ctx.dtype(0)? {
        DType::String => DType::Int64,
        DType::Int64 => DType::String,
        other => return Err(ctx.error(format!("input must be string or int64, not {other}"))),
    };
    shape_of_input(ctx, 0, 0, dtype)
}

/// `FeatureVectorizer(X...)`: `[N, sum(inputdimensions)]` float, `N` from the first input.
fn feature_vectorizer(ctx: &mut NodeCtx) -> Result<()> {
    let widths = ctx.attr_ints("inputdimensions").unwrap_or_default();
    if widths.len() != ctx.input_count() {
        return Err(ctx.error(format!(
            "attribute 'inputdimensions' has {} entries for {} inputs",
            widths.len(),
            ctx.input_count()
        )));
    }
    let n = match ctx.shape(0)? {
        Some([_]) => Dim::Known(1),
        Some([n, ..]) => n.clone(),
        _ => Dim::Unknown,
    };
    let width = widths
        .iter()
        .try_fold(0i64, |acc, &w| if w < 0 { None } else { acc.checked_add(w) })
        .ok_or_else(|| ctx.error("attribute 'inputdimensions' has negative or huge entries"))?;
    ctx.set_shape(0, DType::Float, vec![n, Dim::Known(width)]);
    Ok(())
}

/// The element type of the values of map input 0.
fn map_values(ctx: &NodeCtx) -> Result<DType> {
    match ctx.input(0)? {
        ValueType::Map(_, v) => v
            .as_tensor()
            .map(|t| t.dtype)
            .ok_or_else(|| ctx.error("the map's values must be tensors")),
        other => Err(ctx.error(format!("input must be a map, not {other}"))),
    }
}

/// `DictVectorizer(map)`: `[1, vocabulary size]` of the map's value type.
fn dict_vectorizer(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = map_values(ctx)?;
    let vocabulary = ctx
        .attr("string_vocabulary")
        .map(|a| a.strings.len())
        .filter(|&n| n > 0)
        .or_else(|| ctx.attr_ints("int64_vocabulary").map(<[i64]>::len))
        .ok_or_else(|| ctx.error("a vocabulary attribute is required"))?;
    ctx.set_shape(0, dtype, vec![Dim::Known(1), Dim::Known(vocabulary as i64)]);
    Ok(())
}

/// `CastMap(map)`: `[1, size]` of the `cast_to` type, `size` being `max_map` for the sparse
/// form and the map's (run-time) length for the dense one.
fn cast_map(ctx: &mut NodeCtx) -> Result<()> {
    map_values(ctx)?;
    let dtype = match ctx.attr_s("cast_to").as_deref().unwrap_or("TO_FLOAT") {
        "TO_FLOAT" => DType::Float,
        "TO_INT64" => DType::Int64,
        "TO_STRING" => DType::String,
        other => return Err(ctx.error(format!("unknown cast_to '{other}'"))),
    };
    let size = match ctx.attr_s("map_form").as_deref().unwrap_or("DENSE") {
        "DENSE" => Dim::Unknown,
        "SPARSE" => count(ctx, "max_map", 1)?,
        other => return Err(ctx.error(format!("unknown map_form '{other}'"))),
    };
    ctx.set_shape(0, dtype, vec![Dim::Known(1), size]);
    Ok(())
}

/// `ZipMap(X [N, C])`: a sequence of maps from the class labels (string or int64) to float.
fn zip_map(ctx: &mut NodeCtx) -> Result<()> {
    let (_, key) = labels(ctx, "classlabels_int64s")?;
    let value = ValueType::Tensor(TensorType {
        dtype: DType::Float,
        shape: None,
    });
    ctx.set(0, ValueType::Sequence(Box::new(ValueType::Map(key, Box::new(value)))));
    Ok(())
}
