//! Contiguous run kernels: copy or cast `n` elements from `src` to `dst`, with exactly the
//! semantics of `layoutkit_core::CastSpec::apply` (the reference), but on whole slices so the
//! compiler (and `half`'s F16C code, detected at run time) can vectorise.

use half::slice::HalfFloatSliceExt;
use half::{bf16, f16};
use layoutkit_core::cast::Scalar;
use layoutkit_core::{CastSpec, DType};

/// Converts `n` contiguous elements. Contract: `src` holds `n` elements of `spec.src` and `dst`
/// room for `n` elements of `spec.dst`, both aligned to their element size or not (unaligned
/// access is handled), not overlapping.
pub(crate) type RunKernel = fn(src: &[u8], dst: &mut [u8], n: usize, spec: &CastSpec);

/// The run kernel for a cast.
pub(crate) fn run_kernel(spec: &CastSpec) -> RunKernel {
    use DType::*;
    match (spec.src, spec.dst) {
        (a, b) if a == b => copy_run,
        (F32, F16) => f32_to_f16,
        (F16, F32) => f16_to_f32,
        (F32, BF16) => f32_to_bf16,
        (BF16, F32) => bf16_to_f32,
        (F32, I8) => f32_to_i8,
        (F32, U8) => f32_to_u8,
        (I8, F32) => i8_to_f32,
        (U8, F32) => u8_to_f32,
        _ => scalar_run,
    }
}

fn copy_run(src: &[u8], dst: &mut [u8], n: usize, spec: &CastSpec) {
    let bytes = n * spec.src.size_bytes();
    dst[..bytes].copy_from_slice(&src[..bytes]);
}

/// The reference semantics, one element at a time (for casts without a fast kernel).
fn scalar_run(src: &[u8], dst: &mut [u8], n: usize, spec: &CastSpec) {
    let (ss, ds) = (spec.src.size_bytes(), spec.dst.size_bytes());
    for i in 0..n {
        spec.apply(Scalar::read(spec.src, &src[i * ss..]))
            .write(&mut dst[i * ds..]);
    }
}

/// Chunk size for the typed conversions (stack buffers, to keep alignment independent of the
/// byte slices).
const CHUNK: usize = 256;

fn read_f32s(src: &[u8], out: &mut [f32]) {
    for (o, c) in out.iter_mut().zip(src.chunks_exact(4)) {
        *o = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
    }
}

fn f32_to_f16(src: &[u8], dst: &mut [u8], n: usize, _: &CastSpec) {
    let mut a = [0f32; CHUNK];
    let mut h = [f16::ZERO; CHUNK];
    let mut i = 0;
    while i < n {
        let m = (n - i).min(CHUNK);
        read_f32s(&src[i * 4..(i + m) * 4], &mut a[..m]);
        h[..m].convert_from_f32_slice(&a[..m]);
        for (k, v) in h[..m].iter().enumerate() {
            dst[(i + k) * 2..(i + k) * 2 + 2].copy_from_slice(&v.to_le_bytes());
        }
        i += m;
    }
}

fn f16_to_f32(src: &[u8], dst: &mut [u8], n: usize, _: &CastSpec) {
    let mut h = [f16::ZERO; CHUNK];
    let mut a = [0f32; CHUNK];
    let mut i = 0;
    while i < n {
        let m = (n - i).min(CHUNK);
        for (k, v) in h[..m].iter_mut().enumerate() {
            let at = (i + k) * 2;
            *v = f16::from_le_bytes([src[at], src[at + 1]]);
        }
        h[..m].convert_to_f32_slice(&mut a[..m]);
        for (k, v) in a[..m].iter().enumerate() {
            dst[(i + k) * 4..(i + k) * 4 + 4].copy_from_slice(&v.to_le_bytes());
        }
        i += m;
    }
}

fn f32_to_bf16(src: &[u8], dst: &mut [u8], n: usize, _: &CastSpec) {
    for i in 0..n {
        let v = f32::from_le_bytes([src[i * 4], src[i * 4 + 1], src[i * 4 + 2], src[i * 4 + 3]]);
        dst[i * 2..i * 2 + 2].copy_from_slice(&bf16::from_f32(v).to_le_bytes());
    }
}

fn bf16_to_f32(src: &[u8], dst: &mut [u8], n: usize, _: &CastSpec) {
    for i in 0..n {
        let v = bf16::from_le_bytes([src[i * 2], src[i * 2 + 1]]).to_f32();
        dst[i * 4..i * 4 + 4].copy_from_slice(&v.to_le_bytes());
    }
}

/// `round_half_even(x / scale) + zero_point`, saturated to `[lo, hi]`, NaN -> zero point:
/// the reference's quantisation. Rounding uses the 1.5 * 2^23 trick, exact for |v| < 2^22
/// (larger values saturate anyway for 8-bit types), which vectorises without SSE4.1.
#[inline(always)]
fn quantize(x: f32, scale: f32, zp: i32, lo: i32, hi: i32) -> i32 {
    let v = x / scale;
    if v.is_nan() {
        return zp.clamp(lo, hi);
    }
    const MAGIC: f32 = 12_582_912.0; // 1.5 * 2^23
    let c = v.clamp(-4_194_304.0, 4_194_304.0); // 2^22
    let r = (c + MAGIC) - MAGIC;
    (r as i32 + zp).clamp(lo, hi)
}

fn f32_to_i8(src: &[u8], dst: &mut [u8], n: usize, spec: &CastSpec) {
    let (s, z) = (spec.quant.scale, spec.quant.zero_point);
    for i in 0..n {
        let x = f32::from_le_bytes([src[i * 4], src[i * 4 + 1], src[i * 4 + 2], src[i * 4 + 3]]);
        dst[i] = quantize(x, s, z, -128, 127) as i8 as u8;
    }
}

fn f32_to_u8(src: &[u8], dst: &mut [u8], n: usize, spec: &CastSpec) {
    let (s, z) = (spec.quant.scale, spec.quant.zero_point);
    for i in 0..n {
        let x = f32::from_le_bytes([src[i * 4], src[i * 4 + 1], src[i * 4 + 2], src[i * 4 + 3]]);
        dst[i] = quantize(x, s, z, 0, 255) as u8;
    }
}

fn i8_to_f32(src: &[u8], dst: &mut [u8], n: usize, spec: &CastSpec) {
    let (s, z) = (spec.quant.scale, spec.quant.zero_point);
    for i in 0..n {
        let v = ((src[i] as i8) as i32 - z) as f32 * s;
        dst[i * 4..i * 4 + 4].copy_from_slice(&v.to_le_bytes());
    }
}

fn u8_to_f32(src: &[u8], dst: &mut [u8], n: usize, spec: &CastSpec) {
    let (s, z) = (spec.quant.scale, spec.quant.zero_point);
    for i in 0..n {
        let v = (src[i] as i32 - z) as f32 * s;
        dst[i * 4..i * 4 + 4].copy_from_slice(&v.to_le_bytes());
    }
}
