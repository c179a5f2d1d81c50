//! Known tensor values: initializers, `Constant` nodes and folded shape computations.

use ndarray::{ArrayD, IxDyn};

use super::DType;
use crate::onnx::proto::TensorProto;

/// The elements of a known tensor, widened to one of three storage kinds.
#[derive(Clone, Debug, PartialEq)]
pub enum ConstData {
    /// Integer and bool elements, as i64 (uint64 values keep their bits).
    Int(ArrayD<i64>),
    /// Floating-point elements, as f64.
    Float(ArrayD<f64>),
    /// String elements.
    Str(ArrayD<String>),
}

/// A tensor whose value is known before run time.
#[derive(Clone, Debug, PartialEq)]
pub struct Constant {
    /// The ONNX element type the value has.
    pub dtype: DType,
    /// The elements.
    pub data: ConstData,
}

impl Constant {
    /// An integer tensor of the given type.
    pub fn ints(dtype: DType, data: ArrayD<i64>) -> Self {
        Constant {
            dtype,
            data: ConstData::Int(data),
        }
    }

    /// A 1-D int64 tensor.
    pub fn int64_vec(values: Vec<i64>) -> Self {
        let n = values.len();
        Constant::ints(
            DType::Int64,
            ArrayD::from_shape_vec(IxDyn(&[n]), values).expect("1-D shape matches"),
        )
    }

    /// The dimensions of the value.
    pub fn shape(&self) -> &[usize] {
        match &self.data {
            ConstData::Int(a) => a.shape(),
            ConstData::Float(a) => a.shape(),
            ConstData::Str(a) => a.shape(),
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.shape().iter().product()
    }

    /// True when the tensor has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The elements as i64 in row-major order (floats truncated toward zero), unless strings.
    pub fn to_i64_vec(&self) -> Option<Vec<i64>> {
        match &self.data {
            ConstData::Int(a) => Some(a.iter().copied().collect()),
            ConstData::Float(a) => Some(a.iter().map(|&v| v as i64).collect()),
            ConstData::Str(_) => None,
        }
    }

    /// The elements as f64 in row-major order, unless strings.
    pub fn to_f64_vec(&self) -> Option<Vec<f64>> {
        match &self.data {
            ConstData::Int(a) => Some(a.iter().map(|&v| v as f64).collect()),
            ConstData::Float(a) => Some(a.iter().copied().collect()),
            ConstData::Str(_) => None,
        }
    }

    /// Decodes a `TensorProto` held inline. Returns `Ok(None)` for values we do not decode
    /// (external data, complex, float8/4-bit floats) and an error for malformed payloads.
    pub fn from_proto(tensor: &TensorProto) -> Result<Option<Constant>, String> {
        let Some(dtype) = DType::from_onnx(tensor.data_type()) else {
            return Err(format!("unknown data_type {}", tensor.data_type()));
        };
        if !tensor.external_data.is_empty() {
            return Ok(None);
        }
        let dims: Vec<usize> = tensor
            .dims
            .iter()
            .map(|&d| usize::try_from(d).map_err(|_| format!("negative dimension {d}")))
            .collect::<Result<_, _>>()?;
        let count: usize = dims.iter().product();
        let shaped_ints = |v: Vec<i64>| -> Result<Option<Constant>, String> {
            check_count(v.len(), count)?;
            Ok(Some(Constant::ints(
                dtype,
                ArrayD::from_shape_vec(IxDyn(&dims), v).map_err(|e| e.to_string())?,
            )))
        };
        let shaped_floats = |v: Vec<f64>| -> Result<Option<Constant>, String> {
            check_count(v.len(), count)?;
            Ok(Some(Constant {
                dtype,
                data: ConstData::Float(
                    ArrayD::from_shape_vec(IxDyn(&dims), v).map_err(|e| e.to_string())?,
                ),
            }))
        };
        if dtype == DType::String {
            let v: Vec<String> = tensor
                .string_data
                .iter()
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .collect();
            check_count(v.len(), count)?;
            return Ok(Some(Constant {
                dtype,
                data: ConstData::Str(
                    ArrayD::from_shape_vec(IxDyn(&dims), v).map_err(|e| e.to_string())?,
                ),
            }));
        }
        if let Some(raw) = tensor.raw_data.as_ref() {
            return match dtype {
                DType::Float => shaped_floats(
                    le_chunks::<4>(raw, count)?
                        .map(|b| f32::from_le_bytes(b) as f64)
                        .collect(),
                ),
                DType::Double => shaped_floats(
                    le_chunks::<8>(raw, count)?
                        .map(f64::from_le_bytes)
                        .collect(),
                ),
                DType::Float16 => shaped_floats(
                    le_chunks::<2>(raw, count)?
                        .map(|b| f16_to_f64(u16::from_le_bytes(b)))
                        .collect(),
                ),
                DType::Bfloat16 => shaped_floats(
                    le_chunks::<2>(raw, count)?
                        .map(|b| bf16_to_f64(u16::from_le_bytes(b)))
                        .collect(),
                ),
                DType::Int64 | DType::Uint64 => shaped_ints(
                    le_chunks::<8>(raw, count)?
                        .map(i64::from_le_bytes)
                        .collect(),
                ),
                DType::Int32 => shaped_ints(
                    le_chunks::<4>(raw, count)?
                        .map(|b| i32::from_le_bytes(b) as i64)
                        .collect(),
                ),
                DType::Uint32 => shaped_ints(
                    le_chunks::<4>(raw, count)?
                        .map(|b| u32::from_le_bytes(b) as i64)
                        .collect(),
                ),
                DType::Int16 => shaped_ints(
                    le_chunks::<2>(raw, count)?
                        .map(|b| i16::from_le_bytes(b) as i64)
                        .collect(),
                ),
                DType::Uint16 => shaped_ints(
                    le_chunks::<2>(raw, count)?
                        .map(|b| u16::from_le_bytes(b) as i64)
                        .collect(),
                ),
                DType::Int8 => shaped_ints(
                    le_chunks::<1>(raw, count)?
                        .map(|b| b[0] as i8 as i64)
                        .collect(),
                ),
                DType::Uint8 | DType::Bool => {
                    shaped_ints(le_chunks::<1>(raw, count)?.map(|b| b[0] as i64).collect())
                }
                _ => Ok(None),
            };
        }
        match dtype {
            DType::Float => shaped_floats(tensor.float_data.iter().map(|&v| v as f64).collect()),
            DType::Double => shaped_floats(tensor.double_data.clone()),
            DType::Float16 => shaped_floats(
                tensor
                    .int32_data
                    .iter()
                    .map(|&v| f16_to_f64(v as u16))
                    .collect(),
            ),
            DType::Bfloat16 => shaped_floats(
                tensor
                    .int32_data
                    .iter()
                    .map(|&v| bf16_to_f64(v as u16))
                    .collect(),
            ),
            DType::Int64 => shaped_ints(tensor.int64_data.clone()),
            DType::Uint64 | DType::Uint32 => {
                shaped_ints(tensor.uint64_data.iter().map(|&v| v as i64).collect())
            }
            DType::Int32
            | DType::Int16
            | DType::Int8
            | DType::Uint16
            | DType::Uint8
            | DType::Bool => shaped_ints(tensor.int32_data.iter().map(|&v| v as i64).collect()),
            _ => Ok(None),
        }
    }
}

fn check_count(got: usize, want: usize) -> Result<(), String> {
    if got == want {
        Ok(())
    } else {
        Err(format!("holds {got} elements but its dims say {want}"))
    }
}

/// Splits little-endian payload bytes into `count` chunks of `N` bytes.
fn le_chunks<const N: usize>(
    raw: &[u8],
    count: usize,
) -> Result<impl Iterator<Item = [u8; N]> + '_, String> {
    if raw.len() != count * N {
        return Err(format!(
            "raw_data has {} bytes, expected {} ({count} elements × {N})",
            raw.len(),
            count * N
        ));
    }
    Ok(raw
        .chunks_exact(N)
        .map(|c| <[u8; N]>::try_from(c).expect("chunks_exact yields N bytes")))
}

