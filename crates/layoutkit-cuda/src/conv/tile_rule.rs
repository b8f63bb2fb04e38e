//! The Hopper kernel's tile rule: which tile, and how many splits of K, a convolution runs
//! with ([`hopper_plan`]), from the candidate tiles by how full they keep the GPU's block
//! slots and how long their splits of K are.

use super::hopper::HopperTile;
use super::hopper_k::HopperK;
use super::splitk::splits_for;
use super::{ConvKernel, ConvShape};

/// The share of the GPU's block slots a plan must fill to be taken ahead of a smaller tile.
pub(super) const MIN_FILL: f64 = 0.7;

/// The fewest K steps per split for a tile that fills the GPU only with K split (see
/// [`hopper_plan`]). 8 (7 after the H100's runs): on an H200 (three networks, batch 1 and 8,
/// `bench/results/conv.md`) 7-step splits (`vgg conv3_2` at batch 1, `l3 3x3` at batch 8) ran
/// at 0.82 and 0.95 of the 64 x 64 tile unsplit; 9-step ones (`l4 3x3` at batch 8) at 1.14x
/// the 64 x 64 tile in 4 splits that a threshold of 12 gave them.
const MIN_STEPS_PER_WIDE_SPLIT: usize = 8;

/// The fewest K steps per split of a tile that fills the GPU only with K split, where a
/// narrower candidate fills it unsplit (see [`hopper_plan`]): each split writes and reads back
/// its f32 sums, which the narrower tile does not. Measured (GPU time, three alternations,
/// `bench/results/conv.md`): the two layer-and-batch pairs of three networks at batch 1 to
/// 128 where this moves the rule (`l4 1x1 2048->512 @7` at batch 32: 256 x 128 in 4 splits of
/// 8 steps; VGG-16's `conv4_1` at batch 2: 4 splits of 9) ran 1.24x and 1.16x on an H200 with
/// the 64 x 64 tile unsplit; splits of 14 and more steps (the 512-channel 3x3 layers) won.
const MIN_STEPS_PER_SPLIT_OVER_UNSPLIT: usize = 12;

/// [`MIN_STEPS_PER_SPLIT_OVER_UNSPLIT`] for the TMA kernel, whose narrower candidates include
/// the one-wave tile (`one_wave_tile`: one block of 64 x 128 per SM, each reading its pixel
/// tile once for 128 output channels). Measured on an H200
/// (`raw/2026-12-02-h200-conv-small-gemm/`, tiles forced, GPU time): ResNet-50's `l4 3x3
/// 512->512` at batch 32 (72 steps; both 7 x 7 outputs, `@7` and `3x3/2 @14`), 256 x 128 in
/// 4 splits of 18 steps ran 0.94x the one-wave 64 x 128 tile unsplit.
const MIN_STEPS_PER_SPLIT_OVER_UNSPLIT_TMA: usize = 24;

/// The share of the SMs under which the unsplit blocks of the tile with the most blocks (the
/// rule's fallback, where no candidate fills the GPU) are split among K: above it, the SMs
/// the split would add do not pay for the second launch, the workspace's traffic and each
/// split's own pipeline fill. Measured on an H200 (`raw/2026-12-02-h200-conv-small-gemm/`,
/// GPU time): MobileNetV2's `pw 1x1 960->160 @7` at batch 32 (75 blocks of 64 x 64, 57% of
/// the SMs, 15 K steps) ran 1.19x unsplit what it ran in 3 splits of 5 steps; at batch 1 and 8
/// (3 and 21 blocks) the splits stay.
pub const MAX_SPLIT_SM_SHARE: f64 = 0.5;

/// The most K steps for which the 128 x 256 tile is left out of [`hopper_plan`]'s candidates.
/// A 128 x 256 block holds a whole SM, so with a step or three its loads, its multiplies and
/// its epilogue run one after the other with no other block's work to overlap them; two
/// 128 x 128 blocks per SM overlap them. Measured on an H200 (the 1x1 layers of three
/// networks at batch 32 and 64, seven tiles forced, GPU time; `bench/results/conv.md`):
/// 128 x 128 with three stages ran the 1-3-step layers on which the rule took 128 x 256 at
/// 1.01-1.41x (64->256, 128->512, 96->576, 64->384, 160->960 channels).
pub const MAX_STEPS_WITHOUT_THE_WIDEST: usize = 3;

