//! Constant folding helpers over [`Constant`] values (ndarray, small tensors only).

use ndarray::{ArrayD, IxDyn, Zip};

use crate::ir::{ConstData, Constant, DType};

/// Values with more elements than this are not folded.
pub const FOLD_LIMIT: usize = 1 << 16;

/// Applies the same (generic) expression to whichever array a [`ConstData`] holds.
macro_rules! map_data {
    ($data:expr, $a:ident => $body:expr) => {
        match $data {
            $crate::ir::ConstData::Int($a) => $crate::ir::ConstData::Int($body),
            $crate::ir::ConstData::Float($a) => $crate::ir::ConstData::Float($body),
            $crate::ir::ConstData::Str($a) => $crate::ir::ConstData::Str($body),
        }
    };
}

/// Like [`map_data!`] for fallible expressions returning `Option<Array>`.
macro_rules! try_map_data {
    ($data:expr, $a:ident => $body:expr) => {
        match $data {
            $crate::ir::ConstData::Int($a) => $crate::ir::ConstData::Int($body?),
            $crate::ir::ConstData::Float($a) => $crate::ir::ConstData::Float($body?),
            $crate::ir::ConstData::Str($a) => $crate::ir::ConstData::Str($body?),
        }
    };
}

/// An integer tensor of the given type and shape.
pub fn int_tensor(dtype: DType, shape: &[usize], values: Vec<i64>) -> Option<Constant> {
    let data = ArrayD::from_shape_vec(IxDyn(shape), values).ok()?;
    Some(Constant::ints(dtype, data))
}

/// A float tensor of the given type and shape.
pub fn float_tensor(dtype: DType, shape: &[usize], values: Vec<f64>) -> Option<Constant> {
    let data = ArrayD::from_shape_vec(IxDyn(shape), values).ok()?;
    Some(Constant {
        dtype,
        data: ConstData::Float(data),
    })
}

/// Converts a value to another element type, with ONNX Cast semantics for the common cases.
pub fn cast(c: &Constant, to: DType) -> Option<Constant> {
    let data = match (&c.data, to) {
        (ConstData::Str(_), _) | (_, DType::String) => return None,
        (_, DType::Complex64 | DType::Complex128) => return None,
        (ConstData::Int(a), t) if t.is_float() => {
            ConstData::Float(a.mapv(|v| round_float(v as f64, t)))
        }
        (ConstData::Float(a), t) if t.is_float() => ConstData::Float(a.mapv(|v| round_float(v, t))),
        (ConstData::Int(a), t) => ConstData::Int(a.mapv(|v| wrap_int(v, t))),
        (ConstData::Float(a), DType::Bool) => ConstData::Int(a.mapv(|v| i64::from(v != 0.0))),
        (ConstData::Float(a), t) => ConstData::Int(a.mapv(|v| wrap_int(v as i64, t))),
    };
    Some(Constant { dtype: to, data })
}

/// Wraps an integer into the range of an integer element type.
pub fn wrap_int(v: i64, dtype: DType) -> i64 {
    match dtype {
        DType::Bool => i64::from(v != 0),
        DType::Int8 => v as i8 as i64,
        DType::Uint8 => v as u8 as i64,
        DType::Int16 => v as i16 as i64,
        DType::Uint16 => v as u16 as i64,
        DType::Int32 => v as i32 as i64,
        DType::Uint32 => v as u32 as i64,
        _ => v,
    }
}

fn round_float(v: f64, dtype: DType) -> f64 {
    match dtype {
        DType::Double => v,
        _ => v as f32 as f64,
    }
}

/// The broadcast of two concrete shapes.
pub fn broadcast_shape(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let rank = a.len().max(b.len());
    (0..rank)
        .map(|i| {
            let x = if i + a.len() >= rank {
                a[i + a.len() - rank]
            } else {
                1
            };
            let y = if i + b.len() >= rank {
                b[i + b.len() - rank]
            } else {
                1
            };
            match (x, y) {
                _ if x == y => Some(x),
                (1, y) => Some(y),
                (x, 1) => Some(x),
                _ => None,
            }
        })
        .collect()
}

