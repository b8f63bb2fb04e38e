//! The tensor-core convolution against the CPU reference convolution: problems with stride,
//! padding, dilation, kernels 1-7, output channels that are not multiples of the tile, rows
//! that do not fill a tile, each of the tile shapes; activations and output in NHWC, NCHW and
//! NC/32HW32; f16 inputs with f32 and f16 outputs, bias and ReLU (relative error under 1e-2,
//! issue 7's bound for f16 inputs), bf16 inputs with f32 and bf16 outputs (the same bound),
//! int8 inputs with i32 outputs and ReLU (exact); groups and depthwise in the direct kernel.
//! On sm_90 the problems the Hopper (wgmma) kernel takes (any channel count, the stem's three
//! included) also run with each of its tiles, with K split among several blocks, and in the
//! `mma.sync` kernel where it takes them; NHWC problems also written NCHW. Skipped without a
//! GPU unless LAYOUTKIT_REQUIRE_CUDA=1; the source test needs no GPU. (NCHW activations'
//! route through NHWC: `cuda_conv_nchw.rs`.)

use layoutkit_core::conv::Conv2d;
use layoutkit_core::DType;
use layoutkit_cuda::conv::{
    conv_source, direct_source, direct_unsupported_reason, hopper_unsupported_reason,
    out_layout_reason, unsupported_reason, ConvKernel, ConvLayout, ConvShape,
};
use layoutkit_cuda::{ConvPath, Cuda};

mod common;
use common::{check, device, hopper_paths, kernel_for, with_tma_variants, xorshift, Problem};

/// Every Hopper tile shape, with three to five stages, one group of multiplies in flight or
/// none.
const HOPPER_TILES: [(usize, usize, usize, usize); 7] = [
    (256, 64, 4, 1),
    (128, 64, 3, 0),
    (128, 256, 4, 1),
    (128, 128, 5, 1),
    (64, 128, 4, 1),
    (64, 64, 3, 1),
    (128, 128, 3, 0),
];

#[test]
fn the_kernel_source_names_its_contract() {
    let s = ConvShape {
        n: 1,
        h: 8,
        w: 8,
        c: 64,
        o: 40,
        kh: 3,
        kw: 3,
        oh: 8,
        ow: 8,
        conv: Conv2d {
            padding: [1, 1],
            ..Conv2d::default()
        },
    };
    let kernel = ConvKernel {
        shape: s,
        layout: ConvLayout::Nhwc,
        out_layout: ConvLayout::Nhwc,
        input: DType::F16,
        out: DType::F16,
        bias: true,
        relu: true,
    };
    let src = conv_source(&kernel);
    assert!(src.contains("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"));
    let bf16 = ConvKernel {
        input: DType::BF16,
        out: DType::BF16,
        ..kernel
    };
    assert!(unsupported_reason(&bf16).is_none());
    assert!(conv_source(&bf16).contains("m16n8k16.row.col.f32.bf16.bf16.f32"));
    assert!(conv_source(&bf16).contains("(unsigned int)f2bf(r0)"));
    assert!(src.contains("(v0 < 0.f ? 0.f : v0)"));
    assert!(unsupported_reason(&kernel).is_none());
    let odd = ConvKernel {
        shape: ConvShape { c: 48, ..s },
        ..kernel
    };
    assert!(unsupported_reason(&odd).unwrap().contains("multiple of 32"));
    // int8: i32 sums with m16n8k32, 64 channels per step, no bias, not NCHW.
    let int8 = ConvKernel {
        input: DType::I8,
        out: DType::I32,
        bias: false,
        layout: ConvLayout::Nc32hw32,
        out_layout: ConvLayout::Nc32hw32,
        shape: ConvShape { o: 64, ..s },
        ..kernel
    };
    assert!(unsupported_reason(&int8).is_none());
    assert!(conv_source(&int8).contains("m16n8k32.row.col.s32.s8.s8.s32"));
    assert!(unsupported_reason(&ConvKernel { bias: true, ..int8 }).is_some());
    assert!(unsupported_reason(&ConvKernel {
        layout: ConvLayout::Nchw,
        out_layout: ConvLayout::Nchw,
        ..int8
    })
    .is_some());
    // NC/32HW32 output blocks need whole blocks of output channels.
    assert!(unsupported_reason(&ConvKernel {
        layout: ConvLayout::Nc32hw32,
        out_layout: ConvLayout::Nc32hw32,
        ..kernel
    })
    .unwrap()
    .contains("multiple of 32"));
    // Depthwise goes to the direct kernel.
    let depthwise = ConvKernel {
        shape: ConvShape {
            c: 32,
            o: 32,
            conv: Conv2d {
                groups: 32,
                padding: [1, 1],
                ..Conv2d::default()
            },
            ..s
        },
        ..kernel
    };
    assert!(unsupported_reason(&depthwise).unwrap().contains("groups"));
    assert!(direct_unsupported_reason(&depthwise).is_none());
    assert!(direct_source(&depthwise).contains("const int c0 = o / 1 * 1;"));
    assert_eq!(
        ConvLayout::from_format("NCHW32c"),
        Some(ConvLayout::Nc32hw32)
    );
    assert_eq!(
        ConvLayout::from_format("channels_last"),
        Some(ConvLayout::Nhwc)
    );
}

