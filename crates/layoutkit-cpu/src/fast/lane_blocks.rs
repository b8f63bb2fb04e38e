//! Blocks of lane records turned inside out: three loops whose order one layout reverses,
//! dense on the plain side, with the other side's innermost loop padded to whole records of
//! `lanes` (and its rows of records possibly apart, [`LaneBlock::xs`]). A MACE
//! height-major image and NHWC are such a pair: per block of four image rows `(n, h / 4)` the
//! image holds `[C][W][4]` (each image pixel the four rows' values of one channel) and NHWC
//! the same elements as `[4][W][C]` (four rows of `W` pixels of `C` channels); in the last
//! block the lanes past `H` are image padding.
//!
//! Both blocks are contiguous in their buffers, so the conversion can read the source and
//! write the destination each in one sequential pass, the reordering done in cache. The tiles
//! of the general engine cut it along the plan's loops instead: rows of 4 lanes and strips of
//! single pixels (f16 `mace:in_out_height -> NHWC` with C = 16 on 14 x 14 planes at 15% of the
//! copy on a Zen 5, the lanes of the last block one tile per image column). Here each block,
//! or a chunk of it that fits the lane scratch ([`out_bytes`]), is
//! * transposed in cache by the [`transpose`](super::transpose) kernels, whose rows are
//!   addressed by lane and pixel (rows of padding lanes read from a fill line or written to a
//!   sink), or, for 1-4 channels, split into lane planes and interleaved
//!   ([`super::interleave`]);
//! * written out as whole runs (streamed past the cache where the job streams).
//!
//! The three loops may be any three of a copy's loops (`items::lane_loops` moves them last):
//! `OIHW16i16o -> OIHW` is one block per 16 output x 16 input channels, records of the
//! filter's taps, the output channels' rows of records `I x H x W` apart in OIHW.

use layoutkit_core::plan::LoopDim;

use super::interleave::{deinterleave, interleave, MAX_ROWS};
use super::transpose::{transpose_rows_dyn, Ahead, Table};
use super::{AlignedBuf, Job, Scratch};

/// Which side of the block holds the lane records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum LaneDir {
    /// Out of lane records: source `[x][m][lanes]` (lanes `..r` read), destination `[r][m][x]`.
    Out,
    /// Into lane records: source `[r][m][x]`, destination `[x][m][lanes]` with lanes `r..`
    /// written with the fill value.
    In,
}

/// One block's shape, from three loops of a copy (see [`LaneBlock::of`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct LaneBlock {
    pub dir: LaneDir,
    /// The loop innermost on the plain side (channels).
    pub x: usize,
    /// The middle loop (pixels).
    pub m: usize,
    /// Elements per record on the lane side.
    pub lanes: usize,
    /// Lanes that hold data (`<= lanes`).
    pub r: usize,
    /// Elements between the channels' rows of records on the lane side (`>= m * lanes`; more
    /// where the block is one of several side by side there, as the blocks of 16 input
    /// channels of `OIHW16i16o` in an OIHW filter row).
    pub xs: usize,
}

/// The most lanes per record taken (a MACE image has 4).
const MAX_LANES: usize = 16;

/// The fewest lanes in a block's pixel row (`m * lanes`, the short side of its
/// transposition) taken for the transposing kernels. Seven-pixel rows (28 lanes) of 250-2048
/// channels ran slower this way than through the general tiles (both directions, f32 and
/// f16, one thread on the Zen 5: e.g. f32 `NHWC -> mace:in_out_height` with C = 256 on 7 x 7
/// planes 0.55 -> 0.36 of the copy, C = 2048 0.53 -> 0.39; only f16 images read back with
/// C = 250 and 1000 gained), while rows of 14 pixels and more gained on most shapes.
const MIN_PIXEL_ROW_LANES: usize = 32;

/// [`MIN_PIXEL_ROW_LANES`], or 28 (seven pixels of four lanes) for 1- and 2-byte elements out
/// of lane records: once padding lanes no longer went to a streamed sink row, f16
/// `mace:in_out_height -> NHWC` on 7 x 7 planes ran faster as lane blocks than through the
/// general tiles on a Zen 4 (one thread, alternated three times: C = 250-2048, 32 MiB
/// 1.12-1.52x, under 1 MiB 1.36-2.25x), f32 did not (0.80-1.34x), nor did the other
/// direction (0.55-0.81x, f16 and f32).
fn min_pixel_row_lanes(dir: LaneDir, e: usize) -> usize {
    if dir == LaneDir::Out && e <= 2 {
        28
    } else {
        MIN_PIXEL_ROW_LANES
    }
}

