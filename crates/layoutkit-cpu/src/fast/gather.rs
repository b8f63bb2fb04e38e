//! Tiles too small for the transpose kernels, repeated along an outer loop: the 4 x 3 block of
//! each group of four output channels of a 1x1 filter with three input channels in MACE's filter
//! image, the 4 x 9 x I blocks of its 3x3 filters. The tile kernel pays its setup per block of a
//! dozen elements (2 of 100 bytes per byte of a copy on 64 KiB f16 filters), and its rows are
//! shorter than one vector. Here the block's element moves are listed once per work item as a
//! table of source offsets in destination order, and every repetition of the block is one pass
//! over the table: loads wherever the table says, stores in order.

use layoutkit_core::plan::{LoopDim, Region};

/// The most elements of a block moved by table.
pub(super) const MAX_BLOCK: usize = 256;

/// The longest destination run (bytes) of a tile moved by table: tiles whose rows are a whole
/// vector or more stay with the transpose kernels, but see [`MAX_FEW_ROW_BYTES`].
pub(super) const MAX_ROW_BYTES: usize = 32;

/// Rows up to this many bytes are moved by table too where the block has at most
/// [`MAX_FEW_ROWS`] of them and its destination is one range: OIHW16i16o's block of a filter
/// with three input channels is 3 rows of 16 output channels (32 bytes of f16), which the
/// transpose kernels ran at 17-18% of the copy, paying their setup per 48 elements, and the
/// table at 45-47% (f16 O=5592405,I=3,H=1,W=1, one thread, two alternating runs; f32 66-74% ->
/// 76-83%). Not where the rows are far apart (NHWC -> NCHW with C = 3 on 14 x 14 planes, 3
/// rows of 56 bytes, ran 5-10% slower by table).
const MAX_FEW_ROW_BYTES: usize = 64;

/// See [`MAX_FEW_ROW_BYTES`]. Up to four rows of 65-127 bytes that are not whole lines go by
/// table too: NHWC -> mace:in_out_channel in f16 with 16 channels on 14 x 14 planes is 4 rows
/// of 14 four-channel pixels (112 bytes) per image row, 37-39% of the copy in the transpose
/// kernels and 59-62% by table (one thread; two threads 34-36% -> 50-53%; two alternating
/// runs); rows of 128 bytes (`mace:in_out_height -> NHWC` f16 with one channel,
/// `NHWC -> mace:in_out_width` f16 with 3 and 4) ran the same or slower by table (two threads,
/// one channel: 75-80% -> 52-54%).
const MAX_FEW_ROWS: usize = 4;

// Rows longer than [`MAX_ROW_BYTES`] and shorter than a 64-byte line are moved by table too,
// however many (up to [`MAX_ROWS`]), where the block's destination is one range: MACE's 3x3
// filter image with three input channels back to OIHW is 12 rows of 9 taps (36 bytes of f32)
// per block of four output channels, which the transpose kernels ran at 28-30% of the copy
// and the table at 66-68% (f32 O=310689,I=3,H=3,W=3, one thread, two alternating runs; two
// threads 30-47% -> 52-67%); OIHW16i16o -> OIHW with one input channel (16 rows of 36 bytes)
// 93-94% -> 114-117%. Not whole vectors: rows of 64 bytes (NHWC pixels of 16 f32 channels from
// mace:in_out_channel) ran 97-111% -> 67-68% by table, of 32 bytes (f16) 67-73% -> 58-60%.

/// Rows up to this many bytes are moved by table too where the destination was filled first
/// ([`super::destination::fill_first`]): the copies are then the data rows of mostly padded
/// blocks (f16 OIHW16i16o with one input channel: 9 taps x 16 output channels of 32 bytes per
/// block), whose tiles cost more to set up than to move: one thread, alternating twice, 35-36%
/// -> 49% of the copy (O=1864135, 3x3). Not for every conversion: NCHW <-> kHWC8 in f32 (rows
/// of 8 channels, 32 bytes) ran 148-151% -> 123-131% and 91-92% -> 69-70% by table.
pub(super) const SPARSE_ROW_BYTES: usize = 32;

