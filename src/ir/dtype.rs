//! Element types of ONNX tensors and their storage sizes.

use std::fmt;

/// An ONNX tensor element type (`TensorProto.DataType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    /// 32-bit IEEE float.
    Float,
    /// Unsigned 8-bit integer.
    Uint8,
    /// Signed 8-bit integer.
    Int8,
    /// Unsigned 16-bit integer.
    Uint16,
    /// Signed 16-bit integer.
    Int16,
    /// Signed 32-bit integer.
    Int32,
    /// Signed 64-bit integer.
    Int64,
    /// Variable-length string (never planned in the arena).
    String,
    /// Boolean, one byte per element.
    Bool,
    /// 16-bit IEEE float.
    Float16,
    /// 64-bit IEEE float.
    Double,
    /// Unsigned 32-bit integer.
    Uint32,
    /// Unsigned 64-bit integer.
    Uint64,
    /// Complex of two 32-bit floats.
    Complex64,
    /// Complex of two 64-bit floats.
    Complex128,
    /// bfloat16.
    Bfloat16,
    /// float8 e4m3fn.
    Float8E4M3FN,
    /// float8 e4m3fnuz.
    Float8E4M3FNUZ,
    /// float8 e5m2.
    Float8E5M2,
    /// float8 e5m2fnuz.
    Float8E5M2FNUZ,
    /// Unsigned 4-bit integer.
    Uint4,
    /// Signed 4-bit integer.
    Int4,
    /// 4-bit float e2m1.
    Float4E2M1,
    /// float8 e8m0 (scale type).
    Float8E8M0,
    /// Unsigned 2-bit integer.
    Uint2,
    /// Signed 2-bit integer.
    Int2,
}

/// Every element type with its ONNX code, bit width (0 for strings) and table name.
const TABLE: &[(DType, i32, u32, &str)] = &[
    (DType::Float, 1, 32, "float32"),
    (DType::Uint8, 2, 8, "uint8"),
    (DType::Int8, 3, 8, "int8"),
    (DType::Uint16, 4, 16, "uint16"),
    (DType::Int16, 5, 16, "int16"),
    (DType::Int32, 6, 32, "int32"),
    (DType::Int64, 7, 64, "int64"),
    (DType::String, 8, 0, "string"),
    (DType::Bool, 9, 8, "bool"),
    (DType::Float16, 10, 16, "float16"),
    (DType::Double, 11, 64, "float64"),
    (DType::Uint32, 12, 32, "uint32"),
    (DType::Uint64, 13, 64, "uint64"),
    (DType::Complex64, 14, 64, "complex64"),
    (DType::Complex128, 15, 128, "complex128"),
    (DType::Bfloat16, 16, 16, "bfloat16"),
    (DType::Float8E4M3FN, 17, 8, "float8e4m3fn"),
    (DType::Float8E4M3FNUZ, 18, 8, "float8e4m3fnuz"),
    (DType::Float8E5M2, 19, 8, "float8e5m2"),
    (DType::Float8E5M2FNUZ, 20, 8, "float8e5m2fnuz"),
    (DType::Uint4, 21, 4, "uint4"),
    (DType::Int4, 22, 4, "int4"),
    (DType::Float4E2M1, 23, 4, "float4e2m1"),
    (DType::Float8E8M0, 24, 8, "float8e8m0"),
    (DType::Uint2, 25, 2, "uint2"),
    (DType::Int2, 26, 2, "int2"),
];

impl DType {
    fn entry(self) -> &'static (DType, i32, u32, &'static str) {
        TABLE
            .iter()
            .find(|e| e.0 == self)
            .expect("every DType is in TABLE")
    }

    /// The type for an ONNX `TensorProto.DataType` code, if it is a known element type.
    pub fn from_onnx(code: i32) -> Option<DType> {
        TABLE.iter().find(|e| e.1 == code).map(|e| e.0)
    }

    /// The type for a table name such as `float32` (see [`DType::name`]).
    pub fn from_name(name: &str) -> Option<DType> {
        TABLE.iter().find(|e| e.3 == name).map(|e| e.0)
    }

    /// The ONNX `TensorProto.DataType` code.
    pub fn to_onnx(self) -> i32 {
        self.entry().1
    }

    /// Storage bits per element, or `None` for strings (variable length).
    pub fn bits(self) -> Option<u32> {
        match self.entry().2 {
            0 => None,
            b => Some(b),
        }
    }

    /// The numpy-style name used in the allocation table (`float32`, `int64`, ...).
    pub fn name(self) -> &'static str {
        self.entry().3
    }

    /// Exact bytes of `elements` elements: bits × count rounded up to whole bytes.
    /// `None` for strings.
    pub fn bytes_for(self, elements: u64) -> Option<u64> {
        self.bits()
            .map(|b| (elements.saturating_mul(u64::from(b))).div_ceil(8))
    }

    /// True for the floating-point types (including float8/float4 and bfloat16).
    pub fn is_float(self) -> bool {
        matches!(
            self,
            DType::Float
                | DType::Float16
                | DType::Double
                | DType::Bfloat16
                | DType::Float8E4M3FN
                | DType::Float8E4M3FNUZ
                | DType::Float8E5M2
                | DType::Float8E5M2FNUZ
                | DType::Float4E2M1
                | DType::Float8E8M0
        )
    }

    /// True for the integer types and bool.
    pub fn is_integer(self) -> bool {
        !self.is_float() && !matches!(self, DType::String | DType::Complex64 | DType::Complex128)
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip() {
        for code in 1..=26 {
            let dtype = DType::from_onnx(code).unwrap();
            assert_eq!(dtype.to_onnx(), code);
            assert_eq!(DType::from_name(dtype.name()), Some(dtype));
        }
        assert_eq!(DType::from_onnx(0), None);
        assert_eq!(DType::from_onnx(99), None);
    }

    #[test]
    fn sub_byte_sizes_round_up() {
        assert_eq!(DType::Int4.bytes_for(3), Some(2));
        assert_eq!(DType::Uint2.bytes_for(5), Some(2));
        assert_eq!(DType::Float.bytes_for(10), Some(40));
        assert_eq!(DType::String.bytes_for(10), None);
    }
}
