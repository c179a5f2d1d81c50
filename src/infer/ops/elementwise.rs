//! Elementwise operators: unary maps and activations, broadcasting binary and variadic
//! arithmetic, comparisons and logic, `Where`, casts and `Identity`.

use anyhow::Result;

use super::Entry;
use super::util::{broadcast_inputs, same_as_input, shape_of_input};
use crate::infer::NodeCtx;
use crate::infer::dims;
use crate::infer::fold::{self, Arith};
use crate::ir::{ConstData, Constant, DType, Dim, ValueType};

/// This family's rows of the rule table.
pub const RULES: &[Entry] = &[
    ("", "Abs", unary),
    ("", "Acos", unary),
    ("", "Acosh", unary),
    ("", "Asin", unary),
    ("", "Asinh", unary),
    ("", "Atan", unary),
    ("", "Atanh", unary),
    ("", "BitwiseNot", unary),
    ("", "Ceil", unary),
    ("", "Celu", unary),
    ("", "Clip", clip),
    ("", "Cos", unary),
    ("", "Cosh", unary),
    ("", "Elu", unary),
    ("", "Erf", unary),
    ("", "Exp", unary),
    ("", "Floor", unary),
    ("", "Gelu", unary),
    ("", "HardSigmoid", unary),
    ("", "HardSwish", unary),
    ("", "LeakyRelu", unary),
    ("", "Log", unary),
    ("", "Mish", unary),
    ("", "Neg", unary),
    ("", "Not", unary),
    ("", "Reciprocal", unary),
    ("", "Relu", unary),
    ("", "Round", unary),
    ("", "Selu", unary),
    ("", "Shrink", unary),
    ("", "Sigmoid", unary),
    ("", "Sign", unary),
    ("", "Sin", unary),
    ("", "Sinh", unary),
    ("", "Softplus", unary),
    ("", "Softsign", unary),
    ("", "Sqrt", unary),
    ("", "Swish", unary),
    ("", "Tan", unary),
    ("", "Tanh", unary),
    ("", "ThresholdedRelu", unary),
    ("", "IsNaN", predicate),
    ("", "IsInf", predicate),
    ("", "Add", binary),
    ("", "Sub", binary),
    ("", "Mul", binary),
    ("", "Div", binary),
    ("", "Mod", binary),
    ("", "Pow", binary),
    ("", "PRelu", binary),
    ("", "BitShift", binary),
    ("", "BitwiseAnd", binary),
    ("", "BitwiseOr", binary),
    ("", "BitwiseXor", binary),
    ("", "And", binary),
    ("", "Or", binary),
    ("", "Xor", binary),
    ("", "Equal", comparison),
    ("", "Less", comparison),
    ("", "LessOrEqual", comparison),
    ("", "Greater", comparison),
    ("", "GreaterOrEqual", comparison),
    ("", "Max", variadic),
    ("", "Min", variadic),
    ("", "Sum", variadic),
    ("", "Mean", variadic),
    ("", "Where", where_),
    ("", "Cast", cast),
    ("", "CastLike", cast),
    ("", "Identity", identity),
];

/// Same type as the input; a few maps fold when the input is known.
fn unary(ctx: &mut NodeCtx) -> Result<()> {
    same_as_input(ctx, 0, 0)?;
    if let Some(c) = ctx.constant(0)
        && let Some(folded) = fold_unary(&ctx.node().op_type, c)
    {
        ctx.set_constant(0, folded);
    }
    Ok(())
}

/// Same type as the input; folds when the input and the bounds present are known (bounds are
/// inputs 1 and 2 from opset 11, `min`/`max` attributes before).
fn clip(ctx: &mut NodeCtx) -> Result<()> {
    same_as_input(ctx, 0, 0)?;
    let Some(c) = ctx.constant(0) else {
        return Ok(());
    };
    let bound = |ctx: &NodeCtx, slot: usize, attr: &str| -> Option<Option<f64>> {
        if ctx.opset() < 11 {
            return Some(ctx.node().attr_float(attr).map(f64::from));
        }
        if !ctx.has_input(slot) {
            return Some(None);
        }
        let values = fold::as_float(&ctx.constant(slot)?.data)?;
        Some(Some(*values.iter().next()?))
    };
    let (Some(low), Some(high)) = (bound(ctx, 1, "min"), bound(ctx, 2, "max")) else {
        return Ok(());
    };
    let data = match &c.data {
        ConstData::Int(a) => ConstData::Int(a.mapv(|v| {
            let v = low.map_or(v, |l| v.max(l as i64));
            high.map_or(v, |h| v.min(h as i64))
        })),
        ConstData::Float(a) => ConstData::Float(a.mapv(|v| {
            let v = low.map_or(v, |l| v.max(l));
            high.map_or(v, |h| v.min(h))
        })),
        ConstData::Str(_) => return Ok(()),
    };
    let folded = Constant {
        dtype: c.dtype,
        data,
    };
    ctx.set_constant(0, folded);
    Ok(())
}

