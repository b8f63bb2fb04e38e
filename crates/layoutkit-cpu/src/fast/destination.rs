//! How the fast engine writes its destination: past the cache or not ([`streams`]), and, where
//! padding is most of it, all of it with the fill first ([`fill_first`]).

use layoutkit_core::plan::Region;

/// `LAYOUTKIT_CPU_STREAM=always` or `never` (read once): streaming stores for every
/// destination, or for none, whatever its size (the tests run both kinds of store on small
/// tensors this way); anything else leaves the choice to the destination's size.
fn stream_override() -> Option<bool> {
    static MODE: std::sync::OnceLock<Option<bool>> = std::sync::OnceLock::new();
    *MODE.get_or_init(|| match std::env::var("LAYOUTKIT_CPU_STREAM").as_deref() {
        Ok("always") => Some(true),
        Ok("never") => Some(false),
        _ => None,
    })
}

/// Whether a destination of `bytes` written by `threads` threads takes non-temporal
/// (streaming) stores: where it is larger than the L2 caches of the threads writing it. A
/// smaller one stays in cache, where the next reader finds it and where ordinary stores are
/// faster (a 200 KB NCHW -> NHWC ran at memory speed, 9-19 GB/s, while a copy of it ran from
/// L2 at 70-110). `LAYOUTKIT_CPU_STREAM` overrides it.
pub(super) fn streams(bytes: usize, threads: usize) -> bool {
    stream_override()
        .unwrap_or_else(|| bytes > crate::conv_blocked::cache_sizes().1 * threads.max(1))
}

/// Whether the kernels of a conversion touching `bytes` (source and destination) on
/// `threads` threads prefetch their source lines: unless the two fit in half of the threads'
/// L2 caches, where the lines are in cache already (a tensor just written or read) and the
/// prefetch instructions only cost (f32 NCHW -> NHWC of 196 KB, C = 256 at 14 x 14 and C =
/// 16 at 56 x 56, ran 1.7-1.8x faster without them on a Zen 5; the whole sweep's tensors
/// under 1 MiB 1.05x by geometric mean, `bench/results/sweep.md`). Half, not all: a margin
/// for what else the caller keeps in L2 (the gains were measured on 100-400 KB).
pub(super) fn prefetches(bytes: usize, threads: usize) -> bool {
    2 * bytes > crate::conv_blocked::cache_sizes().1 * threads.max(1)
}

/// The least share of the destination's elements that must be padding for [`fill_first`]:
/// three quarters (a blocked layout's 16- or 32-element blocks holding 1-4 channels, a MACE
/// image of one channel in its 4 lanes).
const FILL_FIRST_SHARE: f64 = 0.75;

/// The smallest destination [`fill_first`] takes (bytes): under it the destination stays in
/// cache whichever way it is written.
const FILL_FIRST_MIN_BYTES: usize = 1 << 20;

/// The most of the destination's 64-byte lines the copies may touch for [`fill_first`]: 30%
/// (f16 OIHW16i16o of 3 input channels touches 2 of each block's 8, and a partial last block
/// a little more). Each line a copy writes after the fill is read back from memory and written
/// again, so where the data is spread over most lines (one channel of f32 in each 128-byte
/// NCHW32c pixel: every other line; kHWC8 and MACE images of one channel: every line) the fill
/// first doubles the traffic (measured 2-4x slower there).
const FILL_FIRST_MAX_LINES: f64 = 0.3;

/// Bytes of the destination's 64-byte lines the copies of `r` (elements of `size` bytes)
/// write, counting each run of contiguous destination elements (its loops in any order) as
/// whole lines.
fn touched_bytes(r: &Region, size: usize) -> usize {
    let mut dims = r.dims.clone();
    dims.sort_by_key(|d| d.dst_stride.unsigned_abs());
    let mut run = 1usize;
    for d in &dims {
        if d.dst_stride == run as isize {
            run *= d.extent;
        } else {
            break;
        }
    }
    let elements: usize = r.dims.iter().map(|d| d.extent).product();
    let runs = elements / run.max(1);
    runs * (run * size).div_ceil(64) * 64
}

