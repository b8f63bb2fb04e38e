//! Regions interleaved in memory, run together a chunk of their common outer loop at a time.
//!
//! A plan cuts a conversion into disjoint regions (boxes of elements), and the engine runs each
//! region's work items in turn. Where two regions share their outermost loop and, within one
//! step of it, write into the same stretch of the destination, running them one after the
//! other makes two passes over the whole tensor, each touching every line of that stretch: `OIHW16i16o -> OIHW` with 24 input channels has a
//! region of the first 16 (one lane block per 16 output channels) and one of the other 8, whose
//! 288- and 144-byte pieces of each output channel's 432-byte f16 row share lines; each pass
//! writes partial lines past the cache, and the 37 MB filter ran at 20% of the copy (Zen 4, one
//! thread) where 16 input channels, one region, ran at 57%.
//!
//! Here such regions are run together instead: their common outer loop is cut into chunks of
//! about [`CHUNK_BYTES`] of destination, and each chunk runs every region's part of it, from a
//! template of work items made once for the first chunk and moved by a constant offset per
//! chunk (every kernel addresses its buffers from the item's offsets, so a box shifted along
//! the loop is the same work at other offsets). Where the chunk's destination is one contiguous
//! range that the regions cover whole, the chunk is written into a scratch buffer first (with
//! plain stores, in cache) and copied out in whole lines, streamed past the cache where the
//! job streams; otherwise the regions write in place, the chunk's lines still in cache between
//! them. Taken only where the destination streams (the engine's own test: larger than the L2
//! caches of the threads writing it); regions that share only source lines are not chunked
//! (measured on a Zen 4, `bench/results/sweep.md`: one such row gained, others lost).

use std::cell::RefCell;

use layoutkit_core::plan::{LoopDim, Region};

use super::gather::Table;
use super::items::Item;
use super::prepared::Settings;
use super::{AlignedBuf, Job, SharedMut};

/// The destination bytes of one chunk, about (at least one step of the loop): small enough
/// that a chunk's source and destination stay in L1 and L2 between the regions' passes.
pub(super) const CHUNK_BYTES: usize = 32 << 10;

/// Steps of the common loop whose destination is larger than this are not chunked: their
/// regions already run a whole stretch of cache size each.
const MAX_STEP_BYTES: usize = 128 << 10;

/// How the regions of a plan are chunked ([`chunking`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Chunking {
    /// The common outermost loop of the chunked regions.
    pub outer: LoopDim,
    /// Its steps per chunk.
    pub steps: usize,
    /// Where each chunk's destination is one range the regions fill whole: its first
    /// element in the first chunk and its length in elements (`outer.dst_stride * steps`).
    pub staged: Option<(usize, usize)>,
    /// The copies and the fills chunked (indices); the others run as they would unchunked
    /// (the last, partial block of a blocked dimension, say, outside the common loop).
    pub copies: Vec<usize>,
    pub fills: Vec<usize>,
}

/// Whether some of `copies` and `fills` (a plan's regions) are run chunk by chunk, and how:
/// two copies or more have the same outermost loop (two steps or more, strides not negative,
/// steps of at most [`MAX_STEP_BYTES`] of destination) and, within one step, two of them have
/// footprints that overlap on the destination side; the fills along the same
/// steps of the destination join them (fills alone do not count: most are written with their
/// copies' runs, `tiling::absorb_fills`). Of several such loops, the one whose copies hold the
/// most elements. `dst_size`: bytes per destination element.
pub(super) fn chunking(copies: &[Region], fills: &[Region], dst_size: usize) -> Option<Chunking> {
    let mut loops: Vec<LoopDim> = copies
        .iter()
        .filter_map(|r| r.dims.first().copied())
        .collect();
    loops.sort_unstable_by_key(|o| (o.extent, o.src_stride, o.dst_stride));
    loops.dedup();
    // Of the loops that qualify, the one whose copies hold the most elements.
    let elements = |c: &Chunking| -> usize { c.copies.iter().map(|&i| copies[i].elements()).sum() };
    loops
        .into_iter()
        .filter_map(|o| chunking_along(o, copies, fills, dst_size))
        .max_by_key(elements)
}

