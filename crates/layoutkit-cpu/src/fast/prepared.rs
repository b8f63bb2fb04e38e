//! A conversion prepared once and run many times: the plan's regions cut into work items, and
//! the tables of the small blocks some items move, made by [`FastConversion::new`]; each
//! [`FastConversion::run`] only moves bytes.
//!
//! Making the items costs microseconds (the padding merged into the copies, the tile and
//! kernel choice per region, a table and its permute indices per block), which a conversion of
//! a few tens of KiB, itself a microsecond or two, paid on every call: f16 `NHWC ->
//! mace:in_out_channel` of 64 KiB spent a fifth of its time there (`perf`, one thread).

use layoutkit_core::cast::Scalar;
use layoutkit_core::plan::{ConversionPlan, Region, Strategy};
use layoutkit_core::tiling;
use layoutkit_core::CastSpec;

use super::casts::{run_kernel, RunKernel};
use super::gather::Table;
use super::items::{split, Item, MAX_TILE_A};
use super::{cast_tiles, chunked, destination, records, Job, SharedMut, PARALLEL_MIN_BYTES};
use crate::{check_buffers, Error};

/// A conversion for the fast engine, prepared for one plan, cast and thread count: run it on
/// any number of buffer pairs of the plan's sizes.
///
/// ```
/// use layoutkit_core::plan::ConversionPlan;
/// use layoutkit_core::{parse_format, CastSpec, DType, Dims};
/// use layoutkit_cpu::FastConversion;
///
/// let dims = Dims::parse("N=1,C=3,H=2,W=2").unwrap();
/// let src = parse_format("NCHW").unwrap().shaped(&dims).unwrap();
/// let dst = parse_format("NHWC").unwrap().shaped(&dims).unwrap();
/// let plan = ConversionPlan::new(&src, &dst).unwrap();
/// let cast = CastSpec::identity(DType::U8);
/// let conversion = FastConversion::new(&plan, &cast, 1).unwrap();
/// let mut out = [0u8; 12];
/// for image in [[0u8, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11], [7; 12]] {
///     conversion.run(&image, &mut out).unwrap();
/// }
/// assert_eq!(out, [7; 12]);
/// conversion.run(&[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11], &mut out).unwrap();
/// assert_eq!(out, [0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11]);
/// ```
pub struct FastConversion {
    plan: ConversionPlan,
    cast: CastSpec,
    threads: usize,
    /// None where the plan has no regions (blocks that do not nest): the per-element walk.
    work: Option<Work>,
}

/// The prepared work of a plan with regions.
struct Work {
    items: Vec<Item>,
    /// Per item, the table of its blocks where it moves them by table.
    tables: Vec<Option<Table>>,
    /// The destination written whole with the fill first ([`destination::fill_first`]).
    fill_first: bool,
    /// Whether the items (or chunks) are shared among threads (enough of them, and bytes).
    parallel: bool,
    settings: Settings,
    /// Regions interleaved in memory run chunk by chunk: then `items` and `tables` are the
    /// template of the first chunk ([`chunked`]).
    chunks: Option<chunked::Chunks>,
}

/// What every item of a run reads besides the buffers.
#[derive(Clone)]
pub(super) struct Settings {
    /// Whether final destination lines are written with non-temporal (streaming) stores.
    pub(super) stream: bool,
    /// Whether the kernels prefetch their source ([`destination::prefetches`]).
    pub(super) prefetch: bool,
    pub(super) run: RunKernel,
    /// The transpose-and-cast kernel for this cast, if there is one.
    pub(super) fused: Option<cast_tiles::FusedCast>,
    pub(super) fill: [u8; 8],
    /// [`MAX_TILE_A`] fill values: the source of a tile's fill rows.
    pub(super) fill_line: Vec<u8>,
    /// [`MAX_TILE_A`] source values whose cast is the fill value: the fill rows of the fused
    /// cast tiles (None without a fused kernel, or where no source value casts to the fill
    /// exactly; see [`cast_tiles::source_fill_line`]).
    pub(super) src_fill_line: Option<Vec<u8>>,
}

