//! The shape of a tile: how many units along the source rows and along the destination rows,
//! from the rows' distances (measured choices, see [`tile_shape`]).

use layoutkit_core::plan::LoopDim;

use super::items::MAX_TILE_A;
use super::{IDENTITY_TILE_BYTES, SCRATCH_BYTES, TILE_BYTES};

/// The tile shape `(a, b)` in units of `unit_bytes` (the wider of the source and destination
/// unit; `dst_unit_bytes` the destination's): `a` along the source rows (contiguous in the
/// source), `b` along the destination rows, for source rows `src_row_bytes` apart,
/// destination rows `dst_row_bytes` apart, and at most `max_bytes` per tile. Segments are
/// counted in destination bytes, so a cast to a narrower type still writes whole lines.
/// `line_tiles`: the kernel prefers one destination line per row between close rows (the
/// AVX-512 8-bit quantising kernel, [`super::cast_tiles::FusedCast::line_tiles`]).
///
/// Chosen from measurements on the 2-core EPYC (bench/results/cpu.md): the destination
/// segment each row gets per tile (`b`) is long (2 KiB) when the source rows are close
/// together (NHWC's pixels: few pages to read from), short (one line) when the source rows
/// are far apart and the destination rows close (NCHW -> NHWC: few source streams, which the
/// prefetchers follow), 256 bytes when both are far apart; one line for casts to a quarter
/// of the size between close rows (below). `a` fills the rest of the tile.
pub(super) fn tile_shape(
    unit_bytes: usize,
    dst_unit_bytes: usize,
    src_row_bytes: usize,
    dst_row_bytes: usize,
    nb: usize,
    max_bytes: usize,
    line_tiles: bool,
) -> (usize, usize) {
    const PAGE: usize = 4096;
    let (segment, max_bytes) = match (src_row_bytes < PAGE, dst_row_bytes < PAGE) {
        // One line of destination bytes per row, so that the tile's `a` spans whole small
        // planes and its source rows (NCHW's planes of 7 x 7 to 14 x 14 pixels back to
        // back) are read as one range (f32 -> i8 on the AVX-512 kernel, N=43,H=W=14, one
        // thread, two alternating runs: NCHW -> NHWC C=1024 48-49% -> 70-72% of the copy,
        // NHWC -> NCHW C=1000 30-40% -> 61-65%; the AVX2 kernels lost 10-17 points with it
        // on NCHW -> NHWC C=250-1000, 7 x 7 and 14 x 14).
        (true, true) if line_tiles => (64, max_bytes),
        (true, true) => (2048, max_bytes),
        (true, false) => (512, max_bytes.min(16384)),
        (false, false) => (256, max_bytes),
        (false, true) => (64, max_bytes),
    };
    let mut tb = (segment / dst_unit_bytes).clamp(1, nb.max(1));
    if dst_unit_bytes < unit_bytes {
        // A narrowing cast: keep at least one whole line of each source row per tile (the
        // fused kernels read each source line whole; half a line per tile left the other
        // half to miss in the next one: f32 -> i8 NHWC -> NCHW had 8 channels per tile).
        tb = tb.min((max_bytes / 64).max(1));
    }
    let ta = (max_bytes / (tb * unit_bytes)).clamp(1, MAX_TILE_A);
    (ta, tb)
}

