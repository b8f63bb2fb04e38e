//! f32 rows cast to f16 and interleaved into pixels in one pass, AVX-512: the few-rows tiles
//! of a narrowing cast into a pixel-major layout (an RGB or RGBA image, f32 `NCHW -> NHWC`
//! into f16) otherwise cast each row into the scratch tile and interleave the f16 rows from
//! there, two passes in cache for one; on a Zen 4 (one thread, in L2) that ran at 40-45 GB/s
//! where the f16 interleave alone ran at 80-94.
//!
//! Per block of pixels each row's values are converted by `vcvtps2ph` (round to nearest
//! even, as the run kernels and `half` convert: the same bytes) and the rows' halves put in
//! place by word permutations (`vpermt2w`, and `vpermw` under a mask for the third row of
//! three). What is left after the last whole block is the caller's.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

#[cfg(target_arch = "x86_64")]
/// The word indices of one output vector of 32 f16 values of pixels of `rows` values, the
/// output vector being number `j` of a block: for each position the source word, numbered
/// as `vpermt2w` numbers its two sources' 64 words, where the first holds rows 0 and 1 (16
/// or 32 pixels each, see the kernels) and the second rows 2 and 3.
const fn indices(rows: usize, j: usize) -> [i16; 32] {
    let mut out = [0i16; 32];
    let mut q = 0;
    while q < 32 {
        let i = 32 * j + q;
        let (p, k) = (i / rows, i % rows);
        out[q] = match rows {
            // Rows 0 and 1 of 16 pixels each in the first source.
            2 => (k * 16 + p) as i16,
            // Three rows of 32 pixels: row 0 the first source, row 1 the second (k = 2
            // is taken by the masked `vpermw` from row 2 at word p).
            3 => match k {
                0 => p as i16,
                1 => (32 + p) as i16,
                _ => p as i16,
            },
            // Rows 0, 1 in the first source's halves, rows 2, 3 in the second's.
            _ => (k * 16 + p) as i16,
        };
        q += 1;
    }
    out
}

#[cfg(target_arch = "x86_64")]
/// The mask of the positions of row 2 in output vector `j` of three-row pixels.
const fn third_row_mask(j: usize) -> u32 {
    let mut m = 0u32;
    let mut q = 0;
    while q < 32 {
        if (32 * j + q) % 3 == 2 {
            m |= 1 << q;
        }
        q += 1;
    }
    m
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn load(v: &[i16; 32]) -> __m512i {
    // SAFETY: 64 bytes of the array.
    unsafe { _mm512_loadu_si512(v.as_ptr().cast()) }
}

/// Sixteen f32 values from `p`, as sixteen f16 values.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn half16(p: *const u8) -> __m256i {
    // SAFETY: the caller's: 64 bytes readable at `p`.
    unsafe {
        _mm512_cvtps_ph::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(_mm512_loadu_ps(
            p.cast(),
        ))
    }
}

/// Two ymm halves as one zmm, `lo` first.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn join(lo: __m256i, hi: __m256i) -> __m512i {
    // SAFETY: register operations only (AVX-512 F: the caller's target features).
    unsafe { _mm512_inserti64x4::<1>(_mm512_castsi256_si512(lo), hi) }
}

