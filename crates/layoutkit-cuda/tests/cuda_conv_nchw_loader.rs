//! The Hopper kernel reading NCHW in place through its producer warpgroup
//! (`layoutkit_cuda::conv::nchw_loader`) against the CPU reference convolution: fixed problems
//! that reach every branch of its loader (row widths that take 16-, 8-, 4- and 2-byte loads,
//! padding on both sides, stride 2, dilation, 1x1 to 5x5 filters, tiles spanning many rows
//! and images), each on the planned tile, every candidate tile and K split among blocks; and
//! random problems. Skipped without a Hopper GPU unless LAYOUTKIT_REQUIRE_CUDA=1 (which then
//! also requires sm_90).

use layoutkit_core::DType;
use layoutkit_cuda::conv::nchw_loader::Units;
use layoutkit_cuda::conv::{nchw_plan, nchw_unsupported_reason, ConvLayout, HopperTile};
use layoutkit_cuda::ConvPath;

mod common;
use common::{check, device, kernel_for, xorshift, Problem};

fn hopper(cuda: &layoutkit_cuda::Cuda) -> bool {
    let on = cuda
        .conv_path(&kernel_for(
            (1, 64, 16, 16, 64, 3, 1, 1, 1, 1),
            ConvLayout::Nchw,
            DType::F16,
            DType::F16,
            false,
        ))
        .map(|p| matches!(p, ConvPath::Hopper(t) if t.nchw))
        .unwrap_or(false);
    if !on && std::env::var("LAYOUTKIT_REQUIRE_CUDA").as_deref() == Ok("1") {
        panic!("LAYOUTKIT_REQUIRE_CUDA=1: the NCHW loader needs an sm_90 GPU");
    }
    on
}

/// The planned tile, every tile whose units fit, and the planned tile with K in 3 splits.
fn paths(kernel: &layoutkit_cuda::conv::ConvKernel) -> Vec<ConvPath> {
    let plan = nchw_plan(kernel);
    let mut all = vec![ConvPath::Hopper(plan)];
    for (bm, bn) in [(128, 256), (128, 128), (128, 64), (64, 64)] {
        if bn > kernel.shape.o.next_multiple_of(64)
            || Units::of(&kernel.shape, bm).per_thread
                > layoutkit_cuda::conv::nchw_loader::MAX_UNITS_PER_THREAD
        {
            continue;
        }
        if let Some(t) = HopperTile::new(bm, bn, 4).and_then(|t| t.with_nchw_loader()) {
            if t != plan {
                all.push(ConvPath::Hopper(t));
            }
        }
    }
    let steps = layoutkit_cuda::conv::nchw_loader::nchw_steps(&kernel.shape);
    if steps >= 6 {
        all.push(ConvPath::Hopper(plan.with_splits(3).expect("3 splits")));
    }
    all
}

#[test]
fn nchw_loader_matches_the_reference_on_fixed_problems() {
    let Some(cuda) = device() else { return };
    if !hopper(&cuda) {
        return;
    }
    let problems: [Problem; 10] = [
        (2, 64, 16, 16, 64, 3, 1, 1, 1, 1),  // W = 16: 16-byte loads
        (1, 64, 12, 12, 128, 3, 1, 1, 1, 1), // W = 12: 8-byte loads
        (2, 128, 10, 14, 96, 3, 1, 1, 1, 1), // W = 14: 4-byte loads, O not a tile
        (3, 64, 7, 7, 64, 3, 1, 1, 1, 1),    // W = 7: 2-byte loads, many rows per tile
        (2, 64, 9, 9, 64, 3, 2, 1, 1, 1),    // stride 2, odd W
        (1, 64, 20, 24, 64, 3, 2, 0, 1, 1),  // stride 2, no padding
        (1, 64, 13, 11, 64, 3, 1, 2, 2, 1),  // dilation 2
        (2, 64, 8, 8, 320, 1, 1, 0, 1, 1),   // 1x1, O past 256
        (1, 128, 11, 19, 64, 5, 1, 2, 1, 1), // 5x5
        (2, 64, 40, 40, 64, 3, 1, 1, 1, 1),  // rows wider than 8 units
    ];
    let mut checked = 0;
    for (i, problem) in problems.into_iter().enumerate() {
        for (input, out) in [(DType::F16, DType::F16), (DType::BF16, DType::F32)] {
            let kernel = kernel_for(problem, ConvLayout::Nchw, input, out, i % 2 == 0);
            assert!(
                nchw_unsupported_reason(&kernel).is_none(),
                "{problem:?}: {:?}",
                nchw_unsupported_reason(&kernel)
            );
            checked += check(&cuda, &kernel, 7 + i as u64, &paths(&kernel), "nchw loader");
        }
    }
    eprintln!("{checked} convolutions checked");
}

