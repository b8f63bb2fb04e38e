//! The x86-64 builds of the tile: AVX2 + FMA (8 lanes, up to 6 pixels by 2 vectors: 12
//! accumulators of the 16 ymm registers) and AVX-512F (16 lanes, up to 12 pixels by 2 vectors:
//! 24 accumulators of the 32 zmm registers, leaving room for the weights and the broadcast).
//! Each is compiled with its features and chosen at run time.

use std::arch::x86_64::*;

use super::microkernel::{tile, tile_table, Shape, Simd, TileFn};

#[derive(Clone, Copy)]
pub(crate) struct Avx2(__m256);

impl Simd for Avx2 {
    const LANES: usize = 8;
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
}

/// Sixteen lanes as a plain array, compiled only inside the AVX-512F entry, where LLVM keeps
/// each value in one zmm register and `mul_add` is one FMA instruction. (Plain arrays rather
/// than `__m512` intrinsics, which need a newer compiler than the workspace's minimum.)
#[derive(Clone, Copy)]
pub(crate) struct Avx512([f32; 16]);

impl Simd for Avx512 {
    const LANES: usize = 16;
    #[inline(always)]
    unsafe fn zero() -> Self {
        Avx512([0.0; 16])
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> Self {
        Avx512(std::ptr::read_unaligned(p as *const [f32; 16]))
    }
    #[inline(always)]
    unsafe fn splat(v: f32) -> Self {
        Avx512([v; 16])
    }
    #[inline(always)]
    unsafe fn fma(a: Self, b: Self, c: Self) -> Self {
        let mut r = c.0;
        for ((r, a), b) in r.iter_mut().zip(a.0).zip(b.0) {
            *r = a.mul_add(b, *r);
        }
        Avx512(r)
    }
    #[inline(always)]
    unsafe fn relu(a: Self) -> Self {
        Avx512(a.0.map(|v| if v < 0.0 { 0.0 } else { v }))
    }
    #[inline(always)]
    unsafe fn store(p: *mut f32, v: Self) {
        std::ptr::write_unaligned(p as *mut [f32; 16], v.0)
    }
}

/// The AVX2 entry.
///
/// # Safety
/// As [`tile`]; the CPU must have AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn tile_avx2<const P: usize, const B: usize>(
    x: *const f32,
    w: *const f32,
    y: *mut f32,
    s: &Shape<'_>,
) {
    tile::<Avx2, P, B>(x, w, y, s)
}

/// The AVX-512 entry.
///
/// # Safety
/// As [`tile`]; the CPU must have AVX-512F.
#[target_feature(enable = "avx512f")]
pub(crate) unsafe fn tile_avx512<const P: usize, const B: usize>(
    x: *const f32,
    w: *const f32,
    y: *mut f32,
    s: &Shape<'_>,
) {
    tile::<Avx512, P, B>(x, w, y, s)
}

pub(crate) static AVX2: [[TileFn; 2]; 6] = tile_table!(tile_avx2, 1 2 3 4 5 6);
pub(crate) static AVX512: [[TileFn; 2]; 12] = tile_table!(tile_avx512, 1 2 3 4 5 6 7 8 9 10 11 12);
