//! Records expanded straight into a streamed destination: the vectors [`super::records`]'s
//! kernels build (each record's data placed over a template of its fill) stored past the
//! cache with non-temporal stores, where the records otherwise went to a scratch piece first
//! and were copied out from there.
//!
//! Why: a destination that is mostly fill (one channel into kHWC8's 8-element records or
//! NCHW32c's 32-element ones) is written at the speed of its stores, and the scratch route
//! stored every byte twice and read it once more. f32 `NCHW -> kHWC8` of one channel, 32 MiB
//! on a Zen 5: the scratch route ran at 60% of the copy, its profile split between the
//! expansion into the scratch piece and the copy out of it.
//!
//! Records of `out` bytes are taken where `out` divides the vector (several records per
//! vector, placed by a byte permutation: `vpermt2b` with AVX-512 VBMI, `vpshufb` per 128-bit
//! lane with AVX2) or is a multiple of it up to [`MAX_VECTORS`] vectors (the record's first
//! vector made the same way, the others, fill only, stored from the template).

use std::arch::x86_64::*;

/// The most vectors a record may span (NCHW32c's f32 records: two of 64 bytes, four of 32).
const MAX_VECTORS: usize = 8;

/// Whether [`expand_avx512`] / [`expand_avx2`] (vectors of `vector` bytes: 64 or 32) take
/// records of `data` bytes in `out`: each load (a whole vector with AVX-512, one 128-bit lane
/// with AVX2) holds whole records, each destination vector's records come from one load, and
/// `out` divides the vector or is a multiple of it of at most [`MAX_VECTORS`].
pub(super) fn takes(data: usize, out: usize, vector: usize) -> bool {
    let load: usize = match vector {
        64 => 64,
        32 => 16,
        _ => return false,
    };
    let per = (vector / out).max(1);
    data < out
        && load.is_multiple_of(data)
        && per * data <= load
        && (vector.is_multiple_of(out)
            || (out.is_multiple_of(vector) && out / vector <= MAX_VECTORS))
}

/// Byte `at` of the records' template (records of `out` bytes back to back from byte 0): a
/// record's bytes `0..data` zero, its byte `i >= data` the fill's `fill[i - data]`.
fn template(data: usize, out: usize, fill: &[u8], at: usize) -> u8 {
    if at % out < data {
        0
    } else {
        fill[at % out - data]
    }
}

/// For vectors of `N` bytes: the indices of the first destination vector (records `0..N /
/// out`, or the first `N` bytes of one record; [`super::records_x86::expansion`]'s, fill bytes
/// indexing the template when `two_sources`, else zeroed), and the template's first
/// `out.div_ceil(N)` vectors (the others zero).
fn first_and_templates<const N: usize>(
    data: usize,
    out: usize,
    fill: &[u8],
    two_sources: bool,
) -> ([u8; N], [[u8; N]; MAX_VECTORS]) {
    let (first, _) = super::records_x86::expansion::<N>(data, out, fill, two_sources);
    let vectors = out.div_ceil(N);
    let tpl = std::array::from_fn(|k| {
        std::array::from_fn(|i| {
            if k < vectors {
                template(data, out, fill, N * k + i)
            } else {
                0
            }
        })
    });
    (first, tpl)
}

