//! Value types: tensor shapes with concrete, symbolic or unknown dimensions, and the
//! sequence/optional/map wrappers; conversion from and to `TypeProto`.

use std::fmt;

use super::DType;
use crate::onnx::proto::{
    TensorShapeProto, TypeProto, tensor_shape_proto::Dimension, tensor_shape_proto::dimension,
    type_proto,
};
use crate::symbolic::Expr;

/// One dimension of a shape.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Dim {
    /// A concrete size.
    Known(i64),
    /// A named symbolic size (e.g. `batch`), equal wherever the same name appears.
    Symbol(String),
    /// An expression in symbols that is neither a constant nor a single symbol (those are
    /// `Known` and `Symbol`; [`Dim::from_expr`] keeps that normal form), e.g. `(H + 1)//2`.
    Expr(Expr),
    /// A size nothing is known about.
    Unknown,
}

impl Dim {
    /// The concrete size, if known.
    pub fn value(&self) -> Option<i64> {
        match self {
            Dim::Known(v) => Some(*v),
            _ => None,
        }
    }

    /// The dimension of an expression: `Known` for a constant, `Symbol` for one symbol.
    pub fn from_expr(expr: Expr) -> Dim {
        if let Some(v) = expr.as_constant() {
            Dim::Known(v)
        } else if let Some(s) = expr.as_symbol() {
            Dim::Symbol(s.to_string())
        } else {
            Dim::Expr(expr)
        }
    }

    /// The size as an expression, unless unknown.
    pub fn expr(&self) -> Option<Expr> {
        match self {
            Dim::Known(v) => Some(Expr::constant(*v)),
            Dim::Symbol(s) => Some(Expr::symbol(s)),
            Dim::Expr(e) => Some(e.clone()),
            Dim::Unknown => None,
        }
    }

    /// True for a symbol or an expression in symbols.
    pub fn is_symbolic(&self) -> bool {
        matches!(self, Dim::Symbol(_) | Dim::Expr(_))
    }
}

impl fmt::Display for Dim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Dim::Known(v) => write!(f, "{v}"),
            Dim::Symbol(s) => f.write_str(s),
            Dim::Expr(e) => write!(f, "{e}"),
            Dim::Unknown => f.write_str("?"),
        }
    }
}

/// A list of dimensions, outermost first.
pub type Shape = Vec<Dim>;

/// The concrete sizes of a shape, if every dimension is known.
pub fn concrete(shape: &[Dim]) -> Option<Vec<i64>> {
    shape.iter().map(Dim::value).collect()
}

/// A shape of known sizes.
pub fn known_shape(dims: &[i64]) -> Shape {
    dims.iter().map(|&d| Dim::Known(d)).collect()
}

/// Formats a shape as `batch×3×224×224` (a scalar prints as `scalar`).
pub fn format_shape(shape: &[Dim]) -> String {
    if shape.is_empty() {
        return "scalar".to_string();
    }
    shape
        .iter()
        .map(|d| match d {
            Dim::Expr(e) if e.to_string().contains(' ') => format!("({e})"),
            d => d.to_string(),
        })
        .collect::<Vec<_>>()
        .join("×")
}

/// A dense tensor type: element type and (possibly unknown-rank) shape.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorType {
    /// Element type.
    pub dtype: DType,
    /// Dimensions, or `None` when even the rank is unknown.
    pub shape: Option<Shape>,
}

impl TensorType {
    /// A tensor type with the given shape.
    pub fn new(dtype: DType, shape: Shape) -> Self {
        TensorType {
            dtype,
            shape: Some(shape),
        }
    }

    /// The shape, if every dimension is known ([`concrete`]).
    pub fn concrete_shape(&self) -> Option<Vec<i64>> {
        concrete(self.shape.as_ref()?)
    }

    /// Number of elements, if every dimension is known.
    pub fn elements(&self) -> Option<u64> {
        let dims = self.concrete_shape()?;
        dims.iter()
            .try_fold(1u64, |acc, &d| acc.checked_mul(u64::try_from(d).ok()?))
    }

    /// True when a dimension of the shape mentions a symbol that `wanted` accepts (the
    /// symbols of a range, the data-dependent counts).
    pub fn mentions(&self, wanted: &dyn Fn(&str) -> bool) -> bool {
        self.shape.iter().flatten().any(|d| match d {
            Dim::Symbol(s) => wanted(s),
            Dim::Expr(e) => e.symbols().iter().any(|s| wanted(s)),
            Dim::Known(_) | Dim::Unknown => false,
        })
    }

    /// Exact storage bytes, if the shape is concrete and the type has a fixed size.
    pub fn bytes(&self) -> Option<u64> {
        self.dtype.bytes_for(self.elements()?)
    }

