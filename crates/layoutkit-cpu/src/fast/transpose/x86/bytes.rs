//! 1-byte elements with AVX2: 32 source rows by 16 columns per block, each 256-bit register
//! holding two source rows (row `k` in its low lane, row `k + 16` in its high lane), so the
//! four in-lane unpack stages transpose both halves at once and leave each destination row's
//! 32 bytes in one register, ready to store. That is 64 shuffles per 512 bytes, half the
//! SSE2 16 x 16 kernel's count per byte (four stages of 16 on 256 bytes), which bounded the
//! byte transposes: in cache, tiles of 256 x 32 bytes ran at 28.6 GB/s (read + write) with
//! the SSE2 kernel, under three times a one-thread copy's memory speed.
//!
//! The bodies name no feature: they are inlined into the functions of
//! [`super::avx2`] and [`super::avx512`], which do.

use super::{blocks, sse2_u8_block, Prefetch, Rows};
use std::arch::x86_64::*;

/// Source rows `b..b+32`, byte columns `a..a+16`, transposed: vector `k` is destination row
/// `a + k`, bytes `b..b+32`. Each row's data `pf` on is asked for too.
///
/// Loops rather than `array::from_fn` closures: a closure is a function of its own, which
/// does not inherit the AVX2 feature of the entry this body is inlined into (the closures'
/// intrinsics were then calls, ten times slower).
///
/// # Safety
/// The rows and columns are inside the tile (the caller's contract); AVX2 is present.
#[inline(always)]
unsafe fn u8_block32<R: Rows>(r: R, a: usize, b: usize, pf: Prefetch) -> [__m256i; 16] {
    let (mut lo, mut hi) = (r.src_walk(b), r.src_walk(b + 16));
    let row = |p: *const u8| {
        let p = p.wrapping_add(a);
        let _ = pf; // pf.ahead_of(p);
        p
    };
    // SAFETY: as this function's.
    unsafe { transpose32x16(|| row(lo()), || row(hi())) }
}

/// The transpose of [`u8_block32`] on 32 rows of 16 bytes: rows 0..16 from successive calls
/// of `lo`, rows 16..32 of `hi` (closures of pointer arithmetic only: they need no feature of
/// their own).
///
/// # Safety
/// Each row is readable for 16 bytes; AVX2 is present.
#[inline(always)]
unsafe fn transpose32x16(
    mut lo: impl FnMut() -> *const u8,
    mut hi: impl FnMut() -> *const u8,
) -> [__m256i; 16] {
    // SAFETY (all intrinsics): AVX2 is present (the caller's contract); the loads are inside
    // the rows.
    unsafe {
        let mut x = [_mm256_setzero_si256(); 16];
        // Row k in the low lane, row k + 16 in the high lane.
        for v in x.iter_mut() {
            let (lo, hi) = (lo(), hi());
            let l = _mm256_castsi128_si256(_mm_loadu_si128(lo as *const __m128i));
            *v = _mm256_inserti128_si256::<1>(l, _mm_loadu_si128(hi as *const __m128i));
        }
        // The SSE2 kernel's four stages, lane by lane (each lane a 16 x 16 transpose): after
        // the stage of width w bytes, vector 2i holds the low halves of pairs (i, i + 8)...
        // Stage 1: rows 2g, 2g+1 interleaved; s[2g] columns 0..8, s[2g+1] columns 8..16.
        let mut s = [_mm256_setzero_si256(); 16];
        for g in 0..8 {
            s[2 * g] = _mm256_unpacklo_epi8(x[2 * g], x[2 * g + 1]);
            s[2 * g + 1] = _mm256_unpackhi_epi8(x[2 * g], x[2 * g + 1]);
        }
        // Stage 2: rows 4g..4g+4, columns 4c..4c+4 in t[4g + c].
        let mut t = [_mm256_setzero_si256(); 16];
        for g in 0..4 {
            for h in 0..2 {
                let (p, q) = (s[4 * g + h], s[4 * g + 2 + h]);
                t[4 * g + 2 * h] = _mm256_unpacklo_epi16(p, q);
                t[4 * g + 2 * h + 1] = _mm256_unpackhi_epi16(p, q);
            }
        }
        // Stage 3: rows 8g..8g+8, columns 2c, 2c+1 in u[8g + c].
        let mut u = [_mm256_setzero_si256(); 16];
        for g in 0..2 {
            for c in 0..4 {
                let (p, q) = (t[8 * g + c], t[8 * g + 4 + c]);
                u[8 * g + 2 * c] = _mm256_unpacklo_epi32(p, q);
                u[8 * g + 2 * c + 1] = _mm256_unpackhi_epi32(p, q);
            }
        }
        // Stage 4: column c, rows 0..16 (low lane) and 16..32 (high lane).
        let mut out = [_mm256_setzero_si256(); 16];
        for c in 0..8 {
            out[2 * c] = _mm256_unpacklo_epi64(u[c], u[8 + c]);
            out[2 * c + 1] = _mm256_unpackhi_epi64(u[c], u[8 + c]);
        }
        out
    }
}