/// Writes the first records of `dst` (`count` records of `out` bytes, `dst` starting on a
/// 64-byte boundary), the data of record `r` from `src[r * data..]`, the fill after it;
/// returns how many (whole groups of `64 / data` records whose 64 source bytes lie inside
/// `src`; the caller writes the rest with ordinary stores and fences the streaming stores
/// before the destination is read).
///
/// Per group one 64-byte load of its records' data (and a prefetch ahead along the source),
/// then per destination vector one two-source permutation of the loaded data and the
/// template, its indices stepped to the next records by one masked add. (A masked load of
/// each destination vector's few data bytes held the stores to about 60% of the rate of
/// stores alone: f32 `NCHW -> kHWC8` of one channel on a Zen 5.)
///
/// # Safety
/// The CPU has AVX-512F, BW and VBMI; [`takes`]`(data, out, 64)`; `src` holds `count * data`
/// bytes, `dst` `count * out`, `fill` `out - data`; `dst` is 64-byte aligned.
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
pub(super) unsafe fn expand_avx512(
    src: &[u8],
    dst: &mut [u8],
    count: usize,
    (data, out): (usize, usize),
    fill: &[u8],
) -> usize {
    debug_assert!(takes(data, out, 64) && dst.as_ptr().addr().is_multiple_of(64));
    let src = &src[..count * data];
    let dst = &mut dst[..count * out];
    // Records per destination vector (one where a record spans several vectors), vectors
    // per record after the first (fill only), records per 64-byte load.
    let per = (64 / out).max(1);
    let vectors = out.div_ceil(64);
    let group = 64 / data;
    // The first destination vector's indices: data bytes index the loaded vector, fill
    // bytes (64 and up) the template.
    let (first, bytes) = first_and_templates::<64>(data, out, fill, true);
    let data_lanes: __mmask64 = (0..64)
        .filter(|i| i % out < data)
        .fold(0, |m, i| m | 1 << i);
    // SAFETY: 64 bytes read from each 64-byte array.
    let (first, tpl) = unsafe {
        (
            _mm512_loadu_si512(first.as_ptr().cast()),
            bytes.map(|b| _mm512_loadu_si512(b.as_ptr().cast())),
        )
    };
    let step = _mm512_set1_epi8((per * data) as i8);
    let mut r = 0;
    while r + group <= count {
        // SAFETY: the group's 64 source bytes in bounds (`(r + group) * data <= count *
        // data`), its `group * out` destination bytes too, every store on a 64-byte boundary
        // (`dst` aligned; `per * out` is 64, or `out` a multiple of 64). A prefetch never
        // faults.
        unsafe {
            let s = src.as_ptr().add(r * data);
            _mm_prefetch::<_MM_HINT_T0>(s.wrapping_add(1024).cast());
            let v = _mm512_loadu_si512(s.cast());
            let mut idx = first;
            let mut d = dst.as_mut_ptr().add(r * out);
            for _ in 0..group / per {
                _mm512_stream_si512(d.cast(), _mm512_permutex2var_epi8(v, idx, tpl[0]));
                for t in &tpl[1..vectors] {
                    d = d.add(64);
                    _mm512_stream_si512(d.cast(), *t);
                }
                d = d.add(64);
                idx = _mm512_mask_add_epi8(idx, data_lanes, idx, step);
            }
        }
        r += group;
    }
    r
}

/// As [`expand_avx512`] with 32-byte vectors: per group of `16 / data` records one 16-byte
/// load of their data into both 128-bit lanes, then per destination vector one `vpshufb`
/// (each lane indexes the same 16 bytes) ORed with the template, its control stepped to the
/// next records by one add.
///
/// # Safety
/// The CPU has AVX2; [`takes`]`(data, out, 32)`; `src`, `dst` and `fill` as
/// [`expand_avx512`]'s; `dst` is 32-byte aligned.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn expand_avx2(
    src: &[u8],
    dst: &mut [u8],
    count: usize,
    (data, out): (usize, usize),
    fill: &[u8],
) -> usize {
    debug_assert!(takes(data, out, 32) && dst.as_ptr().addr().is_multiple_of(32));
    let src = &src[..count * data];
    let dst = &mut dst[..count * out];
    let per = (32 / out).max(1);
    let vectors = out.div_ceil(32);
    let group = 16 / data;
    // The first destination vector's indices: its data bytes' in the loaded 16 bytes, 0x80
    // (a zero, where the template's fill is ORed in) elsewhere. The step adds `per * data` to
    // the data bytes' indices only (0x80 + 0 stays a zero).
    let (first, bytes) = first_and_templates::<32>(data, out, fill, false);
    let step: [u8; 32] = std::array::from_fn(|i| {
        if i % out < data {
            (per * data) as u8
        } else {
            0
        }
    });
    // SAFETY: 32 bytes read from each 32-byte array.
    let (first, step, tpl) = unsafe {
        (
            _mm256_loadu_si256(first.as_ptr().cast()),
            _mm256_loadu_si256(step.as_ptr().cast()),
            bytes.map(|b| _mm256_loadu_si256(b.as_ptr().cast())),
        )
    };
    let mut r = 0;
    while r + group <= count {
        // SAFETY: the group's 16 source bytes in bounds (`(r + group) * data <= count *
        // data`), its `group * out` destination bytes too, every store on a 32-byte boundary
        // (`dst` aligned; `per * out` is 32, or `out` a multiple of 32). A prefetch never
        // faults.
        unsafe {
            let s = src.as_ptr().add(r * data);
            _mm_prefetch::<_MM_HINT_T0>(s.wrapping_add(1024).cast());
            let v = _mm256_broadcastsi128_si256(_mm_loadu_si128(s.cast()));
            let mut ctl = first;
            let mut d = dst.as_mut_ptr().add(r * out);
            for _ in 0..group / per {
                let c = _mm256_or_si256(_mm256_shuffle_epi8(v, ctl), tpl[0]);
                _mm256_stream_si256(d.cast(), c);
                for t in &tpl[1..vectors] {
                    d = d.add(32);
                    _mm256_stream_si256(d.cast(), *t);
                }
                d = d.add(32);
                ctl = _mm256_add_epi8(ctl, step);
            }
        }
        r += group;
    }
    r
}
