//! Persistent blocks for the TMA kernel ([`super::tma`]): a grid of as many blocks as the GPU
//! holds at once, each walking output tiles `blockIdx.x, blockIdx.x + gridDim.x, ...`.
//!
//! In the one-tile-per-block kernel a block's producer issues its first copies only once the
//! block has started, and the block's last multiplies, its epilogue and the next block's start
//! run with no loads in flight: a few microseconds per tile in which neither the memory nor the
//! tensor cores of the SM are busy, most of the time of a tile with a few K steps. In a
//! persistent block the producer goes on to the next tile's steps as soon as a stage is free,
//! so they load while the warpgroups finish the tile and write its output. For that, the output
//! tile is staged in shared memory of its own after the stages and barriers (the stages are
//! being refilled meanwhile), and the warpgroups release the stage of a tile's last step once
//! its multiplies are done.
//!
//! The stage and parity of each `mbarrier` wait count the block's steps over all its tiles (`gs`),
//! so the producer and the warpgroups agree on them across tiles exactly as within one.

use super::hopper::{HopperTile, SMEM_PER_SM};
use super::staged::{staged_bytes, Staged};
use super::{ConvKernel, ConvLayout, SMS};
use layoutkit_core::DType;

/// The fewest stages a persistent tile keeps when its staged output takes the room of some.
const MIN_PERSISTENT_STAGES: usize = 3;

impl HopperTile {
    /// This TMA tile (one split; NCHW activations only through footprints,
    /// [`super::nchw_footprint`]) with persistent blocks for `kernel`: its staged output tile
    /// in shared memory of its own, whole or (where that leaves too little room for the
    /// stages, and not for a footprint tile) one 64-row block of each warpgroup at a time,
    /// keeping as many of the tile's stages as fit (down to three; a footprint tile's filter
    /// stages down to two); None where that does not fit or the tile is not such a tile.
    pub fn with_persistent(self, kernel: &ConvKernel) -> Option<HopperTile> {
        let footprint = self.footprint_rows > 0;
        if !self.tma || (self.nchw && !footprint) || self.splits != 1 {
            return None;
        }
        let (fewest, passes) = if footprint {
            (2, vec![1])
        } else {
            (MIN_PERSISTENT_STAGES, vec![1, self.mr])
        };
        let stages = (fewest.min(self.stages)..=self.stages).rev();
        stages
            .flat_map(|stages| {
                passes.clone().into_iter().map(move |passes| {
                    let t = HopperTile {
                        stages,
                        persistent: true,
                        epilogue_passes: passes,
                        ..self
                    };
                    let bytes = staged_bytes(kernel, &t, Staged::Output);
                    HopperTile {
                        epilogue_bytes: bytes.next_multiple_of(16),
                        ..t
                    }
                })
            })
            .find(|t| t.shared_bytes() <= SMEM_PER_SM)
    }

    /// Byte offset of a persistent block's staged output tile from the stages' start: after
    /// the stages (or footprint buffers and filter stages) and their barriers.
    pub(super) fn epilogue_offset(&self) -> usize {
        self.stage_area() + 256
    }
}

/// The most K steps of a layer the rule gives persistent blocks ([`persistent_plan`]).
pub const MAX_PERSISTENT_STEPS: usize = 4;