    /// Storage bytes as an expression in the shape's symbols (`4*768*sequence`), if every
    /// dimension is known or symbolic and the type has a fixed size; sub-byte types round up.
    pub fn bytes_expr(&self) -> Option<Expr> {
        let bits = i64::from(self.dtype.bits()?);
        let shape = self.shape.as_ref()?;
        if let Some(bytes) = constant_bytes(shape, bits) {
            return bytes.map(Expr::constant);
        }
        let elements = shape
            .iter()
            .try_fold(Expr::constant(1), |acc, d| acc.mul(&d.expr()?))?;
        elements.scale(bits)?.ceil_div(8)
    }
}

/// [`TensorType::bytes_expr`] of a shape whose dimensions are all known, in plain integers (a
/// split trial asks it of every tensor): `None` when a dimension is not known, else the
/// constant, or `None` within when the expression's arithmetic would overflow (its products
/// stop at a zero factor, as a product of expressions with zero does).
fn constant_bytes(shape: &[Dim], bits: i64) -> Option<Option<i64>> {
    let mut elements = Some(1i64);
    for d in shape {
        let v = d.value()?;
        elements = elements.and_then(|n| match n == 0 || v == 0 {
            true => Some(0),
            false => n.checked_mul(v),
        });
    }
    Some(
        elements
            .and_then(|n| match n == 0 || bits == 0 {
                true => Some(0),
                false => n.checked_mul(bits),
            })
            .and_then(|b| b.checked_add(7))
            .map(|b| b.div_euclid(8)),
    )
}

/// The type of any ONNX value.
#[derive(Clone, Debug, PartialEq)]
pub enum ValueType {
    /// A dense tensor.
    Tensor(TensorType),
    /// A sparse tensor.
    SparseTensor(TensorType),
    /// A sequence of values of one type.
    Sequence(Box<ValueType>),
    /// A value that may be absent.
    Optional(Box<ValueType>),
    /// A map from a key element type to values (ONNX-ML).
    Map(DType, Box<ValueType>),
    /// An opaque type (ONNX-ML).
    Opaque,
}

impl ValueType {
    /// A dense tensor type.
    pub fn tensor(dtype: DType, shape: Shape) -> Self {
        ValueType::Tensor(TensorType::new(dtype, shape))
    }

    /// The dense tensor type, if this is one.
    pub fn as_tensor(&self) -> Option<&TensorType> {
        match self {
            ValueType::Tensor(t) => Some(t),
            _ => None,
        }
    }

    /// Reads a `TypeProto`; `None` when it names no element type we know.
    pub fn from_proto(proto: &TypeProto) -> Option<ValueType> {
        Some(match proto.value.as_ref()? {
            type_proto::Value::TensorType(t) => ValueType::Tensor(TensorType {
                dtype: DType::from_onnx(t.elem_type())?,
                shape: t.shape.as_ref().map(shape_from_proto),
            }),
            type_proto::Value::SparseTensorType(t) => ValueType::SparseTensor(TensorType {
                dtype: DType::from_onnx(t.elem_type())?,
                shape: t.shape.as_ref().map(shape_from_proto),
            }),
            type_proto::Value::SequenceType(s) => {
                ValueType::Sequence(Box::new(ValueType::from_proto(s.elem_type.as_deref()?)?))
            }
            type_proto::Value::OptionalType(o) => {
                ValueType::Optional(Box::new(ValueType::from_proto(o.elem_type.as_deref()?)?))
            }
            type_proto::Value::MapType(m) => ValueType::Map(
                DType::from_onnx(m.key_type())?,
                Box::new(ValueType::from_proto(m.value_type.as_deref()?)?),
            ),
            type_proto::Value::OpaqueType(_) => ValueType::Opaque,
        })
    }

    /// Writes this type as a `TypeProto`.
    pub fn to_proto(&self) -> TypeProto {
        let value = match self {
            ValueType::Tensor(t) => type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(t.dtype.to_onnx()),
                shape: t.shape.as_deref().map(shape_to_proto),
            }),
            ValueType::SparseTensor(t) => {
                type_proto::Value::SparseTensorType(type_proto::SparseTensor {
                    elem_type: Some(t.dtype.to_onnx()),
                    shape: t.shape.as_deref().map(shape_to_proto),
                })
            }
            ValueType::Sequence(e) => {
                type_proto::Value::SequenceType(Box::new(type_proto::Sequence {
                    elem_type: Some(Box::new(e.to_proto())),
                }))
            }
            ValueType::Optional(e) => {
                type_proto::Value::OptionalType(Box::new(type_proto::Optional {
                    elem_type: Some(Box::new(e.to_proto())),
                }))
            }
            ValueType::Map(k, v) => type_proto::Value::MapType(Box::new(type_proto::Map {
                key_type: Some(k.to_onnx()),
                value_type: Some(Box::new(v.to_proto())),
            })),
            ValueType::Opaque => type_proto::Value::OpaqueType(type_proto::Opaque::default()),
        };
        TypeProto {
            value: Some(value),
            denotation: None,
        }
    }
}

