//! The Hopper kernel reading NHWC activations through footprints
//! (`layoutkit_cuda::conv::nhwc_footprint`) against the CPU reference convolution: int8
//! exactly (i32 sums with and without ReLU, requantised to i8 with a bias and ReLU), f16 and
//! bf16 within the usual bound; fixed problems (64- and 128-byte rows, several rows of
//! channels per pixel, padding on both sides and none, stride 2, dilation 2, 1x1 to 5x5
//! filters, tiles across rows and images, O past a tile, many rows per footprint, more tiles
//! than SMs for persistent blocks), each on the planned tile, every candidate tile, persistent
//! blocks and K split among blocks; and random problems on the planned tile. Skipped without a
//! Hopper GPU unless LAYOUTKIT_REQUIRE_CUDA=1 (which then also requires sm_90).

use layoutkit_core::DType;
use layoutkit_cuda::conv::nhwc_footprint::{
    nhwc_footprint_candidates, nhwc_footprint_plan, nhwc_footprint_steps,
    nhwc_footprint_unsupported_reason,
};
use layoutkit_cuda::conv::{ConvKernel, ConvLayout};
use layoutkit_cuda::ConvPath;

mod common;
use common::{check, device, kernel_for, xorshift, Problem};

fn hopper(cuda: &layoutkit_cuda::Cuda) -> bool {
    let k = kernel_for(
        (1, 64, 16, 16, 64, 3, 1, 1, 1, 1),
        ConvLayout::Nhwc,
        DType::I8,
        DType::I32,
        false,
    );
    let on = cuda
        .conv_path(&k)
        .map(|p| matches!(p, ConvPath::Hopper(_)))
        .unwrap_or(false);
    if !on && std::env::var("LAYOUTKIT_REQUIRE_CUDA").as_deref() == Ok("1") {
        panic!("LAYOUTKIT_REQUIRE_CUDA=1: the footprint kernel needs an sm_90 GPU");
    }
    on
}

/// The planned tile, every candidate, the first `persistent` candidates with persistent
/// blocks, and the first candidate with K in 3 splits.
fn paths(kernel: &ConvKernel, persistent: usize) -> Vec<ConvPath> {
    let plan = nhwc_footprint_plan(kernel);
    let mut all = vec![plan];
    let candidates = nhwc_footprint_candidates(kernel);
    for (i, t) in candidates.iter().enumerate() {
        all.push(*t);
        if i < persistent {
            all.extend(t.with_persistent(kernel));
        }
    }
    if nhwc_footprint_steps(kernel) >= 6 {
        all.push(candidates[0].with_splits(3).expect("3 splits"));
    }
    let mut paths: Vec<ConvPath> = Vec::new();
    for t in all {
        if !paths.contains(&ConvPath::Hopper(t)) {
            paths.push(ConvPath::Hopper(t));
        }
    }
    paths
}

const FIXED: [Problem; 12] = [
    // n, c, h, w, o, k, stride, pad, dil, groups
    (2, 64, 16, 16, 64, 3, 1, 1, 1, 1), // int8: 64-byte rows, one per pixel
    (1, 128, 9, 11, 96, 3, 1, 1, 1, 1), // 128-byte rows, O not a tile
    (3, 64, 7, 7, 64, 3, 1, 1, 1, 1),   // tiles across images
    (1, 64, 20, 24, 64, 3, 1, 0, 1, 1), // no padding
    (2, 64, 9, 9, 64, 3, 2, 1, 1, 1),   // stride 2, odd W
    (1, 64, 13, 11, 64, 3, 1, 2, 2, 1), // dilation 2
    (1, 256, 11, 19, 64, 5, 1, 2, 1, 1), // 5x5, two rows of channels (int8)
    (2, 192, 10, 12, 320, 3, 1, 1, 1, 1), // three 64-byte rows (int8), O past 256
    (2, 64, 40, 40, 192, 3, 1, 1, 1, 1), // many rows per footprint
    (8, 64, 48, 48, 64, 3, 1, 1, 1, 1), // more tiles than SMs: persistent blocks
    (2, 128, 8, 8, 128, 1, 1, 0, 1, 1), // 1x1
    (4, 64, 56, 56, 64, 3, 1, 1, 1, 1), // l1's planes, 196 tiles of 64 rows
];

/// Checks the fixed problems with `input -> out` (ReLU on every other problem).
fn fixed(input: DType, out: DType, persistent: usize, what: &str) {
    let Some(cuda) = device() else { return };
    if !hopper(&cuda) {
        return;
    }
    let mut checked = 0;
    for (i, problem) in FIXED.into_iter().enumerate() {
        let kernel = kernel_for(problem, ConvLayout::Nhwc, input, out, i % 2 == 0);
        assert!(
            nhwc_footprint_unsupported_reason(&kernel).is_none(),
            "{problem:?}: {:?}",
            nhwc_footprint_unsupported_reason(&kernel)
        );
        checked += check(
            &cuda,
            &kernel,
            30 + i as u64,
            &paths(&kernel, persistent),
            what,
        );
    }
    eprintln!("{what}: {checked} convolutions checked");
}

#[test]
fn int8_sums_are_exact_on_fixed_problems() {
    fixed(DType::I8, DType::I32, 3, "footprint int8 i32");
}

#[test]
fn int8_requantised_outputs_are_exact_on_fixed_problems() {
    fixed(DType::I8, DType::I8, 2, "footprint int8 i8");
}

#[test]
fn f16_and_bf16_match_the_reference_on_fixed_problems() {
    fixed(DType::F16, DType::F16, 1, "footprint f16");
    fixed(DType::BF16, DType::F32, 1, "footprint bf16");
}

/// Random problems (channels 64-256, filters 1-5, stride 1-2, padding within the filter,
/// dilation 1-2, planes 3-40, O 1-300), int8 with both outputs and f16, the planned tile.
#[test]
fn random_problems_match_the_reference() {
    let Some(cuda) = device() else { return };
    if !hopper(&cuda) {
        return;
    }
    let mut r = xorshift(2026);
    let mut pick = |n: usize| (r.next().unwrap() >> 33) as usize % n;
    let mut checked = 0;
    while checked < 30 {
        let c = 64 * (1 + pick(4));
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
            (DType::I8, DType::I32),
            (DType::I8, DType::I8),
            (DType::F16, DType::F16),
        ][pick(3)];
        let kernel = kernel_for(problem, ConvLayout::Nhwc, input, out, pick(2) == 0);
        if nhwc_footprint_unsupported_reason(&kernel).is_some() {
            continue;
        }
        let path = ConvPath::Hopper(nhwc_footprint_plan(&kernel));
        checked += check(
            &cuda,
            &kernel,
            500 + checked as u64,
            &[path],
            "random footprint",
        );
    }
}
