//! The TMA kernel with persistent blocks (`layoutkit_cuda::conv::persistent`) against the CPU
//! reference convolution: fixed problems with more output tiles than the GPU holds blocks
//! (so blocks walk several tiles and the last wave is partial), 1x1 (plain rows) and 3x3
//! (im2col), every TMA tile, f16, bf16 and int8 (i32 sums and requantised i8), NHWC and NCHW
//! outputs; and random problems on the rule's tile. Also the TMA kernel's tiles of three
//! warpgroups (192 rows), with and without persistent blocks and split K; the tiles of 192 and
//! 256 columns that fill the last wave (`conv::wave_fill`); stage rows of 64 and 32 bytes
//! (`conv::tma::row_bytes`). Skipped without a Hopper GPU unless LAYOUTKIT_REQUIRE_CUDA=1
//! (which then also requires sm_90).

use layoutkit_core::DType;
use layoutkit_cuda::conv::persistent::{persistent_plan, tap_step_persistent};
use layoutkit_cuda::conv::{hopper_plan_with, tma_applies, ConvKernel, ConvLayout, HopperTile};
use layoutkit_cuda::ConvPath;

mod common;
use common::{check, device, kernel_for, xorshift, Problem};

/// Whether this GPU runs the TMA kernel (panics under LAYOUTKIT_REQUIRE_CUDA=1 if not).
fn hopper(cuda: &layoutkit_cuda::Cuda) -> bool {
    let k = kernel_for(
        (1, 64, 16, 16, 64, 3, 1, 1, 1, 1),
        ConvLayout::Nhwc,
        DType::F16,
        DType::F16,
        false,
    );
    let on = matches!(cuda.conv_path(&k), Ok(ConvPath::Hopper(t)) if t.tma);
    if !on && std::env::var("LAYOUTKIT_REQUIRE_CUDA").as_deref() == Ok("1") {
        panic!("LAYOUTKIT_REQUIRE_CUDA=1: the TMA kernel needs an sm_90 GPU");
    }
    on
}

/// The kernel of `problem` reading NHWC activations and writing `out_layout`.
fn nhwc_input(
    problem: Problem,
    input: DType,
    out: DType,
    relu: bool,
    out_layout: ConvLayout,
) -> ConvKernel {
    ConvKernel {
        out_layout,
        ..kernel_for(problem, ConvLayout::Nhwc, input, out, relu)
    }
}

/// Every TMA tile no wider than O, with persistent blocks where they fit; and how many of
/// them give some block more than one tile.
fn persistent_paths(kernel: &ConvKernel) -> (Vec<ConvPath>, usize) {
    let (mut paths, mut walking) = (Vec::new(), 0);
    let tiles = [
        (256, 128, 4),
        (256, 64, 4),
        (128, 128, 4),
        (128, 128, 3),
        (64, 64, 4),
    ];
    for (bm, bn, stages) in tiles {
        if bn > kernel.shape.o.max(64) || (bm == 256 && bn == 128 && kernel.shape.o < 256) {
            continue;
        }
        let Some(t) = HopperTile::new(bm, bn, stages)
            .and_then(|t| t.with_tma(true))
            .and_then(|t| t.with_persistent(kernel))
        else {
            continue;
        };
        let (x, y) = t.tiles(&kernel.shape);
        if (t.grid(&kernel.shape).0 as usize) < x * y {
            walking += 1;
        }
        paths.push(ConvPath::Hopper(t));
    }
    (paths, walking)
}

/// TMA tiles `(bm, bn, stages)` for `kernel` as paths: each tile, with K in two splits where
/// `split`, and with persistent blocks where they fit.
fn tma_tile_paths(
    kernel: &ConvKernel,
    tiles: &[(usize, usize, usize)],
    split: bool,
) -> Vec<ConvPath> {
    let mut paths = Vec::new();
    for &(bm, bn, stages) in tiles {
        let t = HopperTile::new(bm, bn, stages)
            .and_then(|t| t.with_tma(true))
            .expect("a TMA tile");
        paths.push(ConvPath::Hopper(t));
        if split {
            paths.push(ConvPath::Hopper(t.with_splits(2).unwrap()));
        }
        if let Some(p) = t.with_persistent(kernel) {
            paths.push(ConvPath::Hopper(p));
        }
    }
    paths
}

