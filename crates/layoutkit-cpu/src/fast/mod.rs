//! The fast CPU engine: executes a [`ConversionPlan`]'s regions with
//! * whole contiguous runs copied or cast as slices (vectorised casts),
//! * cache-sized 2-D tiles where the destination's and the source's contiguous loops differ
//!   (a transposition), with an AVX2 8x8 kernel for 4-byte elements chosen at run time,
//! * the work split into independent items run on a rayon pool of the requested size.
//!
//! Every destination element is written by exactly one work item (the plan's regions are
//! disjoint), so the result does not depend on the thread count or the order items run in.
//! Tested against the reference converter on random layouts, shapes, casts and thread counts.

mod buffer;
mod cast_tiles;
mod casts;
mod transpose;

pub use buffer::AlignedBuf;

use layoutkit_core::cast::Scalar;
use layoutkit_core::plan::{ConversionPlan, LoopDim, Region, Strategy};
use layoutkit_core::tiling;
use layoutkit_core::CastSpec;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::{check_buffers, Error};
use casts::{run_kernel, RunKernel};

/// Runs `plan` on `threads` threads (1 runs on the calling thread).
///
/// Contract: as [`crate::convert_reference`], with the same result bit for bit, for any
/// `threads >= 1`.
pub fn convert_fast(
    plan: &ConversionPlan,
    src_data: &[u8],
    dst_data: &mut [u8],
    cast: &CastSpec,
    threads: usize,
) -> Result<(), Error> {
    check_buffers(plan.src(), src_data, plan.dst(), dst_data, cast)?;
    let Strategy::Regions { copies, fills } = plan.strategy() else {
        // Blocks that do not nest have no linear plan: the per-element walk.
        return crate::convert_planned(plan, src_data, dst_data, cast);
    };
    let fill = Scalar::from_f64(cast.dst, plan.dst().layout().fill());
    let mut fill_bytes = [0u8; 8];
    fill.write(&mut fill_bytes);
    let ds = cast.dst.size_bytes();
    let job = Job {
        src: src_data,
        dst: SharedMut::new(dst_data),
        cast: *cast,
        run: run_kernel(cast),
        fused: cast_tiles::FusedCast::for_spec(cast),
        fill: fill_bytes,
        fill_line: fill_bytes[..ds].repeat(MAX_TILE_A),
    };
    let mut items: Vec<Item> = Vec::new();
    // Padding merged into the copies where it completes their runs (identity conversions:
    // the tile kernels move source bytes, and the fill is a destination value).
    let (padded, fills) = if cast.is_identity() {
        tiling::absorb_fills(copies, fills)
    } else {
        (
            copies
                .iter()
                .map(|region| tiling::PaddedCopy { region, pad: 0 })
                .collect(),
            fills.iter().collect(),
        )
    };
    let mut left = Vec::new();
    for c in &padded {
        if !split(c.region, c.pad, false, cast, threads, &mut items) {
            // No padded kernel for this shape: the copy, and its fill apart.
            split(c.region, 0, false, cast, threads, &mut items);
            left.push(tiling::fill_after(c.region, c.pad));
        }
    }
    for r in fills.into_iter().chain(left.iter()) {
        split(r, 0, true, cast, threads, &mut items);
    }
    if threads <= 1 || items.len() <= 1 {
        items.iter().for_each(|it| job.execute(it));
        return Ok(());
    }
    // Each thread takes the next item in order until none is left: items run roughly in
    // memory order on all threads at once, and unequal items still balance. (A rayon
    // `par_iter` over the same items measured a third slower on the 2-core machine.)
    // The calling thread works too; a thread the system refuses to start only means fewer
    // workers (every item still runs).
    let next = AtomicUsize::new(0);
    let work = || loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        let Some(it) = items.get(i) else { break };
        job.execute(it);
    };
    std::thread::scope(|scope| {
        for _ in 1..threads.min(items.len()) {
            if std::thread::Builder::new()
                .spawn_scoped(scope, work)
                .is_err()
            {
                break;
            }
        }
        work();
    });
    Ok(())
}

/// The most bytes one tile of an identity conversion holds (in cache between its reads and
/// its writes).
const IDENTITY_TILE_BYTES: usize = 65536;

/// The most bytes one casting tile holds (of the wider element type): its scratch buffers.
const TILE_BYTES: usize = 16384;

/// A tile-sized scratch buffer, aligned so the cast kernels can view it as typed elements.
#[repr(align(64))]
struct TileBuf([u8; TILE_BYTES]);

/// Per work item scratch: row tables of the current tile, and for casting tiles two buffers
/// made on first use (zeroing them per tile cost more than the tile).
#[derive(Default)]
struct Scratch {
    src_rows: Vec<isize>,
    dst_rows: Vec<isize>,
    src_ptrs: Vec<*const u8>,
    dst_ptrs: Vec<*mut u8>,
    bufs: Option<Box<[TileBuf; 2]>>,
    /// A tile whose destination is contiguous, before it is streamed out.
    stream_buf: Option<AlignedBuf>,
}

