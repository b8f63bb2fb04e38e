//! Tile transposition: `dst[a * d_row + b] = src[b * s_row + a]` for a tile of `na x nb`
//! elements, dispatched on element size; an AVX2 8x8 kernel for 4-byte elements when the CPU
//! has it (detected at run time), a portable loop otherwise.

/// Transposes one tile; `stream` allows streaming (cache-bypassing) stores, for a final
/// destination but never for a scratch buffer that is read back at once. Contract: every `src[b * s_row + a]` and `dst[a * d_row + b]` for
/// `a < na`, `b < nb` is inside its slice (element offsets; `N` bytes per element).
pub(crate) fn transpose_tile<const N: usize>(
    src: &[u8],
    s_row: usize,
    dst: &mut [u8],
    d_row: usize,
    na: usize,
    nb: usize,
    stream: bool,
) {
    #[cfg(target_arch = "x86_64")]
    if N == 4 && avx2() && STREAM_STORES && stream {
        // Whole destination cache lines written at once, bypassing the cache: rows 64-byte
        // aligned and 16 floats (one line) at a time.
        let (na8, nb16) = (na / 8 * 8, nb / 16 * 16);
        if na8 > 0 && nb16 > 0 && (dst.as_ptr() as usize) % 64 == 0 && d_row % 16 == 0 {
            // SAFETY: AVX2 is present; the blocks lie inside the tile, which the caller
            // guarantees lies inside both slices (asserted in the kernel); the destination
            // addresses are 64-byte aligned (checked) as the streaming stores need.
            unsafe { avx2_tile_f32_stream(src, s_row, dst, d_row, na8, nb16) };
            scalar_tile::<N>(src, s_row, dst, d_row, 0, na8, nb16, nb);
            scalar_tile::<N>(src, s_row, dst, d_row, na8, na, 0, nb);
            return;
        }
    }
    #[cfg(target_arch = "x86_64")]
    if N == 4 && avx2() {
        let (na8, nb8) = (na / 8 * 8, nb / 8 * 8);
        if na8 > 0 && nb8 > 0 {
            // SAFETY: AVX2 is present (checked above); the 8x8 blocks lie inside the tile,
            // which the caller guarantees lies inside both slices (asserted in the kernel).
            unsafe { avx2_tile_f32(src, s_row, dst, d_row, na8, nb8) };
            // The remaining strips, portably.
            scalar_tile::<N>(src, s_row, dst, d_row, 0, na8, nb8, nb);
            scalar_tile::<N>(src, s_row, dst, d_row, na8, na, 0, nb);
            return;
        }
    }
    #[cfg(target_arch = "x86_64")]
    if N == 2 {
        let (na8, nb8) = (na / 8 * 8, nb / 8 * 8);
        if na8 > 0 && nb8 > 0 {
            // SAFETY: SSE2 is part of x86-64; the 8x8 blocks lie inside the tile, which the
            // caller guarantees lies inside both slices (asserted in the kernel).
            unsafe { sse2_tile_u16(src, s_row, dst, d_row, na8, nb8) };
            scalar_tile::<N>(src, s_row, dst, d_row, 0, na8, nb8, nb);
            scalar_tile::<N>(src, s_row, dst, d_row, na8, na, 0, nb);
            return;
        }
    }
    scalar_tile::<N>(src, s_row, dst, d_row, 0, na, 0, nb);
}

