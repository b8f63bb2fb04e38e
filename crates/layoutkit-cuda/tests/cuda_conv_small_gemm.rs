//! The tile rules for small GEMMs (few output tiles for the GPU's SMs, `conv::tile_rule`,
//! `conv::persistent`) on the problems they were made for, at the batch sizes where they
//! apply: the plan `conv_path` gives is asserted, then run against the CPU reference
//! convolution (f16 with f16 and f32 outputs, bf16); and the TMA kernel's tiles of 16-column
//! multiples. The rules:
//!
//! * the fallback tile unsplit where its blocks fill half the SMs or more (MobileNetV2's `pw
//!   1x1 960->160 @7` at batch 32: 64 x 64, no split of K);
//! * splits of fewer than 24 K steps giving way to the one-wave 64 x 128 tile in the TMA
//!   kernel (ResNet-50's `l4 3x3 512->512 @7` at batch 32);
//! * the 64-row tile fitted to a narrow O where it fills the SMs in one wave (`pw 1x1 576->96
//!   @14` at batch 32: 64 x 96);
//! * the one-wave tile as narrow as O divided among its column tiles (`pw 1x1 960->160 @7` at
//!   batch 64: 64 x 80);
//! * one-step layers in the `cp.async` kernel where persistent blocks of 128 rows or fewer
//!   would get fewer than 2.5 tiles each (`pw 1x1 64->384 @14` at batch 32);
//! * persistent 192 x 128 blocks for pointwise layers of 5-8 K steps in several waves
//!   (ResNet-50's `l3 1x1 512->256 @28` at batch 32).
//!
//! Skipped without a Hopper GPU unless LAYOUTKIT_REQUIRE_CUDA=1 (which then also requires
//! sm_90).

use layoutkit_core::DType;
use layoutkit_cuda::conv::{ConvKernel, ConvLayout, HopperTile};
use layoutkit_cuda::ConvPath;

mod common;
use common::{check, device, kernel_for, Problem};

/// The Hopper tile `conv_path` plans for `kernel`, or None off sm_90 (panics under
/// LAYOUTKIT_REQUIRE_CUDA=1 there).
fn planned(cuda: &layoutkit_cuda::Cuda, kernel: &ConvKernel) -> Option<HopperTile> {
    match cuda.conv_path(kernel) {
        Ok(ConvPath::Hopper(t)) => Some(t),
        other => {
            if std::env::var("LAYOUTKIT_REQUIRE_CUDA").as_deref() == Ok("1") {
                panic!("LAYOUTKIT_REQUIRE_CUDA=1: no Hopper path ({other:?})");
            }
            eprintln!("skipped: no Hopper path ({other:?})");
            None
        }
    }
}

/// Checks `problem` (NHWC) with each of `types` on the planned tile, after `expect` holds for
/// it.
fn rule_case(problem: Problem, types: &[(DType, DType)], expect: impl Fn(&HopperTile) -> bool) {
    let Some(cuda) = device() else { return };
    let mut checked = 0;
    for (i, &(input, out)) in types.iter().enumerate() {
        let kernel = kernel_for(problem, ConvLayout::Nhwc, input, out, i % 2 == 0);
        let Some(tile) = planned(&cuda, &kernel) else {
            return;
        };
        assert!(
            expect(&tile),
            "{problem:?} {input}->{out}: planned {tile:?}"
        );
        checked += check(
            &cuda,
            &kernel,
            31 + i as u64,
            &[ConvPath::Hopper(tile)],
            "small GEMM",
        );
    }
    eprintln!("{checked} convolutions checked");
}

const TYPES: [(DType, DType); 3] = [
    (DType::F16, DType::F16),
    (DType::F16, DType::F32),
    (DType::BF16, DType::BF16),
];

#[test]
fn the_fallback_tile_runs_unsplit_where_its_blocks_fill_half_the_sms() {
    rule_case((32, 960, 7, 7, 160, 1, 1, 0, 1, 1), &TYPES, |t| {
        (t.bm, t.bn, t.splits, t.tma) == (64, 64, 1, true)
    });
}

