//! Transposing and casting in one pass, in registers: a tile of `f32` source rows becomes
//! destination rows of `f16` (round to nearest even, F16C) or of 8-bit integers (quantised
//! exactly as [`layoutkit_core::CastSpec::apply`] does: divide by the scale, round half to
//! even, add the zero point, saturate; NaN becomes the zero point). Destination rows that are
//! whole, 64-byte aligned lines are written with streaming stores, as the identity tiles are.
//!
//! Each kernel returns `(da, db)`: the rows `..da` and columns `..db` it did; the caller casts
//! the strips it left one element at a time.

use layoutkit_core::cast::Scalar;
use layoutkit_core::CastSpec;

use super::items::MAX_TILE_A;
use super::transpose::{Prefetching, Rows};

/// The casts with a fused kernel (x86-64 only so far).
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
#[derive(Clone, Copy, PartialEq, Debug)]
pub(crate) enum FusedCast {
    F32ToF16,
    /// `f32` to `i8` (`signed`) or `u8`.
    F32ToQ8 {
        scale: f32,
        zero_point: i32,
        signed: bool,
    },
}

impl FusedCast {
    /// The fused kernel for `spec`, if there is one and the CPU can run it.
    pub(crate) fn for_spec(spec: &CastSpec) -> Option<FusedCast> {
        #[cfg(target_arch = "x86_64")]
        {
            use layoutkit_core::DType::*;
            let f16c = std::arch::is_x86_feature_detected!("f16c");
            let fma = std::arch::is_x86_feature_detected!("fma");
            if !std::arch::is_x86_feature_detected!("avx2") {
                return None;
            }
            let q = spec.quant;
            match (spec.src, spec.dst) {
                (F32, F16) if f16c => Some(FusedCast::F32ToF16),
                (F32, I8) | (F32, U8) if fma => Some(FusedCast::F32ToQ8 {
                    scale: q.scale,
                    zero_point: q.zero_point,
                    signed: spec.dst == I8,
                }),
                _ => None,
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = spec;
            None
        }
    }

    /// Whether this kernel prefers tiles of one destination line per row between close
    /// rows ([`super::shape::tile_shape`]): the AVX-512 8-bit quantising kernel does.
    pub(crate) fn line_tiles(self) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            matches!(self, FusedCast::F32ToQ8 { .. }) && super::transpose::avx512_quantise()
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    }

    /// Transposes and casts the tile's whole blocks. `stream` allows streaming stores.
    ///
    /// # Safety
    /// As [`super::transpose::transpose_rows`], with `f32` source elements and destination
    /// elements of the cast's type; the CPU has the features [`FusedCast::for_spec`] checked.
    #[inline]
    pub(crate) unsafe fn run<R: Rows>(self, rows: R, stream: bool) -> (usize, usize) {
        // Compiled with and without prefetches, as the transposes' block kernels.
        // SAFETY: as the caller guarantees.
        unsafe {
            if rows.prefetched() {
                self.run_rows(Prefetching::<R, true> { rows }, stream)
            } else {
                self.run_rows(Prefetching::<R, false> { rows }, stream)
            }
        }
    }

    /// [`FusedCast::run`] on rows whose prefetching is known at compile time.
    ///
    /// # Safety
    /// As [`FusedCast::run`].
    #[inline(always)]
    unsafe fn run_rows<R: Rows>(self, rows: R, stream: bool) -> (usize, usize) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as the caller guarantees.
        unsafe {
            let lines = stream && rows.dst_lines();
            // The strip of columns the wide kernel leaves, in the narrow kernel's blocks (a
            // 49-pixel plane: 32 columns wide, 16 narrow, one left to the element loop, which
            // had 17 of each 49 and spent a third of the cast's instructions).
            let strip =
                |(da, db): (usize, usize)| (da > 0 && rows.nb() - db >= 8).then_some((da, db));
            match self {
                FusedCast::F32ToF16 => {
                    // 8 x 16 blocks where the job's data is past the caches (see `to_f16`).
                    let wide = super::transpose::prefetches();
                    let done = x86::to_f16(rows, lines, wide);
                    let Some((da, db)) = strip(done) else {
                        return done;
                    };
                    let cols = super::transpose::Window::<R, 2> {
                        rows,
                        a0: 0,
                        b0: db,
                        na: da,
                    };
                    (da, db + x86::to_f16(cols, false, wide).1)
                }
                FusedCast::F32ToQ8 {
                    scale,
                    zero_point,
                    signed,
                } => {
                    if rows.nb() >= 16 && super::transpose::avx512_quantise() {
                        let q = super::quantise_avx512::Quant16::new(scale, zero_point, signed);
                        let packed = stream && rows.dst_packed(1);
                        return super::quantise_avx512::to_q8(rows, lines, packed, q);
                    }
                    let (lo, hi) = if signed { (-128, 127) } else { (0, 255) };
                    let quant = super::quantise_avx2::Quant::new(scale, zero_point, lo, hi);
                    if stream && rows.nb() == 32 && rows.dst_packed(1) {
                        // The rows are packed lines (checked); otherwise as the caller guarantees.
                        let done = super::quantise_avx2::to_q8_packed(rows, quant, signed);
                        if done.0 > 0 {
                            return done;
                        }
                    }
                    let done = super::quantise_avx2::to_q8(rows, lines, quant, signed);
                    let Some((da, db)) = strip(done) else {
                        return done;
                    };
                    let cols = super::transpose::Window::<R, 1> {
                        rows,
                        a0: 0,
                        b0: db,
                        na: da,
                    };
                    (
                        da,
                        db + super::quantise_avx2::to_q8(cols, false, quant, signed).1,
                    )
                }
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = (rows, stream);
            (0, 0)
        }
    }
}

