//! `ai.onnx.ml` operators whose output shapes follow from their inputs and attributes.

use anyhow::Result;

use crate::bail_input;

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
    (ML, "LinearRegressor", linear_regressor),
    (ML, "SVMRegressor", svm_regressor),
    (ML, "TreeEnsembleRegressor", tree_ensemble_regressor),
    (ML, "LinearClassifier", linear_classifier),
    (ML, "SVMClassifier", svm_classifier),
    (ML, "TreeEnsembleClassifier", tree_ensemble_classifier),
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

/// `[N, n_targets]` in the input's type; `X` must be `[N, F]`.
fn tree_ensemble(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.dtype(0)?;
    let n = rows_of_matrix(ctx)?;
    let targets = ctx.attr_opt_i("n_targets")?.map_or(Dim::Unknown, Dim::Known);
    ctx.set_shape(0, dtype, vec![n, targets]);
    Ok(())
}

/// `N` of an input that must be `[N, F]` (the tree ensembles' schemas check the rank).
fn rows_of_matrix(ctx: &NodeCtx) -> Result<Dim> {
    match ctx.shape(0)? {
        None => Ok(Dim::Unknown),
        Some([n, _]) => Ok(n.clone()),
        Some(s) => bail_input!(
            "{}: input must be [N, F] (rank 2), not rank {}",
            ctx.label(),
            s.len()
        ),
    }
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

/// Float `[..., number of categories]`; exactly one of `cats_int64s` / `cats_strings` must be
/// given.
fn one_hot_encoder(ctx: &mut NodeCtx) -> Result<()> {
    let n = match (ctx.attr("cats_int64s"), ctx.attr("cats_strings")) {
        (Some(a), None) => a.ints.len(),
        (None, Some(a)) => a.strings.len(),
        _ => bail_input!(
            "{}: exactly one of the attributes 'cats_int64s' and 'cats_strings' must be given",
            ctx.label()
        ),
    };
    let cats = Dim::Known(n as i64);
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

/// The batch size of an input that must be `[C]` (one example) or `[N, C]`, as the linear and
/// SVM models' schemas and onnxruntime's kernels require.
fn batch_of_1d_or_2d(ctx: &NodeCtx) -> Result<Dim> {
    match ctx.shape(0)? {
        Some(s) if s.len() > 2 || s.is_empty() => bail_input!(
            "{}: input must be [C] or [N, C] (rank 1 or 2), not rank {}",
            ctx.label(),
            s.len()
        ),
        _ => Ok(batch(ctx)),
    }
}

/// Float `[N, sum(inputdimensions)]`; `inputdimensions` is required (onnxruntime refuses the
/// node without it).
fn feature_vectorizer(ctx: &mut NodeCtx) -> Result<()> {
    let Some(dims) = ctx.attr_ints("inputdimensions").filter(|d| !d.is_empty()) else {
        bail_input!(
            "{}: attribute 'inputdimensions' (one width per input) is required",
            ctx.label()
        );
    };
    let width = Dim::Known(dims.iter().sum());
    let n = batch(ctx);
    ctx.set_shape(0, DType::Float, vec![n, width]);
    Ok(())
}

/// Float `[N, targets]` (default 1) for `X` `[N, C]` or `[C]`.
fn linear_regressor(ctx: &mut NodeCtx) -> Result<()> {
    let targets = ctx.attr_i("targets", 1)?;
    let n = batch_of_1d_or_2d(ctx)?;
    ctx.set_shape(0, DType::Float, vec![n, Dim::Known(targets)]);
    Ok(())
}

/// Float `[N, 1]` for `X` `[N, C]` or `[C]`.
fn svm_regressor(ctx: &mut NodeCtx) -> Result<()> {
    let n = batch_of_1d_or_2d(ctx)?;
    ctx.set_shape(0, DType::Float, vec![n, Dim::Known(1)]);
    Ok(())
}

/// Float `[N, n_targets]` for `X` `[N, F]` (the width unknown without `n_targets`).
fn tree_ensemble_regressor(ctx: &mut NodeCtx) -> Result<()> {
    let n = rows_of_matrix(ctx)?;
    let targets = ctx.attr_opt_i("n_targets")?.map_or(Dim::Unknown, Dim::Known);
    ctx.set_shape(0, DType::Float, vec![n, targets]);
    Ok(())
}

/// The labels' element type and count from `classlabels_strings` (when not empty) or the
/// integer labels attribute `ints_name` (`classlabels_ints` for the linear and SVM
/// classifiers, `classlabels_int64s` for the tree ensemble); one of them is required.
fn class_labels(ctx: &NodeCtx, ints_name: &str) -> Result<(DType, usize)> {
    match (ctx.attr("classlabels_strings"), ctx.attr(ints_name)) {
        (Some(a), _) if !a.strings.is_empty() => Ok((DType::String, a.strings.len())),
        (_, Some(a)) => Ok((DType::Int64, a.ints.len())),
        _ => bail_input!(
            "{}: one of the attributes 'classlabels_strings' and '{ints_name}' is required",
            ctx.label()
        ),
    }
}

/// Sets the labels `[N]` and the float scores `[N, width]`.
fn set_classifier_outputs(ctx: &mut NodeCtx, labels: DType, n: Dim, width: usize) {
    ctx.set_shape(0, labels, vec![n.clone()]);
    ctx.set_shape(1, DType::Float, vec![n, Dim::Known(width as i64)]);
}

/// `LinearClassifier`: one score per intercept (the ONNX-ML shape rule and onnxruntime's
/// kernel), two when a single intercept scores a two-label problem.
fn linear_classifier(ctx: &mut NodeCtx) -> Result<()> {
    let (labels, label_count) = class_labels(ctx, "classlabels_ints")?;
    let intercepts = ctx.attr_floats("intercepts").map_or(0, <[f32]>::len);
    if intercepts == 0 {
        bail_input!(
            "{}: attribute 'intercepts' (one per class) is required to size the scores",
            ctx.label()
        );
    }
    let width = if intercepts == 1 && label_count == 2 { 2 } else { intercepts };
    let n = batch_of_1d_or_2d(ctx)?;
    set_classifier_outputs(ctx, labels, n, width);
    Ok(())
}

/// `SVMClassifier` with `C` labels: in SVC mode (`vectors_per_class` sums to more than 0)
/// without `prob_a` the scores are one per pair of classes, `C(C-1)/2`, and 2 for `C <= 2`;
/// otherwise (probabilities, or the linear mode) one per class (onnxruntime's kernel).
fn svm_classifier(ctx: &mut NodeCtx) -> Result<()> {
    let (labels, classes) = class_labels(ctx, "classlabels_ints")?;
    let svc = ctx
        .attr_ints("vectors_per_class")
        .is_some_and(|v| v.iter().sum::<i64>() > 0);
    let probabilities = ctx.attr_floats("prob_a").is_some_and(|p| !p.is_empty());
    let width = if svc && !probabilities {
        if classes > 2 { classes * (classes - 1) / 2 } else { 2 }
    } else {
        classes
    };
    let n = batch_of_1d_or_2d(ctx)?;
    set_classifier_outputs(ctx, labels, n, width);
    Ok(())
}

/// `TreeEnsembleClassifier`: one score per class label, for `X` `[N, F]`.
fn tree_ensemble_classifier(ctx: &mut NodeCtx) -> Result<()> {
    let (labels, classes) = class_labels(ctx, "classlabels_int64s")?;
    let n = rows_of_matrix(ctx)?;
    set_classifier_outputs(ctx, labels, n, classes);
    Ok(())
}

/// A sequence of maps from the class labels to float scores; the scores must be `[N, C]` or
/// `[C]` (ONNX's shape rule).
fn zip_map(ctx: &mut NodeCtx) -> Result<()> {
    batch_of_1d_or_2d(ctx)?;
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
