//! Operators that create tensors: `Constant` (every attribute form), `ConstantOfShape`, `Range`,
//! `EyeLike`, `OneHot`, random generators and signal windows.

use anyhow::Result;
use ndarray::{ArrayD, IxDyn};

use super::Entry;
use super::util::shape_of_input;
use crate::infer::NodeCtx;
use crate::infer::fold::{self, FOLD_LIMIT};
use crate::ir::{ConstData, Constant, DType, Dim, known_shape};
use crate::onnx::proto::TensorProto;

/// This family's rows of the rule table.
pub const RULES: &[Entry] = &[
    ("", "Constant", constant),
    ("", "ConstantOfShape", constant_of_shape),
    ("", "Range", range),
    ("", "EyeLike", like_input),
    ("", "RandomNormalLike", like_input),
    ("", "RandomUniformLike", like_input),
    ("", "Bernoulli", like_input),
    ("", "RandomNormal", random),
    ("", "RandomUniform", random),
    ("", "Multinomial", multinomial),
    ("", "OneHot", one_hot),
    ("", "HannWindow", window),
    ("", "HammingWindow", window),
    ("", "BlackmanWindow", window),
    ("", "MelWeightMatrix", mel_weight_matrix),
];

/// `Constant`: the value of whichever `value*` attribute is set.
fn constant(ctx: &mut NodeCtx) -> Result<()> {
    if let Some(t) = ctx.node().attr_tensor("value") {
        return set_tensor_value(ctx, t);
    }
    if let Some(a) = ctx.attr("sparse_value") {
        let sparse = a
            .sparse_tensor
            .as_ref()
            .ok_or_else(|| ctx.error("attribute 'sparse_value' must be a sparse tensor"))?;
        let dtype = sparse
            .values
            .as_ref()
            .and_then(|v| DType::from_onnx(v.data_type()))
            .ok_or_else(|| ctx.error("sparse_value has no element type"))?;
        ctx.set_shape(0, dtype, known_shape(&sparse.dims));
        return Ok(());
    }
    let value = if let Some(f) = ctx.attr("value_float").and_then(|a| a.f) {
        float_constant(&[], vec![f64::from(f)])
    } else if let Some(a) = ctx.attr("value_floats") {
        float_constant(&[a.floats.len()], a.floats.iter().map(|&f| f64::from(f)).collect())
    } else if let Some(i) = ctx.attr("value_int").and_then(|a| a.i) {
        Constant::ints(DType::Int64, ArrayD::from_elem(IxDyn(&[]), i))
    } else if let Some(a) = ctx.attr("value_ints") {
        Constant::int64_vec(a.ints.clone())
    } else if let Some(a) = ctx.attr("value_string") {
        let s = String::from_utf8_lossy(a.s()).into_owned();
        string_constant(&[], vec![s])
    } else if let Some(a) = ctx.attr("value_strings") {
        let v: Vec<String> = a.strings.iter().map(|s| String::from_utf8_lossy(s).into_owned()).collect();
        string_constant(&[v.len()], v)
    } else {
        return Err(ctx.error("no value attribute"));
    };
    ctx.set_constant(0, value);
    Ok(())
}

fn float_constant(shape: &[usize], values: Vec<f64>) -> Constant {
    Constant {
        dtype: DType::Float,
        data: ConstData::Float(ArrayD::from_shape_vec(IxDyn(shape), values).expect("shape matches")),
    }
}

fn string_constant(shape: &[usize], values: Vec<String>) -> Constant {
    Constant {
        dtype: DType::String,
        data: ConstData::Str(ArrayD::from_shape_vec(IxDyn(shape), values).expect("shape matches")),
    }
}

/// Sets output 0 to a tensor attribute's type, and its value when small and decodable.
fn set_tensor_value(ctx: &mut NodeCtx, t: &TensorProto) -> Result<()> {
    let dtype = DType::from_onnx(t.data_type())
        .ok_or_else(|| ctx.error(format!("unknown data type {}", t.data_type())))?;
    if t.dims.iter().any(|&d| d < 0) {
        return Err(ctx.error("tensor value has a negative dimension"));
    }
    ctx.set_shape(0, dtype, known_shape(&t.dims));
    if t.dims
        .iter()
        .try_fold(1i64, |acc, &d| acc.checked_mul(d))
        .is_some_and(|n| n <= FOLD_LIMIT as i64)
        && let Some(c) = Constant::from_proto(t).map_err(|e| ctx.error(e))?
    {
        ctx.set_constant(0, c);
    }
    Ok(())
}

/// `ConstantOfShape`: shape from the input's value, element from attribute `value`.
fn constant_of_shape(ctx: &mut NodeCtx) -> Result<()> {
    let fill = match ctx.node().attr_tensor("value") {
        Some(t) => Some(Constant::from_proto(t).map_err(|e| ctx.error(e))?),
        None => None,
    };
    let dtype = match (&fill, ctx.node().attr_tensor("value")) {
        (_, Some(t)) => DType::from_onnx(t.data_type())
            .ok_or_else(|| ctx.error(format!("unknown data type {}", t.data_type())))?,
        _ => DType::Float,
    };
    let Some(shape) = ctx.dims_value(0) else {
        let rank = ctx.listed_rank(0)?;
        ctx.set_tensor(0, dtype, rank.map(|r| vec![Dim::Unknown; r]));
        return Ok(());
    };
    let shape = shape.into_owned();
    ctx.set_shape(0, dtype, shape.clone());
    let Some(sizes) = crate::ir::concrete(&shape) else {
        return Ok(());
    };
    let sizes: Vec<usize> = sizes.iter().map(|&d| d.max(0) as usize).collect();
    if crate::infer::dims::element_count(&sizes).is_none_or(|n| n > FOLD_LIMIT) {
        return Ok(());
    }
    let value = match fill.flatten() {
        Some(c) => fold::reshape(&c, &[]).and_then(|c| fold::expand(&c, &sizes)),
        None => Some(float_constant(&[], vec![0.0])).and_then(|c| fold::expand(&c, &sizes)),
    };
    if let Some(v) = value {
        ctx.set_constant(0, v);
    }
    Ok(())
}

