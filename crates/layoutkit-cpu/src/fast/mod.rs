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
mod casts;
mod transpose;

pub use buffer::AlignedBuf;

use layoutkit_core::cast::Scalar;
use layoutkit_core::plan::{ConversionPlan, LoopDim, Region, Strategy};
use layoutkit_core::CastSpec;
use rayon::prelude::*;

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
    let job = Job {
        src: src_data,
        dst: SharedMut::new(dst_data),
        cast: *cast,
        run: run_kernel(cast),
        fill: fill_bytes,
    };
    let mut items: Vec<Item> = Vec::new();
    for r in copies {
        split(r, false, cast, &mut items);
    }
    for r in fills {
        split(r, true, cast, &mut items);
    }
    if threads <= 1 || items.len() <= 1 {
        items.iter().for_each(|it| job.execute(it));
        return Ok(());
    }
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| Error::Threads {
            threads,
            reason: e.to_string(),
        })?;
    pool.install(|| items.par_iter().for_each(|it| job.execute(it)));
    Ok(())
}

/// A tile-sized scratch buffer, aligned so the cast kernels can view it as typed elements.
#[repr(align(64))]
struct TileBuf([u8; 16384]);

/// Scratch for casting tiles: made once per work item (zeroing it per tile cost more than the
/// tile).
struct Scratch {
    transposed: Box<TileBuf>,
    casted: Box<TileBuf>,
}

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
    fill: [u8; 8],
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

impl Kind {
    fn kernel_loops(self) -> usize {
        match self {
            Kind::Tile | Kind::Fill => 2,
            _ => 1,
        }
    }
}

/// Runs up to this many bytes that are contiguous in both layouts become units.
const MAX_UNIT_BYTES: usize = 64;

/// Elements per work item (about): big enough to amortise the item, small enough to balance
/// threads.
const ITEM_ELEMENTS: usize = 1 << 16;

/// The tile edge in elements, by element size: 32 x 32 for 4 bytes.
fn tile_edge(size: usize) -> usize {
    (128 / size).clamp(4, 128)
}

