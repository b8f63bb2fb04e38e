//! f32 -> 8-bit quantisation of contiguous runs in AVX-512: 16 values per vector, the test for
//! a value near a rounding tie in a mask register (`vreduceps` gives the distance to the
//! nearest integer in one instruction), saturation straight to bytes (`vpmovsdb` /
//! `vpmovusdb`). About 13 instructions per 16 values where the AVX2 quantiser
//! ([`super::cast_tiles`]) takes about 28; the same arithmetic and the same exactness argument
//! ([`super::casts::quantize_reciprocal`]), the division where a value is near a tie.

use std::arch::x86_64::*;

use super::casts::{quantize_reciprocal, quantize_tiny};

/// Whether [`quantize_run`] may run: the AVX-512 kernels are allowed (see
/// `transpose::avx512`: not with `LAYOUTKIT_CPU_KERNELS=avx2`) and the CPU has AVX-512DQ.
pub(super) fn available() -> bool {
    use std::sync::OnceLock;
    static HAS: OnceLock<bool> = OnceLock::new();
    super::transpose::avx512() && *HAS.get_or_init(|| is_x86_feature_detected!("avx512dq"))
}

/// Quantises the contiguous run `src` into `dst` (`round_half_even(x / scale) + zero_point`
/// saturated to i8 when `signed`, else u8; NaN -> the zero point), 16 values at a time, as far
/// as both have whole groups of 16; returns how many it did (the caller quantises the rest).
///
/// # Safety
/// The CPU has AVX-512F and AVX-512DQ ([`available`]).
#[target_feature(enable = "avx512f,avx512dq")]
pub(super) unsafe fn quantize_run(
    src: &[f32],
    dst: &mut [u8],
    scale: f32,
    zero_point: i32,
    signed: bool,
) -> usize {
    const PF: usize = 1024; // floats ahead: 4 KiB, as the AVX2 run kernel
    const NEAREST: i32 = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
    let (lo, hi) = if signed { (-128, 127) } else { (0, 255) };
    let (recip, edge) = quantize_reciprocal(scale, zero_point, lo, hi);
    let v_scale = _mm512_set1_ps(scale);
    let v_recip = _mm512_set1_ps(recip);
    let v_edge = _mm512_set1_ps(edge);
    let v_tiny = _mm512_set1_ps(quantize_tiny(scale));
    let zp_f = _mm512_set1_ps(zero_point as f32);
    let zp_i = _mm512_set1_epi32(zero_point);
    let n = src.len().min(dst.len()) / 16 * 16;
    for (s, d) in src[..n].chunks_exact(16).zip(dst[..n].chunks_exact_mut(16)) {
        // SAFETY: `s` holds 16 floats and `d` 16 bytes (chunks_exact); unaligned accesses;
        // prefetches do not fault.
        unsafe {
            let p = s.as_ptr();
            _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(PF) as *const i8);
            let x = _mm512_loadu_ps(p);
            // Magnitudes at least `tiny` (NaN is not): the others quantise to the zero point,
            // and stay out of the multiply-add (a subnormal operand costs a microcode assist).
            let big = _mm512_cmp_ps_mask::<_CMP_GE_OQ>(_mm512_abs_ps(x), v_tiny);
            let y = _mm512_mask3_fmadd_ps(x, v_recip, zp_f, big);
            let off = _mm512_abs_ps(_mm512_reduce_ps::<NEAREST>(y));
            let near = _mm512_cmp_ps_mask::<_CMP_NLE_UQ>(off, v_edge);
            let q = if near == 0 {
                // Over 2^30 would not convert (negative values that do not convert give
                // i32::MIN, which saturates as it must); rounds half to even under the default
                // MXCSR, which Rust code never changes.
                _mm512_cvtps_epi32(_mm512_min_ps(y, _mm512_set1_ps(1_073_741_824.0)))
            } else {
                let v = _mm512_div_ps(_mm512_maskz_mov_ps(big, x), v_scale);
                let limit = _mm512_set1_ps(4_194_304.0); // 2^22
                let c = _mm512_min_ps(_mm512_max_ps(v, _mm512_set1_ps(-4_194_304.0)), limit);
                _mm512_add_epi32(_mm512_cvtps_epi32(c), zp_i)
            };
            let bytes = if signed {
                _mm512_cvtsepi32_epi8(q)
            } else {
                _mm512_cvtusepi32_epi8(_mm512_max_epi32(q, _mm512_setzero_si512()))
            };
            _mm_storeu_si128(d.as_mut_ptr() as *mut __m128i, bytes);
        }
    }
    n
}
