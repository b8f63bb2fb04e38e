//! The x86-64 builds of the tile: AVX2 + FMA (8 lanes, up to 6 pixels by 2 vectors: 12
//! accumulators of the 16 ymm registers) and AVX-512F (16 lanes, up to 12 pixels by 2 vectors:
//! 24 accumulators of the 32 zmm registers, leaving room for the weights and the broadcast).
//! Each is compiled with its features and chosen at run time; each also has two-row tiles
//! (2 x up to 3 pixels on AVX2, 2 x up to 6 on AVX-512) for short output rows.

use std::arch::x86_64::*;

use super::microkernel::{tile, tile_tables, Shape, Simd, TileTables};

#[derive(Clone, Copy)]
pub(crate) struct Avx2(__m256);

impl Simd for Avx2 {
    const LANES: usize = 8;
    const UNROLL_BLOCK_RUNS: bool = true;
    #[inline(always)]
    unsafe fn zero() -> Self {
        Avx2(_mm256_setzero_ps())
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> Self {
        Avx2(_mm256_loadu_ps(p))
    }
    #[inline(always)]
    unsafe fn splat(v: f32) -> Self {
        Avx2(_mm256_set1_ps(v))
    }
    #[inline(always)]
    unsafe fn fma(a: Self, b: Self, c: Self) -> Self {
        Avx2(_mm256_fmadd_ps(a.0, b.0, c.0))
    }
    #[inline(always)]
    unsafe fn relu(a: Self) -> Self {
        // `a < 0 ? 0 : a`: NaN compares false and stays.
        let neg = _mm256_cmp_ps::<_CMP_LT_OQ>(a.0, _mm256_setzero_ps());
        Avx2(_mm256_andnot_ps(neg, a.0))
    }
    #[inline(always)]
    unsafe fn store(p: *mut f32, v: Self) {
        _mm256_storeu_ps(p, v.0)
    }
    #[inline(always)]
    unsafe fn load_first(p: *const f32, n: usize) -> Self {
        Avx2(_mm256_maskload_ps(p, avx2_first(n)))
    }
    #[inline(always)]
    unsafe fn store_first(p: *mut f32, v: Self, n: usize) {
        _mm256_maskstore_ps(p, avx2_first(n), v.0)
    }
    #[inline(always)]
    unsafe fn keep_first(v: Self, n: usize) -> Self {
        Avx2(_mm256_and_ps(v.0, _mm256_castsi256_ps(avx2_first(n))))
    }
}

/// A mask of the first `n` of 8 lanes (all bits set) for `vmaskmovps`.
#[inline(always)]
unsafe fn avx2_first(n: usize) -> __m256i {
    const WINDOW: [i32; 16] = [-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0];
    // SAFETY: `n <= 8`, so the 8 lanes from `8 - n` lie inside the window.
    _mm256_loadu_si256(WINDOW.as_ptr().add(8 - n.min(8)) as *const __m256i)
}

/// Sixteen lanes in a zmm register.
#[derive(Clone, Copy)]
pub(crate) struct Avx512(__m512);

impl Simd for Avx512 {
    const LANES: usize = 16;
    const UNROLL_BLOCK_RUNS: bool = false;
    #[inline(always)]
    unsafe fn zero() -> Self {
        Avx512(_mm512_setzero_ps())
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> Self {
        Avx512(_mm512_loadu_ps(p))
    }
    #[inline(always)]
    unsafe fn splat(v: f32) -> Self {
        Avx512(_mm512_set1_ps(v))
    }
    #[inline(always)]
    unsafe fn fma(a: Self, b: Self, c: Self) -> Self {
        Avx512(_mm512_fmadd_ps(a.0, b.0, c.0))
    }
    #[inline(always)]
    unsafe fn relu(a: Self) -> Self {
        // `a < 0 ? 0 : a`: NaN compares false and stays.
        let neg = _mm512_cmp_ps_mask::<_CMP_LT_OQ>(a.0, _mm512_setzero_ps());
        Avx512(_mm512_mask_mov_ps(a.0, neg, _mm512_setzero_ps()))
    }
    #[inline(always)]
    unsafe fn store(p: *mut f32, v: Self) {
        _mm512_storeu_ps(p, v.0)
    }
    #[inline(always)]
    unsafe fn load_first(p: *const f32, n: usize) -> Self {
        // Masked-off lanes are neither read nor fault.
        Avx512(_mm512_maskz_loadu_ps(avx512_first(n), p))
    }
    #[inline(always)]
    unsafe fn store_first(p: *mut f32, v: Self, n: usize) {
        _mm512_mask_storeu_ps(p, avx512_first(n), v.0)
    }
    #[inline(always)]
    unsafe fn keep_first(v: Self, n: usize) -> Self {
        Avx512(_mm512_maskz_mov_ps(avx512_first(n), v.0))
    }
}

/// The mask of the first `n` of 16 lanes.
#[inline(always)]
fn avx512_first(n: usize) -> __mmask16 {
    ((1u32 << n.min(16)) - 1) as __mmask16
}

/// The AVX2 entry: `P` pixels in rows of `PX` (one row where `PX = P`).
///
/// # Safety
/// As [`tile`]; the CPU must have AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn tile_avx2<
    const P: usize,
    const PX: usize,
    const B: usize,
    const PSX: usize,
>(
    x: *const f32,
    w: *const f32,
    y: *mut f32,
    s: &Shape<'_>,
) {
    tile::<Avx2, P, B, PSX, PX>(x, w, y, s)
}

/// The AVX-512 entry: `P` pixels in rows of `PX` (one row where `PX = P`).
///
/// # Safety
/// As [`tile`]; the CPU must have AVX-512F.
#[target_feature(enable = "avx512f")]
pub(crate) unsafe fn tile_avx512<
    const P: usize,
    const PX: usize,
    const B: usize,
    const PSX: usize,
>(
    x: *const f32,
    w: *const f32,
    y: *mut f32,
    s: &Shape<'_>,
) {
    tile::<Avx512, P, B, PSX, PX>(x, w, y, s)
}

pub(crate) static AVX2: TileTables<6> =
    tile_tables!(tile_avx2, 8, (1 1) (2 2) (3 3) (4 4) (5 5) (6 6));
pub(crate) static AVX512: TileTables<12> = tile_tables!(tile_avx512, 16,
    (1 1) (2 2) (3 3) (4 4) (5 5) (6 6) (7 7) (8 8) (9 9) (10 10) (11 11) (12 12));

/// Two-row tiles (`[S][PX - 1][B - 1]`): AVX2 up to 2 x 3 pixels, AVX-512 up to 2 x 6.
pub(crate) static AVX2_ROWS: TileTables<3> = tile_tables!(tile_avx2, 8, (2 1) (4 2) (6 3));
pub(crate) static AVX512_ROWS: TileTables<6> =
    tile_tables!(tile_avx512, 16, (2 1) (4 2) (6 3) (8 4) (10 5) (12 6));