/// The fewest channels (the other side of the transposition) taken for the transposing
/// kernels, which work in blocks of 8 or 16 rows. A whole block reads as either direction
/// (`[x][m][k] -> [k][m][x]`); a MACE 3x3 filter image of 4 input channels from OIHW, seen as
/// 4 channels of 9-lane records, ran at 0.3 of the general tiles' speed (f16, 79% -> 24% of
/// the copy) before this bound.
const MIN_CHANNELS: usize = 8;

/// Destination runs shorter than this many bytes are avoided when a block is chunked: the
/// write runs of one line per pixel were the slowest pattern on the Zen 5 (13.5 GB/s against
/// 41-44 for four lines or more, `bench/probes/write_runs.c`).
const MIN_RUN_BYTES: usize = 256;

/// Bytes of the lane scratch's output area (a chunk's reordered elements before they are
/// written out): a quarter of the core's L2 (found at run time), 64 KiB to 1 MiB. The block
/// of C = 250 f32 channels on 64-pixel image rows (256 KiB) is then one chunk on a 1 MiB L2.
pub(super) fn out_bytes() -> usize {
    (crate::conv_blocked::cache_sizes().1 / 4).clamp(64 << 10, 1 << 20)
}

impl LaneBlock {
    /// The block the last three loops `k` of a copy describe, with `pad` fill elements
    /// after each destination run, for elements of `e` bytes; None where they are not one
    /// or no kernel here suits it.
    ///
    /// * [`LaneDir::Out`]: `k = [lane (r; src 1, dst m*x), pixel (m; src lanes, dst x),
    ///   channel (x; src lanes*m, dst 1)]`, no padding.
    /// * [`LaneDir::In`]: `k = [channel (x; src 1, dst lanes*m), pixel (m; src x, dst
    ///   lanes), lane (r; src x*m, dst 1)]`, `lanes = r + pad`.
    ///
    /// Taken where a record has 2 to [`MAX_LANES`] lanes, a pixel's records fit the lane
    /// scratch, and the channels are few enough for the interleaving kernels or the
    /// transposition has rows enough on both sides for the block kernels
    /// ([`MIN_PIXEL_ROW_LANES`], [`MIN_CHANNELS`]) and records shorter than the channels'
    /// count. Measured slower than the general tiles (f16, one thread, Zen 5), hence not
    /// taken: `OIHW16i16o -> OIHW` with 3-4 input channels read as 9 taps of 16-lane records
    /// (0.45 -> 0.27 of the copy), and records read from rows apart (`OIHW -> OIHW16i16o`
    /// with 2048 input channels, 16 rows of 288 bytes 36 KiB apart: 0.94 -> 0.68); rows apart
    /// on the destination side are taken (`OIHW16i16o -> OIHW` with 256 input channels f16
    /// 0.23 -> 0.46, f32 0.41 -> 0.96).
    pub(super) fn of(k: &[LoopDim], pad: usize, e: usize) -> Option<LaneBlock> {
        let [l0, l1, l2] = k else { return None };
        let i = |v: usize| v as isize;
        let out = (pad == 0
            && l0.src_stride == 1
            && l2.dst_stride == 1
            && l1.src_stride >= i(l0.extent)
            && l2.src_stride >= l1.src_stride * i(l1.extent)
            && l1.dst_stride == i(l2.extent)
            && l0.dst_stride == i(l1.extent * l2.extent))
        .then_some(LaneBlock {
            dir: LaneDir::Out,
            x: l2.extent,
            m: l1.extent,
            lanes: l1.src_stride as usize,
            r: l0.extent,
            xs: l2.src_stride as usize,
        });
        let into = (l0.src_stride == 1
            && l2.dst_stride == 1
            && l1.src_stride == i(l0.extent)
            && l2.src_stride == i(l0.extent * l1.extent)
            && l1.dst_stride == i(l2.extent + pad)
            && l0.dst_stride >= i((l2.extent + pad) * l1.extent))
        .then_some(LaneBlock {
            dir: LaneDir::In,
            x: l0.extent,
            m: l1.extent,
            lanes: l2.extent + pad,
            r: l2.extent,
            xs: l0.dst_stride as usize,
        });
        let suits = |b: &LaneBlock| {
            (2..=MAX_LANES).contains(&b.lanes)
                && b.r >= 1
                && b.x >= 1
                && b.m >= 1
                && b.lanes * b.x * e <= out_bytes()
                && (b.dir == LaneDir::In || b.packed())
                && (b.interleaves()
                    || (b.m * b.lanes >= min_pixel_row_lanes(b.dir, e)
                        && b.x >= MIN_CHANNELS
                        && b.lanes < b.x))
        };
        // A whole block without padding is both (`[x][m][k] -> [k][m][x]` read either way):
        // the side with the fewer lanes holds the records.
        [out, into]
            .into_iter()
            .flatten()
            .filter(suits)
            .min_by_key(|b| b.lanes)
    }

