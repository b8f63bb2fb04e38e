//! The SSE2 kernels (4-byte strips, 2-byte, 1-byte and whole-unit transposes; SSE2 is part of x86-64, so
//! they need no feature check). Safety for all: the contract of [`super::super::transpose_rows`].

use super::super::Rows;
use super::blocks;
#[allow(clippy::wildcard_imports)]
use std::arch::x86_64::*;

/// The 8x8 transpose of eight rows of eight 2-byte elements.
#[inline(always)]
fn transpose8x16(r: [__m128i; 8]) -> [__m128i; 8] {
    // SAFETY: SSE2 is part of x86-64.
    unsafe {
        let b0 = _mm_unpacklo_epi16(r[0], r[1]);
        let b1 = _mm_unpackhi_epi16(r[0], r[1]);
        let b2 = _mm_unpacklo_epi16(r[2], r[3]);
        let b3 = _mm_unpackhi_epi16(r[2], r[3]);
        let b4 = _mm_unpacklo_epi16(r[4], r[5]);
        let b5 = _mm_unpackhi_epi16(r[4], r[5]);
        let b6 = _mm_unpacklo_epi16(r[6], r[7]);
        let b7 = _mm_unpackhi_epi16(r[6], r[7]);
        let c0 = _mm_unpacklo_epi32(b0, b2);
        let c1 = _mm_unpackhi_epi32(b0, b2);
        let c2 = _mm_unpacklo_epi32(b1, b3);
        let c3 = _mm_unpackhi_epi32(b1, b3);
        let c4 = _mm_unpacklo_epi32(b4, b6);
        let c5 = _mm_unpackhi_epi32(b4, b6);
        let c6 = _mm_unpacklo_epi32(b5, b7);
        let c7 = _mm_unpackhi_epi32(b5, b7);
        [
            _mm_unpacklo_epi64(c0, c4),
            _mm_unpackhi_epi64(c0, c4),
            _mm_unpacklo_epi64(c1, c5),
            _mm_unpackhi_epi64(c1, c5),
            _mm_unpacklo_epi64(c2, c6),
            _mm_unpackhi_epi64(c2, c6),
            _mm_unpacklo_epi64(c3, c7),
            _mm_unpackhi_epi64(c3, c7),
        ]
    }
}

/// Eight source rows from `b`, columns `a..a+8`, transposed.
///
/// Loops rather than `array::from_fn` closures in this and the kernels below: the compiler
/// left the closures as calls where several blocks are taken at once (`u16_lines`: 9% of the
/// samples of f16 OIHW -> OIHW16i16o with I = 1, in the closures' call frames).
#[inline(always)]
unsafe fn u16_block<R: Rows>(r: R, a: usize, b: usize) -> [__m128i; 8] {
    let mut v = [_mm_setzero_si128(); 8];
    for (k, v) in v.iter_mut().enumerate() {
        // SAFETY: inside the tile (the caller's contract).
        *v = unsafe { _mm_loadu_si128(r.src(b + k).add(a * 2) as *const __m128i) };
    }
    transpose8x16(v)
}

/// 8 x 8 blocks of 2-byte elements; with `STREAM`, streaming stores (as
/// the f32 blocks of `x86.rs`).
pub(in crate::fast::transpose) unsafe fn u16_blocks<const STREAM: bool, R: Rows>(
    r: R,
) -> (usize, usize) {
    let (na, nb) = (r.na() / 8 * 8, r.nb() / 8 * 8);
    let src_major = r.src_major();
    for (a, b) in blocks(src_major, (na, 8), (nb, 8)) {
        // SAFETY: inside the tile.
        unsafe {
            let t = u16_block(r, a, b);
            for (k, v) in t.into_iter().enumerate() {
                let p = r.dst(a + k).add(b * 2) as *mut __m128i;
                if STREAM {
                    _mm_stream_si128(p, v);
                } else {
                    _mm_storeu_si128(p, v);
                }
            }
        }
    }
    (na, nb)
}

