//! The lane blocks' output copies and their element-by-element fallback (see
//! [`super`]).

use super::{LaneBlock, LaneDir};
use crate::fast::Job;

impl Job<'_> {
    /// Copies `runs` runs of equal length, back to back in `out`, to the destination runs
    /// `step` bytes apart from destination byte `at` (`whole`: they are back to back there
    /// too, one copy), streamed past the cache where the job streams.
    pub(super) fn lane_runs_out(
        &self,
        out: &[u8],
        at: usize,
        step: usize,
        runs: usize,
        whole: bool,
    ) {
        let dst = self.dst.slice();
        if whole || runs == 1 {
            self.out_copy(&mut dst[at..at + out.len()], out);
            return;
        }
        let len = out.len() / runs;
        for (i, piece) in out.chunks_exact(len).enumerate() {
            let d = at + i * step;
            self.out_copy(&mut dst[d..d + len], piece);
        }
    }

    /// Whether a chunk's destination rows, `row_bytes` apart from destination byte `at`, are
    /// written straight into the destination: where it stays in cache (no streaming), or where
    /// the rows start on 64-byte lines and can be streamed whole.
    pub(super) fn direct_rows(&self, at: usize, row_bytes: usize) -> bool {
        !self.stream
            || ((self.dst.ptr as usize + at).is_multiple_of(64) && row_bytes.is_multiple_of(64))
    }

    /// The block element by element (the source's last records are not whole).
    pub(super) fn lane_block_elements(&self, so: usize, d0: usize, b: LaneBlock) {
        let e = self.cast.src.size_bytes();
        let dst = self.dst.slice();
        for c in 0..b.x {
            for p in 0..b.m {
                for k in 0..b.lanes {
                    let (s, d) = match b.dir {
                        LaneDir::Out if k < b.r => (
                            Some(so + c * b.xs + p * b.lanes + k),
                            d0 + (k * b.m + p) * b.x + c,
                        ),
                        LaneDir::Out => continue,
                        LaneDir::In => (
                            (k < b.r).then(|| so + (k * b.m + p) * b.x + c),
                            d0 + c * b.xs + p * b.lanes + k,
                        ),
                    };
                    let out = &mut dst[d * e..(d + 1) * e];
                    match s {
                        Some(s) => out.copy_from_slice(&self.src[s * e..(s + 1) * e]),
                        None => out.copy_from_slice(&self.fill[..e]),
                    }
                }
            }
        }
    }
}
