//! The tile the Hopper kernel (NHWC and NC/32HW32 activations) runs a convolution with on an
//! sm_90 GPU: the rules of [`crate::conv`] in the order [`crate::Cuda::conv_path`] applies
//! them, and the environment variables that override them for A/B runs. A function of the
//! problem alone (no device), so the choice can be shown and tested anywhere.

use crate::conv::cluster::{cluster_from_env, cluster_plan, ClusterChoice};
use crate::conv::persistent::{
    few_step_persistent, persistent_from_env, persistent_plan, tap_step_persistent,
    wide_step_persistent,
};
use crate::conv::pointwise::pointwise_tile;
use crate::conv::tma::row_bytes;
use crate::conv::wave_fill::fuller_wave_tile;
use crate::conv::{hopper_plan_with, ConvKernel, HopperTile, MIN_TMA_STEPS};
use crate::conv_env::{splits_from_env, tile_from_env, wide_split_steps_from_env, with_env_splits};
use crate::Error;

/// The fewest K steps for which a `cp.async` tile gives way to a TMA tile that fills the
/// GPU's last wave of blocks ([`fuller_wave_tile`]; the TMA kernel's own tiles at any count).
/// Measured: MobileNetV2's `pw 1x1 160->960 @7` (3 steps) 1.15-1.43x at batch 32 to 128
/// (`bench/results/conv.md`); at 1-2 steps the TMA kernel's fixed costs per block dominate
/// ([`MIN_TMA_STEPS`]).
pub const MIN_FULLER_WAVE_STEPS: usize = 3;