/// Whether `kernel`, with `steps` K steps, is of the kind persistent blocks were measured to
/// speed up: f16 or bf16 inputs, an NHWC output, at most [`MAX_PERSISTENT_STEPS`] steps, each
/// a whole step of channels (C a multiple of 64: 1x1 filters over 64 to 256 channels).
///
/// Measured on an H100 (every NHWC layer of three networks at batch 32 and 64, the TMA kernel
/// with and without persistent blocks wherever it applies, GPU time; `bench/results/conv.md`):
/// on ResNet-50's 1x1 layers of 64-256 input channels (1-4 steps) persistent blocks ran
/// 1.01-1.18x the kernel the rule took before (the TMA kernel at 4 steps, the `cp.async` one
/// below); on layers of 8 steps they ran 0.84-1.12x, of 16 or more 0.83-0.96x and on the 3x3
/// layers 0.78-1.06x (the tiles of 128 rows and fewer then lose their second block per SM to
/// the staged output, the 256 x 128 tile its fourth stage); MobileNetV2's pointwise layers
/// with C not a multiple of 64 (half-empty K steps) or tiles fitted to a narrow O ran
/// 0.62-0.97x. With an NCHW output (the NCHW route through NHWC, in the fair benchmark's
/// first run with persistent blocks) the same 1x1 layers ran 0.85-1.01x what they had before.
pub fn few_step_persistent(kernel: &ConvKernel, steps: usize) -> bool {
    matches!(kernel.input, DType::F16 | DType::BF16)
        && kernel.out_layout == ConvLayout::Nhwc
        && (1..=MAX_PERSISTENT_STEPS).contains(&steps)
        && kernel
            .shape
            .c
            .is_multiple_of(super::tma::step_channels(kernel.input))
}

/// The tall persistent tile for a layer of one or two K steps per filter tap (f16 or bf16, a
/// filter larger than 1x1 over 64 or 128 channels, an NHWC output, O a multiple of 64): 256 x
/// 64 where O is 64, else 192 x 128, four stages, persistent blocks; None for other layers,
/// where such a tile does not fit, where its tiles fill no more than one wave or leave much of
/// the last wave empty (`TALL_MIN_FILL`).
///
/// Measured on an H100 (`bench/results/conv.md`, batch 32 and 64, every tile forced with and
/// without persistent blocks, GPU time): such a layer's tile walks 9 steps, so a block's
/// epilogue and start are a large part of it, and a persistent block overlaps them with the
/// next tile's loads: VGG-16 conv1_2 and ResNet-50's `l1 3x3` 256 x 64 persistent 1.09x the
/// rule's 128 x 64 x 3, VGG-16 conv2_1 192 x 128 persistent 1.12-1.13x the rule's 128 x 128 x 3
/// (persistent blocks with the rule's own tiles ran 0.86-1.02x: two blocks per SM lose their
/// second to the staged output). Layers of 18 steps (C = 128) gained 0.98-1.08x (VGG-16
/// conv2_2 1.07-1.08x, ResNet-50's `l2 3x3` 0.98-1.03x, conv3_1 1.00-1.01x); at 36 steps and
/// more persistent blocks ran 0.90-1.0x, so those keep the rule's tile.
pub fn tap_step_persistent(kernel: &ConvKernel, steps: usize) -> Option<HopperTile> {
    let s = &kernel.shape;
    let taps = s.kh * s.kw;
    let wanted = matches!(kernel.input, DType::F16 | DType::BF16)
        && kernel.out_layout == ConvLayout::Nhwc
        && taps > 1
        && (steps == taps || steps == 2 * taps)
        && s.c * taps == steps * super::tma::step_channels(kernel.input)
        && s.o.is_multiple_of(64);
    if !wanted {
        return None;
    }
    let (bm, bn) = if s.o == 64 { (256, 64) } else { (192, 128) };
    let tile = HopperTile::new(bm, bn, 4)?
        .with_tma(true)?
        .with_persistent(kernel)?;
    let (x, y) = tile.tiles(s);
    (x * y > SMS * tile.resident() && tile.fill(s) >= TALL_MIN_FILL).then_some(tile)
}

/// The share of the block slots of its last wave [`tap_step_persistent`]'s tiles must fill
/// on average over their waves: VGG-16 conv1_2 at batch 1 (196 tiles of 256 x 64, 1.48 waves,
/// fill 0.74) ran 0.81x the rule's 128 x 64 x 3 with them, while 1.98-wave layers (ResNet-50's
/// `l2 3x3` at batch 64, fill 0.99) ran 1.02-1.03x.
const TALL_MIN_FILL: f64 = 0.9;