/// The most destination rows (positions of the tile's source-contiguous loops) of a tile moved
/// by table: longer tiles of short rows are the few-channel interleave kernels' (NHWC <->
/// mace:in_out_width with C = 3, 64 rows of 3 channels: 32% of the copy there, 27% by table).
pub(super) const MAX_ROWS: usize = 36;

/// The element moves of one block of `loops` with `unit` elements per position: `(destination
/// offset, source offset)` pairs in elements, sorted by destination offset. None when the block
/// has more than [`MAX_BLOCK`] elements, more than [`MAX_ROWS`] destination rows (the last
/// loop's runs of units), rows of [`MAX_ROW_BYTES`] or more (more than [`SPARSE_ROW_BYTES`]
/// with `sparse`: a destination filled first) unless the block's destination is one range and
/// they are at most [`MAX_FEW_ROWS`] of up to [`MAX_FEW_ROW_BYTES`] (twice that where they are
/// not whole lines) or shorter than a line (see above), or a loop with a negative stride.
pub(super) fn block_moves(
    loops: &[LoopDim],
    unit: usize,
    size: usize,
    sparse: bool,
) -> Option<Vec<(isize, isize)>> {
    let row_units = loops.last().map_or(1, |l| l.extent);
    let rows: usize = loops.iter().map(|l| l.extent).product::<usize>() / row_units.max(1);
    let count = unit * rows * row_units;
    // (Offsets from the block's start are counted from 0 up: no reversed loops.)
    let reversed = loops.iter().any(|l| l.src_stride < 0 || l.dst_stride < 0);
    let row_bytes = row_units * unit * size;
    let few_rows = rows <= MAX_FEW_ROWS
        && (row_bytes <= MAX_FEW_ROW_BYTES
            || (row_bytes <= 2 * MAX_FEW_ROW_BYTES && !row_bytes.is_multiple_of(64)));
    let mid_rows = row_bytes > MAX_ROW_BYTES && row_bytes < MAX_FEW_ROW_BYTES;
    let short = row_bytes < MAX_ROW_BYTES || (sparse && row_bytes <= SPARSE_ROW_BYTES);
    if count == 0
        || reversed
        || count > MAX_BLOCK
        || rows > MAX_ROWS
        || (!short && !few_rows && !mid_rows)
    {
        return None;
    }
    // The block as a region from offset 0 whose innermost loop is the unit's elements: each
    // run start is one position's first element.
    let mut dims = loops.to_vec();
    dims.push(LoopDim {
        extent: unit,
        src_stride: 1,
        dst_stride: 1,
    });
    let block = Region {
        src_offset: 0,
        dst_offset: 0,
        dims,
    };
    let mut moves = Vec::with_capacity(count);
    block.for_each_run(|s, d| {
        moves.extend((0..unit as isize).map(|e| (d as isize + e, s as isize + e)));
    });
    moves.sort_unstable();
    let dense = moves.iter().enumerate().all(|(j, m)| m.0 == j as isize);
    (short || dense).then_some(moves)
}

/// A block moved by table along its batch loop: the moves, and their permutes where AVX-512
/// BW and VBMI run and the block takes them ([`super::permute_blocks`]).
pub(super) struct Table {
    batch: LoopDim,
    moves: Vec<(isize, isize)>,
    #[cfg(target_arch = "x86_64")]
    permutes: Option<super::permute_blocks::Permutes>,
}

impl Table {
    /// The table of the block `loops` ([`block_moves`]) repeated along `batch`; None where the
    /// block does not go by table.
    pub(super) fn of(
        loops: &[LoopDim],
        unit: usize,
        size: usize,
        sparse: bool,
        batch: LoopDim,
    ) -> Option<Table> {
        let moves = block_moves(loops, unit, size, sparse)?;
        Some(Table {
            batch,
            #[cfg(target_arch = "x86_64")]
            permutes: super::transpose::avx512_builds()
                .then(|| super::permute_blocks::Permutes::of(&moves, size))
                .flatten(),
            moves,
        })
    }