/// [`MAX_TILE_A`] elements of `cast.src` whose cast is `fill`, bit for bit: the fill value
/// cast back (f16 -> f32 is exact; an 8-bit fill is dequantised), kept only where casting it
/// forward gives `fill`'s bytes again (a quantised fill no value reaches has none): the fill
/// rows of the fused cast tiles, which write a padded record with its data. Not for a NaN
/// fill: the kernels and [`CastSpec::apply`] may keep different NaN payloads.
pub(super) fn source_fill_line(cast: &CastSpec, fill: Scalar) -> Option<Vec<u8>> {
    let nan = match fill {
        Scalar::F32(v) => v.is_nan(),
        Scalar::F16(v) => v.is_nan(),
        Scalar::BF16(v) => v.is_nan(),
        Scalar::F64(v) => v.is_nan(),
        _ => false,
    };
    if cast.is_identity() || nan {
        return None;
    }
    let back = CastSpec::new(cast.dst, cast.src, Some(cast.quant))
        .or_else(|_| CastSpec::new(cast.dst, cast.src, None))
        .ok()?;
    let value = back.apply(fill);
    let (mut want, mut got, mut one) = ([0u8; 8], [0u8; 8], [0u8; 8]);
    fill.write(&mut want);
    cast.apply(value).write(&mut got);
    value.write(&mut one);
    (got == want).then(|| one[..cast.src.size_bytes()].repeat(MAX_TILE_A))
}

#[cfg(target_arch = "x86_64")]
pub(in crate::fast) mod x86 {
    use super::Rows;
    use crate::fast::transpose::x86::Prefetch;
    use std::arch::x86_64::*;

    /// Source rows `b..b+8`, float columns `a..a+8`, transposed (vector `k` is column
    /// `a + k`), each row's data `pf` on asked for: later blocks along the destination rows
    /// read it.
    #[target_feature(enable = "avx2")]
    #[inline]
    pub(in crate::fast) unsafe fn block<R: Rows>(
        r: R,
        pf: Prefetch,
        a: usize,
        b: usize,
    ) -> [__m256; 8] {
        // SAFETY: as this function's (inside the tile, AVX2 present).
        unsafe { crate::fast::transpose::x86::f32_block8(r, a, b, pf) }
    }

    /// Destination rows `a..a + ROWS` by columns `b..b + 8 * J` of the tile into `stage`
    /// (`stage[row][j]` = `cell` of the 8 values of row `a + row`, columns `b + 8j ..`), each
    /// source row's `ROWS` floats read by back-to-back loads (whole lines for 16 rows).
    /// Inlined into the calling kernel, whose CPU features it and `cell` use.
    ///
    /// # Safety
    /// As [`block`], for every block of the rectangle.
    // Indices address rows of one array and columns of another (a transposition).
    #[allow(clippy::needless_range_loop)]
    #[inline(always)]
    pub(in crate::fast) unsafe fn fill_stage<R: Rows, T, const J: usize, const ROWS: usize>(
        r: R,
        pf: Prefetch,
        a: usize,
        b: usize,
        stage: &mut [[T; J]; ROWS],
        mut cell: impl FnMut(__m256) -> T,
    ) {
        for j in 0..J {
            for h in 0..ROWS / 8 {
                // SAFETY: inside the tile (the caller's contract).
                let t = unsafe { block(r, pf, a + 8 * h, b + 8 * j) };
                for (k, v) in t.into_iter().enumerate() {
                    stage[8 * h + k][j] = cell(v);
                }
            }
        }
    }

    /// 16 destination lines of `f16` (32 values each), staged in cache.
    #[repr(C, align(64))]
    struct Stage([[__m128i; 4]; 16]);

