//! Records apart split into rows by AVX-512 gathers: 4-byte element `k` of each of `pixels`
//! records (`src_row` bytes apart) into row `k`, for a few rows (the first channels of
//! NCHW32c's padded f32 pixels back to planes). One gather per row per 16 records, the 16
//! elements stored whole.
//!
//! Why: the splitting tiles of records apart copied each record's few elements into a packed
//! scratch range one pixel at a time before casting it and splitting it into rows (f32 -> f16
//! `NCHW32c -> NCHW` with 4 channels, 32 MiB, on a Zen 5: 41% of the copy, four passes over
//! each tile); gathered, the rows come in one pass straight from the records, and the cast
//! runs on whole rows: 101-130% of the copy. Only for 4-byte elements: gathering dwords for
//! 1- and 2-byte elements and narrowing them ran identity `NCHW32c -> NCHW` of i8 and f16 with
//! 3-4 channels 0.66-0.90x the tile they replaced (measured alternately on the same machine).

use std::arch::x86_64::*;

/// Whether [`split_gathered`] takes `rows` rows of elements from records `src_row` bytes
/// apart: the rows' elements inside each record, 16 records' offsets within an `i32`.
pub(in crate::fast) fn applies(src_row: usize, rows: usize) -> bool {
    rows >= 1 && rows * 4 <= src_row && src_row <= 1 << 26
}

/// `dst[k * dst_row + p * 4..][..4] = src[p * src_row + k * 4..][..4]` for `k < rows` and the
/// records `p` of whole groups of 16; returns how many records it did (the caller does the
/// rest).
///
/// # Safety
/// [`applies`]`(src_row, rows)`; `pixels` records of `src_row` bytes (the last one at least
/// `rows * 4` bytes) are readable from `src`; the `rows` destination rows of `pixels`
/// elements from `dst` (`dst_row` bytes apart) are writable and nobody else accesses them;
/// the CPU has AVX-512F.
#[target_feature(enable = "avx512f")]
pub(in crate::fast) unsafe fn split_gathered(
    src: *const u8,
    src_row: usize,
    dst: *mut u8,
    dst_row: usize,
    pixels: usize,
    rows: usize,
) -> usize {
    debug_assert!(applies(src_row, rows));
    let lanes = _mm512_mullo_epi32(
        _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
        _mm512_set1_epi32(src_row as i32),
    );
    let groups = pixels / 16;
    for g in 0..groups {
        let p = 16 * g;
        // SAFETY: the group's records are readable (`p + 16 <= pixels`), the rows' elements
        // `p..p + 16` writable (the contract). A prefetch never faults.
        unsafe {
            let base = src.add(p * src_row);
            // The records two groups ahead: one line per record (the one its elements
            // start in), or every line of them where records are shorter than a line.
            let ahead = base.wrapping_add(32 * src_row);
            for at in (0..16 * src_row).step_by(src_row.max(64)) {
                _mm_prefetch::<_MM_HINT_T0>(ahead.wrapping_add(at).cast());
            }
            for k in 0..rows {
                let v = _mm512_i32gather_epi32::<1>(lanes, base.add(k * 4).cast());
                _mm512_storeu_si512(dst.add(k * dst_row + p * 4).cast(), v);
            }
        }
    }
    16 * groups
}