impl FastConversion {
    /// Prepares `plan` with `cast` for `threads` threads (at least 1; 1 runs on the calling
    /// thread).
    ///
    /// Errors: a cast the plan's types do not allow (as [`crate::convert_fast`]).
    pub fn new(plan: &ConversionPlan, cast: &CastSpec, threads: usize) -> Result<Self, Error> {
        let threads = threads.max(1);
        let bytes = (plan.src().bytes(cast.src)?, plan.dst().bytes(cast.dst)?);
        let work = Work::of(plan, cast, threads, bytes);
        Ok(FastConversion {
            plan: plan.clone(),
            cast: *cast,
            threads,
            work,
        })
    }

    /// Converts `src_data` into `dst_data` (each exactly the plan's bytes for its type).
    ///
    /// Contract: as [`crate::convert_fast`], the same result bit for bit.
    pub fn run(&self, src_data: &[u8], dst_data: &mut [u8]) -> Result<(), Error> {
        let (plan, cast) = (&self.plan, &self.cast);
        check_buffers(plan.src(), src_data, plan.dst(), dst_data, cast)?;
        run_work(
            plan,
            cast,
            self.threads,
            self.work.as_ref(),
            src_data,
            dst_data,
        )
    }
}

/// [`crate::convert_fast`]: the work made for this call only (no copy of the plan kept).
pub(super) fn convert_once(
    plan: &ConversionPlan,
    src_data: &[u8],
    dst_data: &mut [u8],
    cast: &CastSpec,
    threads: usize,
) -> Result<(), Error> {
    check_buffers(plan.src(), src_data, plan.dst(), dst_data, cast)?;
    let threads = threads.max(1);
    let work = Work::of(plan, cast, threads, (src_data.len(), dst_data.len()));
    run_work(plan, cast, threads, work.as_ref(), src_data, dst_data)
}

/// Runs `work` (None: the per-element walk) of `plan` on buffers already checked.
fn run_work(
    plan: &ConversionPlan,
    cast: &CastSpec,
    threads: usize,
    work: Option<&Work>,
    src_data: &[u8],
    dst_data: &mut [u8],
) -> Result<(), Error> {
    let Some(w) = work else {
        return crate::convert_planned(plan, src_data, dst_data, cast);
    };
    if w.fill_first {
        let ds = cast.dst.size_bytes();
        destination::fill_whole(dst_data, &w.settings.fill[..ds], threads, w.settings.stream);
    }
    let job = Job {
        src: src_data,
        dst: SharedMut::new(dst_data),
        cast: *cast,
        settings: &w.settings,
    };
    if let Some(chunks) = &w.chunks {
        chunks.run(&job, (&w.items, &w.tables), threads, w.parallel);
        return Ok(());
    }
    let (items, tables) = (&w.items, &w.tables);
    super::run_in_order(items.len(), threads, w.parallel, |i| {
        job.execute(&items[i], tables[i].as_ref(), (0, 0))
    });
    Ok(())
}

impl Work {
    /// The work of `plan` (`bytes`: its source and destination sizes for `cast`); None where
    /// it has no regions (blocks that do not nest), which the per-element walk converts.
    fn of(
        plan: &ConversionPlan,
        cast: &CastSpec,
        threads: usize,
        bytes: (usize, usize),
    ) -> Option<Work> {
        match plan.strategy() {
            Strategy::Regions { copies, fills } => {
                let ds = cast.dst.size_bytes();
                // In cache (a destination the streaming stores leave alone), the regions'
                // passes cost no memory traffic, and the chunks' items and stage only cost.
                let chunking = chunked::chunking(copies, fills, ds).filter(|_| {
                    destination::streams(bytes.1, threads)
                        && !destination::fill_first(copies, fills, ds, bytes.1)
                });
                Some(match chunking {
                    Some(c) => Work::chunked(c, copies, fills, plan, cast, threads, bytes),
                    None => Work::new(copies, fills, plan, cast, threads, bytes),
                })
            }
            Strategy::PerElement => None,
        }
    }

