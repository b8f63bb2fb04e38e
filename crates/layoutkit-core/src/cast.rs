//! Element casts: the exact semantics every backend reproduces.
//!
//! * float -> float: IEEE round to nearest, ties to even (f64 -> f16/bf16 rounds once, directly);
//!   NaN stays NaN (quiet, sign and top payload bits kept), infinities stay infinite.
//! * float -> integer (quantise): `q = saturate(round_half_even(x / scale) + zero_point)`, with
//!   `x / scale` computed in f32 (f64 for f64 sources); NaN gives `zero_point`.
//! * integer -> float (dequantise): `(q - zero_point) * scale` in f32 (f64 for f64 targets), then
//!   rounded to the target type.
//! * integer -> integer: the value, saturated to the target range (scale and zero point refused).
//! * same type: the bits, unchanged.

use half::{bf16, f16};

use crate::{DType, Error, Result};

/// Scale and zero point of an integer type: `real = (q - zero_point) * scale`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Quantization {
    /// Positive, finite.
    pub scale: f32,
    pub zero_point: i32,
}

impl Default for Quantization {
    fn default() -> Self {
        Quantization {
            scale: 1.0,
            zero_point: 0,
        }
    }
}

/// A validated cast from `src` to `dst` elements.
///
/// ```
/// use layoutkit_core::{CastSpec, DType, Quantization, cast::Scalar};
/// let q = Quantization { scale: 0.5, zero_point: 3 };
/// let spec = CastSpec::new(DType::F32, DType::I8, Some(q)).unwrap();
/// assert_eq!(spec.apply(Scalar::F32(1.25)), Scalar::I8(5)); // 2.5 rounds to 2, + 3
/// assert_eq!(spec.apply(Scalar::F32(1e9)), Scalar::I8(127));
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CastSpec {
    pub src: DType,
    pub dst: DType,
    pub quant: Quantization,
}

impl CastSpec {
    /// Checks that the cast is defined: a quantization only between a float and an integer type,
    /// with a positive finite scale and a zero point inside the integer type's range.
    pub fn new(src: DType, dst: DType, quant: Option<Quantization>) -> Result<CastSpec> {
        let err = |reason: String| Error::Cast {
            src: src.to_string(),
            dst: dst.to_string(),
            reason,
        };
        if let Some(q) = quant {
            let int_type = match (src.is_float(), dst.is_float()) {
                (true, false) => dst,
                (false, true) => src,
                _ => {
                    return Err(err(
                        "a scale and zero point apply only to float <-> integer casts".into(),
                    ))
                }
            };
            if !(q.scale.is_finite() && q.scale > 0.0) {
                return Err(err(format!(
                    "scale {} must be positive and finite",
                    q.scale
                )));
            }
            let (lo, hi) = int_type.int_range().unwrap_or((i64::MIN, i64::MAX));
            if (q.zero_point as i64) < lo || (q.zero_point as i64) > hi {
                return Err(err(format!(
                    "zero point {} is outside the range of {int_type} [{lo}, {hi}]",
                    q.zero_point
                )));
            }
        }
        Ok(CastSpec {
            src,
            dst,
            quant: quant.unwrap_or_default(),
        })
    }

    /// The identity cast of `dtype`.
    pub fn identity(dtype: DType) -> CastSpec {
        CastSpec {
            src: dtype,
            dst: dtype,
            quant: Quantization::default(),
        }
    }

    /// Whether the cast copies bits unchanged.
    pub fn is_identity(&self) -> bool {
        self.src == self.dst
    }