/// The tile and the splits of K the Hopper kernel runs `kernel` with. In the order of
/// [`hopper_tile`]'s candidates, the first tile whose blocks fill at least 70% of the GPU's
/// block slots, or that fills them with K split among 3 or more blocks ([`splits_for`]) of at
/// least 8 K steps each (12 where a later, narrower candidate fills them unsplit, 24 in the
/// TMA kernel), the TMA kernel's 64 x 128 or 64 x 96 by its own test (`one_wave_tile`) and
/// its 64-row tile fitted to a narrow O by the same test (`narrow_one_wave`); else the tile
/// with the most blocks, with the splits [`splits_for`] gives it where its unsplit blocks
/// fill less than half the SMs (`MAX_SPLIT_SM_SHARE`), unsplit otherwise. (The tile a
/// layer runs then gives
/// way to one that fills the last wave of blocks where this one does not:
/// [`super::wave_fill::fuller_wave_tile`], in `crate::conv_plan`.) Candidates of the `cp.async`
/// kernel for a layer of one K step have two stages (`one_step_stages`).
///
/// Why the split counts: measured on an H100 (every tile forced on the 52 layers of three
/// networks that are not depthwise, batch 1, 8 and 32, `bench/results/conv.md`), a wide tile
/// split into blocks of 7 or more K steps beat the 64 x 64 tile that fills the GPU unsplit by
/// up to 60% (the 512-channel 3x3 layers on 7x7 and 14x14 planes at batch 8 and 32: 72 steps
/// in 5 splits), and lost to it by 5-25% with 4-5 steps per split (128-channel 3x3 layers,
/// 1024-channel 1x1 layers), where the workspace's traffic and the second launch outweigh
/// the wider tile.
pub fn hopper_plan(kernel: &ConvKernel) -> HopperTile {
    hopper_plan_with(kernel, false)
}

/// The fewest K steps for which the TMA kernel is the better choice. Measured on an H200
/// (every layer of three networks at batch 8 and 64 in NHWC, both kernels with the tile
/// rule's tiles, `bench/results/conv.md`): the TMA kernel ran 1.1-1.5x faster on layers of 6 K
/// steps or more, within 5% either way at 3-4, and up to 1.5x slower at 1-2 (a block's
/// fixed costs, the barriers' set-up and the first copies' latency from one thread, are
/// then most of its time).
pub const MIN_TMA_STEPS: usize = 4;

/// [`hopper_plan`] for the TMA kernel when `tma` ([`HopperTile::tma`] set on the tile): the
/// same rule over the TMA kernel's candidates, in which 256 x 128 takes the place of 128 x 256
/// (same blocks; measured faster in the TMA kernel on every layer of ResNet-50 and VGG-16 at
/// batch 64 whose rule tile was 128 x 256 but two, by up to 1.2x).
///
/// Contract: with `tma`, [`super::tma_applies`] holds for `kernel`.
pub fn hopper_plan_with(kernel: &ConvKernel, tma: bool) -> HopperTile {
    let over_unsplit = if tma {
        MIN_STEPS_PER_SPLIT_OVER_UNSPLIT_TMA
    } else {
        MIN_STEPS_PER_SPLIT_OVER_UNSPLIT
    };
    plan_with_thresholds(kernel, tma, MIN_STEPS_PER_WIDE_SPLIT, over_unsplit)
}

/// [`hopper_plan_with`] with `wide_split_steps` in place of both fewest K steps per split of a
/// tile that fills the GPU only with K split (8, and 12 where a narrower tile fills it
/// unsplit; `LAYOUTKIT_CONV_WIDE_SPLIT_STEPS` sets it, to compare rules).
pub fn hopper_plan_tuned(kernel: &ConvKernel, tma: bool, wide_split_steps: usize) -> HopperTile {
    plan_with_thresholds(kernel, tma, wide_split_steps, wide_split_steps)
}