/// The most K steps of a pointwise layer whose wide tile gives way to persistent 192 x 128
/// blocks ([`wide_step_persistent`]).
pub const MAX_WIDE_PERSISTENT_STEPS: usize = 8;

/// Persistent 192 x 128 TMA blocks (four stages) for a 1x1 layer of more than
/// [`MAX_PERSISTENT_STEPS`] and at most [`MAX_WIDE_PERSISTENT_STEPS`] K steps (f16 or bf16,
/// C a multiple of 64, an NHWC output) whose planned `tile` is a TMA tile of 192 or more rows,
/// unsplit and not persistent, in more than one wave of blocks; None otherwise and where the
/// 192-row tiles would not outnumber the SMs. With 5-8 steps a tile's epilogue and the next
/// block's start are still a large part of its time, which a persistent block overlaps with
/// the next tile's loads; the 192-row tile keeps more of the SM's tensor cores busy than
/// narrower ones and fits its staged output beside four stages.
///
/// Measured on an H200 (`raw/2026-12-02-h200-conv-small-gemm/`, tiles forced, GPU time):
/// ResNet-50's `l3 1x1 512->256 @28` (8 steps) at batch 32 1.09x the rule's 192 x 128 (262
/// tiles, one per block) and at batch 64 1.07x its 256 x 128 (392 tiles); 128 x 128 and 64 x
/// 256 persistent 1.00-1.03x. Where the wide tile runs in one wave (`l4 1x1 512->2048 @7` at
/// batch 32: 112 tiles of 256 x 128) 192 x 128 persistent ran 0.70x, hence the wave condition.
pub fn wide_step_persistent(
    kernel: &ConvKernel,
    tile: &HopperTile,
    steps: usize,
) -> Option<HopperTile> {
    let s = &kernel.shape;
    let (x, y) = tile.tiles(s);
    let wanted = matches!(kernel.input, DType::F16 | DType::BF16)
        && kernel.out_layout == ConvLayout::Nhwc
        && s.kh * s.kw == 1
        && (MAX_PERSISTENT_STEPS + 1..=MAX_WIDE_PERSISTENT_STEPS).contains(&steps)
        && s.c.is_multiple_of(super::tma::step_channels(kernel.input))
        && tile.tma
        && !tile.nchw
        && !tile.persistent
        && tile.splits == 1
        && tile.bm >= 192
        && x * y > SMS * tile.resident();
    if !wanted {
        return None;
    }
    let t = HopperTile::new(192, 128, 4)?
        .with_tma(true)?
        .with_persistent(kernel)?;
    let (x, y) = t.tiles(s);
    (x * y > SMS).then_some(t)
}

/// The fewest output tiles per persistent block for a layer of one K step in tiles of 128
/// rows or fewer ([`persistent_plan`]): a block's tile is then one copy and its multiplies, so what the
/// persistent block saves (the next tile's copy overlapping this one's epilogue) comes once
/// per tile, while its costs (the staged output's shared memory, the TMA kernel's barriers
/// and producer set-up, against the two-stage `cp.async` kernel) come once per block.
/// Measured on an H200 (`raw/2026-12-02-h200-conv-small-gemm/`, GPU time): MobileNetV2's `pw
/// 1x1 64->384 @14` at batch 32 and 64, about 2.2 tiles per block, ran 1.16x and 1.18x in the
/// `cp.async` kernel (64 x 64 and 128 x 64, two stages) against persistent TMA blocks;
/// ResNet-50's `l1 1x1` layers on 56 x 56 planes at batch 32 and 64 (3-12 tiles per block)
/// were measured faster persistent (H100, `bench/results/conv.md`). The 192-row tile keeps
/// its persistent blocks at any count: on the same H200 `l1 1x1 64->256 @56` at batch 8 (262
/// tiles of 192 x 128 on 132 blocks) ran 0.89x in the `cp.async` kernel's 128 x 128.
pub const MIN_ONE_STEP_TILES_PER_BLOCK: f64 = 2.5;

