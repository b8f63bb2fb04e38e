//! Lane blocks into records of 2-4 lanes with every lane data, in two passes through cache:
//! the lanes' rows interleaved into records ([`interleave`], `[m][x][lanes]`), then the
//! records transposed as units of `lanes` elements into the destination (`[x][m]` records).
//! The block transposition of [`super`] reads each record lane by lane from its own source
//! row: a MACE 3 x 3 filter image from OIHW with 16 input channels is a block of 64
//! (pixel, lane) rows of 9 taps each, moved 2 bytes at a time.
//!
//! Measured on a Zen 4 (one thread, alternated three times, `bench/results/sweep.md`): f16
//! `OIHW -> mace:conv2d_filter` 32 MiB 1.47-1.55x (I = 16 0.19 -> 0.31 of the copy), every
//! height-major and filter image under 1 MiB 1.19x by geometric mean (up to 2.3x); f32 into
//! streamed destinations 0.95x (0.67-0.83x on five rows), so 4-byte elements take this only
//! where the destination stays in cache.

use super::super::interleave::{interleave, MAX_ROWS};
use super::super::transpose::{transpose_rows_dyn, Strided};
use super::{LaneBlock, LaneDir};
use crate::fast::Job;

impl Job<'_> {
    /// Channels `x0..x0 + nx`, pixels `m0..m0 + n` of block `b` (into lane records, from
    /// source element `so` and destination element `d0`) as the module docs say, through
    /// `planes` and (where the destination is not written in place, as
    /// [`Job::direct_rows`] decides) `out`; false (nothing written) where the chunk is not
    /// every channel, a record has padding lanes or other than 2-4 lanes, or the buffers
    /// do not hold it.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn lanes_in_records(
        &self,
        so: usize,
        d0: usize,
        b: LaneBlock,
        (x0, nx, m0, n): (usize, usize, usize, usize),
        out: &mut [u8],
        planes: &mut [u8],
    ) -> bool {
        let e = self.cast.src.size_bytes();
        let (r, x) = (b.r, b.x);
        let unit = r * e;
        let bytes = n * x * unit;
        if b.dir != LaneDir::In
            || r != b.lanes
            || !(2..=MAX_ROWS).contains(&r)
            || x0 != 0
            || nx != x
            || !matches!(unit, 4 | 8 | 16 | 32)
            || bytes > planes.len()
            || bytes > out.len()
            || (e > 2 && self.stream)
        {
            return false;
        }
        // The chunk's n pixels of every channel are one run in each lane's source row.
        let src = self.src.as_ptr().wrapping_add((so + m0 * x) * e);
        // SAFETY: lane k's run of n * x elements, b.m * x elements after lane k - 1's, inside
        // the block's source (checked by `lane_block`); `planes` holds the n * x records.
        if !unsafe { interleave(src, b.m * x * e, planes.as_mut_ptr(), n * x, r, e) } {
            return false;
        }
        // Destination byte offset of channel c's records m0...
        let at = |c: usize| (d0 + c * b.xs + m0 * r) * e;
        let direct = self.direct_rows(at(0), b.xs * e);
        let len = n * unit;
        let (row_ptr, row) = if direct {
            (self.dst.ptr.wrapping_add(at(0)), b.xs * e)
        } else {
            (out.as_mut_ptr(), len)
        };
        let rows = Strided {
            src: planes.as_ptr(),
            src_row: x * unit,
            dst: row_ptr,
            dst_row: row,
            na: x,
            nb: n,
        };
        // SAFETY: source rows are the n pixels' x records in `planes`; destination rows the
        // x channels' n records, in the destination (inside the block's, checked by
        // `lane_block`, and this item's) or in `out` (x * len = bytes <= out.len()).
        unsafe { transpose_rows_dyn(rows, unit, direct && self.stream) };
        if direct {
            return true;
        }
        let dst = self.dst.slice();
        if n == b.m && b.xs == b.m * r {
            self.out_copy(&mut dst[at(0)..at(0) + x * len], &out[..x * len]);
        } else {
            for c in 0..x {
                self.out_copy(&mut dst[at(c)..at(c) + len], &out[c * len..(c + 1) * len]);
            }
        }
        true
    }
}
