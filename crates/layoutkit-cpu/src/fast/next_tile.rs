//! The next tile's source lines, asked for before a tile of many far-apart source rows is
//! transposed ([`NextTile`]).
//!
//! A whole-row tile (see `tiles.rs`: every destination row of a band in one tile, written out
//! as one range) of NCHW -> NHWC with C = 250, or NHWC -> NCHW with 14 x 14 planes, reads a
//! few hundred bytes from each of 196-250 source rows kilobytes apart. The hardware
//! prefetchers follow a few dozen streams, not hundreds, and the kernels' own prefetch along
//! each row (`transpose::x86::Prefetch`) lands a few blocks ahead in the same tile, so each of
//! the tile's lines waits on memory. Asking for the next tile's lines (the same rows, the next
//! columns) before this tile runs lets them arrive while this one is transposed. Measured on a
//! Xeon (family 6 model 167, stepping 8; L2 2 MiB, L3 105 MiB), one thread, the build before
//! and this one alternated twice (`bench/results/sweep.md`, 2026-12-02): NHWC -> NCHW
//! N=21/42,C=2048,H=14,W=14 f32 32% -> 49% of the copy, f16 33% -> 50%; kHWC8 -> NCHW the
//! same shapes f32 33% -> 48%, f16 32% -> 56%; NCHW -> NHWC C=250 at 64 x 64 f32 29% -> 45%,
//! f16 30% -> 45%, i8 35% -> 45%; with rows from 1 KiB apart (first 4 KiB), the same way:
//! NHWC -> NCHW C=1000 14 x 14 f32 57% -> 65%, f16 55% -> 63%, i8 C=2048 33% -> 52%, kHWC8 ->
//! NCHW C=1000 f32 56% -> 66%, f16 56% -> 62%, the rows of 256 channels unchanged (their
//! bands are short enough for the band's own prefetch of the next band, which this does not
//! double); the 24 other rows whose tiles read 32 rows or more within
//! 5 points either way. Asked for in every tile of 32 or more rows, it was slower wherever the
//! tiles had fewer than 196 rows (49-row tiles of 7 x 7 planes 87% -> 72%, 32- and 64-row
//! tiles of the casts and NCHW32c 10-35% slower: there the hardware and the kernels' own
//! prefetches keep up, and the extra requests only compete with them), hence the limit
//! [`MIN_ROWS`], set between the 64 rows measured slower and the 196 measured faster (tiles
//! of 65-195 rows were not measured). Not measured on AMD CPUs, where these rows ran at
//! 60-88% of the copy before (Zen 4).

/// The fewest source rows a tile must read for [`NextTile`] to apply.
pub(super) const MIN_ROWS: usize = 128;

/// Source rows at least this far apart (bytes). Closer rows that a band reads whole are asked
/// for by the band's tiles as the next band (`tiles.rs`) where the band is short enough; the
/// caller leaves those bands out.
const MIN_ROW_BYTES: usize = 1024;

/// The next tile of a band of whole-row tiles: `rows` source rows `row_bytes` apart, each
/// read `bytes` from `first` (the first row's start, in bytes from the source's start).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct NextTile {
    pub(super) first: usize,
    pub(super) row_bytes: usize,
    pub(super) rows: usize,
    pub(super) bytes: usize,
}

impl NextTile {
    /// The tile after the one at column `a0` (units), `na` wide, of a band whose tiles are
    /// `ta` units wide over `ea` units, `unit_bytes` each, the band's `rows` source rows
    /// starting at byte `band_first` and `row_bytes` apart; `None` where there is no next tile
    /// in the band or the tile is not one this applies to (fewer than [`MIN_ROWS`] rows, rows
    /// closer than [`MIN_ROW_BYTES`]).
    pub(super) fn after(
        band_first: usize,
        row_bytes: usize,
        rows: usize,
        (a0, na, ta, ea): (usize, usize, usize, usize),
        unit_bytes: usize,
    ) -> Option<NextTile> {
        if rows < MIN_ROWS || row_bytes < MIN_ROW_BYTES {
            return None;
        }
        let next = a0 + na;
        (next < ea).then(|| NextTile {
            first: band_first + next * unit_bytes,
            row_bytes,
            rows,
            bytes: ta.min(ea - next) * unit_bytes,
        })
    }

    /// The 64-byte lines the tile reads, as addresses relative to the source's start
    /// (row by row, each row's lines in order).
    pub(super) fn lines(self) -> impl Iterator<Item = usize> {
        (0..self.rows).flat_map(move |r| {
            let start = self.first + r * self.row_bytes;
            let end = start + self.bytes;
            (start & !63..end).step_by(64)
        })
    }

    /// Asks for the lines of the tile [`NextTile::after`] gives, if any, into L2 from the
    /// source at `src`.
    #[inline]
    pub(super) fn ask_for(
        src: *const u8,
        band_first: usize,
        row_bytes: usize,
        rows: usize,
        cols: (usize, usize, usize, usize),
        unit_bytes: usize,
    ) {
        if let Some(next) = NextTile::after(band_first, row_bytes, rows, cols, unit_bytes) {
            for line in next.lines() {
                super::transpose::prefetch_l2(src.wrapping_add(line));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_tiles_of_many_far_rows_with_a_tile_after_them() {
        // 196 rows of 8 KiB (f32 NHWC -> NCHW, C = 2048, 14 x 14), tiles of 83 channels.
        let t = NextTile::after(1000, 8192, 196, (0, 83, 83, 2048), 4).unwrap();
        assert_eq!(
            t,
            NextTile {
                first: 1000 + 83 * 4,
                row_bytes: 8192,
                rows: 196,
                bytes: 83 * 4
            }
        );
        // The last tile is shorter; nothing after it.
        let last = NextTile::after(0, 8192, 196, (83 * 23, 83, 83, 2048), 4).unwrap();
        assert_eq!(last.bytes, (2048 - 83 * 24) * 4);
        assert_eq!(
            NextTile::after(0, 8192, 196, (83 * 24, 80, 83, 2048), 4),
            None
        );
        // After a head tile of 5 units: the next starts at 5, a whole tile wide.
        let after_head = NextTile::after(0, 8192, 196, (0, 5, 83, 2048), 4).unwrap();
        assert_eq!((after_head.first, after_head.bytes), (20, 83 * 4));
        assert_eq!(
            NextTile::after(0, 8192, MIN_ROWS - 1, (0, 83, 83, 2048), 4),
            None
        );
        assert_eq!(NextTile::after(0, 1023, 196, (0, 83, 83, 2048), 4), None);
    }

    #[test]
    fn lines_cover_every_byte_of_the_next_tile_once() {
        for (first, bytes) in [(0, 64), (332, 332), (4095, 1), (100, 1000)] {
            let t = NextTile {
                first,
                row_bytes: 8192,
                rows: 3,
                bytes,
            };
            let lines: Vec<usize> = t.lines().collect();
            let mut want = Vec::new();
            for r in 0..3 {
                let s = first + r * 8192;
                for b in s..s + bytes {
                    if want.last() != Some(&(b & !63)) {
                        want.push(b & !63);
                    }
                }
            }
            assert_eq!(lines, want, "first {first} bytes {bytes}");
        }
    }
}
