//! The tile of three warpgroups (192 x 128, TMA kernel) where the rule's tile leaves the GPU's
//! last wave of blocks mostly empty.
//!
//! Output tile counts of convolutions are often a multiple of 49 (a 14 x 14 or 7 x 7 plane, or
//! 28 x 28 at batch 16 and more, divided into 256- or 128-row tiles): 98 or 196 tiles on 132
//! SMs run in waves 74% full, and the [`super::hopper_plan`] rule takes such tiles (70% or more
//! is its threshold for the widest tiles, which win there by their efficiency per tile). A
//! 192-row tile divides the same pixels into a third more tiles: 132 or 264 there, whole waves.

use super::hopper::HopperTile;
use super::ConvKernel;

impl HopperTile {
    /// Whether the kernel's loads cover the tile: by TMA any tile; by every thread (8 chunks
    /// of a row per 8 threads) only where the rows of A and B are whole passes of the threads
    /// (not for the three warpgroups of a 192-row tile).
    pub fn loads_fit(&self) -> bool {
        let step = self.threads() / 8;
        self.tma || (self.bm.is_multiple_of(step) && self.bn.is_multiple_of(step))
    }
}

/// The fill under which the rule's tile gives way to a 192 x 128 tile filling at least this.
pub const WAVE_FILL: f64 = 0.9;

/// The 192 x 128 TMA tile (four stages, one block per SM) for `kernel` where the rule's
/// `chosen` tile (with its splits of K) fills less than [`WAVE_FILL`] of the GPU's block slots
/// over its waves and the 192-row tile, unsplit, fills at least that; None otherwise, and
/// where O is under 128 (its last columns would compute zeros).
///
/// Measured on an H100 (every NHWC layer of three networks at batch 32 and 64, the 192 x 128
/// tile forced against the rule's tiles, GPU time; `bench/results/conv.md`): on the 16
/// layer-and-batch pairs this takes (8 at each batch; the rule's tile filled 74-76%),
/// 1.06-1.27x the rule's tile (`l4 1x1 1024->512 @14` 1.15 / 1.13 at batch 64 / 32, `vgg
/// conv5_1` 1.18 / 1.09, `l2 3x3/2 128->128 @56` 1.19 / 1.27); where both tiles filled 99% it
/// ran 0.90-1.10x the rule's tile, and where it filled less than the rule's tile 0.67-0.87x.
///
/// Contract: `chosen` is a TMA tile ([`super::tma_applies`] holds for `kernel`).
pub fn fuller_wave_tile(kernel: &ConvKernel, chosen: &HopperTile) -> Option<HopperTile> {
    let s = &kernel.shape;
    if s.o < 128 || chosen.fill(s) >= WAVE_FILL {
        return None;
    }
    let t = HopperTile::new(192, 128, 4)?.with_tma(true)?;
    (t.fill(s) >= WAVE_FILL).then_some(t)
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
            // The TMA rule takes it; the cp.async kernel's rule has no 192-row tile.
            assert_eq!(hopper_plan_with(&kk, true), w);
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
