//! Contiguous run kernels: copy or cast `n` elements from `src` to `dst`, with exactly the
//! semantics of `layoutkit_core::CastSpec::apply` (the reference), but on whole slices so the
//! compiler (and `half`'s F16C code, detected at run time) can vectorise.

use half::f16;
use half::slice::HalfFloatSliceExt;
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

/// Destination bytes of one piece of [`stream_cast_run`]: whole lines, in L1 with its source.
const STREAM_PIECE_BYTES: usize = 4096;

/// Casts the run of `n` elements `src` into `dst` past the cache with `run`: pieces of
/// [`STREAM_PIECE_BYTES`] cast into `buf` (in L1; a line longer, or the pieces are shorter
/// and may end inside lines; at least one element) and streamed out, the
/// first ending on a line of the destination where its elements allow, so every whole line
/// is written once with streaming stores. A cast written in place with ordinary stores reads
/// each destination line before writing it: contiguous f32 -> f16 runs of 8-32 MiB ran at
/// 0.67-0.75 of PyTorch's speed on a Zen 4 (`bench/results/sweep.md`).
///
/// Contract: `dst` holds exactly what `run(src, dst, n, spec)` writes.
pub(crate) fn stream_cast_run(
    (src, dst): (&[u8], &mut [u8]),
    n: usize,
    spec: &CastSpec,
    run: RunKernel,
    buf: &mut [u8],
) {
    let (ss, ds) = (spec.src.size_bytes(), spec.dst.size_bytes());
    let (piece, most) = (
        (STREAM_PIECE_BYTES.min(buf.len()) / ds).max(1),
        buf.len() / ds,
    );
    let head = (dst.as_ptr() as usize).wrapping_neg() % 64;
    let mut len = if head.is_multiple_of(ds) {
        head / ds + piece
    } else {
        piece
    };
    let mut i = 0;
    while i < n {
        len = len.min(n - i).min(most);
        let out = &mut buf[..len * ds];
        run(&src[i * ss..(i + len) * ss], out, len, spec);
        super::transpose::stream_copy(&mut dst[i * ds..(i + len) * ds], out);
        i += len;
        len = piece;
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

/// Views bytes as a slice of `T` when they are aligned for it (any bit pattern is a valid
/// `T` for the plain number types used here).
fn view<T: Copy>(b: &[u8]) -> Option<&[T]> {
    let size = std::mem::size_of::<T>();
    if !(b.as_ptr() as usize).is_multiple_of(std::mem::align_of::<T>())
        || !b.len().is_multiple_of(size)
    {
        return None;
    }
    // SAFETY: the pointer is aligned for T (checked), the length is a whole number of T, the
    // bytes stay borrowed for the returned lifetime, and every bit pattern is a valid f32,
    // f16, bf16 or integer.
    Some(unsafe { std::slice::from_raw_parts(b.as_ptr() as *const T, b.len() / size) })
}

/// Mutable [`view`].
fn view_mut<T: Copy>(b: &mut [u8]) -> Option<&mut [T]> {
    let size = std::mem::size_of::<T>();
    if !(b.as_ptr() as usize).is_multiple_of(std::mem::align_of::<T>())
        || !b.len().is_multiple_of(size)
    {
        return None;
    }
    // SAFETY: as in `view`, and the bytes are borrowed mutably and exclusively.
    Some(unsafe { std::slice::from_raw_parts_mut(b.as_mut_ptr() as *mut T, b.len() / size) })
}

/// f32 -> f16: sixteen at a time in AVX-512 where it runs ([`super::half_runs`]), the rest
/// (or all of it) through `half` (F16C where the CPU has it).
fn f32_to_f16(src: &[u8], dst: &mut [u8], n: usize, spec: &CastSpec) {
    match (
        view::<f32>(&src[..n * 4]),
        view_mut::<f16>(&mut dst[..n * 2]),
    ) {
        (Some(s), Some(d)) => {
            // The runs of sixteen in AVX-512 where they run (x86-64 only).
            #[cfg(target_arch = "x86_64")]
            let done = if super::half_runs::enabled() {
                // SAFETY: AVX-512 F present (checked); d and s have n elements.
                unsafe { super::half_runs::f32_to_f16(s, d.reinterpret_cast_mut()) }
            } else {
                0
            };
            #[cfg(not(target_arch = "x86_64"))]
            let done = 0;
            d[done..].convert_from_f32_slice(&s[done..]);
        }
        _ => scalar_run(src, dst, n, spec),
    }
}

/// f16 -> f32, as [`f32_to_f16`].
fn f16_to_f32(src: &[u8], dst: &mut [u8], n: usize, spec: &CastSpec) {
    match (
        view::<f16>(&src[..n * 2]),
        view_mut::<f32>(&mut dst[..n * 4]),
    ) {
        (Some(s), Some(d)) => {
            // The runs of sixteen in AVX-512 where they run (x86-64 only).
            #[cfg(target_arch = "x86_64")]
            let done = if super::half_runs::enabled() {
                // SAFETY: AVX-512 F present (checked); d and s have n elements.
                unsafe { super::half_runs::f16_to_f32(s.reinterpret_cast(), d) }
            } else {
                0
            };
            #[cfg(not(target_arch = "x86_64"))]
            let done = 0;
            s[done..].convert_to_f32_slice(&mut d[done..]);
        }
        _ => scalar_run(src, dst, n, spec),
    }
}

fn f32_to_bf16(src: &[u8], dst: &mut [u8], n: usize, spec: &CastSpec) {
    match (
        view::<f32>(&src[..n * 4]),
        view_mut::<u16>(&mut dst[..n * 2]),
    ) {
        (Some(s), Some(d)) => {
            for (o, &x) in d.iter_mut().zip(s) {
                *o = bf16_bits(x);
            }
        }
        _ => scalar_run(src, dst, n, spec),
    }
}

/// f32 -> bf16 bits, round to nearest even, NaN kept quiet with its top payload (what
/// `half::bf16::from_f32` gives, written branch-free so it vectorises).
#[inline(always)]
fn bf16_bits(x: f32) -> u16 {
    let b = x.to_bits();
    let nan = (b & 0x7fff_ffff) > 0x7f80_0000;
    let rounded = b.wrapping_add(0x7fff + ((b >> 16) & 1)) >> 16;
    if nan {
        ((b >> 16) | 0x0040) as u16
    } else {
        rounded as u16
    }
}

fn bf16_to_f32(src: &[u8], dst: &mut [u8], n: usize, spec: &CastSpec) {
    match (
        view::<u16>(&src[..n * 2]),
        view_mut::<f32>(&mut dst[..n * 4]),
    ) {
        (Some(s), Some(d)) => {
            for (o, &x) in d.iter_mut().zip(s) {
                // NaN: keep the payload, set the quiet bit (as half::bf16::to_f32).
                let q = if x & 0x7fff > 0x7f80 { 0x0040 } else { 0 };
                *o = f32::from_bits(((x | q) as u32) << 16);
            }
        }
        _ => scalar_run(src, dst, n, spec),
    }
}

/// Magnitudes below which `x / scale` is under one half (so `x` quantises to the zero point)
/// and which are replaced by zero before dividing: subnormal operands and results make the
/// division slow. `2^-126 * max(1, scale)` when `scale >= 2^-125`, else 0 (nothing replaced).
pub(crate) fn quantize_tiny(scale: f32) -> f32 {
    if scale >= f32::MIN_POSITIVE * 2.0 {
        f32::MIN_POSITIVE * scale.max(1.0)
    } else {
        0.0
    }
}

/// `(recip, edge)` for quantising by a fused multiply-add where that is exact: for `x` whose
/// `y = x * recip + zp` (one rounding) lies at most `edge` from the nearest integer,
/// `round_half_even(y)` (`y` clamped to at most 2^30), saturated to `[lo, hi]`, equals the
/// reference's `round_half_even(x / scale) + zp` saturated; other `x` must be divided. `edge`
/// is negative (every `x` divided) where the argument below does not hold.
///
/// Why: let `v = x / scale`, `f` its rounding (what the reference rounds), `u = 2^-24`,
/// `R = max(hi - zp, zp - lo) + 1` (so `|zp| < R` for the 8-bit types) and
/// `edge = 1/2 - R * 2^-20`. With `recip = 1 / scale` rounded and normal (`scale` in
/// `[2^-125, 2^125]`), `x * recip = v(1 + e)`, `|e| <= u`. Where `|f| <= 2R`: `|y| <= 3R`, so
/// `|y - (f + zp)| <= ulp(3R) / 2 + 2u|v| <= 7uR < R * 2^-20` (the product is not rounded
/// on its own); a `y` farther than that from every half-integer has none between it and
/// `f + zp`, so both round to the same integer and neither is a tie. Where `|f| > 2R`, `y`
/// and `f + zp` lie beyond `hi + 1/2` (or below `lo - 1/2`) together and saturate alike.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(crate) fn quantize_reciprocal(scale: f32, zp: i32, lo: i32, hi: i32) -> (f32, f32) {
    let reach = (hi as i64 - zp as i64).max(zp as i64 - lo as i64) + 1;
    let slack = reach as f32 * (1.0 / 1_048_576.0); // 2^-20
    let normal = (2f32.powi(-125)..=2f32.powi(125)).contains(&scale);
    if normal && reach >= 2 && (zp.unsigned_abs() as i64) < reach && slack < 0.25 {
        (1.0 / scale, 0.5 - slack)
    } else {
        (1.0, -1.0)
    }
}

/// `round_half_even(x / scale) + zero_point`, saturated to `[lo, hi]`, NaN -> zero point:
/// the reference's quantisation (`tiny` from [`quantize_tiny`]). Rounding uses the
/// 1.5 * 2^23 trick, exact for |v| < 2^22 (larger values saturate anyway for 8-bit types),
/// which vectorises without SSE4.1.
#[inline(always)]
fn quantize(x: f32, scale: f32, tiny: f32, zp: i32, lo: i32, hi: i32) -> i32 {
    const MAGIC: f32 = 12_582_912.0; // 1.5 * 2^23
    let x = if x.abs() < tiny { 0.0 } else { x };
    let v = x / scale;
    let nan = v.is_nan();
    let c = if nan {
        0.0
    } else {
        v.clamp(-4_194_304.0, 4_194_304.0)
    }; // 2^22
    let r = (c + MAGIC) - MAGIC;
    // SAFETY: `r` is an integer-valued float with |r| <= 2^22 and not NaN, so it fits in i32.
    let i = unsafe { r.to_int_unchecked::<i32>() };
    let q = (i + zp).clamp(lo, hi);
    // Selects rather than an early return keep the loop vectorisable.
    if nan {
        zp.clamp(lo, hi)
    } else {
        q
    }
}

/// The quantisation loop: 32 values at a time in AVX2 and FMA where the CPU has them
/// ([`quantize_vectors`]), the scalar loop for the rest.
fn quantize_slice(src: &[f32], dst: &mut [u8], scale: f32, zp: i32, lo: i32, hi: i32) {
    let done = quantize_vectors(src, dst, scale, zp, lo, hi);
    let tiny = quantize_tiny(scale);
    for (o, &x) in dst[done..].iter_mut().zip(&src[done..]) {
        *o = quantize(x, scale, tiny, zp, lo, hi) as u8;
    }
}

/// The leading whole groups of 32 values of [`quantize_slice`] by
/// [`crate::fast::quantise_avx2`]'s quantiser (groups of 64 first by the AVX-512 one where
/// the CPU has it), where the CPU has AVX2 and FMA (detected once) and the range is i8's or
/// u8's (the vector packs saturate to exactly those); returns how many values it did (0
/// elsewhere).
#[cfg(target_arch = "x86_64")]
fn quantize_vectors(src: &[f32], dst: &mut [u8], scale: f32, zp: i32, lo: i32, hi: i32) -> usize {
    use crate::fast::quantise_avx2::{quantize_run, Quant};
    static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let has = *HAS.get_or_init(|| {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
    });
    let signed = match (lo, hi) {
        (-128, 127) => true,
        (0, 255) => false,
        _ => return 0,
    };
    if !has || src.len().min(dst.len()) < 32 {
        return 0;
    }
    let mut done = 0;
    if super::transpose::avx512_quantise() {
        // SAFETY: AVX-512 F, BW and DQ are present (checked).
        done = unsafe {
            let q = super::quantise_avx512::Quant16::new(scale, zp, signed);
            super::quantise_avx512::quantise_run(src, dst, &q)
        };
    }
    // SAFETY: AVX2 and FMA are present (checked).
    done + unsafe {
        quantize_run(
            &src[done..],
            &mut dst[done..],
            &Quant::new(scale, zp, lo, hi),
            signed,
        )
    }
}

/// No vector quantiser off x86-64 yet: [`quantize_slice`]'s scalar loop does every value.
#[cfg(not(target_arch = "x86_64"))]
fn quantize_vectors(_: &[f32], _: &mut [u8], _: f32, _: i32, _: i32, _: i32) -> usize {
    0
}

fn f32_to_i8(src: &[u8], dst: &mut [u8], n: usize, spec: &CastSpec) {
    let (sc, z) = (spec.quant.scale, spec.quant.zero_point);
    match view::<f32>(&src[..n * 4]) {
        // `as u8` of an i32 in [-128, 127] is its two's-complement byte: the i8.
        Some(s) => quantize_slice(s, &mut dst[..n], sc, z, -128, 127),
        None => scalar_run(src, dst, n, spec),
    }
}

fn f32_to_u8(src: &[u8], dst: &mut [u8], n: usize, spec: &CastSpec) {
    let (sc, z) = (spec.quant.scale, spec.quant.zero_point);
    match view::<f32>(&src[..n * 4]) {
        Some(s) => quantize_slice(s, &mut dst[..n], sc, z, 0, 255),
        None => scalar_run(src, dst, n, spec),
    }
}

fn i8_to_f32(src: &[u8], dst: &mut [u8], n: usize, spec: &CastSpec) {
    let (sc, z) = (spec.quant.scale, spec.quant.zero_point);
    match view_mut::<f32>(&mut dst[..n * 4]) {
        Some(d) => {
            for (o, &q) in d.iter_mut().zip(&src[..n]) {
                *o = ((q as i8) as i32 - z) as f32 * sc;
            }
        }
        None => scalar_run(src, dst, n, spec),
    }
}

fn u8_to_f32(src: &[u8], dst: &mut [u8], n: usize, spec: &CastSpec) {
    let (sc, z) = (spec.quant.scale, spec.quant.zero_point);
    match view_mut::<f32>(&mut dst[..n * 4]) {
        Some(d) => {
            for (o, &q) in d.iter_mut().zip(&src[..n]) {
                *o = (q as i32 - z) as f32 * sc;
            }
        }
        None => scalar_run(src, dst, n, spec),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use layoutkit_core::Quantization;

    /// A run cast in pieces and streamed out writes what the run kernel writes in place, for
    /// every cast, run lengths around the pieces' sizes and destinations at every offset in a
    /// line (including offsets that are not whole elements, and buffers shorter than a piece).
    #[test]
    fn streamed_cast_runs_equal_the_run_kernels() {
        let casts = [
            CastSpec::new(DType::F32, DType::F16, None).unwrap(),
            CastSpec::new(DType::F16, DType::F32, None).unwrap(),
            CastSpec::new(DType::F32, DType::BF16, None).unwrap(),
            CastSpec::new(
                DType::F32,
                DType::I8,
                Some(Quantization {
                    scale: 0.05,
                    zero_point: 2,
                }),
            )
            .unwrap(),
            CastSpec::new(DType::F64, DType::F32, None).unwrap(),
        ];
        let mut next = crate::fast::xorshift(99);
        for spec in &casts {
            let (ss, ds) = (spec.src.size_bytes(), spec.dst.size_bytes());
            let run = run_kernel(spec);
            for n in [1, 7, 511, 1024, 2049, 5000] {
                let src: Vec<u8> = (0..n * ss)
                    .map(|i| {
                        // Finite values of every element type (the top bits of the top byte
                        // kept small), random otherwise.
                        let b = next() as u8;
                        if i % ss == ss - 1 {
                            b & 0x3f
                        } else {
                            b
                        }
                    })
                    .collect();
                let mut want = vec![0u8; n * ds];
                run(&src, &mut want, n, spec);
                for offset in [0, 1, 2, 8, 36, 63] {
                    for buf_len in [STREAM_PIECE_BYTES, 200] {
                        let mut out = crate::AlignedBuf::zeroed(n * ds + 64);
                        let mut buf = vec![0u8; buf_len];
                        let d = &mut out[offset..offset + n * ds];
                        stream_cast_run((&src, d), n, spec, run, &mut buf);
                        assert!(
                            d == &want[..],
                            "{spec:?} n {n} offset {offset} buffer {buf_len}"
                        );
                    }
                }
            }
        }
    }

    /// Every run kernel from f32 equals the reference on values at the edges: subnormals
    /// (replaced by zero before the quantising division where that cannot change the
    /// result), ties after scaling, NaN, infinities, saturation, for scales either side of
    /// 2^-125.
    #[test]
    fn run_kernels_equal_the_reference_on_edge_values() {
        for scale in [0.01f32, 1.0, 3.0, 1e-38, 3e-38, 2.350_988_7e-38, 1e30] {
            let src: Vec<f32> = (0..4096)
                .map(|i| match i % 5 {
                    0 => f32::from_bits((i as u32).wrapping_mul(2_654_435_761) % 0x0080_0000), // subnormal
                    1 => ((i as f32 / 5.0) - 400.0 + 0.5) * scale,
                    2 => [f32::NAN, f32::INFINITY, -0.0, 65520.0, -1e30][i / 5 % 5],
                    3 => -f32::from_bits(0x0080_0000 + i as u32),
                    _ => (i as f32 * 0.37).sin() * 300.0 * scale,
                })
                .collect();
            let bytes: Vec<u8> = src.iter().flat_map(|v| v.to_le_bytes()).collect();
            for dst in [DType::I8, DType::U8, DType::F16, DType::BF16] {
                let quant = Some(Quantization {
                    scale,
                    zero_point: if dst == DType::U8 { 128 } else { -3 },
                });
                let spec =
                    CastSpec::new(DType::F32, dst, quant.filter(|_| !dst.is_float())).unwrap();
                let ds = dst.size_bytes();
                let mut got = vec![0u8; src.len() * ds];
                run_kernel(&spec)(&bytes, &mut got, src.len(), &spec);
                for (i, &x) in src.iter().enumerate() {
                    let mut want = [0u8; 2];
                    spec.apply(Scalar::F32(x)).write(&mut want);
                    assert_eq!(&got[i * ds..(i + 1) * ds], &want[..ds], "{spec:?}: {x:e}");
                }
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4000))]
        /// [`quantize_reciprocal`]'s contract: wherever `x * recip + zp` (fused) lies within
        /// `edge` of an integer, rounding it half to even and saturating gives the reference's
        /// result; for scales across the whole range
        /// (subnormal to huge), values next to the rounding ties and arbitrary bit patterns.
        #[test]
        fn the_reciprocal_quantises_as_the_division_within_its_edge(
            scale_bits in 0x0000_0001u32..0x7f80_0000,
            signed in proptest::bool::ANY,
            zp_pick in 0u32..256,
            k in -300i32..300,
            nudge in -8i32..=8,
            raw in proptest::num::u32::ANY,
            near_tie in proptest::bool::ANY,
        ) {
            let scale = f32::from_bits(scale_bits);
            let (lo, hi, dst) = if signed { (-128, 127, DType::I8) } else { (0, 255, DType::U8) };
            let zero_point = lo + zp_pick as i32;
            let x = if near_tie {
                let tie = (k as f32 + 0.5) * scale;
                f32::from_bits((tie.to_bits() as i64 + nudge as i64) as u32)
            } else {
                f32::from_bits(raw)
            };
            let (recip, edge) = quantize_reciprocal(scale, zero_point, lo, hi);
            let y = x.mul_add(recip, zero_point as f32);
            if (y - y.round_ties_even()).abs() <= edge {
                // The kernel: clamped above to 2^30, rounded, converted (saturating here, as
                // the conversion's out-of-range result saturates in the packs), saturated.
                let q = (y.min(1_073_741_824.0).round_ties_even() as i32).clamp(lo, hi);
                let spec = CastSpec::new(DType::F32, dst, Some(Quantization { scale, zero_point }))
                    .unwrap();
                let mut want = [0u8; 1];
                spec.apply(Scalar::F32(x)).write(&mut want);
                proptest::prop_assert_eq!(q as u8, want[0], "x {:e} scale {:e} zp {}", x, scale, zero_point);
            }
        }

        /// The quantising run kernels (32 values at a time in AVX2 where the CPU has it, the
        /// scalar loop for the rest) equal the reference element by element: runs of any
        /// length from any float offset, values next to rounding ties, subnormals, NaN and
        /// arbitrary bit patterns mixed, scales across the range, both 8-bit types.
        #[test]
        fn quantising_runs_equal_the_reference(
            values in proptest::collection::vec(
                (0u8..4, proptest::num::u32::ANY, -300i32..300, -8i32..=8),
                0..200,
            ),
            skip in 0usize..8,
            scale_bits in 0x0000_0001u32..0x7f80_0000,
            signed in proptest::bool::ANY,
            zp_pick in 0u32..256,
        ) {
            let scale = f32::from_bits(scale_bits);
            let (lo, dst) = if signed { (-128, DType::I8) } else { (0, DType::U8) };
            let zero_point = lo + zp_pick as i32;
            let src: Vec<f32> = values
                .iter()
                .map(|&(kind, raw, k, nudge)| match kind {
                    0 => f32::from_bits(raw),
                    1 => f32::from_bits(raw % 0x0080_0000), // subnormal or zero
                    _ => {
                        let tie = (k as f32 + 0.5) * scale;
                        f32::from_bits((tie.to_bits() as i64 + nudge as i64) as u32)
                    }
                })
                .collect();
            let skip = skip.min(src.len());
            let bytes: Vec<u8> = src.iter().flat_map(|v| v.to_le_bytes()).collect();
            let quant = Some(Quantization { scale, zero_point });
            let spec = CastSpec::new(DType::F32, dst, quant).unwrap();
            let n = src.len() - skip;
            let mut got = vec![0u8; n];
            run_kernel(&spec)(&bytes[skip * 4..], &mut got, n, &spec);
            // The vector kernel on its own as well: the elements it did.
            let x = &src[skip..];
            #[allow(unused_mut)] // nothing is pushed off x86-64
            let mut direct: Vec<(&str, Vec<u8>, usize)> = Vec::new();
            #[cfg(target_arch = "x86_64")]
            {
                if std::arch::is_x86_feature_detected!("avx2")
                    && std::arch::is_x86_feature_detected!("fma")
                {
                    use crate::fast::quantise_avx2::{quantize_run, Quant};
                    let mut d = vec![0u8; n];
                    let hi = if signed { 127 } else { 255 };
                    // SAFETY: AVX2 and FMA are present (checked).
                    let done = unsafe {
                        quantize_run(x, &mut d, &Quant::new(scale, zero_point, lo, hi), signed)
                    };
                    direct.push(("avx2", d, done));
                }
                if crate::fast::transpose::avx512_quantise() {
                    use crate::fast::quantise_avx512::{quantise_run, Quant16};
                    let mut d = vec![0u8; n];
                    // SAFETY: AVX-512 F, BW and DQ are present (checked).
                    let done = unsafe {
                        quantise_run(x, &mut d, &Quant16::new(scale, zero_point, signed))
                    };
                    direct.push(("avx512", d, done));
                }
            }
            for (i, &v) in x.iter().enumerate() {
                let mut want = [0u8; 1];
                spec.apply(Scalar::F32(v)).write(&mut want);
                proptest::prop_assert_eq!(
                    got[i], want[0], "x {:e} scale {:e} zp {}", v, scale, zero_point
                );
                for (name, d, done) in &direct {
                    if i < *done {
                        proptest::prop_assert_eq!(
                            d[i], want[0], "{} x {:e} scale {:e} zp {}", name, v, scale, zero_point
                        );
                    }
                }
            }
        }
    }
}