/// The rule of [`hopper_plan`] with its two thresholds of K steps per split: `wide_split_steps`,
/// and `over_unsplit` where a later (narrower) candidate fills the GPU unsplit.
fn plan_with_thresholds(
    kernel: &ConvKernel,
    tma: bool,
    wide_split_steps: usize,
    over_unsplit: usize,
) -> HopperTile {
    let s = &kernel.shape;
    let steps = HopperK::of(kernel).steps(kernel);
    let split = |t: &HopperTile| {
        t.with_splits(splits_for(t, s, steps))
            .expect("splits_for stays in range")
    };
    let candidates: Vec<HopperTile> = candidate_tiles(s, tma)
        .into_iter()
        .filter(|t| steps > MAX_STEPS_WITHOUT_THE_WIDEST || t.bm * t.bn < 128 * 256)
        .map(|t| one_step_stages(t, tma, steps))
        .map(|t| t.with_tma(tma).unwrap_or(t))
        .collect();
    let one_wave = one_wave_tile(s.o);
    candidates
        .iter()
        .enumerate()
        .find_map(|(i, t)| {
            if (t.bm, t.bn, t.stages) == (one_wave.0, one_wave.1, one_wave.2) {
                return fills_one_wave(t, s).then_some(*t);
            }
            if tma && narrow_one_wave(t, s) && fills_one_wave(t, s) {
                return Some(*t);
            }
            if t.fill(s) >= MIN_FILL {
                return Some(split(t));
            }
            let w = split(t);
            // Where a narrower tile fills the GPU unsplit, a split must be longer to pay for
            // its workspace and second launch.
            let unsplit_later = candidates[i + 1..].iter().any(|u| u.fill(s) >= MIN_FILL);
            let need = if unsplit_later {
                over_unsplit
            } else {
                wide_split_steps
            };
            (w.splits > 1 && steps / w.splits >= need && w.fill(s) >= MIN_FILL).then_some(w)
        })
        .unwrap_or_else(|| {
            let t = most_blocks(&candidates, s);
            let (x, y) = t.tiles(s);
            if ((x * y) as f64) < MAX_SPLIT_SM_SHARE * super::SMS as f64 {
                split(&t)
            } else {
                t
            }
        })
}

/// The candidate tiles for `s`, widest first, none wider than O (wider tiles compute zeros):
/// 128 x 256 (four stages, one block per SM); 128 x 128 with three stages and no multiplies in
/// flight across steps (two blocks per SM); 128 x 128 with four stages (one block); 128 x 64
/// the same two ways; for the TMA kernel 64 x 128 or 64 x 96 (`one_wave_tile`, taken only
/// where its blocks are one per SM in one wave); 64 x 64; 96 columns in place of 128 where
/// [`ninety_six_columns`] says so. Where O is under 256 and not a multiple of 64 (MobileNetV2's
/// 16, 24, 96, 144, 160), tiles exactly as wide as O rounded up to 32 come first: 128 rows with
/// three stages, and 64 rows with four (measured on MobileNetV2's pointwise layers at batch 8,
/// 32 and 64, every tile forced: 1.1-1.5x over the 64- or 128-column tile, whose last columns
/// computed zeros; `bench/results/conv.md`).
fn candidate_tiles(s: &ConvShape, tma: bool) -> Vec<HopperTile> {
    let fitted = s.o.next_multiple_of(32);
    let narrow = (!s.o.is_multiple_of(64) && s.o < 256)
        .then_some([(128, fitted, 3, 0), (64, fitted, 4, 1)])
        .into_iter()
        .flatten();
    let widest = if tma {
        (256, 128, 4, 1)
    } else {
        (128, 256, 4, 1)
    };
    let mid = if ninety_six_columns(s.o) { 96 } else { 128 };
    let standard = [
        widest,
        (128, mid, 3, 0),
        (128, mid, 4, 1),
        (128, 64, 3, 0),
        (128, 64, 4, 1),
    ]
    .into_iter()
    .chain(tma.then_some(one_wave_tile(s.o)))
    .chain([(64, 64, 4, 1)])
    .filter(|&(bm, bn, _, _)| bn <= s.o.max(64) && (bm < 256 || s.o >= 256));
    narrow
        .chain(standard)
        .filter_map(|(bm, bn, st, f)| HopperTile::new(bm, bn, st)?.with_in_flight(f))
        .collect()
}

