//! The implicit-GEMM convolution against the f64 reference: random problems (stride, padding,
//! dilation, groups, depthwise, odd channel counts, bias, ReLU), activations in NCHW, NHWC and
//! `NCHW<x>c`, filters and outputs in several layouts, 1 to 3 threads.

use layoutkit_core::conv::Conv2d;
use layoutkit_core::{parse_format, DType, Dims, ShapedLayout};
use layoutkit_cpu::{
    conv2d_fast, conv2d_fast_packed, conv2d_fast_supports, conv2d_reference, convert, Epilogue,
    PackedFilter, TensorRef,
};
use proptest::prelude::*;

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

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn fast_matches_the_reference(
        n in 1usize..=2, groups in 1usize..=3, cg in 1usize..=20, og in 1usize..=20,
        kh in 1usize..=3, kw in 1usize..=3, pad in 0usize..=2, stride in 1usize..=2, dil in 1usize..=2,
        h in 5usize..=12, w in 5usize..=12, layout in 0usize..5, threads in 1usize..=3,
        depthwise: bool, with_bias: bool, relu: bool, seed in 0u64..1000,
    ) {
        let (groups, cg, og) = if depthwise { (cg.min(8) + 1, 1, 1) } else { (groups, cg, og) };
        let conv = Conv2d { stride: [stride, 3 - stride], padding: [pad, 2 - pad], dilation: [dil, 1], groups };
        let xd = Dims::parse(&format!("N={n},C={},H={h},W={w}", groups * cg)).unwrap();
        let wd = Dims::parse(&format!("O={},I={cg},H={kh},W={kw}", groups * og)).unwrap();
        prop_assume!(conv.output_dims(&xd, &wd).is_ok());
        let yd = conv.output_dims(&xd, &wd).unwrap();
        let (xf, wf, yf) = [
            ("NCHW", "OIHW", "NCHW"),
            ("NHWC", "OHWI", "NHWC"),
            ("NCHW8c", "OIHW", "NCHW8c"),
            ("NCHW4c", "OIHW4i4o", "NHWC"),
            ("NCHW16c", "HWIO", "NCHW"),
        ][layout];
        let plain_x = shaped("NCHW", &xd);
        let xs = shaped(xf, &xd);
        let ws = shaped(wf, &wd);
        let ys = shaped(yf, &yd);
        let x_plain = noise_f32(plain_x.elements(), seed);
        let xb = convert(&plain_x, &x_plain, &xs, &layoutkit_core::CastSpec::identity(DType::F32)).unwrap();
        let plain_w = shaped("OIHW", &wd);
        let wb = convert(&plain_w, &noise_f32(plain_w.elements(), seed + 7), &ws, &layoutkit_core::CastSpec::identity(DType::F32)).unwrap();
        let bias: Vec<f64> = (0..groups * og).map(|i| (i as f64) * 0.25 - 1.0).collect();
        let ep = Epilogue { bias: with_bias.then_some(&bias[..]), relu, scale: None };
        let xr = TensorRef { layout: &xs, dtype: DType::F32, data: &xb };
        let wr = TensorRef { layout: &ws, dtype: DType::F32, data: &wb };
        prop_assert!(conv2d_fast_supports(&xr));
        let want = values(&conv2d_reference(&conv, xr, wr, &ep, &ys, DType::F32).unwrap());
        let got = values(&conv2d_fast(&conv, xr, wr, &ep, &ys, DType::F32, threads).unwrap());
        prop_assert_eq!(got.len(), want.len());
        let err: f64 = got.iter().zip(&want).map(|(a, b)| (a - b) * (a - b)).sum::<f64>().sqrt();
        let norm: f64 = want.iter().map(|b| b * b).sum::<f64>().sqrt();
        prop_assert!(err <= 1e-5 * norm.max(1e-30), "relative error {} ({} {} {})", err / norm, xf, wf, yf);
        // The thread count does not change the result.
        let one = conv2d_fast(&conv, xr, wr, &ep, &ys, DType::F32, 1).unwrap();
        prop_assert_eq!(values(&one), got.clone());
        // A filter packed beforehand gives the same bytes; one packed for other groups is refused.
        let packed = PackedFilter::new(wr, groups).unwrap();
        let again = conv2d_fast_packed(&conv, xr, &packed, &ep, &ys, DType::F32, threads).unwrap();
        prop_assert_eq!(values(&again), got);
        if groups > 1 {
            let ungrouped = PackedFilter::new(wr, 1).unwrap();
            prop_assert!(conv2d_fast_packed(&conv, xr, &ungrouped, &ep, &ys, DType::F32, 1).is_err());
        }
    }
}

#[test]
fn other_activations_are_refused_with_a_pointer_to_the_reference() {
    let d = Dims::parse("N=1,C=3,H=4,W=4").unwrap();
    let xs = shaped("kHWC8", &d);
    let ws = shaped("OIHW", &Dims::parse("O=2,I=3,H=1,W=1").unwrap());
    let ys = shaped("NCHW", &Dims::parse("N=1,C=2,H=4,W=4").unwrap());
    let xb = vec![0u8; xs.bytes(DType::F32).unwrap()];
    let wb = vec![0u8; 24];
    let e = conv2d_fast(
        &Conv2d::default(),
        TensorRef {
            layout: &xs,
            dtype: DType::F32,
            data: &xb,
        },
        TensorRef {
            layout: &ws,
            dtype: DType::F32,
            data: &wb,
        },
        &Epilogue::default(),
        &ys,
        DType::F32,
        1,
    )
    .unwrap_err();
    assert!(e.to_string().contains("use the reference"), "{e}");
}
