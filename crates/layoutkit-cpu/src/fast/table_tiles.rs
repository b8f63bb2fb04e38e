//! Tiles whose rows come from tables (row starts computed per tile), and the strips a fused
//! transpose-and-cast kernel leaves of a tile, cast through a buffer.

use layoutkit_core::plan::LoopDim;

use super::items::MAX_TILE_A;
use super::{copy_short, transpose, AlignedBuf, Job, Scratch, TileBuf, SCRATCH_BYTES, TILE_BYTES};

impl Job<'_> {
    /// The tiles of a compound destination row (see [`super::items::compound_b`]): `a` the
    /// source-contiguous loop (source stride `unit`), `b = [outer, inner]` whose flattened
    /// index is contiguous in the destination (`outer`'s destination stride is `inner`'s
    /// run, `inner`'s extent plus `pad` fill elements). Each tile takes up to [`MAX_TILE_A`]
    /// units of `a`: its source rows are the `b` index's rows from a table (fill rows for the
    /// padding), its destination rows the `a` index's runs.
    ///
    /// Where those runs are back to back (a MACE height-major image: each channel's `W x 4`
    /// lanes, then the next channel's), an identity tile is transposed into the scratch tile
    /// and its one destination range written from there (streamed for large destinations):
    /// rows of 56 or 112 bytes are not whole lines, and stored in place each line was read
    /// before it was written (f32 N=86,C=1000,H=14,W=14, one thread: 42% of the copy that
    /// way).
    pub(super) fn tiles_compound_b(
        &self,
        so: usize,
        d0: usize,
        a: LoopDim,
        [outer, inner]: [LoopDim; 2],
        (unit, pad): (usize, usize),
        scratch: &mut Scratch,
    ) {
        let ss = self.cast.src.size_bytes();
        let size = ss.max(self.cast.dst.size_bytes());
        let run = inner.extent + pad;
        let nb = outer.extent * run;
        let row_bytes = nb * unit * size;
        let packed = self.cast.is_identity() && a.dst_stride as usize == nb * unit;
        assert!(
            pad == 0 || packed,
            "fill rows inside a compound row need the scratch tile"
        );
        let ta = (if packed { SCRATCH_BYTES } else { TILE_BYTES } / row_bytes).clamp(1, MAX_TILE_A);
        // Whole blocks of 16 rows for the kernels where the tile holds them.
        let ta = if ta >= 16 { ta / 16 * 16 } else { ta };
        let mut a0 = 0;
        while a0 < a.extent {
            let na = ta.min(a.extent - a0);
            let s0 = (so + a0 * unit) as isize;
            scratch.src_rows.clear();
            // Fill rows as -1.
            scratch.src_rows.extend((0..nb).map(|j| {
                let (o, i) = (j / run, j % run);
                if i < inner.extent {
                    s0 + o as isize * outer.src_stride + i as isize * inner.src_stride
                } else {
                    -1
                }
            }));
            let d = d0 as isize + a0 as isize * a.dst_stride;
            if packed {
                self.packed_tile(d as usize, na, nb * unit * ss, unit * ss, scratch);
            } else {
                scratch.dst_rows.clear();
                scratch
                    .dst_rows
                    .extend((0..na).map(|i| d + i as isize * a.dst_stride));
                self.tile(na, nb, unit, 0, scratch);
            }
            a0 += na;
        }
    }

    /// An identity tile whose `na` destination rows of `row` bytes are back to back from
    /// element `d` (source rows at `scratch.src_rows`, -1 for a row of the fill value;
    /// `n`-byte units), transposed into the scratch tile and copied out (streamed where the
    /// destination is large) in one piece.
    fn packed_tile(&self, d: usize, na: usize, row: usize, n: usize, scratch: &mut Scratch) {
        // An identity conversion: one element size on both sides.
        debug_assert!(self.cast.is_identity());
        let ss = self.cast.src.size_bytes();
        let bytes = na * row;
        let src_len = na * n;
        assert!(
            bytes <= SCRATCH_BYTES
                && d * ss + bytes <= self.dst.len
                && scratch.src_rows.iter().all(|&r| match r {
                    -1 => src_len <= self.fill_line.len(),
                    r => r >= 0 && r as usize * ss + src_len <= self.src.len(),
                }),
            "a tile lies outside its buffer (plan and buffers disagree)"
        );
        let buf = scratch
            .stream_buf
            .get_or_insert_with(|| AlignedBuf::zeroed(SCRATCH_BYTES));
        let out = buf.as_mut_ptr();
        let base = self.src.as_ptr();
        scratch.src_ptrs.clear();
        let fill = self.fill_line.as_ptr();
        scratch
            .src_ptrs
            .extend(scratch.src_rows.iter().map(|&r| match r {
                -1 => fill,
                r => base.wrapping_add(r as usize * ss),
            }));
        scratch.dst_ptrs.clear();
        scratch
            .dst_ptrs
            .extend((0..na).map(|i| out.wrapping_add(i * row)));
        let rows = transpose::Table {
            src: &scratch.src_ptrs,
            dst: &scratch.dst_ptrs,
        };
        // SAFETY: the source rows hold `na` units each (asserted above), the destination rows
        // are the first `bytes <= SCRATCH_BYTES` bytes of the scratch tile, and the source is
        // never written.
        unsafe { transpose::transpose_rows_dyn(rows, n, false) };
        // SAFETY: the range is inside the destination (asserted above) and belongs to this
        // item.
        let out = unsafe { std::slice::from_raw_parts_mut(self.dst.ptr.add(d * ss), bytes) };
        self.out_copy(out, &buf[..bytes]);
    }

    /// One tile whose row starts (in elements) are in `scratch.src_rows` (b rows of `na`
    /// units) and `scratch.dst_rows` (a rows of `nb` units).
    pub(super) fn tile(
        &self,
        na: usize,
        nb: usize,
        unit: usize,
        pad: usize,
        scratch: &mut Scratch,
    ) {
        let (ss, ds) = (self.cast.src.size_bytes(), self.cast.dst.size_bytes());
        // Every row must lie inside its buffer: checked here, once per row, so the kernels
        // may use raw pointers.
        let src_len = (na * unit * ss) as isize;
        let dst_len = ((nb + pad) * unit * ds) as isize;
        let pad_line = self.pad_line(unit);
        assert!(pad == 0 || pad_line.is_some_and(|l| src_len as usize <= l.len()));
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
        // Fill rows: the fill line (identity conversions) or source values casting to the
        // fill (fused cast tiles), asserted above.
        if let Some(line) = pad_line.filter(|_| pad > 0) {
            srows.extend(std::iter::repeat_n(line.as_ptr(), pad));
        }
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
            unsafe { transpose::transpose_rows_dyn(rows, unit * ss, self.stream) };
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
            let done = unsafe { fused.run(rows, self.stream) };
            self.cast_strips(rows, done, &mut scratch.bufs);
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
            if self.stream && row.len() % 64 == 0 && (out.as_ptr() as usize).is_multiple_of(64) {
                // Whole lines: streamed past the cache, as the identity tiles do.
                transpose::stream_copy(out, row);
            } else {
                copy_short(out, row);
            }
        }
    }

    /// What a tile of `unit`-element cells reads its fill rows from: the fill line in identity
    /// conversions, source values that cast to the fill for the fused cast kernels (single
    /// elements only); None where no tile kernel writes padding.
    pub(super) fn pad_line(&self, unit: usize) -> Option<&[u8]> {
        if self.cast.is_identity() {
            Some(&self.fill_line)
        } else if unit == 1 && self.fused.is_some() {
            self.src_fill_line.as_deref()
        } else {
            None
        }
    }

    /// Casts what a fused kernel that did rows `..da` and columns `..db` of `rows` left: the
    /// other columns of those rows, and the other rows whole. The leftover elements are
    /// gathered (transposed) into a buffer, cast there in one run, and copied out row by row:
    /// a run call per element cost about 90 instructions, and the strips are a third of a
    /// tile where its width is not a multiple of the kernel's 16 or 32 columns (f32 -> i8
    /// NHWC -> NCHW on 7x7 planes: 17 of 49 columns; NCHW -> NHWC with C = 24: 8 of 24).
    ///
    /// The two buffers are the scratch tile buffers `bufs` where the strips fit them (the
    /// casting tiles do), else allocated.
    pub(super) fn cast_strips<R: transpose::Rows>(
        &self,
        rows: R,
        (da, db): (usize, usize),
        bufs: &mut Option<Box<[TileBuf; 2]>>,
    ) {
        let (ss, ds) = (self.cast.src.size_bytes(), self.cast.dst.size_bytes());
        let (na, nb) = (rows.na(), rows.nb());
        // Rows `..da` from column `db`, then rows `da..` whole (none when the kernel did every
        // row, or every column of its rows).
        let strips = [(0, da.min(na), db.min(nb)), (da.min(na), na, 0)];
        let mut heap = (Vec::new(), Vec::new());
        for (a0, a1, from) in strips {
            let w = nb - from;
            if a1 <= a0 || w == 0 {
                continue;
            }
            let n = (a1 - a0) * w;
            let (gathered, casted): (&mut [u8], &mut [u8]) = if n * ss.max(ds) <= TILE_BYTES {
                let [g, c] = &mut **bufs.get_or_insert_with(|| {
                    Box::new([TileBuf([0; TILE_BYTES]), TileBuf([0; TILE_BYTES])])
                });
                (&mut g.0[..n * ss], &mut c.0[..n * ds])
            } else {
                heap.0.resize(n * ss, 0u8);
                heap.1.resize(n * ds, 0u8);
                (&mut heap.0[..n * ss], &mut heap.1[..n * ds])
            };
            // Element moves of a size known at compile time (a run-time size made each one a
            // `memcpy` call: 13 instructions per element of f32 -> i8 NCHW -> NHWC, C = 24).
            fn gather<const N: usize, R: transpose::Rows>(
                rows: &R,
                out: &mut [u8],
                (a0, a1): (usize, usize),
                (from, nb): (usize, usize),
            ) {
                let w = nb - from;
                if a1 - a0 < w {
                    // Fewer rows than columns (the row past a kernel's last block: 250 channels
                    // of a 7 x 7 plane's 49th pixel): along the columns, each output row in
                    // order (the loop along `a`, one iteration long per column, was most of
                    // the strip's time).
                    for (a, out) in (a0..a1).zip(out.chunks_exact_mut(w * N)) {
                        for (b, out) in (from..nb).zip(out.chunks_exact_mut(N)) {
                            // SAFETY: as below.
                            let v = unsafe {
                                rows.src(b).add(a * N).cast::<[u8; N]>().read_unaligned()
                            };
                            out.copy_from_slice(&v);
                        }
                    }
                    return;
                }
                for b in from..nb {
                    let src = rows.src(b);
                    for a in a0..a1 {
                        let at = ((a - a0) * w + b - from) * N;
                        // SAFETY: element a of source row b is inside the row (the caller
                        // checked every row against its buffer).
                        let v = unsafe { src.add(a * N).cast::<[u8; N]>().read_unaligned() };
                        out[at..at + N].copy_from_slice(&v);
                    }
                }
            }
            match ss {
                1 => gather::<1, R>(&rows, gathered, (a0, a1), (from, nb)),
                2 => gather::<2, R>(&rows, gathered, (a0, a1), (from, nb)),
                4 => gather::<4, R>(&rows, gathered, (a0, a1), (from, nb)),
                _ => gather::<8, R>(&rows, gathered, (a0, a1), (from, nb)),
            }
            (self.run)(gathered, casted, n, &self.cast);
            for a in a0..a1 {
                let row = &casted[(a - a0) * w * ds..(a - a0 + 1) * w * ds];
                // SAFETY: elements `from..nb` of destination row a are inside the row (as
                // above), which belongs to this item and does not overlap `casted`.
                unsafe {
                    std::ptr::copy_nonoverlapping(row.as_ptr(), rows.dst(a).add(from * ds), w * ds)
                };
            }
        }
    }
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
