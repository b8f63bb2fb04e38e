//! The x86-64 kernels. Each returns `(da, db)`: it did rows `..da`, columns `..db`.
//! Safety for all: the contract of [`super::transpose_rows`], plus the CPU feature each
//! names (SSE2 is part of x86-64). The AVX2 kernels' bodies (`*_body`) name no feature: they
//! are always inlined into the functions of [`avx2`] and [`avx512`], which do, and are
//! called only through those.
use super::{Prefetching, Rows};
use std::arch::x86_64::*;

mod bytes;
pub(super) mod edges;
mod prefetch;
use prefetch::blocks;
pub(crate) use prefetch::Prefetch;
mod sse2;
use sse2::u8_block as sse2_u8_block;
pub(super) use sse2::{
    u16_blocks, u16_blocks4, u16_lines, u16_rows4, u32_blocks4, u8_blocks, u8_blocks8, u8_lines,
    u8_rows8, units,
};

/// Copies `bytes` (a multiple of 64) from `s` to `d` with streaming stores, 16 bytes at a
/// time.
///
/// # Safety
/// `bytes` bytes are readable from `s` and writable from `d`; `d` is 64-byte aligned.
pub(crate) unsafe fn stream_lines(d: *mut u8, s: *const u8, bytes: usize) {
    for i in (0..bytes).step_by(16) {
        // SAFETY: inside both ranges (the caller's contract), `d + i` 16-byte aligned; SSE2 is
        // part of x86-64.
        unsafe {
            _mm_stream_si128(
                d.add(i) as *mut __m128i,
                _mm_loadu_si128(s.add(i) as *const __m128i),
            )
        };
    }
}

/// [`stream_lines`] 32 bytes at a time.
///
/// # Safety
/// As [`stream_lines`]; AVX2 is present.
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn stream_lines_avx2(d: *mut u8, s: *const u8, bytes: usize) {
    for i in (0..bytes).step_by(32) {
        // SAFETY: inside both ranges (the caller's contract), `d + i` 32-byte aligned.
        unsafe {
            let v = _mm256_loadu_si256(s.add(i) as *const __m256i);
            _mm256_stream_si256(d.add(i) as *mut __m256i, v);
        }
    }
}

/// Source rows `b..b+8`, float columns `a..a+8`, transposed: vector `k` is column `a + k`;
/// each row's data `prefetch` on is asked for too.
///
/// # Safety
/// The rows and columns are inside the tile (the caller's contract); AVX2 is present.
#[target_feature(enable = "avx2")]
#[inline]
pub(crate) unsafe fn f32_block8<R: Rows>(
    r: R,
    a: usize,
    b: usize,
    prefetch: Prefetch,
) -> [__m256; 8] {
    transpose8(std::array::from_fn(|k| {
        let p = r.src(b + k).wrapping_add(a * 4);
        prefetch.ahead_of(p);
        // SAFETY: inside the tile (the caller's contract).
        unsafe { _mm256_loadu_ps(p as *const f32) }
    }))
}