/// The kernels to check `kernel` with: the device's choice (through space to depth, also the
/// Hopper kernel on the problem as given where it takes it) and, where that is the Hopper
/// kernel and the output is 16-bit, every Hopper tile (two of them, 256 x 64 and 128 x 256,
/// also with K split among 3 blocks; one with one group of multiplies in flight, one with
/// none), the `mma.sync` kernel too where it takes the problem, and five of those tiles in
/// the TMA kernel where it takes the problem.
fn paths_for(cuda: &Cuda, kernel: &ConvKernel) -> Vec<ConvPath> {
    let path = cuda.conv_path(kernel).unwrap();
    let mut paths = vec![path];
    // Through space to depth: also the Hopper kernel on the problem as given (its own tiles
    // are checked in cuda_conv_space_to_depth).
    if matches!(path, ConvPath::SpaceToDepth(_)) {
        if hopper_unsupported_reason(kernel).is_none() {
            paths.push(ConvPath::Hopper(
                layoutkit_cuda::conv_plan::hopper_tile(kernel).unwrap(),
            ));
        }
        return paths;
    }
    // NCHW in the loader's kernel: its tiles are checked in cuda_conv_nchw_loader; here it is
    // checked against the mma.sync kernel's NCHW too.
    if matches!(path, ConvPath::Hopper(t) if t.nchw) {
        if unsupported_reason(kernel).is_none() {
            paths.push(ConvPath::TensorCore);
        }
        return paths;
    }
    if matches!(path, ConvPath::Hopper(_)) && kernel.out != DType::F32 {
        paths.extend(hopper_paths(&HOPPER_TILES, |i| i == 0 || i == 2));
        if unsupported_reason(kernel).is_none() {
            paths.push(ConvPath::TensorCore);
        }
    }
    // The TMA kernel on the first five cp.async paths (the device's choice where it is one,
    // then 256 x 64 with and without a split, 128 x 64, ...; the device's choice is the TMA
    // kernel itself where the rule picks it): every tile in both kernels took longer than a
    // GPU run's ten minutes.
    with_tma_variants(kernel, paths, 5)
}

/// The fixed problems, in two tests (cases 0-7 and 8-18) so that each fits a GPU run's ten
/// minutes with a cold kernel cache.
#[test]
fn tensor_core_convolution_matches_the_reference_first_cases() {
    let Some(cuda) = device() else { return };
    fixed_cases(&cuda, 0..8);
}

