//! Tiles that reverse three short loops: `dst[c][w][k] = src[k][w][c]` with `c` and `k` of 2 to
//! [`MAX_ROWS`] each, as a MACE height-major image of 3 or 4 channels is made from NHWC (each
//! block of 4 image rows `k`: source rows of `W` pixels of `C` channels, destination rows of
//! the `W` pixels' 4 lanes per channel). The tile of such a plane has 2-4 destination-
//! contiguous rows and compound source rows `(w, c)` of 3-4 units, so the transposing kernels
//! saw 4-row tiles of element-sized destination runs. Here it takes two passes through the
//! scratch tile: each source row split into its channel planes ([`deinterleave`]), then each
//! channel's `k` planes interleaved into its destination run ([`interleave`]), both whole
//! vectors. For 1- and 2-byte elements only: measured one thread, `N=84,C=4,H=224,W=224`,
//! alternating builds, i8 18% -> 52% of the copy, f16 27% -> 62% (`N=111,C=3`: 16% -> 62%,
//! 36% -> 60%), but f32 68% -> 58%, where the transposing kernels' 4-byte paths did better.

use layoutkit_core::plan::LoopDim;

use super::interleave::{deinterleave, interleave, MAX_ROWS};
use super::{AlignedBuf, Job, Scratch, SCRATCH_BYTES};

impl Job<'_> {
    /// Runs the plane `a = [w, c]` (source-contiguous, `c` innermost), `b = k`
    /// (destination-contiguous) from element `so` / `d0` as the reversal of the module docs,
    /// when it is one: an identity conversion of single elements of 1 or 2 bytes, no
    /// padding, `c` and `k` of 2..=[`MAX_ROWS`], `w` continuing `k` in the destination and
    /// `c` the `(w, k)` runs (the destination plane is one range). Returns false (nothing
    /// written) for other planes.
    pub(super) fn reverse_few(
        &self,
        so: usize,
        d0: usize,
        a_loops: &[LoopDim],
        b: LoopDim,
        (unit, pad): (usize, usize),
        scratch: &mut Scratch,
    ) -> bool {
        let e = self.cast.src.size_bytes();
        let [w, c] = a_loops else { return false };
        let (nw, nc, nk) = (w.extent, c.extent, b.extent);
        let few = |n: usize| (2..=MAX_ROWS).contains(&n);
        let shape = self.cast.is_identity()
            && unit == 1
            && pad == 0
            && matches!(e, 1 | 2)
            && few(nc)
            && few(nk)
            && c.src_stride == 1
            && w.src_stride == nc as isize
            && b.src_stride >= (nw * nc) as isize
            && w.dst_stride == nk as isize
            && c.dst_stride == (nw * nk) as isize;
        if !shape {
            return false;
        }
        let k_row = b.src_stride as usize;
        // Bounds: the last source row's end and the destination plane inside the buffers.
        assert!(
            (so + (nk - 1) * k_row + nw * nc) * e <= self.src.len()
                && (d0 + nc * nw * nk) * e <= self.dst.len,
            "a tile lies outside its buffer (plan and buffers disagree)"
        );
        // Pixels per pass: the channel planes of `nk` source rows in the scratch tile.
        let chunk = (SCRATCH_BYTES / (nk * nc * e)).min(nw).max(1);
        let buf = scratch
            .stream_buf
            .get_or_insert_with(|| AlignedBuf::zeroed(SCRATCH_BYTES));
        let planes = buf.as_mut_ptr();
        let (src, dst) = (self.src.as_ptr(), self.dst.ptr);
        let mut w0 = 0;
        while w0 < nw {
            let n = chunk.min(nw - w0);
            for k in 0..nk {
                // SAFETY: source row `k`'s pixels w0..w0+n are inside the source (asserted);
                // the planes [k][c][..n] are inside the scratch tile (nk * nc * n * e bytes).
                let done = unsafe {
                    deinterleave(
                        src.add((so + k * k_row + w0 * nc) * e),
                        planes.add(k * nc * n * e),
                        n * e,
                        n,
                        nc,
                        e,
                    )
                };
                debug_assert!(done, "a kernel for every (c, e) taken above");
            }
            for ch in 0..nc {
                // SAFETY: channel `ch`'s `nk` planes are in the scratch tile, `nc * n * e`
                // bytes apart; its destination run of pixels w0..w0+n is inside the plane
                // (asserted), which belongs to this item.
                let done = unsafe {
                    interleave(
                        planes.add(ch * n * e),
                        nc * n * e,
                        dst.add((d0 + ch * nw * nk + w0 * nk) * e),
                        n,
                        nk,
                        e,
                    )
                };
                debug_assert!(done, "a kernel for every (k, e) taken above");
            }
            w0 += n;
        }
        true
    }
}