/// `tile` (the TMA tile [`super::hopper_plan_with`] chose for `kernel`) with persistent
/// blocks where the rule takes them: [`few_step_persistent`] holds, the tile's columns are a
/// multiple of 64 (not one fitted to a narrow O) and there are more output tiles than the GPU
/// holds blocks of it at once (else no block would get a second tile), for a layer of one K
/// step in tiles of 128 rows or fewer at least [`MIN_ONE_STEP_TILES_PER_BLOCK`] times as
/// many; and
/// [`HopperTile::with_persistent`] takes it. `choice` overrides the rule: `Some(false)` never,
/// `Some(true)` wherever it takes the tile.
pub fn persistent_plan(kernel: &ConvKernel, tile: HopperTile, choice: Option<bool>) -> HopperTile {
    let (x, y) = tile.tiles(&kernel.shape);
    let steps = super::HopperK::of(kernel).steps(kernel);
    let slots = SMS * tile.resident();
    let enough = if steps == 1 && tile.bm <= 128 {
        (x * y) as f64 >= MIN_ONE_STEP_TILES_PER_BLOCK * slots as f64
    } else {
        x * y > slots
    };
    let wanted = choice
        .unwrap_or(few_step_persistent(kernel, steps) && tile.bn.is_multiple_of(64) && enough);
    if !wanted {
        return tile;
    }
    tile.with_persistent(kernel).unwrap_or(tile)
}

/// The choice `LAYOUTKIT_CONV_PERSISTENT` makes for [`persistent_plan`]: `0` never, `1`
/// wherever persistent blocks fit, anything else (or unset) the rule.
pub fn persistent_from_env() -> Option<bool> {
    match std::env::var("LAYOUTKIT_CONV_PERSISTENT").as_deref() {
        Ok("0") => Some(false),
        Ok("1") => Some(true),
        _ => None,
    }
}

/// Whether `tile`'s output tiles for `s` are walked channel tiles first: the `N / bn` tiles
/// of one pixel tile one after the other, so the blocks resident at a time read each input
/// pixel tile once while it is in L2 (the filter, a few MiB at most, stays there). Taken where
/// the blocks run in more than one wave, and for tiles of 192 rows or more; pixel tiles first
/// otherwise, as before. `LAYOUTKIT_CONV_RASTER=pixels` or `=channels` sets the order for
/// every tile, for comparison.
///
/// Measured on an H100 (`bench/results/conv.md`, every NHWC layer at batch 1, 8, 32 and 64,
/// the orders alternated): where the input is larger than L2 (ResNet-50's `l3 1x1 512->256`
/// at batch 64: 51 MB), pixel tiles first read it from memory once per channel tile: 1.38x
/// channel tiles first there, 1.03x the geometric mean of the layers at batch 64. In one wave
/// (every block at once) channel tiles first ran 0.86-0.95x on the 64 x 64 tiles of batch 1
/// and 8 and 1.06-1.09x on the 192 x 128 tiles of batch 8 (VGG-16 conv4_1, conv4_2, ResNet-50's
/// `l2 1x1/2`).
pub fn channel_tiles_first(tile: &HopperTile, s: &super::ConvShape) -> bool {
    match std::env::var("LAYOUTKIT_CONV_RASTER").as_deref() {
        Ok("pixels") => false,
        Ok("channels") => true,
        _ => {
            let (x, y) = tile.tiles(s);
            x * y * tile.splits > SMS * tile.resident() || tile.bm >= 192
        }
    }
}