/// Whether the 128-column candidates give way to 96 columns for `o` output channels: where
/// O is over 128, 96 divides it and 128-column tiles would compute 20% or more zeros (O = 192:
/// two tiles of 128 for 192 channels). Measured on an H200 (MobileNetV2's pointwise layers at
/// batch 1, 8, 32 and 64, GPU time, three alternations; `bench/results/conv.md`): `pw 1x1
/// 32->192 @28` 1.18x /
/// 1.10x / 1.07x at batch 8 / 32 / 64; where less is wasted, 96 columns in their place lost
/// (O = 576: 0.86-0.87x at batch 32 and 64) or did not always win (O = 960: 1.15x at batch 64,
/// 0.93x at 32, where the 128 x 128 tile it displaced was the rule's).
fn ninety_six_columns(o: usize) -> bool {
    let waste = o.next_multiple_of(128) - o;
    o > 128 && o.is_multiple_of(96) && waste * 5 >= o.next_multiple_of(128)
}

/// The one-wave tile for `o` output channels: 64 x 128 with four stages (64 x 96 below). For
/// the TMA kernel, a candidate (before 64 x 64) only where its blocks fill the SMs in one wave
/// of one block each ([`fills_one_wave`]), where the rule took 64 x 64 with two blocks on most
/// SMs. A 64 x 128 block reads each pixel tile's
/// input once for 128 output channels, where two 64 x 64 blocks read it twice. Measured on an
/// H200 (our NHWC kernels on every layer of three networks at batch 1, 4, 8, 16, 32 and 64,
/// the rule with and without it; `bench/results/conv.md`): the 16 TMA layer-and-batch pairs it
/// moves 1.05-1.21x (e.g. `l4 1x1 2048->512` at batch 32 1.20x, `l4 1x1/2 1024->2048` at batch
/// 8 1.21x, VGG-16's `conv3_2` at batch 1 1.15x); in the `cp.async` kernel (layers of 1-3 K
/// steps) the 5 pairs it would move ran 0.88-0.97x, so it is not a candidate there. (With six
/// stages it is one block per SM everywhere; as a candidate by the block-slot fill it moved
/// layers of several waves too, and lost 0.98x.)
///
/// Where O is over 128 and 96-column tiles are as many as 128-column ones (O = 129-192,
/// 257-288), the tile is as many columns as O divided among that many tiles, rounded up to 16
/// (`wgmma` takes any multiple of 8; the TMA kernel's tiles multiples of 16): the same blocks
/// with fewer columns of zeros (O = 160: two tiles of 80, 160 columns computed against 192 with
/// 96 and 256 with 128; O = 192 and 288: 96). Measured on an H100 (every layer of three
/// networks at batch 1, 8, 32 and 64, two alternations, GPU time; `bench/results/conv.md`):
/// MobileNetV2's `pw 1x1 576->160 @7` and `960->160 @7` at batch 64, 64 x 96 1.15x and 1.22x
/// the 64 x 128 tile; on an H200 (`raw/2026-12-02-h200-conv-small-gemm/`, tiles forced) 64 x
/// 80 1.06x and 1.07x 64 x 96 on the same layers.
fn one_wave_tile(o: usize) -> (usize, usize, usize, usize) {
    let tiles = o.div_ceil(128);
    if o > 128 && o.div_ceil(96) == tiles {
        (64, o.div_ceil(tiles).next_multiple_of(16), 4, 1)
    } else {
        (64, 128, 4, 1)
    }
}