/// [`chunking`] of the regions whose outermost loop is `outer`.
fn chunking_along(
    outer: LoopDim,
    copies: &[Region],
    fills: &[Region],
    dst_size: usize,
) -> Option<Chunking> {
    let step_bytes = outer.dst_stride.max(0) as usize * dst_size;
    if outer.extent < 2
        || outer.src_stride < 0
        || outer.dst_stride <= 0
        || step_bytes > MAX_STEP_BYTES
    {
        return None;
    }
    let along = |r: &Region| r.dims.len() >= 2 && r.dims[0] == outer;
    let copy_ids: Vec<usize> = (0..copies.len()).filter(|&i| along(&copies[i])).collect();
    let fill_ids: Vec<usize> = (0..fills.len())
        .filter(|&i| {
            let d = &fills[i].dims;
            d.len() >= 2 && d[0].extent == outer.extent && d[0].dst_stride == outer.dst_stride
        })
        .collect();
    if copy_ids.len() < 2 {
        return None;
    }
    let span_of = |r: &Region| span(r.dst_offset, &r.dims[1..], |d| d.dst_stride);
    let copies_dst: Vec<(isize, isize)> = copy_ids.iter().map(|&i| span_of(&copies[i])).collect();
    if !any_overlap(&copies_dst) {
        return None;
    }
    let regions = || {
        copy_ids
            .iter()
            .map(|&i| &copies[i])
            .chain(fill_ids.iter().map(|&i| &fills[i]))
    };
    let dst: Vec<(isize, isize)> = regions().map(span_of).collect();
    let steps = (CHUNK_BYTES / step_bytes).clamp(1, outer.extent);
    // Disjoint regions whose elements per step add up to the span they cover fill it whole.
    let lo = dst.iter().map(|s| s.0).min()?;
    let hi = dst.iter().map(|s| s.1).max()?;
    let per_step: usize = regions()
        .map(|r| r.dims[1..].iter().map(|d| d.extent).product::<usize>())
        .sum();
    let staged = (per_step as isize == outer.dst_stride && hi - lo + 1 == outer.dst_stride)
        .then(|| (lo as usize, outer.dst_stride as usize * steps));
    Some(Chunking {
        outer,
        steps,
        staged,
        copies: copy_ids,
        fills: fill_ids,
    })
}

/// A prepared conversion's chunks: the template (the work's items, made for the first chunk)
/// runs `count` times, each chunk `steps` further along the common loop, then the items of the
/// shorter last chunk, if any, made at its own offsets.
pub(super) struct Chunks {
    plan: Chunking,
    count: usize,
    last: Option<(Vec<Item>, Vec<Option<Table>>)>,
    /// The items of the regions not chunked, run after the chunks.
    others: (Vec<Item>, Vec<Option<Table>>),
    /// The settings for writing a staged chunk: plain stores into the stage.
    staged: Settings,
}

thread_local! {
    /// The stage a staged chunk is written into, kept on each thread between calls.
    static STAGE: RefCell<Option<AlignedBuf>> = const { RefCell::new(None) };
}

impl Chunks {
    /// The chunks of `plan`: `count` whole ones, `last` the items of the shorter one after
    /// them; `settings`: the whole conversion's.
    pub(super) fn new(
        plan: Chunking,
        count: usize,
        last: Option<(Vec<Item>, Vec<Option<Table>>)>,
        others: (Vec<Item>, Vec<Option<Table>>),
        settings: &Settings,
    ) -> Chunks {
        let mut staged = settings.clone();
        staged.stream = false;
        Chunks {
            plan,
            count,
            last,
            others,
            staged,
        }
    }

    /// The chunks and the other items, one task each.
    pub(super) fn tasks(&self) -> usize {
        self.count + usize::from(self.last.is_some()) + self.others.0.len()
    }

    /// Runs task `t`: a chunk, or one of the other items.
    fn task(&self, job: &Job, template: (&[Item], &[Option<Table>]), t: usize) {
        let chunks = self.count + usize::from(self.last.is_some());
        match t.checked_sub(chunks) {
            None => self.chunk(job, template, t),
            Some(i) => job.execute(&self.others.0[i], self.others.1[i].as_ref(), (0, 0)),
        }
    }

    /// Runs every chunk and the other items, the template's items being `template`: on the
    /// calling thread, or taken in order by `threads` workers where `parallel`.
    pub(super) fn run(
        &self,
        job: &Job,
        template: (&[Item], &[Option<Table>]),
        threads: usize,
        parallel: bool,
    ) {
        super::run_in_order(self.tasks(), threads, parallel, |t| {
            self.task(job, template, t)
        });
    }