/// The scratch tile for contiguous destinations.
const SCRATCH_BYTES: usize = IDENTITY_TILE_BYTES;

/// The destination, shared by the work items, which write disjoint elements.
struct SharedMut {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: work items write disjoint byte ranges of the destination (the plan's regions cover
// every destination element exactly once and items split regions without overlap), so sharing
// the pointer between threads never lets two threads touch the same byte.
unsafe impl Send for SharedMut {}
unsafe impl Sync for SharedMut {}

impl SharedMut {
    fn new(s: &mut [u8]) -> SharedMut {
        SharedMut {
            ptr: s.as_mut_ptr(),
            len: s.len(),
        }
    }

    /// The whole destination as a slice. Callers write only their item's elements.
    #[allow(clippy::mut_from_ref)]
    fn slice(&self) -> &mut [u8] {
        // SAFETY: the pointer and length come from a live `&mut [u8]` that outlives the job;
        // concurrent items write disjoint elements (see the `Sync` impl), and nobody reads the
        // destination while the job runs.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

struct Job<'a> {
    src: &'a [u8],
    dst: SharedMut,
    cast: CastSpec,
    run: RunKernel,
    /// The transpose-and-cast kernel for this cast, if there is one.
    fused: Option<cast_tiles::FusedCast>,
    fill: [u8; 8],
    /// [`MAX_TILE_A`] fill values: the source of a tile's fill rows.
    fill_line: Vec<u8>,
}

/// A unit of work: a box of one region (loops outermost first, offsets in elements). The last
/// one (run, strided, fill) or two (tile) loops are the kernel's; the item iterates the others.
struct Item {
    src_offset: usize,
    dst_offset: usize,
    dims: Vec<LoopDim>,
    kind: Kind,
    /// Elements moved together: a short innermost run contiguous in both layouts (e.g. the 4
    /// lanes of an image pixel) is handled as one unit by the tile and strided kernels.
    unit: usize,
    /// For tiles: how many loops before the last form the tile's source-contiguous index
    /// (one, or several whose flattened index is contiguous in the source, like `(i, h, w)`
    /// of `OIHW`); the last loop is the destination-contiguous one.
    a_loops: usize,
    /// Fill elements written after each run: after each unit (strided items) or after the
    /// destination-contiguous loop (tiles). See [`tiling::absorb_fills`].
    pad: usize,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// The innermost loop is contiguous in both layouts.
    Run,
    /// The last two loops are a tile: `dims[n-2]` is contiguous in the source, `dims[n-1]` in
    /// the destination.
    Tile,
    /// Anything else: element by element along the innermost loop.
    Strided,
    /// Padding: the fill value along the innermost loop.
    Fill,
}

impl Item {
    /// The loops at the end of `dims` that the kernel runs (the item iterates the others).
    fn kernel_loops(&self) -> usize {
        match self.kind {
            Kind::Tile => self.a_loops + 1,
            Kind::Fill => 2,
            _ => 1,
        }
    }
}

/// Runs up to this many bytes that are contiguous in both layouts become units.
const MAX_UNIT_BYTES: usize = 64;

/// Work items per thread (about), so threads stay balanced when items take unequal times.
const ITEMS_PER_THREAD: usize = 8;

/// The most source-contiguous units in one tile.
const MAX_TILE_A: usize = 256;

/// Elements per work item at least: enough to amortise an item.
const MIN_ITEM_ELEMENTS: usize = 1 << 16;

/// Splits a region into about [`ITEMS_PER_THREAD`] items per thread (one on one thread) of at
/// least [`MIN_ITEM_ELEMENTS`] elements, by chunking its outer loops. Few large items keep the
/// tiles' source streams long, which the hardware prefetchers need.
///
/// With `pad > 0` (a copy whose runs are followed by `pad` fill elements), returns false and
/// adds nothing when no kernel writes that padding in the same pass.
fn split(
    r: &Region,
    pad: usize,
    fill: bool,
    cast: &CastSpec,
    threads: usize,
    items: &mut Vec<Item>,
) -> bool {
    let mut dims = r.dims.clone();
    if dims.is_empty() {
        dims.push(LoopDim {
            extent: 1,
            src_stride: 1,
            dst_stride: 1,
        });
    }
    let size = cast.src.size_bytes().max(cast.dst.size_bytes());
    // A short innermost run contiguous in both layouts becomes the unit of the other loops.
    let mut unit = 1;
    {
        let inner = dims[dims.len() - 1];
        if !fill
            && dims.len() >= 2
            && inner.src_stride == 1
            && inner.dst_stride == 1
            && inner.extent * size <= MAX_UNIT_BYTES
        {
            unit = inner.extent;
            dims.pop();
        }
    }
    let n = dims.len();
    let inner = dims[n - 1];
    let u = unit as isize;
    let mut a_loops = 1;
    let kind = if fill {
        Kind::Fill
    } else if inner.src_stride == u && inner.dst_stride == u {
        Kind::Run
    } else if let Some(t) = tiling::tile_axes(&dims, unit) {
        // A tile: the loops outside it, then its source-contiguous loops, then the
        // destination-contiguous one.
        a_loops = t.a.len();
        dims = t.outer;
        dims.extend(t.a);
        dims.push(t.b);
        Kind::Tile
    } else {
        Kind::Strided
    };
    // Padding after units is written by the strided kernel; after a tile's
    // destination-contiguous loop, by fill rows of a tile holding the whole padded run.
    let padded_tile = pad > 0 && unit == 1 && kind == Kind::Tile;
    if pad > 0
        && !(unit > 1 && kind == Kind::Strided)
        && !(padded_tile && (inner.extent + pad) * size <= 512)
    {
        return false;
    }
    // A fill needs two loops for its kernel.
    if kind == Kind::Fill && n == 1 {
        dims.insert(
            0,
            LoopDim {
                extent: 1,
                src_stride: 0,
                dst_stride: 0,
            },
        );
    }
    let n = dims.len();
    let total: usize = dims.iter().map(|d| d.extent).product();
    let target = if threads <= 1 {
        1
    } else {
        (threads * ITEMS_PER_THREAD).min(total.div_ceil(MIN_ITEM_ELEMENTS))
    }
    .max(1);
    // Loops are chunked outermost first. A tile's destination-contiguous loop is chunked
    // before its source-contiguous ones (which stay whole, so tiles stay wide): it moves in
    // front of them here, and back to the end in each item.
    let last = if kind == Kind::Tile && !padded_tile {
        let b = dims.pop().expect("a tile has two loops");
        dims.insert(n - 1 - a_loops, b);
        n - 1 - a_loops
    } else {
        n - 1
    };
    // Find the loop to chunk: loops before it give one item per index.
    let mut before = 1usize;
    let mut k = 0;
    while k < last && before * dims[k].extent < target {
        before *= dims[k].extent;
        k += 1;
    }
    let pieces_k = target.div_ceil(before).clamp(1, dims[k].extent);
    let mut chunk = dims[k].extent.div_ceil(pieces_k);
    if kind == Kind::Tile && !padded_tile && k == last {
        // Whole tile rows: a multiple of 16 destination-contiguous units.
        chunk = chunk.next_multiple_of(16).min(dims[k].extent);
    }
    let mut start = vec![0usize; k + 1];
    loop {
        let mut it = Item {
            src_offset: r.src_offset,
            dst_offset: r.dst_offset,
            dims: dims[k..].to_vec(),
            kind,
            unit,
            a_loops,
            pad,
        };
        for (j, d) in dims[..=k].iter().enumerate() {
            it.src_offset = (it.src_offset as isize + start[j] as isize * d.src_stride) as usize;
            it.dst_offset = (it.dst_offset as isize + start[j] as isize * d.dst_stride) as usize;
        }
        it.dims[0].extent = chunk.min(dims[k].extent - start[k]);
        if kind == Kind::Tile && !padded_tile {
            let b = it.dims.remove(last - k);
            it.dims.push(b);
        }
        // A chunk inside a padded tile's source-contiguous loops keeps the inner ones.
        it.a_loops = a_loops.min(it.dims.len() - 1).max(1);
        // Keep the kernel's loop count: pad with unit loops if the chunked loop is inside it.
        while it.dims.len() < it.kernel_loops() {
            it.dims.insert(
                0,
                LoopDim {
                    extent: 1,
                    src_stride: 0,
                    dst_stride: 0,
                },
            );
        }
        items.push(it);
        // Next start: loop k by `chunk`, loops before it by one.
        let mut j = k + 1;
        loop {
            if j == 0 {
                return true;
            }
            j -= 1;
            start[j] += if j == k { chunk } else { 1 };
            if start[j] < dims[j].extent {
                break;
            }
            start[j] = 0;
        }
    }
}

impl Job<'_> {
    fn execute(&self, it: &Item) {
        let dst = self.dst.slice();
        let m = it.kernel_loops();
        let outer = &it.dims[..it.dims.len() - m];
        let kernel = &it.dims[it.dims.len() - m..];
        // Odometer over the item's outer loops; the kernel does the rest.
        let mut scratch = Scratch::default();
        let mut idx = vec![0usize; outer.len()];
        let (mut so, mut d) = (it.src_offset as isize, it.dst_offset as isize);
        loop {
            self.kernel(it, so as usize, d as usize, kernel, dst, &mut scratch);
            let mut j = outer.len();
            loop {
                if j == 0 {
                    transpose::store_fence();
                    return;
                }
                j -= 1;
                idx[j] += 1;
                so += outer[j].src_stride;
                d += outer[j].dst_stride;
                if idx[j] < outer[j].extent {
                    break;
                }
                so -= outer[j].src_stride * outer[j].extent as isize;
                d -= outer[j].dst_stride * outer[j].extent as isize;
                idx[j] = 0;
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    #[allow(clippy::too_many_arguments)]
    fn kernel(
        &self,
        it: &Item,
        so: usize,
        d0: usize,
        k: &[LoopDim],
        dst: &mut [u8],
        scratch: &mut Scratch,
    ) {
        let (ss, ds) = (self.cast.src.size_bytes(), self.cast.dst.size_bytes());
        let unit = it.unit;
        match it.kind {
            Kind::Run => {
                let n = k[0].extent * unit;
                let s = &self.src[so * ss..(so + n) * ss];
                let d = &mut dst[d0 * ds..(d0 + n) * ds];
                (self.run)(s, d, n, &self.cast);
            }
            Kind::Fill => {
                let (o, l) = (k[0], k[1]);
                match ds {
                    1 => fill_plane::<1>(dst, d0, o, l, &self.fill),
                    2 => fill_plane::<2>(dst, d0, o, l, &self.fill),
                    4 => fill_plane::<4>(dst, d0, o, l, &self.fill),
                    _ => fill_plane::<8>(dst, d0, o, l, &self.fill),
                }
            }
            Kind::Strided => {
                let l = k[0];
                let pad = &self.fill_line[..it.pad * ds];
                if self.cast.is_identity() {
                    // Plain moves of a few bytes: inline copies, no kernel call per unit.
                    let n = unit * ss;
                    for j in 0..l.extent {
                        let s = (so as isize + j as isize * l.src_stride) as usize * ss;
                        let d = (d0 as isize + j as isize * l.dst_stride) as usize * ds;
                        // Units far apart miss the cache one by one: ask for a later one's
                        // line now (a prefetch never faults; past the end it is ignored).
                        transpose::prefetch(
                            self.src
                                .as_ptr()
                                .wrapping_add(s)
                                .wrapping_offset(8 * l.src_stride * ss as isize),
                        );
                        let out = &mut dst[d..d + n + pad.len()];
                        copy_few(&mut out[..n], &self.src[s..s + n]);
                        copy_few(&mut out[n..], pad);
                    }
                    return;
                }
                for j in 0..l.extent {
                    let s = (so as isize + j as isize * l.src_stride) as usize;
                    let d = (d0 as isize + j as isize * l.dst_stride) as usize;
                    let out = &mut dst[d * ds..(d + unit) * ds + pad.len()];
                    let (data, fill) = out.split_at_mut(unit * ds);
                    (self.run)(&self.src[s * ss..(s + unit) * ss], data, unit, &self.cast);
                    fill.copy_from_slice(pad);
                }
            }
            Kind::Tile => {
                let (a_loops, b) = k.split_at(k.len() - 1);
                self.tiles(so, d0, a_loops, b[0], unit, it.pad, scratch);
            }
        }
    }

    /// The `(a, b)` plane of a tile item in tiles of about [`tile_shape`]: `a` is the
    /// flattened index of `a_loops` (contiguous in the source, `unit` elements per step), `b`
    /// is contiguous in the destination. `b` tiles are outermost, so the source is read as a
    /// few long row streams and each destination row gets a whole segment per tile.
    #[allow(clippy::too_many_arguments)]
    fn tiles(
        &self,
        so: usize,
        d0: usize,
        a_loops: &[LoopDim],
        b: LoopDim,
        unit: usize,
        pad: usize,
        scratch: &mut Scratch,
    ) {
        let (ss, ds) = (self.cast.src.size_bytes(), self.cast.dst.size_bytes());
        let ea: usize = a_loops.iter().map(|l| l.extent).product();
        let inner_a = a_loops[a_loops.len() - 1];
        let (mut ta, mut tb) = tile_shape(
            ss.max(ds) * unit,
            ds * unit,
            b.src_stride.unsigned_abs() * ss,
            inner_a.dst_stride.unsigned_abs() * ds,
            b.extent,
            // Casting tiles without a fused kernel go through two scratch buffers.
            if self.cast.is_identity() || (self.fused.is_some() && unit == 1) {
                IDENTITY_TILE_BYTES
            } else {
                TILE_BYTES
            },
        );
        if pad > 0 {
            // The whole padded run in one tile: its last `pad` rows read the fill line.
            tb = b.extent;
            ta = (TILE_BYTES / ((tb + pad) * ss)).clamp(1, MAX_TILE_A);
        }
        // Several source-contiguous loops: tiles that start on a multiple of the inner loops'
        // span see the same destination offsets, computed once (identity conversions).
        let period: usize = a_loops[1..].iter().map(|l| l.extent).product();
        let periodic =
            (a_loops.len() > 1 && self.cast.is_identity() && period <= MAX_TILE_A).then(|| {
                ta = period * (ta / period).max(1);
                let mut rel = Vec::new();
                dst_offsets(a_loops, 0, ta.min(ea), &mut rel);
                PeriodicRows::new(period, &rel, ds, nb_total(tb, pad), unit)
            });
        let mut b0 = 0;
        while b0 < b.extent {
            let nb = tb.min(b.extent - b0);
            let mut a0 = 0;
            while a0 < ea {
                let na = ta.min(ea - a0);
                let s_first = so as isize + b0 as isize * b.src_stride + (a0 * unit) as isize;
                let d_first = d0 as isize + b0 as isize * b.dst_stride;
                if let [l] = a_loops {
                    // One loop: rows a fixed distance apart.
                    let d_first = d_first + a0 as isize * l.dst_stride;
                    let tile = StridedTile {
                        s_first,
                        s_row: b.src_stride,
                        d_first,
                        d_row: l.dst_stride,
                        na,
                        nb,
                        pad,
                    };
                    self.tile_strided(tile, unit, scratch);
                } else if let Some(table) = &periodic {
                    // Compound rows whose offsets repeat every tile.
                    let d_first = d_first + (a0 / table.period) as isize * a_loops[0].dst_stride;
                    self.tile_offsets(
                        s_first,
                        b.src_stride,
                        d_first,
                        table,
                        na,
                        nb,
                        unit,
                        pad,
                        scratch,
                    );
                } else {
                    scratch.src_rows.clear();
                    scratch
                        .src_rows
                        .extend((0..nb).map(|i| s_first + i as isize * b.src_stride));
                    dst_offsets(a_loops, a0, na, &mut scratch.dst_rows);
                    scratch.dst_rows.iter_mut().for_each(|o| *o += d_first);
                    self.tile(na, nb, unit, pad, scratch);
                }
                a0 += na;
            }
            b0 += nb;
        }
    }

    /// A tile of rows a fixed distance apart (see [`StridedTile`]).
    fn tile_strided(&self, t: StridedTile, unit: usize, scratch: &mut Scratch) {
        let (ss, ds) = (self.cast.src.size_bytes(), self.cast.dst.size_bytes());
        let (na, nb) = (t.na, t.nb);
        let fused = self.fused.filter(|_| unit == 1 && t.pad == 0);
        if !((self.cast.is_identity() || fused.is_some()) && t.s_row >= 0 && t.d_row >= 0) {
            // Casts (and, never planned, negative strides) go through the row tables.
            scratch.src_rows.clear();
            scratch
                .src_rows
                .extend((0..nb).map(|i| t.s_first + i as isize * t.s_row));
            scratch.dst_rows.clear();
            scratch
                .dst_rows
                .extend((0..na).map(|i| t.d_first + i as isize * t.d_row));
            self.tile(na, nb, unit, t.pad, scratch);
            return;
        }
        // Bounds: the first and last rows (strides are non-negative) lie inside the buffers,
        // and the fill line holds a row of the tile.
        let s_last = t.s_first + (nb as isize - 1) * t.s_row + (na * unit) as isize;
        let d_last = t.d_first + (na as isize - 1) * t.d_row + ((nb + t.pad) * unit) as isize;
        assert!(
            t.s_first >= 0
                && t.d_first >= 0
                && s_last as usize * ss <= self.src.len()
                && d_last as usize * ds <= self.dst.len
                && (t.pad == 0 || na * unit * ss <= self.fill_line.len()),
            "a tile lies outside its buffer (plan and buffers disagree)"
        );
        let rows = transpose::Strided {
            src: self.src.as_ptr().wrapping_add(t.s_first as usize * ss),
            src_row: t.s_row as usize * ss,
            dst: self.dst.ptr.wrapping_add(t.d_first as usize * ds),
            dst_row: t.d_row as usize * ds,
            na,
            nb: nb + t.pad,
        };
        if let Some(fused) = fused {
            let rows = transpose::Strided { nb, ..rows };
            // SAFETY: every row of the tile is inside its buffer (asserted above); the
            // destination rows belong to this item alone; the CPU has the kernel's features.
            let done = unsafe { fused.run(rows, true) };
            self.cast_strips(rows, done);
            return;
        }
        // SAFETY: every row of the tile is inside its buffer (asserted above); the
        // destination rows belong to this item alone and the source is never written.
        unsafe {
            if t.pad == 0 {
                transpose::transpose_rows_dyn(rows, unit * ss, true)
            } else {
                let rows = transpose::Padded {
                    rows,
                    data_rows: nb,
                    fill: self.fill_line.as_ptr(),
                };
                transpose::transpose_rows_dyn(rows, unit * ss, true)
            }
        };
    }

    /// A tile of `na` destination rows at `table`'s offsets from `d_first` and `nb` source
    /// rows `s_row` apart from `s_first` (elements), plus `pad` fill rows. When the tile's
    /// destination is one contiguous range whose rows are not whole lines, it is transposed
    /// into a scratch tile in cache and streamed out in one piece.
    #[allow(clippy::too_many_arguments)]
    fn tile_offsets(
        &self,
        s_first: isize,
        s_row: isize,
        d_first: isize,
        table: &PeriodicRows,
        na: usize,
        nb: usize,
        unit: usize,
        pad: usize,
        scratch: &mut Scratch,
    ) {
        let n = unit * self.cast.src.size_bytes();
        let rows_bytes = &table.bytes[..na];
        let row = (nb + pad) * n;
        // The last tile can be shorter: its own largest offset.
        let max = if na == table.bytes.len() {
            table.max
        } else {
            rows_bytes.iter().copied().max().unwrap_or(0)
        };
        let s_last = s_first + (nb as isize - 1) * s_row + (na * unit) as isize;
        assert!(
            s_first >= 0
                && d_first >= 0
                && s_row >= 0
                && s_last as usize * n / unit <= self.src.len()
                && d_first as usize * n / unit + max + row <= self.dst.len
                && (pad == 0 || na * n <= self.fill_line.len()),
            "a tile lies outside its buffer (plan and buffers disagree)"
        );
        let src = self.src.as_ptr().wrapping_add(s_first as usize * n / unit);
        let dst = self.dst.ptr.wrapping_add(d_first as usize * n / unit);
        let whole = table.contiguous && na == table.bytes.len();
        let lines =
            dst as usize % 64 == 0 && row % 64 == 0 && rows_bytes.iter().all(|o| o % 64 == 0);
        let through_scratch = whole && !lines && na * row <= SCRATCH_BYTES;
        let out = if through_scratch {
            scratch
                .stream_buf
                .get_or_insert_with(|| AlignedBuf::zeroed(SCRATCH_BYTES))
                .as_mut_ptr()
        } else {
            dst
        };
        let rows = transpose::Offsets {
            src,
            src_row: s_row as usize * n / unit,
            dst: out,
            dst_rows: rows_bytes,
            nb: nb + pad,
        };
        // SAFETY: every row is inside its buffer (asserted above: offsets are non-negative
        // and at most `max`; the scratch holds `na * row` bytes); destination rows belong to
        // this item alone and the source is never written.
        unsafe {
            if pad == 0 {
                transpose::transpose_rows_dyn(rows, n, !through_scratch)
            } else {
                let rows = transpose::Padded {
                    rows,
                    data_rows: nb,
                    fill: self.fill_line.as_ptr(),
                };
                transpose::transpose_rows_dyn(rows, n, !through_scratch)
            }
        }
        if through_scratch {
            let bytes = na * row;
            let tile = &scratch.stream_buf.as_ref().expect("made above")[..bytes];
            // SAFETY: the tile's destination range is inside the buffer (asserted above) and
            // belongs to this item.
            let out = unsafe { std::slice::from_raw_parts_mut(dst, bytes) };
            transpose::stream_copy(out, tile);
        }
    }

    /// Casts, element by element, what a fused kernel that did rows `..da` and columns
    /// `..db` of `rows` left: the other columns of those rows, and the other rows whole.
    fn cast_strips<R: transpose::Rows>(&self, rows: R, (da, db): (usize, usize)) {
        let (ss, ds) = (self.cast.src.size_bytes(), self.cast.dst.size_bytes());
        for a in 0..rows.na() {
            let from = if a < da { db } else { 0 };
            for b in from..rows.nb() {
                // SAFETY: element a of source row b and element b of destination row a are
                // inside the rows (the caller checked every row against its buffer).
                let (s, d) = unsafe {
                    (
                        std::slice::from_raw_parts(rows.src(b).add(a * ss), ss),
                        std::slice::from_raw_parts_mut(rows.dst(a).add(b * ds), ds),
                    )
                };
                (self.run)(s, d, 1, &self.cast);
            }
        }
    }

    /// One tile whose row starts (in elements) are in `scratch.src_rows` (b rows of `na`
    /// units) and `scratch.dst_rows` (a rows of `nb` units).
    fn tile(&self, na: usize, nb: usize, unit: usize, pad: usize, scratch: &mut Scratch) {
        let (ss, ds) = (self.cast.src.size_bytes(), self.cast.dst.size_bytes());
        // Every row must lie inside its buffer: checked here, once per row, so the kernels
        // may use raw pointers.
        let src_len = (na * unit * ss) as isize;
        let dst_len = ((nb + pad) * unit * ds) as isize;
        assert!(pad == 0 || (self.cast.is_identity() && src_len as usize <= self.fill_line.len()));
        let in_bounds = |rows: &[isize], size: usize, len: isize, total: usize| {
            rows.iter()
                .all(|&r| r >= 0 && r * size as isize + len <= total as isize)
        };
        assert!(
            in_bounds(&scratch.src_rows, ss, src_len, self.src.len())
                && in_bounds(&scratch.dst_rows, ds, dst_len, self.dst.len),
            "a tile row lies outside its buffer (plan and buffers disagree)"
        );
        let src_base = self.src.as_ptr();
        let dst_base = self.dst.ptr;
        let srows = &mut scratch.src_ptrs;
        srows.clear();
        // SAFETY (pointer arithmetic): offsets are inside the source (asserted above).
        srows.extend(
            scratch
                .src_rows
                .iter()
                .map(|&r| src_base.wrapping_add(r as usize * ss)),
        );
        // Fill rows (identity conversions only, asserted above).
        srows.extend(std::iter::repeat_n(self.fill_line.as_ptr(), pad));
        if self.cast.is_identity() || unit > 1 {
            let drows = &mut scratch.dst_ptrs;
            drows.clear();
            drows.extend(
                scratch
                    .dst_rows
                    .iter()
                    .map(|&r| dst_base.wrapping_add(r as usize * ds)),
            );
            if !self.cast.is_identity() {
                // Units of several elements with a cast: one unit at a time.
                for (a, d) in drows.iter().enumerate() {
                    for (b, s) in srows.iter().enumerate() {
                        // SAFETY: unit a of source row b and unit b of destination row a are
                        // inside the rows (asserted above); items write disjoint elements.
                        let (s, d) = unsafe {
                            (
                                std::slice::from_raw_parts(s.add(a * unit * ss), unit * ss),
                                std::slice::from_raw_parts_mut(d.add(b * unit * ds), unit * ds),
                            )
                        };
                        (self.run)(s, d, unit, &self.cast);
                    }
                }
                return;
            }
            let rows = transpose::Table {
                src: srows,
                dst: drows,
            };
            // SAFETY: the rows hold the tile (asserted above); the destination rows belong to
            // this item alone, and the source is never written.
            unsafe { transpose::transpose_rows_dyn(rows, unit * ss, true) };
            return;
        }
        if let Some(fused) = self.fused.filter(|_| unit == 1) {
            // Transposed and cast in registers; what the kernel leaves, element by element.
            let drows = &mut scratch.dst_ptrs;
            drows.clear();
            drows.extend(
                scratch
                    .dst_rows
                    .iter()
                    .map(|&r| dst_base.wrapping_add(r as usize * ds)),
            );
            let rows = transpose::Table {
                src: srows,
                dst: drows,
            };
            // SAFETY: the rows hold the tile (asserted above); destination rows belong to this
            // item alone; `fused` exists only where the CPU has its features.
            let done = unsafe { fused.run(rows, true) };
            self.cast_strips(rows, done);
            return;
        }
        // Casts: transpose into a buffer of source elements, cast it whole (long vectorised
        // runs), then copy its rows out. The tile shape keeps it within the buffer.
        let bufs = scratch
            .bufs
            .get_or_insert_with(|| Box::new([TileBuf([0; TILE_BYTES]), TileBuf([0; TILE_BYTES])]));
        let [transposed, casted] = &mut **bufs;
        let tmp = &mut transposed.0[..na * nb * ss];
        let rows = transpose::Strided {
            src: std::ptr::null(),
            src_row: 0,
            dst: tmp.as_mut_ptr(),
            dst_row: nb * ss,
            na,
            nb,
        };
        let rows = TableToStrided {
            src: srows,
            dst: rows,
        };
        // SAFETY: rows inside the source (asserted above) and the buffer (na * nb elements),
        // which no source row overlaps.
        unsafe { transpose::transpose_rows_dyn(rows, ss, false) };
        let casted = &mut casted.0[..na * nb * ds];
        (self.run)(&transposed.0[..na * nb * ss], casted, na * nb, &self.cast);
        for (a, &r) in scratch.dst_rows.iter().enumerate() {
            // SAFETY: the destination row is inside the buffer (asserted above) and belongs
            // to this item.
            let out =
                unsafe { std::slice::from_raw_parts_mut(dst_base.add(r as usize * ds), nb * ds) };
            let row = &casted[a * nb * ds..(a + 1) * nb * ds];
            if row.len() % 64 == 0 && out.as_ptr() as usize % 64 == 0 {
                // Whole lines: streamed past the cache, as the identity tiles do.
                transpose::stream_copy(out, row);
            } else {
                copy_short(out, row);
            }
        }
    }
}

/// Destination-contiguous units per row of a tile: its data rows and fill rows.
fn nb_total(tb: usize, pad: usize) -> usize {
    tb + pad
}

/// The destination row offsets of tiles over several source-contiguous loops, which repeat
/// every `period` rows.
struct PeriodicRows {
    period: usize,
    /// Byte offsets of rows `0..ta`, from the tile's start.
    bytes: Vec<usize>,
    /// The largest offset.
    max: usize,
    /// Whether a whole tile's destination is one contiguous range starting at offset 0 (then
    /// it can be written through a scratch tile and streamed out).
    contiguous: bool,
}

impl PeriodicRows {
    fn new(period: usize, rel: &[isize], elem: usize, row_units: usize, unit: usize) -> Self {
        let bytes: Vec<usize> = rel.iter().map(|&o| o as usize * elem).collect();
        let max = bytes.iter().copied().max().unwrap_or(0);
        let min = bytes.iter().copied().min().unwrap_or(0);
        let row = row_units * unit * elem;
        let contiguous = min == 0 && max + row == bytes.len() * row;
        PeriodicRows {
            period,
            bytes,
            max,
            contiguous,
        }
    }
}

/// A tile of rows a fixed distance apart: source rows `s_first + b * s_row` for `b < nb`,
/// destination rows `d_first + a * d_row` for `a < na` (elements), each destination row
/// followed by `pad` fill elements.
struct StridedTile {
    s_first: isize,
    s_row: isize,
    d_first: isize,
    d_row: isize,
    na: usize,
    nb: usize,
    pad: usize,
}

/// Source rows from a table, destination rows strided (a scratch tile).
#[derive(Clone, Copy)]
struct TableToStrided<'t> {
    src: &'t [*const u8],
    dst: transpose::Strided,
}

impl transpose::Rows for TableToStrided<'_> {
    fn na(&self) -> usize {
        self.dst.na
    }
    fn nb(&self) -> usize {
        self.src.len()
    }
    fn src(&self, b: usize) -> *const u8 {
        self.src[b]
    }
    fn dst(&self, a: usize) -> *mut u8 {
        transpose::Rows::dst(&self.dst, a)
    }
    fn dst_lines(&self) -> bool {
        false
    }
}

/// Destination offsets (elements, relative) of flattened indices `a0 .. a0 + n` of `loops`
/// (outermost first), into `out`.
fn dst_offsets(loops: &[LoopDim], a0: usize, n: usize, out: &mut Vec<isize>) {
    out.clear();
    if let [l] = loops {
        out.extend((a0..a0 + n).map(|a| a as isize * l.dst_stride));
        return;
    }
    // Odometer from a0's digits.
    let mut idx = vec![0usize; loops.len()];
    let mut rest = a0;
    let mut off = 0isize;
    for (j, l) in loops.iter().enumerate().rev() {
        idx[j] = rest % l.extent;
        rest /= l.extent;
        off += idx[j] as isize * l.dst_stride;
    }
    for _ in 0..n {
        out.push(off);
        let mut j = loops.len();
        while j > 0 {
            j -= 1;
            idx[j] += 1;
            off += loops[j].dst_stride;
            if idx[j] < loops[j].extent {
                break;
            }
            off -= loops[j].dst_stride * loops[j].extent as isize;
            idx[j] = 0;
        }
    }
}

/// The tile shape `(a, b)` in units of `unit_bytes` (the wider of the source and destination
/// unit; `dst_unit_bytes` the destination's): `a` along the source rows (contiguous in the
/// source), `b` along the destination rows, for source rows `src_row_bytes` apart,
/// destination rows `dst_row_bytes` apart, and at most `max_bytes` per tile. Segments are
/// counted in destination bytes, so a cast to a narrower type still writes whole lines.
///
/// Chosen from measurements on the 2-core EPYC (bench/results/cpu.md): the destination
/// segment each row gets per tile (`b`) is long (2 KiB) when the source rows are close
/// together (NHWC's pixels: few pages to read from), short (one line) when the source rows
/// are far apart and the destination rows close (NCHW -> NHWC: few source streams, which the
/// prefetchers follow), 256 bytes when both are far apart. `a` fills the rest of the tile.
fn tile_shape(
    unit_bytes: usize,
    dst_unit_bytes: usize,
    src_row_bytes: usize,
    dst_row_bytes: usize,
    nb: usize,
    max_bytes: usize,
) -> (usize, usize) {
    const PAGE: usize = 4096;
    let (segment, max_bytes) = match (src_row_bytes < PAGE, dst_row_bytes < PAGE) {
        (true, true) => (2048, max_bytes),
        (true, false) => (512, max_bytes.min(16384)),
        (false, false) => (256, max_bytes),
        (false, true) => (64, max_bytes),
    };
    let tb = (segment / dst_unit_bytes).clamp(1, nb.max(1));
    let ta = (max_bytes / (tb * unit_bytes)).clamp(1, MAX_TILE_A);
    (ta, tb)
}

/// Fills an `o x l` plane of destination elements with the fill value (`N` bytes each).
fn fill_plane<const N: usize>(dst: &mut [u8], d0: usize, o: LoopDim, l: LoopDim, fill: &[u8; 8]) {
    let mut f = [0u8; N];
    f.copy_from_slice(&fill[..N]);
    for i in 0..o.extent {
        let base = d0 as isize + i as isize * o.dst_stride;
        for j in 0..l.extent {
            let at = (base + j as isize * l.dst_stride) as usize * N;
            dst[at..at + N].copy_from_slice(&f);
        }
    }
}

/// Copies a few bytes (a unit, its padding): fixed-size moves for the usual sizes, which the
/// length selects (the same for every unit of an item, so the branch is predictable).
#[inline(always)]
fn copy_few(dst: &mut [u8], src: &[u8]) {
    match src.len() {
        0 => {}
        2 => dst[..2].copy_from_slice(&src[..2]),
        4 => dst[..4].copy_from_slice(&src[..4]),
        6 => dst[..6].copy_from_slice(&src[..6]),
        8 => dst[..8].copy_from_slice(&src[..8]),
        12 => dst[..12].copy_from_slice(&src[..12]),
        16 => dst[..16].copy_from_slice(&src[..16]),
        _ => copy_short(dst, src),
    }
}

/// Copies a short row (a tile row: tens to hundreds of bytes) with inline 16-byte moves; a
/// `memcpy` call per row costs more than the row.
#[inline(always)]
fn copy_short(dst: &mut [u8], src: &[u8]) {
    let mut d = dst.chunks_exact_mut(16);
    let mut s = src.chunks_exact(16);
    for (a, b) in (&mut d).zip(&mut s) {
        let mut v = [0u8; 16];
        v.copy_from_slice(b);
        a.copy_from_slice(&v);
    }
    for (a, b) in d.into_remainder().iter_mut().zip(s.remainder()) {
        *a = *b;
    }
}
