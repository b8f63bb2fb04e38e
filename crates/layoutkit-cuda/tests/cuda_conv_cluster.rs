//! The TMA kernel in thread-block clusters of two blocks sharing the filter tile
//! (`conv::cluster`) against the CPU reference convolution: fixed problems with an odd count
//! of pixel tiles (a cluster's second block past the pixels), partial column tiles and a K
//! that is not a multiple of the step, then random problems the TMA kernel takes, each with
//! several tiles in clusters, unsplit and with K split in two.
//!
//! Skipped without a Hopper GPU unless LAYOUTKIT_REQUIRE_CUDA=1 (which then also requires
//! sm_90).

use layoutkit_core::DType;
use layoutkit_cuda::conv::cluster::cluster_plan;
use layoutkit_cuda::conv::{tma_applies, ConvKernel, ConvLayout, HopperTile};
use layoutkit_cuda::ConvPath;

mod common;
use common::{check, device, kernel_for, xorshift, Problem};

/// Whether the device runs the TMA kernel (sm_90); panics without it under
/// LAYOUTKIT_REQUIRE_CUDA=1.
fn hopper(cuda: &layoutkit_cuda::Cuda) -> bool {
    let probe = kernel_for(
        (1, 64, 16, 16, 64, 3, 1, 1, 1, 1),
        ConvLayout::Nhwc,
        DType::F16,
        DType::F16,
        false,
    );
    let ok = matches!(cuda.conv_path(&probe), Ok(ConvPath::Hopper(t)) if t.tma);
    if !ok && std::env::var("LAYOUTKIT_REQUIRE_CUDA").as_deref() == Ok("1") {
        panic!("LAYOUTKIT_REQUIRE_CUDA=1: no TMA kernel on this device");
    }
    ok
}

/// Tiles in clusters of two (`bm x bn x stages`), unsplit and in two splits of K.
fn cluster_paths(tiles: &[(usize, usize, usize)]) -> Vec<ConvPath> {
    let mut paths = Vec::new();
    for &(bm, bn, stages) in tiles {
        let t = HopperTile::new(bm, bn, stages)
            .and_then(|t| t.with_tma(true))
            .and_then(|t| t.with_cluster(2))
            .expect("a TMA tile in clusters");
        paths.push(ConvPath::Hopper(t));
        paths.push(ConvPath::Hopper(t.with_splits(2).unwrap()));
    }
    paths
}

#[test]
fn cluster_tiles_match_the_reference_on_odd_pixel_tiles_and_partial_columns() {
    let Some(cuda) = device() else { return };
    if !hopper(&cuda) {
        return;
    }
    let problems: [(Problem, DType, DType, ConvLayout); 5] = [
        // 1x1, 7 x 7 at batch 5: 245 pixels, 4 tiles of 64 (2 clusters) or 3 of 128 (one
        // block past them); O = 200: a partial column tile of 112 and of 128.
        (
            (5, 256, 7, 7, 200, 1, 1, 0, 1, 1),
            DType::F16,
            DType::F16,
            ConvLayout::Nhwc,
        ),
        // C = 200: the last K step's channels past C read zeros; an f32 output.
        (
            (3, 200, 9, 9, 96, 1, 1, 0, 1, 1),
            DType::BF16,
            DType::F32,
            ConvLayout::Nhwc,
        ),
        // 3x3 with padding through im2col, 9 pixel tiles of 64, an NCHW output.
        (
            (2, 128, 17, 17, 144, 3, 1, 1, 1, 1),
            DType::F16,
            DType::F16,
            ConvLayout::Nchw,
        ),
        // Stride 2, C = 96 (rows of 64 bytes on a 3x3 filter are not what the rule takes;
        // 128-byte rows with channels past C as zeros where it is a 1x1).
        (
            (3, 192, 11, 13, 176, 3, 2, 1, 1, 1),
            DType::F16,
            DType::F32,
            ConvLayout::Nhwc,
        ),
        // One K step: fewer steps than stages.
        (
            (3, 64, 10, 10, 48, 1, 1, 0, 1, 1),
            DType::F16,
            DType::F16,
            ConvLayout::Nhwc,
        ),
    ];
    let mut checked = 0;
    for (i, (problem, input, out, out_layout)) in problems.into_iter().enumerate() {
        let kernel = ConvKernel {
            out_layout,
            ..kernel_for(problem, ConvLayout::Nhwc, input, out, i % 2 == 0)
        };
        let paths = cluster_paths(&[(64, 112, 4), (128, 128, 4), (64, 48, 6), (192, 64, 4)]);
        checked += check(&cuda, &kernel, 91 + i as u64, &paths, "cluster tiles");
    }
    eprintln!("{checked} convolutions checked");
}