#[test]
fn tensor_core_convolution_matches_the_reference_last_cases() {
    let Some(cuda) = device() else { return };
    fixed_cases(&cuda, 8..19);
}

/// Runs the fixed problems `which` in every layout and type on every path [`paths_for`] gives.
fn fixed_cases(cuda: &Cuda, which: std::ops::Range<usize>) {
    let cases: [Problem; 19] = [
        // n, c, h, w, o, k, stride, pad, dil, groups
        (1, 32, 8, 8, 8, 1, 1, 0, 1, 1),
        (2, 64, 9, 11, 40, 3, 1, 1, 1, 1),
        (1, 32, 15, 13, 130, 3, 2, 1, 1, 1),
        (2, 96, 7, 7, 64, 3, 1, 2, 2, 1),
        (3, 64, 20, 17, 200, 1, 2, 0, 1, 1),
        (1, 128, 6, 6, 256, 3, 1, 1, 1, 1),
        (2, 32, 12, 12, 72, 2, 1, 0, 1, 1),
        // Enough row tiles for the 128 x 128 tile (the small ones above take 128 x 64 or 256 x 64).
        (4, 64, 66, 66, 256, 3, 1, 1, 1, 1),
        // int8 and NC/32HW32 with stride 2 and a 1x1 kernel.
        (2, 64, 15, 13, 96, 3, 2, 1, 1, 1),
        (1, 128, 9, 9, 32, 1, 1, 0, 1, 1),
        // The direct kernel: depthwise, groups, and channel counts the tensor-core kernel
        // does not take (NC/32HW32 with a partial last block).
        (2, 32, 9, 9, 32, 3, 1, 1, 1, 32),
        (2, 12, 8, 8, 18, 3, 2, 1, 1, 3),
        (1, 3, 10, 10, 8, 3, 1, 0, 1, 1),
        // The Hopper kernel's K in chunks of 8 channels: a stem (7x7/2, C = 3), RGBA with a
        // 5x5 filter, C = 8 dilated, C = 96 and C = 40 (whole 16-byte chunks), C = 24 (NCHW
        // through registers).
        (2, 3, 23, 19, 64, 7, 2, 3, 1, 1),
        (1, 4, 12, 12, 40, 5, 1, 2, 1, 1),
        (1, 8, 9, 9, 24, 3, 1, 1, 2, 1),
        (1, 96, 9, 9, 72, 3, 1, 1, 1, 1),
        (2, 40, 8, 7, 64, 3, 2, 1, 1, 1),
        (1, 24, 10, 10, 96, 3, 1, 1, 1, 1),
    ];
    let runs = [
        (DType::F16, DType::F32, false),
        (DType::F16, DType::F16, true),
        (DType::BF16, DType::F32, false),
        (DType::BF16, DType::BF16, true),
        (DType::I8, DType::I32, true),
        (DType::I8, DType::I8, true),
    ];
    let mut checked = 0;
    for (ci, &problem) in cases.iter().enumerate() {
        if !which.contains(&ci) {
            continue;
        }
        for layout in [ConvLayout::Nhwc, ConvLayout::Nchw, ConvLayout::Nc32hw32] {
            for (input, out, relu) in runs {
                let kernel = kernel_for(problem, layout, input, out, relu);
                if cuda.conv_path(&kernel).is_err() {
                    assert!(
                        unsupported_reason(&kernel).is_some()
                            && direct_unsupported_reason(&kernel).is_some()
                    );
                    continue;
                }
                let paths = paths_for(cuda, &kernel);
                checked += check(cuda, &kernel, ci as u64, &paths, &format!("case {ci}"));
                // The same kernel writing NCHW (the route of NCHW activations through NHWC),
                // on every path it has, where a kernel writes NCHW from NHWC.
                let to_nchw = ConvKernel {
                    out_layout: ConvLayout::Nchw,
                    ..kernel
                };
                if layout == ConvLayout::Nhwc && out_layout_reason(&to_nchw).is_none() {
                    let paths = paths_for(cuda, &to_nchw);
                    checked += check(cuda, &to_nchw, ci as u64, &paths, &format!("case {ci}"));
                }
            }
        }
    }
    eprintln!("checked {checked} convolutions on {}", cuda.name());
}

