//! The int8 tile: `PT` output pixels by `OT` output channels of exact i32 sums over
//! `taps * c4` groups of four input channels. Filter blocks are `[OT o][4 c]` i8 (64 bytes,
//! the operand order of `vpdpbusd`); the input row is NHWC-like i8 with each group's channels
//! padded with zeros to a multiple of four.
//!
//! Builds: AVX-512 VNNI (`vpdpbusd` on ymm registers, EVEX form, with the input shifted to u8 by +128 and the filter's
//! `128 * sum(w)` subtracted at the end: every product and partial sum is exact in i32),
//! AVX2 (`vpmaddwd` on sign-extended i16 values, exact; never the saturating `vpmaddubsw`),
//! portable.

/// Output channels per tile.
pub(crate) const OT: usize = 16;
/// Output pixels per tile (the tail tile may use fewer); 6 by 2 ymm accumulators fit the VNNI
/// tile's registers.
pub(crate) const PT: usize = 6;

/// One tile's operands. `x[p]` points at pixel `p`'s first input byte for tap 0 (taps are
/// reached through `tap_off`); `w` at the tile's filter blocks, `taps * c4` of them.
pub(crate) struct Tile<'a> {
    pub(crate) x: [usize; PT],
    pub(crate) pixels: usize,
    pub(crate) input: &'a [i8],
    pub(crate) tap_off: &'a [usize],
    pub(crate) c4: usize,
    pub(crate) w: &'a [i8],
    /// `128 * sum over the tile's filter of w`, per output channel (VNNI build only).
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    pub(crate) comp: &'a [i32; OT],
}

/// Exact sums, portable: `acc[p][o] = sum x * w` in i32.
#[inline(always)]
pub(crate) fn tile_generic(t: &Tile<'_>, acc: &mut [[i32; OT]; PT]) {
    *acc = [[0; OT]; PT];
    for (ti, &off) in t.tap_off.iter().enumerate() {
        for k in 0..t.c4 {
            let wb = &t.w[(ti * t.c4 + k) * OT * 4..][..OT * 4];
            for (p, a) in acc.iter_mut().enumerate().take(t.pixels) {
                let xb = &t.input[t.x[p] + off + 4 * k..][..4];
                for o in 0..OT {
                    let mut s = 0i32;
                    for c in 0..4 {
                        s += xb[c] as i32 * wb[o * 4 + c] as i32;
                    }
                    a[o] += s;
                }
            }
        }
    }
}

/// The AVX2 tile: `vpmaddwd` on sign-extended i16 values (products of at most 2^14, pairs
/// of at most 2^15: exact in i32, unlike the saturating `vpmaddubsw`). Each 16-byte quarter of
/// a `[16 o][4 c]` block widens to `[4 o][4 c]` i16; multiplied by the pixel's four inputs
/// (broadcast as i16) it gives per o two partial sums (c0 + c1, c2 + c3), added at the end.
/// Pixels go two at a time (8 accumulators, 4 filter vectors, 2 broadcasts of 16 registers).
///
/// # Safety
/// The CPU has AVX2; `t`'s offsets are in range of its slices (the driver builds them so).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn tile_avx2(t: &Tile<'_>, acc: &mut [[i32; OT]; PT]) {
    use std::arch::x86_64::*;
    // Closures here compile without this function's target features and are called, not
    // inlined: the broadcast and the weight loads are written out in the loop body.
    #[inline(always)]
    fn four(input: &[i8], xi: usize) -> i64 {
        let b: [i8; 4] = input[xi..xi + 4].try_into().expect("four bytes");
        let q = b.map(|v| v as i16 as u16 as u64);
        (q[0] | q[1] << 16 | q[2] << 32 | q[3] << 48) as i64
    }
    let mut p0 = 0;
    while p0 < t.pixels {
        let two = t.pixels - p0 >= 2;
        let mut v = [[_mm256_setzero_si256(); 4]; 2];
        for (ti, &off) in t.tap_off.iter().enumerate() {
            for k in 0..t.c4 {
                let wi = (ti * t.c4 + k) * OT * 4;
                debug_assert!(wi + OT * 4 <= t.w.len());
                // SAFETY: the block [wi, wi + 64) is inside t.w; unaligned 16-byte loads.
                let mut wq = [_mm256_setzero_si256(); 4];
                for (q, v) in wq.iter_mut().enumerate() {
                    *v = _mm256_cvtepi8_epi16(_mm_loadu_si128(
                        t.w.as_ptr().add(wi + 16 * q) as *const __m128i
                    ));
                }
                let x0 = _mm256_set1_epi64x(four(t.input, t.x[p0] + off + 4 * k));
                for q in 0..4 {
                    v[0][q] = _mm256_add_epi32(v[0][q], _mm256_madd_epi16(x0, wq[q]));
                }
                if two {
                    let x1 = _mm256_set1_epi64x(four(t.input, t.x[p0 + 1] + off + 4 * k));
                    for q in 0..4 {
                        v[1][q] = _mm256_add_epi32(v[1][q], _mm256_madd_epi16(x1, wq[q]));
                    }
                }
            }
        }
        for (j, vj) in v.iter().enumerate().take(if two { 2 } else { 1 }) {
            let mut lanes = [0i32; 32];
            for (q, vq) in vj.iter().enumerate() {
                // SAFETY: 8 i32 values inside `lanes`.
                _mm256_storeu_si256(lanes.as_mut_ptr().add(8 * q) as *mut __m256i, *vq);
            }
            for o in 0..OT {
                acc[p0 + j][o] = lanes[2 * o] + lanes[2 * o + 1];
            }
        }
        p0 += if two { 2 } else { 1 };
    }
}

