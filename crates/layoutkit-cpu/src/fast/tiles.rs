//! Tiles: the `(a, b)` plane of a tile item cut into cache-sized tiles (shapes from
//! measurements), and the strided and compound-row tiles' kernels. The row tables are in
//! [`super::tile_tables`], tiles whose rows come from tables in [`super::table_tiles`].

use layoutkit_core::plan::LoopDim;

use super::copy_few;
use super::items::MAX_TILE_A;
use super::next_tile::NextTile;
use super::shape::WHOLE_ROWS_MIN_BYTES;
use super::tile_tables::{aligned_head, dst_offsets, gcd, nb_total, PeriodicKey, PeriodicRows};
use super::{transpose, AlignedBuf, Job, Scratch, SCRATCH_BYTES};

impl Job<'_> {
    /// The `(a, b)` plane of a tile item in tiles of about [`super::shape::tile_shape`]: `a` is the
    /// flattened index of `a_loops` (contiguous in the source, `unit` elements per step), `b`
    /// is contiguous in the destination. `b` tiles are outermost, so the source is read as a
    /// few long row streams and each destination row gets a whole segment per tile.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn tiles(
        &self,
        so: usize,
        d0: usize,
        a_loops: &[LoopDim],
        b: LoopDim,
        unit: usize,
        pad: usize,
        tail: usize,
        scratch: &mut Scratch,
    ) {
        if self.reverse_few(so, d0, a_loops, b, (unit, pad), scratch) {
            return;
        }
        let (ss, ds) = (self.cast.src.size_bytes(), self.cast.dst.size_bytes());
        let ea: usize = a_loops.iter().map(|l| l.extent).product();
        // The same for every step of the item's outer loops: computed on the first (its three
        // divisions were a quarter of this function's time on tiles of 49 x 32 bytes).
        let (mut ta, tb) = *scratch
            .tile_shape
            .get_or_insert_with(|| self.item_tile_shape(a_loops, b, unit, pad));
        // The units before the next 64-byte boundary, where every source row has the same
        // offset from one (0 otherwise): a head tile of that many puts the other tiles' loads
        // on lines (below).
        let row_bytes = b.src_stride.unsigned_abs() * ss;
        let line_head = aligned_head(
            self.src.as_ptr().wrapping_add(so * ss).addr(),
            row_bytes,
            unit * ss,
            ea,
        );
        // Several source-contiguous loops: tiles that start on a multiple of the inner loops'
        // span see the same destination offsets, computed once (identity conversions).
        let period: usize = a_loops[1..].iter().map(|l| l.extent).product();
        let periodic =
            (a_loops.len() > 1 && self.cast.is_identity() && period <= MAX_TILE_A).then(|| {
                // A whole number of periods, and of the kernels' 16-row blocks where that
                // fits: rows past the last whole block go through the strips, one element at
                // a time. (OIHW16i16o's period, i x h x w = 144 rows, is already a multiple of
                // 16; periods such as 9 would leave rows to the strips.)
                let step = [
                    period * 16 / gcd(period, 16),
                    period * 8 / gcd(period, 8),
                    period,
                ]
                .into_iter()
                .find(|&s| s <= ta)
                .unwrap_or(period);
                ta = step * (ta / step).max(1);
                // Destination rows of whole lines (f32 OIHW16i16o: 16 floats) are written
                // straight from the kernel, so the tiles may start after a head tile that
                // puts their source loads on lines (below), all at the same phase of the
                // period: the table is built for that phase (f32 OIHW -> OIHW16i16o
                // O=4096,I=1024,H=3,W=3, one thread, the source 16 bytes past a line against
                // aligned, both alternating in one process: 17% slower before, 0-4% after).
                // Not for shorter rows (f16), which go through a scratch tile that needs the
                // period's whole destination range.
                let lines = (nb_total(tb, pad) * unit * ds).is_multiple_of(64);
                let phase = match line_head {
                    h if lines && ea >= 4 * ta && h * 8 <= ta => h,
                    _ => 0,
                };
                // The same table as the last tiles' on this thread (an item runs this for
                // every step of its outer loops: MACE filter images with few input channels
                // run thousands of 36 x 4 planes), else a new one.
                let shape = [ta, nb_total(tb, pad), unit, ds, phase];
                match scratch.periodic.take() {
                    Some((k, rows)) if k.loops == a_loops && k.shape == shape => (k, rows),
                    _ => {
                        let mut rel = Vec::with_capacity(ta.min(ea - phase));
                        dst_offsets(a_loops, phase, ta.min(ea - phase), &mut rel);
                        let rows =
                            PeriodicRows::new(period, phase, &rel, ds, nb_total(tb, pad), unit);
                        let loops = a_loops.to_vec();
                        (PeriodicKey { loops, shape }, rows)
                    }
                }
            });
        // Where every source row has the same offset from a 64-byte boundary, the first tile
        // along `a` takes the units before the next boundary and the others start on one, so
        // the kernels' whole-line loads do not straddle lines (f32 NCHW -> NHWC, source 16
        // bytes past a line: 16.3 -> 14.5 ms, 13.4 ms aligned). Only for long tiles among
        // many: the head and the shorter last tile go through the kernels' strips (16-channel
        // tiles of f32 -> f16 NHWC -> NCHW: 15.5 -> 27 ms).
        let head = match &periodic {
            Some((_, table)) => table.phase,
            None if ea >= 4 * ta => line_head,
            _ => 0,
        };
        let head = if head * 8 <= ta { head } else { 0 };
        // Short source rows back to back, each read whole by a band's tiles (NHWC's pixels, a
        // MACE image's pixel rows): the tiles of each band of rows ask for the lines of the
        // next band (for the last band of the item, the same number of bytes after it, which
        // the next item in source order reads), a share each (see `x86::Prefetch`). Not for
        // bands over [`BAND_AHEAD_BYTES`]: with NCHW's planes as rows the next band is
        // megabytes away, and asking for it early only doubled the reads (f32 NCHW -> kHWC8
        // 23 -> 27 ms). Identity tiles and the fused casts' (f32 -> i8 NHWC -> NCHW
        // N=16,C=256,H=96,W=96 one thread 13.7-13.9 -> 12.3-12.4 ms, f32 -> f16 11.1-11.6 ->
        // 9.5-10.3 ms, in one process alternating both).
        let whole_rows = (self.cast.is_identity()
            || (self.fused.is_some() && unit == 1 && pad == 0))
            && a_loops.len() == 1
            && b.src_stride > 0
            && (ea * unit * ss..ea * unit * ss + 64).contains(&row_bytes)
            && tb * row_bytes <= BAND_AHEAD_BYTES;
        let band_tiles = match head {
            0 => ea.div_ceil(ta),
            _ => 1 + (ea - head).div_ceil(ta),
        };
        let mut b0 = 0;
        while b0 < b.extent {
            let nb = tb.min(b.extent - b0);
            let (next_band, band_lines) = if whole_rows {
                let next = self
                    .src
                    .as_ptr()
                    .wrapping_add(so * ss + (b0 + nb) * row_bytes);
                (next, nb * row_bytes / 64)
            } else {
                (std::ptr::null(), 0)
            };
            // A band read whole from many far rows: each tile asks for the next one's lines
            // first, unless the band's tiles ask for the next band (see `next_tile.rs`).
            let far_band = (nb == b.extent
                && pad == 0
                && band_lines == 0
                && b.src_stride > 0
                && transpose::prefetches())
            .then(|| {
                let first = (so as isize + b0 as isize * b.src_stride) as usize * ss;
                (first, b.src_stride as usize * ss)
            });
            let mut a0 = 0;
            let mut k = 0;
            while a0 < ea {
                let na = if a0 == 0 && head > 0 {
                    head
                } else {
                    ta.min(ea - a0)
                };
                // (No divisions where there is nothing to ask for.)
                let ahead = if band_lines > 0 {
                    let first_line = k * band_lines / band_tiles;
                    let lines = (k + 1) * band_lines / band_tiles - first_line;
                    (next_band.wrapping_add(first_line * 64), lines)
                } else {
                    (std::ptr::null(), 0)
                };
                k += 1;
                let s_first = so as isize + b0 as isize * b.src_stride + (a0 * unit) as isize;
                let d_first = d0 as isize + b0 as isize * b.dst_stride;
                if let [l] = a_loops {
                    // One loop: rows a fixed distance apart.
                    if let Some((first, row)) = far_band {
                        NextTile::ask_for(
                            self.src.as_ptr(),
                            first,
                            row,
                            nb,
                            (a0, na, ta, ea),
                            unit * ss,
                        );
                    }
                    let d_first = d_first + a0 as isize * l.dst_stride;
                    let tile = StridedTile {
                        s_first,
                        s_row: b.src_stride,
                        d_first,
                        d_row: l.dst_stride,
                        na,
                        nb,
                        pad,
                        ahead,
                    };
                    self.tile_strided(tile, unit, scratch);
                } else if let Some(table) =
                    periodic.as_ref().map(|p| &p.1).filter(|t| a0 >= t.phase)
                {
                    // Compound rows whose offsets repeat every tile (after the head tile).
                    let periods = (a0 - table.phase) / table.period;
                    let d_first = d_first + periods as isize * a_loops[0].dst_stride;
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
            if tail > 0 {
                self.tail_cells(so, d0, a_loops, b, unit, tail, b0, nb);
            }
            b0 += nb;
        }
        if periodic.is_some() {
            scratch.periodic = periodic;
        }
    }

    /// The partial cell after the last along `a` of source rows `b0..b0 + nb` (just read by
    /// the tiles, so in cache): `tail` elements from the end of each source row, then fill to
    /// a whole unit, at consecutive destination units. Identity conversions only (see
    /// [`super::items::tile_tail`]).
    #[allow(clippy::too_many_arguments)]
    fn tail_cells(
        &self,
        so: usize,
        d0: usize,
        a_loops: &[LoopDim],
        b: LoopDim,
        unit: usize,
        tail: usize,
        b0: usize,
        nb: usize,
    ) {
        let [l] = a_loops else {
            unreachable!("tail cells follow a single source-contiguous loop")
        };
        let size = self.cast.src.size_bytes();
        let dst = self.dst.slice();
        let fill = &self.fill_line[..(unit - tail) * size];
        let cell = l.extent as isize;
        for i in b0..b0 + nb {
            let s = (so as isize + i as isize * b.src_stride) as usize + l.extent * unit;
            let d = (d0 as isize + i as isize * b.dst_stride + cell * l.dst_stride) as usize;
            let out = &mut dst[d * size..(d + unit) * size];
            let (data, pad) = out.split_at_mut(tail * size);
            copy_few(data, &self.src[s * size..(s + tail) * size]);
            copy_few(pad, fill);
        }
    }

    /// A tile of rows a fixed distance apart (see [`StridedTile`]).
    fn tile_strided(&self, t: StridedTile, unit: usize, scratch: &mut Scratch) {
        let (ss, ds) = (self.cast.src.size_bytes(), self.cast.dst.size_bytes());
        if self.tile_few_rows(&t, unit, scratch) {
            return;
        }
        let (na, nb) = (t.na, t.nb);
        let fused = self
            .fused
            .filter(|_| unit == 1 && (t.pad == 0 || self.src_fill_line.is_some()));
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
                && (t.pad == 0
                    || self
                        .pad_line(unit)
                        .is_some_and(|l| na * unit * ss <= l.len())),
            "a tile lies outside its buffer (plan and buffers disagree)"
        );
        let dst = self.dst.ptr.wrapping_add(t.d_first as usize * ds);
        let row = t.d_row as usize * ds;
        // Tiles of units whose destination rows are back to back but not whole lines (MACE
        // image rows whose width is not a multiple of 8 pixels): the tile's destination is one
        // range, transposed in cache into a scratch tile and streamed out in one piece, as for
        // compound rows (measured, one thread, f16 images 90 and 100 pixels wide: 39-47% of the
        // copy -> 47-59% over six alternating runs). Rows under a line of wider elements are
        // left to the kernels' packed stores (kHWC8 measured slower through the scratch).
        // Rows of bytes shorter than a line (NCHW32c's pixels of i8) the same way when the
        // job streams: no kernel writes them as whole lines (i8 NCHW -> NCHW32c, one thread,
        // two alternating runs: C=24 at 224 x 224 72-75% -> 100-105% of the copy, C=250 at
        // 14 x 14 72-73% -> 83-87%). All of these only where the job streams: a destination
        // that stays in cache gains nothing from being written whole, and the scratch tile's
        // copy is a second pass over it (the sweep's tensors under 1 MiB, one thread, four
        // alternations: 1.031x by geometric mean, f32 NCHW <-> NHWC 1.09-1.14x, rows at half
        // the copy's speed 381 -> 399 of 796; C = 250 at 14 x 14 f32 37% -> 65%, and 7 rows
        // more than 10% slower, NCHW32c -> NCHW f16 C = 2048 at 14 x 14 99% -> 82% the most).
        let byte_rows = unit * ss == 1;
        let through_scratch = fused.is_none()
            && self.stream
            && ((unit > 1 || row >= WHOLE_ROWS_MIN_BYTES) && row >= 64 || byte_rows)
            && t.d_row as usize == (nb + t.pad) * unit
            && (!(dst as usize).is_multiple_of(64) || !row.is_multiple_of(64))
            && na * row <= SCRATCH_BYTES;
        let strided = |out: *mut u8| transpose::Strided {
            src: self.src.as_ptr().wrapping_add(t.s_first as usize * ss),
            src_row: t.s_row as usize * ss,
            dst: out,
            dst_row: row,
            na,
            nb: nb + t.pad,
        };
        if let Some(fused) = fused {
            // The same for cast tiles: a destination range whose rows are not whole lines
            // (NCHW planes of 7 x 7 or 14 x 14 pixels) is cast into the scratch tile and
            // streamed out in one piece when the job streams.
            let range = na * row;
            let through_scratch = self.stream
                && t.pad == 0
                && t.d_row as usize == nb
                && (!(dst as usize).is_multiple_of(64) || !row.is_multiple_of(64))
                && (64..=SCRATCH_BYTES).contains(&range);
            let out = if through_scratch {
                scratch
                    .stream_buf
                    .get_or_insert_with(|| AlignedBuf::zeroed(SCRATCH_BYTES))
                    .as_mut_ptr()
            } else {
                dst
            };
            let ahead = |rows| transpose::Ahead {
                rows,
                next: t.ahead.0,
                lines: t.ahead.1,
            };
            let stream = self.stream && !through_scratch;
            match self.pad_line(unit).filter(|_| t.pad > 0) {
                // SAFETY (both): every row of the tile is inside its buffer (asserted above),
                // or inside the scratch tile (`range <= SCRATCH_BYTES`), the fill rows inside
                // the source fill line (asserted above); the destination rows belong to this
                // item alone; the CPU has the kernel's features.
                None => {
                    let rows = ahead(transpose::Strided { nb, ..strided(out) });
                    // f32 -> f16 cast first where the tile goes through the scratch tile
                    // ([`Job::half_tile`]).
                    if !(through_scratch && unsafe { self.half_tile(rows, &mut scratch.bufs) }) {
                        let done = unsafe { fused.run(rows, stream) };
                        self.cast_strips(rows, done, &mut scratch.bufs);
                    }
                }
                Some(line) => {
                    let rows = transpose::Padded {
                        rows: ahead(strided(out)),
                        data_rows: nb,
                        fill: line.as_ptr(),
                    };
                    let done = unsafe { fused.run(rows, stream) };
                    self.cast_strips(rows, done, &mut scratch.bufs);
                }
            }
            if through_scratch {
                let tile = &scratch.stream_buf.as_ref().expect("made above")[..range];
                // SAFETY: the tile's destination range is inside the buffer (asserted above:
                // its rows are back to back) and belongs to this item.
                let dst_range = unsafe { std::slice::from_raw_parts_mut(dst, range) };
                self.out_copy(dst_range, tile);
            }
            return;
        }
        // SAFETY: every row of the tile is inside its buffer (asserted above), and through the
        // scratch its rows are back to back from `dst`, `na * row <= SCRATCH_BYTES` bytes; the
        // destination rows belong to this item alone.
        let (next, lines) = t.ahead;
        unsafe {
            self.transpose_out(
                |out| transpose::Ahead {
                    rows: strided(out),
                    next,
                    lines,
                },
                dst,
                through_scratch.then_some(na * row),
                (unit * ss, nb, t.pad),
                scratch,
            )
        };
    }

    /// Runs the identity tile `rows(out)` (`n`-byte units, `pad` fill rows after its `nb`
    /// data rows): straight into the destination (`out = dst`, whole lines streamed), or with
    /// `scratch_bytes` into the scratch tile (`out`), whose bytes are then streamed to `dst` in
    /// one piece (for tiles whose destination rows are back to back but not whole lines).
    ///
    /// # Safety
    /// `rows(dst)` lies inside the buffers; with `scratch_bytes`, its destination rows are the
    /// `scratch_bytes <= SCRATCH_BYTES` bytes from `dst`; the destination belongs to this item.
    unsafe fn transpose_out<R: transpose::Rows>(
        &self,
        rows: impl FnOnce(*mut u8) -> R,
        dst: *mut u8,
        scratch_bytes: Option<usize>,
        (n, nb, pad): (usize, usize, usize),
        scratch: &mut Scratch,
    ) {
        let out = match scratch_bytes {
            Some(_) => scratch
                .stream_buf
                .get_or_insert_with(|| AlignedBuf::zeroed(SCRATCH_BYTES))
                .as_mut_ptr(),
            None => dst,
        };
        let rows = rows(out);
        let stream = scratch_bytes.is_none() && self.stream;
        // SAFETY: the rows are inside their buffers (the caller's contract; the scratch holds
        // SCRATCH_BYTES); the source is never written.
        unsafe {
            if pad == 0 {
                transpose::transpose_rows_inlined(rows, n, stream)
            } else {
                let rows = transpose::Padded {
                    rows,
                    data_rows: nb,
                    fill: self.fill_line.as_ptr(),
                };
                transpose::transpose_rows_inlined(rows, n, stream)
            }
        }
        if let Some(bytes) = scratch_bytes {
            let tile = &scratch.stream_buf.as_ref().expect("made above")[..bytes];
            // SAFETY: the tile's destination range is inside the buffer and belongs to this
            // item (the caller's contract).
            let out = unsafe { std::slice::from_raw_parts_mut(dst, bytes) };
            self.out_copy(out, tile);
        }
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
        let rows_on_lines = if na == table.bytes.len() {
            table.on_lines
        } else {
            rows_bytes.iter().all(|o| o % 64 == 0)
        };
        let lines = (dst as usize).is_multiple_of(64) && row.is_multiple_of(64) && rows_on_lines;
        let through_scratch = whole && !lines && na * row <= SCRATCH_BYTES;
        let offsets = |out: *mut u8| transpose::Offsets {
            src,
            src_row: s_row as usize * n / unit,
            dst: out,
            dst_rows: rows_bytes,
            rows_on_lines,
            nb: nb + pad,
        };
        // SAFETY: every row is inside its buffer (asserted above: offsets are non-negative and
        // at most `max`), and a whole tile's rows are the `na * row <= SCRATCH_BYTES` bytes
        // from `dst`; destination rows belong to this item alone.
        unsafe {
            self.transpose_out(
                offsets,
                dst,
                through_scratch.then_some(na * row),
                (n, nb, pad),
                scratch,
            )
        };
    }
}

/// The largest band of source rows whose tiles ask for the next band (a quarter of the L2
/// cache of the machine measured: the band being read and the next stay in it).
const BAND_AHEAD_BYTES: usize = 256 << 10;

/// A tile of rows a fixed distance apart: source rows `s_first + b * s_row` for `b < nb`,
/// destination rows `d_first + a * d_row` for `a < na` (elements), each destination row
/// followed by `pad` fill elements.
pub(super) struct StridedTile {
    pub(super) s_first: isize,
    pub(super) s_row: isize,
    pub(super) d_first: isize,
    pub(super) d_row: isize,
    pub(super) na: usize,
    pub(super) nb: usize,
    pub(super) pad: usize,
    /// Source lines to ask for while the tile runs ([`transpose::Ahead`]).
    pub(super) ahead: (*const u8, usize),
}
