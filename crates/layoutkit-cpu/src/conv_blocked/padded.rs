//! The zero-padded blocked copy of the activations that padded filters read: its geometry,
//! and one padded line at a time, so the copy can be made whole (before the tiles run) or a
//! band of rows at a time inside a work item (the band then stays in L2 for the tiles, and
//! the padded tensor is never written to memory).

use super::packing::{copy_row, Source};

/// The padded layout `N, C/b, H + 2 * ph, W + 2 * pw, b` with `b = lanes` (the channels as
/// they are when `C < lanes`, so a 3-channel first layer is not padded to 16 channels).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Padded {
    pub c: usize,
    pub h: usize,
    pub w: usize,
    pub ph: usize,
    pub pw: usize,
    /// Channels per block.
    pub blk: usize,
    /// Channel blocks.
    pub ncb: usize,
    /// Padded rows.
    pub hp: usize,
    /// Padded columns.
    pub wp: usize,
}

impl Padded {
    /// The geometry for activations of extents `[n, c, h, w]` and `padding`.
    pub(crate) fn new(dims: [usize; 4], padding: [usize; 2], lanes: usize) -> Padded {
        let [_, c, h, w] = dims;
        let [ph, pw] = padding;
        let blk = if c >= lanes { lanes } else { c.max(1) };
        Padded {
            c,
            h,
            w,
            ph,
            pw,
            blk,
            ncb: c.div_ceil(blk),
            hp: h + 2 * ph,
            wp: w + 2 * pw,
        }
    }

    /// Floats per padded line (one row of one channel block).
    pub(crate) fn line(&self) -> usize {
        self.wp * self.blk
    }

    /// Offsets of the channels from a pixel's address when the channel blocks lie `plane`
    /// floats apart.
    pub(crate) fn chan(&self, plane: usize) -> Vec<usize> {
        (0..self.c)
            .map(|ci| (ci / self.blk) * plane + ci % self.blk)
            .collect()
    }

    /// Writes padded line `li` (`0..hp`) of channel block `cb` of image `ni` of `src` into
    /// `line` (`self.line()` floats): zero in the padding rows and columns and in the lanes
    /// past C, the source's values elsewhere.
    pub(crate) fn fill_line(
        &self,
        src: &Source<'_>,
        ni: usize,
        cb: usize,
        li: usize,
        line: &mut [f32],
    ) {
        let (blk, pw, w) = (self.blk, self.pw, self.w);
        let c0 = cb * blk;
        let count = blk.min(self.c - c0);
        if li < self.ph || li >= self.ph + self.h {
            line.fill(0.0);
            return;
        }
        if count < blk {
            line.fill(0.0);
        } else {
            line[..pw * blk].fill(0.0);
            line[(pw + w) * blk..].fill(0.0);
        }
        let drow = &mut line[pw * blk..][..w * blk];
        let sbase = ni * src.sn + (li - self.ph) * src.sh;
        copy_row(src, sbase, c0, count, blk, w, 1, drow);
    }
}