/// Combines two arrays elementwise with broadcasting.
pub fn zip2<A, B, C>(a: &ArrayD<A>, b: &ArrayD<B>, f: impl Fn(&A, &B) -> C) -> Option<ArrayD<C>> {
    let shape = broadcast_shape(a.shape(), b.shape())?;
    if crate::infer::dims::element_count(&shape).is_none_or(|n| n > FOLD_LIMIT) {
        return None;
    }
    let av = a.broadcast(IxDyn(&shape))?;
    let bv = b.broadcast(IxDyn(&shape))?;
    Some(Zip::from(&av).and(&bv).map_collect(f))
}

/// An elementwise arithmetic operation, by element kind.
pub struct Arith {
    /// On integers (`None`: not defined, e.g. division by zero).
    pub int: fn(i64, i64) -> Option<i64>,
    /// On floats.
    pub float: fn(f64, f64) -> f64,
}

/// Folds a broadcasting arithmetic operation; the result has `a`'s element type.
pub fn arith(a: &Constant, b: &Constant, op: &Arith) -> Option<Constant> {
    let data = match (&a.data, &b.data) {
        (ConstData::Int(x), ConstData::Int(y)) => {
            let r = zip2(x, y, |&p, &q| (op.int)(p, q))?;
            if r.iter().any(Option::is_none) {
                return None;
            }
            ConstData::Int(r.mapv(|v| wrap_int(v.unwrap_or(0), a.dtype)))
        }
        (ConstData::Str(_), _) | (_, ConstData::Str(_)) => return None,
        _ => {
            let x = as_float(&a.data)?;
            let y = as_float(&b.data)?;
            let r = zip2(&x, &y, |&p, &q| (op.float)(p, q))?;
            if a.dtype.is_float() {
                ConstData::Float(r.mapv(|v| round_float(v, a.dtype)))
            } else {
                ConstData::Int(r.mapv(|v| wrap_int(v as i64, a.dtype)))
            }
        }
    };
    Some(Constant {
        dtype: a.dtype,
        data,
    })
}

/// Folds a broadcasting comparison into a bool tensor.
pub fn compare(
    a: &Constant,
    b: &Constant,
    int: fn(i64, i64) -> bool,
    float: fn(f64, f64) -> bool,
) -> Option<Constant> {
    let r = match (&a.data, &b.data) {
        (ConstData::Int(x), ConstData::Int(y)) => zip2(x, y, |&p, &q| int(p, q))?,
        (ConstData::Str(x), ConstData::Str(y)) => zip2(x, y, |p, q| p == q)?,
        _ => zip2(&as_float(&a.data)?, &as_float(&b.data)?, |&p, &q| {
            float(p, q)
        })?,
    };
    Some(Constant {
        dtype: DType::Bool,
        data: ConstData::Int(r.mapv(i64::from)),
    })
}

/// The elements as a float array (`None` for strings).
pub fn as_float(data: &ConstData) -> Option<ArrayD<f64>> {
    match data {
        ConstData::Int(a) => Some(a.mapv(|v| v as f64)),
        ConstData::Float(a) => Some(a.clone()),
        ConstData::Str(_) => None,
    }
}

/// Folds `Where(cond, x, y)`.
pub fn where_select(cond: &Constant, x: &Constant, y: &Constant) -> Option<Constant> {
    let ConstData::Int(c) = &cond.data else {
        return None;
    };
    let shape = broadcast_shape(&broadcast_shape(c.shape(), x.shape())?, y.shape())?;
    if crate::infer::dims::element_count(&shape).is_none_or(|n| n > FOLD_LIMIT) {
        return None;
    }
    let cv = c.broadcast(IxDyn(&shape))?;
    let data = match (&x.data, &y.data) {
        (ConstData::Int(p), ConstData::Int(q)) => ConstData::Int(pick(&cv, p, q, &shape)?),
        (ConstData::Float(p), ConstData::Float(q)) => ConstData::Float(pick(&cv, p, q, &shape)?),
        (ConstData::Str(p), ConstData::Str(q)) => ConstData::Str(pick(&cv, p, q, &shape)?),
        _ => return None,
    };
    Some(Constant {
        dtype: x.dtype,
        data,
    })
}