#[test]
fn cluster_tiles_match_the_reference_on_random_problems() {
    let Some(cuda) = device() else { return };
    if !hopper(&cuda) {
        return;
    }
    let mut r = xorshift(1203);
    let mut pick = |n: usize| (r.next().unwrap() >> 33) as usize % n;
    let (mut checked, mut tried) = (0, 0);
    while checked < 48 {
        tried += 1;
        assert!(tried < 10_000, "too few problems the TMA kernel takes");
        let c = [8 * (1 + pick(40)), 32 * (1 + pick(10))][pick(2)];
        let o = 1 + pick(300);
        let k = [1, 1, 3, 5][pick(4)];
        let (stride, pad, dil) = (1 + pick(2), pick(3), 1 + pick(2));
        let (h, w) = (4 + pick(20), 4 + pick(20));
        if h + 2 * pad < dil * (k - 1) + 1 || w + 2 * pad < dil * (k - 1) + 1 {
            continue;
        }
        let problem = (1 + pick(4), c, h, w, o, k, stride, pad, dil, 1);
        if problem.0 * h * w * o * c * k * k > 40_000_000 {
            continue;
        }
        let (input, out) = [
            (DType::F16, DType::F16),
            (DType::F16, DType::F32),
            (DType::BF16, DType::BF16),
        ][pick(3)];
        let kernel = kernel_for(problem, ConvLayout::Nhwc, input, out, pick(2) == 0);
        if !tma_applies(&kernel) {
            continue;
        }
        let row = layoutkit_cuda::conv::tma::row_bytes(&kernel);
        let bn = 16 * (2 + pick(15));
        let bm = [64, 128, 192][pick(3)];
        let Some(t) = HopperTile::new(bm, bn, 4)
            .and_then(|t| t.with_tma(true))
            .and_then(|t| t.with_k_bytes(row))
            .and_then(|t| t.with_cluster(2))
        else {
            continue;
        };
        let paths = [
            ConvPath::Hopper(t),
            ConvPath::Hopper(t.with_splits(2).unwrap()),
        ];
        checked += check(
            &cuda,
            &kernel,
            tried as u64,
            &paths,
            &format!("cluster {bm}x{bn} on {problem:?}"),
        );
    }
    eprintln!("{checked} random convolutions checked in clusters");
}

#[test]
fn the_cluster_plan_tile_of_l4_1x1_2048_to_512_matches_the_reference() {
    let Some(cuda) = device() else { return };
    if !hopper(&cuda) {
        return;
    }
    let kernel = kernel_for(
        (32, 2048, 7, 7, 512, 1, 1, 0, 1, 1),
        ConvLayout::Nhwc,
        DType::F16,
        DType::F16,
        true,
    );
    let path = cuda.conv_path(&kernel).unwrap();
    let ConvPath::Hopper(planned) = path else {
        panic!("planned {path:?}")
    };
    let steps = layoutkit_cuda::conv::HopperK::of(&kernel).steps(&kernel);
    let t = cluster_plan(&kernel, &planned, steps).expect("a tile in clusters");
    assert_eq!((t.bm, t.bn, t.cluster, t.splits), (64, 112, 2, 1), "{t:?}");
    let checked = check(
        &cuda,
        &kernel,
        7,
        &[ConvPath::Hopper(t)],
        "cluster_plan's tile",
    );
    eprintln!("{checked} convolutions checked");
}
