//! The fast CPU engine: executes a [`ConversionPlan`]'s regions with
//! * whole contiguous runs copied or cast as slices (vectorised casts),
//! * cache-sized tiles where the destination's and the source's contiguous loops differ (a
//!   transposition; `tiles`), run by SIMD kernels chosen at run time (`transpose`,
//!   `cast_tiles`), with padding written in the same pass where it completes a copy's runs,
//! * the work split into independent items (`items`) taken in order by scoped threads.
//!
//! Every destination element is written by exactly one work item (the plan's regions are
//! disjoint), so the result does not depend on the thread count or the order items run in.
//! Tested against the reference converter on random layouts, shapes, casts and thread counts.

mod buffer;
mod cast_tiles;
mod casts;
mod chunked;
mod destination;
mod gather;
mod half_runs;
mod half_tiles;
mod interleave;
mod interleave_half;
mod items;
mod lane_blocks;
mod next_tile;
#[cfg(target_arch = "x86_64")]
mod permute_blocks;
mod planes_records;
mod prepared;
#[cfg(target_arch = "x86_64")]
mod quantise_avx2;
#[cfg(target_arch = "x86_64")]
mod quantise_avx512;
mod record_casts;
mod records;
#[cfg(target_arch = "x86_64")]
mod records_stream;
mod records_strided;
#[cfg(target_arch = "x86_64")]
mod records_x86;
mod reverse;
mod scratch;
mod shape;
mod table_tiles;
mod tile_tables;
mod tiles;
mod transpose;

pub use buffer::AlignedBuf;
pub use prepared::FastConversion;

use layoutkit_core::plan::{ConversionPlan, LoopDim};
use layoutkit_core::CastSpec;

use crate::Error;
use items::{Item, Kind};
use scratch::Scratch;

/// Runs `plan` on `threads` threads (1 runs on the calling thread), as [`FastConversion::new`]
/// then [`FastConversion::run`] would. A caller converting the same shapes again keeps the
/// [`FastConversion`] instead, which spares the work items' planning on every call.
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
    prepared::convert_once(plan, src_data, dst_data, cast, threads)
}

/// The shortest contiguous run of a streamed identity conversion copied with streaming
/// stores (shorter ones keep the copy's ordinary stores: their lines are mostly partial).
const STREAM_RUN_MIN_BYTES: usize = 256;

/// The shortest contiguous run of a streamed cast cast in pieces and streamed out
/// ([`casts::stream_cast_run`]).
const STREAM_CAST_MIN_BYTES: usize = 1024;

/// Conversions that read and write fewer bytes run on one thread whatever the thread count.
const PARALLEL_MIN_BYTES: usize = 2 << 20;

/// The most bytes one tile of an identity conversion holds (in cache between its reads and
/// its writes).
const IDENTITY_TILE_BYTES: usize = 65536;

/// The most bytes one casting tile holds (of the wider element type): its scratch buffers.
const TILE_BYTES: usize = 16384;

/// A tile-sized scratch buffer, aligned so the cast kernels can view it as typed elements.
#[repr(align(64))]
pub(super) struct TileBuf([u8; TILE_BYTES]);

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

/// One run of a prepared conversion: its buffers, and (through `Deref`) the settings the
/// preparation chose ([`prepared::Settings`]: streaming, prefetch, kernels, fill values).
struct Job<'a> {
    src: &'a [u8],
    dst: SharedMut,
    cast: CastSpec,
    settings: &'a prepared::Settings,
}

impl std::ops::Deref for Job<'_> {
    type Target = prepared::Settings;
    fn deref(&self) -> &prepared::Settings {
        self.settings
    }
}

