//! Tiles that move several steps of one more loop at once ([`Steps`]).
//!
//! A tile kernel moves one tile per thread block. Two kinds of region left those tiles far
//! smaller or narrower than the kernel is built for (H200, 32 MiB tensors,
//! `bench/results/sweep.md`):
//!
//! * Whole transpositions of a few hundred elements per outer step (MACE width-major images
//!   of 3, 4, 16 or 24 channels, a channel-major image of 16 channels on 14 x 14 planes, a
//!   height-major image of one channel): one tile per step, so a block of 256 threads moved
//!   192-360 elements, f16 at 0.28-0.54 of the device copy. Here the block takes `n`
//!   consecutive steps of the innermost outer loop ([`Steps::outer`]).
//! * Compound source rows of many channels whose destination rows lie one row apart along the
//!   columns (NHWC -> MACE's height-major image of 250-2048 channels): the tile's source rows
//!   are a contiguous range of (column, channel) cells, so a tile of whole channel extents
//!   holds a few columns (destination runs of 2-4 pixels, 16-32 bytes) and with 1000 or 2048
//!   channels none at all (each 8-byte pixel a store of its own): f16 0.31-0.59. Here the
//!   columns become the step loop and the tile a block of channels by columns
//!   ([`Steps::columns`]): source runs of 128 bytes of channels, destination runs of as many
//!   columns, written columns first, where the write order of whole channel extents
//!   (`tile_order.rs`) finds fewer than two columns, padding follows the lanes, or its rows
//!   (channel extents a multiple of 128 bytes apart: 256 channels of f16) meet in the same
//!   shared-memory banks; 250 channels of f16 ran 0.85x with the steps and keep that order.
//!
//! The shared tile holds the steps' source rows one after another (`n * tb` rows), so every
//! read and write keeps the element tile's vectors; a step past the loop's end (when `n` does
//! not divide it) is skipped by one test per vector.

use layoutkit_core::plan::LoopDim;

use super::TileJob;

/// Tiles of fewer bytes take outer steps ([`Steps::outer`]). Measured on an H200 (32 MiB
/// tensors, the whole sweep, this build against the one before in one call): tiles of
/// 192-1120 elements of 2 and 4 bytes gained 1.4-3.4x; tiles of 3.5-7 KiB given two or three
/// steps ran 0.63-0.88x (f16 `mace:in_out_width -> NHWC` C=250 7 x 7, f32 `NHWC ->
/// mace:in_out_channel` C=24 56 x 56, f32 -> i8 `NCHW -> NCHW32c` C=256 7 x 7), their index
/// arithmetic per vector grown and their blocks halved.
const SMALL_TILE_BYTES: usize = 2048;

/// Blocks of 256 threads a multiprocessor holds at once (2048 threads): outer steps leave
/// at least this many blocks per multiprocessor (the last, partial 32-channel block of i8
/// `NCHW -> NCHW32c` C=1000 14 x 14, 171 tiles, given 10 steps each ran on 18 blocks: the
/// whole conversion 0.68x).
const BLOCKS_PER_SM: usize = 8;

/// One loop of the region moved `n` steps at a time inside each tile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Steps {
    /// The loop (taken out of the region's outer loops or its compound source rows).
    pub(super) lp: LoopDim,
    /// Steps per tile.
    pub(super) n: usize,
    /// Whether the write phase takes the steps fastest: the step's destination stride is one
    /// destination row, so a step's rows of one cell follow each other.
    pub(super) dst_fast: bool,
}

impl Steps {
    /// Tiles along the loop.
    pub(super) fn tiles(self) -> usize {
        self.lp.extent.div_ceil(self.n)
    }

    /// Whether the last tile along the loop has fewer than `n` steps.
    pub(super) fn ragged(self) -> bool {
        !self.lp.extent.is_multiple_of(self.n)
    }

