//! Tests of [`super`]: random depthwise problems against the reference convolution, every
//! layout of the family, every build this CPU runs, one and three threads; the same output
//! whatever the layout, build or threads; what it does not take.

use layoutkit_core::{parse_format, Dims};
use proptest::prelude::*;

use super::*;
use crate::conv2d_blocked;
use crate::conv_blocked::tests::{builds, f32_tensor, noise, values};

/// The depthwise problem's output in `layout` (activations and output) through the blocked
/// engine's entry, and the reference's, as f64 in NCHW order.
#[allow(clippy::too_many_arguments)]
fn run(
    conv: &Conv2d,
    dims: (usize, usize, usize, usize, (usize, usize)),
    layout: &str,
    relu: bool,
    threads: usize,
    kernels: ConvKernels,
) -> (Vec<f64>, Vec<f64>) {
    let o = Operands::new(conv, dims, layout);
    let (x, wt, ep) = (o.x(), o.w(), o.epilogue(relu));
    assert!(conv2d_depthwise_supports(conv, &x, &wt));
    // Both in NCHW, so outputs of different layouts compare value for value.
    let y_nchw = parse_format("NCHW").unwrap().shaped(&o.ys.dims()).unwrap();
    let to_nchw =
        |b: Vec<u8>| values(&convert(&o.ys, &b, &y_nchw, &CastSpec::identity(DType::F32)).unwrap());
    let want = crate::conv2d_reference(conv, x, wt, &ep, &o.ys, DType::F32).unwrap();
    let got = conv2d_blocked(conv, x, wt, &ep, &o.ys, DType::F32, threads, kernels).unwrap();
    (to_nchw(got), to_nchw(want))
}

/// The operands of [`run`], [`direct`] and [`reference`]: activations (the same logical
/// values in every layout), an OIHW filter, a bias, and the shaped layouts of input, filter
/// and output.
struct Operands {
    xs: ShapedLayout,
    ws: ShapedLayout,
    ys: ShapedLayout,
    xb: Vec<u8>,
    wb: Vec<u8>,
    bias: Vec<f64>,
}

impl Operands {
    fn new(
        conv: &Conv2d,
        (n, c, h, w, k): (usize, usize, usize, usize, (usize, usize)),
        layout: &str,
    ) -> Operands {
        let xd = Dims::parse(&format!("N={n},C={c},H={h},W={w}")).unwrap();
        let wd = Dims::parse(&format!("O={c},I=1,H={},W={}", k.0, k.1)).unwrap();
        let yd = conv.output_dims(&xd, &wd).unwrap();
        let xs = parse_format(layout).unwrap().shaped(&xd).unwrap();
        let ws = parse_format("OIHW").unwrap().shaped(&wd).unwrap();
        let ys = parse_format(layout).unwrap().shaped(&yd).unwrap();
        // The same logical values in every layout: noise in NCHW, converted.
        let nchw = parse_format("NCHW").unwrap().shaped(&xd).unwrap();
        let xb = convert(
            &nchw,
            &noise(nchw.elements(), 7),
            &xs,
            &CastSpec::identity(DType::F32),
        )
        .unwrap();
        Operands {
            xb,
            wb: noise(ws.elements(), 11),
            bias: (0..c).map(|i| (i % 5) as f64 * 0.25 - 0.5).collect(),
            xs,
            ws,
            ys,
        }
    }

    fn x(&self) -> TensorRef<'_> {
        f32_tensor(&self.xs, &self.xb)
    }

    fn w(&self) -> TensorRef<'_> {
        f32_tensor(&self.ws, &self.wb)
    }

    fn epilogue(&self, relu: bool) -> Epilogue<'_> {
        Epilogue {
            bias: Some(&self.bias),
            relu,
            scale: None,
        }
    }
}

