//! Tiles that fill the GPU's waves of blocks (the TMA kernel's 192 x 128, 128 x 192, 64 x 256
//! and 64 x 192) where the rule's tile leaves the last wave mostly empty.
//!
//! Output tile counts of convolutions are often a multiple of 49 (a 14 x 14 or 7 x 7 plane, or
//! 28 x 28 at batch 16 and more, divided into 256- or 128-row tiles): 98 or 196 tiles on 132
//! SMs run in waves 74% full, and the [`super::hopper_plan`] rule takes such tiles (70% or more
//! is its threshold for the widest tiles, which win there by their efficiency per tile). A
//! 192-row tile divides the same pixels into a third more tiles: 132 or 264 there, whole waves.
//! Tiles fitted to other counts do the same for other layers: 7 x 7 planes at batch 64 (3136
//! pixels) make 208 tiles of 256 x 128 for 2048 output channels (1.58 waves) and 392 of 64 x
//! 256 (2.97), and 125 of 128 x 192 for 960 (one wave).

use super::hopper::HopperTile;
use super::{ConvKernel, ConvLayout};

impl HopperTile {
    /// Whether the kernel's loads cover the tile: by TMA any tile; by every thread (8 chunks
    /// of a row per 8 threads) only where the rows of A and B are whole passes of the threads
    /// (not for the three warpgroups of a 192-row tile) and `bn` is a multiple of 32 (the
    /// `cp.async` kernel's column blocks; the TMA kernel takes multiples of 16, e.g. 112).
    pub fn loads_fit(&self) -> bool {
        let step = self.threads() / 8;
        self.tma
            || (self.bm.is_multiple_of(step)
                && self.bn.is_multiple_of(step)
                && self.bn.is_multiple_of(32))
    }
}

/// The fill under which the rule's tile gives way to a tile filling at least this.
pub const WAVE_FILL: f64 = 0.9;

/// The tiles [`fuller_wave_tile`] tries, in order (rows, columns; four stages, TMA): the
/// 192-row tile of three warpgroups, then tiles fitted to other counts of pixels and output
/// channels (192 and 256 columns: one warpgroup's 64 rows holds 96 or 128 sums per thread).
const FULLER_TILES: [(usize, usize); 4] = [(192, 128), (128, 192), (64, 256), (64, 192)];

/// The share of a tile's block slots over its waves that hold useful outputs: the block-slot
/// fill ([`HopperTile::fill`]) times the share of the tiles' rows and columns inside the output
/// (a 256-column tile over 960 channels computes 64 columns of zeros in its last tile).
fn useful_fill(t: &HopperTile, s: &super::ConvShape) -> f64 {
    let (x, y) = t.tiles(s);
    let m = s.n * s.oh * s.ow;
    t.fill(s) * (m * s.o) as f64 / (x * t.bm * y * t.bn) as f64
}

