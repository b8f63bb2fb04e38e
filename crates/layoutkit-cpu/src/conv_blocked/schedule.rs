//! How the tiles of one convolution are spread over work items and threads: the tile loops of
//! one pair of output-channel vectors over some output rows ([`Tiles::pair_rows`]), and the
//! three ways of cutting the output into items (pair-major, row bands, and row bands that
//! copy their own input, padded or strided).

use super::microkernel::{Run, Shape, TileFn};
use super::packing::{self, Blocks, Source};
use super::padded::Padded;
use super::runtime::{give_scratch, take_scratch};
use super::{OutMap, Shared};
use crate::spin_pool::SpinPool;

/// An output row (or run of pixels) for the tiles: input offset (floats from the input's
/// base), output offset, pixels.
pub(super) type Row = (usize, usize, usize);

/// What every tile of one convolution shares.
pub(super) struct Tiles<'a> {
    /// The tile entries `[P - 1][B - 1]` for this pixel stride.
    pub table: &'a [[TileFn; 2]],
    /// The two-row tile entries `[PX - 1][B - 1]` (2 x `PX` pixels) for this pixel stride
    /// (empty where the build has none).
    pub row_table: &'a [[TileFn; 2]],
    /// Reduction chunks: channels `k0..k1` of a group.
    pub chunks: &'a [(usize, usize)],
    /// Per chunk, per tap: input offset and offset of the tap's rows in the chunk's panel.
    pub chunk_taps: &'a [Vec<(usize, usize)>],
    /// Channel runs per (group, chunk).
    pub runs: &'a [Vec<Vec<Run>>],
    /// Stride between the channels of a run, and between neighbouring pixels (floats).
    pub sc: usize,
    pub psx: usize,
    pub map: &'a OutMap,
    /// `2 * lanes` bias values per (group, pair).
    pub bias: &'a [f32],
    pub blocks: Blocks,
    /// Pixels per row group (partial sums in L1).
    pub group_px: usize,
    /// The packed filter, and the floats of one pair's panel.
    pub panels: &'a [f32],
    pub panel: usize,
    /// Filter taps (`kh * kw`) and floats per panel row.
    pub taps: usize,
    pub row: usize,
    pub relu: bool,
    pub y: Shared,
    /// Groups of the convolution.
    pub groups: usize,
}

impl Tiles<'_> {
    /// The tiles of pair `j` of group `g` over `rows`, whose input offsets count from `x`:
    /// row groups whose partial sums fit the L1 share, each run chunk by chunk.
    ///
    /// # Safety
    /// Every tap of every pixel of `rows` lies inside the input at `x` (for the channels of
    /// group `g`), the rows' outputs inside the output, and no other thread writes the
    /// output vectors of pair `j` of these rows meanwhile.
    pub(super) unsafe fn pair_rows(&self, g: usize, j: usize, rows: &[Row], x: *const f32) {
        let (blocks, map, row) = (self.blocks, self.map, self.row);
        let p_max = self.table.len();
        let b = blocks.in_pair(j);
        let wp = self.panels[(g * blocks.pairs + j) * self.panel..].as_ptr();
        let v0 = g * blocks.vectors + 2 * j;
        let yb = if b == 2 {
            map.vec[v0 + 1] - map.vec[v0]
        } else {
            0
        };
        let mut g0 = 0;
        while g0 < rows.len() {
            let (mut g1, mut px) = (g0 + 1, rows[g0].2);
            while g1 < rows.len() && px + rows[g1].2 <= self.group_px {
                px += rows[g1].2;
                g1 += 1;
            }
            for (ci, &(k0, _)) in self.chunks.iter().enumerate() {
                let shape = Shape {
                    taps: &self.chunk_taps[ci],
                    runs: &self.runs[g][ci],
                    sc: self.sc,
                    psx: self.psx,
                    psy: map.sw,
                    yb,
                    xrow: 0,
                    yrow: 0,
                    row,
                    bias: self.bias[(g * blocks.pairs + j) * row..].as_ptr(),
                    first: ci == 0,
                    relu: self.relu && ci + 1 == self.chunks.len(),
                    tail: if j + 1 == blocks.pairs { map.tail } else { 0 },
                    tail_pad: map.tail_pad,
                };
                // SAFETY: the chunk's rows start at `k0 * taps` in the pair's panel.
                let wc = unsafe { wp.add(k0 * self.taps * row) };
                let group = &rows[g0..g1];
                let mut i = 0;
                while i < group.len() {
                    let (xr, yr, len) = group[i];
                    // Two rows of the same length at once where one row at a time would
                    // leave a tile under 4 pixels (`two_rows_win`: 7-pixel rows on AVX2).
                    let pair = group.get(i + 1).filter(|next| {
                        next.2 == len
                            && next.0 > xr
                            && next.1 > yr
                            && two_rows_win(len, p_max, self.row_table.len())
                    });
                    let (shape2, rows_here, px_max, table) = match pair {
                        Some(&(xn, yn, _)) => (
                            Shape {
                                xrow: xn - xr,
                                yrow: yn - yr,
                                ..shape
                            },
                            2,
                            self.row_table.len(),
                            self.row_table,
                        ),
                        None => (shape, 1, p_max, self.table),
                    };
                    let tiles = len.div_ceil(px_max);
                    let (base, extra) = (len / tiles, len % tiles);
                    let mut start = 0;
                    for t in 0..tiles {
                        let p = base + usize::from(t < extra);
                        // SAFETY: the caller's contract covers the pixels, taps and output
                        // vectors (of both rows of a two-row tile); the chunk's panel holds
                        // taps * (k1 - k0) rows for this pair; the table's stride is 0 or
                        // `psx`, its build resolved against this CPU.
                        unsafe {
                            table[p - 1][b - 1](
                                x.add(xr + start * self.psx),
                                wc,
                                self.y.get().add(yr + start * map.sw + map.vec[v0]),
                                &shape2,
                            );
                        }
                        start += p;
                    }
                    i += rows_here;
                }
            }
            g0 = g1;
        }
    }
}