/// `acc += dot4(u8 x, s8 w)` per i32 lane: `vpdpbusd` in its EVEX form on ymm registers
/// (AVX-512 VNNI with AVX-512VL). Written as inline assembly because the workspace's minimum
/// compiler has neither the intrinsic nor the target feature; the `{evex}` prefix keeps the
/// assembler from choosing the AVX-VNNI (VEX) form, which this build does not check for.
///
/// # Safety
/// The CPU has AVX-512 VNNI and AVX-512VL.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn dpbusd(
    acc: std::arch::x86_64::__m256i,
    x: std::arch::x86_64::__m256i,
    w: std::arch::x86_64::__m256i,
) -> std::arch::x86_64::__m256i {
    let mut a = acc;
    // SAFETY: register-only instruction; the caller guarantees the CPU has it.
    std::arch::asm!(
        "{{evex}} vpdpbusd {a}, {x}, {w}",
        a = inout(ymm_reg) a,
        x = in(ymm_reg) x,
        w = in(ymm_reg) w,
        options(pure, nomem, nostack, preserves_flags)
    );
    a
}

/// The VNNI tile: 16 output channels as two ymm vectors of 8, `PT` pixels (12 accumulators,
/// two filter vectors and one broadcast: 15 of the 16 ymm registers the assembly may use).
///
/// # Safety
/// The CPU has AVX2, AVX-512 VNNI and AVX-512VL; `t`'s offsets are in range of its slices
/// (the driver builds them so).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn tile_vnni(t: &Tile<'_>, acc: &mut [[i32; OT]; PT]) {
    use std::arch::x86_64::*;
    let mut v = [[_mm256_setzero_si256(); 2]; PT];
    let flip = 0x8080_8080u32 as i32;
    for (ti, &off) in t.tap_off.iter().enumerate() {
        for k in 0..t.c4 {
            let wi = (ti * t.c4 + k) * OT * 4;
            debug_assert!(wi + OT * 4 <= t.w.len());
            // SAFETY: the block [wi, wi + 64) is inside t.w (packing allocates taps * c4
            // blocks per tile); unaligned loads.
            let w0 = _mm256_loadu_si256(t.w.as_ptr().add(wi) as *const __m256i);
            let w1 = _mm256_loadu_si256(t.w.as_ptr().add(wi + 32) as *const __m256i);
            for (p, vp) in v.iter_mut().enumerate().take(t.pixels) {
                let xi = t.x[p] + off + 4 * k;
                debug_assert!(xi + 4 <= t.input.len());
                // SAFETY: the four bytes are inside the padded input (driver).
                let q = (t.input.as_ptr().add(xi) as *const i32).read_unaligned() ^ flip;
                let b = _mm256_set1_epi32(q);
                vp[0] = dpbusd(vp[0], b, w0);
                vp[1] = dpbusd(vp[1], b, w1);
            }
        }
    }
    for (p, vp) in v.iter().enumerate().take(t.pixels) {
        for (h, vh) in vp.iter().enumerate() {
            // SAFETY: 8 i32 values inside acc[p] and t.comp.
            let c = _mm256_loadu_si256(t.comp.as_ptr().add(8 * h) as *const __m256i);
            _mm256_storeu_si256(
                acc[p].as_mut_ptr().add(8 * h) as *mut __m256i,
                _mm256_sub_epi32(*vh, c),
            );
        }
    }
}
