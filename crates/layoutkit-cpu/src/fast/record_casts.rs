//! Records with a cast: one channel into padded records (NCHW32c, kHWC8, `NCHW<x>c`, a MACE
//! image's lanes) and back, where the element type changes on the way. The record kernels of
//! [`super::records`] move bytes; here pieces of the source are cast whole (the vectorised run
//! kernels) through a scratch buffer on one side of them.

use super::{records, AlignedBuf, Job, Scratch, TileBuf, SCRATCH_BYTES, TILE_BYTES};

impl Job<'_> {
    /// `count` units of `unit` elements back to back in the source from element `so`, each
    /// written cast, followed by `pad` (fill bytes), as records back to back in the
    /// destination from element `d0` (one channel into NCHW32c with a quantising cast): pieces
    /// of the source cast whole (vectorised) into a scratch buffer, then expanded into records
    /// by [`records::expand_streamed`]. Returns false (nothing written) when no records kernel
    /// has these sizes.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn cast_records(
        &self,
        so: usize,
        d0: usize,
        count: usize,
        unit: usize,
        pad: &[u8],
        dst: &mut [u8],
        scratch: &mut Scratch,
    ) -> bool {
        let (ss, ds) = (self.cast.src.size_bytes(), self.cast.dst.size_bytes());
        let (data, out) = (unit * ds, unit * ds + pad.len());
        let Scratch {
            bufs, stream_buf, ..
        } = scratch;
        let bufs = bufs
            .get_or_insert_with(|| Box::new([TileBuf([0; TILE_BYTES]), TileBuf([0; TILE_BYTES])]));
        let casted = &mut bufs[0].0;
        let stream = stream_buf.get_or_insert_with(|| AlignedBuf::zeroed(SCRATCH_BYTES));
        let per = (TILE_BYTES / data).max(1);
        let mut r = 0;
        while r < count {
            let m = per.min(count - r);
            let s = (so + r * unit) * ss;
            let piece = &mut casted[..m * data];
            (self.run)(&self.src[s..s + m * unit * ss], piece, m * unit, &self.cast);
            let d = d0 * ds + r * out;
            if !records::expand_streamed(
                piece,
                &mut dst[d..d + m * out],
                (data, out),
                pad,
                (stream, self.stream),
            ) {
                // Sizes without a kernel fail on the first piece, before anything is written.
                debug_assert_eq!(r, 0);
                return false;
            }
            r += m;
        }
        true
    }

    /// The inverse of [`Job::cast_records`] without padding: `count` units of `unit` elements,
    /// `stride` elements apart in the source from `so`, written cast back to back from `d0`
    /// (NCHW32c's one-channel records back to planes with a cast): pieces gathered by
    /// [`records::compact`] into a scratch buffer, then cast whole. Returns false (nothing
    /// written) when no records kernel has these sizes.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn compact_cast(
        &self,
        so: usize,
        d0: usize,
        count: usize,
        unit: usize,
        stride: usize,
        dst: &mut [u8],
        scratch: &mut Scratch,
    ) -> bool {
        let (ss, ds) = (self.cast.src.size_bytes(), self.cast.dst.size_bytes());
        let (data, step) = (unit * ss, stride * ss);
        let bufs = scratch
            .bufs
            .get_or_insert_with(|| Box::new([TileBuf([0; TILE_BYTES]), TileBuf([0; TILE_BYTES])]));
        let packed = &mut bufs[0].0;
        let per = (TILE_BYTES / data).max(1);
        let mut r = 0;
        while r < count {
            let m = per.min(count - r);
            let s = so * ss + r * step;
            let src = &self.src[s..s + (m - 1) * step + data];
            if !records::compact(src, &mut packed[..m * data], m, data, step) {
                debug_assert_eq!(r, 0);
                return false;
            }
            let d = (d0 + r * unit) * ds;
            (self.run)(
                &packed[..m * data],
                &mut dst[d..d + m * unit * ds],
                m * unit,
                &self.cast,
            );
            r += m;
        }
        true
    }
}