/// The longest destination rows of single elements that whole-row tiles take (see
/// [`WHOLE_ROWS_MIN_BYTES`]): 8 KiB (tiles of 8 pixels or more). Measured on a Xeon
/// (family 6 model 207), f32 `NCHW -> NHWC` with C = 1000 (4000-byte rows, not whole lines),
/// one thread, alternated three times: 14 x 14 56% -> 103% of the copy, 56 x 56 26% -> 45%,
/// 112 x 112 29% -> 43%, 7 x 7 81% -> 87%, `NCHW -> kHWC8` 14 x 14 68% -> 97%; on a Zen 4 (AMD
/// family 25 model 17), the same rows alternated three times: 14 x 14 65% -> 92%, 56 x 56 51%
/// -> 82%, 112 x 112 50% -> 82%, 7 x 7 53% -> 61%, `NCHW -> kHWC8` 77% -> 87%. Cut into 2 KiB
/// segments (the limit was 1 KiB, from an earlier engine where 16-pixel tiles of f32 NHWC
/// with C = 1000 measured slower), each row's lines at the segments' ends were written by two
/// tiles with ordinary stores. Not measured on a Zen 5 (`bench/results/sweep.md`).
pub(super) fn whole_rows_max() -> usize {
    super::SCRATCH_BYTES / 8
}

/// The shortest destination rows of single elements that whole-row tiles go through the
/// scratch tile for (shorter rows are the few-channel kernels' or the packed stores'); the
/// longest is [`whole_rows_max`]'s.
pub(super) const WHOLE_ROWS_MIN_BYTES: usize = 64;

