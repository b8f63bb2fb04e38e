//! int8 convolution on the GPU against the CPU reference, exactly: the Hopper kernel's
//! warpgroup MMA (`wgmma` k32 s8 x s8, i32 sums) on every tile, with K split among several
//! blocks (i32 partial sums), in its two K walks (one tap and 128 channels per step; 16-byte
//! chunks of 16 channels where C is not a multiple of 128), NHWC and NC/32HW32, with and
//! without ReLU, with the i32 sums as output or requantised to i8 (per-channel scales, bias,
//! ReLU, rounding half to even, saturation: the reference's bytes); and the `mma.sync`
//! kernel on the same problems where it takes them. Values span the whole int8 range, so
//! every sum is checked at full magnitude. Skipped without a GPU
//! unless LAYOUTKIT_REQUIRE_CUDA=1.

use layoutkit_core::DType;
use layoutkit_cuda::conv::{unsupported_reason, ConvLayout};
use layoutkit_cuda::ConvPath;

mod common;
use common::{check, device, hopper_paths, kernel_for, with_tma_variants, Problem};

/// Tiles forced on every problem: each row count, narrow and wide columns, two to five stages,
/// one group of multiplies in flight or none.
const TILES: [(usize, usize, usize, usize); 7] = [
    (128, 256, 4, 1),
    (256, 128, 4, 1),
    (128, 128, 3, 0),
    (128, 64, 5, 1),
    (64, 64, 4, 1),
    (64, 96, 2, 0),
    (128, 160, 3, 0),
];

#[test]
fn int8_hopper_kernel_is_exact() {
    let Some(cuda) = device() else { return };
    let cases: [Problem; 9] = [
        // n, c, h, w, o, k, stride, pad, dil, groups
        // One tap and 128 channels per step: 3x3, 1x1 and a strided 3x3.
        (2, 128, 9, 11, 64, 3, 1, 1, 1, 1),
        (1, 256, 7, 7, 96, 1, 1, 0, 1, 1),
        (2, 128, 15, 13, 256, 3, 2, 1, 1, 1),
        // 16-channel chunks: C = 16, 48, 64 (half a step per tap), 96 and 320, dilated, 5x5,
        // output channels that fill no tile.
        (1, 16, 12, 12, 40, 5, 1, 2, 1, 1),
        (2, 48, 9, 9, 72, 3, 1, 2, 2, 1),
        (2, 64, 14, 14, 64, 3, 1, 1, 1, 1),
        (1, 96, 8, 7, 130, 3, 2, 1, 1, 1),
        (1, 320, 7, 7, 32, 3, 1, 1, 1, 1),
        // A large K (4608 products of up to 128 x 128 per sum).
        (1, 512, 7, 7, 64, 3, 1, 1, 1, 1),
    ];
    let mut checked = 0;
    for (ci, &problem) in cases.iter().enumerate() {
        for layout in [ConvLayout::Nhwc, ConvLayout::Nc32hw32] {
            // The i32 sums with and without ReLU; requantised to i8 with a bias and ReLU, and
            // with neither.
            for (out, bias, relu) in [
                (DType::I32, false, false),
                (DType::I32, false, true),
                (DType::I8, true, true),
                (DType::I8, false, false),
            ] {
                let mut kernel = kernel_for(problem, layout, DType::I8, out, relu);
                kernel.bias = bias;
                let chosen = cuda.conv_path(&kernel);
                if layout == ConvLayout::Nc32hw32 && problem.4 % 32 != 0 {
                    assert!(matches!(chosen, Err(_) | Ok(ConvPath::Direct)));
                    continue;
                }
                let Ok(chosen @ ConvPath::Hopper(_)) = chosen else {
                    eprintln!("skipped: not a Hopper GPU ({chosen:?})");
                    return;
                };
                let mut paths = vec![chosen];
                paths.extend(hopper_paths(&TILES, |_| true));
                if unsupported_reason(&kernel).is_none() {
                    paths.push(ConvPath::TensorCore);
                }
                let paths = with_tma_variants(&kernel, paths, usize::MAX);
                checked += check(
                    &cuda,
                    &kernel,
                    70 + ci as u64,
                    &paths,
                    &format!("int8 {ci}"),
                );
            }
        }
    }
    eprintln!(
        "checked {checked} int8 convolutions exactly on {}",
        cuda.name()
    );
}
