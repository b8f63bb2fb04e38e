//! Grouped convolutions as super-groups on the Hopper kernel (`conv::grouped_wgmma`) against
//! the CPU reference convolution: ResNeXt-50 32x4d's groups of 4 to 32 channels (the
//! block-diagonal filter written by the pass), groups of 64 and 128 channels (the grouped
//! filter read as it is), RegNet's groups of 24 and 48 (super-groups of 192 channels, the last
//! one partly past C), a channel multiplier of 2, stride 2, dilation 2, 1x1 and 5x5
//! filters, rows that do not fill a tile; f16 with f16 and f32 outputs, bf16, NCHW output;
//! each with the rule's tile and with tiles of 64, 128 and 256 rows and 32 or 64 columns,
//! loaded by `cp.async` and by TMA.
//! Skipped without an sm_90 GPU unless LAYOUTKIT_REQUIRE_CUDA=1 (then an error on other GPUs).

use layoutkit_core::DType;
use layoutkit_cuda::conv::grouped_wgmma::{
    grouped_tile_reason, grouped_wgmma_preferred, grouped_wgmma_tile,
    grouped_wgmma_unsupported_reason, supergroup_channels, MIN_SUPERGROUP_MACS,
};
use layoutkit_cuda::conv::{ConvKernel, ConvLayout, HopperTile};
use layoutkit_cuda::ConvPath;

mod common;
use common::{check, device, kernel_for, Problem};

/// Tiles tried beside the rule's (`(bm, bn, stages, in flight)`), where they fit; the last
/// two loading by TMA.
const TILES: [(usize, usize, usize, usize); 4] = [
    (64, 64, 4, 1),
    (128, 32, 3, 0),
    (256, 64, 4, 1),
    (128, 64, 5, 1),
];

#[test]
fn super_groups_match_the_reference() {
    let Some(cuda) = device() else { return };
    // A dense problem runs on the Hopper kernel only on sm_90 GPUs.
    let dense = (1, 64, 8, 8, 64, 3, 1, 1, 1, 1);
    let dense = kernel_for(dense, ConvLayout::Nhwc, DType::F16, DType::F16, false);
    if !matches!(cuda.conv_path(&dense), Ok(ConvPath::Hopper(_))) {
        if std::env::var("LAYOUTKIT_REQUIRE_CUDA").as_deref() == Ok("1") {
            panic!("LAYOUTKIT_REQUIRE_CUDA=1: super-groups need an sm_90 GPU");
        }
        eprintln!("skipped: super-groups run on sm_90 GPUs");
        return;
    }
    let cases: [Problem; 16] = [
        (2, 128, 14, 14, 128, 3, 1, 1, 1, 32),
        (2, 256, 9, 11, 256, 3, 2, 1, 1, 32),
        (1, 512, 7, 7, 512, 3, 1, 1, 1, 32),
        (1, 1024, 7, 7, 1024, 3, 1, 1, 1, 32),
        (2, 256, 10, 10, 512, 3, 1, 1, 1, 32),
        (1, 256, 12, 12, 256, 3, 1, 2, 2, 4),
        (2, 512, 8, 8, 512, 3, 1, 1, 1, 4),
        (3, 128, 8, 8, 128, 1, 1, 0, 1, 16),
        (1, 128, 13, 13, 64, 5, 2, 2, 1, 2),
        (2, 64, 9, 9, 64, 3, 1, 1, 1, 8),
        (1, 192, 6, 6, 192, 3, 1, 1, 1, 3),
        // RegNet's groups of 24 and 48 (super-groups of 192 channels), C not a multiple of
        // the super-group (its last one partly past C), a 1x1 filter with a partial one.
        (1, 48, 14, 14, 48, 3, 1, 1, 1, 2),
        (2, 96, 9, 9, 96, 3, 2, 1, 1, 4),
        (1, 240, 7, 7, 240, 3, 1, 1, 1, 10),
        (1, 384, 7, 7, 384, 3, 1, 1, 1, 8),
        (2, 96, 10, 10, 96, 1, 1, 0, 1, 3),
    ];
    let mut checked = 0;
    for (ci, &problem) in cases.iter().enumerate() {
        let kinds = [
            (DType::F16, DType::F16, true, ConvLayout::Nhwc),
            (DType::F16, DType::F32, false, ConvLayout::Nhwc),
            (DType::BF16, DType::BF16, true, ConvLayout::Nhwc),
            (DType::F16, DType::F16, false, ConvLayout::Nchw),
        ];
        for (input, out, relu, out_layout) in kinds {
            let kernel = ConvKernel {
                out_layout,
                ..kernel_for(problem, ConvLayout::Nhwc, input, out, relu)
            };
            let why = grouped_wgmma_unsupported_reason(&kernel);
            assert!(why.is_none(), "{problem:?}: {why:?}");
            // The path follows the rule: bf16 as super-groups at any size (no other kernel
            // takes it); f16 from 50 M multiply-adds in the measured shapes.
            let path = cuda.conv_path(&kernel).unwrap();
            let grouped = matches!(path, ConvPath::Hopper(t) if t.group_channels > 0);
            let want = grouped_wgmma_preferred(&kernel);
            assert!(
                want || input != DType::BF16,
                "{problem:?}: bf16 has no other kernel"
            );
            assert!(!want || input == DType::BF16 || kernel.macs() >= MIN_SUPERGROUP_MACS);
            assert_eq!(grouped, want, "{problem:?} {input}: {path}");
            let mut paths = vec![ConvPath::Hopper(grouped_wgmma_tile(&kernel))];
            for ((bm, bn, st, f), tma) in TILES.into_iter().zip([false, false, true, true]) {
                let tile = HopperTile::new(bm, bn, st)
                    .and_then(|t| t.with_in_flight(f))
                    .and_then(|t| t.with_group_channels(supergroup_channels(&kernel)))
                    .and_then(|t| t.with_tma(tma))
                    .filter(|t| grouped_tile_reason(&kernel, t).is_none());
                paths.extend(tile.map(ConvPath::Hopper));
            }
            checked += check(
                &cuda,
                &kernel,
                300 + ci as u64,
                &paths,
                &format!("super-groups {problem:?}"),
            );
        }
    }
    eprintln!(
        "checked {checked} super-group convolutions on {}",
        cuda.name()
    );
}