/// Whether rows of `len` pixels run faster two at a time in tiles of up to `2 * px_max`
/// pixels (two rows of `px_max`) than one at a time in tiles of up to `p_max`: where one row
/// at a time leaves a tile of fewer than 4 pixels (6 accumulators, fewer than two FMA units
/// of 4 cycles' latency keep busy) and two rows make the smallest tile larger. On AVX2
/// (`p_max` 6, `px_max` 3), 7-pixel rows: tiles of 4 and 3 pixels one row at a time, 2 x 3,
/// 2 x 2 and 2 x 2 two at a time (ResNet-50's `l4` 3x3 layers on 7 x 7 outputs: 1.15x in the
/// AVX2 build). Not where every tile already has 4 pixels or more: on AVX-512, 14- and
/// 28-pixel rows (tiles of 7 and 9 or more pixels) ran 0.97-1.0x in two-row tiles of 2 x 4
/// and 2 x 5.
pub(super) fn two_rows_win(len: usize, p_max: usize, px_max: usize) -> bool {
    if px_max == 0 || len == 0 {
        return false;
    }
    let smallest = |len: usize, widest: usize| len / len.div_ceil(widest);
    let one_row = smallest(len, p_max);
    one_row < 4 && 2 * smallest(len, px_max) > one_row
}

/// Appends the output row at input offset `xr`, output offset `yr`, `len` pixels (input and
/// output strides `psx`, `psy` between pixels) to `rows`, in segments of at most
/// `group_px` pixels (whole tiles of `p_max` where possible) when it is longer: a row group
/// runs chunk by chunk over its rows, and a row of hundreds of pixels would not keep its
/// partial sums and the chunk's input in L1 (VGG-16's 224- and 112-pixel rows).
pub(super) fn push_row(
    rows: &mut Vec<Row>,
    (xr, yr, len): Row,
    psx: usize,
    psy: usize,
    group_px: usize,
    p_max: usize,
) {
    if len <= group_px {
        rows.push((xr, yr, len));
        return;
    }
    let seg_max = (group_px / p_max * p_max).max(p_max);
    let seg = len.div_ceil(len.div_ceil(seg_max)).next_multiple_of(p_max);
    for s in (0..len).step_by(seg) {
        rows.push((xr + s * psx, yr + s * psy, seg.min(len - s)));
    }
}

/// Runs `work` on items `0..items`, on `pool` when there is one.
pub(super) fn for_items(items: usize, pool: Option<&SpinPool>, work: impl Fn(usize) + Sync) {
    match pool {
        Some(p) => p.run(items, &work),
        None => (0..items).for_each(work),
    }
}

/// How many items the threads want (8 per thread; one on one thread), and how the pairs of
/// a band split into ranges to get there: `(pairs per range, ranges)`.
fn pair_ranges(threads: usize, band_count: usize, pairs: usize) -> (usize, usize) {
    let target = if threads > 1 { 8 * threads } else { 1 };
    let ranges = target.div_ceil(band_count.max(1)).clamp(1, pairs.max(1));
    let per = pairs.div_ceil(ranges).max(1);
    (per, pairs.div_ceil(per))
}