/// The depthwise kernel: odd and even channel counts, 1, 2 and 4 output rows per thread in
/// NHWC, widths that are not multiples of its four
/// outputs per thread, stride 2, dilation 2, 5x5 and 1x1 filters, no padding, in NHWC and NCHW
/// (rows read one value at a time and in pieces of 2, 4 and 8 pixels, one or two output rows
/// per thread, four outputs of a row or the whole row per thread, outputs stored one, two or
/// four at a time), f16 and f32 outputs, against the reference.
#[test]
fn depthwise_kernel_matches_the_reference() {
    let Some(cuda) = device() else { return };
    let cases: [Problem; 20] = [
        (2, 32, 9, 11, 32, 3, 1, 1, 1, 32),
        // NHWC threads of 2 output rows (200 K one-row threads) and of 4 (408 K; 57 rows).
        (16, 32, 56, 56, 32, 3, 1, 1, 1, 32),
        (16, 64, 57, 55, 64, 3, 1, 1, 1, 64),
        (1, 15, 13, 13, 15, 3, 2, 1, 1, 15),
        (2, 24, 10, 7, 24, 3, 1, 2, 2, 24),
        (1, 16, 12, 12, 16, 5, 1, 2, 1, 16),
        (1, 8, 6, 9, 8, 3, 1, 0, 1, 8),
        (3, 6, 5, 5, 6, 1, 1, 0, 1, 6),
        (1, 144, 14, 14, 144, 3, 2, 1, 1, 144),
        // NCHW rows read in pieces: 4 pixels (stride 1), 8 (stride 2), 4 with the last
        // piece past the row's end, 2 without padding, 4 with dilation 2.
        (2, 32, 16, 16, 32, 3, 1, 1, 1, 32),
        (2, 40, 16, 24, 40, 3, 2, 1, 1, 40),
        (1, 24, 12, 20, 24, 3, 2, 1, 1, 24),
        (1, 16, 10, 10, 16, 3, 1, 0, 1, 16),
        (2, 24, 10, 8, 24, 3, 1, 2, 2, 24),
        // NCHW with two output rows per thread (14 x 14, 300 x 40 with a 5x5 filter) and
        // stores of two (W = 14) and four (W = 40) outputs; 11 x 13 at stride 2.
        (8, 144, 14, 14, 144, 3, 1, 1, 1, 144),
        (6, 90, 11, 13, 90, 3, 2, 1, 1, 90),
        (1, 8, 300, 40, 8, 5, 1, 2, 1, 8),
        // NCHW rows of 14 and of 11 (odd) one per thread (300 K threads of four or more), two
        // output rows per thread at stride 2 (128 K one-row threads or more).
        (16, 384, 14, 14, 384, 3, 1, 1, 1, 384),
        (96, 128, 11, 11, 128, 3, 1, 1, 1, 128),
        (16, 96, 56, 56, 96, 3, 2, 1, 1, 96),
    ];
    let mut checked = 0;
    for (ci, &problem) in cases.iter().enumerate() {
        for layout in [ConvLayout::Nhwc, ConvLayout::Nchw] {
            for (out, relu) in [(DType::F16, true), (DType::F32, false)] {
                let kernel = kernel_for(problem, layout, DType::F16, out, relu);
                assert!(layoutkit_cuda::conv::depthwise_applies(&kernel));
                assert_eq!(cuda.conv_path(&kernel).unwrap(), ConvPath::Direct);
                checked += check(
                    &cuda,
                    &kernel,
                    50 + ci as u64,
                    &[ConvPath::Direct],
                    &format!("depthwise {problem:?}"),
                );
            }
        }
    }
    eprintln!(
        "checked {checked} depthwise convolutions on {}",
        cuda.name()
    );
}