/// 4 x 4 blocks of 4-byte elements (the strips of 4 to 7 columns the 8 x 8 AVX2 kernel
/// leaves, and tiles of 4 to 7 rows no 8-row kernel takes: a MACE width-major image of
/// 7-pixel rows back to NHWC), stored with ordinary stores. Rows past the last multiple of
/// 4 (with 4 or more rows) are a second pass over the last four rows, whose overlap with the
/// first writes the same values again. Returns `(na, nb)` done: every row where there are 4
/// or more, columns to a multiple of 4.
pub(in crate::fast::transpose) unsafe fn u32_blocks4<R: Rows>(r: R) -> (usize, usize) {
    let (na, nb) = (r.na() / 4 * 4, r.nb() / 4 * 4);
    for (a, b) in blocks(r.src_major(), (na, 4), (nb, 4)) {
        // SAFETY: inside the tile.
        unsafe { u32_block4(r, a, b) };
    }
    if na == r.na() || na == 0 {
        return (na, nb);
    }
    for b in (0..nb).step_by(4) {
        // SAFETY: inside the tile (rows na - 4.. of 4 or more).
        unsafe { u32_block4(r, r.na() - 4, b) };
    }
    (r.na(), nb)
}

/// Rows `a..a + 4`, columns `b..b + 4` of a tile of 4-byte elements.
///
/// # Safety
/// Inside the tile (the contract of [`super::super::transpose_rows`]).
#[inline(always)]
unsafe fn u32_block4<R: Rows>(r: R, a: usize, b: usize) {
    // SAFETY: inside the tile (this function's contract); SSE2 is part of x86-64.
    unsafe {
        let v: [__m128; 4] =
            std::array::from_fn(|k| _mm_loadu_ps(r.src(b + k).add(a * 4) as *const f32));
        let t0 = _mm_unpacklo_ps(v[0], v[1]);
        let t1 = _mm_unpacklo_ps(v[2], v[3]);
        let t2 = _mm_unpackhi_ps(v[0], v[1]);
        let t3 = _mm_unpackhi_ps(v[2], v[3]);
        let c = [
            _mm_movelh_ps(t0, t1),
            _mm_movehl_ps(t1, t0),
            _mm_movelh_ps(t2, t3),
            _mm_movehl_ps(t3, t2),
        ];
        for (k, v) in c.into_iter().enumerate() {
            _mm_storeu_ps(r.dst(a + k).add(b * 4) as *mut f32, v);
        }
    }
}

/// 8 x 4 blocks of 2-byte elements: four source rows of 8 elements become 8 destination rows
/// of 4 (8 bytes each; a MACE filter image's 4 lanes of f16, which no other kernel takes and
/// the element loop moved one at a time), stored with ordinary stores.
pub(in crate::fast::transpose) unsafe fn u16_blocks4<R: Rows>(r: R) -> (usize, usize) {
    let (na, nb) = (r.na() / 8 * 8, r.nb() / 4 * 4);
    for (a, b) in blocks(r.src_major(), (na, 8), (nb, 4)) {
        // SAFETY: inside the tile; SSE2 is part of x86-64.
        unsafe {
            let v: [__m128i; 4] =
                std::array::from_fn(|k| _mm_loadu_si128(r.src(b + k).add(a * 2) as *const __m128i));
            // Rows 0/1 and 2/3 interleaved by element, then by pairs: lane k of `q[j]`
            // holds destination row 4j/2.. (two rows of 4 elements per vector).
            let (t0, t1) = (
                _mm_unpacklo_epi16(v[0], v[1]),
                _mm_unpackhi_epi16(v[0], v[1]),
            );
            let (t2, t3) = (
                _mm_unpacklo_epi16(v[2], v[3]),
                _mm_unpackhi_epi16(v[2], v[3]),
            );
            let q = [
                _mm_unpacklo_epi32(t0, t2),
                _mm_unpackhi_epi32(t0, t2),
                _mm_unpacklo_epi32(t1, t3),
                _mm_unpackhi_epi32(t1, t3),
            ];
            for (j, v) in q.into_iter().enumerate() {
                _mm_storel_epi64(r.dst(a + 2 * j).add(b * 2) as *mut __m128i, v);
                _mm_storeh_pd(
                    r.dst(a + 2 * j + 1).add(b * 2) as *mut f64,
                    _mm_castsi128_pd(v),
                );
            }
        }
    }
    (na, nb)
}

