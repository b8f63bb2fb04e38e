//! Splitting padded records into rows with AVX-512 permutes: the first `c <= 4` elements of
//! each record (records of 8 elements of 2 or 4 bytes: kHWC8's pixels of f16 or f32) into
//! `c` destination rows. Per step, eight vectors of records (32 f16 or 16 f32 records) become
//! one vector of 64 bytes per row: each pair of vectors by one two-source permute
//! (`vpermt2w` / `vpermt2d`) into four 16-byte lanes, one per row, then a 4 x 4 transposition
//! of lanes. `interleave::deinterleave_strided` moved these one element at a time
//! (f16 kHWC8 -> NCHW with 3-4 channels: 40-47% of the copy on a Zen 5).

use std::arch::x86_64::*;

/// Records per step for elements of `e` bytes (records of 8 elements).
fn per_step(e: usize) -> usize {
    512 / (8 * e)
}

/// Whether [`split_records`] takes records of `src_px` bytes split into `c` rows of
/// elements of `e` bytes.
pub(super) fn applies(src_px: usize, c: usize, e: usize) -> bool {
    (1..=4).contains(&c) && matches!(e, 2 | 4) && src_px == 8 * e
}

/// `dst[k * dst_row + p * e ..][..e] = src[p * src_px + k * e ..][..e]` for `k < c` and the
/// records `p` of whole steps; returns how many records it did (a multiple of the step, at
/// most `n`; the caller does the rest).
///
/// # Safety
/// [`applies`] holds; `n` records of `src_px` bytes are readable from `src`, and the `c`
/// destination rows of `n` elements are writable and nobody else accesses them; the CPU
/// has AVX-512 F and BW.
#[target_feature(enable = "avx512f,avx512bw")]
pub(super) unsafe fn split_records(
    src: *const u8,
    src_px: usize,
    dst: *mut u8,
    dst_row: usize,
    n: usize,
    c: usize,
    e: usize,
) -> usize {
    let step = per_step(e);
    // Per pair of vectors (2 x 64 bytes, `q_max` records), lane k gathers element k of each
    // record (rows k >= c take element 0 and are not stored).
    let q_max = 128 / src_px;
    let per_record = src_px / e;
    let mut idx = [0u16; 32];
    let lane_elems = 16 / e;
    for k in 0..4 {
        for q in 0..q_max {
            idx[k * lane_elems + q] = if k < c {
                (q * per_record + k) as u16
            } else {
                0
            };
        }
    }
    // As dwords for the 4-byte permute (its indices are the first 16 entries).
    let idx_w = _mm512_loadu_si512(idx.as_ptr() as *const __m512i);
    let idx_d = _mm512_cvtepu16_epi32(_mm256_loadu_si256(idx.as_ptr() as *const __m256i));
    let mut p0 = 0;
    while p0 + step <= n {
        // SAFETY: the step's `step * src_px` = 512 bytes are inside the source (`p0 + step <=
        // n`).
        let base = unsafe { src.add(p0 * src_px) };
        let mut r = [_mm512_setzero_si512(); 4];
        for (i, out) in r.iter_mut().enumerate() {
            // SAFETY: as above; unaligned loads.
            let (a, b) = unsafe {
                (
                    _mm512_loadu_si512(base.add(128 * i) as *const __m512i),
                    _mm512_loadu_si512(base.add(128 * i + 64) as *const __m512i),
                )
            };
            *out = if e == 2 {
                _mm512_permutex2var_epi16(a, idx_w, b)
            } else {
                _mm512_permutex2var_epi32(a, idx_d, b)
            };
        }
        // Lane k of r[i] holds row k's elements of pair i: row k's vector is lane k of each.
        let t0 = _mm512_shuffle_i64x2::<0x44>(r[0], r[1]);
        let t1 = _mm512_shuffle_i64x2::<0x44>(r[2], r[3]);
        let t2 = _mm512_shuffle_i64x2::<0xEE>(r[0], r[1]);
        let t3 = _mm512_shuffle_i64x2::<0xEE>(r[2], r[3]);
        let rows = [
            _mm512_shuffle_i64x2::<0x88>(t0, t1),
            _mm512_shuffle_i64x2::<0xDD>(t0, t1),
            _mm512_shuffle_i64x2::<0x88>(t2, t3),
            _mm512_shuffle_i64x2::<0xDD>(t2, t3),
        ];
        for (k, v) in rows.iter().enumerate().take(c) {
            // SAFETY: row k's elements p0 .. p0 + step (64 bytes) are inside it.
            unsafe {
                _mm512_storeu_si512(dst.add(k * dst_row + p0 * e) as *mut __m512i, *v);
            }
        }
        p0 += step;
    }
    p0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_split_as_the_element_loop_does() {
        if !crate::fast::transpose::avx512_builds() {
            return;
        }
        for e in [2usize, 4] {
            let src_px = 8 * e;
            for c in 1..=4 {
                for n in [0usize, 1, 15, 16, 31, 32, 33, 64, 100] {
                    // An odd source offset, rows with a gap after them.
                    let src: Vec<u8> = (0..n * src_px + 3).map(|i| (i * 7 + 1) as u8).collect();
                    let dst_row = n * e + 5;
                    let mut got = vec![0xEEu8; c * dst_row];
                    let mut want = got.clone();
                    // SAFETY: the buffers hold what the contract asks for; AVX-512 checked.
                    let done = unsafe {
                        split_records(
                            src[3..].as_ptr(),
                            src_px,
                            got.as_mut_ptr(),
                            dst_row,
                            n,
                            c,
                            e,
                        )
                    };
                    assert_eq!(done, n / per_step(e) * per_step(e));
                    for k in 0..c {
                        for p in 0..done {
                            let s = 3 + p * src_px + k * e;
                            let d = k * dst_row + p * e;
                            want[d..d + e].copy_from_slice(&src[s..s + e]);
                        }
                    }
                    assert_eq!(got, want, "e {e} c {c} n {n}");
                }
            }
        }
    }
}
