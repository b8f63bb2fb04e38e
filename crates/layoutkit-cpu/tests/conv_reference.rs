//! The reference convolution: a hand-computed case, then its contracts as properties (any
//! operand layout gives the same values, stride subsamples, padding is zeros, groups split the
//! channels, i8 sums are exact in i32, requantised i8 outputs round half to even and
//! saturate) and its errors.

use layoutkit_core::conv::Conv2d;
use layoutkit_core::{parse_format, CastSpec, DType, Dims, ShapedLayout};
use layoutkit_cpu::{conv2d_reference, convert_reference, Epilogue, TensorRef};
use proptest::prelude::*;

fn shaped(format: &str, dims: &str) -> ShapedLayout {
    parse_format(format)
        .unwrap()
        .shaped(&Dims::parse(dims).unwrap())
        .unwrap()
}

fn f64_bytes(v: &[f64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn f64_values(b: &[u8]) -> Vec<f64> {
    b.chunks_exact(8)
        .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// Plain f64 data `v` (logical order of `plain`) moved into layout `to`.
fn relayout(plain: &ShapedLayout, v: &[f64], to: &ShapedLayout) -> Vec<u8> {
    let mut out = vec![0u8; to.bytes(DType::F64).unwrap()];
    convert_reference(
        plain,
        &f64_bytes(v),
        to,
        &mut out,
        &CastSpec::identity(DType::F64),
    )
    .unwrap();
    out
}

/// Runs the reference on plain NCHW/OIHW f64 operands, output plain NCHW f64.
fn run(conv: &Conv2d, xd: &str, x: &[f64], wd: &str, w: &[f64], ep: &Epilogue) -> (Dims, Vec<f64>) {
    let xs = shaped("NCHW", xd);
    let ws = shaped("OIHW", wd);
    let yd = conv.output_dims(&xs.dims(), &ws.dims()).unwrap();
    let ys = parse_format("NCHW").unwrap().shaped(&yd).unwrap();
    let xb = f64_bytes(x);
    let wb = f64_bytes(w);
    let out = conv2d_reference(
        conv,
        TensorRef {
            layout: &xs,
            dtype: DType::F64,
            data: &xb,
        },
        TensorRef {
            layout: &ws,
            dtype: DType::F64,
            data: &wb,
        },
        ep,
        &ys,
        DType::F64,
    )
    .unwrap();
    (yd, f64_values(&out))
}

#[test]
fn a_hand_computed_convolution() {
    let x: Vec<f64> = (1..=9).map(f64::from).collect();
    let w = vec![1.0; 4];
    let (d, y) = run(
        &Conv2d::default(),
        "N=1,C=1,H=3,W=3",
        &x,
        "O=1,I=1,H=2,W=2",
        &w,
        &Epilogue::default(),
    );
    assert_eq!(d.to_string(), "N=1,C=1,H=2,W=2");
    assert_eq!(y, vec![12.0, 16.0, 24.0, 28.0]);
    // Padding 1: the corners see one input element, the output is 4 x 4.
    let padded = Conv2d {
        padding: [1, 1],
        ..Conv2d::default()
    };
    let (d, y) = run(
        &padded,
        "N=1,C=1,H=3,W=3",
        &x,
        "O=1,I=1,H=2,W=2",
        &w,
        &Epilogue::default(),
    );
    assert_eq!(d.to_string(), "N=1,C=1,H=4,W=4");
    assert_eq!((y[0], y[3], y[5], y[15]), (1.0, 3.0, 12.0, 9.0));
    // Bias then ReLU.
    let neg: Vec<f64> = w.iter().map(|v| -v).collect();
    let bias = [20.0];
    let ep = Epilogue {
        bias: Some(&bias),
        relu: true,
        scale: None,
    };
    let (_, y) = run(
        &Conv2d::default(),
        "N=1,C=1,H=3,W=3",
        &x,
        "O=1,I=1,H=2,W=2",
        &neg,
        &ep,
    );
    assert_eq!(y, vec![8.0, 4.0, 0.0, 0.0]);
    // Requantisation: scale first, then bias, then ReLU: -12 * -0.5 + 20 = 26, ... .
    let scale = [-0.5];
    let ep = Epilogue {
        scale: Some(&scale),
        ..ep
    };
    let (_, y) = run(
        &Conv2d::default(),
        "N=1,C=1,H=3,W=3",
        &x,
        "O=1,I=1,H=2,W=2",
        &neg,
        &ep,
    );
    assert_eq!(y, vec![26.0, 28.0, 32.0, 34.0]);
}

#[test]
fn requantised_i8_output_rounds_halves_to_even_and_saturates() {
    // One input channel, a 1x1 filter of 1: the sums are the inputs themselves.
    let x: Vec<u8> = [5i8, 7, -5, 127, -128, 3]
        .iter()
        .map(|&v| v as u8)
        .collect();
    let xs = shaped("NCHW", "N=1,C=1,H=1,W=6");
    let ws = shaped("OIHW", "O=1,I=1,H=1,W=1");
    let ys = shaped("NCHW", "N=1,C=1,H=1,W=6");
    let tensor = |layout, data| TensorRef {
        layout,
        dtype: DType::I8,
        data,
    };
    let scale = [0.5];
    let bias = [0.0];
    let out = |relu: bool, bias: Option<&[f64]>, scale: f64| {
        let scale = [scale];
        let ep = Epilogue {
            bias,
            relu,
            scale: Some(&scale),
        };
        conv2d_reference(
            &Conv2d::default(),
            tensor(&xs, &x),
            tensor(&ws, &[1u8]),
            &ep,
            &ys,
            DType::I8,
        )
        .unwrap()
        .iter()
        .map(|&b| b as i8)
        .collect::<Vec<i8>>()
    };
    // 2.5 -> 2, 3.5 -> 4, -2.5 -> -2, 63.5 -> 64, -64, 1.5 -> 2.
    assert_eq!(out(false, None, scale[0]), vec![2, 4, -2, 64, -64, 2]);
    assert_eq!(out(true, Some(&bias), scale[0]), vec![2, 4, 0, 64, 0, 2]);
    // x 3: 381 and -384 saturate.
    assert_eq!(out(false, None, 3.0), vec![15, 21, -15, 127, -128, 9]);
    // A scale of the wrong length is an error.
    let two = [1.0, 2.0];
    let ep = Epilogue {
        scale: Some(&two),
        ..Epilogue::default()
    };
    let e = conv2d_reference(
        &Conv2d::default(),
        tensor(&xs, &x),
        tensor(&ws, &[1u8]),
        &ep,
        &ys,
        DType::I8,
    )
    .unwrap_err();
    assert!(e.to_string().contains("the scale has 2 values"), "{e}");
}

/// A random convolution problem: (conv, x dims, w dims).
fn problem() -> impl Strategy<Value = (Conv2d, String, String)> {
    (
        1usize..=2,
        1usize..=3,
        1usize..=3,
        1usize..=3,
        1usize..=3,
        1usize..=3,
        0usize..=2,
        1usize..=2,
        1usize..=2,
        4usize..=9,
        4usize..=9,
    )
        .prop_map(|(n, g, cg, og, kh, kw, pad, stride, dil, h, w)| {
            let conv = Conv2d {
                stride: [stride, 3 - stride],
                padding: [pad, 2 - pad],
                dilation: [dil, 1],
                groups: g,
            };
            (
                conv,
                format!("N={n},C={},H={h},W={w}", g * cg),
                format!("O={},I={cg},H={kh},W={kw}", g * og),
            )
        })
        .prop_filter("the filter fits", |(c, x, w)| {
            c.output_dims(&Dims::parse(x).unwrap(), &Dims::parse(w).unwrap())
                .is_ok()
        })
}

fn noise(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
        })
        .collect()
}

fn count(d: &str) -> usize {
    Dims::parse(d)
        .unwrap()
        .entries()
        .iter()
        .map(|e| e.1)
        .product()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Operands and output in any layouts (blocked, padded, channels-last) give the same values.
    #[test]
    fn every_layout_gives_the_same_values((conv, xd, wd) in problem(), seed in 0u64..1000) {
        let x = noise(count(&xd), seed);
        let w = noise(count(&wd), seed + 1);
        let (yd, want) = run(&conv, &xd, &x, &wd, &w, &Epilogue::default());
        for (xf, wf, yf) in [("NHWC", "OHWI", "NCHW8c"), ("NCHW4c", "OIHW4i4o", "NHWC"), ("kHWC8", "HWIO", "NC/32HW32")] {
            let xs = shaped(xf, &xd);
            let ws = shaped(wf, &wd);
            let ys = parse_format(yf).unwrap().shaped(&yd).unwrap();
            let xb = relayout(&shaped("NCHW", &xd), &x, &xs);
            let wb = relayout(&shaped("OIHW", &wd), &w, &ws);
            let got = conv2d_reference(
                &conv,
                TensorRef { layout: &xs, dtype: DType::F64, data: &xb },
                TensorRef { layout: &ws, dtype: DType::F64, data: &wb },
                &Epilogue::default(),
                &ys,
                DType::F64,
            ).unwrap();
            let plain = parse_format("NCHW").unwrap().shaped(&yd).unwrap();
            prop_assert_eq!(&got, &relayout(&plain, &want, &ys), "{} {} {}", xf, wf, yf);
        }
    }

    /// Stride s gives every s-th output of stride 1; padding p equals explicit zeros around the
    /// input with padding 0.
    #[test]
    fn stride_subsamples_and_padding_is_zeros((conv, xd, wd) in problem(), seed in 0u64..1000) {
        let x = noise(count(&xd), seed);
        let w = noise(count(&wd), seed + 1);
        let (yd, y) = run(&conv, &xd, &x, &wd, &w, &Epilogue::default());
        let unit = Conv2d { stride: [1, 1], ..conv };
        let (yd1, y1) = run(&unit, &xd, &x, &wd, &w, &Epilogue::default());
        let e = |d: &Dims| d.entries().iter().map(|p| p.1).collect::<Vec<_>>();
        let (ye, y1e) = (e(&yd), e(&yd1));
        for n in 0..ye[0] { for c in 0..ye[1] { for h in 0..ye[2] { for wi in 0..ye[3] {
            let a = y[((n * ye[1] + c) * ye[2] + h) * ye[3] + wi];
            let (h1, w1) = (h * conv.stride[0], wi * conv.stride[1]);
            let b = y1[((n * y1e[1] + c) * y1e[2] + h1) * y1e[3] + w1];
            prop_assert_eq!(a, b);
        }}}}
        // Explicit zero padding.
        let xe = e(&Dims::parse(&xd).unwrap());
        let (ph, pw) = (conv.padding[0], conv.padding[1]);
        let (hp, wp) = (xe[2] + 2 * ph, xe[3] + 2 * pw);
        let mut xp = vec![0.0; xe[0] * xe[1] * hp * wp];
        for n in 0..xe[0] { for c in 0..xe[1] { for h in 0..xe[2] { for wi in 0..xe[3] {
            xp[((n * xe[1] + c) * hp + h + ph) * wp + wi + pw] = x[((n * xe[1] + c) * xe[2] + h) * xe[3] + wi];
        }}}}
        let xpd = format!("N={},C={},H={hp},W={wp}", xe[0], xe[1]);
        let (_, yp) = run(&Conv2d { padding: [0, 0], ..conv }, &xpd, &xp, &wd, &w, &Epilogue::default());
        prop_assert_eq!(y, yp);
    }

    /// Group g's outputs are the convolution of group g's input channels with its filters.
    #[test]
    fn groups_split_the_channels((conv, xd, wd) in problem(), seed in 0u64..1000) {
        let x = noise(count(&xd), seed);
        let w = noise(count(&wd), seed + 1);
        let (yd, y) = run(&conv, &xd, &x, &wd, &w, &Epilogue::default());
        let xe: Vec<usize> = Dims::parse(&xd).unwrap().entries().iter().map(|p| p.1).collect();
        let we: Vec<usize> = Dims::parse(&wd).unwrap().entries().iter().map(|p| p.1).collect();
        let ye: Vec<usize> = yd.entries().iter().map(|p| p.1).collect();
        let g = conv.groups;
        let (cg, og) = (xe[1] / g, we[0] / g);
        let plane = xe[2] * xe[3];
        let oplane = ye[2] * ye[3];
        let fsize = we[1] * we[2] * we[3];
        for gi in 0..g {
            let mut xs = Vec::new();
            for n in 0..xe[0] {
                let start = (n * xe[1] + gi * cg) * plane;
                xs.extend_from_slice(&x[start..start + cg * plane]);
            }
            let ws = &w[gi * og * fsize..(gi + 1) * og * fsize];
            let (_, ys) = run(
                &Conv2d { groups: 1, ..conv },
                &format!("N={},C={cg},H={},W={}", xe[0], xe[2], xe[3]), &xs,
                &format!("O={og},I={},H={},W={}", we[1], we[2], we[3]), ws,
                &Epilogue::default(),
            );
            for n in 0..xe[0] {
                let full = (n * ye[1] + gi * og) * oplane;
                prop_assert_eq!(&y[full..full + og * oplane], &ys[n * og * oplane..(n + 1) * og * oplane]);
            }
        }
    }
}

#[test]
fn i8_operands_give_exact_i32_sums() {
    // A 1x1 convolution is a matrix product: check it against integer arithmetic.
    let (n, c, h, w, o) = (2usize, 37usize, 3usize, 5usize, 19usize);
    let xd = format!("N={n},C={c},H={h},W={w}");
    let wd = format!("O={o},I={c},H=1,W=1");
    let x: Vec<i8> = (0..n * c * h * w)
        .map(|i| ((i * 37 + 11) % 256) as u8 as i8)
        .collect();
    let wt: Vec<i8> = (0..o * c)
        .map(|i| ((i * 91 + 5) % 256) as u8 as i8)
        .collect();
    let xs = shaped("NHWC", &xd);
    let ws = shaped("OIHW", &wd);
    let ys = shaped("NCHW", &format!("N={n},C={o},H={h},W={w}"));
    // x is given channels-last.
    let mut xb = vec![0u8; x.len()];
    for ni in 0..n {
        for ci in 0..c {
            for p in 0..h * w {
                xb[(ni * h * w + p) * c + ci] = x[(ni * c + ci) * h * w + p] as u8;
            }
        }
    }
    let wb: Vec<u8> = wt.iter().map(|&v| v as u8).collect();
    let out = conv2d_reference(
        &Conv2d::default(),
        TensorRef {
            layout: &xs,
            dtype: DType::I8,
            data: &xb,
        },
        TensorRef {
            layout: &ws,
            dtype: DType::I8,
            data: &wb,
        },
        &Epilogue::default(),
        &ys,
        DType::I32,
    )
    .unwrap();
    for ni in 0..n {
        for oi in 0..o {
            for p in 0..h * w {
                let want: i32 = (0..c)
                    .map(|ci| x[(ni * c + ci) * h * w + p] as i32 * wt[oi * c + ci] as i32)
                    .sum();
                let at = ((ni * o + oi) * h * w + p) * 4;
                assert_eq!(
                    i32::from_le_bytes(out[at..at + 4].try_into().unwrap()),
                    want
                );
            }
        }
    }
}

#[test]
fn bad_problems_are_errors_that_name_the_operands() {
    let x = Dims::parse("N=1,C=6,H=8,W=8").unwrap();
    let cases = [
        (
            Conv2d {
                groups: 4,
                ..Conv2d::default()
            },
            "O=8,I=2,H=3,W=3",
            "multiples of groups",
        ),
        (
            Conv2d {
                groups: 2,
                ..Conv2d::default()
            },
            "O=8,I=6,H=3,W=3",
            "C / groups",
        ),
        (
            Conv2d {
                stride: [0, 1],
                ..Conv2d::default()
            },
            "O=8,I=6,H=3,W=3",
            "at least 1",
        ),
        (
            Conv2d::default(),
            "O=8,I=6,H=9,W=3",
            "more than the padded input",
        ),
        (Conv2d::default(), "O=8,I=6,H=3", "axes O, I, H, W"),
    ];
    for (conv, w, needle) in cases {
        let e = conv
            .output_dims(&x, &Dims::parse(w).unwrap())
            .unwrap_err()
            .to_string();
        assert!(e.contains(needle) && e.contains("N=1,C=6,H=8,W=8"), "{e}");
    }
    // Output dims and bias length are checked too.
    let xs = shaped("NCHW", "N=1,C=2,H=4,W=4");
    let ws = shaped("OIHW", "O=3,I=2,H=3,W=3");
    let (xb, wb) = (vec![0u8; 32 * 8], vec![0u8; 54 * 8]);
    let xr = TensorRef {
        layout: &xs,
        dtype: DType::F64,
        data: &xb,
    };
    let wr = TensorRef {
        layout: &ws,
        dtype: DType::F64,
        data: &wb,
    };
    let wrong = shaped("NCHW", "N=1,C=3,H=4,W=4");
    let e = conv2d_reference(
        &Conv2d::default(),
        xr,
        wr,
        &Epilogue::default(),
        &wrong,
        DType::F32,
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("the convolution gives N=1,C=3,H=2,W=2"),
        "{e}"
    );
    let right = shaped("NCHW", "N=1,C=3,H=2,W=2");
    let bias = [1.0, 2.0];
    let ep = Epilogue {
        bias: Some(&bias),
        relu: false,
        scale: None,
    };
    let e = conv2d_reference(&Conv2d::default(), xr, wr, &ep, &right, DType::F32).unwrap_err();
    assert!(e.to_string().contains("the bias has 2 values"), "{e}");
}
