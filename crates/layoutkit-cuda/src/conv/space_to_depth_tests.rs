//! Tests of [`super`]: the regrouped problems, the problems left and why, and the regrouped
//! convolution against the original on the reference convolution.

use super::*;
use layoutkit_core::parse_format;
use layoutkit_core::Dims;
use layoutkit_cpu::{conv2d_reference, Epilogue, TensorRef};
use proptest::prelude::*;

fn kernel(
    c: usize,
    hw: (usize, usize),
    k: (usize, usize),
    stride: [usize; 2],
    pad: [usize; 2],
) -> ConvKernel {
    let out = |x: usize, k: usize, s: usize, p: usize| (x + 2 * p - k) / s + 1;
    ConvKernel {
        shape: ConvShape {
            n: 2,
            h: hw.0,
            w: hw.1,
            c,
            o: 5,
            kh: k.0,
            kw: k.1,
            oh: out(hw.0, k.0, stride[0], pad[0]),
            ow: out(hw.1, k.1, stride[1], pad[1]),
            conv: Conv2d {
                stride,
                padding: pad,
                dilation: [1, 1],
                groups: 1,
            },
        },
        layout: ConvLayout::Nhwc,
        out_layout: ConvLayout::Nhwc,
        input: DType::I8,
        out: DType::I32,
        bias: false,
        relu: false,
    }
}

#[test]
fn the_stem_becomes_a_4x4_filter_over_16_channels_without_padding() {
    let mut stem = kernel(3, (224, 224), (7, 7), [2, 2], [3, 3]);
    stem.input = DType::F16;
    stem.out = DType::F16;
    let inner = space_to_depth_problem(&stem).unwrap();
    let t = inner.shape;
    assert_eq!((t.h, t.w, t.c, t.kh, t.kw), (115, 115, 16, 4, 4));
    assert_eq!(
        (t.oh, t.ow, t.conv.padding, t.conv.stride),
        (112, 112, [0, 0], [1, 1])
    );
    // MobileNetV2's first layer: 3x3/2 over 3 channels, padding 1 -> 2x2 over 16.
    let mut mb = kernel(3, (224, 224), (3, 3), [2, 2], [1, 1]);
    mb.input = DType::BF16;
    mb.out = DType::BF16;
    let t = space_to_depth_problem(&mb).unwrap().shape;
    assert_eq!((t.h, t.c, t.kh), (113, 16, 2));
    // A 16x16/16 patch embedding over RGB: one tap of 768 channels.
    let mut vit = kernel(3, (224, 224), (16, 16), [16, 16], [0, 0]);
    vit.input = DType::F16;
    let t = space_to_depth_problem(&vit).unwrap().shape;
    assert_eq!((t.h, t.c, t.kh, t.oh), (14, 768, 1, 14));
    // int8 pads a block's channels to 16.
    let t = space_to_depth_problem(&kernel(3, (9, 9), (3, 3), [2, 2], [1, 1])).unwrap();
    assert_eq!(t.shape.c, 16);
    let mut nchw = stem;
    nchw.layout = ConvLayout::Nchw;
    nchw.out_layout = ConvLayout::Nchw;
    let t = space_to_depth_problem(&nchw).unwrap();
    assert_eq!(
        (t.layout, t.out_layout),
        (ConvLayout::Nhwc, ConvLayout::Nchw)
    );
    let src = space_to_depth_source(&nchw);
    // A thread per regrouped pixel: NCHW runs of 2 pixels in one 4-byte load per plane and
    // row inside the image, element by element at its edges.
    assert!(
        src.contains("x + ((n * 3 + 2) * 224 + iy0 + 1) * 224 + ix0)")
            && src.contains("t.w[0] = *(const unsigned*)(src + 0);")
            && src.contains("px.e[11] = x[((n * 3 + 2) * 224 + iy0 + 1) * 224 + ix0 + 1];"),
        "{src}"
    );
    // NHWC: a block row's 2 pixels of 3 channels (12 bytes) in three 4-byte loads; the
    // 16-channel chunks of a 16x16 patch embedding one per thread.
    let src = space_to_depth_source(&stem);
    assert!(
        src.contains("px.u[5] = *(const unsigned*)(src + 8);"),
        "{src}"
    );
    assert!(space_to_depth_source(&vit).contains("const long long px = first / 768;"));
}

#[test]
fn problems_it_leaves_name_why() {
    let base = kernel(3, (16, 16), (3, 3), [2, 2], [1, 1]);
    let why = |f: &dyn Fn(&mut ConvKernel)| {
        let mut k = base;
        f(&mut k);
        space_to_depth_unsupported_reason(&k).unwrap()
    };
    assert!(why(&|k| k.shape.conv.stride = [1, 1]).contains("strided"));
    assert!(why(&|k| k.shape.c = 16).contains("16 bytes"));
    assert!(why(&|k| k.shape.conv.groups = 3).contains("groups"));
    assert!(why(&|k| k.shape.conv.dilation = [2, 2]).contains("dilation"));
    assert!(why(&|k| k.shape.kh = 1).contains("at least as long"));
    assert!(why(&|k| k.layout = ConvLayout::Nc32hw32).contains("NHWC or NCHW"));
    assert!(why(&|k| k.input = DType::F32).contains("f16, bf16 or i8"));
    let mut f16 = base;
    f16.input = DType::F16;
    f16.shape.c = 8;
    assert!(space_to_depth_unsupported_reason(&f16).is_some());
    f16.shape.c = 7;
    assert!(space_to_depth_unsupported_reason(&f16).is_none());
}