/// `t` with two stages and no multiplies in flight where the `cp.async` kernel (not `tma`)
/// walks a single K step (`steps`): a block then fills one stage and multiplies it once, so
/// further stages only hold shared memory that other blocks could use. Measured on an H100
/// (every layer of three networks at batch 1, 8, 32 and 64, two alternations, GPU time;
/// `bench/results/conv.md`): MobileNetV2's `pw 1x1 32->16 @112` (128 x 32 tiles, more blocks
/// per SM) 1.05x / 1.10x / 1.13x at batch 8 / 32 / 64, ResNet-50's `l1 1x1 64->64` at batch 1
/// 1.05x; the other one-step layers, whose blocks are held to two per SM by their registers,
/// within 1%.
fn one_step_stages(t: HopperTile, tma: bool, steps: usize) -> HopperTile {
    if tma || steps != 1 || t.stages == 2 {
        return t;
    }
    HopperTile::new(t.bm, t.bn, 2).unwrap_or(t)
}

/// Whether `t` is the 64-row candidate fitted to a narrow O (`candidate_tiles`), which the TMA
/// kernel takes where its blocks fill the SMs in one wave of one block each
/// ([`fills_one_wave`]), as it takes the one-wave tile: the block-slot fill counts two such
/// blocks per SM and so passes it over for a tile that fills the slots with more, narrower
/// blocks, which read each pixel tile's input once per column tile and compute zeros past
/// O. Measured on an H200 (`raw/2026-12-02-h200-conv-small-gemm/`, GPU time): MobileNetV2's
/// `pw 1x1 576->96 @14` at batch 32, 98 blocks of 64 x 96 (9 K steps) ran 1.24x the rule's
/// 196 blocks of 64 x 64 (two per SM).
fn narrow_one_wave(t: &HopperTile, s: &ConvShape) -> bool {
    t.bm == 64 && !s.o.is_multiple_of(64) && s.o < 256 && t.bn == s.o.next_multiple_of(32)
}

/// Whether `t`'s blocks, unsplit, fill at least [`MIN_FILL`] of the SMs and no more than one
/// block each.
fn fills_one_wave(t: &HopperTile, s: &ConvShape) -> bool {
    let (x, y) = t.tiles(s);
    let blocks = x * y;
    blocks <= super::SMS && blocks as f64 >= MIN_FILL * super::SMS as f64
}

/// The candidate with the most blocks for `s` (the last, i.e. smallest, on a tie).
fn most_blocks(candidates: &[HopperTile], s: &ConvShape) -> HopperTile {
    *candidates
        .iter()
        .max_by_key(|t| {
            let (x, y, _) = t.grid(s);
            x * y
        })
        .expect("the candidate tiles are valid")
}

/// The tile for `s` without splitting K: the first of the candidate tiles (`candidate_tiles`)
/// whose blocks fill at least 70% of the GPU's block slots on average over their waves, else
/// the one with the most blocks (whose K walk a split then shortens). Measured on the H200
/// (every tile on the ResNet-50 3x3 layers, `bench/results/conv.md`): the widest tile won wherever it filled the
/// GPU (128 x 256 at 98 blocks for 132 SMs); two blocks per SM won by 5% where there are waves
/// enough for them, and lost where there are not.
pub fn hopper_tile(s: &ConvShape) -> HopperTile {
    let candidates = candidate_tiles(s, false);
    candidates
        .iter()
        .find(|t| t.fill(s) >= MIN_FILL)
        .copied()
        .unwrap_or_else(|| most_blocks(&candidates, s))
}

#[cfg(test)]
mod tests {
    use super::*;
    use layoutkit_core::DType;