    /// The work of regions interleaved in memory (`chunking`): the template of the first
    /// chunk (and of a shorter last one), its items made as for one thread, with the settings
    /// of the whole conversion on `threads` threads.
    fn chunked(
        c: chunked::Chunking,
        copies: &[Region],
        fills: &[Region],
        plan: &ConversionPlan,
        cast: &CastSpec,
        threads: usize,
        bytes: (usize, usize),
    ) -> Work {
        let (count, rest) = (c.outer.extent / c.steps, c.outer.extent % c.steps);
        let pick = |regions: &[Region], ids: &[usize]| -> Vec<Region> {
            ids.iter().map(|&i| regions[i].clone()).collect()
        };
        let leave = |regions: &[Region], ids: &[usize]| -> Vec<Region> {
            (0..regions.len())
                .filter(|i| !ids.contains(i))
                .map(|i| regions[i].clone())
                .collect()
        };
        let (group, group_fills) = (pick(copies, &c.copies), pick(fills, &c.fills));
        let template = |from, steps| {
            let copies = chunked::cut(&group, from, steps);
            Work::new(
                &copies,
                &chunked::cut(&group_fills, from, steps),
                plan,
                cast,
                1,
                bytes,
            )
        };
        let mut first = template(0, c.steps);
        let last = (rest > 0).then(|| template(count * c.steps, rest));
        let others = Work::new(
            &leave(copies, &c.copies),
            &leave(fills, &c.fills),
            plan,
            cast,
            threads,
            bytes,
        );
        if first.fill_first || others.fill_first || last.as_ref().is_some_and(|w| w.fill_first) {
            // (Not met where the whole conversion is not written fill first.)
            return Work::new(copies, fills, plan, cast, threads, bytes);
        }
        let last = last.map(|w| (w.items, w.tables));
        first.settings.stream = destination::streams(bytes.1, threads);
        first.settings.prefetch = destination::prefetches(bytes.0 + bytes.1, threads);
        let chunks = chunked::Chunks::new(
            c,
            count,
            last,
            (others.items, others.tables),
            &first.settings,
        );
        first.parallel =
            threads > 1 && chunks.tasks() > 1 && bytes.0 + bytes.1 >= PARALLEL_MIN_BYTES;
        first.chunks = Some(chunks);
        first
    }