/// A TMA tile of `FULLER_TILES` (the first that fits) for `kernel` where the rule's `chosen`
/// tile (with its splits of K) fills less than [`WAVE_FILL`] of the GPU's block slots over its
/// waves and the other, unsplit, fills at least that with useful outputs (`useful_fill`);
/// None otherwise, where O is under 128 (a 128-column tile would compute zeros), and other
/// than by the 192-row tile for a requantised int8 output or an output not in NHWC (not
/// measured). A tile other than the 192-row one
/// walks its tiles in persistent blocks where it has more tiles than the GPU holds at once.
///
/// Measured on an H100 (every NHWC layer of three networks at batch 32 and 64, the 192 x 128
/// tile forced against the rule's tiles, GPU time; `bench/results/conv.md`): on the 16
/// layer-and-batch pairs the 192-row tile takes (8 at each batch; the rule's tile filled
/// 74-76%), 1.06-1.27x the rule's tile (`l4 1x1 1024->512 @14` 1.15 / 1.13 at batch 64 / 32,
/// `vgg conv5_1` 1.18 / 1.09, `l2 3x3/2 128->128 @56` 1.19 / 1.27); where both tiles filled 99%
/// it ran 0.90-1.10x the rule's tile, and where it filled less than the rule's tile 0.67-0.87x.
/// The others: forced on an H100 on the 1x1 layers whose tiles fill the last wave worst, then
/// this rule against the one before it on an H200, alternated twice (`wave_tiles.sh`,
/// `wave_ab.sh`): `l4 1x1 512->2048 @7` and `l4 1x1/2 1024->2048 @14` at batch 64 (208 tiles of
/// 256 x 128 fill 79% of two waves; 392 of 64 x 256, 99% of three) f16 1.13x and int8 with i32
/// sums 1.09-1.15x with 64 x 256 in persistent blocks (1.07x without them on the H100),
/// requantised int8 0.90-0.95x (hence its exclusion); `pw 1x1 160->960 @7` (the `cp.async`
/// kernel's 128 x 128 before) 1.19x / 1.26x / 1.43x / 1.15x at batch 32 / 64 / 96 / 128 (64 x
/// 192, 128 x 192, 64 x 192 persistent, 192 x 128); where the forced tiles filled less than the
/// rule's (the same layers at batch 32) they ran 0.72-0.90x, and the rule keeps its tile there.
///
/// Contract: [`super::tma_applies`] holds for `kernel`.
pub fn fuller_wave_tile(kernel: &ConvKernel, chosen: &HopperTile) -> Option<HopperTile> {
    let s = &kernel.shape;
    if s.o < 128 || chosen.fill(s) >= WAVE_FILL {
        return None;
    }
    FULLER_TILES.iter().find_map(|&(bm, bn)| {
        if bm != 192 && (super::requantised(kernel) || kernel.out_layout != ConvLayout::Nhwc) {
            return None;
        }
        let t = HopperTile::new(bm, bn, 4)?.with_tma(true)?;
        if useful_fill(&t, s) < WAVE_FILL {
            return None;
        }
        let (x, y) = t.tiles(s);
        if bm == 192 || x * y <= super::SMS * t.resident() {
            return Some(t);
        }
        Some(t.with_persistent(kernel).unwrap_or(t))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conv::hopper_plan_with;
    use layoutkit_core::DType;

    fn kernel(n: usize, c: usize, hw: usize, o: usize, k: usize) -> ConvKernel {
        crate::conv::test_kernel(n, c, hw, o, k, DType::F16)
    }

    #[test]
    fn tiles_of_16_column_multiples_load_by_tma_only() {
        let t = HopperTile::new(64, 112, 4).expect("64 x 112");
        assert!(!t.loads_fit());
        assert!(t.with_tma(true).expect("by TMA").loads_fit());
        assert!(HopperTile::new(128, 208, 4).is_some());
        assert!(HopperTile::new(64, 104, 4).is_none());
        assert!(HopperTile::new(64, 16, 4).is_none());
    }

    #[test]
    fn a_192_row_tile_takes_the_layers_whose_last_wave_is_mostly_empty() {
        // ResNet-50's 14 x 14 layers at batch 64: 196 tiles of 256 x 128 (74%), 264 of 192.
        let wide = HopperTile::new(256, 128, 4)
            .and_then(|t| t.with_tma(true))
            .unwrap();
        for (c, o, k) in [(1024, 512, 1), (512, 512, 3), (1024, 256, 1)] {
            let kk = kernel(64, c, 14, o, k);
            assert!(wide.fill(&kk.shape) < WAVE_FILL);
            let w = fuller_wave_tile(&kk, &wide).expect("a fuller wave");
            assert_eq!((w.bm, w.bn, w.warpgroups, w.tma), (192, 128, 3, true));
            assert!(w.fill(&kk.shape) >= WAVE_FILL);
            // The Hopper path takes it; the cp.async kernel's rule has no 192-row tile.
            assert_eq!(crate::conv_plan::hopper_tile(&kk).unwrap(), w);
            assert_ne!(hopper_plan_with(&kk, false).bm, 192);
        }
        // Full waves already (28 x 28 at batch 64), O under 128, and a 192-row tile that
        // would fill less (2048 outputs on 14 x 14 at batch 64: 208 tiles against 272).
        for kk in [
            kernel(64, 256, 28, 512, 3),
            kernel(64, 512, 14, 64, 1),
            kernel(64, 1024, 14, 2048, 1),
        ] {
            let t = hopper_plan_with(&kk, true);
            assert_eq!(fuller_wave_tile(&kk, &t), None, "{t:?}");
        }
    }
}
