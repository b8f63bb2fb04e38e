//! Transposing `f32` -> 8-bit quantisation in AVX-512 (F, BW, DQ, VL): the values are
//! quantised in source order, sixteen of a source row at a time, and the transposition is
//! done on the bytes afterwards (a 16 x 16 block of bytes is four vectors: 12 shuffles,
//! where the `f32` transposition of the AVX2 kernels takes 64 per block before the cast).
//!
//! The tile is walked in groups of 64 destination columns (one line of bytes), and within a
//! group in chunks of [`CHUNK`] destination rows: each quarter of the group (16 source rows)
//! is read over the whole chunk before the next, so that 16 source rows are read at once,
//! not 64 (64 rows a plane apart each read a line at a time defeated the hardware
//! prefetcher: f32 -> i8 NCHW -> NHWC, C = 256, 64 x 64 planes, one thread, 39-40% of the
//! copy with 64 rows at once, 58-70% with 32 or 16 on the AVX2 kernel). The chunk is staged
//! in cache and written out as whole lines.
//!
//! Exactness: as the AVX2 kernels ([`super::quantise_avx2`]): quantised by a fused multiply-add
//! where [`super::casts::quantize_reciprocal`] proves it equal to the reference's division,
//! vectors with a value near a rounding tie by the division.

use super::transpose::x86::Prefetch;
use super::transpose::Rows;
use std::arch::x86_64::*;

/// Destination rows staged per pass over a group's source rows.
const CHUNK: usize = 256;
/// Destination bytes of a group: one line.
const GROUP: usize = 64;

/// The staged chunk: [`CHUNK`] rows of up to [`GROUP`] bytes.
#[repr(C, align(64))]
struct Stage([u8; CHUNK * GROUP]);

/// The quantisation constants, as vectors.
#[derive(Clone, Copy)]
pub(super) struct Quant16 {
    scale: __m512,
    /// See `quantise_avx2::Quant`: values whose `x * recip + zero_point` lies within
    /// `edge` of an integer need no division.
    recip: __m512,
    edge: __m512,
    zp_f: __m512,
    /// Smaller magnitudes quantise to the zero point (replaced by zero before the product,
    /// as the reference does before its division).
    tiny: __m512,
    zp: __m512i,
    signed: bool,
}

impl Quant16 {
    /// The constants for `scale` and `zero_point`, to `i8` (`signed`) or `u8`.
    #[target_feature(enable = "avx512f")]
    pub(super) fn new(scale: f32, zero_point: i32, signed: bool) -> Quant16 {
        let (lo, hi) = if signed { (-128, 127) } else { (0, 255) };
        let (recip, edge) = super::casts::quantize_reciprocal(scale, zero_point, lo, hi);
        Quant16 {
            scale: _mm512_set1_ps(scale),
            recip: _mm512_set1_ps(recip),
            edge: _mm512_set1_ps(edge),
            zp_f: _mm512_set1_ps(zero_point as f32),
            tiny: _mm512_set1_ps(super::casts::quantize_tiny(scale)),
            zp: _mm512_set1_epi32(zero_point),
            signed,
        }
    }

    /// Sixteen floats by the fused multiply-add: `x * recip + zero_point` (the zero point
    /// where `|x|` is below `tiny` or NaN), and each lane's distance from its nearest integer
    /// (`y` less its rounding; NaN stays NaN). Lanes farther than `edge` from an integer lie
    /// near a rounding tie, where only [`Quant16::exact`] gives the reference's result.
    #[target_feature(enable = "avx512f,avx512dq")]
    #[inline]
    fn fast(&self, x: __m512) -> (__m512, __m512) {
        // NaN and magnitudes below `tiny` give the zero point (the comparison is false).
        let keep = _mm512_cmp_ps_mask::<_CMP_GE_OQ>(_mm512_abs_ps(x), self.tiny);
        let y = _mm512_mask3_fmadd_ps(x, self.recip, self.zp_f, keep);
        // imm 8: no fraction bits, round to nearest even, no precision exception.
        (y, _mm512_reduce_ps::<8>(y))
    }

    /// [`Quant16::fast`]'s values, where no lane was near a tie, as i32 whose saturation to
    /// the 8-bit range is the reference's result.
    #[target_feature(enable = "avx512f")]
    #[inline]
    fn convert(y: __m512) -> __m512i {
        // Over 2^30 would not convert; negative values that do not convert give i32::MIN,
        // which saturates as they must. Rounds half to even under the default MXCSR (Rust
        // code never changes it).
        _mm512_cvtps_epi32(_mm512_min_ps(y, _mm512_set1_ps(1_073_741_824.0)))
    }