/// The depthwise entry's output bytes in `layout`, with the sliding kernel or without.
#[allow(clippy::too_many_arguments)]
fn direct(
    conv: &Conv2d,
    dims: (usize, usize, usize, usize, (usize, usize)),
    layout: &str,
    relu: bool,
    threads: usize,
    kernels: ConvKernels,
    sliding: bool,
) -> Vec<u8> {
    let o = Operands::new(conv, dims, layout);
    let filter = DepthwiseFilter::new(o.w()).unwrap();
    let mut out = vec![0u8; o.ys.bytes(DType::F32).unwrap()];
    let ep = o.epilogue(relu);
    depthwise_into(
        conv,
        o.x(),
        &filter,
        &ep,
        &o.ys,
        &mut out,
        threads,
        kernels,
        sliding,
    )
    .unwrap();
    out
}

/// The reference convolution's output for [`direct`]'s operands, as f64 in `layout`'s order.
fn reference(
    conv: &Conv2d,
    dims: (usize, usize, usize, usize, (usize, usize)),
    layout: &str,
    relu: bool,
) -> Vec<f64> {
    let o = Operands::new(conv, dims, layout);
    let ep = o.epilogue(relu);
    values(&crate::conv2d_reference(conv, o.x(), o.w(), &ep, &o.ys, DType::F32).unwrap())
}

fn rel_err(got: &[f64], want: &[f64]) -> f64 {
    let err: f64 = got.iter().zip(want).map(|(a, b)| (a - b) * (a - b)).sum();
    let norm: f64 = want.iter().map(|b| b * b).sum();
    err.sqrt() / norm.sqrt().max(1e-30)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    /// Random problems: channels 2-40 (not multiples of the vectors), planes to 40, filters
    /// 1-5 per axis, strides 1-3, padding 0-3, dilation 1-2, in NCHW, NHWC, NCHW4c, NCHW8c
    /// and NCHW16c, every build, one and three threads: within 1e-5 of the reference, and
    /// the same output as the same build's NHWC on one thread.
    #[test]
    fn depthwise_matches_the_reference(
        n in 1usize..3,
        c in 2usize..41,
        h in 1usize..41,
        w in 1usize..41,
        k in (1usize..6, 1usize..6),
        stride in (1usize..4, 1usize..4),
        pad in (0usize..4, 0usize..4),
        dil in (1usize..3, 1usize..3),
        relu in any::<bool>(),
        layout in prop::sample::select(vec!["NCHW", "NHWC", "NCHW4c", "NCHW8c", "NCHW16c"]),
        threads in prop::sample::select(vec![1usize, 3]),
    ) {
        let ext = |k: usize, d: usize| (k - 1) * d + 1;
        prop_assume!(h + 2 * pad.0 >= ext(k.0, dil.0) && w + 2 * pad.1 >= ext(k.1, dil.1));
        let conv = Conv2d {
            stride: [stride.0, stride.1],
            padding: [pad.0, pad.1],
            dilation: [dil.0, dil.1],
            groups: c,
        };
        for kernels in builds() {
            let (base, want) = run(&conv, (n, c, h, w, k), "NHWC", relu, 1, kernels);
            prop_assert!(rel_err(&base, &want) <= 1e-5, "{kernels:?} NHWC");
            let (got, _) = run(&conv, (n, c, h, w, k), layout, relu, threads, kernels);
            prop_assert!(rel_err(&got, &want) <= 1e-5, "{kernels:?} {layout}");
            prop_assert_eq!(&got, &base, "the same sums in every layout and thread count");
        }
    }

    /// The sliding kernel (3x3, 5x5 and 7x7 filters, stride 1 or 2 along W, no dilation along W;
    /// groups of 1-8 pixels, pairs of vectors, half vectors) and the general tap loop it
    /// stands in for are each within 1e-5 of the reference, in every build, layout of the
    /// family and thread count: channels 2-70, rows 1-40 wide, any padding, stride and
    /// dilation along H.
    #[test]
    fn sliding_kernel_and_general_tap_loop_match_the_reference(
        n in 1usize..3,
        c in 2usize..71,
        h in 1usize..12,
        w in 1usize..41,
        kh in 1usize..6,
        kw in prop::sample::select(vec![3usize, 5, 7]),
        stride in (1usize..4, 1usize..3),
        pad in (0usize..3, 0usize..3),
        dil_h in 1usize..3,
        relu in any::<bool>(),
        layout in prop::sample::select(vec!["NCHW", "NHWC", "NCHW8c", "NCHW16c"]),
        threads in prop::sample::select(vec![1usize, 3]),
    ) {
        prop_assume!(h + 2 * pad.0 > (kh - 1) * dil_h && w + 2 * pad.1 >= kw);
        let conv = Conv2d {
            stride: [stride.0, stride.1],
            padding: [pad.0, pad.1],
            dilation: [dil_h, 1],
            groups: c,
        };
        let dims = (n, c, h, w, (kh, kw));
        let want = reference(&conv, dims, layout, relu);
        for kernels in builds() {
            for sliding in [true, false] {
                let got = direct(&conv, dims, layout, relu, threads, kernels, sliding);
                prop_assert!(
                    rel_err(&values(&got), &want) <= 1e-5,
                    "{:?} {} sliding {}", kernels, layout, sliding
                );
            }
        }
    }
}

