//! The int8 convolution against the f64 reference, on every tile build this CPU runs
//! (AVX-512 VNNI, AVX2, portable), with exact equality of the output bytes: random problems
//! (odd channel counts, groups, depthwise, dilation, stride, padding, requantisation scale,
//! bias, ReLU), activations in NCHW, NHWC and NCHW4c, outputs in i32, i8 (saturating) and f32, values drawn from the
//! full i8 range or only the extremes -128 and 127 (the inputs where a saturating
//! `vpmaddubsw` scheme would be wrong), 1 to 3 threads.

use layoutkit_core::conv::Conv2d;
use layoutkit_core::{parse_format, DType, Dims, ShapedLayout};
use layoutkit_cpu::{
    conv2d_int8, conv2d_int8_build, conv2d_int8_supports, conv2d_reference, ConvKernels, Epilogue,
    TensorRef,
};
use proptest::prelude::*;

fn noise_i8(n: usize, seed: u64, extremes: bool) -> Vec<u8> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let b = (s >> 40) as u8;
            if extremes {
                if b & 1 == 0 {
                    0x80
                } else {
                    0x7f
                }
            } else {
                b
            }
        })
        .collect()
}

fn shaped(format: &str, dims: &Dims) -> ShapedLayout {
    parse_format(format).unwrap().shaped(dims).unwrap()
}

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

#[derive(Debug, Clone)]
struct Problem {
    n: usize,
    groups: usize,
    cg: usize,
    og: usize,
    h: usize,
    w: usize,
    k: [usize; 2],
    stride: [usize; 2],
    padding: [usize; 2],
    dilation: [usize; 2],
}

fn problem() -> impl Strategy<Value = Problem> {
    (
        (1usize..3, 1usize..4, 1usize..11, 1usize..21),
        (1usize..10, 1usize..12),
        (1usize..4, 1usize..4, 1usize..3, 1usize..3),
        (0usize..3, 0usize..3, 1usize..3, 1usize..3),
    )
        .prop_filter_map("output too small", |(a, b, c, d)| {
            let p = Problem {
                n: a.0,
                groups: a.1,
                cg: a.2,
                og: a.3,
                h: b.0,
                w: b.1,
                k: [c.0, c.1],
                stride: [c.2, c.3],
                padding: [d.0, d.1],
                dilation: [d.2, d.3],
            };
            let eff = |i: usize| (p.k[i] - 1) * p.dilation[i] + 1;
            (p.h + 2 * p.padding[0] >= eff(0) && p.w + 2 * p.padding[1] >= eff(1)).then_some(p)
        })
}

#[allow(clippy::too_many_arguments)]
fn check(
    p: &Problem,
    x_fmt: &str,
    y_fmt: &str,
    y_dtype: DType,
    scale: bool,
    bias: bool,
    relu: bool,
    extremes: bool,
    threads: usize,
    seed: u64,
) {
    let conv = Conv2d {
        stride: p.stride,
        padding: p.padding,
        dilation: p.dilation,
        groups: p.groups,
    };
    let c = p.groups * p.cg;
    let o = p.groups * p.og;
    let xd = Dims::parse(&format!("N={},C={c},H={},W={}", p.n, p.h, p.w)).unwrap();
    let wd = Dims::parse(&format!("O={o},I={},H={},W={}", p.cg, p.k[0], p.k[1])).unwrap();
    let yd = conv.output_dims(&xd, &wd).unwrap();
    let xs = shaped(x_fmt, &xd);
    let ws = shaped("OIHW", &wd);
    let ys = shaped(y_fmt, &yd);
    let xb = noise_i8(xs.elements(), seed, extremes);
    let wb = noise_i8(ws.elements(), seed ^ 0x55, extremes);
    let bias_v: Vec<f64> = (0..o).map(|i| i as f64 * 37.5 - 300.0).collect();
    // Requantisation scales as f32 holds them: dyadic ones (exact products, so halves to
    // round to even) and others, some negative.
    let scale_v: Vec<f64> = (0..o)
        .map(|i| match i % 3 {
            0 => (1 + i % 7) as f64 / 64.0,
            1 => -((0.0031 + i as f64 * 0.0017) as f32 as f64),
            _ => (0.0123 + i as f64 * 0.0009) as f32 as f64,
        })
        .collect();
    let ep = Epilogue {
        bias: bias.then_some(&bias_v[..]),
        relu,
        scale: scale.then_some(&scale_v[..]),
    };
    let x = TensorRef {
        layout: &xs,
        dtype: DType::I8,
        data: &xb,
    };
    let w = TensorRef {
        layout: &ws,
        dtype: DType::I8,
        data: &wb,
    };
    assert!(conv2d_int8_supports(&x, &w));
    let want = conv2d_reference(&conv, x, w, &ep, &ys, y_dtype).unwrap();
    for k in builds() {
        let got = conv2d_int8(&conv, x, w, &ep, &ys, y_dtype, threads, k).unwrap();
        assert!(
            got == want,
            "{p:?} {x_fmt}->{y_fmt} {y_dtype} scale={scale} bias={bias} relu={relu} build {}",
            conv2d_int8_build(k).unwrap()
        );
    }
}

#[test]
fn vnni_build_is_used_where_the_cpu_has_it() {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx512vnni") {
        assert_eq!(
            conv2d_int8_build(ConvKernels::Avx512).unwrap(),
            "avx512-vnni"
        );
    }
    assert_eq!(
        conv2d_int8_build(ConvKernels::Portable).unwrap(),
        "portable"
    );
}

#[test]
fn depthwise_extremes_match_exactly() {
    let p = Problem {
        n: 1,
        groups: 7,
        cg: 1,
        og: 1,
        h: 6,
        w: 9,
        k: [3, 3],
        stride: [1, 2],
        padding: [1, 1],
        dilation: [1, 1],
    };
    check(
        &p,
        "NHWC",
        "NCHW",
        DType::I32,
        false,
        false,
        false,
        true,
        2,
        3,
    );
}

#[test]
fn deep_reductions_of_extremes_match_exactly() {
    // 64 * 9 = 576 products of -128 * -128 per output: far past i16 range.
    let p = Problem {
        n: 1,
        groups: 1,
        cg: 64,
        og: 32,
        h: 5,
        w: 11,
        k: [3, 3],
        stride: [1, 1],
        padding: [1, 1],
        dilation: [1, 1],
    };
    check(
        &p,
        "NCHW16c",
        "NHWC",
        DType::I32,
        false,
        false,
        false,
        true,
        1,
        4,
    );
    check(
        &p,
        "NCHW",
        "NCHW",
        DType::I8,
        false,
        true,
        true,
        false,
        2,
        5,
    );
    check(&p, "NCHW", "NHWC", DType::I8, true, true, false, true, 2, 6);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn int8_matches_the_reference_exactly(
        p in problem(),
        fmt in 0usize..3,
        out in 0usize..3,
        scale in any::<bool>(),
        bias in any::<bool>(),
        relu in any::<bool>(),
        extremes in any::<bool>(),
        threads in 1usize..4,
        seed in any::<u64>(),
    ) {
        let x_fmt = ["NCHW", "NHWC", "NCHW4c"][fmt];
        let c = p.groups * p.cg;
        let x_fmt = if x_fmt == "NCHW4c" && c % 4 != 0 { "NHWC" } else { x_fmt };
        let y_dtype = [DType::I32, DType::I8, DType::F32][out];
        check(&p, x_fmt, "NCHW", y_dtype, scale, bias, relu, extremes, threads, seed);
    }
}