    /// Sixteen floats quantised by the reference's division (any values; the rare path).
    #[target_feature(enable = "avx512f")]
    #[cold]
    #[inline(never)]
    fn exact(&self, x: __m512) -> __m512i {
        let keep = _mm512_cmp_ps_mask::<_CMP_GE_OQ>(_mm512_abs_ps(x), self.tiny);
        let v = _mm512_maskz_div_ps(keep, x, self.scale);
        let limit = 4_194_304.0; // 2^22: larger values saturate anyway
        let c = _mm512_min_ps(
            _mm512_max_ps(v, _mm512_set1_ps(-limit)),
            _mm512_set1_ps(limit),
        );
        _mm512_add_epi32(_mm512_cvtps_epi32(c), self.zp)
    }

    /// `N` vectors quantised: i32 whose saturation to the 8-bit range is the reference's
    /// result. The fused multiply-add for all, and the division for all where any lane is
    /// near a tie (one test per group keeps the common path free of branches, so it
    /// unrolls and stays in registers). The test takes the largest distance from an integer
    /// over the group's lanes by a tree of `vrangeps` (absolute maximum, sign cleared; NaN
    /// kept, which the unordered comparison counts as near), then compares once: 2
    /// operations per vector where an absolute value, a comparison and an OR of masks were 4
    /// (measured on an AVX-512 Xeon, the sweep's 184 f32 -> i8 rows, two pairs of
    /// alternated passes: tensors under 1 MiB 1.085x and 1.067x by geometric mean of GB/s,
    /// 8 MiB and more 1.10x and 1.01x, the machine's spread between passes;
    /// `bench/results/sweep.md`).
    #[target_feature(enable = "avx512f,avx512dq")]
    #[inline]
    fn quantise<const N: usize>(&self, x: &[__m512; N]) -> [__m512i; N] {
        let mut y = [_mm512_setzero_ps(); N];
        let mut off = [_mm512_setzero_ps(); N];
        for ((y, off), &x) in y.iter_mut().zip(off.iter_mut()).zip(x) {
            (*y, *off) = self.fast(x);
        }
        // Pairwise: off[0] ends as the absolute maximum of all (a chain of N would be N
        // latencies long).
        let mut step = 1;
        while step < N {
            let mut i = 0;
            while i + step < N {
                off[i] = _mm512_range_ps::<0b1011>(off[i], off[i + step]);
                i += 2 * step;
            }
            step *= 2;
        }
        let near = _mm512_cmp_ps_mask::<_CMP_NLE_UQ>(_mm512_abs_ps(off[0]), self.edge);
        let mut out = [_mm512_setzero_si512(); N];
        if near == 0 {
            for (o, &y) in out.iter_mut().zip(&y) {
                *o = Self::convert(y);
            }
        } else {
            for (o, &x) in out.iter_mut().zip(x) {
                *o = self.exact(x);
            }
        }
        out
    }

    /// Four vectors of sixteen i32 saturated to bytes: in each 128-bit lane `l`, dword `r`
    /// holds elements `4l .. 4l + 4` of vector `r`.
    #[target_feature(enable = "avx512f,avx512bw")]
    #[inline]
    fn pack4(&self, q: [__m512i; 4]) -> __m512i {
        let lo = _mm512_packs_epi32(q[0], q[1]);
        let hi = _mm512_packs_epi32(q[2], q[3]);
        if self.signed {
            _mm512_packs_epi16(lo, hi)
        } else {
            _mm512_packus_epi16(lo, hi)
        }
    }
}