/// 16 x 32 blocks of bytes with plain stores, then a strip of 16 columns in the SSE2
/// kernel's 16 x 16 blocks where one is left.
///
/// # Safety
/// The contract of [`super::super::transpose_rows`]; AVX2 is present.
#[inline(always)]
pub(super) unsafe fn u8_blocks32_body<R: Rows>(r: R) -> (usize, usize) {
    let (na, nb) = (r.na() / 16 * 16, r.nb() / 32 * 32);
    let pf = Prefetch::for_tile(&r);
    let staged = if aliased(&r) { na / 64 * 64 } else { 0 };
    if staged > 0 {
        let mut stage = Stage([[0; 64]; 32]);
        for (a, b) in pf.blocks(&r, (staged, 64), (nb, 32)) {
            // SAFETY: rows b..b+32 at columns a..a+64 and rows a..a+64 at columns b..b+32
            // are inside the tile.
            unsafe {
                stage.fill(|k| r.src(b + k).wrapping_add(a), pf);
                for j in (0..64).step_by(16) {
                    store_rows(r, a + j, b, stage.block(j));
                }
            }
        }
    }
    for (a, b) in pf.blocks(&r, (na - staged, 16), (nb, 32)) {
        let a = a + staged;
        // SAFETY: rows b..b+32 at columns a..a+16 and rows a..a+16 at columns b..b+32 are
        // inside the tile.
        unsafe { store_rows(r, a, b, u8_block32(r, a, b, pf)) };
    }
    if r.nb() - nb < 16 {
        return (na, nb);
    }
    for (a, _) in blocks(r.src_major(), (na, 16), (16, 16)) {
        // SAFETY: rows nb..nb+16 at columns a..a+16 and rows a..a+16 at columns nb..nb+16 are
        // inside the tile.
        unsafe {
            let t = sse2_u8_block(r, a, nb);
            for (k, v) in t.into_iter().enumerate() {
                _mm_storeu_si128(r.dst(a + k).add(nb) as *mut __m128i, v);
            }
        }
    }
    (na, nb + 16)
}

/// 16 x 64 blocks of bytes: two transposes, each destination row's line streamed in two
/// consecutive stores. Destination rows are 64-byte aligned (checked by the caller).
///
/// # Safety
/// The contract of [`super::super::transpose_rows`]; AVX2 is present.
#[inline(always)]
pub(super) unsafe fn u8_lines32_body<R: Rows>(r: R) -> (usize, usize) {
    let (na, nb) = (r.na() / 16 * 16, r.nb() / 64 * 64);
    let pf = Prefetch::for_tile(&r);
    let staged = if aliased(&r) { na / 64 * 64 } else { 0 };
    if staged > 0 {
        let mut stage = [Stage([[0; 64]; 32]), Stage([[0; 64]; 32])];
        for (a, b) in pf.blocks(&r, (staged, 64), (nb, 64)) {
            // SAFETY: rows b..b+64 at columns a..a+64 and rows a..a+64 at columns b..b+64
            // are inside the tile; aligned destination lines.
            unsafe {
                for (h, st) in stage.iter_mut().enumerate() {
                    st.fill(|k| r.src(b + 32 * h + k).wrapping_add(a), pf);
                }
                for j in (0..64).step_by(16) {
                    stream_lines(r, a + j, b, stage[0].block(j), stage[1].block(j));
                }
            }
        }
    }
    for (a, b) in pf.blocks(&r, (na - staged, 16), (nb, 64)) {
        let a = a + staged;
        // SAFETY: inside the tile; aligned destination lines.
        unsafe {
            stream_lines(
                r,
                a,
                b,
                u8_block32(r, a, b, pf),
                u8_block32(r, a, b + 32, pf),
            )
        };
    }
    (na, nb)
}