/// The reference convolution of `k` (int8, i32 output) on `x` in `layout` and OHWI `w`.
fn reference(k: &ConvKernel, x: &[u8], w: &[u8]) -> Vec<u8> {
    let s = &k.shape;
    let dims = |t: &str| Dims::parse(t).unwrap();
    let xd = dims(&format!("N={},C={},H={},W={}", s.n, s.c, s.h, s.w));
    let wd = dims(&format!("O={},I={},H={},W={}", s.o, s.c, s.kh, s.kw));
    let yd = s.conv.output_dims(&xd, &wd).unwrap();
    let shaped = |f: &str, d: &Dims| parse_format(f).unwrap().shaped(d).unwrap();
    let t = |layout, data| TensorRef {
        layout,
        dtype: DType::I8,
        data,
    };
    let ep = Epilogue {
        bias: None,
        relu: false,
        scale: None,
    };
    conv2d_reference(
        &s.conv,
        t(&shaped(k.layout.format(), &xd), x),
        t(&shaped("OHWI", &wd), w),
        &ep,
        &shaped("NHWC", &yd),
        DType::I32,
    )
    .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]
    /// The regrouped problem on the regrouped tensors gives the original convolution's
    /// exact int8 sums: strides 2-4 on either axis, filters as long as the stride up to
    /// 7, any padding under the filter, 1-15 channels, NHWC and NCHW.
    #[test]
    fn the_regrouped_convolution_equals_the_original(
        c in 1usize..16, sh in 1usize..5, sw in 1usize..5, kh in 1usize..8, kw in 1usize..8,
        ph in 0usize..7, pw in 0usize..7, h in 4usize..14, w in 4usize..14, nchw: bool,
        seed: u64,
    ) {
        prop_assume!((sh, sw) != (1, 1) && kh >= sh && kw >= sw && ph < kh && pw < kw);
        prop_assume!(h + 2 * ph >= kh && w + 2 * pw >= kw);
        let mut k = kernel(c, (h, w), (kh, kw), [sh, sw], [ph, pw]);
        if nchw {
            k.layout = ConvLayout::Nchw;
        }
        let s = k.shape;
        let noise = |n: usize, salt: u64| -> Vec<u8> {
            (0..n as u64)
                .map(|i| ((i ^ seed ^ salt).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as u8)
                .collect()
        };
        let x = noise(s.n * s.c * s.h * s.w, 1);
        let wt = noise(s.o * s.kh * s.kw * s.c, 2);
        let inner = space_to_depth_problem(&k).unwrap();
        let (xs, ws) = space_to_depth_host(&k, &x, &wt).unwrap();
        prop_assert_eq!((xs.len(), ws.len()), space_to_depth_bytes(&k).unwrap());
        prop_assert_eq!(reference(&inner, &xs, &ws), reference(&k, &x, &wt));
    }
}

/// The Hopper kernel writes NCHW from NHWC at channel counts the `mma.sync` kernel does not
/// take (the regrouped stem's 16), so NCHW activations and outputs go through space to depth.
#[test]
fn the_regrouped_problem_writes_nchw_in_the_hopper_kernel() {
    let mut k = kernel(3, (64, 64), (7, 7), [2, 2], [3, 3]);
    (k.input, k.out) = (DType::F16, DType::F16);
    (k.layout, k.out_layout) = (ConvLayout::Nchw, ConvLayout::Nchw);
    let inner = space_to_depth_problem(&k).unwrap();
    assert_eq!(
        (inner.layout, inner.out_layout, inner.shape.c),
        (ConvLayout::Nhwc, ConvLayout::Nchw, 16)
    );
    assert!(crate::conv::hopper_unsupported_reason(&inner).is_none());
    assert!(crate::conv::unsupported_reason(&inner).is_some());
    // int8 keeps the layout it reads.
    let mut q = k;
    (q.input, q.out, q.layout) = (DType::I8, DType::I32, ConvLayout::Nhwc);
    let inner = space_to_depth_problem(&q).unwrap();
    assert!(crate::conv::hopper_unsupported_reason(&inner).is_some());
}

/// The rule regroups problems of enough work: the stem from batch 1, MobileNetV2's 3x3/2 over
/// 3 channels from batch 10 (10.8 M multiply-adds per image).
#[test]
fn the_rule_regroups_problems_of_enough_work() {
    let layer = |c, k, pad, o, n| {
        let mut l = kernel(c, (224, 224), (k, k), [2, 2], [pad, pad]);
        (l.shape.n, l.shape.o, l.input, l.out) = (n, o, DType::F16, DType::F16);
        l
    };
    assert!(space_to_depth_preferred(&layer(3, 7, 3, 64, 1)));
    assert!(!space_to_depth_preferred(&layer(3, 3, 1, 32, 8)));
    assert!(space_to_depth_preferred(&layer(3, 3, 1, 32, 10)));
    let mut depthwise = layer(3, 3, 1, 3, 64);
    depthwise.shape.conv.groups = 3;
    assert!(!space_to_depth_preferred(&depthwise));
    // int8 over 3 channels: no other kernel takes it, so regrouped at any size.
    let small = kernel(3, (16, 16), (3, 3), [2, 2], [1, 1]);
    assert!(crate::conv::hopper_unsupported_reason(&small).is_some());
    assert!(space_to_depth_preferred(&small));
    let mut f16 = small;
    (f16.input, f16.out) = (DType::F16, DType::F16);
    assert!(!space_to_depth_preferred(&f16));
}