fn fold_unary(op: &str, c: &Constant) -> Option<Constant> {
    let data = match (&c.data, op) {
        (ConstData::Int(a), "Neg") => ConstData::Int(a.mapv(|v| fold::wrap_int(-v, c.dtype))),
        (ConstData::Int(a), "Abs") => ConstData::Int(a.mapv(i64::abs)),
        (ConstData::Int(a), "Sign") => ConstData::Int(a.mapv(i64::signum)),
        (ConstData::Int(a), "Relu") => ConstData::Int(a.mapv(|v| v.max(0))),
        (ConstData::Int(a), "Not") => ConstData::Int(a.mapv(|v| i64::from(v == 0))),
        (ConstData::Int(_), "Floor" | "Ceil" | "Round") => c.data.clone(),
        (ConstData::Float(a), _) => {
            let f: fn(f64) -> f64 = match op {
                "Neg" => |v| -v,
                "Abs" => f64::abs,
                "Sqrt" => f64::sqrt,
                "Floor" => f64::floor,
                "Ceil" => f64::ceil,
                "Round" => f64::round_ties_even,
                "Reciprocal" => f64::recip,
                "Exp" => f64::exp,
                "Log" => f64::ln,
                "Relu" => |v| v.max(0.0),
                "Sign" => |v| if v == 0.0 { 0.0 } else { v.signum() },
                _ => return None,
            };
            ConstData::Float(a.mapv(f))
        }
        _ => return None,
    };
    Some(Constant {
        dtype: c.dtype,
        data,
    })
}

/// Bool output of the input's shape.
fn predicate(ctx: &mut NodeCtx) -> Result<()> {
    shape_of_input(ctx, 0, 0, DType::Bool)
}

/// Broadcasting binary arithmetic; the output has the first input's element type.
fn binary(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.dtype(0)?;
    let shape = if ctx.opset() < 7 && ctx.attr_i("broadcast", 0)? == 1 {
        ctx.shape(0)?.map(<[Dim]>::to_vec)
    } else {
        broadcast_inputs(ctx, [0, 1])?
    };
    ctx.set_tensor(0, dtype, shape);
    let op = ctx.node().op_type.as_str();
    if let (Some(a), Some(b)) = (ctx.constant(0), ctx.constant(1)) {
        let fmod = ctx.attr_i("fmod", 0)? == 1;
        if let Some(arith) = arith_op(op, fmod)
            && let Some(c) = fold::arith(a, b, &arith)
        {
            ctx.set_constant(0, c);
        }
        return Ok(());
    }
    if let Some(f) = dims_op(op)
        && let Some(d) = dims_binary(ctx, f)
    {
        ctx.set_dims_value(0, d);
    }
    Ok(())
}

fn arith_op(op: &str, fmod: bool) -> Option<Arith> {
    Some(match op {
        "Add" => Arith {
            int: |a, b| a.checked_add(b),
            float: |a, b| a + b,
        },
        "Sub" => Arith {
            int: |a, b| a.checked_sub(b),
            float: |a, b| a - b,
        },
        "Mul" => Arith {
            int: |a, b| a.checked_mul(b),
            float: |a, b| a * b,
        },
        "Div" => Arith {
            int: |a, b| a.checked_div(b),
            float: |a, b| a / b,
        },
        "Mod" if fmod => Arith {
            int: |a, b| a.checked_rem(b),
            float: |a, b| a % b,
        },
        "Mod" => Arith {
            int: |a, b| {
                let r = a.checked_rem(b)?;
                Some(if r != 0 && (r < 0) != (b < 0) { r + b } else { r })
            },
            float: |a, b| {
                let r = a % b;
                if r != 0.0 && (r < 0.0) != (b < 0.0) { r + b } else { r }
            },
        },
        "Max" => Arith {
            int: |a, b| Some(a.max(b)),
            float: f64::max,
        },
        "Min" => Arith {
            int: |a, b| Some(a.min(b)),
            float: f64::min,
        },
        "Pow" => Arith {
            int: |a, b| u32::try_from(b).ok().and_then(|e| a.checked_pow(e)),
            float: f64::powf,
        },
        "And" => Arith {
            int: |a, b| Some(i64::from(a != 0 && b != 0)),
            float: |a, b| f64::from(u8::from(a != 0.0 && b != 0.0)),
        },
        "Or" => Arith {
            int: |a, b| Some(i64::from(a != 0 || b != 0)),
            float: |a, b| f64::from(u8::from(a != 0.0 || b != 0.0)),
        },
        _ => return None,
    })
}