#[test]
fn nchw_loader_matches_the_reference_on_random_problems() {
    let Some(cuda) = device() else { return };
    if !hopper(&cuda) {
        return;
    }
    let mut r = xorshift(4242);
    let mut pick = |n: usize| (r.next().unwrap() >> 33) as usize % n;
    let mut checked = 0;
    while checked < 24 {
        let c = 64 * (1 + pick(3));
        let k = 1 + pick(5);
        let (stride, pad, dil) = (1 + pick(2), pick(3), 1 + pick(2));
        let (h, w) = (3 + pick(30), 3 + pick(30));
        if h + 2 * pad < dil * (k - 1) + 1 || w + 2 * pad < dil * (k - 1) + 1 {
            continue;
        }
        let problem = (1 + pick(3), c, h, w, 1 + pick(300), k, stride, pad, dil, 1);
        if problem.0 * h * w * problem.4 * c * k * k > 40_000_000 {
            continue;
        }
        let (input, out) = [
            (DType::F16, DType::F16),
            (DType::F16, DType::F32),
            (DType::BF16, DType::BF16),
        ][pick(3)];
        let kernel = kernel_for(problem, ConvLayout::Nchw, input, out, pick(2) == 0);
        if nchw_unsupported_reason(&kernel).is_some() {
            continue;
        }
        let path = ConvPath::Hopper(nchw_plan(&kernel));
        let picked = cuda.conv_path(&kernel).unwrap();
        assert_eq!(
            matches!(picked, ConvPath::Hopper(t) if t.nchw),
            layoutkit_cuda::conv::nchw_loader::nchw_preferred(&kernel)
                || layoutkit_cuda::conv::nchw_footprint::footprint_preferred(&kernel),
            "{problem:?}: {picked}"
        );
        checked += check(
            &cuda,
            &kernel,
            50 + checked as u64,
            &[path],
            "random nchw loader",
        );
    }
}

/// The planned footprint tile, every footprint candidate with and without persistent blocks,
/// and the first candidate with K in 3 splits.
fn footprint_paths(kernel: &layoutkit_cuda::conv::ConvKernel) -> Vec<ConvPath> {
    use layoutkit_cuda::conv::nchw_footprint::{footprint_candidates, footprint_plan};
    let plan = footprint_plan(kernel);
    let mut all = vec![plan];
    let candidates = footprint_candidates(kernel);
    for t in &candidates {
        all.push(*t);
        all.extend(t.with_persistent(kernel));
    }
    let steps = layoutkit_cuda::conv::nchw_loader::nchw_steps(&kernel.shape);
    if steps >= 6 {
        all.push(candidates[0].with_splits(3).expect("3 splits"));
    }
    all.dedup();
    let mut paths: Vec<ConvPath> = Vec::new();
    for t in all {
        if !paths.contains(&ConvPath::Hopper(t)) {
            paths.push(ConvPath::Hopper(t));
        }
    }
    paths
}