/// The 8x8 transpose of eight rows of eight floats.
#[target_feature(enable = "avx2")]
#[inline]
fn transpose8(r: [__m256; 8]) -> [__m256; 8] {
    let t0 = _mm256_unpacklo_ps(r[0], r[1]);
    let t1 = _mm256_unpackhi_ps(r[0], r[1]);
    let t2 = _mm256_unpacklo_ps(r[2], r[3]);
    let t3 = _mm256_unpackhi_ps(r[2], r[3]);
    let t4 = _mm256_unpacklo_ps(r[4], r[5]);
    let t5 = _mm256_unpackhi_ps(r[4], r[5]);
    let t6 = _mm256_unpacklo_ps(r[6], r[7]);
    let t7 = _mm256_unpackhi_ps(r[6], r[7]);
    let u0 = _mm256_shuffle_ps::<0x44>(t0, t2);
    let u1 = _mm256_shuffle_ps::<0xEE>(t0, t2);
    let u2 = _mm256_shuffle_ps::<0x44>(t1, t3);
    let u3 = _mm256_shuffle_ps::<0xEE>(t1, t3);
    let u4 = _mm256_shuffle_ps::<0x44>(t4, t6);
    let u5 = _mm256_shuffle_ps::<0xEE>(t4, t6);
    let u6 = _mm256_shuffle_ps::<0x44>(t5, t7);
    let u7 = _mm256_shuffle_ps::<0xEE>(t5, t7);
    [
        _mm256_permute2f128_ps::<0x20>(u0, u4),
        _mm256_permute2f128_ps::<0x20>(u1, u5),
        _mm256_permute2f128_ps::<0x20>(u2, u6),
        _mm256_permute2f128_ps::<0x20>(u3, u7),
        _mm256_permute2f128_ps::<0x31>(u0, u4),
        _mm256_permute2f128_ps::<0x31>(u1, u5),
        _mm256_permute2f128_ps::<0x31>(u2, u6),
        _mm256_permute2f128_ps::<0x31>(u3, u7),
    ]
}

/// 8 x 8 blocks of floats; with `STREAM`, streaming stores (the caller checked that the
/// destination rows are packed from a 64-byte boundary, so each block is whole lines).
#[inline(always)]
unsafe fn f32_blocks_body<const STREAM: bool, R: Rows>(r: R) -> (usize, usize) {
    let (na, nb) = (r.na() / 8 * 8, r.nb() / 8 * 8);
    let pf = Prefetch::for_tile(&r);
    for (a, b) in pf.blocks(&r, (na, 8), (nb, 8)) {
        // SAFETY: rows b..b+8 at columns a..a+8 and rows a..a+8 at columns b..b+8
        // are inside the tile.
        unsafe {
            let t = f32_block8(r, a, b, pf);
            for (k, v) in t.into_iter().enumerate() {
                let p = (r.dst(a + k) as *mut f32).add(b);
                if STREAM {
                    _mm256_stream_ps(p, v);
                } else {
                    _mm256_storeu_ps(p, v);
                }
            }
        }
    }
    (na, nb)
}

/// 8 x 16 blocks of floats: each destination row gets one whole line, written by two
/// consecutive stores, streamed past the cache where `STREAM` (plain stores leave it in
/// cache, and still write each line whole: 8 x 8 blocks wrote half lines, each line's two
/// halves far apart in time). Destination rows are 64-byte aligned (checked by the caller).
#[inline(always)]
unsafe fn f32_lines_body<const STREAM: bool, R: Rows>(r: R) -> (usize, usize) {
    let (na, nb) = (r.na() / 8 * 8, r.nb() / 16 * 16);
    let pf = Prefetch::for_tile(&r);
    for (a, b) in pf.blocks(&r, (na, 8), (nb, 16)) {
        // SAFETY: inside the tile; destination addresses are 64-byte aligned rows plus
        // a multiple of 64 bytes.
        unsafe {
            let lo = f32_block8(r, a, b, pf);
            let hi = f32_block8(r, a, b + 8, pf);
            for k in 0..8 {
                let p = (r.dst(a + k) as *mut f32).add(b);
                if STREAM {
                    _mm256_stream_ps(p, lo[k]);
                    _mm256_stream_ps(p.add(8), hi[k]);
                } else {
                    _mm256_storeu_ps(p, lo[k]);
                    _mm256_storeu_ps(p.add(8), hi[k]);
                }
            }
        }
    }
    (na, nb)
}