/// Sixteen source rows `b..b + 16` (rows from `nb` on read as row `nb - 1`, and not used), their
/// elements `a..a + 16` (the lanes of `amask`), quantised and transposed: vector `j`'s lane
/// `l` holds the 16 bytes of destination row `a + 4l + j`.
///
/// # Safety
/// `b < nb <= r.nb()`; the masked elements are inside the tile; AVX-512 F, BW, DQ present.
#[target_feature(enable = "avx512f,avx512bw,avx512dq")]
#[inline]
unsafe fn block<R: Rows>(
    r: &R,
    pf: Prefetch,
    q: &Quant16,
    (a, b, nb): (usize, usize, usize),
    amask: __mmask16,
) -> [__m512i; 4] {
    // Plain loops, not `array::from_fn` / `map`: their closures compile without this
    // function's target features, so the vector code in them is not inlined but called,
    // each value through memory (that made the quantising transposes compute-bound).
    let mut x = [_mm512_setzero_ps(); 16];
    for (k, v) in x.iter_mut().enumerate() {
        let p = r.src((b + k).min(nb - 1)).wrapping_add(a * 4);
        pf.ahead_of(p);
        // SAFETY: the masked elements are inside the tile (the caller's contract).
        *v = unsafe { _mm512_maskz_loadu_ps(amask, p as *const f32) };
    }
    let ints = q.quantise(&x);
    // Per lane: dword r of group g = row 4g + r, elements 4l .. 4l + 4; a 4 x 4 byte
    // transposition in each dword quartet makes dword j = rows 4g .. 4g + 4 of element
    // 4l + j.
    let swap = _mm512_broadcast_i32x4(_mm_setr_epi8(
        0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15,
    ));
    let mut g = [_mm512_setzero_si512(); 4];
    for (i, v) in g.iter_mut().enumerate() {
        let packed = q.pack4([
            ints[4 * i],
            ints[4 * i + 1],
            ints[4 * i + 2],
            ints[4 * i + 3],
        ]);
        *v = _mm512_shuffle_epi8(packed, swap);
    }
    // Dword j of each group side by side: the 16 rows' bytes of element 4l + j.
    let t0 = _mm512_unpacklo_epi32(g[0], g[1]);
    let t1 = _mm512_unpackhi_epi32(g[0], g[1]);
    let t2 = _mm512_unpacklo_epi32(g[2], g[3]);
    let t3 = _mm512_unpackhi_epi32(g[2], g[3]);
    [
        _mm512_unpacklo_epi64(t0, t2),
        _mm512_unpackhi_epi64(t0, t2),
        _mm512_unpacklo_epi64(t1, t3),
        _mm512_unpackhi_epi64(t1, t3),
    ]
}

/// Transposes and quantises the whole tile (any `na`, `nb`); returns `(na, nb)`.
/// `lines`: destination rows start on 64-byte boundaries and may be streamed; `packed`:
/// the destination rows are 32 bytes back to back from a 64-byte boundary (`NCHW32c`'s
/// pixels, `nb == 32`) and may be streamed.
///
/// # Safety
/// As [`super::transpose::transpose_rows`], with `f32` source and 8-bit destination
/// elements; the CPU has AVX-512 F, BW, DQ and VL.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
pub(super) unsafe fn to_q8<R: Rows>(r: R, lines: bool, packed: bool, q: Quant16) -> (usize, usize) {
    let (na, nb) = (r.na(), r.nb());
    let pf = Prefetch::for_rows(&r);
    let mut band = Prefetch::for_tile(&r).band_share(na.div_ceil(16) * nb.div_ceil(16));
    let packed = packed && nb == 32;
    // Every staged byte `write_out` reads is written first (below), so the stage need not be
    // cleared for each tile.
    let mut stage = std::mem::MaybeUninit::<Stage>::uninit();
    let base = stage.as_mut_ptr() as *mut u8;
    for g0 in (0..nb).step_by(GROUP) {
        let width = GROUP.min(nb - g0);
        // Staged rows are 16-byte slots, `pitch` bytes apart.
        let pitch = width.next_multiple_of(16);
        for a0 in (0..na).step_by(CHUNK) {
            let rows = CHUNK.min(na - a0);
            for b in (g0..g0 + width).step_by(16) {
                for a in (a0..a0 + rows).step_by(16) {
                    band();
                    let amask = (u32::MAX >> (32 - (na - a).min(16))) as __mmask16;
                    // SAFETY: b < nb; the masked elements are inside the tile.
                    let v = unsafe { block(&r, pf, &q, (a, b, nb), amask) };
                    for (j, v) in v.iter().enumerate() {
                        let lanes = [
                            _mm512_castsi512_si128(*v),
                            _mm512_extracti32x4_epi32::<1>(*v),
                            _mm512_extracti32x4_epi32::<2>(*v),
                            _mm512_extracti32x4_epi32::<3>(*v),
                        ];
                        for (l, lane) in lanes.into_iter().enumerate() {
                            let row = a - a0 + 4 * l + j;
                            // SAFETY: row < CHUNK (chunks are whole 16-row blocks) and the
                            // slot lies inside the row's pitch; 16-byte aligned.
                            unsafe {
                                let p = base.add(row * pitch + (b - g0)) as *mut __m128i;
                                _mm_store_si128(p, lane);
                            }
                        }
                    }
                }
            }
            // SAFETY: the chunk's destination rows are inside the tile (the caller's
            // contract), `rows` staged rows of `pitch` bytes.
            unsafe { write_out(&r, base, (a0, rows), (g0, width, pitch), lines, packed) };
        }
    }
    (na, nb)
}

