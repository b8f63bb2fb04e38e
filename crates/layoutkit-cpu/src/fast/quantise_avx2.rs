//! The AVX2 kernels of the `f32` -> 8-bit casts (exact as [`layoutkit_core::CastSpec::apply`]:
//! divide by the scale, round half to even, add the zero point, saturate; NaN becomes the zero
//! point): the transposing kernels that [`super::cast_tiles::FusedCast`] runs where the
//! AVX-512 one ([`super::quantise_avx512`]) does not, and the contiguous run loop.

use super::cast_tiles::x86::{block, fill_stage};
use super::transpose::x86::Prefetch;
use super::transpose::Rows;
use std::arch::x86_64::*;

/// The quantisation constants, as vectors.
#[derive(Clone, Copy)]
pub(in crate::fast) struct Quant {
    scale: __m256,
    /// [`crate::fast::casts::quantize_reciprocal`]: stages whose values all lie within
    /// `edge` of an integer after `x * recip + zero_point` need no division (8 vector
    /// operations per 8 values instead of 13 with a division; measured 0-10% faster on
    /// 144 MiB tensors, within this machine's noise, as the kernels mostly wait on memory).
    recip: __m256,
    edge: __m256,
    zp_f: __m256,
    /// [`crate::fast::casts::quantize_tiny`]: smaller magnitudes are replaced by zero
    /// before the division (subnormal operands and results made it slow: a third of the
    /// kernel's time on data with 1/64 subnormals, measured in cache).
    tiny: __m256,
    zp: __m256i,
}

impl Quant {
    #[target_feature(enable = "avx2,fma")]
    pub(in crate::fast) fn new(scale: f32, zero_point: i32, lo: i32, hi: i32) -> Quant {
        let (recip, edge) = crate::fast::casts::quantize_reciprocal(scale, zero_point, lo, hi);
        Quant {
            scale: _mm256_set1_ps(scale),
            recip: _mm256_set1_ps(recip),
            edge: _mm256_set1_ps(edge),
            zp_f: _mm256_set1_ps(zero_point as f32),
            tiny: _mm256_set1_ps(crate::fast::casts::quantize_tiny(scale)),
            zp: _mm256_set1_epi32(zero_point),
        }
    }

    /// Eight floats quantised by a fused multiply-add, `x * recip + zero_point`: eight
    /// i32 whose saturation to the 8-bit range (the packs below) is the scalar
    /// `quantize`'s result, and each lane's distance from its nearest integer as i32 bits
    /// (a non-negative float, or NaN). Lanes whose distance is over `edge` (near a rounding
    /// tie) or NaN (infinite or NaN input) need [`Quant::exact`]: as the distances are
    /// non-negative, their bits order as the floats do and NaN's are above every number's,
    /// so a group's test is the maximum of their bits (one integer maximum per vector) and
    /// one comparison ([`Quant::near`]).
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    fn fast(&self, x: __m256) -> (__m256i, __m256i) {
        const NEAREST: i32 = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
        // Magnitudes below `tiny` (subnormals) are zero before the product, as the
        // reference makes them before its division: a subnormal operand costs the
        // multiply-add a microcode assist (f32 -> i8 with 1/64 subnormal values ran at a
        // quarter of the speed in cache, and kept so with a subnormal result ruled out).
        let y = _mm256_fmadd_ps(self.zero_tiny(x), self.recip, self.zp_f);
        let off = _mm256_andnot_ps(
            _mm256_set1_ps(-0.0),
            _mm256_sub_ps(y, _mm256_round_ps::<NEAREST>(y)),
        );
        // Over 2^30 would not convert (negative values that do not convert give i32::MIN,
        // which saturates as they must). Rounds half to even: the conversion's rounding
        // under the default MXCSR (Rust code never changes it).
        let q = _mm256_cvtps_epi32(_mm256_min_ps(y, _mm256_set1_ps(1_073_741_824.0)));
        (q, _mm256_castps_si256(off))
    }

    /// Whether any lane of `max_off` (the lane-wise maximum of [`Quant::fast`]'s distances
    /// over a group) is near a tie or NaN.
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    fn near(&self, max_off: __m256i) -> bool {
        _mm256_movemask_epi8(_mm256_cmpgt_epi32(max_off, _mm256_castps_si256(self.edge))) != 0
    }

    /// Eight floats quantised by the division, as [`Quant::fast`] without exceptions.
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    fn exact(&self, x: __m256) -> __m256i {
        self.round(_mm256_div_ps(self.zero_tiny(x), self.scale))
    }