/// Four source rows from `b`, 8-byte columns `a..a+4`, transposed.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn u64_block4<R: Rows>(rows: R, a: usize, b: usize, pf: Prefetch) -> [__m256d; 4] {
    let mut r = [_mm256_setzero_pd(); 4];
    let mut src = rows.src_walk(b);
    for v in r.iter_mut() {
        let p = src().wrapping_add(a * 8);
        pf.ahead_of(p);
        // SAFETY: inside the tile (the caller's contract).
        *v = unsafe { _mm256_loadu_pd(p as *const f64) };
    }
    let t0 = _mm256_unpacklo_pd(r[0], r[1]);
    let t1 = _mm256_unpackhi_pd(r[0], r[1]);
    let t2 = _mm256_unpacklo_pd(r[2], r[3]);
    let t3 = _mm256_unpackhi_pd(r[2], r[3]);
    [
        _mm256_permute2f128_pd::<0x20>(t0, t2),
        _mm256_permute2f128_pd::<0x20>(t1, t3),
        _mm256_permute2f128_pd::<0x31>(t0, t2),
        _mm256_permute2f128_pd::<0x31>(t1, t3),
    ]
}

/// 4 x 4 blocks of 8-byte elements (or units), plain stores.
#[inline(always)]
unsafe fn u64_blocks_body<R: Rows>(r: R) -> (usize, usize) {
    let (na, nb) = (r.na() / 4 * 4, r.nb() / 4 * 4);
    let pf = Prefetch::for_tile(&r);
    for (a, b) in pf.blocks(&r, (na, 4), (nb, 4)) {
        // SAFETY: inside the tile.
        unsafe {
            let t = u64_block4(r, a, b, pf);
            let mut dst = r.dst_walk(a);
            for v in t {
                _mm256_storeu_pd(dst().add(b * 8) as *mut f64, v);
            }
        }
    }
    (na, nb)
}

/// 4 x 8 blocks of 8-byte elements: each destination row's line streamed.
#[inline(always)]
unsafe fn u64_lines_body<R: Rows>(r: R) -> (usize, usize) {
    let (na, nb) = (r.na() / 4 * 4, r.nb() / 8 * 8);
    let pf = Prefetch::for_tile(&r);
    for (a, b) in pf.blocks(&r, (na, 4), (nb, 8)) {
        // SAFETY: inside the tile; aligned destination lines.
        unsafe {
            let lo = u64_block4(r, a, b, pf);
            let hi = u64_block4(r, a, b + 4, pf);
            let mut dst = r.dst_walk(a);
            for k in 0..4 {
                let p = dst().add(b * 8) as *mut f64;
                _mm256_stream_pd(p, lo[k]);
                _mm256_stream_pd(p.add(4), hi[k]);
            }
        }
    }
    (na, nb)
}

/// 2 x 4 blocks of 16-byte units (an image pixel of four floats): each of the two
/// destination rows gets one whole line, streamed.
#[inline(always)]
unsafe fn u128_lines_body<R: Rows>(r: R) -> (usize, usize) {
    let (na, nb) = (r.na() / 2 * 2, r.nb() / 4 * 4);
    let pf = Prefetch::for_tile(&r);
    for (a, b) in pf.blocks(&r, (na, 2), (nb, 4)) {
        // SAFETY: inside the tile; aligned destination lines.
        unsafe {
            // Units a, a+1 of source rows b..b+4.
            let mut y = [_mm256_setzero_si256(); 4];
            for (k, v) in y.iter_mut().enumerate() {
                pf.ahead_of(r.src(b + k).wrapping_add(a * 16));
                *v = _mm256_loadu_si256(r.src(b + k).add(a * 16) as *const __m256i);
            }
            let p = r.dst(a).add(b * 16) as *mut __m256i;
            _mm256_stream_si256(p, _mm256_permute2x128_si256::<0x20>(y[0], y[1]));
            _mm256_stream_si256(p.add(1), _mm256_permute2x128_si256::<0x20>(y[2], y[3]));
            let q = r.dst(a + 1).add(b * 16) as *mut __m256i;
            _mm256_stream_si256(q, _mm256_permute2x128_si256::<0x31>(y[0], y[1]));
            _mm256_stream_si256(q.add(1), _mm256_permute2x128_si256::<0x31>(y[2], y[3]));
        }
    }
    (na, nb)
}