    #[test]
    fn a_split_shorter_than_24_steps_gives_way_to_a_narrower_tile_that_fills_unsplit() {
        let plan = |n, c, hw, o, k| {
            let kk = crate::conv::test_kernel(n, c, hw, o, k, DType::F16);
            assert!(crate::conv::tma_applies(&kk));
            let p = hopper_plan_with(&kk, true);
            (p.bm, p.bn, p.splits, HopperK::of(&kk).steps(&kk))
        };
        // ResNet-50's l4 1x1 2048 -> 512 at batch 32: 32 K steps; 256 x 128 would fill the
        // GPU only in 4 splits of 8 steps, while narrower tiles fill it unsplit.
        // (The TMA kernel then takes 64 x 128, one block per SM in one wave: one_wave_tile.)
        assert_eq!(plan(32, 2048, 7, 512, 1), (64, 128, 1, 32));
        // VGG-16's conv4_1 at batch 2: 36 steps, 4 splits of 9; unsplit narrower tiles fill
        // (the one-wave 64 x 128: 98 blocks).
        assert_eq!(plan(2, 256, 28, 512, 3), (64, 128, 1, 36));
        // ResNet-50's l4 3x3 512->512 @7 at batch 32 (and VGG-16's conv4_2 at batch 2, the
        // same GEMM): 72 steps, 256 x 128 would take 4 splits of 18; the one-wave 64 x 128.
        assert_eq!(plan(32, 512, 7, 512, 3), (64, 128, 1, 72));
        assert_eq!(plan(2, 512, 28, 512, 3), (64, 128, 1, 72));
        // 8-step splits stay where no narrower tile fills unsplit (l4 3x3 at batch 8, 8
        // splits of 9 steps).
        assert_eq!(plan(8, 512, 7, 512, 3), (128, 128, 8, 72));
    }

    #[test]
    fn the_one_wave_tile_is_taken_by_the_tma_kernel_where_it_fills_the_sms_once() {
        // ResNet-50's l4 1x1 1024->512 at batch 8: 1568 pixels, 25 x 4 = 100 blocks of 64 x 128.
        let kk = crate::conv::test_kernel(8, 1024, 14, 512, 1, DType::F16);
        let p = hopper_plan_with(&kk, true);
        assert_eq!((p.bm, p.bn, p.stages, p.splits), (64, 128, 4, 1));
        assert!(fills_one_wave(&p, &kk.shape));
        // Not for the cp.async kernel.
        let p = hopper_plan_with(&kk, false);
        assert_eq!((p.bm, p.bn), (64, 64));
        // Not where its blocks would take more than one wave (batch 16: 200 blocks).
        let kk = crate::conv::test_kernel(16, 1024, 14, 512, 1, DType::F16);
        let p = hopper_plan_with(&kk, true);
        assert_ne!((p.bm, p.bn), (64, 128));
    }

    #[test]
    fn the_one_wave_tile_is_as_narrow_as_o_allows_where_that_takes_no_more_tiles() {
        for (o, bn) in [
            (160, 80),
            (192, 96),
            (136, 80),
            (144, 80),
            (176, 96),
            (288, 96),
            (272, 96),
            (128, 128),
            (256, 128),
            (320, 128),
        ] {
            assert_eq!(one_wave_tile(o).1, bn, "O = {o}");
            assert!(HopperTile::new(64, bn, 4).is_some(), "O = {o}");
        }
        // MobileNetV2's pw 1x1 960->160 @7 at batch 64: 49 x 2 blocks of 64 x 80, one wave.
        let kk = crate::conv::test_kernel(64, 960, 7, 160, 1, DType::F16);
        let p = hopper_plan_with(&kk, true);
        assert_eq!((p.bm, p.bn, p.stages, p.splits), (64, 80, 4, 1));
    }

