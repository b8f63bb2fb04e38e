//! The register-blocked convolution against the f64 reference, on every kernel build this CPU
//! runs (AVX-512, AVX2, portable): random problems (odd channel counts, groups, depthwise,
//! dilation, stride, padding, bias, ReLU), activations and outputs in NCHW, NHWC, NCHW8c and
//! NCHW16c, 1 to 3 threads.
//!
//! Tolerance: `||out - ref|| / ||ref|| <= 1e-5`. The kernels sum in f32 with FMA in
//! channel-then-tap order (the reference sums exactly in f64 and rounds once); with
//! `K = C/groups * KH * KW` terms of magnitude <= 1 the relative error of an f32 sum grows like
//! `sqrt(K) * 2^-24` for random signs, ~1e-6 at the K of these problems.

use layoutkit_core::conv::Conv2d;
use layoutkit_core::{parse_format, CastSpec, DType, Dims, ShapedLayout};
use layoutkit_cpu::{
    conv2d_blocked, conv2d_blocked_into, conv2d_blocked_unsupported, conv2d_reference, convert,
    AlignedBuf, BlockedFilter, ConvKernels, Epilogue, TensorRef,
};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

fn values(b: &[u8]) -> Vec<f64> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()) as f64)
        .collect()
}

fn noise_f32(n: usize, seed: u64) -> Vec<u8> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .flat_map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0).to_le_bytes()
        })
        .collect()
}

fn shaped(format: &str, dims: &Dims) -> ShapedLayout {
    parse_format(format).unwrap().shaped(dims).unwrap()
}

/// The builds this CPU runs.
fn builds() -> Vec<ConvKernels> {
    [
        ConvKernels::Avx512,
        ConvKernels::Avx2,
        ConvKernels::Portable,
    ]
    .into_iter()
    .filter(|k| k.resolve().is_ok())
    .collect()
}