/// Sixteen rows of sixteen 2-byte elements from source rows `b..b+16`, columns
/// `a..a+16`, transposed: vector `c` is column `a + c`. Always inlined into the caller,
/// which has AVX2: out of line (as `#[inline]` left it), its 16 vectors went through memory
/// (measured, eight processes alternating each build: f16 OIHW -> OIHW16i16o one thread
/// 9.8 -> 6.2 ms median, f16 NHWC -> NCHW 6.6 -> 6.2 ms).
#[inline(always)]
unsafe fn u16_block16<R: Rows>(rows: R, a: usize, b: usize, pf: Prefetch) -> [__m256i; 16] {
    // SAFETY: the caller has AVX2 (this is inlined into its kernels).
    unsafe {
        let mut r = [_mm256_setzero_si256(); 16];
        let mut src = rows.src_walk(b);
        for v in r.iter_mut() {
            let p = src().wrapping_add(a * 2);
            // Inside the tile (the caller's contract).
            *v = _mm256_loadu_si256(p as *const __m256i);
            pf.ahead_of(p);
        }
        u16_transpose16(r)
    }
}

/// The 16 x 16 transpose of sixteen rows of sixteen 2-byte elements: vector `c` is column
/// `c`. Always inlined into a caller that has AVX2.
#[inline(always)]
unsafe fn u16_transpose16(r: [__m256i; 16]) -> [__m256i; 16] {
    // SAFETY: the caller has AVX2 (this is inlined into its kernels).
    unsafe {
        // Within each 128-bit lane (columns 8L..8L+8): pairs of rows, then quads, then eights.
        let mut t = [_mm256_setzero_si256(); 16];
        for i in 0..8 {
            t[2 * i] = _mm256_unpacklo_epi16(r[2 * i], r[2 * i + 1]);
            t[2 * i + 1] = _mm256_unpackhi_epi16(r[2 * i], r[2 * i + 1]);
        }
        // u[4g + c]: rows 4g..4g+4, columns 2c, 2c+1 of each lane.
        let mut u = [_mm256_setzero_si256(); 16];
        for g in 0..4 {
            u[4 * g] = _mm256_unpacklo_epi32(t[4 * g], t[4 * g + 2]);
            u[4 * g + 1] = _mm256_unpackhi_epi32(t[4 * g], t[4 * g + 2]);
            u[4 * g + 2] = _mm256_unpacklo_epi32(t[4 * g + 1], t[4 * g + 3]);
            u[4 * g + 3] = _mm256_unpackhi_epi32(t[4 * g + 1], t[4 * g + 3]);
        }
        // v[8h + c]: rows 8h..8h+8, column c of each lane.
        let mut v = [_mm256_setzero_si256(); 16];
        for h in 0..2 {
            for c in 0..4 {
                v[8 * h + 2 * c] = _mm256_unpacklo_epi64(u[8 * h + c], u[8 * h + 4 + c]);
                v[8 * h + 2 * c + 1] = _mm256_unpackhi_epi64(u[8 * h + c], u[8 * h + 4 + c]);
            }
        }
        // Column c of lane 0 and of lane 1: rows 0..8 from v[c], rows 8..16 from v[8 + c].
        let mut out = [_mm256_setzero_si256(); 16];
        for c in 0..8 {
            out[c] = _mm256_permute2x128_si256::<0x20>(v[c], v[8 + c]);
            out[8 + c] = _mm256_permute2x128_si256::<0x31>(v[c], v[8 + c]);
        }
        out
    }
}

