//! What the x86-64 kernels ask for ahead of their loads ([`Prefetch`]), and the order they
//! walk a tile's blocks in ([`blocks`]).

use super::super::Rows;
use std::arch::x86_64::*;

/// What a tile asks for ahead of its loads (`prefetcht1`).
///
/// Along the rows (the usual case): each source row's data a fixed distance past the block
/// being read; the next blocks along the destination rows read it, and source rows visited a
/// block at a time defeat the hardware prefetchers. 256 bytes where the rows are far apart
/// (NCHW's channel rows); one line where they are under a page apart (pixels, image rows), so
/// the request stays inside a short row instead of landing on the next row, which the same
/// block reads anyway (measured, one thread: f16 NHWC -> mace:in_out_channel N=16,H=96,W=96,
/// C=128 68% -> 95% of the copy going from 256 to 128 bytes, C=250 65% -> 82%, f16 NHWC ->
/// NCHW 77% -> 85%; from 128 to 64 bytes, in one process alternating both: f32 NHWC -> NCHW
/// N=16,C=256,H=96,W=96 1-8% faster, f16 mace C=250 7%, f32 -> i8 NHWC -> NCHW 3-5%, none
/// slower; 128 for far rows too made f32 -> f16 NCHW -> NCHW32c 8% slower, 512 and 1024
/// measured no better than 256).
///
/// And the next band: where a tile's source rows lie back to back (NHWC's pixels, a MACE
/// image's pixel rows), the walker gives each tile of a band of rows a share of the lines of
/// the band after it ([`Rows::ahead`]), which the tile asks for a few at a time, spread
/// evenly over its blocks: the memory then sees one sequential stream instead of a line from
/// each of a hundred rows (measured, one thread: f16 NHWC -> mace:in_out_channel
/// N=16,H=96,W=96, C=250 8.9-9.6 -> 6.7-6.8 ms, C=128 3.9 -> 2.9 ms, f32 C=250 13.4 -> 10.6
/// ms; NHWC -> NCHW N=16,C=256,H=96,W=96 f16 7.1-7.4 -> 6.2-6.3 ms, f32 within noise; five
/// to eight alternating rounds).
///
/// Where the tile is walked along its source rows (compound rows, OIHW16i16o: each of 16
/// rows read sequentially, a few hundred bytes per tile), 1 KiB ahead along each row: the
/// hardware prefetchers alone fall behind on 16 streams (measured in one process alternating
/// both, OIHW -> OIHW16i16o O=4096,I=1024,H=3,W=3: f16 one thread 8.1-9.1 -> 6.3-7.0 ms, two
/// threads 5.7-5.9 -> 5.1-5.2 ms; f32 one thread 12.6-13.3 -> 11.6-13.3 ms, two threads
/// 8.1-9.1 -> 7.4-8.2 ms; 256, 512 and 2048 bytes measured no better).
#[derive(Clone, Copy)]
pub(crate) struct Prefetch {
    /// Bytes ahead along each source row (0: none).
    row_ahead: usize,
    /// The tile's share of the next band: its first line and how many (0: none).
    next: *const u8,
    next_lines: usize,
}

impl Prefetch {
    /// Along the rows, at the distance for `r`'s rows.
    #[inline]
    pub(crate) fn for_rows<R: Rows>(r: &R) -> Prefetch {
        if !r.prefetched() {
            return Prefetch {
                row_ahead: 0,
                next: std::ptr::null(),
                next_lines: 0,
            };
        }
        let row_ahead = match (r.src_major(), r.src_rows_close()) {
            (true, _) => 1024,
            (false, true) => 64,
            (false, false) => 256,
        };
        Prefetch {
            row_ahead,
            next: std::ptr::null(),
            next_lines: 0,
        }
    }

    /// As [`Prefetch::for_rows`], and the tile's share of the next band ([`Rows::ahead`]).
    #[inline]
    pub(crate) fn for_tile<R: Rows>(r: &R) -> Prefetch {
        let (next, next_lines) = if r.prefetched() {
            r.ahead()
        } else {
            (std::ptr::null(), 0)
        };
        Prefetch {
            next,
            next_lines,
            ..Prefetch::for_rows(r)
        }
    }

    /// Asks for the data this distance after `p` along its row (a prefetch never faults, so
    /// addresses past the buffer are harmless).
    #[inline(always)]
    pub(crate) fn ahead_of(self, p: *const u8) {
        if self.row_ahead > 0 {
            // SAFETY: a prefetch is a hint with no architectural effect; SSE is part of x86-64.
            unsafe { _mm_prefetch::<_MM_HINT_T1>(p.wrapping_add(self.row_ahead) as *const i8) };
        }
    }

    /// The tile's share of the next band spread over `count` blocks: calling the result
    /// before each block asks for that block's part.
    #[inline(always)]
    pub(crate) fn band_share(self, count: usize) -> impl FnMut() {
        let (mut owed, mut line) = (0, 0);
        move || {
            owed += self.next_lines;
            while count > 0 && owed >= count {
                owed -= count;
                let p = self.next.wrapping_add(line * 64);
                // SAFETY: a prefetch is a hint (never faults); SSE is part of x86-64.
                unsafe { _mm_prefetch::<_MM_HINT_T1>(p as *const i8) };
                line += 1;
            }
        }
    }

    /// The starts `(a, b)` of the tile's `sa x sb` blocks over rows `..na`, columns `..nb`
    /// (multiples of the block), walked along the source rows (`b` outermost) when
    /// `r.src_major()`, else along the destination rows; before each block, its share of the
    /// next band is asked for.
    #[inline(always)]
    pub(super) fn blocks<R: Rows>(
        self,
        r: &R,
        na: (usize, usize),
        nb: (usize, usize),
    ) -> impl Iterator<Item = (usize, usize)> {
        self.blocks_in(r.src_major(), na, nb)
    }

    /// As [`Prefetch::blocks`], walked along the source rows when `src_major`, whatever the
    /// tile's rows say (kernels that read a whole source line per block).
    #[inline(always)]
    pub(crate) fn blocks_in(
        self,
        src_major: bool,
        (na, sa): (usize, usize),
        (nb, sb): (usize, usize),
    ) -> impl Iterator<Item = (usize, usize)> {
        // `owed / count` lines are due: `next_lines` over the `count` blocks, evenly.
        let mut share = self.band_share((na / sa) * (nb / sb));
        blocks(src_major, (na, sa), (nb, sb)).inspect(move |_| share())
    }
}

/// The starts `(a, b)` of a tile's `sa x sb` blocks over rows `..na`, columns `..nb`
/// (multiples of the block), walked along the source rows (`b` outermost) when `src_major`,
/// else along the destination rows.
#[inline(always)]
pub(super) fn blocks(
    src_major: bool,
    (na, sa): (usize, usize),
    (nb, sb): (usize, usize),
) -> impl Iterator<Item = (usize, usize)> {
    let (no, so, ni, si) = if src_major {
        (nb, sb, na, sa)
    } else {
        (na, sa, nb, sb)
    };
    (0..no).step_by(so).flat_map(move |o| {
        (0..ni)
            .step_by(si)
            .map(move |i| if src_major { (i, o) } else { (o, i) })
    })
}