    #[test]
    fn the_fallback_tile_is_split_only_where_its_blocks_fill_under_half_the_sms() {
        // MobileNetV2's pw 1x1 960->160 @7: no candidate fills the GPU; the tile with the most
        // blocks is 64 x 64 (3 column tiles). Batch 32: 25 x 3 = 75 blocks, 57% of 132 SMs,
        // unsplit. Batch 8 (7 x 3 = 21) and 1 (3) keep the splits.
        let plan = |n| {
            let kk = crate::conv::test_kernel(n, 960, 7, 160, 1, DType::F16);
            let p = hopper_plan_with(&kk, true);
            (p.bm, p.bn, p.splits)
        };
        assert_eq!(plan(32), (64, 64, 1));
        assert_eq!(plan(8), (64, 64, 3));
        assert_eq!(plan(1), (64, 64, 3));
        // l4 3x3 at batch 1: 8 tiles of 64 x 64, 18 splits of 4 steps.
        let kk = crate::conv::test_kernel(1, 512, 7, 512, 3, DType::F16);
        assert_eq!(hopper_plan_with(&kk, true).splits, 18);
    }

    #[test]
    fn the_tma_kernel_takes_the_tile_fitted_to_a_narrow_o_where_it_is_one_wave() {
        // MobileNetV2's pw 1x1 576->96 @14 at batch 32: 98 blocks of 64 x 96 (one per SM, 74%
        // of the SMs) in place of 196 of 64 x 64.
        let kk = crate::conv::test_kernel(32, 576, 14, 96, 1, DType::F16);
        let t = hopper_plan_with(&kk, true);
        assert_eq!((t.bm, t.bn, t.splits), (64, 96, 1));
        assert!(narrow_one_wave(&t, &kk.shape) && fills_one_wave(&t, &kk.shape));
        // Not for the cp.async kernel.
        assert_eq!(hopper_plan_with(&kk, false).bn, 64);
        // At batch 64 (196 blocks of 64 x 96) the block-slot fill takes it, as before.
        let kk = crate::conv::test_kernel(64, 576, 14, 96, 1, DType::F16);
        let t = hopper_plan_with(&kk, true);
        assert_eq!((t.bm, t.bn), (64, 96));
        assert!(!fills_one_wave(&t, &kk.shape));
        // Batch 16: 49 blocks, under 70% of the SMs: 64 x 64 as before.
        let kk = crate::conv::test_kernel(16, 576, 14, 96, 1, DType::F16);
        assert_eq!(hopper_plan_with(&kk, true).bn, 64);
    }

    #[test]
    fn one_step_layers_take_two_stages_in_the_cp_async_kernel() {
        // MobileNetV2's pw 1x1 32->16 @112 at batch 64: one K step, 128 x 32.
        let kk = crate::conv::test_kernel(64, 32, 112, 16, 1, DType::F16);
        assert_eq!(HopperK::of(&kk).steps(&kk), 1);
        let p = hopper_plan_with(&kk, false);
        assert_eq!((p.bm, p.bn, p.stages, p.in_flight), (128, 32, 2, 0));
        // Two steps keep the rule's stages (C = 128 at batch 64 on 28 x 28).
        let kk = crate::conv::test_kernel(64, 128, 28, 512, 1, DType::F16);
        assert_eq!(HopperK::of(&kk).steps(&kk), 2);
        assert!(hopper_plan_with(&kk, false).stages >= 3);
        // The TMA kernel keeps its stages on one step.
        let kk = crate::conv::test_kernel(64, 64, 56, 256, 1, DType::F16);
        assert!(hopper_plan_with(&kk, true).stages >= 3);
    }

    #[test]
    fn ninety_six_columns_where_a_128_column_tile_would_compute_a_fifth_zeros() {
        assert!(ninety_six_columns(192));
        for o in [96, 128, 256, 288, 384, 576, 960, 1152] {
            assert_eq!(ninety_six_columns(o), o == 288, "O = {o}");
        }
        // MobileNetV2's pw 1x1 32->192 @28 at batch 64: 128 x 96, three stages, unsplit.
        let kk = crate::conv::test_kernel(64, 32, 28, 192, 1, DType::F16);
        let p = hopper_plan_with(&kk, false);
        assert_eq!((p.bm, p.bn, p.splits), (128, 96, 1));
        // O = 960 keeps the 128-column tiles.
        let kk = crate::conv::test_kernel(64, 160, 7, 960, 1, DType::F16);
        assert_eq!(hopper_plan_with(&kk, false).bn, 128);
    }
}