/// The first pixel `m0` and output channel `n0` of output tile `tile` (a C expression) of
/// `hopper`'s tiles for `kernel`, in the order of [`channel_tiles_first`].
fn origin_of(tile: &str, hopper: &HopperTile, kernel: &ConvKernel) -> String {
    let (x, y) = hopper.tiles(&kernel.shape);
    let (bm, bn) = (hopper.bm, hopper.bn);
    if channel_tiles_first(hopper, &kernel.shape) {
        format!("const int m0 = ({tile} / {y}) * {bm}, n0 = ({tile} % {y}) * {bn};")
    } else {
        format!("const int m0 = ({tile} % {x}) * {bm}, n0 = ({tile} / {x}) * {bn};")
    }
}

/// The C statement naming a one-tile block's output tile (`m0`, `n0`) from its grid position
/// ([`HopperTile::grid`]: pixel tiles in x, channel tiles in y), in the order of
/// [`channel_tiles_first`] (the hardware starts blocks in x-fastest order; the tile is taken
/// from the block's rank in that order). Blocks in clusters ([`super::cluster`]) take the
/// grid's order: a cluster's blocks, consecutive in x, share their channel tile.
pub(super) fn tile_origin(tile: &HopperTile, kernel: &ConvKernel) -> String {
    let (x, y) = tile.tiles(&kernel.shape);
    if y == 1 || tile.cluster > 1 || !channel_tiles_first(tile, &kernel.shape) {
        return format!(
            "const int m0 = blockIdx.x * {}, n0 = blockIdx.y * {};",
            tile.bm, tile.bn
        );
    }
    format!(
        "const int tl = blockIdx.y * {x} + blockIdx.x; {}",
        origin_of("tl", tile, kernel)
    )
}