/// MobileNetV2's and EfficientNet's shapes: 144 channels on 56 x 56 (vectors of 16 in pairs
/// and one alone, a row's 16-pixel runs), 5x5 at stride 2, 250 channels (a partial vector),
/// 32 channels on 56 x 56 (one pair of vectors; in `NCHW8c` half vectors of 8 and 4
/// pixels), 40 channels (a pair and a half vector).
#[test]
fn depthwise_layers_of_published_networks_match_the_reference() {
    let shapes = [
        (144, 56, 3, 1),
        (96, 28, 5, 2),
        (250, 14, 3, 1),
        (32, 56, 3, 1),
        (40, 14, 3, 1),
    ];
    for (c, hw, k, stride) in shapes {
        let conv = Conv2d {
            stride: [stride; 2],
            padding: [k / 2; 2],
            dilation: [1; 2],
            groups: c,
        };
        for layout in ["NCHW", "NHWC", "NCHW8c", "NCHW16c"] {
            for kernels in builds() {
                let (got, want) = run(&conv, (1, c, hw, hw, (k, k)), layout, true, 2, kernels);
                assert!(
                    rel_err(&got, &want) <= 1e-5,
                    "{c} {hw} {k} {layout} {kernels:?}"
                );
            }
        }
    }
}

/// Grouped convolutions that are not depthwise, and other types, are not this kernel's.
#[test]
fn only_depthwise_f32_in_the_family() {
    let xd = Dims::parse("N=1,C=8,H=4,W=4").unwrap();
    let xs = parse_format("NHWC").unwrap().shaped(&xd).unwrap();
    let xb = vec![0u8; xs.elements() * 4];
    let x = TensorRef {
        layout: &xs,
        dtype: DType::F32,
        data: &xb,
    };
    let filter = |o: usize, i: usize| {
        parse_format("OIHW")
            .unwrap()
            .shaped(&Dims::parse(&format!("O={o},I={i},H=3,W=3")).unwrap())
            .unwrap()
    };
    let (dw, grouped, dense) = (filter(8, 1), filter(8, 2), filter(8, 8));
    let wb = vec![0u8; 8 * 2 * 9 * 4];
    let conv = |groups| Conv2d {
        groups,
        ..Conv2d::default()
    };
    let w = |l| TensorRef {
        layout: l,
        dtype: DType::F32,
        data: &wb,
    };
    assert!(conv2d_depthwise_supports(&conv(8), &x, &w(&dw)));
    assert!(!conv2d_depthwise_supports(&conv(4), &x, &w(&grouped)));
    assert!(!conv2d_depthwise_supports(&conv(1), &x, &w(&dense)));
    let x16 = TensorRef {
        dtype: DType::F16,
        ..x
    };
    assert!(!conv2d_depthwise_supports(&conv(8), &x16, &w(&dw)));
}