    /// Moves every repetition from source element `at.0` and destination element `at.1` on,
    /// elements of `size` bytes (as [`move_blocks`]).
    pub(super) fn run(&self, src: &[u8], dst: &mut [u8], at: (isize, isize), size: usize) {
        #[cfg(target_arch = "x86_64")]
        if let Some(p) = &self.permutes {
            // SAFETY: AVX-512 F, BW and VBMI present (`avx512_builds`, checked in `of`).
            unsafe { p.run(src, dst, at, self.batch) };
            return;
        }
        match size {
            1 => move_blocks::<1>(src, dst, at, self.batch, &self.moves),
            2 => move_blocks::<2>(src, dst, at, self.batch, &self.moves),
            4 => move_blocks::<4>(src, dst, at, self.batch, &self.moves),
            _ => move_blocks::<8>(src, dst, at, self.batch, &self.moves),
        }
    }
}

/// Moves the block `moves` (from [`block_moves`]) `batch.extent` times: repetition `b` from
/// source element `so + b * batch.src_stride` to destination element `d0 + b *
/// batch.dst_stride`, elements of `N` bytes.
///
/// Panics unless every element moved lies inside `src` and `dst` (checked once per call from
/// the block's extreme offsets, not per element).
pub(super) fn move_blocks<const N: usize>(
    src: &[u8],
    dst: &mut [u8],
    (so, d0): (isize, isize),
    batch: LoopDim,
    moves: &[(isize, isize)],
) {
    if batch.extent == 0 || moves.is_empty() {
        return;
    }
    // The lowest and highest element any repetition touches, on each side.
    let span = |base: isize, stride: isize, lo: isize, hi: isize| {
        let last = base + (batch.extent as isize - 1) * stride;
        (base.min(last) + lo, base.max(last) + hi)
    };
    let (s_lo, s_hi) = span(
        so,
        batch.src_stride,
        moves.iter().map(|m| m.1).min().unwrap_or(0),
        moves.iter().map(|m| m.1).max().unwrap_or(0),
    );
    let (d_lo, d_hi) = span(d0, batch.dst_stride, moves[0].0, moves[moves.len() - 1].0);
    assert!(s_lo >= 0 && (s_hi as usize + 1) * N <= src.len());
    assert!(d_lo >= 0 && (d_hi as usize + 1) * N <= dst.len());
    let (sp, dp) = (src.as_ptr(), dst.as_mut_ptr());
    // Destination offsets 0, 1, 2, ...: the stores walk the block in order.
    let dense = moves.iter().enumerate().all(|(j, m)| m.0 == j as isize);
    for b in 0..batch.extent as isize {
        let (s, d) = (so + b * batch.src_stride, d0 + b * batch.dst_stride);
        // SAFETY: every `s + sm` and `d + dm` lies within the extremes asserted above, inside
        // `src` and `dst` (N bytes each); unaligned reads and writes of [u8; N].
        unsafe {
            let (sb, db) = (sp.offset(s * N as isize), dp.offset(d * N as isize));
            if dense {
                for (j, &(_, sm)) in moves.iter().enumerate() {
                    let v = sb
                        .offset(sm * N as isize)
                        .cast::<[u8; N]>()
                        .read_unaligned();
                    db.add(j * N).cast::<[u8; N]>().write_unaligned(v);
                }
            } else {
                for &(dm, sm) in moves {
                    let v = sb
                        .offset(sm * N as isize)
                        .cast::<[u8; N]>()
                        .read_unaligned();
                    db.offset(dm * N as isize)
                        .cast::<[u8; N]>()
                        .write_unaligned(v);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::fast::loop_dim as l;

    #[test]
    fn the_moves_of_a_block_are_its_elements_in_destination_order() {
        // MACE's 1x1 filter image with I = 3: i (3: source 1, destination 4), k (4: 3, 1).
        let moves = block_moves(&[l(3, 1, 4), l(4, 3, 1)], 1, 2, false).unwrap();
        let want: Vec<(isize, isize)> = (0..12).map(|d| (d, (d % 4) * 3 + d / 4)).collect();
        assert_eq!(moves, want);
        // Units of 2 elements.
        let moves = block_moves(&[l(2, 2, 4), l(2, 4, 2)], 2, 1, false).unwrap();
        assert_eq!(
            moves,
            vec![
                (0, 0),
                (1, 1),
                (2, 4),
                (3, 5),
                (4, 2),
                (5, 3),
                (6, 6),
                (7, 7)
            ]
        );
        // Rows of a whole vector apart from each other, or too many elements: not by table.
        assert!(block_moves(&[l(3, 1, 64), l(16, 3, 1)], 1, 4, false).is_none());
        assert!(
            block_moves(&[l(3, 1, 12), l(8, 3, 1)], 1, 4, false).is_none(),
            "32-byte rows with gaps"
        );
        assert!(
            block_moves(&[l(3, 1, 4), l(4, 3, 1)], 1, 4, false).is_some(),
            "16-byte rows"
        );
        assert!(block_moves(&[l(100, 1, 3), l(3, 100, 1)], 1, 1, false).is_none());
        assert!(
            block_moves(&[l(64, 1, 3), l(3, 64, 1)], 1, 4, false).is_none(),
            "64 rows"
        );
        assert!(block_moves(&[l(9, 1, 12), l(3, 9, 4), l(4, 27, 1)], 1, 2, false).is_some());
        // A few rows of up to 64 bytes whose destination is one range: OIHW16i16o's block of a
        // filter with I = 3 (i: source 1, destination 16; o: 3, 1), f16 and f32.
        let moves = block_moves(&[l(3, 1, 16), l(16, 3, 1)], 1, 2, false).unwrap();
        let want: Vec<(isize, isize)> = (0..48).map(|d| (d, (d % 16) * 3 + d / 16)).collect();
        assert_eq!(moves, want);
        assert!(block_moves(&[l(3, 1, 16), l(16, 3, 1)], 1, 4, false).is_some());
        // ... not 5 rows, rows over 64 bytes, or rows far apart in the destination.
        assert!(block_moves(&[l(5, 1, 16), l(16, 5, 1)], 1, 2, false).is_none());
        assert!(block_moves(&[l(3, 1, 32), l(32, 3, 1)], 1, 4, false).is_none());
        assert!(block_moves(&[l(3, 1, 196), l(14, 3, 1)], 1, 4, false).is_none());
    }

    #[test]
    fn blocks_move_as_the_definition_says() {
        let moves = block_moves(&[l(3, 1, 4), l(4, 3, 1)], 1, 4, false).unwrap();
        let src: Vec<u8> = (0..5 * 12 * 4).map(|i| i as u8).collect();
        let mut dst = vec![0u8; 5 * 16 * 4];
        // Five blocks, 12 elements apart in the source, 16 in the destination.
        move_blocks::<4>(&src, &mut dst, (0, 0), l(5, 12, 16), &moves);
        for b in 0..5 {
            for (dm, sm) in &moves {
                let (s, d) = ((b * 12 + sm) as usize * 4, (b * 16 + dm) as usize * 4);
                assert_eq!(dst[d..d + 4], src[s..s + 4]);
            }
            let gap = (b * 16 + 12) as usize * 4;
            assert!(dst[gap..gap + 16].iter().all(|&v| v == 0));
        }
    }

    /// Rows of 32 bytes go by table only where the destination was filled first: a block of
    /// f16 OIHW16i16o with one input channel (9 taps x 16 output channels).
    #[test]
    fn rows_of_32_bytes_by_table_only_in_filled_destinations() {
        let l = |extent, src_stride, dst_stride| LoopDim {
            extent,
            src_stride,
            dst_stride,
        };
        let block = [l(9, 1, 256), l(16, 9, 1)];
        assert!(block_moves(&block, 1, 2, false).is_none());
        let moves = block_moves(&block, 1, 2, true).unwrap();
        assert_eq!(moves.len(), 144);
        assert_eq!((moves[0], moves[1], moves[16]), ((0, 0), (1, 9), (256, 1)));
        // Rows of 64 bytes stay with the tiles either way.
        assert!(block_moves(&[l(9, 1, 256), l(32, 9, 1)], 1, 2, true).is_none());
    }
}