impl Job<'_> {
    /// Copies a finished piece to its final destination: streamed past the cache where the
    /// job streams ([`prepared::Settings::stream`]), else plain stores.
    fn out_copy(&self, dst: &mut [u8], src: &[u8]) {
        if self.stream {
            transpose::stream_copy(dst, src);
        } else {
            dst.copy_from_slice(src);
        }
    }

    /// Runs item `it`, moving its blocks by `table` where [`item_table`] made one, with its
    /// source and destination offsets moved by `shift` elements (a chunk's template item,
    /// [`chunked`]; `(0, 0)` for the item as made).
    fn execute(&self, it: &Item, table: Option<&gather::Table>, shift: (isize, isize)) {
        transpose::set_prefetches(self.prefetch);
        let dst = self.dst.slice();
        let m = it.kernel_loops();
        let outer = &it.dims[..it.dims.len() - m];
        let kernel = &it.dims[it.dims.len() - m..];
        let size = self.cast.src.size_bytes();
        let outer = if table.is_some() {
            &outer[..outer.len() - 1]
        } else {
            outer
        };
        // Odometer over the item's outer loops; the kernel does the rest.
        let mut scratch = Scratch::new();
        let mut idx = vec![0usize; outer.len()];
        let (mut so, mut d) = (
            it.src_offset as isize + shift.0,
            it.dst_offset as isize + shift.1,
        );
        loop {
            match table {
                Some(table) => table.run(self.src, dst, (so, d), size),
                None => self.kernel(it, so as usize, d as usize, kernel, dst, &mut scratch),
            }
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
                if self.stream && self.cast.is_identity() && d.len() >= STREAM_RUN_MIN_BYTES {
                    // Runs of a streamed destination past the cache, as the plain copy they
                    // are compared with streams its lines: a copy call's ordinary stores
                    // read each line before writing it (i8 `NCHW32c -> NCHW` with C = 1000
                    // on 1 x 1 planes, runs of 1000 bytes: 55% of the copy, the copy calls
                    // 65% of the samples).
                    transpose::stream_copy(d, s);
                } else if self.stream && d.len() >= STREAM_CAST_MIN_BYTES {
                    // Casts too: through a piece in cache, streamed out in whole lines.
                    let buf = scratch
                        .stream_buf
                        .get_or_insert_with(|| AlignedBuf::zeroed(SCRATCH_BYTES));
                    casts::stream_cast_run((s, d), n, &self.cast, self.run, buf);
                } else {
                    (self.run)(s, d, n, &self.cast);
                }
            }
            Kind::Fill => {
                let (o, l) = (k[0], k[1]);
                if l.dst_stride == 1 {
                    // Runs of fill (a blocked layout's padded channels after a cast): copies
                    // of the fill line, not element by element (f32 -> f16 NCHW -> NCHW32c
                    // with 3 channels writes 29 fill elements per pixel). Runs of 256 bytes
                    // and more are streamed where the job streams, so their lines are not
                    // read before they are written (OIHW16i16o with I = 1: 15 of every 16
                    // rows of a block are fill).
                    let run = l.extent * ds;
                    let stream = self.stream && run >= 256;
                    for i in 0..o.extent {
                        let at = (d0 as isize + i as isize * o.dst_stride) as usize * ds;
                        for part in dst[at..at + run].chunks_mut(self.fill_line.len()) {
                            let line = &self.fill_line[..part.len()];
                            if stream {
                                transpose::stream_copy(part, line);
                            } else {
                                copy_few(part, line);
                            }
                        }
                    }
                    return;
                }
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
                    let n = unit * ss;
                    // Records back to back on both sides: whole-record moves.
                    let (s, d) = (so * ss, d0 * ds);
                    let (count, out) = (l.extent, n + pad.len());
                    if count > 0
                        && l.src_stride == unit as isize
                        && l.dst_stride * ds as isize == out as isize
                    {
                        let buf = scratch
                            .stream_buf
                            .get_or_insert_with(|| AlignedBuf::zeroed(SCRATCH_BYTES));
                        let (src, out_bytes) = (&self.src[s..s + count * n], count * out);
                        if records::expand_streamed(
                            src,
                            &mut dst[d..d + out_bytes],
                            (n, out),
                            pad,
                            (buf, self.stream),
                        ) {
                            return;
                        }
                    }
                    if count > 0
                        && pad.is_empty()
                        && l.dst_stride == unit as isize
                        && l.src_stride > unit as isize
                    {
                        let stride = l.src_stride as usize * ss;
                        let src = &self.src[s..s + (count - 1) * stride + n];
                        if records::compact(src, &mut dst[d..d + count * n], count, n, stride) {
                            return;
                        }
                    }
                    // Records apart in the source into padded records back to back.
                    if count > 0
                        && !pad.is_empty()
                        && l.src_stride > 0
                        && l.dst_stride * ds as isize == out as isize
                    {
                        let stride = l.src_stride as usize * ss;
                        let src = &self.src[s..s + (count - 1) * stride + n];
                        let out_bytes = &mut dst[d..d + count * out];
                        let sizes = (n, out);
                        if records_strided::expand_strided(
                            src, stride, out_bytes, count, sizes, pad,
                        ) {
                            return;
                        }
                    }
                    // Units apart on both sides, sizes known at compile time.
                    if count > 0 && pad.is_empty() && l.src_stride > 0 && l.dst_stride > 0 {
                        let (sst, dst_st) =
                            (l.src_stride as usize * ss, l.dst_stride as usize * ds);
                        let src = (&self.src[s..s + (count - 1) * sst + n], sst);
                        let to = (&mut dst[d..d + (count - 1) * dst_st + n], dst_st);
                        if records_strided::move_strided(src, to, count, n) {
                            return;
                        }
                    }
                    // Plain moves of a few bytes: inline copies, no kernel call per unit.
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
                let count = l.extent;
                let out = unit * ds + pad.len();
                if count > 0
                    && l.src_stride == unit as isize
                    && l.dst_stride * ds as isize == out as isize
                    && self.cast_records(so, d0, count, unit, pad, dst, scratch)
                {
                    return;
                }
                if count > 0
                    && pad.is_empty()
                    && l.dst_stride == unit as isize
                    && l.src_stride > unit as isize
                    && self.compact_cast(so, d0, count, unit, l.src_stride as usize, dst, scratch)
                {
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
            Kind::Lanes => match it.lanes {
                Some(b) => self.lane_block(so, d0, b, scratch),
                None => unreachable!("a lane item carries its block"),
            },
            Kind::Tile if it.b_loops == 2 => {
                let [a, b_outer, b_inner] = k else {
                    unreachable!("a compound destination row follows one source-contiguous loop")
                };
                self.tiles_compound_b(so, d0, *a, [*b_outer, *b_inner], (unit, it.pad), scratch);
            }
            Kind::Tile => {
                let (a_loops, b) = k.split_at(k.len() - 1);
                self.tiles(so, d0, a_loops, b[0], unit, it.pad, it.tail, scratch);
            }
        }
    }
}