#[test]
fn persistent_blocks_match_the_reference_on_fixed_problems() {
    let Some(cuda) = device() else { return };
    if !hopper(&cuda) {
        return;
    }
    use ConvLayout::*;
    let problems: [(Problem, DType, DType, ConvLayout); 8] = [
        // 1x1 as plain rows: 294 tiles of 128 x 128, 148 of 256 x 128.
        (
            (6, 64, 56, 56, 256, 1, 1, 0, 1, 1),
            DType::F16,
            DType::F16,
            Nhwc,
        ),
        (
            (6, 64, 56, 56, 256, 1, 1, 0, 1, 1),
            DType::BF16,
            DType::F32,
            Nhwc,
        ),
        (
            (6, 64, 56, 56, 256, 1, 1, 0, 1, 1),
            DType::F16,
            DType::F16,
            Nchw,
        ),
        (
            (6, 64, 56, 56, 256, 1, 1, 0, 1, 1),
            DType::I8,
            DType::I8,
            Nhwc,
        ),
        // 3x3 through im2col, O not a multiple of the tile, the last pixel tile partial.
        (
            (4, 64, 40, 40, 192, 3, 1, 1, 1, 1),
            DType::F16,
            DType::F16,
            Nhwc,
        ),
        (
            (4, 64, 41, 39, 200, 3, 1, 1, 1, 1),
            DType::BF16,
            DType::BF16,
            Nchw,
        ),
        (
            (4, 128, 30, 30, 256, 3, 1, 1, 1, 1),
            DType::I8,
            DType::I32,
            Nhwc,
        ),
        // Stride 2 with a 1x1 filter (im2col, not plain rows).
        (
            (16, 128, 56, 56, 256, 1, 2, 0, 1, 1),
            DType::F16,
            DType::F16,
            Nhwc,
        ),
    ];
    let (mut checked, mut walking) = (0, 0);
    for (i, (problem, input, out, out_layout)) in problems.into_iter().enumerate() {
        let kernel = nhwc_input(problem, input, out, i % 2 == 0, out_layout);
        assert!(tma_applies(&kernel), "{problem:?}");
        let (paths, w) = persistent_paths(&kernel);
        assert!(!paths.is_empty(), "{problem:?}");
        walking += w;
        checked += check(&cuda, &kernel, 11 + i as u64, &paths, "persistent");
    }
    assert!(
        walking >= 8,
        "only {walking} paths gave a block several tiles"
    );
    eprintln!("{checked} convolutions checked, {walking} with blocks walking several tiles");
}

#[test]
fn persistent_blocks_match_the_reference_on_random_problems() {
    let Some(cuda) = device() else { return };
    if !hopper(&cuda) {
        return;
    }
    let mut r = xorshift(9191);
    let mut pick = |n: usize| (r.next().unwrap() >> 33) as usize % n;
    let mut checked = 0;
    while checked < 16 {
        let k = [1, 3, 3, 5][pick(4)];
        let c = 64 * (1 + pick(2));
        let (stride, pad, dil) = (1 + pick(2), pick(2) * (k / 2), 1 + pick(2) * (k / 3));
        let (h, w) = (8 + pick(32), 8 + pick(32));
        let problem = (
            1 + pick(4),
            c,
            h,
            w,
            8 * (1 + pick(32)),
            k,
            stride,
            pad,
            dil,
            1,
        );
        if h + 2 * pad < dil * (k - 1) + 1 || w + 2 * pad < dil * (k - 1) + 1 {
            continue;
        }
        if problem.0 * h * w * problem.4 * c * k * k > 150_000_000 {
            continue;
        }
        let (input, out) = [
            (DType::F16, DType::F16),
            (DType::BF16, DType::BF16),
            (DType::F16, DType::F32),
        ][pick(3)];
        let relu = pick(2) == 0;
        let out_layout = [ConvLayout::Nhwc, ConvLayout::Nchw][pick(2)];
        let kernel = nhwc_input(problem, input, out, relu, out_layout);
        if !tma_applies(&kernel) {
            continue;
        }
        // The rule's tile or, every other problem, another TMA tile with persistent blocks.
        let tile = hopper_plan_with(&kernel, true)
            .with_tma(true)
            .expect("the plan's tile takes TMA");
        let planned = persistent_plan(&kernel, tile.with_splits(1).unwrap(), Some(true));
        let (others, _) = persistent_paths(&kernel);
        let path = match others.len() {
            n if n > 0 && checked % 2 == 1 => others[pick(n)],
            _ if planned.persistent => ConvPath::Hopper(planned),
            _ => continue,
        };
        checked += check(
            &cuda,
            &kernel,
            70 + checked as u64,
            &[path],
            "random persistent",
        );
    }
}