    /// NaN (unordered) and magnitudes below `tiny` become 0, which quantises to the zero
    /// point.
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    fn zero_tiny(&self, x: __m256) -> __m256 {
        let abs = _mm256_andnot_ps(_mm256_set1_ps(-0.0), x);
        _mm256_and_ps(_mm256_cmp_ps::<_CMP_GE_OQ>(abs, self.tiny), x)
    }

    /// The scaled value rounded half to even (the conversion's rounding under the default
    /// MXCSR, which Rust code never changes) after clamping to 2^22, plus the zero point.
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    fn round(&self, v: __m256) -> __m256i {
        let limit = _mm256_set1_ps(4_194_304.0); // 2^22
        let c = _mm256_min_ps(_mm256_max_ps(v, _mm256_set1_ps(-4_194_304.0)), limit);
        _mm256_add_epi32(_mm256_cvtps_epi32(c), self.zp)
    }

    /// Destination rows `a..a + 16` by columns `b..b + 8 * J` of the tile, quantised into
    /// `stage` (as [`fill_stage`]); by the multiplication, or by the division for the 64
    /// values of an 8 x 8 block with any near a rounding tie (one test per block, see
    /// [`Quant::fast`]). Redoing the whole stage by division instead, as this did first,
    /// redid one stage in five with this benchmark's values in [0, 1), which are near a tie
    /// one time in 4000; a test and branch per vector cost two more operations per vector.
    ///
    /// # Safety
    /// As [`fill_stage`].
    // Indices address rows of one array and columns of another (a transposition).
    #[allow(clippy::needless_range_loop)]
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    unsafe fn fill<R: Rows, const J: usize>(
        &self,
        r: R,
        pf: Prefetch,
        a: usize,
        b: usize,
        stage: &mut [[__m256i; J]; 16],
    ) {
        for j in 0..J {
            for h in 0..2 {
                // SAFETY: inside the tile (this function's contract).
                let t = unsafe { block(r, pf, a + 8 * h, b + 8 * j) };
                let mut far = _mm256_setzero_si256();
                for k in 0..8 {
                    let (q, off) = self.fast(t[k]);
                    stage[8 * h + k][j] = q;
                    far = _mm256_max_epi32(far, off);
                }
                if self.near(far) {
                    for k in 0..8 {
                        stage[8 * h + k][j] = self.exact(t[k]);
                    }
                }
            }
        }
    }

    /// 32 floats quantised and packed into 32 bytes, in order.
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    fn pack32(&self, x: [__m256; 4], signed: bool) -> __m256i {
        let fast = x.map(|x| self.fast(x));
        let far = fast
            .iter()
            .fold(_mm256_setzero_si256(), |m, f| _mm256_max_epi32(m, f.1));
        if self.near(far) {
            pack4(x.map(|x| self.exact(x)), signed)
        } else {
            pack4(fast.map(|f| f.0), signed)
        }
    }

    /// 16 floats quantised and packed into 16 bytes, in order.
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    fn pack16(&self, x0: __m256, x1: __m256, signed: bool) -> __m128i {
        let z = _mm256_setzero_ps();
        _mm256_castsi256_si128(self.pack32([x0, x1, z, z], signed))
    }
}

/// Quantises the contiguous run `src` into `dst`, 32 values at a time (by the
/// multiplication, or by the division for 32 values with any near a rounding tie), as far
/// as both have whole groups of 32; returns how many it did. The caller quantises the
/// rest. (f32 -> i8 NCHW -> NCHW, 31 MiB, one thread: 3.4 GB/s with the scalar loop the
/// compiler did not vectorise.)
#[target_feature(enable = "avx2,fma")]
pub(in crate::fast) fn quantize_run(
    src: &[f32],
    dst: &mut [u8],
    quant: &Quant,
    signed: bool,
) -> usize {
    let n = src.len().min(dst.len()) / 32 * 32;
    const PF: usize = 1024;
    for (s, d) in src[..n].chunks_exact(32).zip(dst[..n].chunks_exact_mut(32)) {
        // SAFETY: `s` holds 32 floats and `d` 32 bytes (chunks_exact); unaligned loads
        // and store.
        unsafe {
            let p = s.as_ptr();
            _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(PF) as *const i8);
            _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(PF + 16) as *const i8);
            let x = [0, 8, 16, 24].map(|k| _mm256_loadu_ps(p.add(k)));
            _mm256_storeu_si256(d.as_mut_ptr() as *mut __m256i, quant.pack32(x, signed));
        }
    }
    n
}