/// `Range(start, limit, delta)`: `max(ceil((limit - start) / delta), 0)` elements.
fn range(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.dtype(0)?;
    if let (Some(s), Some(l), Some(d)) = (ctx.constant(0), ctx.constant(1), ctx.constant(2))
        && let (Some(s), Some(l), Some(d)) = (s.to_f64_vec(), l.to_f64_vec(), d.to_f64_vec())
        && let (&[s], &[l], &[d]) = (s.as_slice(), l.as_slice(), d.as_slice())
    {
        if d == 0.0 {
            return Err(ctx.error("delta is zero"));
        }
        let n = ((l - s) / d).ceil().max(0.0) as i64;
        ctx.set_shape(0, dtype, vec![Dim::Known(n)]);
        let n = n as usize;
        if n <= FOLD_LIMIT {
            let values: Vec<f64> = (0..n).map(|i| s + i as f64 * d).collect();
            let value = if dtype.is_float() {
                fold::float_tensor(dtype, &[n], values)
            } else {
                fold::int_tensor(dtype, &[n], values.iter().map(|&v| v as i64).collect())
            };
            if let Some(v) = value {
                ctx.set_constant(0, v);
            }
        }
        return Ok(());
    }
    let n = match (ctx.dims_value(0), ctx.dims_value(1), ctx.dims_value(2)) {
        (Some(s), Some(l), Some(d)) if s.len() == 1 && l.len() == 1 && d.len() == 1 => {
            match &d[0] {
                // `ceil((limit - start) / delta)`, when provably not negative.
                Dim::Known(k) if *k > 0 => {
                    let span = crate::infer::dims::sub(&l[0], &s[0]);
                    let n = crate::infer::dims::add(&span, &Dim::Known(k - 1));
                    let n = crate::infer::dims::floor_div(&n, *k);
                    if ctx.proven_nonneg(&n) { n } else { Dim::Unknown }
                }
                _ => Dim::Unknown,
            }
        }
        _ => Dim::Unknown,
    };
    ctx.set_shape(0, dtype, vec![n]);
    Ok(())
}

/// The input's shape with attribute `dtype` (default: the input's element type).
fn like_input(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = match ctx.attr_dtype("dtype")? {
        Some(d) => d,
        None => ctx.dtype(0)?,
    };
    shape_of_input(ctx, 0, 0, dtype)
}

/// `RandomNormal`/`RandomUniform`: attribute `shape`, attribute `dtype` (default float).
fn random(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.attr_dtype("dtype")?.unwrap_or(DType::Float);
    let shape = ctx
        .attr_ints("shape")
        .ok_or_else(|| ctx.error("attribute 'shape' is required"))?;
    ctx.set_shape(0, dtype, known_shape(shape));
    Ok(())
}

/// `Multinomial`: `[batch, sample_size]`, attribute `dtype` (default int32).
fn multinomial(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.attr_dtype("dtype")?.unwrap_or(DType::Int32);
    let samples = ctx.attr_i("sample_size", 1)?;
    let batch = ctx.shape(0)?.and_then(|s| s.first().cloned()).unwrap_or(Dim::Unknown);
    ctx.set_shape(0, dtype, vec![batch, Dim::Known(samples)]);
    Ok(())
}

/// `OneHot(indices, depth, values)`: a new axis of size `depth` at `axis`.
fn one_hot(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.dtype(2)?;
    let depth = ctx
        .floats(1)
        .and_then(|v| v.first().copied())
        .map_or(Dim::Unknown, |d| Dim::Known(d as i64));
    let Some(indices) = ctx.shape(0)? else {
        ctx.set_tensor(0, dtype, None);
        return Ok(());
    };
    let axis = ctx.attr_axis("axis", -1, indices.len() + 1)?;
    let mut out = indices.to_vec();
    out.insert(axis, depth);
    ctx.set_shape(0, dtype, out);
    Ok(())
}

/// Hann/Hamming/Blackman windows: `[size]`, attribute `output_datatype` (default float).
fn window(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.attr_dtype("output_datatype")?.unwrap_or(DType::Float);
    let size = ctx.ints(0).and_then(|v| v.first().copied()).map_or(Dim::Unknown, Dim::Known);
    ctx.set_shape(0, dtype, vec![size]);
    Ok(())
}

/// `MelWeightMatrix`: `[dft_length / 2 + 1, num_mel_bins]`.
fn mel_weight_matrix(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.attr_dtype("output_datatype")?.unwrap_or(DType::Float);
    let scalar = |i: usize| ctx.ints(i).and_then(|v| v.first().copied());
    let bins = scalar(0).map_or(Dim::Unknown, Dim::Known);
    let rows = scalar(1).map_or(Dim::Unknown, |n| Dim::Known(n / 2 + 1));
    ctx.set_shape(0, dtype, vec![rows, bins]);
    Ok(())
}