/// Casts `rows` (2-4) rows of f32 values, `row` bytes apart from `src`, to f16 and writes
/// them interleaved from `dst` (pixel `p`'s values at `2 * (p * rows + k)` bytes), for the
/// longest whole number of blocks of pixels (16 for 2 and 4 rows, 32 for 3) up to `pixels`;
/// returns how many pixels it wrote. 0 where AVX-512 is not what runs (see
/// [`super::half_runs::enabled`]).
///
/// # Safety
/// `rows` rows of `pixels` f32 values readable from `src`, `row` bytes apart; `pixels *
/// rows` f16 values writable from `dst`, not overlapping them.
pub(super) unsafe fn f32_rows_to_f16_pixels(
    src: *const u8,
    row: usize,
    dst: *mut u8,
    pixels: usize,
    rows: usize,
) -> usize {
    #[cfg(target_arch = "x86_64")]
    {
        if super::half_runs::enabled() && (2..=4).contains(&rows) {
            // SAFETY: AVX-512 F/BW present (`enabled`); the caller's contract.
            return unsafe { avx512(src, row, dst, pixels, rows) };
        }
    }
    let _ = (src, row, dst, pixels, rows);
    0
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn avx512(src: *const u8, row: usize, dst: *mut u8, pixels: usize, rows: usize) -> usize {
    let r = |k: usize, p: usize| src.wrapping_add(k * row + p * 4);
    let out = |i: usize| dst.wrapping_add(i * 2) as *mut __m512i;
    // SAFETY (all blocks): pixels p..p + block of every row are inside the rows (p + block
    // <= pixels) and their `block * rows` f16 values inside the destination.
    unsafe {
        match rows {
            2 => {
                let idx = load(&const { indices(2, 0) });
                let mut p = 0;
                while p + 16 <= pixels {
                    let v = join(half16(r(0, p)), half16(r(1, p)));
                    _mm512_storeu_si512(out(p * 2), _mm512_permutexvar_epi16(idx, v));
                    p += 16;
                }
                p
            }
            3 => {
                let idx = [
                    load(&const { indices(3, 0) }),
                    load(&const { indices(3, 1) }),
                    load(&const { indices(3, 2) }),
                ];
                let masks = [third_row_mask(0), third_row_mask(1), third_row_mask(2)];
                let mut p = 0;
                while p + 32 <= pixels {
                    let row_of = |k: usize| join(half16(r(k, p)), half16(r(k, p + 16)));
                    let (a, b, c) = (row_of(0), row_of(1), row_of(2));
                    for j in 0..3 {
                        let two = _mm512_permutex2var_epi16(a, idx[j], b);
                        let v = _mm512_mask_permutexvar_epi16(two, masks[j], idx[j], c);
                        _mm512_storeu_si512(out(p * 3 + 32 * j), v);
                    }
                    p += 32;
                }
                p
            }
            _ => {
                let idx = [
                    load(&const { indices(4, 0) }),
                    load(&const { indices(4, 1) }),
                ];
                let mut p = 0;
                while p + 16 <= pixels {
                    let ab = join(half16(r(0, p)), half16(r(1, p)));
                    let cd = join(half16(r(2, p)), half16(r(3, p)));
                    for (j, idx) in idx.iter().enumerate() {
                        let v = _mm512_permutex2var_epi16(ab, *idx, cd);
                        _mm512_storeu_si512(out(p * 4 + 32 * j), v);
                    }
                    p += 16;
                }
                p
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
/// The word indices for splitting pixels of `rows` values: output vector `v` of a block
/// (rows 2 and 4: rows `2v` and `2v + 1`, 16 pixels each; rows 3: row `v`, 32 pixels), each
/// position's word of the interleaved stream, numbered as `vpermt2w` numbers its two
/// sources' 64 words (for 3 rows, positions past them take word `s - 64` of the third
/// vector under [`split_third_mask`]).
const fn split_indices(rows: usize, v: usize) -> [i16; 32] {
    let mut out = [0i16; 32];
    let mut q = 0;
    while q < 32 {
        let s = if rows == 3 {
            3 * q + v
        } else {
            rows * (q % 16) + 2 * v + q / 16
        };
        out[q] = (if s >= 64 { s - 64 } else { s }) as i16;
        q += 1;
    }
    out
}

#[cfg(target_arch = "x86_64")]
/// The positions of row `k` of three-row pixels that come from the third vector.
const fn split_third_mask(k: usize) -> u32 {
    let mut m = 0u32;
    let mut q = 0;
    while q < 32 {
        if 3 * q + k >= 64 {
            m |= 1 << q;
        }
        q += 1;
    }
    m
}

/// [`f32_rows_to_f16_pixels`]' inverse: pixels of `rows` (2-4) f32 values back to back from
/// `src` cast to f16 and split into `rows` rows, `row` bytes apart from `dst`, for the longest
/// whole number of blocks (16 pixels for 2 and 4 rows, 32 for 3) up to `pixels`; returns how
/// many pixels it wrote (0 where AVX-512 is not what runs).
///
/// # Safety
/// `pixels * rows` f32 values readable from `src`; `rows` rows of `pixels` f16 values
/// writable from `dst`, `row` bytes apart, not overlapping the source or each other.
pub(super) unsafe fn f32_pixels_to_f16_rows(
    src: *const u8,
    dst: *mut u8,
    row: usize,
    pixels: usize,
    rows: usize,
) -> usize {
    #[cfg(target_arch = "x86_64")]
    {
        if super::half_runs::enabled() && (2..=4).contains(&rows) {
            // SAFETY: AVX-512 F/BW present (`enabled`); the caller's contract.
            return unsafe { split_avx512(src, dst, row, pixels, rows) };
        }
    }
    let _ = (src, dst, row, pixels, rows);
    0
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn split_avx512(
    src: *const u8,
    dst: *mut u8,
    row: usize,
    pixels: usize,
    rows: usize,
) -> usize {
    // Sixteen f16 values of the stream from f32 value `i`.
    let h = |i: usize| src.wrapping_add(i * 4);
    let at = |k: usize, p: usize| dst.wrapping_add(k * row + p * 2);
    // SAFETY (all blocks): pixels p..p + block are inside the source (p + block <= pixels),
    // and their values' places inside the destination rows.
    unsafe {
        match rows {
            3 => {
                let idx = [
                    load(&const { split_indices(3, 0) }),
                    load(&const { split_indices(3, 1) }),
                    load(&const { split_indices(3, 2) }),
                ];
                let masks = [
                    split_third_mask(0),
                    split_third_mask(1),
                    split_third_mask(2),
                ];
                let mut p = 0;
                while p + 32 <= pixels {
                    let i = p * 3;
                    let v: [__m512i; 3] = std::array::from_fn(|j| {
                        join(half16(h(i + 32 * j)), half16(h(i + 32 * j + 16)))
                    });
                    for k in 0..3 {
                        let two = _mm512_permutex2var_epi16(v[0], idx[k], v[1]);
                        let out = _mm512_mask_permutexvar_epi16(two, masks[k], idx[k], v[2]);
                        _mm512_storeu_si512(at(k, p).cast(), out);
                    }
                    p += 32;
                }
                p
            }
            2 => {
                let idx = load(&const { split_indices(2, 0) });
                let mut p = 0;
                while p + 16 <= pixels {
                    let v = join(half16(h(p * 2)), half16(h(p * 2 + 16)));
                    let out = _mm512_permutexvar_epi16(idx, v);
                    _mm256_storeu_si256(at(0, p).cast(), _mm512_castsi512_si256(out));
                    _mm256_storeu_si256(at(1, p).cast(), _mm512_extracti64x4_epi64::<1>(out));
                    p += 16;
                }
                p
            }
            _ => {
                let idx = [
                    load(&const { split_indices(4, 0) }),
                    load(&const { split_indices(4, 1) }),
                ];
                let mut p = 0;
                while p + 16 <= pixels {
                    let i = p * 4;
                    let a = join(half16(h(i)), half16(h(i + 16)));
                    let b = join(half16(h(i + 32)), half16(h(i + 48)));
                    for (v, idx) in idx.iter().enumerate() {
                        let out = _mm512_permutex2var_epi16(a, *idx, b);
                        _mm256_storeu_si256(at(2 * v, p).cast(), _mm512_castsi512_si256(out));
                        _mm256_storeu_si256(
                            at(2 * v + 1, p).cast(),
                            _mm512_extracti64x4_epi64::<1>(out),
                        );
                    }
                    p += 16;
                }
                p
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::f16;

    /// The kernel's contract against the scalar cast and interleave: every row count, pixel
    /// counts around the blocks, sources and destinations off alignment, values that round
    /// both ways, NaN and infinities.
    #[test]
    fn cast_pixels_equal_the_scalar_cast_and_interleave() {
        let special = [
            f32::NAN,
            f32::INFINITY,
            -0.0,
            65520.0,
            1e-8,
            6.1e-5,
            1.0 + 1.0 / 2048.0,
        ];
        for rows in 2..=4 {
            for pixels in [0, 1, 15, 16, 17, 31, 32, 33, 64, 95, 100] {
                for (s_off, d_off) in [(0, 0), (4, 2), (12, 6)] {
                    let row = pixels * 4 + 8;
                    let mut src = vec![0u8; s_off + rows * row];
                    for (i, v) in src[s_off..].chunks_exact_mut(4).enumerate() {
                        let x = if i % 7 == 3 {
                            special[i % special.len()]
                        } else {
                            (i as f32 * 0.37 - 11.0) * 1.0001
                        };
                        v.copy_from_slice(&x.to_ne_bytes());
                    }
                    let mut dst = vec![0xAAu8; d_off + pixels * rows * 2 + 4];
                    // SAFETY: rows of `pixels` f32 values `row` bytes apart; the destination
                    // holds `pixels * rows` f16 values.
                    let done = unsafe {
                        f32_rows_to_f16_pixels(
                            src[s_off..].as_ptr(),
                            row,
                            dst[d_off..].as_mut_ptr(),
                            pixels,
                            rows,
                        )
                    };
                    assert!(done <= pixels);
                    for p in 0..done {
                        for k in 0..rows {
                            let at = s_off + k * row + p * 4;
                            let x = f32::from_ne_bytes(src[at..at + 4].try_into().unwrap());
                            let want = f16::from_f32(x).to_bits();
                            let o = d_off + (p * rows + k) * 2;
                            let got = u16::from_ne_bytes([dst[o], dst[o + 1]]);
                            assert_eq!(got, want, "rows {rows} pixels {pixels} p {p} k {k}");
                        }
                    }
                    // Nothing written past the pixels it reports.
                    assert!(dst[d_off + done * rows * 2..].iter().all(|&b| b == 0xAA));
                    assert!(dst[..d_off].iter().all(|&b| b == 0xAA));
                }
            }
        }
    }

    /// [`f32_pixels_to_f16_rows`]' contract against the scalar cast and split, as above; the
    /// destination rows apart with bytes between them that stay untouched.
    #[test]
    fn split_pixels_equal_the_scalar_cast_and_split() {
        let special = [
            f32::NAN,
            f32::NEG_INFINITY,
            -0.0,
            65520.0,
            1e-8,
            6.1e-5,
            1.0 + 1.0 / 2048.0,
        ];
        for rows in 2..=4 {
            for pixels in [0, 1, 15, 16, 17, 31, 32, 33, 64, 95, 100] {
                for (s_off, d_off) in [(0, 0), (4, 2), (12, 6)] {
                    let mut src = vec![0u8; s_off + pixels * rows * 4];
                    for (i, v) in src[s_off..].chunks_exact_mut(4).enumerate() {
                        let x = if i % 5 == 2 {
                            special[i % special.len()]
                        } else {
                            (i as f32 * -0.53 + 7.0) * 1.0003
                        };
                        v.copy_from_slice(&x.to_ne_bytes());
                    }
                    let row = pixels * 2 + 10;
                    let mut dst = vec![0xAAu8; d_off + rows * row];
                    // SAFETY: `pixels * rows` f32 values; rows of `pixels` f16 values `row`
                    // bytes apart.
                    let done = unsafe {
                        f32_pixels_to_f16_rows(
                            src[s_off..].as_ptr(),
                            dst[d_off..].as_mut_ptr(),
                            row,
                            pixels,
                            rows,
                        )
                    };
                    assert!(done <= pixels);
                    for k in 0..rows {
                        for p in 0..pixels {
                            let o = d_off + k * row + p * 2;
                            let got = u16::from_ne_bytes([dst[o], dst[o + 1]]);
                            if p < done {
                                let at = s_off + (p * rows + k) * 4;
                                let x = f32::from_ne_bytes(src[at..at + 4].try_into().unwrap());
                                let want = f16::from_f32(x).to_bits();
                                assert_eq!(got, want, "rows {rows} pixels {pixels} p {p} k {k}");
                            } else {
                                assert_eq!(got, 0xAAAA, "written past the pixels done");
                            }
                        }
                        let gap = d_off + k * row + pixels * 2;
                        assert!(dst[gap..gap + 10].iter().all(|&b| b == 0xAA));
                    }
                }
            }
        }
    }
}
