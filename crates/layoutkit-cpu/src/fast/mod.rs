//! The fast CPU engine: executes a [`ConversionPlan`]'s regions with
//! * whole contiguous runs copied or cast as slices (vectorised casts),
//! * cache-sized 2-D tiles where the destination's and the source's contiguous loops differ
//!   (a transposition), with an AVX2 8x8 kernel for 4-byte elements chosen at run time,
//! * the work split into independent items run on a rayon pool of the requested size.
//!
//! Every destination element is written by exactly one work item (the plan's regions are
//! disjoint), so the result does not depend on the thread count or the order items run in.
//! Tested against the reference converter on random layouts, shapes, casts and thread counts.

mod casts;
mod transpose;

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
        .map_err(|e| layoutkit_core::Error::Npy(format!("cannot start {threads} threads: {e}")))?;
    pool.install(|| items.par_iter().for_each(|it| job.execute(it)));
    Ok(())
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

/// A unit of work: a box of one region (loops outermost first, offsets in elements).
struct Item {
    src_offset: usize,
    dst_offset: usize,
    dims: Vec<LoopDim>,
    kind: Kind,
}

#[derive(Clone, Copy)]
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

/// Elements per run item, and the tile edge by element size.
const RUN_CHUNK_BYTES: usize = 256 << 10;
fn tile_edge(size: usize) -> usize {
    (128 / size).max(16)
}

/// Splits a region into items.
fn split(r: &Region, fill: bool, cast: &CastSpec, items: &mut Vec<Item>) {
    let mut dims = r.dims.clone();
    if dims.is_empty() {
        dims.push(LoopDim {
            extent: 1,
            src_stride: 1,
            dst_stride: 1,
        });
    }
    let n = dims.len();
    let inner = dims[n - 1];
    let kind = if fill {
        Kind::Fill
    } else if inner.src_stride == 1 && inner.dst_stride == 1 {
        Kind::Run
    } else if let Some(a) = dims[..n - 1]
        .iter()
        .rposition(|d| d.src_stride == 1)
        .filter(|_| inner.dst_stride == 1)
    {
        // Move the source-contiguous loop next to the innermost one: a tile.
        let d = dims.remove(a);
        dims.insert(n - 2, d);
        Kind::Tile
    } else {
        Kind::Strided
    };
    let size = cast.src.size_bytes().max(cast.dst.size_bytes());
    // Chop the loops that the kernels iterate into pieces of a good size.
    let mut pieces: Vec<(usize, usize)> = dims.iter().map(|d| (d.extent, d.extent)).collect();
    match kind {
        Kind::Run | Kind::Fill => {
            let chunk = (RUN_CHUNK_BYTES / size).max(1);
            pieces[n - 1].1 = chunk.min(dims[n - 1].extent);
        }
        Kind::Tile => {
            let t = tile_edge(size);
            pieces[n - 2].1 = t.min(dims[n - 2].extent);
            pieces[n - 1].1 = t.min(dims[n - 1].extent);
        }
        Kind::Strided => {}
    }
    // Loops the kernel does not iterate are split into single steps.
    let kernel_loops = match kind {
        Kind::Tile => 2,
        _ => 1,
    };
    for p in pieces.iter_mut().take(n - kernel_loops) {
        p.1 = 1;
    }
    // Odometer over piece starts.
    let mut start = vec![0usize; n];
    loop {
        let mut it = Item {
            src_offset: r.src_offset,
            dst_offset: r.dst_offset,
            dims: Vec::with_capacity(kernel_loops),
            kind,
        };
        for (k, d) in dims.iter().enumerate() {
            it.src_offset = (it.src_offset as isize + start[k] as isize * d.src_stride) as usize;
            it.dst_offset = (it.dst_offset as isize + start[k] as isize * d.dst_stride) as usize;
            if k >= n - kernel_loops {
                it.dims.push(LoopDim {
                    extent: pieces[k].1.min(d.extent - start[k]),
                    ..*d
                });
            }
        }
        items.push(it);
        let mut k = n;
        loop {
            if k == 0 {
                return;
            }
            k -= 1;
            start[k] += pieces[k].1;
            if start[k] < dims[k].extent {
                break;
            }
            start[k] = 0;
        }
    }
}

impl Job<'_> {
    fn execute(&self, it: &Item) {
        let dst = self.dst.slice();
        let (ss, ds) = (self.cast.src.size_bytes(), self.cast.dst.size_bytes());
        match it.kind {
            Kind::Run => {
                let n = it.dims[0].extent;
                let s = &self.src[it.src_offset * ss..(it.src_offset + n) * ss];
                let d = &mut dst[it.dst_offset * ds..(it.dst_offset + n) * ds];
                (self.run)(s, d, n, &self.cast);
            }
            Kind::Fill => {
                let l = it.dims[0];
                let f = &self.fill[..ds];
                for k in 0..l.extent {
                    let at = (it.dst_offset as isize + k as isize * l.dst_stride) as usize * ds;
                    dst[at..at + ds].copy_from_slice(f);
                }
            }
            Kind::Strided => {
                let l = it.dims[0];
                for k in 0..l.extent {
                    let so = (it.src_offset as isize + k as isize * l.src_stride) as usize;
                    let d = (it.dst_offset as isize + k as isize * l.dst_stride) as usize;
                    (self.run)(
                        &self.src[so * ss..(so + 1) * ss],
                        &mut dst[d * ds..(d + 1) * ds],
                        1,
                        &self.cast,
                    );
                }
            }
            Kind::Tile => self.tile(it, dst),
        }
    }

    /// `dims[0]` (a) is contiguous in the source, `dims[1]` (b) in the destination.
    fn tile(&self, it: &Item, dst: &mut [u8]) {
        let (a, b) = (it.dims[0], it.dims[1]);
        let (ss, ds) = (self.cast.src.size_bytes(), self.cast.dst.size_bytes());
        let (na, nb) = (a.extent, b.extent);
        // Strides are positive in every plan (layouts have positive strides).
        let s_row = b.src_stride as usize;
        let d_row = a.dst_stride as usize;
        let src_end = ((nb - 1) * s_row + na) * ss;
        let dst_end = ((na - 1) * d_row + nb) * ds;
        let src = &self.src[it.src_offset * ss..it.src_offset * ss + src_end];
        let out = &mut dst[it.dst_offset * ds..it.dst_offset * ds + dst_end];
        if self.cast.is_identity() {
            match ss {
                1 => transpose::transpose_tile::<1>(src, s_row, out, d_row, na, nb),
                2 => transpose::transpose_tile::<2>(src, s_row, out, d_row, na, nb),
                4 => transpose::transpose_tile::<4>(src, s_row, out, d_row, na, nb),
                _ => transpose::transpose_tile::<8>(src, s_row, out, d_row, na, nb),
            }
            return;
        }
        // Casts: transpose into a small buffer of source elements, then cast its rows.
        let mut tmp = [0u8; 16384];
        let tmp = &mut tmp[..na * nb * ss];
        match ss {
            1 => transpose::transpose_tile::<1>(src, s_row, tmp, nb, na, nb),
            2 => transpose::transpose_tile::<2>(src, s_row, tmp, nb, na, nb),
            4 => transpose::transpose_tile::<4>(src, s_row, tmp, nb, na, nb),
            _ => transpose::transpose_tile::<8>(src, s_row, tmp, nb, na, nb),
        }
        for r in 0..na {
            let row = &tmp[r * nb * ss..(r + 1) * nb * ss];
            (self.run)(
                row,
                &mut out[r * d_row * ds..(r * d_row + nb) * ds],
                nb,
                &self.cast,
            );
        }
    }
}