/// Dimension arithmetic for shape values (`Shape(x) * 2`, `Shape(x) - 1`, ...).
fn dims_op(op: &str) -> Option<fn(&Dim, &Dim) -> Dim> {
    Some(match op {
        "Add" => dims::add,
        "Mul" => dims::mul,
        "Sub" => dims::sub,
        // Integer division truncates; sizes are non-negative, where that is the floor.
        "Div" => |a, b| match (a, b) {
            (Dim::Known(x), Dim::Known(y)) if *y != 0 => Dim::Known(x / y),
            (d, Dim::Known(k)) if *k > 0 => match dims::div_exact(d, b) {
                Dim::Unknown => dims::floor_div(d, *k),
                exact => exact,
            },
            _ => Dim::Unknown,
        },
        _ => return None,
    })
}

/// Applies `f` to the shape values of inputs 0 and 1 (one of them may be a single element).
fn dims_binary(ctx: &NodeCtx, f: fn(&Dim, &Dim) -> Dim) -> Option<Vec<Dim>> {
    dims_binary_with(ctx, |a, b| Some(f(a, b)))
}

/// Like [`dims_binary`] with a partial `f`: `None` when any element is undecided.
fn dims_binary_with<T>(ctx: &NodeCtx, f: impl Fn(&Dim, &Dim) -> Option<T>) -> Option<Vec<T>> {
    let a = ctx.dims_value(0)?;
    let b = ctx.dims_value(1)?;
    let n = a.len().max(b.len());
    if (a.len() != n && a.len() != 1) || (b.len() != n && b.len() != 1) {
        return None;
    }
    let at = |v: &[Dim], i: usize| v[if v.len() == 1 { 0 } else { i }].clone();
    (0..n).map(|i| f(&at(&a, i), &at(&b, i))).collect()
}

type IntTest = fn(i64, i64) -> bool;
type FloatTest = fn(f64, f64) -> bool;

/// Broadcasting comparison with a bool output.
fn comparison(ctx: &mut NodeCtx) -> Result<()> {
    let shape = broadcast_inputs(ctx, [0, 1])?;
    ctx.set_tensor(0, DType::Bool, shape);
    if let (Some(a), Some(b)) = (ctx.constant(0), ctx.constant(1)) {
        let (int, float): (IntTest, FloatTest) =
            match ctx.node().op_type.as_str() {
                "Equal" => (|a, b| a == b, |a, b| a == b),
                "Less" => (|a, b| a < b, |a, b| a < b),
                "LessOrEqual" => (|a, b| a <= b, |a, b| a <= b),
                "Greater" => (|a, b| a > b, |a, b| a > b),
                _ => (|a, b| a >= b, |a, b| a >= b),
            };
        if let Some(c) = fold::compare(a, b, int, float) {
            ctx.set_constant(0, c);
        }
    } else if ctx.node().op_type == "Equal"
        && let Some(eq) = dims_binary_with(ctx, dims_equal)
    {
        let n = eq.len();
        let values = eq.into_iter().map(i64::from).collect();
        if let Some(c) = fold::int_tensor(DType::Bool, &[n], values) {
            ctx.set_constant(0, c);
        }
    }
    Ok(())
}

/// Whether two shape-value elements are equal, when that is decided: known values compare, a
/// symbol equals itself, and a symbol (a real dimension, never negative) differs from a
/// negative value, such as the `-1` exporters test for in `expand(batch, -1, -1)`.
fn dims_equal(a: &Dim, b: &Dim) -> Option<bool> {
    match (a, b) {
        (Dim::Known(x), Dim::Known(y)) => Some(x == y),
        (x, y) if x.is_symbolic() && x == y => Some(true),
        (Dim::Symbol(_), Dim::Known(v)) | (Dim::Known(v), Dim::Symbol(_)) if *v < 0 => Some(false),
        _ => None,
    }
}

