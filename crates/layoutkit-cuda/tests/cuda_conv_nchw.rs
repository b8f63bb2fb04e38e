//! NCHW activations through NHWC: the kernel reading NHWC after the input's conversion writes
//! NCHW itself (f16/bf16) or is followed by a conversion back (int8), bit for bit the NHWC
//! kernel's output converted; and the plan `conv` and the Python package make for NCHW.
//! Skipped without a GPU unless LAYOUTKIT_REQUIRE_CUDA=1; the planning test needs no GPU.

use layoutkit_core::conv::Conv2d;
use layoutkit_core::{parse_format, DType, Dims};
use layoutkit_cuda::conv::{
    out_layout_reason, ConvKernel, ConvLayout, GROUPED_VIA_NHWC_MIN_MACS,
    NCHW_VIA_NHWC_MIN_FLOP_PER_BYTE,
};
use layoutkit_cuda::Launches;

mod common;
use common::{device, f16_noise, i8_noise, kernel_for};

/// NCHW activations through NHWC (`Cuda::conv2d_nchw_via_nhwc_timed`): the output is the NHWC
/// kernel's output converted to NCHW, bit for bit, for f16 and int8 problems of each kernel path,
/// whether the kernel writes NCHW itself (f16) or a conversion pass follows it (int8).
#[test]
fn nchw_through_nhwc_equals_the_nhwc_kernel_converted() {
    let Some(cuda) = device() else { return };
    for (i, (problem, input, out)) in [
        ((2, 64, 9, 11, 96, 3, 1, 1, 1, 1), DType::F16, DType::F16),
        ((1, 128, 7, 7, 64, 1, 1, 0, 1, 1), DType::F16, DType::F32),
        ((2, 64, 10, 10, 64, 3, 2, 1, 1, 1), DType::I8, DType::I32),
    ]
    .into_iter()
    .enumerate()
    {
        let mut kernel = kernel_for(problem, ConvLayout::Nhwc, input, out, false);
        kernel.bias = false;
        let s = kernel.shape;
        let noise = |n: usize, seed: u64| match input {
            DType::I8 => i8_noise(n, seed),
            _ => f16_noise(n, seed),
        };
        let x_nchw = noise(s.n * s.c * s.h * s.w, 11 + i as u64);
        let w = noise(s.o * s.kh * s.kw * s.c, 23 + i as u64);
        let dims = |c: usize, h: usize, w: usize| {
            Dims::parse(&format!("N={},C={c},H={h},W={w}", s.n)).unwrap()
        };
        let (xd, yd) = (dims(s.c, s.h, s.w), dims(s.o, s.oh, s.ow));
        let nchw = |d: &Dims| parse_format("NCHW").unwrap().shaped(d).unwrap();
        let nhwc = |d: &Dims| parse_format("NHWC").unwrap().shaped(d).unwrap();
        let same = |t| layoutkit_core::CastSpec::new(t, t, None).unwrap();
        let x_nhwc = layoutkit_cpu::convert(&nchw(&xd), &x_nchw, &nhwc(&xd), &same(input)).unwrap();
        let (y_nhwc, _) = cuda
            .conv2d_timed(&kernel, &x_nhwc, &w, (None, None), 0, Launches::Host(1))
            .unwrap();
        let want = layoutkit_cpu::convert(&nhwc(&yd), &y_nhwc, &nchw(&yd), &same(out)).unwrap();
        let route = ConvKernel {
            out_layout: ConvLayout::Nchw,
            ..kernel
        };
        let route = if out_layout_reason(&route).is_none() {
            route
        } else {
            kernel
        };
        assert_eq!(route.out_layout == ConvLayout::Nchw, input != DType::I8);
        let (got, timing) = cuda
            .conv2d_nchw_via_nhwc_timed(&route, &x_nchw, &w, 2, Launches::Graph(3))
            .unwrap();
        assert_eq!(got, want, "problem {problem:?} {input}");
        assert_eq!(timing.seconds.len(), 2);
    }
}