/// The footprint kernel (`layoutkit_cuda::conv::nchw_footprint`) on fixed problems reaching
/// each of its loads (8-, 4-, 2- and 1-pixel runs as H x W allows), tiles spanning rows and
/// images, padding on both sides and none, stride 2, dilation 2, 1x1 to 5x5, O past a tile,
/// persistent blocks walking several tiles; f16 and bf16 with f16, f32 and bf16 outputs.
#[test]
fn nchw_footprint_matches_the_reference_on_fixed_problems() {
    use layoutkit_cuda::conv::nchw_footprint::footprint_unsupported_reason;
    let Some(cuda) = device() else { return };
    if !hopper(&cuda) {
        return;
    }
    let problems: [Problem; 11] = [
        (2, 64, 16, 16, 64, 3, 1, 1, 1, 1),  // H x W = 256: 8-pixel loads
        (1, 64, 6, 10, 128, 3, 1, 1, 1, 1),  // 60: 4-pixel loads
        (2, 128, 10, 13, 96, 3, 1, 1, 1, 1), // 130: 2-pixel loads, O not a tile
        (3, 64, 7, 7, 64, 3, 1, 1, 1, 1),    // 49: 1-pixel loads, tiles across images
        (2, 64, 9, 9, 64, 3, 2, 1, 1, 1),    // stride 2, odd W
        (1, 64, 20, 24, 64, 3, 2, 0, 1, 1),  // stride 2, no padding
        (1, 64, 13, 11, 64, 3, 1, 2, 2, 1),  // dilation 2
        (2, 64, 8, 8, 320, 1, 1, 0, 1, 1),   // 1x1, O past 256
        (1, 128, 11, 19, 64, 5, 1, 2, 1, 1), // 5x5
        (2, 64, 40, 40, 192, 3, 1, 1, 1, 1), // many rows per footprint
        (8, 64, 48, 48, 64, 3, 1, 1, 1, 1),  // more tiles than SMs: persistent blocks
    ];
    let mut checked = 0;
    for (i, problem) in problems.into_iter().enumerate() {
        for (input, out) in [
            (DType::F16, DType::F16),
            (DType::BF16, DType::F32),
            (DType::BF16, DType::BF16),
        ] {
            let kernel = kernel_for(problem, ConvLayout::Nchw, input, out, i % 2 == 0);
            assert!(
                footprint_unsupported_reason(&kernel).is_none(),
                "{problem:?}: {:?}",
                footprint_unsupported_reason(&kernel)
            );
            checked += check(
                &cuda,
                &kernel,
                70 + i as u64,
                &footprint_paths(&kernel),
                "nchw footprint",
            );
        }
    }
    eprintln!("{checked} convolutions checked");
}

/// The footprint kernel on random problems (channels 64-192, filters 1-5, stride 1-2,
/// padding within the filter, dilation 1-2, planes 3-40), planned tile.
#[test]
fn nchw_footprint_matches_the_reference_on_random_problems() {
    use layoutkit_cuda::conv::nchw_footprint::{footprint_plan, footprint_unsupported_reason};
    let Some(cuda) = device() else { return };
    if !hopper(&cuda) {
        return;
    }
    let mut r = xorshift(777);
    let mut pick = |n: usize| (r.next().unwrap() >> 33) as usize % n;
    let mut checked = 0;
    while checked < 24 {
        let c = 64 * (1 + pick(3));
        let k = 1 + pick(5);
        let (stride, dil) = (1 + pick(2), 1 + pick(2));
        let pad = pick((k - 1) * dil + 1);
        let (h, w) = (3 + pick(38), 3 + pick(38));
        if h + 2 * pad < dil * (k - 1) + 1 || w + 2 * pad < dil * (k - 1) + 1 {
            continue;
        }
        let problem = (1 + pick(3), c, h, w, 1 + pick(300), k, stride, pad, dil, 1);
        if problem.0 * h * w * problem.4 * c * k * k > 40_000_000 {
            continue;
        }
        let (input, out) = [
            (DType::F16, DType::F16),
            (DType::F16, DType::F32),
            (DType::BF16, DType::BF16),
        ][pick(3)];
        let kernel = kernel_for(problem, ConvLayout::Nchw, input, out, pick(2) == 0);
        if footprint_unsupported_reason(&kernel).is_some() {
            continue;
        }
        let path = ConvPath::Hopper(footprint_plan(&kernel));
        checked += check(
            &cuda,
            &kernel,
            90 + checked as u64,
            &[path],
            "random nchw footprint",
        );
    }
}