/// Max/Min/Sum/Mean over any number of broadcast inputs.
fn variadic(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.dtype(0)?;
    let shape = broadcast_inputs(ctx, 0..ctx.input_count())?;
    ctx.set_tensor(0, dtype, shape);
    let op = ctx.node().op_type.as_str();
    let folding = match op {
        "Sum" => arith_op("Add", false),
        "Max" | "Min" => arith_op(op, false),
        _ => None,
    };
    if let Some(arith) = folding {
        let mut acc = ctx.constant(0).cloned();
        for i in 1..ctx.input_count() {
            acc = match (acc, ctx.constant(i)) {
                (Some(a), Some(b)) => fold::arith(&a, b, &arith),
                _ => None,
            };
        }
        if let Some(c) = acc {
            ctx.set_constant(0, c);
        }
    }
    Ok(())
}

/// `Where(cond, x, y)`: broadcast of all three, `x`'s element type.
fn where_(ctx: &mut NodeCtx) -> Result<()> {
    let dtype = ctx.dtype(1)?;
    let shape = broadcast_inputs(ctx, [0, 1, 2])?;
    ctx.set_tensor(0, dtype, shape);
    if let (Some(c), Some(x), Some(y)) = (ctx.constant(0), ctx.constant(1), ctx.constant(2)) {
        if let Some(v) = fold::where_select(c, x, y) {
            ctx.set_constant(0, v);
        }
    } else if let Some(d) = where_dims(ctx) {
        ctx.set_dims_value(0, d);
    }
    Ok(())
}

/// `Where` over shape values with a known 1-D condition, e.g. `Where(shape == -1, 1, shape)`
/// in `expand(batch, -1, -1)` exports: the chosen elements of `x` and `y`.
fn where_dims(ctx: &NodeCtx) -> Option<Vec<Dim>> {
    let cond = ctx.constant(0).filter(|c| c.shape().len() <= 1)?.to_i64_vec()?;
    let x = ctx.dims_value(1)?;
    let y = ctx.dims_value(2)?;
    let n = cond.len().max(x.len()).max(y.len());
    if [cond.len(), x.len(), y.len()].iter().any(|&l| l != n && l != 1) {
        return None;
    }
    let at = |l: usize, i: usize| if l == 1 { 0 } else { i };
    Some(
        (0..n)
            .map(|i| {
                let pick = if cond[at(cond.len(), i)] != 0 { &x } else { &y };
                pick[at(pick.len(), i)].clone()
            })
            .collect(),
    )
}

/// `Cast` (attribute `to`) and `CastLike` (second input's type).
fn cast(ctx: &mut NodeCtx) -> Result<()> {
    let to = if ctx.node().op_type == "CastLike" {
        ctx.dtype(1)?
    } else if ctx.opset() < 6
        && let Some(name) = ctx.attr("to").and_then(|a| a.s.as_ref())
    {
        // Cast-1 names the type as a string ("FLOAT").
        let name = String::from_utf8_lossy(name);
        crate::onnx::proto::tensor_proto::DataType::from_str_name(&name)
            .and_then(|t| DType::from_onnx(t as i32))
            .ok_or_else(|| ctx.error(format!("attribute 'to': unknown type '{name}'")))?
    } else {
        ctx.attr_dtype("to")?
            .ok_or_else(|| ctx.error("attribute 'to' is required"))?
    };
    shape_of_input(ctx, 0, 0, to)?;
    if let Some(c) = ctx.constant(0)
        && let Some(v) = fold::cast(c, to)
    {
        ctx.set_constant(0, v);
    } else if to.is_integer()
        && to != DType::Bool
        && let Some(d) = ctx.dims_value(0)
    {
        let d = d.into_owned();
        ctx.set_dims_value(0, d);
    }
    Ok(())
}

/// Passes the input through: type, value and shape value.
fn identity(ctx: &mut NodeCtx) -> Result<()> {
    let ty: ValueType = ctx.input(0)?.clone();
    ctx.set(0, ty);
    if let Some(c) = ctx.constant(0) {
        ctx.set_constant(0, c.clone());
    } else if let Some(d) = ctx.dims_value(0) {
        let d = d.into_owned();
        ctx.set_dims_value(0, d);
    }
    Ok(())
}
