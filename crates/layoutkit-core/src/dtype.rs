use std::fmt;
use std::str::FromStr;

use crate::Error;

/// Element types. Data is always held in the machine's native (little-endian) byte order.
///
/// ```
/// use layoutkit_core::DType;
/// let t: DType = "f16".parse().unwrap();
/// assert_eq!(t.size_bytes(), 2);
/// assert_eq!(t.npy_descr(), "<f2");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    F32,
    F16,
    BF16,
    F64,
    I8,
    U8,
    I32,
}

impl DType {
    /// Every element type, in the order `layoutkit` lists them.
    pub const ALL: [DType; 7] = [
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::F64,
        DType::I8,
        DType::U8,
        DType::I32,
    ];

    /// Bytes per element.
    pub fn size_bytes(self) -> usize {
        match self {
            DType::I8 | DType::U8 => 1,
            DType::F16 | DType::BF16 => 2,
            DType::F32 | DType::I32 => 4,
            DType::F64 => 8,
        }
    }

    /// Short name: `f32`, `f16`, `bf16`, `f64`, `i8`, `u8`, `i32`.
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::F64 => "f64",
            DType::I8 => "i8",
            DType::U8 => "u8",
            DType::I32 => "i32",
        }
    }

    /// Whether this is a floating-point type.
    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F16 | DType::BF16 | DType::F64)
    }

    /// The numpy type string written to `.npy` headers (little-endian).
    ///
    /// numpy has no bf16: bf16 data is written as `<u2` (the raw bit patterns; numpy users
    /// view it with `ml_dtypes.bfloat16`), and `<u2` files are read back as bf16.
    pub fn npy_descr(self) -> &'static str {
        match self {
            DType::F32 => "<f4",
            DType::F16 => "<f2",
            DType::BF16 => "<u2",
            DType::F64 => "<f8",
            DType::I8 => "|i1",
            DType::U8 => "|u1",
            DType::I32 => "<i4",
        }
    }

    /// Smallest and largest value of an integer type (`None` for floats).
    pub fn int_range(self) -> Option<(i64, i64)> {
        match self {
            DType::I8 => Some((i8::MIN as i64, i8::MAX as i64)),
            DType::U8 => Some((0, u8::MAX as i64)),
            DType::I32 => Some((i32::MIN as i64, i32::MAX as i64)),
            _ => None,
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for DType {
    type Err = Error;

    /// Accepts the short names and common spellings (`float32`, `half`, `bfloat16`, `int8`, ...).
    fn from_str(s: &str) -> Result<DType, Error> {
        Ok(match s.trim().to_ascii_lowercase().as_str() {
            "f32" | "float32" | "float" | "fp32" => DType::F32,
            "f16" | "float16" | "half" | "fp16" => DType::F16,
            "bf16" | "bfloat16" => DType::BF16,
            "f64" | "float64" | "double" | "fp64" => DType::F64,
            "i8" | "int8" => DType::I8,
            "u8" | "uint8" => DType::U8,
            "i32" | "int32" => DType::I32,
            _ => return Err(Error::UnknownDType(s.to_string())),
        })
    }
}