/// The most rows of `row_bytes` bytes, at most `ta`, whose bytes and whose `ta` source
/// elements of `src_bytes` each are whole 64-byte lines, so that a tile of whole rows starts
/// where the last one ended on both sides on a line boundary (where the buffers do); `ta`
/// itself where no such count fits.
fn whole_lines_rows(ta: usize, row_bytes: usize, src_bytes: usize) -> usize {
    let per_line = |bytes: usize| 64 / gcd(64, bytes);
    let (d, s) = (per_line(row_bytes), per_line(src_bytes));
    let step = d / gcd(d, s) * s;
    if step <= ta {
        ta / step * step
    } else {
        ta
    }
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

impl super::Job<'_> {
    /// The tile shape `(ta, tb)` of a tile item (its kernel loops `a_loops` and `b`, `unit`
    /// elements per step, `pad` fill rows): [`tile_shape`]'s, or the few-rows kernels', or
    /// whole destination rows (see below).
    pub(super) fn item_tile_shape(
        &self,
        a_loops: &[LoopDim],
        b: LoopDim,
        unit: usize,
        pad: usize,
    ) -> (usize, usize) {
        let (ss, ds) = (self.cast.src.size_bytes(), self.cast.dst.size_bytes());
        let inner_a = a_loops[a_loops.len() - 1];
        let (mut ta, mut tb) = tile_shape(
            ss.max(ds) * unit,
            ds * unit,
            b.src_stride.unsigned_abs() * ss,
            inner_a.dst_stride.unsigned_abs() * ds,
            b.extent,
            // Casting tiles without a fused kernel go through two scratch buffers.
            if self.cast.is_identity() || (self.fused.is_some() && unit == 1) {
                IDENTITY_TILE_BYTES
            } else {
                TILE_BYTES
            },
            unit == 1 && self.fused.is_some_and(|f| f.line_tiles()),
        );
        let few_rows = self.few_rows_shape(a_loops, b, unit, pad);
        if let Some((a, b)) = few_rows {
            (ta, tb) = (a, b);
        }
        // Destination rows (pixels of many channels) back to back but not whole lines, such
        // as NHWC's with C = 250 f32 (1000 bytes) or C = 24 f32 (96 bytes; measured, one
        // thread, same run: 72-80% of the copy -> 142-147%; 48-byte rows got slower, 75 ->
        // 46%, and stay with the kernels' stores): tiles of whole rows, so each tile's
        // destination is one range, transposed in the scratch tile and streamed out whole
        // (`tile_strided`); cut into segments, the rows' lines were written partly by two
        // tiles with ordinary stores, each line read before it was written. Only where the
        // job streams (see `tile_strided`).
        let d_row_bytes = inner_a.dst_stride.unsigned_abs() * ds;
        if self.cast.is_identity()
            && self.stream
            && unit == 1
            && pad == 0
            && a_loops.len() == 1
            && inner_a.dst_stride as usize == b.extent
            && !d_row_bytes.is_multiple_of(64)
            && (WHOLE_ROWS_MIN_BYTES..=super::shape::whole_rows_max()).contains(&d_row_bytes)
        {
            tb = b.extent;
            // Rows in whole lines on both sides: 65 rows of 1000 bytes (f32 C = 250) left each
            // tile's first and last destination lines half written, and its source rows
            // 260 bytes long; 64 rows make both whole (Zen 4, one thread, alternated three
            // times: f32 `NCHW -> NHWC` C = 250 64 x 64 0.41 -> 0.55 of the copy, f16 0.36 ->
            // 0.50; 14 x 14 planes as 80 of 83 rows: `NHWC -> NCHW` and `kHWC8 -> NCHW` with
            // C = 2048 1.38-1.43x).
            ta = whole_lines_rows(
                (SCRATCH_BYTES / d_row_bytes).clamp(1, MAX_TILE_A),
                d_row_bytes,
                ss,
            );
        }
        if pad > 0 && few_rows.is_none() {
            // The whole padded run in one tile: its last `pad` rows read the fill line.
            tb = b.extent;
            ta = (TILE_BYTES / ((tb + pad) * ss)).clamp(1, MAX_TILE_A);
        }
        (ta, tb)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fast::{IDENTITY_TILE_BYTES, TILE_BYTES};

    /// [`whole_lines_rows`]' contract: at most `ta`, at least 1, and where it is not `ta`
    /// itself, its rows and their source elements are whole lines, and no larger count up to
    /// `ta` is.
    #[test]
    fn whole_line_row_counts_are_the_largest_that_fit() {
        let whole = |t: usize, row: usize, src: usize| {
            (t * row).is_multiple_of(64) && (t * src).is_multiple_of(64)
        };
        for ta in 1..300 {
            for row in (1..300).chain([1000, 2000, 4000, 784, 392, 8191]) {
                for src in [1, 2, 4, 8] {
                    let t = whole_lines_rows(ta, row, src);
                    assert!((1..=ta).contains(&t));
                    if (1..=ta).any(|u| whole(u, row, src)) {
                        assert!(whole(t, row, src), "{ta} {row} {src} -> {t}");
                        assert!(!(t + 1..=ta).any(|u| whole(u, row, src)));
                    } else {
                        assert_eq!(t, ta);
                    }
                }
            }
        }
    }

    /// The tile shape's contract: `1 <= tb <= nb`, `1 <= ta <= MAX_TILE_A`, and a casting
    /// tile (elements of at most 8 bytes, casts to types of at least 1 byte) fits the casting
    /// scratch buffers, over every kind of row distance.
    #[test]
    fn tiles_stay_within_their_bounds() {
        for (src_size, dst_size) in [
            (4, 4),
            (2, 2),
            (1, 1),
            (8, 8),
            (4, 2),
            (4, 1),
            (2, 4),
            (1, 4),
            (8, 1),
        ] {
            let unit = src_size.max(dst_size);
            for src_row in [4, 1000, 4096, 1 << 20] {
                for dst_row in [4, 1000, 4096, 1 << 20] {
                    for nb in [1, 3, 16, 96, 10_000] {
                        for (max, lines) in [TILE_BYTES, IDENTITY_TILE_BYTES]
                            .into_iter()
                            .flat_map(|m| [(m, false), (m, true)])
                        {
                            let (ta, tb) =
                                tile_shape(unit, dst_size, src_row, dst_row, nb, max, lines);
                            assert!((1..=nb).contains(&tb) && (1..=MAX_TILE_A).contains(&ta));
                            assert!(
                                ta * tb * unit <= max,
                                "{ta} x {tb} x {unit} > {max} ({src_row}, {dst_row}, {nb})"
                            );
                        }
                    }
                }
            }
        }
    }
}