    /// Whether the block's chunks go through lane planes and the interleaving kernels:
    /// records of 2-4 lanes and at most [`MAX_ROWS`] channels (which the transposing
    /// kernels, in blocks of 8 or 16 rows, would walk element by element).
    fn interleaves(&self) -> bool {
        (2..=MAX_ROWS).contains(&self.lanes) && self.x <= MAX_ROWS
    }

    /// Elements of the block on its source side, from the first to one past the last read.
    fn src_span(&self) -> usize {
        match self.dir {
            LaneDir::Out => (self.x - 1) * self.xs + self.m * self.lanes,
            LaneDir::In => self.r * self.m * self.x,
        }
    }

    /// Elements from the block's first on its destination side to one past its last.
    fn dst_span(&self) -> usize {
        match self.dir {
            LaneDir::Out => self.r * self.m * self.x,
            LaneDir::In => (self.x - 1) * self.xs + self.m * self.lanes,
        }
    }

    /// Whether the channels' rows of records lie back to back (the lane side is one range).
    fn packed(&self) -> bool {
        self.xs == self.m * self.lanes
    }

    /// The chunks a block is cut into, `(channels, pixels)` per chunk, for elements of `e`
    /// bytes and an output area of `cap` bytes: the whole block where it fits; else whole
    /// pixel rows of fewer channels, where a pixel's share of them is at least
    /// [`MIN_RUN_BYTES`] (the side without lanes then moves in runs that long, the side with
    /// lanes in one run per chunk); else fewer pixels with every channel (runs of whole
    /// records).
    fn chunk(&self, e: usize, cap: usize) -> (usize, usize) {
        let record = self.lanes * e;
        if self.x * self.m * record <= cap {
            return (self.x, self.m);
        }
        let nx = cap / (self.m * record);
        if nx * e >= MIN_RUN_BYTES && !self.interleaves() {
            return (nx, self.m);
        }
        (self.x, (cap / (self.x * record)).clamp(1, self.m))
    }
}

/// The lines of the `bytes` after `start + bytes` (the next chunk or block, where the source
/// reads them next: `follows`), for the transposition to ask for a few at a time; none
/// otherwise. The blocks' transpositions read their source rows a few bytes at a time across
/// the block, which the hardware prefetchers do not follow from one block to the next.
fn next_lines(start: *const u8, bytes: usize, follows: bool) -> (*const u8, usize) {
    if follows {
        (start.wrapping_add(bytes), bytes / 64)
    } else {
        (std::ptr::null(), 0)
    }
}

/// Transposes the tile whose source and destination rows are the tables `srcs` and `dsts`
/// (`e`-byte elements), asking for the source lines `next` (from [`next_lines`]) while it runs.
///
/// # Safety
/// As [`transpose_rows_dyn`] for the rows of the tables.
unsafe fn table_transpose(
    srcs: &[*const u8],
    dsts: &[*mut u8],
    (next, lines): (*const u8, usize),
    e: usize,
    stream: bool,
) {
    let rows = Ahead {
        rows: Table {
            src: srcs,
            dst: dsts,
        },
        next,
        lines,
    };
    // SAFETY: the caller's contract.
    unsafe { transpose_rows_dyn(rows, e, stream) }
}

/// Writes `pattern` (one element) over `dst`, whose length is a multiple of it.
fn fill_with(dst: &mut [u8], pattern: &[u8]) {
    for v in dst.chunks_exact_mut(pattern.len()) {
        v.copy_from_slice(pattern);
    }
}