/// IEEE half-precision bits to f64.
fn f16_to_f64(bits: u16) -> f64 {
    let sign = if bits & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = i32::from((bits >> 10) & 0x1f);
    let frac = f64::from(bits & 0x3ff);
    sign * match exp {
        0 => frac * 2f64.powi(-24),
        31 if frac == 0.0 => f64::INFINITY,
        31 => f64::NAN,
        _ => (1.0 + frac / 1024.0) * 2f64.powi(exp - 15),
    }
}

/// bfloat16 bits to f64.
fn bf16_to_f64(bits: u16) -> f64 {
    f64::from(f32::from_bits(u32::from(bits) << 16))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_raw_int64_and_float16() {
        let t = TensorProto {
            dims: vec![2],
            data_type: Some(7),
            raw_data: Some(bytes::Bytes::from(
                [5i64.to_le_bytes(), (-1i64).to_le_bytes()].concat(),
            )),
            ..Default::default()
        };
        let c = Constant::from_proto(&t).unwrap().unwrap();
        assert_eq!(c.to_i64_vec(), Some(vec![5, -1]));
        assert_eq!(f16_to_f64(0x3c00), 1.0);
        assert_eq!(f16_to_f64(0xc000), -2.0);
    }

    #[test]
    fn rejects_short_payload() {
        let t = TensorProto {
            dims: vec![3],
            data_type: Some(1),
            raw_data: Some(bytes::Bytes::from_static(&[0; 8])),
            ..Default::default()
        };
        assert!(Constant::from_proto(&t).is_err());
    }
}