/// The C statements opening a persistent block's loop over its tiles: `tile` and this tile's
/// first pixel and output channel (`m0`, `n0`), in the order of [`channel_tiles_first`].
pub(super) fn tile_loop(tile: &HopperTile, kernel: &ConvKernel, indent: &str) -> String {
    let (x, y) = tile.tiles(&kernel.shape);
    format!(
        "{indent}for (int tile = blockIdx.x; tile < {}; tile += gridDim.x) {{\n{indent}  {}",
        x * y,
        origin_of("tile", tile, kernel)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conv::hopper_plan_with;

    /// A 1x1 layer's kernel with `out` outputs.
    fn kernel(n: usize, c: usize, hw: usize, o: usize, out: DType) -> ConvKernel {
        crate::conv::test_kernel(n, c, hw, o, 1, out)
    }

    #[test]
    fn persistent_tiles_fit_their_staged_output_and_keep_their_stages_where_they_can() {
        for out in [DType::F16, DType::F32] {
            let k = kernel(64, 512, 28, 256, out);
            for (bm, bn, stages) in [(256, 128, 4), (128, 128, 4), (128, 64, 4), (64, 64, 4)] {
                let t = HopperTile::new(bm, bn, stages)
                    .and_then(|t| t.with_tma(true))
                    .unwrap();
                let p = t
                    .with_persistent(&k)
                    .expect("every TMA tile fits persistent");
                assert!(p.persistent && p.stages >= 3 && p.stages <= stages, "{p:?}");
                assert!(p.shared_bytes() <= SMEM_PER_SM, "{p:?}");
                let passes = p.epilogue_passes;
                assert!(passes == 1 || passes == p.mr, "{p:?}");
                assert!(
                    p.epilogue_bytes >= staged_bytes(&k, &p, Staged::Output),
                    "{p:?}"
                );
                assert!(p.epilogue_offset() + p.epilogue_bytes + 1024 <= p.shared_bytes());
                // Tiles of up to 128 rows keep their stages with the whole tile staged.
                if bm <= 128 {
                    assert_eq!((p.stages, passes), (stages, 1), "{p:?}");
                }
                let split = t.with_splits(2).unwrap();
                assert_eq!(split.with_persistent(&k), None);
                assert_eq!(
                    HopperTile::new(bm, bn, stages).unwrap().with_persistent(&k),
                    None
                );
            }
        }
    }

    #[test]
    fn a_wide_tile_stages_half_its_rows_at_a_time_where_that_keeps_a_stage() {
        // NCHW f16 output of a 256 x 128 tile: 33 KiB in two passes leave room for four
        // stages, the whole 66 KiB for three.
        let mut k = kernel(64, 512, 28, 256, DType::F16);
        k.out_layout = ConvLayout::Nchw;
        let t = HopperTile::new(256, 128, 4)
            .and_then(|t| t.with_tma(true))
            .unwrap();
        let p = t.with_persistent(&k).unwrap();
        assert_eq!((p.stages, p.epilogue_passes), (4, 2), "{p:?}");
        // NHWC rows padded to 136 elements: the halves miss the fourth stage by 256 bytes,
        // so the whole tile is staged with three.
        let k = kernel(64, 512, 28, 256, DType::F16);
        let p = t.with_persistent(&k).unwrap();
        assert_eq!((p.stages, p.epilogue_passes), (3, 1), "{p:?}");
    }

    #[test]
    fn the_rule_takes_persistent_blocks_for_a_few_whole_steps_over_many_tiles() {
        let rule = |k: &ConvKernel| {
            let t = hopper_plan_with(k, true).with_tma(true).unwrap();
            persistent_plan(k, t, None).persistent
        };
        // ResNet-50's 1x1 layers of 64-256 channels at batch 64: 1-4 whole steps.
        for (c, hw, o) in [
            (64, 56, 256),
            (256, 56, 64),
            (128, 28, 512),
            (256, 14, 1024),
        ] {
            assert!(rule(&kernel(64, c, hw, o, DType::F16)), "{c}->{o} @{hw}");
        }
        // 8 steps; half-empty steps (C = 32); one wave of tiles; int8 (not measured).
        assert!(!rule(&kernel(64, 512, 28, 256, DType::F16)));
        assert!(!rule(&kernel(64, 32, 28, 192, DType::F16)));
        assert!(!rule(&kernel(1, 256, 28, 256, DType::F16)));
        let mut int8 = kernel(64, 256, 28, 256, DType::I32);
        int8.input = DType::I8;
        assert!(!rule(&int8));
        // An NCHW output (measured slower with persistent blocks).
        let mut nchw = kernel(64, 256, 14, 1024, DType::F16);
        nchw.out_layout = ConvLayout::Nchw;
        assert!(!rule(&nchw));
    }

    #[test]
    fn persistent_grids_hold_one_wave_and_cover_every_tile() {
        let k = kernel(64, 256, 28, 256, DType::F16);
        let t = hopper_plan_with(&k, true);
        let p = persistent_plan(&k, t, None);
        let (x, y) = t.tiles(&k.shape);
        assert!(x * y > SMS * t.resident(), "{t:?}");
        assert!(p.persistent, "{p:?}");
        assert_eq!(p.tiles(&k.shape), (x, y));
        assert_eq!(p.grid(&k.shape), ((SMS * p.resident()) as u32, 1, 1));
        // One wave's worth of tiles or fewer: no block would get a second tile.
        let small = kernel(1, 256, 28, 256, DType::F16);
        let t = hopper_plan_with(&small, true);
        assert!(!persistent_plan(&small, t, None).persistent);
        let forced = persistent_plan(&small, t, Some(true));
        let (x, y) = forced.tiles(&small.shape);
        assert_eq!(forced.grid(&small.shape), ((x * y) as u32, 1, 1));
        assert!(!persistent_plan(&k, t, Some(false)).persistent);
    }

    #[test]
    fn the_channel_tiles_of_a_pixel_tile_run_one_after_the_other() {
        // 50176 pixels x 256 channels in 256 x 128 tiles: 196 x 2 tiles.
        let k = kernel(64, 512, 28, 256, DType::F16);
        let t = HopperTile::new(256, 128, 4)
            .and_then(|t| t.with_tma(true))
            .unwrap();
        assert_eq!(t.tiles(&k.shape), (196, 2));
        let origin = "const int tl = blockIdx.y * 196 + blockIdx.x; const int m0 = (tl / 2) * 256, n0 = (tl % 2) * 128;";
        assert_eq!(tile_origin(&t, &k), origin);
        assert!(crate::conv::hopper_source(&k, &t).contains(origin));
        let p = t.with_persistent(&k).unwrap();
        assert!(tile_loop(&p, &k, "").contains(
            "for (int tile = blockIdx.x; tile < 392; tile += gridDim.x) {\n  const int m0 = (tile / 2) * 256, n0 = (tile % 2) * 128;"
        ));
        // One wave of blocks (batch 1: 7 x 4 tiles of 128 x 64) or one channel tile: pixel
        // tiles first; a 256-row tile takes channel tiles first in one wave too.
        let small = kernel(1, 512, 28, 256, DType::F16);
        let t128 = HopperTile::new(128, 64, 4)
            .and_then(|t| t.with_tma(true))
            .unwrap();
        assert_eq!(
            tile_origin(&t128, &small),
            "const int m0 = blockIdx.x * 128, n0 = blockIdx.y * 64;"
        );
        assert!(tile_origin(&t, &small).contains("const int m0 = (tl / 2) * 256"));
        let narrow = kernel(64, 512, 28, 128, DType::F16);
        assert_eq!(
            tile_origin(&t, &narrow),
            "const int m0 = blockIdx.x * 256, n0 = blockIdx.y * 128;"
        );
    }

    #[test]
    fn layers_of_one_step_per_tap_take_a_tall_persistent_tile() {
        let tall = |n, c, hw, o, k| {
            let kernel = crate::conv::test_kernel(n, c, hw, o, k, DType::F16);
            let steps = crate::conv::HopperK::of(&kernel).steps(&kernel);
            tap_step_persistent(&kernel, steps).map(|t| (t.bm, t.bn, t.persistent))
        };
        // VGG-16 conv1_2 (batch 64 and 8) and conv2_1, ResNet-50's l1 3x3 at batch 64.
        assert_eq!(tall(64, 64, 224, 64, 3), Some((256, 64, true)));
        assert_eq!(tall(8, 64, 224, 64, 3), Some((256, 64, true)));
        assert_eq!(tall(64, 64, 112, 128, 3), Some((192, 128, true)));
        assert_eq!(tall(64, 64, 56, 64, 3), Some((256, 64, true)));
        // Two steps per tap: VGG-16 conv2_2.
        assert_eq!(tall(64, 128, 112, 128, 3), Some((192, 128, true)));
        // 36 steps per tile (C = 256), 1x1 filters, O not a multiple of 64, one wave of
        // tiles or fewer (ResNet-50's l1 3x3 at batch 1 and 8: 13 and 98 tiles).
        assert_eq!(tall(64, 256, 56, 256, 3), None);
        assert_eq!(tall(64, 64, 56, 256, 1), None);
        assert_eq!(tall(64, 64, 56, 96, 3), None);
        assert_eq!(tall(1, 64, 56, 64, 3), None);
        assert_eq!(tall(8, 64, 56, 64, 3), None);
        // VGG-16 conv1_2 at batch 1: 196 tiles, 1.48 waves.
        assert_eq!(tall(1, 64, 224, 64, 3), None);
        // An NCHW output, int8.
        let mut nchw = crate::conv::test_kernel(64, 64, 56, 64, 3, DType::F16);
        nchw.out_layout = ConvLayout::Nchw;
        assert_eq!(tap_step_persistent(&nchw, 9), None);
        let mut int8 = crate::conv::test_kernel(64, 64, 56, 64, 3, DType::I32);
        int8.input = DType::I8;
        assert_eq!(tap_step_persistent(&int8, 9), None);
    }
}