impl Job<'_> {
    /// Runs one block `b` of an identity conversion from source element `so` and destination
    /// element `d0` (see the module docs). A block whose last records would be read past the
    /// end of the source (a strided view that stores only the lanes it uses) goes element by
    /// element.
    pub(super) fn lane_block(&self, so: usize, d0: usize, b: LaneBlock, scratch: &mut Scratch) {
        let e = self.cast.src.size_bytes();
        assert!(
            (d0 + b.dst_span()) * e <= self.dst.len,
            "a lane block lies outside the destination (plan and buffers disagree)"
        );
        if (so + b.src_span()) * e > self.src.len() {
            self.lane_block_elements(so, d0, b);
            return;
        }
        let cap = out_bytes();
        let Scratch {
            lane_buf,
            src_ptrs,
            dst_ptrs,
            ..
        } = scratch;
        let tables = &mut (src_ptrs, dst_ptrs);
        let buf = lane_buf.get_or_insert_with(|| AlignedBuf::zeroed(cap * 5 / 2));
        let (out, rest) = buf.split_at_mut(cap);
        let (planes, extra) = rest.split_at_mut(cap);
        let (cx, cm) = b.chunk(e, cap);
        let mut x0 = 0;
        while x0 < b.x {
            let nx = cx.min(b.x - x0);
            let mut m0 = 0;
            while m0 < b.m {
                let n = cm.min(b.m - m0);
                match b.dir {
                    LaneDir::Out => {
                        let chunk = (x0, nx, m0, n);
                        self.lanes_out(so, d0, b, chunk, (out, planes, extra), tables)
                    }
                    LaneDir::In => {
                        let chunk = (x0, nx, m0, n);
                        self.lanes_in(so, d0, b, chunk, (out, planes, extra), tables)
                    }
                }
                m0 += n;
            }
            x0 += nx;
        }
    }

    /// Channels `x0..x0 + nx`, pixels `m0..m0 + n` of a block out of lane records.
    ///
    /// The reordered chunk goes straight to the destination where its rows are whole
    /// aligned lines (streamed where the job streams) or the destination stays in cache;
    /// otherwise through `out`, copied out in runs (streamed stores of rows shorter than a
    /// line would leave partial lines).
    #[allow(clippy::too_many_arguments)]
    fn lanes_out(
        &self,
        so: usize,
        d0: usize,
        b: LaneBlock,
        (x0, nx, m0, n): (usize, usize, usize, usize),
        (out, planes, sink): (&mut [u8], &mut [u8], &mut [u8]),
        (srcs, dsts): &mut (&mut Vec<*const u8>, &mut Vec<*mut u8>),
    ) {
        let e = self.cast.src.size_bytes();
        let (k_all, r) = (b.lanes, b.r);
        let src_row = b.xs * e;
        // SAFETY (pointer arithmetic): the block's source lies inside the source (checked by
        // `lane_block`), and channels x0.. and pixels m0.. are inside the block.
        let first = self
            .src
            .as_ptr()
            .wrapping_add((so + x0 * b.xs + m0 * k_all) * e);
        // Destination byte offset of lane k, pixel p (of the chunk), channel x0.
        let at = |k: usize, p: usize| (d0 + k * b.m * b.x + (m0 + p) * b.x + x0) * e;
        let dst_ptr = self.dst.ptr;
        if b.interleaves() {
            for c in 0..nx {
                // SAFETY: channel c's n records are inside the source; its lane planes
                // [c][k][..n] are inside `planes` (nx * lanes * n * e <= cap bytes).
                let done = unsafe {
                    deinterleave(
                        first.add(c * src_row),
                        planes.as_mut_ptr().add(c * k_all * n * e),
                        n * e,
                        n,
                        k_all,
                        e,
                    )
                };
                debug_assert!(done, "a kernel for 2-4 lanes of 1, 2, 4 or 8 bytes");
            }
            // Where the job streams, the runs are interleaved into `out` and streamed from
            // there: plain stores read each destination line before writing it (Xeon family
            // 6 model 167, one thread, alternated twice: the sweep's 24 rows of 8 MiB and
            // more with 3-4 channel height-major images, both ways, 1.23x by geometric mean,
            // f32 C = 4 on 224 x 224 planes 59-61% of the copy -> 82-85%).
            let len = n * nx * e;
            let dst = self.dst.slice();
            for k in 0..r {
                let run = if self.stream {
                    &mut out[k * len..(k + 1) * len]
                } else {
                    &mut dst[at(k, 0)..at(k, 0) + len]
                };
                if nx == 1 {
                    run.copy_from_slice(&planes[k * len..(k + 1) * len]);
                    continue;
                }
                // SAFETY: lane k's plane of every channel is in `planes`, `lanes * n * e`
                // bytes apart; its n pixels of nx (= x) channels are one run.
                let done = unsafe {
                    interleave(
                        planes.as_ptr().add(k * n * e),
                        k_all * n * e,
                        run.as_mut_ptr(),
                        n,
                        nx,
                        e,
                    )
                };
                debug_assert!(done, "a kernel for 2-4 channels of 1, 2, 4 or 8 bytes");
            }
            if self.stream {
                self.lane_runs_out(&out[..r * len], at(0, 0), b.m * b.x * e, r, n == b.m);
            }
            return;
        }
        // Padding lanes' rows all go to one `sink` row, which streamed stores would send to
        // memory once per row (f32 `mace:in_out_height -> NHWC` with H = 2, C = 16 on 14 x
        // 14 planes, one thread on a Zen 4: 11% of the copy streamed, 65% with plain
        // stores): a block with padding lanes is reordered in `out` and copied out whole.
        let direct = self.direct_rows(at(0, 0), b.x * e) && !(self.stream && r < k_all);
        // Destination rows (pixel, lane): in the destination, or row k * n + p of `out`;
        // padding lanes' rows all in `sink`.
        let (row_ptr, row): (*mut u8, usize) = if direct {
            (dst_ptr.wrapping_add(at(0, 0)), b.x * e)
        } else {
            (out.as_mut_ptr(), nx * e)
        };
        let lane_step = if direct { b.m * b.x * e } else { n * nx * e };
        srcs.clear();
        srcs.extend((0..nx).map(|c| first.wrapping_add(c * src_row)));
        dsts.clear();
        let sink = sink.as_mut_ptr();
        for p in 0..n {
            for k in 0..k_all {
                dsts.push(if k < r {
                    row_ptr.wrapping_add(k * lane_step + p * row)
                } else {
                    sink
                });
            }
        }
        let next = next_lines(first, nx * src_row, b.packed() && (nx < b.x || n == b.m));
        // SAFETY: source rows are nx channels of n records (inside the block); destination
        // rows are r * n runs of nx elements, in the destination (inside the block's
        // destination, checked by `lane_block`, and this item's) or in `out` (r * n * nx * e
        // <= cap bytes), and padding lanes' rows all in `sink` (nx * e <= cap / 2 bytes),
        // which nothing reads.
        unsafe { table_transpose(srcs, dsts, next, e, direct && self.stream) };
        if direct {
            return;
        }
        let dst = self.dst.slice();
        if nx == b.x && n == b.m {
            let len = r * n * nx * e;
            self.out_copy(&mut dst[at(0, 0)..at(0, 0) + len], &out[..len]);
        } else if nx == b.x {
            let len = n * nx * e;
            for k in 0..r {
                let piece = &out[k * len..(k + 1) * len];
                self.out_copy(&mut dst[at(k, 0)..at(k, 0) + len], piece);
            }
        } else {
            let len = nx * e;
            for k in 0..r {
                for p in 0..n {
                    let piece = &out[(k * n + p) * len..(k * n + p + 1) * len];
                    self.out_copy(&mut dst[at(k, p)..at(k, p) + len], piece);
                }
            }
        }
    }

    /// Channels `x0..x0 + nx`, pixels `m0..m0 + n` of a block into lane records, straight
    /// to the destination or through `out` as [`Job::lanes_out`] decides. Lane planes
    /// (few channels) take whole pixel rows of channels (`nx = x`).
    #[allow(clippy::too_many_arguments)]
    fn lanes_in(
        &self,
        so: usize,
        d0: usize,
        b: LaneBlock,
        (x0, nx, m0, n): (usize, usize, usize, usize),
        (out, planes, extra): (&mut [u8], &mut [u8], &mut [u8]),
        (srcs, dsts): &mut (&mut Vec<*const u8>, &mut Vec<*mut u8>),
    ) {
        let e = self.cast.src.size_bytes();
        let (k_all, r, x) = (b.lanes, b.r, b.x);
        let fill = &self.fill[..e];
        // Lane k's pixels m0.. start here (elements, channel x0), k < r.
        let run = |k: usize| so + k * b.m * x + m0 * x + x0;
        let len = n * k_all * e;
        // Destination byte offset of channel x0 + c's records m0...
        let at = |c: usize| (d0 + (x0 + c) * b.xs + m0 * k_all) * e;
        let dst_ptr = self.dst.ptr;
        if b.interleaves() {
            debug_assert_eq!(nx, x, "lane planes take every channel");
            // Lane planes [k][c][..n], lanes past r of the fill.
            for k in 0..k_all {
                let plane = &mut planes[k * x * n * e..(k + 1) * x * n * e];
                if k >= r {
                    fill_with(plane, fill);
                } else if x == 1 {
                    plane.copy_from_slice(&self.src[run(k) * e..(run(k) + n) * e]);
                } else {
                    // SAFETY: lane k's n pixels of x channels are inside the block's source;
                    // the plane holds x rows of n elements.
                    let done = unsafe {
                        deinterleave(
                            self.src.as_ptr().add(run(k) * e),
                            plane.as_mut_ptr(),
                            n * e,
                            n,
                            x,
                            e,
                        )
                    };
                    debug_assert!(done, "a kernel for 2-4 channels of 1, 2, 4 or 8 bytes");
                }
            }
            // Streamed through `out` where the job streams, as in [`Job::lanes_out`].
            let dst = self.dst.slice();
            for c in 0..x {
                let records = if self.stream {
                    &mut out[c * len..(c + 1) * len]
                } else {
                    &mut dst[at(c)..at(c) + len]
                };
                // SAFETY: channel c's lane planes are in `planes`, `x * n * e` bytes apart;
                // its n records are one run.
                let done = unsafe {
                    interleave(
                        planes.as_ptr().add(c * n * e),
                        x * n * e,
                        records.as_mut_ptr(),
                        n,
                        k_all,
                        e,
                    )
                };
                debug_assert!(done, "a kernel for 2-4 lanes of 1, 2, 4 or 8 bytes");
            }
            if self.stream {
                let whole = n == b.m && b.packed();
                self.lane_runs_out(&out[..x * len], at(0), b.xs * e, x, whole);
            }
            return;
        }
        if self.lanes_in_records(so, d0, b, (x0, nx, m0, n), out, planes) {
            return;
        }
        let fill_line = &mut extra[..nx * e];
        fill_with(fill_line, fill);
        let direct = self.direct_rows(at(0), b.xs * e);
        let (row_ptr, row) = if direct {
            (dst_ptr.wrapping_add(at(0)), b.xs * e)
        } else {
            (out.as_mut_ptr(), len)
        };
        // Source rows: (pixel, lane), lanes past r reading the fill line; destination rows:
        // the channels, each n records.
        let base = self.src.as_ptr().wrapping_add(run(0) * e);
        let (plane, px, fill) = (b.m * x * e, x * e, fill_line.as_ptr());
        srcs.clear();
        for p in 0..n {
            for k in 0..k_all {
                srcs.push(if k < r {
                    base.wrapping_add(k * plane + p * px)
                } else {
                    fill
                });
            }
        }
        dsts.clear();
        dsts.extend((0..nx).map(|c| row_ptr.wrapping_add(c * row)));
        let whole = self.src.as_ptr().wrapping_add(so * e);
        let next = next_lines(whole, r * b.m * x * e, n == b.m && nx == x);
        // SAFETY: each data row is nx of a pixel's channels inside the block's source, each
        // padding row the fill line of nx elements; the destination rows are nx runs of n
        // records, in the destination (inside the block's, checked by `lane_block`, and this
        // item's) or in `out` (nx * len <= cap bytes).
        unsafe { table_transpose(srcs, dsts, next, e, direct && self.stream) };
        if direct {
            return;
        }
        let dst = self.dst.slice();
        if n == b.m && b.packed() {
            self.out_copy(&mut dst[at(0)..at(0) + nx * len], &out[..nx * len]);
        } else {
            for c in 0..nx {
                self.out_copy(&mut dst[at(c)..at(c) + len], &out[c * len..(c + 1) * len]);
            }
        }
    }
}

#[path = "lane_blocks_out.rs"]
mod out;

#[path = "lane_blocks_records.rs"]
mod records;

#[cfg(test)]
#[path = "lane_blocks_tests.rs"]
mod tests;