    /// The work items of the regions `copies` and `fills` of `plan` (`bytes`: source and
    /// destination sizes).
    fn new(
        copies: &[Region],
        fills: &[Region],
        plan: &ConversionPlan,
        cast: &CastSpec,
        threads: usize,
        (src_bytes, dst_bytes): (usize, usize),
    ) -> Work {
        let fill = Scalar::from_f64(cast.dst, plan.dst().layout().fill());
        let mut fill_bytes = [0u8; 8];
        fill.write(&mut fill_bytes);
        let ds = cast.dst.size_bytes();
        let stream = destination::streams(dst_bytes, threads);
        let prefetch = destination::prefetches(src_bytes + dst_bytes, threads);
        // Mostly padding: all of it written with the fill first, then the copies alone.
        let fill_first = destination::fill_first(copies, fills, ds, dst_bytes);
        let fills: &[Region] = if fill_first { &[] } else { fills };
        let fused = cast_tiles::FusedCast::for_spec(cast);
        let src_fill_line = fused.and_then(|_| cast_tiles::source_fill_line(cast, fill));
        // The fused cast tiles write padding with their data (fill rows of source values that
        // cast to the fill), so their destination lines are written once, whole.
        let cast_pads = src_fill_line.is_some();
        let mut items: Vec<Item> = Vec::new();
        // Padding merged into the copies where it completes their runs: in identity
        // conversions (the tile kernels move source bytes, and the fill is a destination
        // value) single elements too; in casts, runs of fill, which the few-rows tiles write
        // with a few channels' values (RGB into NCHW32c). `split` refuses the padded items no
        // kernel writes (other cast tiles, pads longer than the fill line), whose fill is then
        // written apart.
        let (mut padded, mut fills) = if cast.is_identity() {
            tiling::absorb_fills(copies, fills, tiling::FillRuns::Singles)
        } else {
            tiling::absorb_fills(copies, fills, tiling::FillRuns::Runs)
        };
        // Single elements followed by their padding (one channel into kHWC8, NCHW32c, a MACE
        // image's 4 lanes): the fill after each element joins the copy as its pad, written by
        // the strided kernel's whole-record moves (`records`), which keeps its fill region to
        // run apart if the split finds no padded kernel after all. With a cast too: the
        // strided kernel casts pieces of the source whole, then expands them.
        let mut own_fill: Vec<Option<&Region>> = vec![None; padded.len()];
        for (c, own) in padded.iter_mut().zip(own_fill.iter_mut()) {
            if c.pad > 0 {
                continue;
            }
            if let Some(k) = fills
                .iter()
                .position(|f| records::fills_records(c.region, f))
            {
                let f = fills.remove(k);
                c.pad = f.dims.last().map_or(0, |l| l.extent);
                *own = Some(f);
            }
        }
        let mut left = Vec::new();
        // Copies that end each row of another copy's tile (the partial last pixel of a MACE
        // image row) are written by that tile, while its source rows are in cache.
        let mut taken = vec![false; padded.len()];
        let mut tails = vec![0; padded.len()];
        for (i, c) in padded.iter().enumerate() {
            if c.pad == 0 && !taken[i] {
                if let Some((j, run)) = super::items::tile_tail(c.region, cast, &padded, &taken) {
                    taken[j] = true;
                    tails[i] = run;
                }
            }
        }
        for (i, c) in padded.iter().enumerate() {
            if taken[i] {
                continue;
            }
            if !split(
                c.region,
                (c.pad, cast_pads),
                tails[i],
                false,
                cast,
                threads,
                &mut items,
            ) {
                // No padded kernel for this shape: the copy, and its fill apart.
                split(c.region, (0, false), 0, false, cast, threads, &mut items);
                match own_fill[i] {
                    Some(f) => fills.push(f),
                    None => left.push(tiling::fill_after(c.region, c.pad)),
                }
            }
        }
        for r in fills.into_iter().chain(left.iter()) {
            split(r, (0, false), 0, true, cast, threads, &mut items);
        }
        let tables = items
            .iter()
            .map(|it| super::item_table(it, cast, fill_first))
            .collect();
        // Small conversions run on the calling thread: starting a thread costs tens of
        // microseconds, and milliseconds on a loaded machine, when the whole conversion takes
        // a few (2 threads, 64 KiB NCHW32c -> NCHW in 33 regions: 0.03 GB/s). Below 2 MiB read
        // and written, not 2^17 elements as first set: on two threads of a Xeon (family 6 model
        // 167), the sweep's f16 rows under 1 MiB ran 1.087x faster by geometric mean, rows at
        // half the copy's speed 137 -> 171 of 360 (two alternations), where waking the second
        // thread had halved the speed of conversions of a few hundred KiB.
        let parallel =
            threads > 1 && items.len() > 1 && src_bytes + dst_bytes >= PARALLEL_MIN_BYTES;
        Work {
            items,
            tables,
            fill_first,
            parallel,
            settings: Settings {
                stream,
                prefetch,
                run: run_kernel(cast),
                fused,
                fill: fill_bytes,
                fill_line: fill_bytes[..ds].repeat(MAX_TILE_A),
                src_fill_line,
            },
            chunks: None,
        }
    }
}