/// The grouped kernel (tensor cores per group): ResNeXt-50's groups of 4 to 32 channels, a
/// stride of 2, 128 output channels per group (two column tiles), 3 and 1 channels per group
/// (a channel multiplier of 2, dilation 2), a 5x5 filter, 1x1, no padding; f16 and f32
/// outputs, against the reference.
#[test]
fn grouped_kernel_matches_the_reference() {
    let Some(cuda) = device() else { return };
    let cases: [Problem; 10] = [
        (2, 128, 14, 14, 128, 3, 1, 1, 1, 32),
        (2, 256, 9, 11, 256, 3, 2, 1, 1, 32),
        (1, 512, 7, 7, 512, 3, 1, 1, 1, 32),
        (1, 1024, 7, 7, 1024, 3, 1, 1, 1, 32),
        (2, 256, 10, 10, 256, 3, 1, 1, 1, 2),
        (2, 15, 9, 9, 30, 3, 1, 1, 1, 5),
        (2, 16, 12, 12, 32, 3, 1, 2, 2, 16),
        (1, 64, 13, 13, 96, 5, 2, 2, 1, 4),
        (3, 48, 8, 8, 48, 1, 1, 0, 1, 6),
        (1, 96, 17, 17, 48, 3, 1, 0, 1, 3),
    ];
    let mut checked = 0;
    for (ci, &problem) in cases.iter().enumerate() {
        for (out, relu) in [(DType::F16, true), (DType::F32, false)] {
            let kernel = kernel_for(problem, ConvLayout::Nhwc, DType::F16, out, relu);
            assert!(
                layoutkit_cuda::conv::grouped_applies(&kernel),
                "{problem:?}"
            );
            // On sm_90 the larger of them run as super-groups (`cuda_conv_supergroups.rs`).
            let path = cuda.conv_path(&kernel).unwrap();
            assert!(
                matches!(path, ConvPath::Direct)
                    || matches!(path, ConvPath::Hopper(t) if t.group_channels > 0),
                "{problem:?}: {path}"
            );
            checked += check(
                &cuda,
                &kernel,
                70 + ci as u64,
                &[ConvPath::Direct],
                &format!("grouped {problem:?}"),
            );
        }
    }
    eprintln!("checked {checked} grouped convolutions on {}", cuda.name());
}