    /// Casts one element. Contract: `x` is of type `self.src`; the result is of type `self.dst`.
    pub fn apply(&self, x: Scalar) -> Scalar {
        if self.is_identity() {
            return x;
        }
        let q = self.quant;
        match self.dst {
            DType::F32 => Scalar::F32(match x {
                Scalar::F32(v) => v,
                Scalar::F64(v) => v as f32,
                Scalar::F16(v) => v.to_f32(),
                Scalar::BF16(v) => v.to_f32(),
                int => dequantize_f32(int.as_i64(), q),
            }),
            DType::F64 => Scalar::F64(match x {
                Scalar::F32(v) => v as f64,
                Scalar::F64(v) => v,
                Scalar::F16(v) => v.to_f64(),
                Scalar::BF16(v) => v.to_f64(),
                int => (int.as_i64() - q.zero_point as i64) as f64 * q.scale as f64,
            }),
            DType::F16 => Scalar::F16(match x {
                Scalar::F64(v) => f16::from_bits(f64_to_f16_bits(v)),
                other => f16::from_f32(other.as_f32_for(q)),
            }),
            DType::BF16 => Scalar::BF16(match x {
                Scalar::F64(v) => bf16::from_bits(f64_to_bf16_bits(v)),
                other => bf16::from_f32(other.as_f32_for(q)),
            }),
            DType::I8 | DType::U8 | DType::I32 => {
                let (lo, hi) = self.dst.int_range().unwrap_or((0, 0));
                let v = match x {
                    Scalar::F64(v) => quantize(v / q.scale as f64, q.zero_point, lo, hi),
                    Scalar::F32(v) => quantize((v / q.scale) as f64, q.zero_point, lo, hi),
                    Scalar::F16(v) => quantize((v.to_f32() / q.scale) as f64, q.zero_point, lo, hi),
                    Scalar::BF16(v) => {
                        quantize((v.to_f32() / q.scale) as f64, q.zero_point, lo, hi)
                    }
                    int => int.as_i64().clamp(lo, hi),
                };
                Scalar::from_i64(self.dst, v)
            }
        }
    }
}

fn dequantize_f32(v: i64, q: Quantization) -> f32 {
    (v - q.zero_point as i64) as f32 * q.scale
}

/// `x` is already divided by the scale (and exactly representable in f64).
fn quantize(x: f64, zero_point: i32, lo: i64, hi: i64) -> i64 {
    if x.is_nan() {
        return (zero_point as i64).clamp(lo, hi);
    }
    let r = x.round_ties_even() + zero_point as f64;
    // Saturating: `as` clamps to i64, then to the type's range.
    (r as i64).clamp(lo, hi)
}

/// One element of any [`DType`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scalar {
    F32(f32),
    F16(f16),
    BF16(bf16),
    F64(f64),
    I8(i8),
    U8(u8),
    I32(i32),
}

impl Scalar {
    /// Reads one little-endian element of `dtype` from the start of `bytes`.
    /// Contract: `bytes.len() >= dtype.size_bytes()` (panics otherwise: an internal bug).
    pub fn read(dtype: DType, bytes: &[u8]) -> Scalar {
        let b2 = || [bytes[0], bytes[1]];
        let b4 = || [bytes[0], bytes[1], bytes[2], bytes[3]];
        match dtype {
            DType::F32 => Scalar::F32(f32::from_le_bytes(b4())),
            DType::F16 => Scalar::F16(f16::from_le_bytes(b2())),
            DType::BF16 => Scalar::BF16(bf16::from_le_bytes(b2())),
            DType::F64 => {
                let mut b = [0u8; 8];
                b.copy_from_slice(&bytes[..8]);
                Scalar::F64(f64::from_le_bytes(b))
            }
            DType::I8 => Scalar::I8(bytes[0] as i8),
            DType::U8 => Scalar::U8(bytes[0]),
            DType::I32 => Scalar::I32(i32::from_le_bytes(b4())),
        }
    }

    /// Writes the element little-endian at the start of `out`.
    /// Contract: `out` holds at least the element's size.
    pub fn write(self, out: &mut [u8]) {
        match self {
            Scalar::F32(v) => out[..4].copy_from_slice(&v.to_le_bytes()),
            Scalar::F16(v) => out[..2].copy_from_slice(&v.to_le_bytes()),
            Scalar::BF16(v) => out[..2].copy_from_slice(&v.to_le_bytes()),
            Scalar::F64(v) => out[..8].copy_from_slice(&v.to_le_bytes()),
            Scalar::I8(v) => out[0] = v as u8,
            Scalar::U8(v) => out[0] = v,
            Scalar::I32(v) => out[..4].copy_from_slice(&v.to_le_bytes()),
        }
    }