    /// Steps of the innermost outer loop where one tile spans the region's whole
    /// transposition (`na == nb == 1`) of `cells` elements, under [`SMALL_TILE_BYTES`] of the
    /// wider element type: as many as `target` (the elements of a full tile) holds, while the
    /// grid keeps [`BLOCKS_PER_SM`] blocks for every multiprocessor; `fits(n)` says whether
    /// `n` steps fit the shared memory. None with steps off, without outer loops, or where
    /// fewer than two steps are left.
    pub(super) fn outer(
        job: &TileJob,
        outer: &[LoopDim],
        (na, nb): (usize, usize),
        (cells, target): (usize, usize),
        drow: usize,
        fits: impl Fn(usize) -> bool,
    ) -> Option<Steps> {
        let lp = *outer.last()?;
        let c = job.cast;
        let size = c.src.size_bytes().max(c.dst.size_bytes());
        let t = job.tuning;
        if !t.steps || na != 1 || nb != 1 || cells == 0 || cells * size >= SMALL_TILE_BYTES {
            return None;
        }
        let blocks: usize = outer.iter().map(|l| l.extent).product();
        let grid = blocks / (BLOCKS_PER_SM * t.multiprocessors).max(1);
        let mut n = (target / cells).min(lp.extent).min(grid);
        while n >= 2 && !fits(n) {
            n -= 1;
        }
        (n >= 2).then_some(Steps {
            lp,
            n,
            dst_fast: lp.dst_stride == drow as isize,
        })
    }