/// 16 x 16 blocks of 2-byte elements, plain stores.
#[inline(always)]
unsafe fn u16_blocks_body<R: Rows>(r: R) -> (usize, usize) {
    let (na, nb) = (r.na() / 16 * 16, r.nb() / 16 * 16);
    let pf = Prefetch::for_tile(&r);
    for (a, b) in pf.blocks(&r, (na, 16), (nb, 16)) {
        // SAFETY: inside the tile.
        unsafe {
            let t = u16_block16(r, a, b, pf);
            let mut dst = r.dst_walk(a);
            for v in t {
                _mm256_storeu_si256(dst().add(b * 2) as *mut __m256i, v);
            }
        }
    }
    (na, nb)
}

/// 16 x 8 blocks of 2-byte elements into destination rows of eight back to back from a
/// 64-byte boundary (kHWC8's pixels, eight channels of which `nb == 8` source rows give some
/// and fill rows the rest): each block's 256 bytes are four whole lines, written by eight
/// 32-byte streaming stores (the SSE kernel wrote sixteen of 16 bytes and stalled on the
/// first store of each line: f16 NCHW -> kHWC8 N=16,C=3,H=1024,W=1024, one thread,
/// 15.5-24 -> 10.8-12.3 ms in one process alternating both).
#[inline(always)]
unsafe fn u16_packed8_body<R: Rows>(r: R) -> (usize, usize) {
    let na = r.na() / 16 * 16;
    let pf = Prefetch::for_tile(&r);
    for (a, _) in pf.blocks(&r, (na, 16), (8, 8)) {
        // SAFETY (whole block): rows ..8 at columns a..a+16 and destination rows a..a+16 are
        // inside the tile; the destination rows are back to back from a 64-byte boundary, so
        // row a + 2m (a a multiple of 16) starts on a 32-byte boundary.
        unsafe {
            let v: [__m256i; 8] = std::array::from_fn(|k| {
                let p = r.src(k).add(a * 2);
                pf.ahead_of(p);
                _mm256_loadu_si256(p as *const __m256i)
            });
            // Within each 128-bit lane (columns a..a+8, then a+8..a+16): the 8 x 8 transpose.
            let t: [__m256i; 8] = std::array::from_fn(|i| {
                let (x, y) = (v[i / 2 * 2], v[i / 2 * 2 + 1]);
                if i % 2 == 0 {
                    _mm256_unpacklo_epi16(x, y)
                } else {
                    _mm256_unpackhi_epi16(x, y)
                }
            });
            // u[4g + c]: rows 4g..4g+4, columns 2c, 2c+1 of each lane.
            let u: [__m256i; 8] = std::array::from_fn(|i| {
                let (g, c) = (i / 4, i % 4);
                let (x, y) = (t[4 * g + c / 2], t[4 * g + 2 + c / 2]);
                if c % 2 == 0 {
                    _mm256_unpacklo_epi32(x, y)
                } else {
                    _mm256_unpackhi_epi32(x, y)
                }
            });
            // w[c]: column c of each lane, rows 0..8.
            let w: [__m256i; 8] = std::array::from_fn(|c| {
                let (x, y) = (u[c / 2], u[4 + c / 2]);
                if c % 2 == 0 {
                    _mm256_unpacklo_epi64(x, y)
                } else {
                    _mm256_unpackhi_epi64(x, y)
                }
            });
            for m in 0..4 {
                let (x, y) = (w[2 * m], w[2 * m + 1]);
                let lo = r.dst(a + 2 * m) as *mut __m256i;
                let hi = r.dst(a + 8 + 2 * m) as *mut __m256i;
                _mm256_stream_si256(lo, _mm256_permute2x128_si256::<0x20>(x, y));
                _mm256_stream_si256(hi, _mm256_permute2x128_si256::<0x31>(x, y));
            }
        }
    }
    (na, 8)
}