    /// The element of `dtype` nearest to `value` (round half to even, saturating; NaN gives 0
    /// for integer types). Used for fill values.
    pub fn from_f64(dtype: DType, value: f64) -> Scalar {
        match dtype {
            DType::F32 => Scalar::F32(value as f32),
            DType::F64 => Scalar::F64(value),
            DType::F16 => Scalar::F16(f16::from_bits(f64_to_f16_bits(value))),
            DType::BF16 => Scalar::BF16(bf16::from_bits(f64_to_bf16_bits(value))),
            _ => {
                let (lo, hi) = dtype.int_range().unwrap_or((0, 0));
                let v = if value.is_nan() {
                    0
                } else {
                    (value.round_ties_even() as i64).clamp(lo, hi)
                };
                Scalar::from_i64(dtype, v)
            }
        }
    }

    fn from_i64(dtype: DType, v: i64) -> Scalar {
        // Callers clamp `v` to the type's range first.
        match dtype {
            DType::I8 => Scalar::I8(v as i8),
            DType::U8 => Scalar::U8(v as u8),
            _ => Scalar::I32(v as i32),
        }
    }

    fn as_i64(self) -> i64 {
        match self {
            Scalar::I8(v) => v as i64,
            Scalar::U8(v) => v as i64,
            Scalar::I32(v) => v as i64,
            Scalar::F32(v) => v as i64,
            Scalar::F16(v) => v.to_f32() as i64,
            Scalar::BF16(v) => v.to_f32() as i64,
            Scalar::F64(v) => v as i64,
        }
    }

    /// The value as f32 on the way to f16/bf16 (exact for f16/bf16 sources; integers are
    /// dequantised in f32).
    fn as_f32_for(self, q: Quantization) -> f32 {
        match self {
            Scalar::F32(v) => v,
            Scalar::F16(v) => v.to_f32(),
            Scalar::BF16(v) => v.to_f32(),
            Scalar::F64(v) => v as f32,
            int => dequantize_f32(int.as_i64(), q),
        }
    }
}

/// f64 -> IEEE binary16 bits, rounded once to nearest even (no double rounding through f32).
pub fn f64_to_f16_bits(v: f64) -> u16 {
    round_f64_to_small_float(v, 10, 5)
}

/// f64 -> bfloat16 bits, rounded once to nearest even.
pub fn f64_to_bf16_bits(v: f64) -> u16 {
    round_f64_to_small_float(v, 7, 8)
}

/// Rounds `v` to a binary float with `mant` fraction bits and `exp_bits` exponent bits
/// (sign + exp_bits + mant == 16), ties to even, overflow to infinity.
fn round_f64_to_small_float(v: f64, mant: u32, exp_bits: u32) -> u16 {
    let bits = v.to_bits();
    let sign = ((bits >> 63) as u16) << 15;
    let exp_all = ((1u16 << exp_bits) - 1) << mant;
    if v.is_nan() {
        let payload = ((bits >> (52 - mant)) as u16) & ((1 << mant) - 1);
        return sign | exp_all | (1 << (mant - 1)) | payload;
    }
    let a = v.abs();
    if a.is_infinite() {
        return sign | exp_all;
    }
    let bias = (1i32 << (exp_bits - 1)) - 1;
    let emin = 1 - bias;
    let emax = bias;
    let pow2 = |k: i32| f64::from_bits(((k + 1023) as u64) << 52);
    if a < pow2(emin) {
        // Subnormal (or zero) in the target: count units of 2^(emin - mant). The product is
        // exact (a power-of-two scaling that stays in f64's normal range or is zero).
        let m = (a * pow2(mant as i32 - emin)).round_ties_even() as u16;
        return sign | m; // m == 2^mant is the smallest normal, encoded the same way
    }
    let mut e = ((bits >> 52) & 0x7ff) as i32 - 1023;
    let mut m = (a * pow2(mant as i32 - e)).round_ties_even() as u32;
    if m == 1 << (mant + 1) {
        m >>= 1;
        e += 1;
    }
    if e > emax {
        return sign | exp_all;
    }
    sign | (((e + bias) as u16) << mant) | ((m - (1 << mant)) as u16)
}