/// Whether the destination (`dst_bytes` of `size`-byte elements, `copies` and `fills`) is
/// written with the fill first, whole ([`fill_whole`]), and then only the copies: where at
/// least [`FILL_FIRST_SHARE`] of its elements are padding, the copies touch at most
/// [`FILL_FIRST_MAX_LINES`] of its lines, their destination rows are shorter than a 64-byte
/// line, and it holds at least [`FILL_FIRST_MIN_BYTES`]. Written interleaved, every block of a
/// few short data rows and many fill ones is a tile (a transposition of a few values) and
/// short fill runs; whole, the fill is one streamed pass at the speed of memory, and the copies
/// then rewrite a few lines of each block. Measured on one thread, alternating (Xeon model
/// 167, `bench/results/sweep.md`): f16 OIHW -> OIHW16i16o (32-byte rows of 16 output
/// channels) with 3 input channels 45-46% -> 67-69% of the copy (1x1), 37% -> 50-51% (3x3),
/// 42-43% -> 58-62% (7x7); with 4 input channels 61-62% -> 58-59%. With rows of a whole line
/// (f32) the interleaved tiles were the faster (f32 I = 3, 3x3: 107% against 91-99% with the
/// fill first), hence the row rule.
pub(super) fn fill_first(
    copies: &[Region],
    fills: &[Region],
    size: usize,
    dst_bytes: usize,
) -> bool {
    let count = |rs: &[Region]| -> usize {
        rs.iter()
            .map(|r| r.dims.iter().map(|d| d.extent).product::<usize>())
            .sum()
    };
    let (data, pad) = (count(copies), count(fills));
    let touched: usize = copies.iter().map(|r| touched_bytes(r, size)).sum();
    // A destination row: the elements of the loop the destination is contiguous along.
    let row = |r: &Region| {
        r.dims
            .iter()
            .find(|d| d.dst_stride == 1)
            .map_or(1, |d| d.extent)
            * size
    };
    dst_bytes >= FILL_FIRST_MIN_BYTES
        && copies.iter().all(|r| row(r) < 64)
        && pad as f64 >= FILL_FIRST_SHARE * (data + pad).max(1) as f64
        && touched as f64 <= FILL_FIRST_MAX_LINES * dst_bytes as f64
}

/// Writes `pattern` (one element's bytes) over the whole of `dst`, on up to `threads` threads
/// in contiguous parts, streamed past the cache when `stream`.
///
/// Contract: `dst.len()` is a multiple of `pattern.len()`.
pub(super) fn fill_whole(dst: &mut [u8], pattern: &[u8], threads: usize, stream: bool) {
    let size = pattern.len();
    debug_assert!(size > 0 && dst.len().is_multiple_of(size));
    // A line of whole elements that is also whole 64-byte lines (the pattern is 1, 2, 4 or
    // 8 bytes).
    let line = pattern.repeat(4096 / size);
    let fill = |part: &mut [u8]| {
        for chunk in part.chunks_mut(line.len()) {
            if stream {
                super::transpose::stream_copy(chunk, &line[..chunk.len()]);
            } else {
                chunk.copy_from_slice(&line[..chunk.len()]);
            }
        }
    };
    let threads = threads.clamp(1, 64);
    if threads == 1 || dst.len() < (1 << 20) {
        fill(dst);
        return;
    }
    // Parts of whole lines, so that each part starts on an element (the line is whole
    // elements).
    let per = dst.len().div_ceil(threads).next_multiple_of(line.len());
    rayon::scope(|scope| {
        let mut parts = dst.chunks_mut(per);
        let first = parts.next();
        for part in parts {
            scope.spawn(move |_| fill(part));
        }
        if let Some(part) = first {
            fill(part);
        }
    });
}