    /// To `f16`: 16 x 32 blocks streamed as whole lines, 8 x 32 blocks the same way where the
    /// tile has fewer than 16 rows, else 8 x 8 blocks with plain stores; where the job's data
    /// is past the caches (`wide`: the job prefetches) 8 x 16 blocks instead of those, each
    /// destination row's 32 bytes by one store (f32 -> f16 NCHW -> NHWC of 16 channels on 14 x
    /// 14, 32 MB: 29% -> 86% of the copy on a Zen 5; in cache the 8 x 8 blocks ran 1.1-1.2x
    /// faster: two blocks' 16 registers are all AVX2 has).
    // Indices address rows of one array and columns of another (a transposition).
    #[allow(clippy::needless_range_loop)]
    #[target_feature(enable = "avx2,f16c")]
    pub(super) unsafe fn to_f16<R: Rows>(r: R, lines: bool, wide: bool) -> (usize, usize) {
        let pf = Prefetch::for_tile(&r);
        const NEAREST: i32 = _MM_FROUND_TO_NEAREST_INT;
        let w = if lines && r.nb() >= 32 {
            32
        } else if wide && r.nb() >= 16 {
            16
        } else {
            8
        };
        let (na, nb) = (r.na() / 8 * 8, r.nb() / w * w);
        if w == 32 && na % 16 == 0 {
            // 16 destination rows at a time: each source row's 16 floats (one line) are read
            // by two back-to-back loads, cast into a 1 KiB stage and streamed out as 16 whole
            // lines. Reading each source line whole, instead of half of it per 8 x 32 block,
            // measured 49-63% -> 85-110% of the plain f32 conversion's GB/s (NCHW -> NHWC).
            let mut stage = Stage([[_mm_setzero_si128(); 4]; 16]);
            // Along the source rows, each block's share of the next band asked for.
            for (a, b) in pf.blocks_in(true, (na, 16), (nb, 32)) {
                // SAFETY: inside the tile.
                unsafe { fill_stage(r, pf, a, b, &mut stage.0, |v| _mm256_cvtps_ph::<NEAREST>(v)) };
                for (k, row) in stage.0.iter().enumerate() {
                    let p = r.dst(a + k).wrapping_add(b * 2) as *mut __m256i;
                    // SAFETY: inside the tile; a 64-byte aligned line (lines).
                    unsafe {
                        _mm256_stream_si256(p, _mm256_set_m128i(row[1], row[0]));
                        _mm256_stream_si256(p.add(1), _mm256_set_m128i(row[3], row[2]));
                    }
                }
            }
            return (na, nb);
        }
        for a in (0..na).step_by(8) {
            for b in (0..nb).step_by(w) {
                if w == 32 {
                    let mut h = [[_mm_setzero_si128(); 4]; 8];
                    for q in 0..4 {
                        // SAFETY: inside the tile.
                        let t = unsafe { block(r, pf, a, b + 8 * q) };
                        for k in 0..8 {
                            h[k][q] = _mm256_cvtps_ph::<NEAREST>(t[k]);
                        }
                    }
                    for (k, row) in h.iter().enumerate() {
                        let p = r.dst(a + k).wrapping_add(b * 2) as *mut __m256i;
                        // SAFETY: inside the tile; a 64-byte aligned line (lines).
                        unsafe {
                            _mm256_stream_si256(p, _mm256_set_m128i(row[1], row[0]));
                            _mm256_stream_si256(p.add(1), _mm256_set_m128i(row[3], row[2]));
                        }
                    }
                } else if w == 16 {
                    // Two 8 x 8 blocks, each destination row's 32 bytes by one store (16-channel
                    // pixels: a row whole; 8 x 8 blocks wrote each half apart).
                    // SAFETY: inside the tile.
                    let (lo, hi) = unsafe { (block(r, pf, a, b), block(r, pf, a, b + 8)) };
                    for k in 0..8 {
                        let p = r.dst(a + k).wrapping_add(b * 2) as *mut __m256i;
                        let v = _mm256_set_m128i(
                            _mm256_cvtps_ph::<NEAREST>(hi[k]),
                            _mm256_cvtps_ph::<NEAREST>(lo[k]),
                        );
                        // SAFETY: inside the tile; unaligned store.
                        unsafe { _mm256_storeu_si256(p, v) };
                    }
                } else {
                    // SAFETY: inside the tile.
                    let t = unsafe { block(r, pf, a, b) };
                    for (k, v) in t.into_iter().enumerate() {
                        let p = r.dst(a + k).wrapping_add(b * 2) as *mut __m128i;
                        // SAFETY: inside the tile; unaligned store.
                        unsafe { _mm_storeu_si128(p, _mm256_cvtps_ph::<NEAREST>(v)) };
                    }
                }
            }
        }
        (na, nb)
    }
}

#[cfg(test)]
#[path = "cast_tiles_tests.rs"]
mod tests;