    /// The columns of compound source rows as steps (see the module docs): where the rows'
    /// two loops (`group`, innermost first) are channels (`first`, more than a 128-byte run of
    /// them) and columns whose destination stride is one destination row of `b_cells` cells
    /// (and the padding after it), while the channels' is not. Returns the steps and the tile's
    /// channels: `128 / element size`, and as many columns as make the tile's elements (and
    /// destination runs of at least 128 bytes), all of `b` in each tile. None with units, a
    /// tail cell, square tiles (`tile_elements == 0`) or steps off.
    pub(super) fn columns(
        job: &TileJob,
        group: &[LoopDim],
        b_cells: usize,
        fits: impl Fn(usize, usize) -> bool,
    ) -> Option<(Steps, usize)> {
        let [first, second] = group else { return None };
        let c = job.cast;
        let (ssize, dsize) = (c.src.size_bytes(), c.dst.size_bytes());
        let t = job.tuning;
        if !t.steps || job.unit != 1 || job.a_tail > 0 || t.tile_elements == 0 {
            return None;
        }
        let drow = b_cells + job.b_pad;
        let scattered = second.dst_stride == drow as isize && first.dst_stride != drow as isize;
        let ta = (128 / ssize).max(1);
        if !scattered || first.extent <= ta || b_cells == 0 {
            return None;
        }
        let runs = (128 / (drow * dsize)).max(1);
        let n = (t.tile_elements / (ta * b_cells))
            .max(runs)
            .min(second.extent);
        let mut n = n;
        while n >= 2 && !fits(ta, n) {
            n /= 2;
        }
        (n >= 2).then_some((
            Steps {
                lp: *second,
                n,
                dst_fast: true,
            },
            ta,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::super::*;
    use super::SMALL_TILE_BYTES;
    use layoutkit_core::DType;

    fn l(extent: usize, src_stride: isize, dst_stride: isize) -> LoopDim {
        LoopDim {
            extent,
            src_stride,
            dst_stride,
        }
    }

    fn job<'a>(
        cast: &'a CastSpec,
        outer: Vec<LoopDim>,
        a: Vec<LoopDim>,
        b: LoopDim,
    ) -> TileJob<'a> {
        TileJob {
            src_offset: 0,
            dst_offset: 0,
            axes: TileAxes { outer, a, b },
            unit: 1,
            b_pad: 0,
            a_tail: 0,
            cast,
            small: true,
            tuning: Tuning::default(),
        }
    }

    /// A whole transposition of a few hundred elements per outer step (NHWC -> MACE's
    /// width-major image, 3 channels, 64 columns: 192 elements) takes as many steps of the
    /// outer loop as make a full tile, each step's rows after the last's in shared memory; a
    /// step count that does not divide the loop skips the steps past its end; full-size
    /// tiles, and steps off, keep one step.
    #[test]
    fn small_transpositions_take_several_outer_steps() {
        let f16 = CastSpec::identity(DType::F16);
        let image = |outer: usize| {
            job(
                &f16,
                vec![l(outer, 192, 192)],
                vec![l(3, 1, 64)],
                l(64, 3, 1),
            )
        };
        let whole = image(87360);
        let k = tile_kernel(&whole);
        // 4096 / 192 = 21 steps per tile, 87360 / 21 = 4160 tiles; the 21 steps' source rows
        // are one flat run of 21 x 64 x 3 elements.
        assert_eq!(k.grid.0, 4160);
        assert!(k.source.contains("ts = (blk / 1u) % 4160u"), "{}", k.source);
        assert!(
            k.source.contains("gn = (unsigned int)(4032u)"),
            "{}",
            k.source
        );
        assert!(
            k.source
                .contains("smf[shift + (sr + jj / 1u) * 3u + la * 1u + jj % 1u]"),
            "{}",
            k.source
        );
        assert!(
            k.source.contains("dst + dbase + s * 192u + rowoff[la]"),
            "{}",
            k.source
        );
        assert!(!k.source.contains("+ s < "), "{}", k.source);
        let ragged = tile_kernel(&image(87361));
        assert_eq!(ragged.grid.0, 4161);
        assert!(
            ragged.source.contains("ts * 21u + s < 87361u && "),
            "{}",
            ragged.source
        );
        // Few steps in all keep their blocks: 8 blocks per multiprocessor stay (20 steps,
        // 132 of them: none; 20000 steps, 800 of them: 3 steps per tile).
        assert!(!tile_kernel(&image(20)).source.contains("ts ="));
        let mut many = image(20000);
        many.tuning.multiprocessors = 800;
        let k = tile_kernel(&many).source;
        assert!(k.contains("ts = (blk / 1u) % 6667u"), "{k}");
        let mut off = image(87360);
        off.tuning.steps = false;
        let one = tile_kernel(&off);
        assert_eq!(one.grid.0, 87360);
        assert!(!one.source.contains("ts ="), "{}", one.source);
        // NCHW -> NHWC of 256 channels on 64 x 64 planes: full tiles, one step.
        let plane = job(
            &f16,
            vec![l(8, 1 << 20, 1 << 20)],
            vec![l(4096, 1, 256)],
            l(256, 4096, 1),
        );
        assert!(!tile_kernel(&plane).source.contains("ts ="));
        // Units (a MACE channel-major image, 16 channels on 14 x 14 planes: 4 cells of 4 lanes
        // by 14 columns) take steps too, reading cells as vectors from each step's rows.
        let mut units = job(
            &f16,
            vec![l(74900, 224, 224)],
            vec![l(4, 4, 56)],
            l(14, 16, 4),
        );
        units.unit = 4;
        let k = tile_kernel(&units);
        assert!(
            k.source
                .contains("x.q = *(const unsigned int*)&sm[sr + jj / 4u]"),
            "{}",
            k.source
        );
        assert!(k.source.contains("ts * 18u + s < 74900u"), "{}", k.source);
    }

    /// The step count's contract over many shapes: two or more steps, no more than the loop
    /// has, no more elements than a full tile, within the shared-memory budget, 8 blocks per
    /// multiprocessor left, tiles under 2 KiB only; none where a tile does not span the
    /// whole transposition.
    #[test]
    fn outer_steps_fill_one_tile_and_fit() {
        let f32 = CastSpec::identity(DType::F32);
        let j = job(&f32, vec![], vec![l(4, 1, 4)], l(4, 4, 1));
        for extent in [1, 2, 3, 7, 64, 1000, 87360, 1 << 20] {
            for cells in [1, 12, 144, 192, 511, 512, 1000, 2048, 4096] {
                for target in [1024, 4096, 16384] {
                    for limit in [100, 5000, 1 << 20] {
                        let outer = [l(3, 1 << 30, 1 << 30), l(extent, 1 << 16, 1 << 16)];
                        let grid = 3 * extent / (8 * 132);
                        let fits = |n: usize| n * cells <= limit;
                        let st = Steps::outer(&j, &outer, (1, 1), (cells, target), 4, fits);
                        if let Some(st) = st {
                            assert!(st.n >= 2 && st.n <= extent && st.n <= grid, "{st:?}");
                            assert!(cells * 4 < SMALL_TILE_BYTES);
                            assert!(st.n * cells <= target && fits(st.n), "{st:?}");
                            assert_eq!(st.tiles(), extent.div_ceil(st.n));
                        } else {
                            assert!(
                                target / cells < 2
                                    || extent < 2
                                    || grid < 2
                                    || 2 * cells > limit
                                    || cells * 4 >= SMALL_TILE_BYTES
                            );
                        }
                        assert!(
                            Steps::outer(&j, &outer, (2, 1), (cells, target), 4, fits).is_none()
                        );
                    }
                }
            }
        }
    }

    /// NHWC -> MACE's height-major image of 250 channels (columns 4 apart in the image,
    /// channels 256): the columns are steps of a tile of 64 channels (128 bytes of f16, 32
    /// floats) by all 4 lanes, 16 columns of f16 (32 of f32) per tile, written columns first;
    /// the last tile's 58 channels are partial. In the kernel: 256 channels (512 bytes of
    /// f16 apart, the write order's rows in the same banks), 1000 channels with padding after
    /// the lanes (H = 14: 2 lanes and 2 of fill) take the steps; 250 keep the write order of
    /// 4 whole channel extents, as 24 channels do.
    #[test]
    fn many_channels_take_columns_as_steps() {
        let f16 = CastSpec::identity(DType::F16);
        let f32 = CastSpec::identity(DType::F32);
        let image = |cast, c: usize, lanes: usize, pad: usize| {
            let mut j = job(
                cast,
                vec![l(16, 64 * 64 * c as isize, 64 * 64 * c as isize)],
                vec![l(64, c as isize, 4), l(c, 1, 256)],
                l(lanes, 64 * c as isize, 1),
            );
            j.b_pad = pad;
            j
        };
        let group = |j: &TileJob| -> Vec<LoopDim> { j.axes.a.iter().rev().copied().collect() };
        let fits = |_: usize, _: usize| true;
        let j = image(&f16, 250, 4, 0);
        let (st, ta) = Steps::columns(&j, &group(&j), 4, fits).expect("column steps");
        assert_eq!((st.n, ta, st.dst_fast, st.lp.extent), (16, 64, true, 64));
        let k = tile_kernel(&j).source;
        assert!(k.contains("la = (lw % 4u) * 250u + lw / 4u"), "{k}");
        let k = tile_kernel(&image(&f16, 256, 4, 0)).source;
        assert!(k.contains("s = lq % 16u, lw = lq / 16u"), "{k}");
        assert!(k.contains("rowoff[r] = ia * 256u"), "{k}");
        assert!(k.contains("src + sbase + s * 256u + ea"), "{k}");
        assert!(k.contains("dst + dbase + s * 4u + rowoff[la]"), "{k}");
        assert!(k.contains("a0 + la < 256u"), "{k}");
        let j = image(&f32, 250, 4, 0);
        let (st, ta) = Steps::columns(&j, &group(&j), 4, fits).unwrap();
        assert_eq!((st.n, ta), (32, 32));
        let j = image(&f16, 24, 4, 0);
        assert!(Steps::columns(&j, &group(&j), 4, fits).is_none());
        let j = image(&f16, 1000, 2, 2);
        let (st, _) = Steps::columns(&j, &group(&j), 2, fits).expect("padded lanes");
        assert_eq!(st.n, 32);
        let k = tile_kernel(&j).source;
        assert!(k.contains("jj < 2u ? cast(sm[sr + jj / 1u]"), "{k}");
        // Shared memory too small for two steps, units, steps off: none.
        let j = image(&f16, 250, 4, 0);
        assert!(Steps::columns(&j, &group(&j), 4, |_, n| n < 2).is_none());
        let mut j = image(&f16, 250, 4, 0);
        j.tuning.steps = false;
        assert!(Steps::columns(&j, &group(&j), 4, fits).is_none());
    }

    /// MACE's height-major image -> NHWC (compound source rows of 4 lanes by the columns,
    /// destination rows of channels): source rows of 64 cells (128 bytes of f16) by 64
    /// channels, not 16 by 256; a 7 x 7 image's 28 cells whole, by channels in multiples of
    /// 4; rows that already reach 128 bytes, and units, keep their shapes.
    #[test]
    fn compound_source_rows_reach_128_bytes() {
        assert_eq!(tile_shape(256, 256, 1, true, (2, 2), 4096), (64, 64));
        assert_eq!(tile_shape(28, 1000, 1, true, (2, 2), 4096), (28, 144));
        assert_eq!(tile_shape(28, 2048, 1, true, (4, 4), 4096), (28, 140));
        assert_eq!(tile_shape(288, 16, 1, true, (2, 2), 4096), (256, 16));
        assert_eq!(tile_shape(256, 256, 4, false, (2, 2), 4096), (8, 128));
    }
}