/// Whether row bands (the pairs inside an item) beat pair-major items: the group's input is
/// more than `f` times its filter times the threads, `f` = 1 where the bands would copy their
/// own input (`copies`: padded or strided, which spares the whole copy), else 2. Split by
/// pairs, each thread keeps only its share of the filter, and each reads the whole input; in
/// bands, the pairs of an item read their band's input from L2. (Measured on ResNet-50, two
/// threads: the 3x3 stride-2 layers at 28 and 56 pixels gain 11-15% with band copies at an
/// input 2.7 times the filter; the 1x1 layer 512 -> 256 at 28 pixels, batch 1, read in place,
/// loses 15-25% with bands at an input 3.5 times its filter; the 3x3 layers at 14-28 pixels,
/// input 1.3-3 times the filter, lose 10-20% with bands.)
pub(super) fn bands_win(
    input_bytes: usize,
    filter_bytes: usize,
    threads: usize,
    copies: bool,
) -> bool {
    let f = if copies { 1 } else { 2 };
    f * threads.max(1) * filter_bytes < input_bytes
}

/// Output rows per band (of `rows` rows in each of `images` images or groups): as many as
/// keep the band's input (`row_bytes` per output row) within half of L2, fewer where the
/// threads want more items than the bands and their pair ranges give (each range reads its
/// band again, so ranges come first).
pub(super) fn fitting_band(
    row_bytes: usize,
    images: usize,
    rows: usize,
    pairs: usize,
    threads: usize,
) -> usize {
    let (_, l2) = packing::cache_sizes();
    let rows = rows.max(1);
    let band = ((l2 / 2) / row_bytes.max(1)).clamp(1, rows);
    let target = if threads > 1 { 8 * threads } else { 1 };
    let ranges = pair_ranges(threads, images * rows.div_ceil(band), pairs).1;
    if images * rows.div_ceil(band) * ranges < target {
        rows.div_ceil(target.div_ceil(images * ranges).min(rows))
    } else {
        band
    }
}

/// The tiles over `rows` (input offsets from `x`), for every group, in items of
/// (group, pair, band) or (group, band, pair range) as [`bands_win`] says.
///
/// # Safety
/// As [`Tiles::pair_rows`] for every row, group and pair.
pub(super) unsafe fn run_rows(
    t: &Tiles<'_>,
    rows: &[Row],
    x: *const f32,
    bands: bool,
    row_bytes: usize,
    threads: usize,
    pool: Option<&SpinPool>,
) {
    let (nrows, pairs, groups) = (rows.len().max(1), t.blocks.pairs, t.groups);
    let (band, per_range) = if bands {
        let band = fitting_band(row_bytes, groups, nrows, pairs, threads);
        (
            band,
            pair_ranges(threads, groups * nrows.div_ceil(band), pairs).0,
        )
    } else {
        // Bands small enough for 8 items per thread, one pair per item.
        (
            (nrows * pairs * groups)
                .div_ceil(8 * threads.max(1))
                .clamp(1, nrows),
            1,
        )
    };
    let nbands = rows.len().div_ceil(band);
    let ranges = pairs.div_ceil(per_range);
    let x = Shared(x as *mut f32);
    let work = |item: usize| {
        let (g, bi, ri) = if bands {
            (
                item / (nbands * ranges),
                item / ranges % nbands,
                item % ranges,
            )
        } else {
            (
                item / (nbands * ranges),
                item % nbands,
                item / nbands % ranges,
            )
        };
        let band_rows = &rows[bi * band..((bi + 1) * band).min(rows.len())];
        for j in ri * per_range..((ri + 1) * per_range).min(pairs) {
            // SAFETY: the caller's contract; items cover disjoint (pair, row) sets.
            unsafe { t.pair_rows(g, j, band_rows, x.get()) };
        }
    };
    for_items(groups * nbands * ranges, pool, work);
}