#[test]
fn three_warpgroup_tiles_match_the_reference() {
    let Some(cuda) = device() else { return };
    if !hopper(&cuda) {
        return;
    }
    use ConvLayout::*;
    let problems: [(Problem, DType, DType, ConvLayout); 4] = [
        (
            (2, 256, 14, 14, 512, 1, 1, 0, 1, 1),
            DType::F16,
            DType::F16,
            Nhwc,
        ),
        (
            (2, 128, 15, 13, 200, 3, 1, 1, 1, 1),
            DType::BF16,
            DType::F32,
            Nchw,
        ),
        (
            (3, 128, 16, 16, 256, 3, 2, 1, 1, 1),
            DType::I8,
            DType::I8,
            Nhwc,
        ),
        (
            (8, 64, 28, 28, 128, 1, 1, 0, 1, 1),
            DType::F16,
            DType::F16,
            Nchw,
        ),
    ];
    let mut checked = 0;
    for (i, (problem, input, out, out_layout)) in problems.into_iter().enumerate() {
        let kernel = nhwc_input(problem, input, out, i % 2 == 1, out_layout);
        let mut paths = Vec::new();
        for bn in [64, 128] {
            let t = HopperTile::new(192, bn, 4)
                .and_then(|t| t.with_tma(true))
                .expect("a TMA tile of 192 rows");
            assert!(!HopperTile::new(192, bn, 4).unwrap().loads_fit());
            paths.push(ConvPath::Hopper(t));
            paths.push(ConvPath::Hopper(t.with_splits(2).unwrap()));
            if let Some(p) = t.with_persistent(&kernel) {
                paths.push(ConvPath::Hopper(p));
            }
        }
        checked += check(&cuda, &kernel, 31 + i as u64, &paths, "192 rows");
    }
    eprintln!("{checked} convolutions checked");
}

#[test]
fn tall_persistent_tiles_of_layers_of_one_step_per_tap_match_the_reference() {
    let Some(cuda) = device() else { return };
    if !hopper(&cuda) {
        return;
    }
    // 3x3 over 64 channels: 256 tiles of 256 x 64 (O = 64) and of 192 x 128 (O = 128); over
    // 128 channels (two steps per tap): 256 tiles of 256 x 64. Each fills 97% of its two
    // waves (the rule takes no tile whose last wave is mostly empty).
    let problems: [(Problem, DType, DType); 3] = [
        ((17, 64, 62, 62, 64, 3, 1, 1, 1, 1), DType::F16, DType::F16),
        (
            (12, 64, 64, 64, 128, 3, 1, 1, 1, 1),
            DType::BF16,
            DType::F32,
        ),
        ((17, 128, 62, 62, 64, 3, 1, 1, 1, 1), DType::F16, DType::F16),
    ];
    let mut checked = 0;
    for (i, (problem, input, out)) in problems.into_iter().enumerate() {
        let kernel = nhwc_input(problem, input, out, i == 0, ConvLayout::Nhwc);
        let steps = 9 * problem.1 / 64;
        let tall = tap_step_persistent(&kernel, steps).expect("a tall persistent tile");
        assert_eq!(
            cuda.conv_path(&kernel).unwrap(),
            ConvPath::Hopper(tall),
            "{problem:?}"
        );
        let (x, y) = tall.tiles(&kernel.shape);
        assert!((tall.grid(&kernel.shape).0 as usize) < x * y, "{tall:?}");
        checked += check(
            &cuda,
            &kernel,
            41 + i as u64,
            &[ConvPath::Hopper(tall)],
            "tall",
        );
    }
    eprintln!("{checked} convolutions checked");
}