impl super::super::Job<'_> {
    /// The splitting tile of records apart (`src_row` bytes apart from `src_tile`) into
    /// `rows` destination rows (`dst_row` bytes apart from `dst`) of `pixels` elements, by
    /// AVX-512 gathers ([`split_gathered`]) into rows of source elements in `a`, each row then
    /// cast (through `b` where the job streams) or copied into the destination. False (nothing
    /// written) where the gathers do not run: no pixels, no AVX-512, units of several
    /// elements, sources of other than 4-byte elements, sizes they do not take, or identity
    /// tiles of kHWC8's records (split faster by permutes).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn split_gathered(
        &self,
        src_tile: &[u8],
        (src_row, dst_row): (usize, usize),
        dst: *mut u8,
        (pixels, rows): (usize, usize),
        unit: usize,
        (a, b): (&mut [u8], &mut [u8]),
    ) -> bool {
        let (se, de) = (self.cast.src.size_bytes(), self.cast.dst.size_bytes());
        let identity = self.cast.is_identity();
        if unit != 1
            || pixels == 0
            || se != 4
            || !super::super::transpose::avx512_builds()
            || !applies(src_row, rows)
            || (identity && super::record_split::applies(src_row, rows, se))
        {
            return false;
        }
        let (row_in, row_out) = (pixels * se, pixels * de);
        assert!(
            rows * row_in <= a.len()
                && row_out <= b.len()
                && (pixels - 1) * src_row + rows * se <= src_tile.len()
        );
        // SAFETY: the records are inside `src_tile` (asserted), `a` holds the `rows` rows
        // of `pixels` elements (asserted); AVX-512F present (checked).
        let done = unsafe {
            split_gathered(
                src_tile.as_ptr(),
                src_row,
                a.as_mut_ptr(),
                row_in,
                pixels,
                rows,
            )
        };
        for p in done..pixels {
            for k in 0..rows {
                let from = &src_tile[p * src_row + k * se..][..se];
                super::super::copy_few(&mut a[k * row_in + p * se..][..se], from);
            }
        }
        for k in 0..rows {
            let from = &a[k * row_in..(k + 1) * row_in];
            // SAFETY: destination row `k` of the tile, inside the buffer (asserted by the
            // caller), this item's, not overlapping the other rows.
            let out = unsafe { std::slice::from_raw_parts_mut(dst.add(k * dst_row), row_out) };
            if identity {
                self.out_copy(out, from);
            } else if self.stream {
                let cast = &mut b[..row_out];
                (self.run)(from, cast, pixels, &self.cast);
                self.out_copy(out, cast);
            } else {
                (self.run)(from, out, pixels, &self.cast);
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `split_gathered` against its definition: 1-4 rows, records of the rows' size to 128
    /// bytes, record counts around its groups of 16, sources at odd offsets cut right after
    /// the last record's elements; the records it reports done are exactly its rows' first
    /// elements, and nothing else of the rows is written.
    #[test]
    fn gathered_rows_match_the_definition() {
        if !crate::fast::transpose::avx512_builds() {
            return;
        }
        const GUARD: u8 = 0x5A;
        for rows in 1..=4 {
            for src_row in [rows * 4, rows * 4 + 3, 16, 32, 64, 128] {
                if !applies(src_row, rows) {
                    continue;
                }
                for pixels in [0, 1, 15, 16, 17, 31, 32, 33, 100] {
                    let len = if pixels == 0 {
                        0
                    } else {
                        (pixels - 1) * src_row + rows * 4
                    };
                    let all: Vec<u8> = (0..len + 5).map(|i| (i * 13 % 251) as u8).collect();
                    let src = &all[5..];
                    let dst_row = pixels * 4 + 7;
                    let mut dst = vec![GUARD; rows * dst_row];
                    // SAFETY: `applies` holds; the records and rows as the contract says;
                    // AVX-512F present (checked above).
                    let done = unsafe {
                        split_gathered(
                            src.as_ptr(),
                            src_row,
                            dst.as_mut_ptr(),
                            dst_row,
                            pixels,
                            rows,
                        )
                    };
                    assert_eq!(done, pixels / 16 * 16);
                    for k in 0..rows {
                        for p in 0..pixels {
                            let got = &dst[k * dst_row + p * 4..][..4];
                            if p < done {
                                let want = &src[p * src_row + k * 4..][..4];
                                assert_eq!(got, want, "rows {rows} stride {src_row} p {p}");
                            } else {
                                assert!(got.iter().all(|&b| b == GUARD), "wrote past done");
                            }
                        }
                        let tail = &dst[k * dst_row + pixels * 4..(k + 1) * dst_row];
                        assert!(tail.iter().all(|&b| b == GUARD));
                    }
                }
            }
        }
    }
}
