//! Contiguous `f32 <-> f16` runs in AVX-512 F: sixteen values per `vcvtps2ph` / `vcvtph2ps`,
//! inlined in the loop. `half`'s slice conversion, which the run kernels used alone before,
//! converts eight values per call of a function that is not inlined (its F16C path): on an AMD
//! EPYC Zen 5 the f32 -> f16 run of a one-channel `NCHW -> NHWC` (a plain cast) spent as many
//! samples in that function and its caller as the copy of the same bytes spent in `memmove`.
//! The instructions are those `half` runs on F16C CPUs (round to nearest even; NaN stays NaN,
//! quiet, with its top payload bits), so the bytes are the same; what is left of a run after
//! the last whole sixteen goes through `half`.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// Converts the longest whole multiple of sixteen values of `src` into `dst`; returns how
/// many it converted.
///
/// # Safety
/// The CPU has AVX-512 F; `dst` is at least as long as `src`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn f32_to_f16(src: &[f32], dst: &mut [u16]) -> usize {
    debug_assert!(dst.len() >= src.len());
    let n = src.len() / 16 * 16;
    for i in (0..n).step_by(16) {
        // SAFETY: i + 16 <= n <= src.len() <= dst.len(); unaligned loads and stores.
        unsafe {
            let v = _mm512_loadu_ps(src.as_ptr().add(i));
            let h = _mm512_cvtps_ph::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(v);
            _mm256_storeu_si256(dst.as_mut_ptr().add(i) as *mut __m256i, h);
        }
    }
    n
}

/// [`f32_to_f16`]'s inverse: `f16` bits to `f32` (exact), sixteen at a time; returns how
/// many it converted.
///
/// # Safety
/// The CPU has AVX-512 F; `dst` is at least as long as `src`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn f16_to_f32(src: &[u16], dst: &mut [f32]) -> usize {
    debug_assert!(dst.len() >= src.len());
    let n = src.len() / 16 * 16;
    for i in (0..n).step_by(16) {
        // SAFETY: as in `f32_to_f16`.
        unsafe {
            let h = _mm256_loadu_si256(src.as_ptr().add(i) as *const __m256i);
            _mm512_storeu_ps(dst.as_mut_ptr().add(i), _mm512_cvtph_ps(h));
        }
    }
    n
}

/// Whether the runs above are taken: where the AVX-512 quantising kernels run
/// (`LAYOUTKIT_CPU_KERNELS` not `avx2`, AVX-512 F, VL, BW and DQ present), so that both
/// kernel builds are tested by the same switch.
#[cfg(target_arch = "x86_64")]
pub(super) fn enabled() -> bool {
    super::transpose::avx512_quantise()
}

/// Never off x86-64.
#[cfg(not(target_arch = "x86_64"))]
pub(super) fn enabled() -> bool {
    false
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;
    use half::f16;

    /// Every f16 bit pattern (NaNs, infinities, subnormals included) to f32 equals `half`'s
    /// conversion bit for bit, and every f32 run of up to 100 values from any offset, from
    /// those values and from arbitrary bit patterns, back to f16 equals it too.
    #[test]
    fn sixteen_at_a_time_equals_half() {
        if !std::arch::is_x86_feature_detected!("avx512f") {
            return;
        }
        let all: Vec<u16> = (0..=u16::MAX).collect();
        let mut wide = vec![0f32; all.len()];
        // SAFETY: AVX-512 F present (checked), equal lengths.
        let done = unsafe { f16_to_f32(&all, &mut wide) };
        assert_eq!(done, all.len());
        for (&h, &w) in all.iter().zip(&wide) {
            let want = f16::from_bits(h).to_f32();
            assert_eq!(w.to_bits(), want.to_bits(), "{h:#06x}");
        }
        let mut next = crate::fast::xorshift(0x9e37_79b9_7f4a_7c15);
        let values: Vec<f32> = (0..4096)
            .map(|i| match i % 3 {
                0 => wide[(next() % 65536) as usize],
                1 => f32::from_bits(next() as u32),
                _ => wide[(next() % 65536) as usize] * (1.0 + (next() % 8) as f32 / 4096.0),
            })
            .collect();
        for len in 0..100 {
            let skip = (next() % 4000) as usize;
            let src = &values[skip..skip + len];
            let mut got = vec![0u16; len];
            // SAFETY: AVX-512 F present (checked), equal lengths.
            let done = unsafe { f32_to_f16(src, &mut got) };
            assert_eq!(done, len / 16 * 16);
            for (i, &x) in src[..done].iter().enumerate() {
                assert_eq!(
                    got[i],
                    f16::from_f32(x).to_bits(),
                    "{x:e} ({:#010x})",
                    x.to_bits()
                );
            }
        }
    }
}