#[test]
fn tiles_that_fill_the_last_wave_match_the_reference() {
    let Some(cuda) = device() else { return };
    if !hopper(&cuda) {
        return;
    }
    // The tiles of `conv::wave_fill` other than 192 x 128: columns past O in the last channel
    // tile (O = 960 and 320 against 192 and 256), rows past the batch, 136 tiles of 64 x 256
    // (more than the SMs: persistent blocks walk several), int8 with i32 and requantised
    // outputs, an NCHW output.
    use ConvLayout::*;
    let problems: [(Problem, DType, DType, ConvLayout); 4] = [
        (
            (3, 160, 7, 7, 960, 1, 1, 0, 1, 1),
            DType::F16,
            DType::F16,
            Nhwc,
        ),
        (
            (11, 64, 14, 14, 1024, 1, 1, 0, 1, 1),
            DType::BF16,
            DType::F32,
            Nchw,
        ),
        (
            (4, 128, 10, 10, 320, 3, 2, 1, 1, 1),
            DType::I8,
            DType::I8,
            Nhwc,
        ),
        (
            (11, 128, 14, 14, 1024, 1, 1, 0, 1, 1),
            DType::I8,
            DType::I32,
            Nhwc,
        ),
    ];
    let mut checked = 0;
    for (i, (problem, input, out, out_layout)) in problems.into_iter().enumerate() {
        let kernel = nhwc_input(problem, input, out, i % 2 == 0, out_layout);
        assert!(tma_applies(&kernel), "{problem:?}");
        let paths = tma_tile_paths(&kernel, &[(128, 192, 4), (64, 256, 4), (64, 192, 4)], false);
        checked += check(&cuda, &kernel, 51 + i as u64, &paths, "wave fill");
    }
    eprintln!("{checked} convolutions checked");
}

#[test]
fn stage_rows_of_64_and_32_bytes_match_the_reference() {
    let Some(cuda) = device() else { return };
    if !hopper(&cuda) {
        return;
    }
    // A filter tap's channels in rows of 64 bytes (int8 C = 64, f16 C = 32 or 96) or 32 (f16
    // C = 16, int8 C = 32), and 1x1 filters whose pixels hold 48 or 32 bytes: strides,
    // dilation, a 5x5 filter, every output kind.
    use ConvLayout::*;
    let problems: [(Problem, DType, DType, ConvLayout, usize); 9] = [
        // The pointwise tiles (`conv::pointwise`): 256 x 96 with 32-byte rows, 256 x 32 with
        // 64-byte rows over 16 outputs.
        (
            (3, 16, 28, 28, 96, 1, 1, 0, 1, 1),
            DType::F16,
            DType::F16,
            Nhwc,
            32,
        ),
        (
            (3, 32, 28, 28, 16, 1, 1, 0, 1, 1),
            DType::BF16,
            DType::BF16,
            Nhwc,
            64,
        ),
        (
            (4, 64, 20, 20, 64, 3, 1, 1, 1, 1),
            DType::I8,
            DType::I32,
            Nhwc,
            64,
        ),
        (
            (3, 32, 17, 17, 96, 3, 2, 1, 1, 1),
            DType::F16,
            DType::F16,
            Nhwc,
            64,
        ),
        (
            (2, 16, 15, 15, 64, 5, 1, 2, 1, 1),
            DType::BF16,
            DType::F32,
            Nhwc,
            32,
        ),
        (
            (3, 96, 12, 12, 128, 3, 1, 2, 2, 1),
            DType::F16,
            DType::F16,
            Nchw,
            64,
        ),
        (
            (2, 32, 14, 14, 64, 3, 1, 1, 1, 1),
            DType::I8,
            DType::I8,
            Nhwc,
            32,
        ),
        (
            (4, 24, 14, 14, 144, 1, 1, 0, 1, 1),
            DType::F16,
            DType::F16,
            Nhwc,
            64,
        ),
        (
            (4, 16, 9, 9, 64, 1, 2, 0, 1, 1),
            DType::F16,
            DType::F32,
            Nhwc,
            32,
        ),
    ];
    let mut checked = 0;
    for (i, (problem, input, out, out_layout, row)) in problems.into_iter().enumerate() {
        let kernel = nhwc_input(problem, input, out, i % 2 == 1, out_layout);
        assert_eq!(
            layoutkit_cuda::conv::tma::row_bytes(&kernel),
            row,
            "{problem:?}"
        );
        assert!(tma_applies(&kernel), "{problem:?}");
        let tiles: Vec<_> = [
            (128, 64, 4),
            (64, 64, 4),
            (256, 64, 4),
            (192, 128, 4),
            (256, 96, 3),
            (256, 32, 4),
        ]
        .into_iter()
        .filter(|&(_, bn, _)| bn <= kernel.shape.o.next_multiple_of(32))
        .collect();
        let paths = tma_tile_paths(&kernel, &tiles, true);
        checked += check(&cuda, &kernel, 61 + i as u64, &paths, "narrow rows");
    }
    eprintln!("{checked} convolutions checked");
}