    /// Runs chunk `c`: its items in place, or into the stage and then out in whole lines.
    fn chunk(&self, job: &Job, template: (&[Item], &[Option<Table>]), c: usize) {
        let o = self.plan.outer;
        let ((items, tables), from, steps, shift) = match &self.last {
            Some((items, tables)) if c == self.count => (
                (&items[..], &tables[..]),
                c * self.plan.steps,
                o.extent - c * self.plan.steps,
                (0, 0),
            ),
            _ => {
                let from = c * self.plan.steps;
                let shift = (from as isize * o.src_stride, from as isize * o.dst_stride);
                (template, from, self.plan.steps, shift)
            }
        };
        let Some((first, _)) = self.plan.staged else {
            for (it, t) in items.iter().zip(tables) {
                job.execute(it, t.as_ref(), shift);
            }
            return;
        };
        let ds = job.cast.dst.size_bytes();
        let lo = first + from * o.dst_stride as usize;
        let len = steps * o.dst_stride as usize * ds;
        let dst = &mut job.dst.slice()[lo * ds..lo * ds + len];
        // The stage starts where the destination does within a line, so the kernels see the
        // same lines.
        let at = dst.as_ptr() as usize % 64;
        STAGE.with(|stage| {
            let mut stage = stage.borrow_mut();
            if stage.as_ref().is_none_or(|b| b.len() < at + len) {
                *stage = Some(AlignedBuf::zeroed((at + len).max(CHUNK_BYTES + 64)));
            }
            let buf = &mut stage.as_mut().expect("made above")[at..at + len];
            let staged = Job {
                src: job.src,
                dst: SharedMut::new(buf),
                cast: job.cast,
                settings: &self.staged,
            };
            // Offsets into the stage: the template's items are at the first chunk's
            // destination (from `first`), the last chunk's at their own (from `lo`).
            let base = if c == self.count && self.last.is_some() {
                lo
            } else {
                first
            };
            for (it, t) in items.iter().zip(tables) {
                staged.execute(it, t.as_ref(), (shift.0, -(base as isize)));
            }
            job.out_copy(dst, buf);
        });
    }
}

/// The first and last element offsets a box of `dims` at `offset` touches on one side.
fn span(offset: usize, dims: &[LoopDim], stride: impl Fn(&LoopDim) -> isize) -> (isize, isize) {
    let (mut lo, mut hi) = (offset as isize, offset as isize);
    for d in dims {
        let reach = stride(d) * (d.extent as isize - 1);
        if reach < 0 {
            lo += reach;
        } else {
            hi += reach;
        }
    }
    (lo, hi)
}

/// Whether two of the closed intervals `spans` intersect.
fn any_overlap(spans: &[(isize, isize)]) -> bool {
    let mut s = spans.to_vec();
    s.sort_unstable();
    s.windows(2).any(|w| w[1].0 <= w[0].1)
}