/// Row bands that copy their own input (one group; padded, or the strided pixels of a 1x1
/// filter): each item fills the lines of the copy its band of output rows reads into a
/// scratch buffer (which stays in L2 for the tiles), then runs its pairs over it, so the copy
/// is never written out whole.
pub(super) struct BandCopies<'a> {
    pub src: Source<'a>,
    pub padded: Padded,
    /// Images, output rows per image, output pixels per row, lines of the copy per output
    /// row (the filter's row stride; 1 where the copy took every stride-th row).
    pub n: usize,
    pub oh: usize,
    pub ow: usize,
    pub st: usize,
    /// Lines one output row's taps span (`(kh - 1) * dh + 1`).
    pub span: usize,
    /// Output rows per band and pairs per item ([`BandCopies::sizes`]), and the floats
    /// between the channel blocks of a band's buffer (the padded lines of the tallest band).
    pub band: usize,
    pub per_range: usize,
    pub plane: usize,
}

impl BandCopies<'_> {
    /// `(output rows per band, pairs per item)` for `images` images of `rows` output rows,
    /// `row_bytes` of input per output row: bands whose input fits half of L2; where the
    /// threads want more items (8 per thread), smaller bands first (a band copies
    /// `span - stride` rows more than its own), down to 4 rows, and only then pair ranges
    /// (each range copies its band again).
    pub(super) fn sizes(
        row_bytes: usize,
        images: usize,
        rows: usize,
        pairs: usize,
        threads: usize,
    ) -> (usize, usize) {
        let (_, l2) = packing::cache_sizes();
        let rows = rows.max(1);
        let target = if threads > 1 { 8 * threads } else { 1 };
        let mut band = ((l2 / 2) / row_bytes.max(1)).clamp(1, rows);
        if images * rows.div_ceil(band) < target {
            band = band.min((images * rows / target).max(4)).min(rows);
        }
        (
            band,
            pair_ranges(threads, images * rows.div_ceil(band), pairs).0,
        )
    }

    /// Output rows per band and the buffer's block stride for bands of `band` output rows.
    pub(super) fn plane_for(padded: &Padded, band: usize, st: usize, span: usize) -> usize {
        ((band - 1) * st + span).min(padded.hp) * padded.line()
    }

    /// Runs the tiles of every band (input offsets in the band's buffer, whose channel
    /// offsets `t.runs` were built for `self.plane`).
    pub(super) fn run(&self, t: &Tiles<'_>, pool: Option<&SpinPool>) {
        let per_image = self.oh.div_ceil(self.band);
        let per_range = self.per_range;
        let ranges = t.blocks.pairs.div_ceil(per_range);
        let p = &self.padded;
        // A 1x1 filter at stride 1 over the copy (the strided pixels of a 1x1 filter), with
        // output rows back to back: a band's pixels are one run, in tiles across row ends.
        let flat = t.taps == 1
            && self.st == 1
            && p.wp == self.ow
            && t.psx == p.blk
            && t.map.sh == self.ow * t.map.sw;
        let chunk = 8 * t.table.len();
        let work = |item: usize| {
            let (bi, ri) = (item / ranges, item % ranges);
            let (ni, r0) = (bi / per_image, bi % per_image * self.band);
            let r1 = (r0 + self.band).min(self.oh);
            let (lo, hi) = (r0 * self.st, ((r1 - 1) * self.st + self.span).min(p.hp));
            let mut buf = take_scratch();
            buf.resize(p.ncb * self.plane, 0.0);
            for cb in 0..p.ncb {
                for li in lo..hi {
                    let at = cb * self.plane + (li - lo) * p.line();
                    p.fill_line(&self.src, ni, cb, li, &mut buf[at..at + p.line()]);
                }
            }
            let rows: Vec<Row> = if flat {
                let (total, y0) = ((r1 - r0) * self.ow, ni * t.map.sn + r0 * t.map.sh);
                (0..total)
                    .step_by(chunk)
                    .map(|s| (s * p.blk, y0 + s * t.map.sw, chunk.min(total - s)))
                    .collect()
            } else {
                let mut rows = Vec::new();
                for r in r0..r1 {
                    let row = (
                        (r - r0) * self.st * p.line(),
                        ni * t.map.sn + r * t.map.sh,
                        self.ow,
                    );
                    push_row(&mut rows, row, t.psx, t.map.sw, t.group_px, t.table.len());
                }
                rows
            };
            for j in ri * per_range..((ri + 1) * per_range).min(t.blocks.pairs) {
                // SAFETY: the band's buffer holds every padded line its rows' taps read
                // (rows lo..hi of every channel block, `plane` apart, as `t.runs` and
                // `t.chunk_taps` address them); items cover disjoint (pair, row) sets.
                unsafe { t.pair_rows(0, j, &rows, buf.as_ptr()) };
            }
            give_scratch(buf);
        };
        for_items(self.n * per_image * ranges, pool, work);
    }
}