/// Writes `rows` staged rows (at `base`, `pitch` bytes apart) to destination rows `a0..`,
/// columns `g0 .. g0 + width`: as whole streamed lines where the rows are lines (or packed),
/// else with masked stores.
///
/// # Safety
/// The destination rows and columns are inside the tile; AVX-512 F, BW present.
#[target_feature(enable = "avx512f,avx512bw")]
#[inline]
unsafe fn write_out<R: Rows>(
    r: &R,
    base: *const u8,
    (a0, rows): (usize, usize),
    (g0, width, pitch): (usize, usize, usize),
    lines: bool,
    packed: bool,
) {
    if packed {
        // Rows of 32 bytes back to back: the staged rows (pitch 32) are the destination's
        // bytes in order, whole lines from a 64-byte boundary (a0 is a multiple of CHUNK).
        let d = r.dst(a0);
        let bytes = rows * 32;
        let whole = bytes / 64 * 64;
        for i in (0..whole).step_by(64) {
            // SAFETY: inside the staged and the destination range; `d + i` 64-byte aligned.
            unsafe {
                let v = _mm512_load_si512(base.add(i) as *const __m512i);
                _mm512_stream_si512(d.add(i) as *mut __m512i, v);
            }
        }
        if whole < bytes {
            // SAFETY: as above, 32 bytes (one row) left.
            unsafe {
                let v = _mm256_load_si256(base.add(whole) as *const __m256i);
                _mm256_storeu_si256(d.add(whole) as *mut __m256i, v);
            }
        }
        return;
    }
    let mask = u64::MAX >> (64 - width);
    for k in 0..rows {
        let d = r.dst(a0 + k).wrapping_add(g0);
        // SAFETY: the staged row is `pitch` >= `width` bytes, 16-byte aligned (masked load,
        // so reading past `pitch` never happens); the destination's `width` bytes are in the
        // tile, and a full 64 bytes from a line start with `lines`.
        unsafe {
            let v = _mm512_maskz_loadu_epi8(mask, base.add(k * pitch) as *const i8);
            if lines && width == GROUP {
                _mm512_stream_si512(d as *mut __m512i, v);
            } else {
                _mm512_mask_storeu_epi8(d as *mut i8, mask, v);
            }
        }
    }
}

/// Quantises the contiguous run `src` into `dst`, 64 values at a time, as far as both have
/// whole groups of 64; returns how many it did (the caller quantises the rest). (In cache,
/// f32 -> i8 of a 64 KiB run took the AVX2 loop about 2.9 us, 28 GB/s, against a copy's
/// 130 GB/s.)
///
/// # Safety
/// The CPU has AVX-512 F, BW and DQ.
#[target_feature(enable = "avx512f,avx512bw,avx512dq")]
pub(super) unsafe fn quantise_run(src: &[f32], dst: &mut [u8], q: &Quant16) -> usize {
    let n = src.len().min(dst.len()) / 64 * 64;
    // The packs leave dword `4l + r` holding values `16r + 4l ..`: back in order.
    let order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    for (s, d) in src[..n].chunks_exact(64).zip(dst[..n].chunks_exact_mut(64)) {
        let p = s.as_ptr();
        // SAFETY: `s` holds 64 floats and `d` 64 bytes (chunks_exact); unaligned loads and
        // store.
        unsafe {
            for k in [0, 16, 32, 48] {
                // As the AVX2 loop: 4 KiB ahead, a line at a time.
                _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(1024 + k) as *const i8);
            }
            // A loop, not `map`: see `block`.
            let mut x = [_mm512_setzero_ps(); 4];
            for (k, v) in x.iter_mut().enumerate() {
                *v = _mm512_loadu_ps(p.add(16 * k));
            }
            let ints = q.quantise(&x);
            let bytes = _mm512_permutexvar_epi32(order, q.pack4(ints));
            _mm512_storeu_si512(d.as_mut_ptr() as *mut __m512i, bytes);
        }
    }
    n
}