/// 8x8 blocks of 2-byte elements over `a < na8`, `b < nb8` (multiples of 8), with SSE2.
#[cfg(target_arch = "x86_64")]
unsafe fn sse2_tile_u16(
    src: &[u8],
    s_row: usize,
    dst: &mut [u8],
    d_row: usize,
    na8: usize,
    nb8: usize,
) {
    use std::arch::x86_64::*;
    let last_read = ((nb8 - 1) * s_row + na8) * 2;
    let last_write = ((na8 - 1) * d_row + nb8) * 2;
    assert!(last_read <= src.len() && last_write <= dst.len());
    let sp = src.as_ptr() as *const u16;
    let dp = dst.as_mut_ptr() as *mut u16;
    for b in (0..nb8).step_by(8) {
        for a in (0..na8).step_by(8) {
            // SAFETY: rows b..b+8 of src, columns a..a+8, and rows a..a+8 of dst, columns
            // b..b+8, are inside the slices (asserted above); loads and stores are unaligned.
            unsafe {
                let r = |k: usize| _mm_loadu_si128(sp.add((b + k) * s_row + a) as *const __m128i);
                let (a0, a1, a2, a3, a4, a5, a6, a7) =
                    (r(0), r(1), r(2), r(3), r(4), r(5), r(6), r(7));
                let b0 = _mm_unpacklo_epi16(a0, a1);
                let b1 = _mm_unpackhi_epi16(a0, a1);
                let b2 = _mm_unpacklo_epi16(a2, a3);
                let b3 = _mm_unpackhi_epi16(a2, a3);
                let b4 = _mm_unpacklo_epi16(a4, a5);
                let b5 = _mm_unpackhi_epi16(a4, a5);
                let b6 = _mm_unpacklo_epi16(a6, a7);
                let b7 = _mm_unpackhi_epi16(a6, a7);
                let c0 = _mm_unpacklo_epi32(b0, b2);
                let c1 = _mm_unpackhi_epi32(b0, b2);
                let c2 = _mm_unpacklo_epi32(b1, b3);
                let c3 = _mm_unpackhi_epi32(b1, b3);
                let c4 = _mm_unpacklo_epi32(b4, b6);
                let c5 = _mm_unpackhi_epi32(b4, b6);
                let c6 = _mm_unpacklo_epi32(b5, b7);
                let c7 = _mm_unpackhi_epi32(b5, b7);
                let w = |k: usize, v: __m128i| {
                    _mm_storeu_si128(dp.add((a + k) * d_row + b) as *mut __m128i, v)
                };
                w(0, _mm_unpacklo_epi64(c0, c4));
                w(1, _mm_unpackhi_epi64(c0, c4));
                w(2, _mm_unpacklo_epi64(c1, c5));
                w(3, _mm_unpackhi_epi64(c1, c5));
                w(4, _mm_unpacklo_epi64(c2, c6));
                w(5, _mm_unpackhi_epi64(c2, c6));
                w(6, _mm_unpacklo_epi64(c3, c7));
                w(7, _mm_unpackhi_epi64(c3, c7));
            }
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn scalar_tile<const N: usize>(
    src: &[u8],
    s_row: usize,
    dst: &mut [u8],
    d_row: usize,
    a0: usize,
    a1: usize,
    b0: usize,
    b1: usize,
) {
    for a in a0..a1 {
        let drow = a * d_row;
        for b in b0..b1 {
            let s = (b * s_row + a) * N;
            let d = (drow + b) * N;
            dst[d..d + N].copy_from_slice(&src[s..s + N]);
        }
    }
}

/// Whether tiles may use non-temporal stores (whole aligned lines only).
#[cfg(target_arch = "x86_64")]
const STREAM_STORES: bool = true;

/// Orders this thread's streaming stores before whatever follows (the engine calls it at the
/// end of every work item, before the item counts as done).
pub(crate) fn store_fence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SSE is part of x86-64.
    unsafe {
        std::arch::x86_64::_mm_sfence()
    };
}

#[cfg(target_arch = "x86_64")]
fn avx2() -> bool {
    use std::sync::OnceLock;
    static HAS: OnceLock<bool> = OnceLock::new();
    *HAS.get_or_init(|| std::arch::is_x86_feature_detected!("avx2"))
}

/// The 8x8 transpose of rows `r[0..8]` (columns of the input become rows of the output).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
fn transpose8(r: [std::arch::x86_64::__m256; 8]) -> [std::arch::x86_64::__m256; 8] {
    use std::arch::x86_64::*;
    let t0 = _mm256_unpacklo_ps(r[0], r[1]);
    let t1 = _mm256_unpackhi_ps(r[0], r[1]);
    let t2 = _mm256_unpacklo_ps(r[2], r[3]);
    let t3 = _mm256_unpackhi_ps(r[2], r[3]);
    let t4 = _mm256_unpacklo_ps(r[4], r[5]);
    let t5 = _mm256_unpackhi_ps(r[4], r[5]);
    let t6 = _mm256_unpacklo_ps(r[6], r[7]);
    let t7 = _mm256_unpackhi_ps(r[6], r[7]);
    let u0 = _mm256_shuffle_ps::<0x44>(t0, t2);
    let u1 = _mm256_shuffle_ps::<0xEE>(t0, t2);
    let u2 = _mm256_shuffle_ps::<0x44>(t1, t3);
    let u3 = _mm256_shuffle_ps::<0xEE>(t1, t3);
    let u4 = _mm256_shuffle_ps::<0x44>(t4, t6);
    let u5 = _mm256_shuffle_ps::<0xEE>(t4, t6);
    let u6 = _mm256_shuffle_ps::<0x44>(t5, t7);
    let u7 = _mm256_shuffle_ps::<0xEE>(t5, t7);
    [
        _mm256_permute2f128_ps::<0x20>(u0, u4),
        _mm256_permute2f128_ps::<0x20>(u1, u5),
        _mm256_permute2f128_ps::<0x20>(u2, u6),
        _mm256_permute2f128_ps::<0x20>(u3, u7),
        _mm256_permute2f128_ps::<0x31>(u0, u4),
        _mm256_permute2f128_ps::<0x31>(u1, u5),
        _mm256_permute2f128_ps::<0x31>(u2, u6),
        _mm256_permute2f128_ps::<0x31>(u3, u7),
    ]
}

/// Like [`avx2_tile_f32`] over `a < na8`, `b < nb16` (multiples of 8 and 16), writing each
/// destination row's 16 floats (one 64-byte line) with two streaming stores in a row.
/// Contract: `dst` starts 64-byte aligned and `d_row` is a multiple of 16.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn avx2_tile_f32_stream(
    src: &[u8],
    s_row: usize,
    dst: &mut [u8],
    d_row: usize,
    na8: usize,
    nb16: usize,
) {
    use std::arch::x86_64::*;
    let last_read = ((nb16 - 1) * s_row + na8) * 4;
    let last_write = ((na8 - 1) * d_row + nb16) * 4;
    assert!(last_read <= src.len() && last_write <= dst.len());
    assert!((dst.as_ptr() as usize) % 64 == 0 && d_row % 16 == 0);
    let sp = src.as_ptr() as *const f32;
    let dp = dst.as_mut_ptr() as *mut f32;
    for a in (0..na8).step_by(8) {
        for b in (0..nb16).step_by(16) {
            // SAFETY: source rows b..b+16, columns a..a+8, and destination rows a..a+8,
            // columns b..b+16, are inside the slices (asserted above); the destination
            // addresses are 32-byte aligned (64-byte aligned rows, b a multiple of 16).
            unsafe {
                let lo = transpose8(std::array::from_fn(|k| {
                    _mm256_loadu_ps(sp.add((b + k) * s_row + a))
                }));
                let hi = transpose8(std::array::from_fn(|k| {
                    _mm256_loadu_ps(sp.add((b + 8 + k) * s_row + a))
                }));
                for k in 0..8 {
                    let p = dp.add((a + k) * d_row + b);
                    _mm256_stream_ps(p, lo[k]);
                    _mm256_stream_ps(p.add(8), hi[k]);
                }
            }
        }
    }
}

/// 8x8 blocks of 4-byte elements over `a < na8`, `b < nb8` (multiples of 8).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn avx2_tile_f32(
    src: &[u8],
    s_row: usize,
    dst: &mut [u8],
    d_row: usize,
    na8: usize,
    nb8: usize,
) {
    use std::arch::x86_64::*;
    // Bounds: the last element read is ((nb8-1) * s_row + na8 - 1), written ((na8-1) * d_row +
    // nb8 - 1); both inside the slices by the caller's contract.
    let last_read = ((nb8 - 1) * s_row + na8) * 4;
    let last_write = ((na8 - 1) * d_row + nb8) * 4;
    assert!(last_read <= src.len() && last_write <= dst.len());
    let sp = src.as_ptr() as *const f32;
    let dp = dst.as_mut_ptr() as *mut f32;
    // Streaming stores need 16-byte aligned addresses: every row start and 4-float step.

    for b in (0..nb8).step_by(8) {
        for a in (0..na8).step_by(8) {
            // SAFETY: rows b..b+8 of src, columns a..a+8, and rows a..a+8 of dst, columns
            // b..b+8, are inside the slices (asserted above); loads and stores are unaligned.
            unsafe {
                let r = |k: usize| _mm256_loadu_ps(sp.add((b + k) * s_row + a));
                let (r0, r1, r2, r3, r4, r5, r6, r7) =
                    (r(0), r(1), r(2), r(3), r(4), r(5), r(6), r(7));
                let t0 = _mm256_unpacklo_ps(r0, r1);
                let t1 = _mm256_unpackhi_ps(r0, r1);
                let t2 = _mm256_unpacklo_ps(r2, r3);
                let t3 = _mm256_unpackhi_ps(r2, r3);
                let t4 = _mm256_unpacklo_ps(r4, r5);
                let t5 = _mm256_unpackhi_ps(r4, r5);
                let t6 = _mm256_unpacklo_ps(r6, r7);
                let t7 = _mm256_unpackhi_ps(r6, r7);
                let u0 = _mm256_shuffle_ps::<0x44>(t0, t2);
                let u1 = _mm256_shuffle_ps::<0xEE>(t0, t2);
                let u2 = _mm256_shuffle_ps::<0x44>(t1, t3);
                let u3 = _mm256_shuffle_ps::<0xEE>(t1, t3);
                let u4 = _mm256_shuffle_ps::<0x44>(t4, t6);
                let u5 = _mm256_shuffle_ps::<0xEE>(t4, t6);
                let u6 = _mm256_shuffle_ps::<0x44>(t5, t7);
                let u7 = _mm256_shuffle_ps::<0xEE>(t5, t7);
                let w = |k: usize, v: __m256| _mm256_storeu_ps(dp.add((a + k) * d_row + b), v);
                w(0, _mm256_permute2f128_ps::<0x20>(u0, u4));
                w(1, _mm256_permute2f128_ps::<0x20>(u1, u5));
                w(2, _mm256_permute2f128_ps::<0x20>(u2, u6));
                w(3, _mm256_permute2f128_ps::<0x20>(u3, u7));
                w(4, _mm256_permute2f128_ps::<0x31>(u0, u4));
                w(5, _mm256_permute2f128_ps::<0x31>(u1, u5));
                w(6, _mm256_permute2f128_ps::<0x31>(u2, u6));
                w(7, _mm256_permute2f128_ps::<0x31>(u3, u7));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The dispatching kernel (AVX2 where present) equals the portable loop on every tile shape.
    /// The streaming kernel on a 64-byte aligned destination.
    #[test]
    fn streaming_kernel_equals_the_portable_loop() {
        for (na, nb, s_row, d_row) in [(8, 16, 16, 16), (33, 40, 50, 48), (16, 64, 70, 64)] {
            let src: Vec<u8> = (0..(nb * s_row + na) * 4)
                .map(|i| (i * 13 % 251) as u8)
                .collect();
            let mut want = vec![0u8; (na * d_row + nb) * 4];
            scalar_tile::<4>(&src, s_row, &mut want, d_row, 0, na, 0, nb);
            let mut got = super::super::AlignedBuf::zeroed(want.len());
            transpose_tile::<4>(&src, s_row, &mut got, d_row, na, nb, true);
            store_fence();
            assert_eq!(&got[..], &want[..], "{na}x{nb}");
        }
    }

    #[test]
    fn kernels_equal_the_portable_loop() {
        for (na, nb, s_row, d_row) in [
            (8, 8, 8, 8),
            (9, 16, 162, 256),
            (17, 23, 40, 30),
            (1, 8, 8, 1),
            (32, 32, 33, 35),
        ] {
            let src: Vec<u8> = (0..(nb * s_row + na) * 4)
                .map(|i| (i * 7 % 251) as u8)
                .collect();
            let mut want = vec![0u8; (na * d_row + nb) * 4];
            let mut got = want.clone();
            scalar_tile::<4>(&src, s_row, &mut want, d_row, 0, na, 0, nb);
            transpose_tile::<4>(&src, s_row, &mut got, d_row, na, nb, true);
            assert_eq!(got, want, "{na}x{nb} s_row {s_row} d_row {d_row}");
        }
    }
}