/// Tiles of 4 to 7 destination rows of 2-byte elements (a MACE width-major image of 7-pixel
/// rows back to NHWC, or the rows a 16-row kernel left), which no block kernel takes and the
/// element loop moved one at a time: 4 x 8 blocks, eight source rows' four elements (8-byte
/// loads) to four destination rows' eight (16-byte stores); with 5 to 7 rows, a second pass
/// over the last four rows (its overlap with the first writes the same values again).
/// Returns `(na, nb)` done: all rows, columns to a multiple of 8; `(0, 0)` under 4 rows or 8
/// columns.
pub(in crate::fast::transpose) unsafe fn u16_rows4<R: Rows>(r: R) -> (usize, usize) {
    let (na, nb) = (r.na(), r.nb() / 8 * 8);
    if !(4..8).contains(&na) || nb == 0 {
        return (0, 0);
    }
    let starts: &[usize] = if na == 4 { &[0] } else { &[0, na - 4] };
    for b in (0..nb).step_by(8) {
        for &a in starts {
            // SAFETY: inside the tile (rows a..a + 4 <= na, columns b..b + 8 <= nb); SSE2 is
            // part of x86-64.
            unsafe {
                let mut v = [_mm_setzero_si128(); 8];
                for (k, v) in v.iter_mut().enumerate() {
                    *v = _mm_loadl_epi64(r.src(b + k).add(a * 2) as *const __m128i);
                }
                // Element pairs, then pairs of pairs: u[0] holds elements 0 and 1 of rows
                // 0-3, u[1] elements 2 and 3; u[2], u[3] the same of rows 4-7.
                let t = [
                    _mm_unpacklo_epi16(v[0], v[1]),
                    _mm_unpacklo_epi16(v[2], v[3]),
                    _mm_unpacklo_epi16(v[4], v[5]),
                    _mm_unpacklo_epi16(v[6], v[7]),
                ];
                let u = [
                    _mm_unpacklo_epi32(t[0], t[1]),
                    _mm_unpackhi_epi32(t[0], t[1]),
                    _mm_unpacklo_epi32(t[2], t[3]),
                    _mm_unpackhi_epi32(t[2], t[3]),
                ];
                let out = [
                    _mm_unpacklo_epi64(u[0], u[2]),
                    _mm_unpackhi_epi64(u[0], u[2]),
                    _mm_unpacklo_epi64(u[1], u[3]),
                    _mm_unpackhi_epi64(u[1], u[3]),
                ];
                for (k, v) in out.into_iter().enumerate() {
                    _mm_storeu_si128(r.dst(a + k).add(b * 2) as *mut __m128i, v);
                }
            }
        }
    }
    (na, nb)
}

/// 8 x 32 blocks of 2-byte elements: four transposes, then each destination row's line
/// streamed in four consecutive stores.
pub(in crate::fast::transpose) unsafe fn u16_lines<R: Rows>(r: R) -> (usize, usize) {
    let (na, nb) = (r.na() / 8 * 8, r.nb() / 32 * 32);
    let src_major = r.src_major();
    for (a, b) in blocks(src_major, (na, 8), (nb, 32)) {
        // SAFETY: inside the tile; aligned destination lines.
        unsafe {
            let mut q = [[_mm_setzero_si128(); 8]; 4];
            for (j, block) in q.iter_mut().enumerate() {
                *block = u16_block(r, a, b + 8 * j);
            }
            for k in 0..8 {
                let p = r.dst(a + k).add(b * 2) as *mut __m128i;
                for (j, block) in q.iter().enumerate() {
                    _mm_stream_si128(p.add(j), block[k]);
                }
            }
        }
    }
    (na, nb)
}

/// Sixteen source rows from `b`, columns `a..a+16` of bytes, transposed: vector `c` of
/// the result is source column `a + c` across the sixteen rows.
#[inline(always)]
pub(super) unsafe fn u8_block<R: Rows>(rows: R, a: usize, b: usize) -> [__m128i; 16] {
    // SAFETY: inside the tile (the caller's contract).
    u8_transpose16(std::array::from_fn(|k| unsafe {
        _mm_loadu_si128(rows.src(b + k).add(a) as *const __m128i)
    }))
}