/// Random problems (fixed seed): channel counts multiples of 32 to 256, multiples of 8 to 256
/// and 1 to 24 (a third each), 1 to 300 output channels, groups dividing them, 1x1 to 3x3
/// kernels (to 7x7 with up to 24 channels), stride 1-2, padding 0-2, dilation 1-2, each in a
/// random layout and element type that some kernel takes, each in the kernel the device picks
/// (with its splits of K).
#[test]
fn random_problems_match_the_reference() {
    let Some(cuda) = device() else { return };
    let mut r = xorshift(2026);
    let mut pick = |n: usize| (r.next().unwrap() >> 33) as usize % n;
    let mut checked = 0;
    let mut tried = 0;
    let mut kinds = std::collections::BTreeMap::new();
    while checked < 60 {
        tried += 1;
        assert!(tried < 10_000, "too few problems some kernel takes");
        let c = match pick(3) {
            0 => 32 * (1 + pick(8)),
            1 => 8 * (1 + pick(32)),
            _ => 1 + pick(24),
        };
        let groups = match pick(4) {
            0 => c,
            1 => [1, 2, 4, 8][pick(4)],
            _ => 1,
        };
        let o = match groups {
            g if g == c => c,
            1 => 1 + pick(300),
            g => g * (1 + pick(12)),
        };
        let k = if c <= 24 { 1 + pick(7) } else { 1 + pick(3) };
        let (stride, pad, dil) = (1 + pick(2), pick(3), 1 + pick(2));
        let (h, w) = (4 + pick(20), 4 + pick(20));
        if h + 2 * pad < dil * (k - 1) + 1 || w + 2 * pad < dil * (k - 1) + 1 {
            continue;
        }
        let problem = (1 + pick(3), c, h, w, o, k, stride, pad, dil, groups);
        // Keep the f64 reference quick: at most 40 million multiply-adds.
        if problem.0 * h * w * o * (c / groups) * k * k > 40_000_000 {
            continue;
        }
        let layout = [ConvLayout::Nhwc, ConvLayout::Nchw, ConvLayout::Nc32hw32][pick(3)];
        let (input, out) = [
            (DType::F16, DType::F32),
            (DType::F16, DType::F16),
            (DType::BF16, DType::BF16),
            (DType::I8, DType::I32),
            (DType::I8, DType::I8),
        ][pick(5)];
        let mut kernel = kernel_for(problem, layout, input, out, pick(2) == 0);
        // Half the NHWC problems write NCHW where a kernel does (NCHW's route through NHWC).
        let to_nchw = ConvKernel {
            out_layout: ConvLayout::Nchw,
            ..kernel
        };
        if layout == ConvLayout::Nhwc && pick(2) == 0 && out_layout_reason(&to_nchw).is_none() {
            kernel = to_nchw;
        }
        if cuda.conv_path(&kernel).is_err() {
            continue;
        }
        let path = cuda.conv_path(&kernel).unwrap();
        let kind = path.to_string();
        *kinds
            .entry(kind.split(' ').next().unwrap().to_string())
            .or_insert(0) += 1;
        checked += check(
            &cuda,
            &kernel,
            tried as u64,
            &[path],
            &format!("random {problem:?}"),
        );
    }
    eprintln!(
        "checked {checked} random convolutions on {} (kernels: {kinds:?})",
        cuda.name()
    );
}

/// Narrow Hopper tiles (32 to 224 columns, multiples of 32; the rule's 128-row tiles with three
/// stages and none in flight, or two as it takes them for one-step layers (128 x 32 here), its
/// 64-row tiles with four) forced on problems whose O they fit or do not fit, with and without
/// splitting K, against the reference (f16 and bf16 inputs).
#[test]
fn narrow_hopper_tiles_match_the_reference() {
    let Some(cuda) = device() else { return };
    let mut checked = 0;
    for (ci, problem) in [
        (2, 64, 9, 11, 96, 1, 1, 0, 1, 1),
        (1, 96, 14, 14, 160, 1, 1, 0, 1, 1),
        (2, 40, 7, 7, 24, 3, 1, 1, 1, 1),
        (1, 128, 10, 10, 200, 3, 2, 1, 1, 1),
    ]
    .into_iter()
    .enumerate()
    {
        for layout in [ConvLayout::Nhwc, ConvLayout::Nc32hw32] {
            for (input, out) in [(DType::F16, DType::F16), (DType::BF16, DType::F32)] {
                let kernel = kernel_for(problem, layout, input, out, true);
                if !matches!(cuda.conv_path(&kernel), Ok(ConvPath::Hopper(_))) {
                    // Not a Hopper GPU, or a problem the Hopper kernel does not take.
                    continue;
                }
                let narrow = [
                    (64, 96, 4, 1),
                    (128, 160, 3, 0),
                    (64, 32, 4, 1),
                    (128, 32, 2, 0),
                    (128, 224, 3, 1),
                ];
                let paths = with_tma_variants(&kernel, hopper_paths(&narrow, |_| true), usize::MAX);
                checked += check(
                    &cuda,
                    &kernel,
                    40 + ci as u64,
                    &paths,
                    &format!("narrow {ci}"),
                );
            }
        }
    }
    eprintln!(
        "checked {checked} convolutions in narrow tiles on {}",
        cuda.name()
    );
}