fn pick<T: Clone>(
    c: &ndarray::ArrayViewD<i64>,
    p: &ArrayD<T>,
    q: &ArrayD<T>,
    shape: &[usize],
) -> Option<ArrayD<T>> {
    let pv = p.broadcast(IxDyn(shape))?;
    let qv = q.broadcast(IxDyn(shape))?;
    Some(
        Zip::from(c)
            .and(&pv)
            .and(&qv)
            .map_collect(|&c, a, b| if c != 0 { a.clone() } else { b.clone() }),
    )
}

/// A value with a new shape (same element count).
pub fn reshape(c: &Constant, shape: &[usize]) -> Option<Constant> {
    let data = try_map_data!(&c.data, a => a
        .as_standard_layout()
        .into_owned()
        .into_shape_with_order(IxDyn(shape))
        .ok());
    Some(Constant {
        dtype: c.dtype,
        data,
    })
}

/// Concatenates values of one element kind along `axis`.
pub fn concat(parts: &[&Constant], axis: usize) -> Option<Constant> {
    let first = parts.first()?;
    if parts.iter().map(|p| p.len()).sum::<usize>() > FOLD_LIMIT {
        return None;
    }
    macro_rules! join {
        ($variant:ident) => {{
            let views: Option<Vec<_>> = parts
                .iter()
                .map(|p| match &p.data {
                    ConstData::$variant(a) => Some(a.view()),
                    _ => None,
                })
                .collect();
            ConstData::$variant(ndarray::concatenate(ndarray::Axis(axis), &views?).ok()?)
        }};
    }
    let data = match &first.data {
        ConstData::Int(_) => join!(Int),
        ConstData::Float(_) => join!(Float),
        ConstData::Str(_) => join!(Str),
    };
    Some(Constant {
        dtype: first.dtype,
        data,
    })
}

/// Permutes the axes.
pub fn transpose(c: &Constant, perm: &[usize]) -> Option<Constant> {
    let data = map_data!(&c.data, a => a.clone().permuted_axes(IxDyn(perm)).as_standard_layout().into_owned());
    Some(Constant {
        dtype: c.dtype,
        data,
    })
}

/// Picks the given indices (already in range) along `axis`.
pub fn select(c: &Constant, axis: usize, indices: &[usize]) -> Option<Constant> {
    if axis >= c.shape().len() {
        return None;
    }
    let data = map_data!(&c.data, a => a.select(ndarray::Axis(axis), indices));
    Some(Constant {
        dtype: c.dtype,
        data,
    })
}

/// Broadcasts a value to a larger shape.
pub fn expand(c: &Constant, shape: &[usize]) -> Option<Constant> {
    if crate::infer::dims::element_count(shape).is_none_or(|n| n > FOLD_LIMIT) {
        return None;
    }
    let data = try_map_data!(&c.data, a => a.broadcast(IxDyn(shape)).map(|v| v.to_owned()));
    Some(Constant {
        dtype: c.dtype,
        data,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arith_broadcasts_and_wraps() {
        let a = int_tensor(DType::Int32, &[2, 1], vec![1, 2]).unwrap();
        let b = int_tensor(DType::Int32, &[3], vec![10, 20, 30]).unwrap();
        let add = Arith {
            int: |x, y| x.checked_add(y),
            float: |x, y| x + y,
        };
        let r = arith(&a, &b, &add).unwrap();
        assert_eq!(r.shape(), &[2, 3]);
        assert_eq!(r.to_i64_vec().unwrap(), vec![11, 21, 31, 12, 22, 32]);
        assert_eq!(
            cast(&Constant::int64_vec(vec![300]), DType::Uint8)
                .unwrap()
                .to_i64_vec(),
            Some(vec![44])
        );
    }
}