/// Runs `task(0..tasks)`: on the calling thread in order, or, where `parallel`, taken in order
/// by `threads` workers until none is left (tasks run roughly in memory order on all workers at
/// once, and unequal tasks still balance; a rayon `par_iter` over the same items measured a
/// third slower on a 2-core machine). The workers are tasks on rayon's pool, whose threads
/// outlive the call: starting threads per call cost tens of microseconds, milliseconds on a
/// loaded machine.
fn run_in_order(tasks: usize, threads: usize, parallel: bool, task: impl Fn(usize) + Sync) {
    if !parallel {
        (0..tasks).for_each(task);
        return;
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let work = || loop {
        let t = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if t >= tasks {
            break;
        }
        task(t);
    };
    rayon::scope(|scope| {
        for _ in 1..threads.min(tasks) {
            scope.spawn(|_| work());
        }
        work();
    });
}

/// The table item `it` moves its blocks by, if any: tiles too small for the transpose kernels
/// (a few elements per row), repeated along the innermost loop outside the tile, whose blocks
/// one table then moves ([`gather`]). `sparse`: the destination is filled first.
fn item_table(it: &Item, cast: &CastSpec, sparse: bool) -> Option<gather::Table> {
    let m = it.kernel_loops();
    let (outer, kernel) = it.dims.split_at(it.dims.len() - m);
    let batch = *outer.last()?;
    (it.kind == Kind::Tile && it.b_loops == 1 && it.pad == 0 && it.tail == 0 && cast.is_identity())
        .then(|| gather::Table::of(kernel, it.unit, cast.src.size_bytes(), sparse, batch))
        .flatten()
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

/// A loop of the plan (the tests' shorthand).
#[cfg(test)]
fn loop_dim(extent: usize, src_stride: isize, dst_stride: isize) -> LoopDim {
    LoopDim {
        extent,
        src_stride,
        dst_stride,
    }
}

/// A xorshift generator of 64-bit values from `seed` (the tests' reproducible data).
#[cfg(test)]
fn xorshift(mut state: u64) -> impl FnMut() -> u64 {
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    }
}

/// Copies a few bytes (a unit, its padding): fixed-size moves for the usual sizes, which the
/// length selects (the same for every unit of an item, so the branch is predictable). Each
/// goes through a local array: a slice-to-slice copy of 12 bytes was left as a `memcpy` call
/// (`perf`: 18% of the samples of f32 -> f16 NCHW32c -> NCHW with C = 3).
#[inline(always)]
fn copy_few(dst: &mut [u8], src: &[u8]) {
    #[inline(always)]
    fn mv<const N: usize>(dst: &mut [u8], src: &[u8]) {
        let mut v = [0u8; N];
        v.copy_from_slice(&src[..N]);
        dst[..N].copy_from_slice(&v);
    }
    match src.len() {
        0 => {}
        1 => dst[0] = src[0],
        2 => mv::<2>(dst, src),
        3 => mv::<3>(dst, src),
        4 => mv::<4>(dst, src),
        6 => mv::<6>(dst, src),
        8 => mv::<8>(dst, src),
        12 => mv::<12>(dst, src),
        16 => mv::<16>(dst, src),
        24 => mv::<24>(dst, src),
        32 => mv::<32>(dst, src),
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