/// Four vectors of eight i32 saturated to 8 bits and packed into 32 bytes, in order.
#[target_feature(enable = "avx2")]
#[inline]
fn pack4(v: [__m256i; 4], signed: bool) -> __m256i {
    // Packs work within 128-bit lanes: [v0 lo, v1 lo | v0 hi, v1 hi] and so on, then a
    // permutation puts the 4-byte groups back in order.
    let p01 = _mm256_packs_epi32(v[0], v[1]);
    let p23 = _mm256_packs_epi32(v[2], v[3]);
    let bytes = if signed {
        _mm256_packs_epi16(p01, p23)
    } else {
        _mm256_packus_epi16(p01, p23)
    };
    _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7))
}

/// To 8-bit integers in 8 x 16 blocks with plain stores (for tiles of 16 source rows).
#[target_feature(enable = "avx2,fma")]
unsafe fn to_q8_16<R: Rows>(r: R, q: Quant, signed: bool) -> (usize, usize) {
    let pf = Prefetch::for_rows(&r);
    let (na, nb) = (r.na() / 8 * 8, r.nb() / 16 * 16);
    for a in (0..na).step_by(8) {
        for b in (0..nb).step_by(16) {
            // SAFETY: inside the tile.
            let (t0, t1) = unsafe { (block(r, pf, a, b), block(r, pf, a, b + 8)) };
            for k in 0..8 {
                let p = r.dst(a + k).wrapping_add(b) as *mut __m128i;
                // SAFETY: inside the tile; unaligned store.
                unsafe { _mm_storeu_si128(p, q.pack16(t0[k], t1[k], signed)) };
            }
        }
    }
    (na, nb)
}

/// To 8-bit integers for destination rows of 32 bytes back to back from a 64-byte
/// boundary (`NCHW32c`'s pixels): 16 rows at a time, each source line read whole, the 512
/// contiguous bytes streamed as whole lines. Returns `(0, 0)` for tiles of fewer than 16
/// rows. (Measured f32 -> i8 NCHW -> NCHW32c, N=16,C=256,H=96,W=96, one thread: 26-27 ms
/// with plain stores of 8 x 32 blocks, 17 ms with this kernel.)
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn to_q8_packed<R: Rows>(r: R, quant: Quant, signed: bool) -> (usize, usize) {
    let pf = Prefetch::for_rows(&r);
    let na = r.na() / 16 * 16;
    let mut stage = [[_mm256_setzero_si256(); 4]; 16];
    for a in (0..na).step_by(16) {
        // SAFETY: inside the tile.
        unsafe { quant.fill(r, pf, a, 0, &mut stage) };
        for (k, row) in stage.iter().enumerate() {
            let p = r.dst(a + k) as *mut __m256i;
            // SAFETY: inside the tile; rows 32 bytes apart from a 64-byte boundary, so
            // the 16 rows are 8 whole lines.
            unsafe { _mm256_stream_si256(p, pack4(*row, signed)) };
        }
    }
    if na == 0 {
        (0, 0)
    } else {
        (na, 32)
    }
}

/// Destination rows staged per pass of [`to_q8_quarters`].
const QUARTER_CHUNK: usize = 256;

/// To 8-bit integers for source rows a page or more apart (NCHW's planes): each group of
/// 64 destination columns (one line of bytes) in chunks of [`QUARTER_CHUNK`] destination
/// rows, each quarter of the group (16 source rows) read over the whole chunk before the
/// next, the chunk staged in cache (16 KiB) and streamed out as whole lines. Reading the
/// group's 64 source rows a line each at a time defeated the hardware prefetcher (f32 ->
/// i8 NCHW -> NHWC, N=8,C=256,H=64,W=64, one thread: 39-40% of the copy; 58-67% with 32
/// rows at a time, 63-70% with 16).
///
/// # Safety
/// As [`to_q8`]; `na` a multiple of 16 and `nb` of 64, inside the tile; the destination
/// rows are 64-byte aligned and may be streamed.
#[target_feature(enable = "avx2,fma")]
unsafe fn to_q8_quarters<R: Rows>(
    r: R,
    pf: Prefetch,
    (na, nb): (usize, usize),
    quant: Quant,
    signed: bool,
) -> (usize, usize) {
    #[repr(C, align(64))]
    struct Chunk([[__m128i; 4]; QUARTER_CHUNK]);
    let mut chunk = Chunk([[_mm_setzero_si128(); 4]; QUARTER_CHUNK]);
    let mut ints = [[_mm256_setzero_si256(); 2]; 16];
    let z = _mm256_setzero_si256();
    for b in (0..nb).step_by(64) {
        for a0 in (0..na).step_by(QUARTER_CHUNK) {
            let rows = QUARTER_CHUNK.min(na - a0);
            for q in 0..4 {
                for a in (a0..a0 + rows).step_by(16) {
                    // SAFETY: inside the tile.
                    unsafe { quant.fill(r, pf, a, b + 16 * q, &mut ints) };
                    for (k, v) in ints.iter().enumerate() {
                        let bytes = pack4([v[0], v[1], z, z], signed);
                        chunk.0[a - a0 + k][q] = _mm256_castsi256_si128(bytes);
                    }
                }
            }
            for (k, line) in chunk.0[..rows].iter().enumerate() {
                let p = r.dst(a0 + k).wrapping_add(b) as *mut __m256i;
                // SAFETY: inside the tile; 64-byte aligned rows and b a multiple of 64.
                unsafe {
                    _mm256_stream_si256(p, _mm256_set_m128i(line[1], line[0]));
                    _mm256_stream_si256(p.add(1), _mm256_set_m128i(line[3], line[2]));
                }
            }
        }
    }
    (na, nb)
}