#[test]
fn short_splits_give_way_to_the_one_wave_tile() {
    rule_case((32, 512, 7, 7, 512, 3, 1, 1, 1, 1), &TYPES[..1], |t| {
        (t.bm, t.bn, t.splits, t.tma) == (64, 128, 1, true)
    });
}

#[test]
fn the_tile_fitted_to_a_narrow_o_takes_one_wave() {
    rule_case((32, 576, 14, 14, 96, 1, 1, 0, 1, 1), &TYPES, |t| {
        (t.bm, t.bn, t.splits, t.tma) == (64, 96, 1, true)
    });
}

#[test]
fn the_one_wave_tile_is_as_narrow_as_o_allows() {
    rule_case((64, 960, 7, 7, 160, 1, 1, 0, 1, 1), &TYPES, |t| {
        (t.bm, t.bn, t.splits, t.tma) == (64, 80, 1, true)
    });
}

#[test]
fn one_step_layers_of_few_tiles_per_block_run_in_the_cp_async_kernel() {
    rule_case((32, 64, 14, 14, 384, 1, 1, 0, 1, 1), &TYPES, |t| {
        !t.tma && !t.persistent && t.stages == 2
    });
}

#[test]
fn pointwise_layers_of_eight_steps_take_persistent_192_rows() {
    rule_case((32, 512, 28, 28, 256, 1, 1, 0, 1, 1), &TYPES[..2], |t| {
        (t.bm, t.bn, t.tma, t.persistent) == (192, 128, true, true)
    });
}

#[test]
fn tma_tiles_of_16_column_multiples_match_the_reference() {
    let Some(cuda) = device() else { return };
    let probe = kernel_for(
        (1, 64, 16, 16, 64, 3, 1, 1, 1, 1),
        ConvLayout::Nhwc,
        DType::F16,
        DType::F16,
        false,
    );
    if planned(&cuda, &probe).is_none_or(|t| !t.tma) {
        return;
    }
    let problems: [(Problem, DType, DType, ConvLayout); 4] = [
        // 1x1, O = 512: five column tiles of 112, the last one partial.
        (
            (4, 256, 7, 7, 512, 1, 1, 0, 1, 1),
            DType::F16,
            DType::F16,
            ConvLayout::Nhwc,
        ),
        (
            (4, 256, 7, 7, 512, 1, 1, 0, 1, 1),
            DType::BF16,
            DType::F32,
            ConvLayout::Nhwc,
        ),
        // 3x3 with padding, O = 200, an NCHW output.
        (
            (2, 128, 9, 9, 200, 3, 1, 1, 1, 1),
            DType::F16,
            DType::F16,
            ConvLayout::Nchw,
        ),
        (
            (3, 192, 11, 13, 176, 3, 2, 1, 1, 1),
            DType::F16,
            DType::F32,
            ConvLayout::Nhwc,
        ),
    ];
    let mut checked = 0;
    for (i, (problem, input, out, out_layout)) in problems.into_iter().enumerate() {
        let kernel = ConvKernel {
            out_layout,
            ..kernel_for(problem, ConvLayout::Nhwc, input, out, i % 2 == 0)
        };
        let mut paths = Vec::new();
        for (bm, bn, stages) in [(64, 112, 4), (128, 112, 4), (64, 80, 6), (64, 176, 4)] {
            let t = HopperTile::new(bm, bn, stages)
                .and_then(|t| t.with_tma(true))
                .expect("a TMA tile");
            paths.push(ConvPath::Hopper(t));
            paths.push(ConvPath::Hopper(t.with_splits(2).unwrap()));
            if let Some(p) = t.with_persistent(&kernel) {
                paths.push(ConvPath::Hopper(p));
            }
        }
        checked += check(&cuda, &kernel, 71 + i as u64, &paths, "16-column TMA tiles");
    }
    eprintln!("{checked} convolutions checked");
}