/// The 16 x 16 byte transpose: vector `c` of the result is byte `c` of every input vector.
#[inline(always)]
fn u8_transpose16(r: [__m128i; 16]) -> [__m128i; 16] {
    // Four unpack stages, each doubling the rows that a lane group spans and halving the
    // columns a vector holds. SSE2 is part of x86-64.
    // s1[g][h]: rows 2g, 2g+1 interleaved, columns 8h..8h+8.
    let s1: [[__m128i; 2]; 8] = std::array::from_fn(|g| unsafe {
        [
            _mm_unpacklo_epi8(r[2 * g], r[2 * g + 1]),
            _mm_unpackhi_epi8(r[2 * g], r[2 * g + 1]),
        ]
    });
    // s2[g][c]: rows 4g..4g+4, columns 4c..4c+4.
    let s2: [[__m128i; 4]; 4] = std::array::from_fn(|g| {
        std::array::from_fn(|c| unsafe {
            let (x, y) = (s1[2 * g][c / 2], s1[2 * g + 1][c / 2]);
            if c % 2 == 0 {
                _mm_unpacklo_epi16(x, y)
            } else {
                _mm_unpackhi_epi16(x, y)
            }
        })
    });
    // s3[g][c]: rows 8g..8g+8, columns 2c, 2c+1.
    let s3: [[__m128i; 8]; 2] = std::array::from_fn(|g| {
        std::array::from_fn(|c| unsafe {
            let (x, y) = (s2[2 * g][c / 2], s2[2 * g + 1][c / 2]);
            if c % 2 == 0 {
                _mm_unpacklo_epi32(x, y)
            } else {
                _mm_unpackhi_epi32(x, y)
            }
        })
    });
    // Column c: all sixteen rows.
    std::array::from_fn(|c| unsafe {
        let (x, y) = (s3[0][c / 2], s3[1][c / 2]);
        if c % 2 == 0 {
            _mm_unpacklo_epi64(x, y)
        } else {
            _mm_unpackhi_epi64(x, y)
        }
    })
}

/// 16 x 16 blocks of bytes, plain stores.
pub(in crate::fast::transpose) unsafe fn u8_blocks<R: Rows>(r: R) -> (usize, usize) {
    let (na, nb) = (r.na() / 16 * 16, r.nb() / 16 * 16);
    let src_major = r.src_major();
    for (a, b) in blocks(src_major, (na, 16), (nb, 16)) {
        // SAFETY: inside the tile.
        unsafe {
            let t = u8_block(r, a, b);
            for (k, v) in t.into_iter().enumerate() {
                _mm_storeu_si128(r.dst(a + k).add(b) as *mut __m128i, v);
            }
        }
    }
    (na, nb)
}

/// 16 x 8 blocks of bytes: eight source rows of 16 become 16 destination rows of 8 bytes
/// (the strip of 8 to 15 columns a 16-column kernel leaves: the last 8 channels of NHWC's
/// pixels of 24, which the element loop moved one byte at a time), ordinary stores.
pub(in crate::fast::transpose) unsafe fn u8_blocks8<R: Rows>(r: R) -> (usize, usize) {
    let (na, nb) = (r.na() / 16 * 16, r.nb() / 8 * 8);
    for (a, b) in blocks(r.src_major(), (na, 16), (nb, 8)) {
        // SAFETY: inside the tile; SSE2 is part of x86-64.
        unsafe {
            let v: [__m128i; 8] =
                std::array::from_fn(|k| _mm_loadu_si128(r.src(b + k).add(a) as *const __m128i));
            // t[2p]: columns 0..8 of rows 2p, 2p + 1 (a byte of each per 16-bit unit);
            // t[2p + 1]: columns 8..16.
            let t: [__m128i; 8] = std::array::from_fn(|i| {
                let (x, y) = (v[i / 2 * 2], v[i / 2 * 2 + 1]);
                if i % 2 == 0 {
                    _mm_unpacklo_epi8(x, y)
                } else {
                    _mm_unpackhi_epi8(x, y)
                }
            });
            // u[4q + c]: columns 4c..4c + 4 of rows 4q..4q + 4 (four bytes per column).
            let u: [__m128i; 8] = std::array::from_fn(|i| {
                let (q, c) = (i / 4, i % 4);
                let (x, y) = (t[4 * q + c / 2], t[4 * q + 2 + c / 2]);
                if c % 2 == 0 {
                    _mm_unpacklo_epi16(x, y)
                } else {
                    _mm_unpackhi_epi16(x, y)
                }
            });
            // Columns 4c, 4c + 1 (low), then 4c + 2, 4c + 3 (high) of all eight rows: a
            // destination row per 8 bytes.
            for c in 0..4 {
                for (h, w) in [
                    _mm_unpacklo_epi32(u[c], u[4 + c]),
                    _mm_unpackhi_epi32(u[c], u[4 + c]),
                ]
                .into_iter()
                .enumerate()
                {
                    let col = 4 * c + 2 * h;
                    _mm_storel_epi64(r.dst(a + col).add(b) as *mut __m128i, w);
                    _mm_storeh_pd(r.dst(a + col + 1).add(b) as *mut f64, _mm_castsi128_pd(w));
                }
            }
        }
    }
    (na, nb)
}