/// To 8-bit integers: 16 x 64 blocks streamed as whole lines (8 x 64 where the tile has
/// fewer than 16 rows), or 8 x 32 blocks with plain stores.
// Indices address rows of one array and columns of another (a transposition).
#[allow(clippy::needless_range_loop)]
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn to_q8<R: Rows>(
    r: R,
    lines: bool,
    quant: Quant,
    signed: bool,
) -> (usize, usize) {
    let pf = Prefetch::for_tile(&r);
    if r.nb() < 32 {
        // SAFETY: as this function's.
        return unsafe { to_q8_16(r, quant, signed) };
    }
    let halves = if lines && r.nb() >= 64 { 2 } else { 1 };
    let w = 32 * halves;
    let (na, nb) = (r.na() / 8 * 8, r.nb() / w * w);
    if halves == 2 && na % 16 == 0 {
        // 16 destination rows at a time, as `to_f16`: each source line read whole, the
        // values staged in cache (4 KiB), quantised, packed and streamed as 16 lines
        // (measured 29-31 -> 23-25 ms on NCHW -> NHWC, N=16,C=256,H=96,W=96, one thread).
        // Source rows under a page apart (NHWC's pixels, one line of each per stage) are
        // all read before any is quantised: the loads then overlap (NHWC -> NCHW, same
        // tensor, ten alternating runs: 21 ms against 28-29 ms quantising each block as
        // it is read). Rows farther apart go by quarters (`to_q8_quarters`).
        if !r.src_rows_close() {
            // SAFETY: as this function's; 16-row blocks, 64-column groups.
            return unsafe { to_q8_quarters(r, pf, (na, nb), quant, signed) };
        }
        let mut floats = [[_mm256_setzero_ps(); 8]; 16];
        // Along the source rows, each block's share of the next band asked for.
        for (a, b) in pf.blocks_in(true, (na, 16), (nb, 64)) {
            // SAFETY: inside the tile.
            unsafe { fill_stage(r, pf, a, b, &mut floats, |v| v) };
            for (k, row) in floats.iter().enumerate() {
                let p = r.dst(a + k).wrapping_add(b) as *mut __m256i;
                let lo4 = quant.pack32([row[0], row[1], row[2], row[3]], signed);
                let hi4 = quant.pack32([row[4], row[5], row[6], row[7]], signed);
                // SAFETY: inside the tile; 64-byte aligned rows and b a multiple of 64.
                unsafe {
                    _mm256_stream_si256(p, lo4);
                    _mm256_stream_si256(p.add(1), hi4);
                }
            }
        }
        return (na, nb);
    }
    for a in (0..na).step_by(8) {
        for b in (0..nb).step_by(w) {
            let mut out = [[_mm256_setzero_si256(); 2]; 8];
            for half in 0..halves {
                let mut q = [[_mm256_setzero_ps(); 4]; 8];
                for j in 0..4 {
                    // SAFETY: inside the tile.
                    let t = unsafe { block(r, pf, a, b + 32 * half + 8 * j) };
                    for k in 0..8 {
                        q[k][j] = t[k];
                    }
                }
                for k in 0..8 {
                    out[k][half] = quant.pack32(q[k], signed);
                }
            }
            for (k, row) in out.iter().enumerate() {
                let p = r.dst(a + k).wrapping_add(b) as *mut __m256i;
                for (h, v) in row.iter().enumerate().take(halves) {
                    // SAFETY: inside the tile; with `lines`, 64-byte aligned rows and b a
                    // multiple of 64.
                    unsafe {
                        if halves == 2 {
                            _mm256_stream_si256(p.add(h), *v);
                        } else {
                            _mm256_storeu_si256(p.add(h), *v);
                        }
                    }
                }
            }
        }
    }
    (na, nb)
}