/// `regions` cut to `extent` steps of their outermost loop, starting at step `from`.
pub(super) fn cut(regions: &[Region], from: usize, extent: usize) -> Vec<Region> {
    regions
        .iter()
        .map(|r| {
            let o = r.dims[0];
            let mut dims = r.dims.clone();
            dims[0].extent = extent;
            Region {
                src_offset: (r.src_offset as isize + from as isize * o.src_stride) as usize,
                dst_offset: (r.dst_offset as isize + from as isize * o.dst_stride) as usize,
                dims,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fast::loop_dim;

    fn region(src: usize, dst: usize, dims: &[(usize, isize, isize)]) -> Region {
        Region {
            src_offset: src,
            dst_offset: dst,
            dims: dims.iter().map(|&(e, s, d)| loop_dim(e, s, d)).collect(),
        }
    }

    /// `OIHW16i16o -> OIHW` with 24 input channels, 3x3 (elements): per block of 16 output
    /// channels, the first 16 input channels and the other 8 share every output channel's row.
    fn filter_24() -> (Vec<Region>, Vec<Region>) {
        let first = region(
            0,
            0,
            &[(100, 4608, 3456), (16, 1, 216), (16, 16, 9), (9, 256, 1)],
        );
        let second = region(
            2304,
            144,
            &[(100, 4608, 3456), (16, 1, 216), (8, 16, 9), (9, 256, 1)],
        );
        (vec![first, second], vec![])
    }

    #[test]
    fn regions_sharing_destination_lines_are_chunked_and_staged() {
        let (copies, fills) = filter_24();
        let c = chunking(&copies, &fills, 2).expect("chunked");
        assert_eq!(c.outer, loop_dim(100, 4608, 3456));
        // 6912 destination bytes per step: four steps in 32 KiB.
        assert_eq!(c.steps, 4);
        // Per step the two regions write 16 x 144 + 16 x 72 = 3456 elements, the whole step.
        assert_eq!(c.staged, Some((0, 4 * 3456)));
    }

    #[test]
    fn a_region_alone_or_regions_apart_are_not_chunked() {
        let (copies, _) = filter_24();
        assert_eq!(chunking(&copies[..1], &[], 2), None);
        // NCHW32c -> NCHW with 250 channels: per image, the full blocks' planes and the last
        // block's lie side by side on both sides, not interleaved.
        let apart = vec![
            region(
                0,
                0,
                &[
                    (10, 12544, 12250),
                    (7, 1568, 1568),
                    (32, 1, 49),
                    (49, 32, 1),
                ],
            ),
            region(
                10976,
                10976,
                &[(10, 12544, 12250), (26, 1, 49), (49, 32, 1)],
            ),
        ];
        assert_eq!(chunking(&apart, &[], 1), None);
        // Different outer loops: no common chunks.
        let mut other = copies.clone();
        other[1].dims[0].extent = 99;
        assert_eq!(chunking(&other, &[], 2), None);
    }

    #[test]
    fn fills_join_the_chunks_of_interleaved_copies_but_do_not_make_them() {
        // Records of 3 values and 1 fill element: one copy and its fill are not chunked.
        let copies = vec![region(0, 0, &[(50, 300, 400), (100, 3, 4), (3, 1, 1)])];
        let fills = vec![region(0, 3, &[(50, 0, 400), (100, 0, 4)])];
        assert_eq!(chunking(&copies, &fills, 4), None);
        // Two copies (two values, then one) sharing each record, and the fill after them.
        let copies = vec![
            region(0, 0, &[(50, 300, 400), (100, 3, 4), (2, 1, 1)]),
            region(2, 2, &[(50, 300, 400), (100, 3, 4)]),
        ];
        let c = chunking(&copies, &fills, 4).expect("chunked");
        assert_eq!(c.steps, 20);
        assert_eq!(c.staged, Some((0, 20 * 400)));
        // A fill along another loop is left out (run apart), and the chunks are not staged.
        let other = vec![region(0, 3, &[(25, 0, 800), (100, 0, 4)])];
        let c = chunking(&copies, &other, 4).expect("chunked");
        assert_eq!((c.fills.len(), c.staged), (0, None));
    }

    #[test]
    fn a_step_larger_than_the_chunk_limit_is_not_chunked() {
        let copies = vec![
            region(0, 0, &[(4, 1 << 20, 1 << 20), (1024, 1, 2), (2, 0, 1)]),
            region(0, 1, &[(4, 1 << 20, 1 << 20), (1024, 1, 2)]),
        ];
        assert_eq!(chunking(&copies, &[], 4), None);
    }

    /// The chunking of a real plan's regions.
    fn planned(from: &str, to: &str, dims: &str, size: usize) -> Option<Chunking> {
        let dims = layoutkit_core::Dims::parse(dims).unwrap();
        let shaped = |f: &str| {
            layoutkit_core::parse_format(f)
                .unwrap()
                .shaped(&dims)
                .unwrap()
        };
        let plan = layoutkit_core::plan::ConversionPlan::new(&shaped(from), &shaped(to)).unwrap();
        match plan.strategy() {
            layoutkit_core::plan::Strategy::Regions { copies, fills } => {
                chunking(copies, fills, size)
            }
            layoutkit_core::plan::Strategy::PerElement => None,
        }
    }

    #[test]
    fn blocked_filters_whose_input_channels_end_inside_a_block_are_chunked() {
        // Out of the blocks: the 16 + 8 input channels share each output channel's row; the
        // last 8 output channels (a partial block) are regions of their own, not chunked.
        let c = planned("OIHW16i16o", "OIHW", "O=1000,I=24,H=3,W=3", 2).expect("chunked");
        assert_eq!((c.outer.extent, c.copies.len(), c.fills.len()), (62, 2, 0));
        assert_eq!(c.staged, Some((0, c.steps * 3456)));
        // Into them: the two copies read each output channel's row, but write blocks of
        // their own (the second with its fill): not chunked.
        assert_eq!(
            planned("OIHW", "OIHW16i16o", "O=1000,I=24,H=3,W=3", 2),
            None
        );
        // A MACE image read back into NHWC: the last block of 4 channels (2 of 250) shares
        // every pixel of the destination with the others.
        let c = planned("mace:in_out_channel", "NHWC", "N=10,C=250,H=7,W=7", 4).expect("chunked");
        assert_eq!(c.copies.len(), 2);
        assert!(c.staged.is_some());
        // A whole number of blocks: one region, nothing to chunk.
        assert_eq!(
            planned("OIHW16i16o", "OIHW", "O=1000,I=32,H=3,W=3", 2),
            None
        );
    }

    #[test]
    fn cut_moves_the_offsets_along_the_outer_loop() {
        let (copies, _) = filter_24();
        let c = cut(&copies, 8, 3);
        assert_eq!(c[0].src_offset, 8 * 4608);
        assert_eq!(c[1].dst_offset, 144 + 8 * 3456);
        assert_eq!(c[1].dims[0].extent, 3);
        assert_eq!(c[1].dims[1..], copies[1].dims[1..]);
    }
}