/// 8 x 16 blocks of bytes: sixteen source rows of 8 become 8 destination rows of 16 (the
/// 8 to 15 destination rows a 16-row kernel leaves: the last 8 of NHWC's 24 channels
/// into NCHW, which the element loop moved one byte at a time), ordinary stores.
pub(in crate::fast::transpose) unsafe fn u8_rows8<R: Rows>(r: R) -> (usize, usize) {
    let (na, nb) = (r.na() / 8 * 8, r.nb() / 16 * 16);
    for (a, b) in blocks(r.src_major(), (na, 8), (nb, 16)) {
        // SAFETY: inside the tile (8 bytes of each of the 16 source rows); SSE2 is part of
        // x86-64.
        unsafe {
            let t = u8_transpose16(std::array::from_fn(|k| {
                _mm_loadl_epi64(r.src(b + k).add(a) as *const __m128i)
            }));
            for (k, v) in t.into_iter().take(8).enumerate() {
                _mm_storeu_si128(r.dst(a + k).add(b) as *mut __m128i, v);
            }
        }
    }
    (na, nb)
}

/// 16 x 64 blocks of bytes: four transposes, each destination line streamed.
pub(in crate::fast::transpose) unsafe fn u8_lines<R: Rows>(r: R) -> (usize, usize) {
    let (na, nb) = (r.na() / 16 * 16, r.nb() / 64 * 64);
    let src_major = r.src_major();
    for (a, b) in blocks(src_major, (na, 16), (nb, 64)) {
        // SAFETY: inside the tile; aligned destination lines.
        unsafe {
            let mut q = [[_mm_setzero_si128(); 16]; 4];
            for (j, block) in q.iter_mut().enumerate() {
                *block = u8_block(r, a, b + 16 * j);
            }
            for k in 0..16 {
                let p = r.dst(a + k).add(b) as *mut __m128i;
                for (j, block) in q.iter().enumerate() {
                    _mm_stream_si128(p.add(j), block[k]);
                }
            }
        }
    }
    (na, nb)
}

/// Units of `N` bytes (8 to 64) moved along each destination row; with `lines`, whole
/// aligned 64-byte pieces of the row are streamed.
pub(in crate::fast::transpose) unsafe fn units<const N: usize, R: Rows>(r: R, lines: bool) {
    let nb = r.nb();
    let per_line = 64 / N;
    for a in 0..r.na() {
        let d = r.dst(a);
        let mut b = 0;
        if lines {
            while b + per_line <= nb {
                // SAFETY: units b..b+per_line of row a are inside the tile, and the row
                // start is 64-byte aligned with b a multiple of per_line.
                unsafe {
                    let p = d.add(b * N) as *mut __m128i;
                    for piece in 0..4 {
                        let bytes = piece * 16;
                        let (u, off) = (b + bytes / N, bytes % N);
                        let v = if N == 8 {
                            _mm_set_epi64x(
                                (r.src(u + 1).add(a * N) as *const i64).read_unaligned(),
                                (r.src(u).add(a * N) as *const i64).read_unaligned(),
                            )
                        } else {
                            _mm_loadu_si128(r.src(u).add(a * N + off) as *const __m128i)
                        };
                        _mm_stream_si128(p.add(piece), v);
                    }
                }
                b += per_line;
            }
        }
        for bb in b..nb {
            // SAFETY: inside the tile.
            unsafe { std::ptr::copy_nonoverlapping(r.src(bb).add(a * N), d.add(bb * N), N) };
        }
    }
}
