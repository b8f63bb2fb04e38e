//! The blocked copy of the activations that padded filters read (zero borders), or that
//! strided 1x1 filters read (every stride-th pixel only): its geometry, and one line at a
//! time, so the copy can be made whole (before the tiles run) or a band of rows at a time
//! inside a work item (the band then stays in L2 for the tiles, and the copy is never written
//! to memory whole).

use super::packing::{copy_row, Source};

/// The copy's layout `N, C/b, HP, WP, b` with `b = lanes` (the channels as they are when
/// `C < lanes`, so a 3-channel first layer is not padded to 16 channels): line `li`, column `q`
/// hold source pixel `(li * step[0] - ph, q * step[1] - pw)` where that lies inside the
/// source, zero elsewhere; `HP = (H + 2 * ph - 1) / step[0] + 1` and likewise `WP` (with
/// steps of 1, `H + 2 * ph` by `W + 2 * pw`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Padded {
    pub c: usize,
    pub h: usize,
    pub w: usize,
    pub ph: usize,
    pub pw: usize,
    /// Source rows and columns per copied line and column.
    pub step: [usize; 2],
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
    /// The geometry for activations of extents `[n, c, h, w]` (`h`, `w` >= 1), `padding`
    /// and `step`.
    pub(crate) fn new(
        dims: [usize; 4],
        padding: [usize; 2],
        step: [usize; 2],
        lanes: usize,
    ) -> Padded {
        let [_, c, h, w] = dims;
        let [ph, pw] = padding;
        let blk = if c >= lanes { lanes } else { c.max(1) };
        Padded {
            c,
            h,
            w,
            ph,
            pw,
            step,
            blk,
            ncb: c.div_ceil(blk),
            hp: (h + 2 * ph - 1) / step[0] + 1,
            wp: (w + 2 * pw - 1) / step[1] + 1,
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
        let (blk, [sr, sc]) = (self.blk, self.step);
        let c0 = cb * blk;
        let count = blk.min(self.c - c0);
        let row = li * sr;
        if row < self.ph || row >= self.ph + self.h {
            line.fill(0.0);
            return;
        }
        // Columns q whose source column q * sc - pw lies in 0..w.
        let q0 = self.pw.div_ceil(sc);
        let q1 = ((self.w - 1 + self.pw) / sc + 1).min(self.wp);
        if count < blk {
            line.fill(0.0);
        } else {
            line[..q0 * blk].fill(0.0);
            line[q1 * blk..].fill(0.0);
        }
        let drow = &mut line[q0 * blk..q1 * blk];
        let sbase = ni * src.sn + (row - self.ph) * src.sh + (q0 * sc - self.pw) * src.sw;
        copy_row(src, sbase, c0, count, blk, q1 - q0, sc, drow);
    }
}