/// The Hopper tile for `kernel` (contract: the Hopper kernel takes it,
/// [`crate::conv::hopper_unsupported_reason`] is None): the TMA kernel where
/// [`crate::conv::tma_applies`] with stage rows of 128 bytes ([`row_bytes`]; narrower rows
/// with `LAYOUTKIT_CONV_TMA=1` only) and K has at least [`MIN_TMA_STEPS`] steps (fewer where
/// [`persistent_plan`] then gives the tile persistent blocks), its tile from
/// [`hopper_plan_with`] with persistent blocks where [`persistent_plan`] says so (and
/// persistent 192 x 128 blocks for pointwise layers of 5-8 steps where
/// [`wide_step_persistent`] says so); layers of
/// one K step per filter tap take [`tap_step_persistent`]'s tall persistent tile; else the
/// `cp.async` kernel's tile from [`hopper_plan_with`]. Then, where the TMA kernel applies (and
/// K has [`MIN_FULLER_WAVE_STEPS`] steps or more for a `cp.async` tile), a TMA tile that fills
/// the GPU's last wave where the chosen one does not ([`fuller_wave_tile`]); for a pointwise
/// layer of a few channels left to the `cp.async` kernel, a tall persistent TMA tile of
/// narrow rows ([`pointwise_tile`]). A TMA tile's stage rows are [`row_bytes`] long. Tiles in
/// clusters only where asked for: `LAYOUTKIT_CONV_CLUSTER=2` the chosen tile in clusters of
/// two wherever they take it, `=plan` [`cluster_plan`]'s narrower tile in clusters.
///
/// Overrides (for A/B runs): `LAYOUTKIT_CONV_TILE=BMxBNxSTAGES` sets the tile (with the
/// splits chosen for it), `LAYOUTKIT_CONV_SPLITK=N` the splits,
/// `LAYOUTKIT_CONV_WIDE_SPLIT_STEPS=N` the rule's fewest steps per split of a wide tile
/// ([`crate::conv::hopper_plan_tuned`]); `LAYOUTKIT_CONV_TMA=1` takes the TMA kernel wherever
/// it applies, `=0` never; `LAYOUTKIT_CONV_PERSISTENT=0/1` persistent blocks never / wherever
/// they fit. Any of them leaves out the pointwise tile, and any but `LAYOUTKIT_CONV_TMA=1` the
/// tall, the fuller-wave and the wide-step persistent tiles too.
///
/// Errors: an override out of its range, or a forced tile the kernel that takes the problem
/// cannot load.
pub fn hopper_tile(kernel: &ConvKernel) -> Result<HopperTile, Error> {
    let steps = crate::conv::HopperK::of(kernel).steps(kernel);
    let tma_env = match std::env::var("LAYOUTKIT_CONV_TMA").as_deref() {
        Ok("0") => Some(false),
        Ok("1") => Some(true),
        _ => None,
    };
    // Stage rows under 128 bytes only where asked for (not measured faster by the rules'
    // tiles: int8 3x3 over 64 channels 0.73-0.96x the `cp.async` kernel with i32 sums).
    let applies =
        crate::conv::tma_applies(kernel) && (row_bytes(kernel) == 128 || tma_env == Some(true));
    // Below MIN_TMA_STEPS the TMA kernel is taken only with persistent blocks.
    let few = few_step_persistent(kernel, steps);
    let tma = applies && tma_env.unwrap_or(steps >= MIN_TMA_STEPS || few);
    let forced = tile_from_env()?;
    let plan = |tma: bool| {
        with_env_splits(forced, &kernel.shape, steps, || {
            Ok(match wide_split_steps_from_env()? {
                Some(steps) => crate::conv::hopper_plan_tuned(kernel, tma, steps),
                None => hopper_plan_with(kernel, tma),
            })
        })
    };
    let mut tile = plan(tma)?;
    let rule = forced.is_none() && splits_from_env()?.is_none() && persistent_from_env().is_none();
    // The 192-row tile in the TMA kernel at any count of steps (as measured), the others at
    // MIN_FULLER_WAVE_STEPS or more.
    let fuller = |tile: &HopperTile| {
        let wanted = rule && tma_env != Some(false);
        wanted
            .then(|| fuller_wave_tile(kernel, tile))
            .flatten()
            .filter(|t| (tile.tma && t.bm == 192) || steps >= MIN_FULLER_WAVE_STEPS)
    };
    if let Some(tall) = tap_step_persistent(kernel, steps).filter(|_| tma && rule) {
        tile = tall;
    } else if tma {
        tile = tile.with_tma(true).unwrap_or(tile);
        tile = fuller(&tile).unwrap_or(tile);
        tile = persistent_plan(kernel, tile, persistent_from_env());
        if rule {
            tile = wide_step_persistent(kernel, &tile, steps).unwrap_or(tile);
        }
        if !tile.persistent && steps < MIN_TMA_STEPS && tma_env.is_none() {
            tile = plan(false)?;
            tile = fuller(&tile).unwrap_or(tile);
        }
    } else if applies {
        tile = fuller(&tile).unwrap_or(tile);
    }
    // Pointwise layers of a few channels: a tall persistent TMA tile of narrow rows.
    if !tile.tma && rule && tma_env.is_none() {
        tile = pointwise_tile(kernel, &tile).unwrap_or(tile);
    }
    let tile = tile.with_rows_of(kernel);
    // Clusters only where asked for: measured 0.31-0.47x the same layers without them
    // (`bench/results/raw/2026-12-03-h200-conv-clusters/`).
    let tile = match cluster_from_env() {
        Some(ClusterChoice::Blocks(blocks)) => tile.with_cluster(blocks).unwrap_or(tile),
        Some(ClusterChoice::Plan) => cluster_plan(kernel, &tile, steps).unwrap_or(tile),
        None => tile,
    };
    // NC/32HW32 outputs are written in whole 32-channel groups of a tile.
    if !tile.bn.is_multiple_of(32) && kernel.out_layout == crate::conv::ConvLayout::Nc32hw32 {
        return Err(Error::Unsupported(format!(
            "a Hopper tile of {} columns does not write NC/32HW32 (a multiple of 32 does)",
            tile.bn
        )));
    }
    if !tile.loads_fit() {
        return Err(Error::Unsupported(format!(
            "the {}-row Hopper tile runs in the TMA kernel only, which does not take this problem",
            tile.bm
        )));
    }
    Ok(tile)
}

#[cfg(test)]
mod tests {
    use super::*;
    use layoutkit_core::DType;

    fn kernel(n: usize, c: usize, hw: usize, o: usize, k: usize) -> ConvKernel {
        crate::conv::test_kernel(n, c, hw, o, k, DType::F16)
    }

    fn shape(t: &HopperTile) -> (usize, usize, bool, bool) {
        (t.bm, t.bn, t.tma, t.persistent)
    }