/// The plan `conv` and the Python package use: NCHW through NHWC where a tensor-core kernel
/// (the grouped one included) takes the problem and it has enough FLOP per converted byte,
/// NCHW in place where only the direct kernel takes it or the work is too little to hide the
/// conversions, never NCHW for int8.
#[test]
fn for_problem_plans_nchw_through_nhwc_for_tensor_core_problems() {
    let conv = |k: usize| Conv2d {
        stride: [1, 1],
        padding: [k / 2, k / 2],
        dilation: [1, 1],
        groups: 1,
    };
    let d = |s: &str| Dims::parse(s).unwrap();
    let plan = |c: usize, o: usize, k: usize, x: DType, bias: bool| {
        ConvKernel::for_problem(
            &conv(k),
            &d(&format!("N=1,C={c},H=8,W=8")),
            "NCHW",
            x,
            &d(&format!("O={o},I={c},H={k},W={k}")),
            x,
            bias,
            false,
            None,
            None,
        )
        .unwrap()
    };
    let big = plan(64, 64, 3, DType::F16, true);
    assert!(big.flop_per_converted_byte() >= NCHW_VIA_NHWC_MIN_FLOP_PER_BYTE);
    assert_eq!(
        (big.layout, big.out_layout),
        (ConvLayout::Nhwc, ConvLayout::Nchw)
    );
    let small = plan(32, 32, 1, DType::F16, true);
    assert!(small.flop_per_converted_byte() < NCHW_VIA_NHWC_MIN_FLOP_PER_BYTE);
    assert_eq!(
        (small.layout, small.out_layout),
        (ConvLayout::Nchw, ConvLayout::Nchw)
    );
    assert_eq!(plan(3, 64, 3, DType::F16, true).layout, ConvLayout::Nchw);
    // int8 reads NHWC and writes it: the caller converts the i32 output.
    let int8 = plan(64, 64, 3, DType::I8, false);
    assert_eq!(
        (int8.layout, int8.out_layout),
        (ConvLayout::Nhwc, ConvLayout::Nhwc)
    );
    assert_eq!(plan(64, 64, 1, DType::I8, false).layout, ConvLayout::Nhwc);
    assert_eq!(plan(64, 64, 3, DType::I8, false).out, DType::I32);
    assert_eq!(plan(64, 64, 3, DType::F32, false).input, DType::F16);
    // Grouped: through NHWC where the grouped kernels have work enough (50 M multiply-adds:
    // 128 channels in groups of 4 on 56 x 56 planes at batch 8), its NHWC output converted
    // back by the caller; ResNeXt's `3x3 512->512 @14` at batch 1 in place.
    let grouped = |n: usize, c: usize, hw: usize| {
        ConvKernel::for_problem(
            &Conv2d {
                groups: 32,
                ..conv(3)
            },
            &d(&format!("N={n},C={c},H={hw},W={hw}")),
            "NCHW",
            DType::F16,
            &d(&format!("O={c},I={},H=3,W=3", c / 32)),
            DType::F16,
            true,
            false,
            None,
            None,
        )
        .unwrap()
    };
    let batch = grouped(8, 128, 56);
    assert!(layoutkit_cuda::conv::grouped_applies(&batch));
    assert!(batch.macs() >= GROUPED_VIA_NHWC_MIN_MACS);
    assert_eq!(
        (batch.layout, batch.out_layout),
        (ConvLayout::Nhwc, ConvLayout::Nhwc)
    );
    let one = grouped(1, 512, 14);
    assert!(one.macs() < GROUPED_VIA_NHWC_MIN_MACS);
    assert!(one.flop_per_converted_byte() >= NCHW_VIA_NHWC_MIN_FLOP_PER_BYTE);
    assert_eq!(one.layout, ConvLayout::Nchw);
    // bf16 grouped: no kernel reads NCHW in place; the super-groups take NHWC at any size.
    let bf16 = ConvKernel::for_problem(
        &Conv2d {
            groups: 32,
            ..conv(3)
        },
        &d("N=1,C=512,H=14,W=14"),
        "NCHW",
        DType::BF16,
        &d("O=512,I=16,H=3,W=3"),
        DType::BF16,
        true,
        false,
        Some(DType::BF16),
        None,
    )
    .unwrap();
    assert_eq!(
        (bf16.layout, bf16.input, bf16.out),
        (ConvLayout::Nhwc, DType::BF16, DType::BF16)
    );
}