/// One problem: the activations and output in layouts `names[xl]` / `names[yl]`, every
/// build against the reference, and (unless depthwise) the same result from a filter packed
/// beforehand on one thread.
#[allow(clippy::too_many_arguments)]
fn check(
    conv: Conv2d,
    n: usize,
    cg: usize,
    og: usize,
    kernel: [usize; 2],
    hw: [usize; 2],
    layouts: [usize; 2],
    threads: usize,
    with_bias: bool,
    relu: bool,
    seed: u64,
    kernels: ConvKernels,
) -> Result<(), TestCaseError> {
    let (groups, lanes) = (
        conv.groups,
        if kernels == ConvKernels::Avx512 {
            16
        } else {
            8
        },
    );
    let depthwise = cg == 1 && og == 1 && groups > 1;
    let xd = Dims::parse(&format!("N={n},C={},H={},W={}", groups * cg, hw[0], hw[1])).unwrap();
    let wd = Dims::parse(&format!(
        "O={},I={cg},H={},W={}",
        groups * og,
        kernel[0],
        kernel[1]
    ))
    .unwrap();
    prop_assume!(conv.output_dims(&xd, &wd).is_ok());
    let yd = conv.output_dims(&xd, &wd).unwrap();
    let names = ["NCHW", "NHWC", "NCHW8c", "NCHW16c"];
    let plain_x = shaped("NCHW", &xd);
    let xs = shaped(names[layouts[0]], &xd);
    let ws = shaped("OIHW", &wd);
    let ys = shaped(names[layouts[1]], &yd);
    let xb = convert(
        &plain_x,
        &noise_f32(plain_x.elements(), seed),
        &xs,
        &CastSpec::identity(DType::F32),
    )
    .unwrap();
    let wb = noise_f32(ws.elements(), seed + 7);
    let bias: Vec<f64> = (0..groups * og).map(|i| (i as f64) * 0.25 - 1.0).collect();
    let ep = Epilogue {
        bias: with_bias.then_some(&bias[..]),
        relu,
        scale: None,
    };
    let xr = TensorRef {
        layout: &xs,
        dtype: DType::F32,
        data: &xb,
    };
    let wr = TensorRef {
        layout: &ws,
        dtype: DType::F32,
        data: &wb,
    };
    let want = values(&conv2d_reference(&conv, xr, wr, &ep, &ys, DType::F32).unwrap());
    let got_bytes = conv2d_blocked(&conv, xr, wr, &ep, &ys, DType::F32, threads, kernels).unwrap();
    let got = values(&got_bytes);
    prop_assert_eq!(got.len(), want.len());
    let err: f64 = got
        .iter()
        .zip(&want)
        .map(|(a, b)| (a - b) * (a - b))
        .sum::<f64>()
        .sqrt();
    let norm: f64 = want.iter().map(|b| b * b).sum::<f64>().sqrt();
    prop_assert!(
        err <= 1e-5 * norm.max(1e-30),
        "{:?}: relative error {}",
        kernels,
        err / norm
    );
    // Depthwise goes to the fallback; everything else here is the blocked kernel's.
    let packed = BlockedFilter::new(wr, groups, kernels).unwrap();
    prop_assert_eq!(
        conv2d_blocked_unsupported(&xr, &packed).is_some(),
        depthwise && !og.is_multiple_of(lanes)
    );
    if !depthwise {
        // The thread count does not change the result, nor does packing beforehand.
        let mut out = AlignedBuf::zeroed(ys.bytes(DType::F32).unwrap());
        conv2d_blocked_into(&conv, xr, &packed, &ep, &ys, &mut out, 1).unwrap();
        prop_assert_eq!(values(&out), got);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn blocked_matches_the_reference(
        n in 1usize..=2, groups in 1usize..=3, cg in 1usize..=20, og_vectors in 1usize..=3,
        odd_o in 0usize..=7,
        kh in 1usize..=3, kw in 1usize..=3, pad in 0usize..=2, stride in 1usize..=2, dil in 1usize..=2, dil_w in 1usize..=2,
        h in 4usize..=11, w in 4usize..=15, xl in 0usize..4, yl in 0usize..4, threads in 1usize..=3,
        depthwise: bool, with_bias: bool, relu: bool, seed in 0u64..1000,
    ) {
        for kernels in builds() {
            // Grouped problems keep whole vectors per group (else the fallback runs); one
            // group takes any O.
            let lanes = if kernels == ConvKernels::Avx512 { 16 } else { 8 };
            let (groups, cg, og) = if depthwise {
                (cg.min(6) + 1, 1, 1)
            } else if groups > 1 {
                (groups, cg, og_vectors * lanes)
            } else {
                (1, cg, og_vectors * lanes - odd_o)
            };
            let conv = Conv2d { stride: [stride, 3 - stride], padding: [pad, 2 - pad], dilation: [dil, dil_w], groups };
            check(conv, n, cg, og, [kh, kw], [h, w], [xl, yl], threads, with_bias, relu, seed, kernels)?;
        }
    }

    /// Unpadded 1x1 filters with a stride (the input copied as the strided pixels only, then
    /// run at stride 1): strides 1-3 per axis, channels in one or several reduction chunks.
    #[test]
    fn strided_pointwise_matches_the_reference(
        n in 1usize..=2, groups in 1usize..=2, cg in 1usize..=40, og_vectors in 1usize..=3,
        odd_o in 0usize..=7, st in 1usize..=3, sw in 1usize..=3,
        h in 1usize..=13, w in 1usize..=17, xl in 0usize..4, yl in 0usize..4, threads in 1usize..=3,
        with_bias: bool, relu: bool, seed in 0u64..1000,
    ) {
        for kernels in builds() {
            let lanes = if kernels == ConvKernels::Avx512 { 16 } else { 8 };
            let og = if groups > 1 { og_vectors * lanes } else { og_vectors * lanes - odd_o };
            let conv = Conv2d { stride: [st, sw], padding: [0, 0], dilation: [1, 1], groups };
            check(conv, n, cg, og, [1, 1], [h, w], [xl, yl], threads, with_bias, relu, seed, kernels)?;
        }
    }
}

#[test]
fn unsupported_operands_are_named() {
    let xd = Dims::parse("N=1,C=4,H=3,W=3").unwrap();
    let wd = Dims::parse("O=4,I=1,H=1,W=1").unwrap();
    let xs = shaped("kHWC8", &xd);
    let ws = shaped("OIHW", &wd);
    let xb = vec![0u8; xs.bytes(DType::F32).unwrap()];
    let wb = vec![0u8; ws.bytes(DType::F32).unwrap()];
    let x = TensorRef {
        layout: &xs,
        dtype: DType::F32,
        data: &xb,
    };
    let w = TensorRef {
        layout: &ws,
        dtype: DType::F32,
        data: &wb,
    };
    let packed = BlockedFilter::new(w, 4, ConvKernels::Portable).unwrap();
    assert!(conv2d_blocked_unsupported(&x, &packed)
        .unwrap()
        .contains("NCHW<x>c"));
    let nchw = shaped("NCHW", &xd);
    let x = TensorRef {
        layout: &nchw,
        dtype: DType::F32,
        data: &xb,
    };
    assert!(conv2d_blocked_unsupported(&x, &packed)
        .unwrap()
        .contains("grouped"));
}
