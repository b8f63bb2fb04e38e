//! The edges a block kernel leaves of a tile (columns past its last whole block, rows past its
//! last whole block), moved in blocks of the same size with masked loads and stores
//! (AVX-512BW/VL): a tile of f16 NCHW -> NHWC with C = 250 left 10 columns of every row to an
//! 8 x 8 SSE block and a 2-column element loop, and a tile of fewer than 16 rows left
//! everything to narrower kernels and the element loop.
//!
//! Safety for all: the contract of [`super::super::transpose_rows`]. Masked-off lanes are
//! neither read nor written (a masked load does not fault on them), so a block may reach past
//! the end of a row or of the tile.

use super::super::Rows;
use super::{transpose8, u16_transpose16};
use std::arch::x86_64::*;

/// Rows `a0..a1`, columns `b0..b1` of the tile in masked blocks of 16 x 16 2-byte elements
/// or 8 x 8 4-byte ones (`N` is 2 or 4; nothing is done otherwise).
///
/// # Safety
/// The region is inside the tile (the contract of [`super::super::transpose_rows`]); the CPU
/// has AVX2, AVX-512F, AVX-512VL and AVX-512BW.
#[target_feature(enable = "avx2,avx512f,avx512vl,avx512bw")]
pub(crate) unsafe fn masked_region<const N: usize, R: Rows>(
    r: R,
    (a0, a1): (usize, usize),
    (b0, b1): (usize, usize),
) {
    let blk = if N == 2 { 16 } else { 8 };
    let mut a = a0;
    while a < a1 {
        let va = blk.min(a1 - a);
        let mut b = b0;
        while b < b1 {
            let vb = blk.min(b1 - b);
            // SAFETY: `va` rows from `a` and `vb` columns from `b` are inside the tile; the
            // features are the caller's.
            unsafe {
                match N {
                    2 => u16_block(r, a, b, va, vb),
                    4 => f32_block(r, a, b, va, vb),
                    _ => {}
                }
            }
            b += blk;
        }
        a += blk;
    }
}

/// The mask of the first `n` (<= 16) lanes.
#[inline(always)]
fn lanes(n: usize) -> u16 {
    ((1u32 << n) - 1) as u16
}

/// Destination rows `a..a + va`, columns `b..b + vb` (`va`, `vb` <= 16) of 2-byte elements.
#[inline(always)]
unsafe fn u16_block<R: Rows>(r: R, a: usize, b: usize, va: usize, vb: usize) {
    // SAFETY: lanes past `va` (loads) and `vb` (stores) are masked off; the others are inside
    // the tile; the caller has AVX2 and AVX-512BW/VL.
    unsafe {
        let mut v = [_mm256_setzero_si256(); 16];
        for (k, v) in v.iter_mut().enumerate().take(vb) {
            let p = r.src(b + k).wrapping_add(a * 2) as *const i16;
            *v = _mm256_maskz_loadu_epi16(lanes(va), p);
        }
        let t = u16_transpose16(v);
        for (k, t) in t.into_iter().enumerate().take(va) {
            let p = r.dst(a + k).wrapping_add(b * 2) as *mut i16;
            _mm256_mask_storeu_epi16(p, lanes(vb), t);
        }
    }
}

/// Destination rows `a..a + va`, columns `b..b + vb` (`va`, `vb` <= 8) of 4-byte elements.
#[inline(always)]
unsafe fn f32_block<R: Rows>(r: R, a: usize, b: usize, va: usize, vb: usize) {
    // SAFETY: as `u16_block`.
    unsafe {
        let mut v = [_mm256_setzero_ps(); 8];
        for (k, v) in v.iter_mut().enumerate().take(vb) {
            let p = r.src(b + k).wrapping_add(a * 4) as *const f32;
            *v = _mm256_maskz_loadu_ps(lanes(va) as u8, p);
        }
        let t = transpose8(v);
        for (k, t) in t.into_iter().enumerate().take(va) {
            let p = r.dst(a + k).wrapping_add(b * 4) as *mut f32;
            _mm256_mask_storeu_ps(p, lanes(vb) as u8, t);
        }
    }
}
