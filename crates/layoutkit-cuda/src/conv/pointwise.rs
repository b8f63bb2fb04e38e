//! Pointwise (1x1) layers of a few channels in the TMA kernel: one K step whose rows hold a
//! pixel's 16-32 f16 channels in 32 or 64 bytes ([`super::tma::row_bytes`]), tiles of 256
//! pixels walked by persistent blocks.
//!
//! Such a layer moves far more bytes than it multiplies (MobileNetV2's `pw 1x1 16->96 @112`
//! reads 32 bytes and writes 192 per pixel): its time is how close the loads and the output
//! stores come to the memory's speed. The `cp.async` kernel's blocks each load one step and
//! then write their tile, with nothing in flight between; a persistent TMA block loads the
//! next tile's step while its warpgroups write the last one, and rows of the pixel's width
//! load no zeros.

use super::hopper::HopperTile;
use super::{ConvKernel, ConvLayout, SMS};
use layoutkit_core::DType;

/// The widest output tile taken: a 256-row tile keeps `bn` sums per thread (two 64-row blocks
/// per warpgroup), and at 160 columns (MobileNetV2's `24->144`) it ran 0.4x the `cp.async`
/// kernel's 128 x 160.
pub const MAX_POINTWISE_COLUMNS: usize = 96;

/// The TMA tile of 256 rows and `chosen`'s columns, persistent, for a layer that is one K
/// step of a 1x1 filter over channels that fill a row of 64 bytes or less (f16 or bf16, C up
/// to 32), with an NHWC output, where `chosen` (the rule's tile) is at most
/// [`MAX_POINTWISE_COLUMNS`] wide and the 256-row tiles outnumber the SMs; None otherwise.
/// Three stages where the tile is 64 columns or wider, four where narrower.
///
/// Measured on an H200 (`bench/results/conv.md`, MobileNetV2's pointwise layers of 16-32
/// channels at batch 8, 32, 64 and 128, the TMA kernel forced against the rule's `cp.async`
/// tile, GPU time): `16->96 @112` (256 x 96 x 3, 32-byte rows) 1.20x / 1.32x / 1.37x / 1.40x;
/// `32->16 @112` (256 x 32 x 4, 64-byte rows) 1.01x / 1.17x / 1.07x / 1.12x; `32->192 @28`
/// (256 x 96 x 3 over two column tiles) 1.04x / 1.12x / 1.41x at batch 32 / 64 / 128, and
/// 0.76x at batch 8, where its 50 tiles are fewer than the SMs (hence that condition).
pub fn pointwise_tile(kernel: &ConvKernel, chosen: &HopperTile) -> Option<HopperTile> {
    let s = &kernel.shape;
    let wanted = matches!(kernel.input, DType::F16 | DType::BF16)
        && kernel.out_layout == ConvLayout::Nhwc
        && s.kh * s.kw == 1
        && super::tma::row_bytes(kernel) <= 64
        && chosen.bn <= MAX_POINTWISE_COLUMNS
        && super::tma_applies(kernel);
    if !wanted {
        return None;
    }
    let stages = if chosen.bn >= 64 { 3 } else { 4 };
    let t = HopperTile::new(256, chosen.bn, stages)?
        .with_tma(true)?
        .with_rows_of(kernel)
        .with_persistent(kernel)?;
    let (x, y) = t.tiles(s);
    (x * y > SMS).then_some(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel(n: usize, c: usize, hw: usize, o: usize) -> ConvKernel {
        let mut k = crate::conv::test_kernel(n, c, hw, o, 1, DType::F16);
        k.shape.conv.padding = [0; 2];
        k
    }

    #[test]
    fn few_channel_pointwise_layers_take_tall_persistent_tiles_of_narrow_rows() {
        for (k, bn, row, stages) in [
            (kernel(64, 16, 112, 96), 96, 32, 3),
            (kernel(8, 16, 112, 96), 96, 32, 3),
            (kernel(64, 32, 112, 16), 32, 64, 4),
            (kernel(32, 32, 28, 192), 96, 64, 3),
        ] {
            let chosen = crate::conv::hopper_plan(&k);
            assert_eq!(chosen.bn, bn, "{:?}", k.shape);
            let t = pointwise_tile(&k, &chosen).expect("a pointwise tile");
            assert_eq!((t.bm, t.bn, t.k_bytes, t.stages), (256, bn, row, stages));
            assert!(t.tma && t.persistent);
            assert_eq!(crate::conv_plan::hopper_tile(&k).unwrap(), t);
        }
    }

    #[test]
    fn other_layers_keep_the_rules_tile() {
        for k in [
            // 50 tiles of 256 rows for 132 SMs.
            kernel(8, 32, 28, 192),
            // 160 columns (O = 144).
            kernel(64, 24, 56, 144),
            // 64 channels: 128-byte rows (the rules of `persistent`).
            kernel(64, 64, 56, 64),
            // A 3x3 filter.
            crate::conv::test_kernel(64, 32, 56, 64, 3, DType::F16),
        ] {
            let chosen = crate::conv::hopper_plan(&k);
            assert_eq!(pointwise_tile(&k, &chosen), None, "{:?}", k.shape);
        }
        let mut int8 = kernel(64, 32, 112, 96);
        (int8.input, int8.out, int8.bias) = (DType::I8, DType::I32, false);
        assert_eq!(
            pointwise_tile(&int8, &crate::conv::hopper_plan(&int8)),
            None
        );
    }
}