/// Destination rows `a..a+16`, bytes `b..b+32`: the 16 vectors of a transposed block.
///
/// # Safety
/// The rows are inside the tile; AVX2 is present.
#[inline(always)]
unsafe fn store_rows<R: Rows>(r: R, a: usize, b: usize, t: [__m256i; 16]) {
    let mut dst = r.dst_walk(a);
    for v in t {
        // SAFETY: as this function's.
        unsafe { _mm256_storeu_si256(dst().add(b) as *mut __m256i, v) };
    }
}

/// Destination rows `a..a+16`, the line at byte `b` (64-byte aligned): `lo` its first 32
/// bytes, `hi` its last, streamed.
///
/// # Safety
/// The rows are inside the tile and `r.dst(a + k) + b` is 64-byte aligned; AVX2 is present.
#[inline(always)]
unsafe fn stream_lines<R: Rows>(r: R, a: usize, b: usize, lo: [__m256i; 16], hi: [__m256i; 16]) {
    for k in 0..16 {
        // SAFETY: as this function's.
        unsafe {
            let p = r.dst(a + k).add(b) as *mut __m256i;
            _mm256_stream_si256(p, lo[k]);
            _mm256_stream_si256(p.add(1), hi[k]);
        }
    }
}

/// Whether the tile's source rows are a multiple of 4 KiB apart (NCHW planes of 64 x 64 or
/// 1024 x 1024 bytes): every row's line then falls in the same L1 set, 32 rows overflow its
/// ways, and each line would be fetched again for each 16-byte column block. Such rows are
/// staged a whole line each into [`Stage`] first (i8 NCHW -> NCHW32c C=256, one thread:
/// 64 x 64 planes ran at 12.7 GB/s, 63 x 63 and 65 x 65 at 15.7-18.9).
fn aliased<R: Rows>(r: &R) -> bool {
    r.nb() >= 2
        && r.src(1)
            .addr()
            .abs_diff(r.src(0).addr())
            .is_multiple_of(4096)
}

/// 32 source rows of one 64-byte line each, in cache.
#[repr(align(64))]
struct Stage([[u8; 64]; 32]);

impl Stage {
    /// Columns `j..j+16` of the 32 staged lines, transposed ([`u8_block32`]'s result).
    ///
    /// # Safety
    /// `j + 16 <= 64`; AVX2 is present.
    #[inline(always)]
    unsafe fn block(&self, j: usize) -> [__m256i; 16] {
        let line = |k: usize| self.0[k].as_ptr().wrapping_add(j);
        let (mut lo, mut hi) = (0, 16);
        // SAFETY: each line holds 64 bytes (the caller's contract on `j`).
        unsafe {
            transpose32x16(
                || {
                    lo += 1;
                    line(lo - 1)
                },
                || {
                    hi += 1;
                    line(hi - 1)
                },
            )
        }
    }

    /// Copies the 64 bytes at `row(k)` into line `k`, each asking for the data `pf` on.
    ///
    /// # Safety
    /// Each `row(k)` is readable for 64 bytes; AVX2 is present.
    #[inline(always)]
    unsafe fn fill(&mut self, row: impl Fn(usize) -> *const u8, pf: Prefetch) {
        for (k, line) in self.0.iter_mut().enumerate() {
            let p = row(k);
            pf.ahead_of(p);
            // SAFETY: the caller's contract; the line is 64 bytes of this stage.
            unsafe {
                let d = line.as_mut_ptr() as *mut __m256i;
                _mm256_store_si256(d, _mm256_loadu_si256(p as *const __m256i));
                _mm256_store_si256(d.add(1), _mm256_loadu_si256(p.add(32) as *const __m256i));
            }
        }
    }
}