    #[test]
    fn layers_whose_last_wave_is_mostly_empty_take_a_tile_that_fills_it() {
        // 7 x 7 planes at batch 64, 2048 output channels: 392 tiles of 64 x 256 in persistent
        // blocks (208 of 256 x 128 fill 79% of two waves).
        let t = hopper_tile(&kernel(64, 512, 7, 2048, 1)).unwrap();
        assert_eq!(shape(&t), (64, 256, true, true));
        // 960 channels (3 K steps of C = 160, the cp.async kernel's layer): one wave of
        // 128 x 192 at batch 64, of 64 x 192 at batch 32.
        let t = hopper_tile(&kernel(64, 160, 7, 960, 1)).unwrap();
        assert_eq!(shape(&t), (128, 192, true, false));
        let t = hopper_tile(&kernel(32, 160, 7, 960, 1)).unwrap();
        assert_eq!(shape(&t), (64, 192, true, false));
        // int8 with i32 sums too; not a requantised int8 output (measured slower).
        let mut int8 = kernel(64, 512, 7, 2048, 1);
        (int8.input, int8.out, int8.bias) = (DType::I8, DType::I32, false);
        assert_eq!(shape(&hopper_tile(&int8).unwrap()), (64, 256, true, true));
        int8.out = DType::I8;
        assert_eq!(shape(&hopper_tile(&int8).unwrap()), (256, 128, true, false));
        // ResNet-50's 14 x 14 layers at batch 64: the 192-row tile, as before.
        let t = hopper_tile(&kernel(64, 1024, 14, 512, 1)).unwrap();
        assert_eq!((t.bm, t.bn, t.tma), (192, 128, true));
    }

    #[test]
    fn layers_that_fill_their_waves_keep_the_rules_tile() {
        for k in [
            // One wave of 256 x 128 at batch 32 (85%): a fuller tile would fill less.
            kernel(32, 512, 7, 2048, 1),
            // 392 tiles of 256 x 128 (99%).
            kernel(64, 256, 14, 1024, 1),
            // O under 128.
            kernel(64, 576, 7, 96, 1),
        ] {
            let t = hopper_tile(&k).unwrap();
            let full = fuller_wave_tile(&k, &t);
            assert_eq!(full, None, "{t:?} {:?}", k.shape);
        }
        // One or two K steps in the cp.async kernel: no TMA tile (C = 96 at batch 64, O = 576).
        let t = hopper_tile(&kernel(64, 96, 14, 576, 1)).unwrap();
        assert!(!t.tma, "{t:?}");
    }

    #[test]
    fn one_step_layers_take_persistent_blocks_only_with_four_tiles_per_block() {
        // MobileNetV2's pw 1x1 64->384 @14 at batch 32 and 64: about 2.2 tiles per persistent
        // block; the two-stage cp.async kernel.
        for n in [32, 64] {
            let t = hopper_tile(&kernel(n, 64, 14, 384, 1)).unwrap();
            assert!(!t.tma && !t.persistent && t.stages == 2, "{n}: {t:?}");
        }
        // ResNet-50's l1 1x1 64->64 and 64->256 @56 at batch 32 and 64 (3-12 tiles per
        // block): persistent, as before.
        for (n, o) in [(32, 64), (64, 64), (32, 256), (64, 256)] {
            let t = hopper_tile(&kernel(n, 64, 56, o, 1)).unwrap();
            assert!(t.tma && t.persistent, "{n} {o}: {t:?}");
        }
        // The 192-row tile keeps them (l1 1x1 64->256 @56 at batch 8: 262 tiles on 132
        // blocks), and so do two to four steps (l3 1x1 256->1024 @14 at batch 32: 264 tiles
        // of 192 x 128).
        let t = hopper_tile(&kernel(8, 64, 56, 256, 1)).unwrap();
        assert_eq!(shape(&t), (192, 128, true, true));
        let t = hopper_tile(&kernel(32, 256, 14, 1024, 1)).unwrap();
        assert_eq!(shape(&t), (192, 128, true, true));
    }

    #[test]
    fn pointwise_layers_of_five_to_eight_steps_in_several_waves_take_persistent_192_rows() {
        // ResNet-50's l3 1x1 512->256 @28 at batch 32 (192 x 128 in two waves) and 64
        // (256 x 128 in three).
        for n in [32, 64] {
            let t = hopper_tile(&kernel(n, 512, 28, 256, 1)).unwrap();
            assert_eq!(shape(&t), (192, 128, true, true), "{n}");
        }
        // One wave of 256 x 128 (l4 1x1 512->2048 @7 at batch 32), already persistent (its
        // 64 x 256 at batch 64), 16 steps (l3 1x1 1024->256 @14), a 3x3 filter: unchanged.
        let t = hopper_tile(&kernel(32, 512, 7, 2048, 1)).unwrap();
        assert_eq!(shape(&t), (256, 128, true, false));
        let t = hopper_tile(&kernel(64, 512, 7, 2048, 1)).unwrap();
        assert_eq!(shape(&t), (64, 256, true, true));
        let t = hopper_tile(&kernel(64, 1024, 14, 256, 1)).unwrap();
        assert!(!t.persistent, "{t:?}");
        let t = hopper_tile(&kernel(64, 128, 28, 128, 3)).unwrap();
        assert_eq!(t.bm, 192, "{t:?}");
    }
}