/// 16 x 32 blocks of 2-byte elements: two transposes, each destination row's line written
/// by two consecutive stores, streamed past the cache where `STREAM` (plain stores: see
/// [`f32_lines_body`]).
#[inline(always)]
unsafe fn u16_lines_body<const STREAM: bool, R: Rows>(r: R) -> (usize, usize) {
    let (na, nb) = (r.na() / 16 * 16, r.nb() / 32 * 32);
    let pf = Prefetch::for_tile(&r);
    for (a, b) in pf.blocks(&r, (na, 16), (nb, 32)) {
        // SAFETY: inside the tile; aligned destination lines.
        unsafe {
            let lo = u16_block16(r, a, b, pf);
            let hi = u16_block16(r, a, b + 16, pf);
            let mut dst = r.dst_walk(a);
            for k in 0..16 {
                let p = dst().add(b * 2) as *mut __m256i;
                if STREAM {
                    _mm256_stream_si256(p, lo[k]);
                    _mm256_stream_si256(p.add(1), hi[k]);
                } else {
                    _mm256_storeu_si256(p, lo[k]);
                    _mm256_storeu_si256(p.add(1), hi[k]);
                }
            }
        }
    }
    (na, nb)
}

/// The AVX2 kernels above as callable functions, twice: compiled for AVX2, and for AVX-512VL
/// (the same instructions, with 32 vector registers instead of 16: the AVX2 build of the
/// 8 x 16 float kernel spills its transposes to the stack, the AVX-512VL one does not).
/// Measured in one process alternating both, one thread, N=16,C=256,H=96,W=96 and
/// O=4096,I=1024,H=3,W=3, six to eight rounds: f16 NHWC -> NCHW 7-16% faster, f32 NHWC -> NCHW
/// 5%, f32 OIHW -> OIHW16i16o 4% (4-25% in earlier runs), f32 NCHW -> NCHW32c 5%; f16
/// NCHW -> NHWC, f16 NCHW -> NCHW32c and f32 NHWC -> mace:in_out_channel 1-2% slower, the
/// rest within 1%.
macro_rules! compiled_for {
    ($($name:ident => $body:path;)*) => {
        /// For CPUs with AVX2.
        pub(crate) mod avx2 {
            use super::*;
            kernels_with_features!("avx2", "AVX2 is present"; $($name => $body;)*);
        }

        /// For CPUs with AVX-512F and AVX-512VL.
        pub(crate) mod avx512 {
            use super::*;
            kernels_with_features!(
                "avx2,avx512f,avx512vl",
                "AVX2, AVX-512F and AVX-512VL are present";
                $($name => $body;)*
            );
        }
    };
}

/// One build of [`compiled_for`]'s kernels: each taking its rows by reference (see
/// `transpose_rows_inlined`) and running its body compiled with or without prefetches
/// ([`Prefetching`]), for the target features `$features`.
macro_rules! kernels_with_features {
    ($features:literal, $present:literal; $($name:ident => $body:path;)*) => {
        $(
            /// # Safety
            #[doc = concat!("The contract of [`super::super::transpose_rows`]; ", $present, ".")]
            #[target_feature(enable = $features)]
            pub(crate) unsafe fn $name<R: Rows>(r: &R) -> (usize, usize) {
                let r = *r;
                // SAFETY: as this function's.
                unsafe {
                    if r.prefetched() {
                        $body(Prefetching::<R, true> { rows: r })
                    } else {
                        $body(Prefetching::<R, false> { rows: r })
                    }
                }
            }
        )*
    };
}

compiled_for! {
    f32_blocks_streamed => f32_blocks_body::<true, _>;
    f32_blocks_stored => f32_blocks_body::<false, _>;
    f32_lines => f32_lines_body::<true, _>;
    f32_lines_stored => f32_lines_body::<false, _>;
    u64_blocks => u64_blocks_body;
    u64_lines => u64_lines_body;
    u128_lines => u128_lines_body;
    u16_blocks => u16_blocks_body;
    u16_lines => u16_lines_body::<true, _>;
    u16_lines_stored => u16_lines_body::<false, _>;
    u16_packed8 => u16_packed8_body;
    u8_blocks32 => bytes::u8_blocks32_body;
    u8_lines32 => bytes::u8_lines32_body;
}
