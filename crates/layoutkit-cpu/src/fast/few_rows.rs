//! The shapes of the few-rows tiles ([`crate::fast::Job::tile_few_rows`]): which tiles carry a
//! cast's padding, the scratch bytes per pixel, and how many pixels a tile takes.

use layoutkit_core::plan::LoopDim;

use super::MAX_ROWS;

/// Whether the few-rows tiles write a cast's `rows` channels of `unit` elements followed by
/// `pad` fill elements in one pass (the fill line holds the pad; identity conversions pad in
/// the transposes instead, or in [`crate::fast::Job::planes_into_records`]).
/// [`crate::fast::items::split`] asks the same before it gives a cast tile its padding, as no
/// other cast tile writes it.
pub(in crate::fast) fn few_rows_pad(
    cast: &layoutkit_core::CastSpec,
    rows: usize,
    unit: usize,
    pad: usize,
) -> bool {
    let e = unit * cast.src.size_bytes();
    !cast.is_identity()
        && unit == 1
        && (2..=MAX_ROWS).contains(&rows)
        && pad <= crate::fast::items::MAX_TILE_A
        && matches!(e, 1 | 2 | 4 | 8)
}

impl crate::fast::Job<'_> {
    /// Scratch bytes per pixel of a few-rows tile of `rows` rows of `unit` elements (`pad`
    /// fill elements after each, casts only): the third range's (a cast's padded records, or
    /// the tile as it is streamed out), and all three's (the source and cast values before
    /// it), by which [`Self::few_rows_shape`] sizes the tiles that [`Self::tile_few_rows`]
    /// then fits.
    pub(super) fn few_rows_scratch(&self, rows: usize, unit: usize, pad: usize) -> (usize, usize) {
        let (ss, ds) = (self.cast.src.size_bytes(), self.cast.dst.size_bytes());
        let third = match (pad > 0, self.stream) {
            (true, _) => (rows + pad) * unit * ds,
            (false, true) => rows * unit * ds,
            (false, false) => 0,
        };
        (third, rows * unit * (ss + ds) + third)
    }

    /// The tile shape `(ta, tb)` for a tile plane that [`Self::tile_few_rows`] runs (one
    /// source-contiguous loop, no padding but a cast's records ([`few_rows_pad`]),
    /// 2..=[`MAX_ROWS`] rows packed into pixels on one
    /// side): as many pixels as fill the scratch tile, so each tile moves tens of KiB in long
    /// runs (the transposes' shapes, made for 8 or 16 rows, gave 3-row tiles of 256 pixels).
    /// `None` for other planes.
    pub(in crate::fast) fn few_rows_shape(
        &self,
        a_loops: &[LoopDim],
        b: LoopDim,
        unit: usize,
        pad: usize,
    ) -> Option<(usize, usize)> {
        let [a] = a_loops else { return None };
        let (ss, ds) = (self.cast.src.size_bytes(), self.cast.dst.size_bytes());
        let identity = self.cast.is_identity();
        // Streamed, multiples of 64 pixels where there is room for them, so each tile's rows
        // (and its interleaved range) are whole 64-byte lines of the destination when the
        // first one is and tiles share no line.
        let pixels = |rows: usize| {
            let p = crate::fast::SCRATCH_BYTES / self.few_rows_scratch(rows, unit, pad).1;
            if self.stream && p >= 64 {
                p / 64 * 64
            } else {
                p.max(1)
            }
        };
        if b.src_stride < 0 || a.dst_stride < 0 {
            return None;
        }
        if pad > 0 {
            // Casts into records of `b.extent` channels and `pad` fill (RGB into NCHW32c), and
            // streamed identity conversions the same (`planes_into_records`).
            let records = a.dst_stride as usize == (b.extent + pad) * unit;
            let ok = (few_rows_pad(&self.cast, b.extent, unit, pad)
                || self.planes_records_take(b.extent, unit, pad))
                && records;
            return ok.then(|| (pixels(b.extent).min(a.extent), b.extent));
        }
        let e_ok = |e: usize| matches!(e, 1 | 2 | 4 | 8);
        // Pixels back to back, or apart: as destinations in casts only (an identity
        // conversion's strided destination pixels have fill between them), as sources in
        // casts and streamed identity tiles (in cache, other kernels moved kHWC8's 4-channel
        // records into planes faster: 0.61 -> 0.33 of the copy).
        let fits = |stride: isize, rows: usize, apart_ok: bool| {
            stride as usize == rows * unit || (apart_ok && stride as usize > rows * unit)
        };
        let few = |r: usize| (2..=MAX_ROWS).contains(&r);
        if few(b.extent) && fits(a.dst_stride, b.extent, !identity) && e_ok(unit * ss) {
            // Channels as source rows, pixels as destination rows.
            return Some((pixels(b.extent).min(a.extent), b.extent));
        }
        // Streamed identity tiles from records apart, except four 4-byte elements, which
        // the transposes' 4 x 4 blocks move faster (f32 kHWC8 -> NCHW with C = 4: 86-88% of
        // the copy against 67-74% here; C = 3, which those blocks do not take: 61-68% there,
        // 71-77% here; one thread, three alternating runs), unless the records are split by
        // vector permutes (`record_split`: 8-element records where AVX-512 runs; on a Zen 5
        // the 4 x 4 blocks ran f32 kHWC8 -> NCHW with C = 4 at 50-53% of the copy).
        let permuted = super::record_split_runs(b.src_stride as usize * ds, a.extent, unit * ds);
        let four_fours = a.extent == 4 && unit * ds == 4 && !permuted;
        let apart_ok = !identity || (self.stream && !four_fours);
        if few(a.extent) && fits(b.src_stride, a.extent, apart_ok) && e_ok(unit * ds) {
            return Some((a.extent, pixels(a.extent).min(b.extent)));
        }
        None
    }
}