/// Splits a region into items of about [`ITEM_ELEMENTS`] elements by chunking its outer loops.
fn split(r: &Region, fill: bool, cast: &CastSpec, items: &mut Vec<Item>) {
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
    let kind = if fill {
        Kind::Fill
    } else if inner.src_stride == u && inner.dst_stride == u {
        Kind::Run
    } else if let Some(a) = dims[..n - 1]
        .iter()
        .rposition(|d| d.src_stride == u)
        .filter(|_| inner.dst_stride == u)
    {
        // Move the source-contiguous loop next to the innermost one: a tile.
        let d = dims.remove(a);
        dims.insert(n - 2, d);
        Kind::Tile
    } else {
        Kind::Strided
    };
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
    let target = total.div_ceil(ITEM_ELEMENTS).max(1);
    // Find the loop to chunk: loops before it give one item per index.
    let mut before = 1usize;
    let mut k = 0;
    while k < n - 1 && before * dims[k].extent < target {
        before *= dims[k].extent;
        k += 1;
    }
    let pieces_k = target.div_ceil(before).clamp(1, dims[k].extent);
    let chunk = dims[k].extent.div_ceil(pieces_k);
    let mut start = vec![0usize; k + 1];
    loop {
        let mut it = Item {
            src_offset: r.src_offset,
            dst_offset: r.dst_offset,
            dims: dims[k..].to_vec(),
            kind,
            unit,
        };
        for (j, d) in dims[..=k].iter().enumerate() {
            it.src_offset = (it.src_offset as isize + start[j] as isize * d.src_stride) as usize;
            it.dst_offset = (it.dst_offset as isize + start[j] as isize * d.dst_stride) as usize;
        }
        it.dims[0].extent = chunk.min(dims[k].extent - start[k]);
        // Keep the kernel's loop count: pad with unit loops if the chunked loop is inside it.
        while it.dims.len() < kind.kernel_loops() {
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
                return;
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
        let m = it.kind.kernel_loops();
        let outer = &it.dims[..it.dims.len() - m];
        let kernel = &it.dims[it.dims.len() - m..];
        // Odometer over the item's outer loops; the kernel does the rest.
        let mut scratch = Scratch {
            transposed: Box::new(TileBuf([0; 16384])),
            casted: Box::new(TileBuf([0; 16384])),
        };
        let mut idx = vec![0usize; outer.len()];
        let (mut so, mut d) = (it.src_offset as isize, it.dst_offset as isize);
        loop {
            self.kernel(
                it.kind,
                it.unit,
                so as usize,
                d as usize,
                kernel,
                dst,
                &mut scratch,
            );
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
        kind: Kind,
        unit: usize,
        so: usize,
        d0: usize,
        k: &[LoopDim],
        dst: &mut [u8],
        scratch: &mut Scratch,
    ) {
        let (ss, ds) = (self.cast.src.size_bytes(), self.cast.dst.size_bytes());
        match kind {
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
                for j in 0..l.extent {
                    let s = (so as isize + j as isize * l.src_stride) as usize;
                    let d = (d0 as isize + j as isize * l.dst_stride) as usize;
                    (self.run)(
                        &self.src[s * ss..(s + unit) * ss],
                        &mut dst[d * ds..(d + unit) * ds],
                        unit,
                        &self.cast,
                    );
                }
            }
            Kind::Tile => {
                // Tiles of the (a, b) plane of about t x t units; a short b gets a longer a.
                let (a, b) = (k[0], k[1]);
                let t = tile_edge(ss.max(ds) * unit);
                let ta = t * (t / b.extent.min(t)).max(1);
                // Tile order: `b` (destination-contiguous) blocks outermost, so the source is
                // read as a few long row streams; the destination gets whole lines per tile.
                let b_outer = true;
                let (outer_n, inner_n) = if b_outer {
                    (b.extent, a.extent)
                } else {
                    (a.extent, b.extent)
                };
                let (outer_t, inner_t) = if b_outer { (t, ta) } else { (ta, t) };
                let mut o0 = 0;
                while o0 < outer_n {
                    let no = outer_t.min(outer_n - o0);
                    let mut i0 = 0;
                    while i0 < inner_n {
                        let ni = inner_t.min(inner_n - i0);
                        let (a0, na, b0, nb) = if b_outer {
                            (i0, ni, o0, no)
                        } else {
                            (o0, no, i0, ni)
                        };
                        let s_off =
                            (so as isize + a0 as isize * a.src_stride + b0 as isize * b.src_stride)
                                as usize;
                        let d_off =
                            (d0 as isize + a0 as isize * a.dst_stride + b0 as isize * b.dst_stride)
                                as usize;
                        self.tile(s_off, d_off, a, b, na, nb, unit, dst, scratch);
                        i0 += ni;
                    }
                    o0 += no;
                }
            }
        }
    }

    /// One tile of `na x nb` units: `a` is contiguous in the source, `b` in the destination
    /// (their strides are `unit`).
    #[allow(clippy::too_many_arguments)]
    fn tile(
        &self,
        so: usize,
        d0: usize,
        a: LoopDim,
        b: LoopDim,
        na: usize,
        nb: usize,
        unit: usize,
        dst: &mut [u8],
        scratch: &mut Scratch,
    ) {
        let (ss, ds) = (self.cast.src.size_bytes(), self.cast.dst.size_bytes());
        // Strides are positive in every plan (layouts have positive strides).
        let s_row = b.src_stride as usize;
        let d_row = a.dst_stride as usize;
        let src_end = ((nb - 1) * s_row + na * unit) * ss;
        let dst_end = ((na - 1) * d_row + nb * unit) * ds;
        let src = &self.src[so * ss..so * ss + src_end];
        let out = &mut dst[d0 * ds..d0 * ds + dst_end];
        if unit > 1 && self.cast.is_identity() {
            // Units of several elements, copied whole (fixed sizes compile to plain moves).
            let (sr, dr) = (s_row * ss, d_row * ss);
            match unit * ss {
                4 => unit_tile::<4>(src, sr, out, dr, na, nb),
                8 => unit_tile::<8>(src, sr, out, dr, na, nb),
                16 => unit_tile::<16>(src, sr, out, dr, na, nb),
                32 => unit_tile::<32>(src, sr, out, dr, na, nb),
                64 => unit_tile::<64>(src, sr, out, dr, na, nb),
                bytes => unit_tile_any(src, sr, out, dr, na, nb, bytes),
            }
            return;
        }
        if unit > 1 {
            // Units of several elements: move (and cast) one unit at a time.
            for ia in 0..na {
                for ib in 0..nb {
                    let s = (ib * s_row + ia * unit) * ss;
                    let d = (ia * d_row + ib * unit) * ds;
                    (self.run)(
                        &src[s..s + unit * ss],
                        &mut out[d..d + unit * ds],
                        unit,
                        &self.cast,
                    );
                }
            }
            return;
        }
        if self.cast.is_identity() {
            match ss {
                1 => transpose::transpose_tile::<1>(src, s_row, out, d_row, na, nb, true),
                2 => transpose::transpose_tile::<2>(src, s_row, out, d_row, na, nb, true),
                4 => transpose::transpose_tile::<4>(src, s_row, out, d_row, na, nb, true),
                _ => transpose::transpose_tile::<8>(src, s_row, out, d_row, na, nb, true),
            }
            return;
        }
        // Casts: transpose into a small buffer of source elements, then cast its rows.
        // At most t x t source elements: (128 / size)^2 * ss <= 16 KiB.
        let tmp = &mut scratch.transposed.0[..na * nb * ss];
        match ss {
            1 => transpose::transpose_tile::<1>(src, s_row, tmp, nb, na, nb, false),
            2 => transpose::transpose_tile::<2>(src, s_row, tmp, nb, na, nb, false),
            4 => transpose::transpose_tile::<4>(src, s_row, tmp, nb, na, nb, false),
            _ => transpose::transpose_tile::<8>(src, s_row, tmp, nb, na, nb, false),
        }
        // Cast the whole transposed tile at once (long vectorised runs), then copy its rows.
        let casted = &mut scratch.casted.0[..na * nb * ds];
        (self.run)(tmp, casted, na * nb, &self.cast);
        for r in 0..na {
            copy_short(
                &mut out[r * d_row * ds..(r * d_row + nb) * ds],
                &casted[r * nb * ds..(r + 1) * nb * ds],
            );
        }
    }
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

/// A tile of `B`-byte units: unit `(a, b)` moves from byte `b * s_row_b + a * B` of `src` to
/// byte `a * d_row_b + b * B` of `dst` (row strides in bytes).
fn unit_tile<const B: usize>(
    src: &[u8],
    s_row_b: usize,
    dst: &mut [u8],
    d_row_b: usize,
    na: usize,
    nb: usize,
) {
    for ia in 0..na {
        for ib in 0..nb {
            let s = ib * s_row_b + ia * B;
            let d = ia * d_row_b + ib * B;
            let mut u = [0u8; B];
            u.copy_from_slice(&src[s..s + B]);
            dst[d..d + B].copy_from_slice(&u);
        }
    }
}

/// [`unit_tile`] for unit sizes without a specialisation.
fn unit_tile_any(
    src: &[u8],
    s_row_b: usize,
    dst: &mut [u8],
    d_row_b: usize,
    na: usize,
    nb: usize,
    b: usize,
) {
    for ia in 0..na {
        for ib in 0..nb {
            let s = ib * s_row_b + ia * b;
            let d = ia * d_row_b + ib * b;
            dst[d..d + b].copy_from_slice(&src[s..s + b]);
        }
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