impl fmt::Display for ValueType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ValueType::Tensor(t) => match &t.shape {
                Some(s) => write!(f, "{} {}", t.dtype, format_shape(s)),
                None => write!(f, "{} (unknown rank)", t.dtype),
            },
            ValueType::SparseTensor(t) => write!(f, "sparse {}", ValueType::Tensor(t.clone())),
            ValueType::Sequence(e) => write!(f, "seq({e})"),
            ValueType::Optional(e) => write!(f, "optional({e})"),
            ValueType::Map(k, v) => write!(f, "map({k}, {v})"),
            ValueType::Opaque => f.write_str("opaque"),
        }
    }
}

fn shape_from_proto(shape: &TensorShapeProto) -> Shape {
    shape
        .dim
        .iter()
        .map(|d| match &d.value {
            // Some exporters (Paddle's) write an unknown dim as -1.
            Some(dimension::Value::DimValue(v)) if *v >= 0 => Dim::Known(*v),
            Some(dimension::Value::DimParam(p)) if !p.is_empty() => Dim::Symbol(p.clone()),
            _ => Dim::Unknown,
        })
        .collect()
}

fn shape_to_proto(shape: &[Dim]) -> TensorShapeProto {
    TensorShapeProto {
        dim: shape
            .iter()
            .map(|d| Dimension {
                value: match d {
                    Dim::Known(v) => Some(dimension::Value::DimValue(*v)),
                    Dim::Symbol(s) => Some(dimension::Value::DimParam(s.clone())),
                    Dim::Expr(e) => Some(dimension::Value::DimParam(e.to_string())),
                    Dim::Unknown => None,
                },
                denotation: None,
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sizes of known shapes worked by hand, and the same through the expression arithmetic
    /// (a symbol set to the last dimension's size).
    #[test]
    fn known_shapes_size_as_their_expressions_do() {
        let known = |dtype, dims: &[i64]| TensorType {
            dtype,
            shape: Some(dims.iter().map(|&d| Dim::Known(d)).collect()),
        };
        let bytes = |t: &TensorType| t.bytes_expr().and_then(|e| e.as_constant());
        assert_eq!(bytes(&known(DType::Float, &[2, 3])), Some(24));
        assert_eq!(bytes(&known(DType::Int4, &[3])), Some(2));
        assert_eq!(bytes(&known(DType::Float, &[0, 5])), Some(0));
        // A zero factor stops the product before the overflow it would meet.
        assert_eq!(bytes(&known(DType::Float, &[0, i64::MAX, 2])), Some(0));
        assert_eq!(known(DType::Float, &[i64::MAX, 2]).bytes_expr(), None);
        assert_eq!(known(DType::Int8, &[i64::MAX]).bytes_expr(), None);
        for dims in [&[2i64, 3][..], &[0, 5], &[7, 9, 5]] {
            for dtype in [DType::Float, DType::Int4, DType::Int8] {
                let mut symbolic = known(dtype, dims);
                let last = symbolic.shape.as_mut().unwrap().last_mut().unwrap();
                *last = Dim::Symbol("n".into());
                let n = *dims.last().unwrap();
                let at = |s: &str| (s == "n").then_some(n);
                let evaluated = symbolic.bytes_expr().and_then(|e| e.eval(&at));
                assert_eq!(
                    bytes(&known(dtype, dims)),
                    evaluated,
                    "{dtype:?} {dims:?}"
                );
            }
        }
    }

    #[test]
    fn proto_round_trip_keeps_symbols_and_unknowns() {
        let ty = ValueType::Sequence(Box::new(ValueType::tensor(
            DType::Float16,
            vec![Dim::Symbol("batch".into()), Dim::Known(3), Dim::Unknown],
        )));
        assert_eq!(ValueType::from_proto(&ty.to_proto()), Some(ty));
    }

    #[test]
    fn bytes_need_concrete_shape() {
        let t = TensorType::new(DType::Float, known_shape(&[2, 3]));
        assert_eq!(t.bytes(), Some(24));
        let s = TensorType::new(DType::Float, vec![Dim::Symbol("n".into())]);
        assert_eq!(s.bytes(), None);
        assert_eq!(format_shape(s.shape.as_ref().unwrap()), "n");
    }

    #[test]
    fn byte_expressions_multiply_dims_and_round_sub_byte_types_up() {
        let n = || Dim::Symbol("n".into());
        let t = TensorType::new(DType::Float, vec![n(), Dim::Known(12), n()]);
        assert_eq!(t.bytes_expr().unwrap().to_string(), "48*n*n");
        // 4-bit elements: 3·n of them take ceil(12·n / 8) = ceil(3·n / 2) bytes.
        let q = TensorType::new(DType::Int4, vec![n(), Dim::Known(3)]);
        assert_eq!(q.bytes_expr().unwrap().to_string(), "n + (4*n + 7)//8");
        assert_eq!(
            TensorType::new(DType::Float, vec![Dim::Unknown]).bytes_expr(),
            None
        );
    }
}
