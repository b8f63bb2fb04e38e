//! Unit tests that need the module's insides: the chunked reduction (tiny caches force one
//! vector of channels per chunk and one row per group) against the reference, on every build
//! this CPU runs.

use layoutkit_core::conv::Conv2d;
use layoutkit_core::{parse_format, DType, Dims};

use super::packing::tests::SMALL_CACHES;
use super::*;

/// `n` f32 values in [-1, 1) from `seed`, as bytes (shared with the depthwise tests).
pub(crate) fn noise(n: usize, seed: u64) -> Vec<u8> {
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

/// A view of f32 bytes `data` in `layout`.
pub(crate) fn f32_tensor<'a>(layout: &'a ShapedLayout, data: &'a [u8]) -> TensorRef<'a> {
    TensorRef {
        layout,
        dtype: DType::F32,
        data,
    }
}

/// f32 bytes as f64 values.
pub(crate) fn values(b: &[u8]) -> Vec<f64> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64)
        .collect()
}

/// The builds this CPU runs.
pub(crate) fn builds() -> impl Iterator<Item = ConvKernels> {
    [
        ConvKernels::Avx512,
        ConvKernels::Avx2,
        ConvKernels::Portable,
    ]
    .into_iter()
    .filter(|k| k.resolve().is_ok())
}

/// Noise activations of dims `xd` in `layout`, an OIHW filter of dims `wd`, and the shaped
/// layouts of both and of the output (in `layout` too).
struct Operands {
    xs: ShapedLayout,
    ws: ShapedLayout,
    ys: ShapedLayout,
    xb: Vec<u8>,
    wb: Vec<u8>,
}

impl Operands {
    fn new(conv: &Conv2d, xd: &str, wd: &str, layout: &str, seeds: (u64, u64)) -> Operands {
        let (xd, wd) = (Dims::parse(xd).unwrap(), Dims::parse(wd).unwrap());
        let yd = conv.output_dims(&xd, &wd).unwrap();
        let xs = parse_format(layout).unwrap().shaped(&xd).unwrap();
        let ws = parse_format("OIHW").unwrap().shaped(&wd).unwrap();
        let ys = parse_format(layout).unwrap().shaped(&yd).unwrap();
        let (xb, wb) = (noise(xs.elements(), seeds.0), noise(ws.elements(), seeds.1));
        Operands { xs, ws, ys, xb, wb }
    }

    fn x(&self) -> TensorRef<'_> {
        f32_tensor(&self.xs, &self.xb)
    }

    fn w(&self) -> TensorRef<'_> {
        f32_tensor(&self.ws, &self.wb)
    }

    /// The reference convolution's output (in `ys`) as f64 values.
    fn reference(&self, conv: &Conv2d, ep: &Epilogue<'_>) -> Vec<f64> {
        values(
            &crate::conv2d_reference(conv, self.x(), self.w(), ep, &self.ys, DType::F32).unwrap(),
        )
    }

    /// An output buffer for `ys` filled with NaN, so that every element a call leaves
    /// unwritten shows.
    fn nan_output(&self) -> crate::AlignedBuf {
        let mut out = crate::AlignedBuf::zeroed(self.ys.bytes(DType::F32).unwrap());
        out.fill(0xff);
        out
    }
}

/// Asserts that every element of `got` (f32 bytes) is within 1e-5 of `want`, relative to
/// 1 + |want| (padding slots included: the reference writes them as 0).
fn assert_each_close(got: &[u8], want: &[f64], what: &str) {
    for (i, (g, r)) in values(got).iter().zip(want).enumerate() {
        assert!(
            (g - r).abs() <= 1e-5 * (1.0 + r.abs()),
            "{what} element {i}: {g} against {r}"
        );
    }
}

/// Asserts that the blocked convolution of noise activations `xd` and filter `wd`
/// (activations and output in `layout`) is within 1e-5 relative error of the reference.
#[allow(clippy::too_many_arguments)]
fn assert_matches_reference(
    conv: &Conv2d,
    xd: &str,
    wd: &str,
    layout: &str,
    ep: &Epilogue<'_>,
    threads: usize,
    kernels: ConvKernels,
    seeds: (u64, u64),
    what: &str,
) {
    let ops = Operands::new(conv, xd, wd, layout, seeds);
    let want = ops.reference(conv, ep);
    let (x, w, ys) = (ops.x(), ops.w(), &ops.ys);
    let got = values(&conv2d_blocked(conv, x, w, ep, ys, DType::F32, threads, kernels).unwrap());
    let err: f64 = got.iter().zip(&want).map(|(a, b)| (a - b) * (a - b)).sum();
    let norm: f64 = want.iter().map(|b| b * b).sum();
    assert!(
        err.sqrt() <= 1e-5 * norm.sqrt(),
        "{kernels:?} {layout} {what}"
    );
}

#[test]
fn chunked_reductions_match_the_reference() {
    // Caches of 1 byte give exactly one vector of channels per chunk and one pixel per group.
    SMALL_CACHES.with(|c| c.set(true));
    let bias: Vec<f64> = (0..24).map(|i| i as f64 * 0.1 - 1.0).collect();
    for kernels in builds() {
        for (layout, pad, relu) in [("NCHW16c", 1, true), ("NHWC", 0, false), ("NCHW", 1, true)] {
            let conv = Conv2d {
                padding: [pad, pad],
                ..Conv2d::default()
            };
            let ep = Epilogue {
                bias: Some(&bias),
                relu,
                scale: None,
            };
            let (xd, wd) = ("N=1,C=40,H=5,W=7", "O=24,I=40,H=3,W=3");
            assert_matches_reference(&conv, xd, wd, layout, &ep, 1, kernels, (1, 2), "");
        }
    }
    SMALL_CACHES.with(|c| c.set(false));
}

#[test]
fn band_copies_match_the_reference() {
    // Inputs several times their filter, padded: items copy their own bands of padded rows
    // (one output row per band with caches of 1 byte, several with the machine's), on 1-3
    // threads, every build, strides 1 and 2, activations in blocked, NHWC and NCHW layouts.
    let ep = Epilogue {
        bias: None,
        relu: true,
        scale: None,
    };
    for small in [true, false] {
        SMALL_CACHES.with(|c| c.set(small));
        for kernels in builds() {
            for (layout, stride, threads) in [
                ("NCHW16c", 1, 1),
                ("NHWC", 2, 2),
                ("NCHW", 1, 3),
                ("NCHW8c", 2, 1),
            ] {
                let conv = Conv2d {
                    padding: [1, 2],
                    stride: [stride, stride],
                    ..Conv2d::default()
                };
                let (xd, wd) = ("N=2,C=20,H=23,W=19", "O=16,I=20,H=3,W=3");
                let what = format!("stride {stride} small caches {small}");
                assert_matches_reference(
                    &conv,
                    xd,
                    wd,
                    layout,
                    &ep,
                    threads,
                    kernels,
                    (3, 4),
                    &what,
                );
            }
        }
    }
    SMALL_CACHES.with(|c| c.set(false));
}

#[test]
fn two_row_tiles_match_the_reference() {
    // Output rows of 1, 2, 3 and 7 pixels, where the tiles take two rows at a time (AVX2:
    // 7-pixel rows in 2 x 3 and 2 x 2 tiles; both x86 builds: rows of up to 3 pixels), with an
    // odd row count (a row alone, or a pair whose second row is the next image's first) and
    // several images, strides 1 and 2, bias and ReLU, on 1 and 2 threads.
    let bias: Vec<f64> = (0..40).map(|i| i as f64 * 0.05 - 1.0).collect();
    let ep = Epilogue {
        bias: Some(&bias),
        relu: true,
        scale: None,
    };
    for kernels in builds() {
        for (layout, xd, stride, threads) in [
            ("NCHW8c", "N=2,C=24,H=5,W=7", 1, 1),
            ("NHWC", "N=3,C=16,H=7,W=7", 1, 2),
            ("NCHW16c", "N=2,C=32,H=13,W=13", 2, 1),
            ("NCHW", "N=1,C=8,H=9,W=3", 1, 1),
            ("NCHW8c", "N=2,C=16,H=5,W=2", 1, 2),
            ("NHWC", "N=2,C=8,H=3,W=1", 1, 1),
        ] {
            let conv = Conv2d {
                padding: [1, 1],
                stride: [stride, stride],
                ..Conv2d::default()
            };
            let c: usize = xd
                .split("C=")
                .nth(1)
                .unwrap()
                .split(',')
                .next()
                .unwrap()
                .parse()
                .unwrap();
            let wd = format!("O=40,I={c},H=3,W=3");
            let what = format!("{xd} stride {stride} threads {threads}");
            assert_matches_reference(&conv, xd, &wd, layout, &ep, threads, kernels, (5, 6), &what);
        }
    }
}

#[test]
fn two_rows_win_only_where_the_smallest_tile_grows() {
    use super::schedule::two_rows_win;
    // AVX2 (tiles of up to 6 pixels, two rows of up to 3): 7-pixel rows yes (4 + 3 -> 2 x 3,
    // 2 x 2, 2 x 2), 14 no (5, 5, 4 -> 2 x 3 ... 2 x 2: 4 either way), short rows yes.
    assert!(two_rows_win(7, 6, 3));
    assert!(!two_rows_win(14, 6, 3));
    assert!(!two_rows_win(56, 6, 3));
    for len in 1..=3 {
        assert!(two_rows_win(len, 6, 3), "{len}");
    }
    // AVX-512 (12, two rows of 6): 7-, 14- and 28-pixel rows stay one row at a time (tiles
    // of 7 pixels or more), rows of 1-3 pixels go two at a time.
    assert!(!two_rows_win(7, 12, 6));
    assert!(!two_rows_win(14, 12, 6));
    assert!(!two_rows_win(28, 12, 6));
    assert!(two_rows_win(3, 12, 6));
    // No two-row tiles in the build.
    assert!(!two_rows_win(7, 4, 0));
}

/// Groups whose output channels are not whole vectors, joined into super-groups of a
/// block-diagonal filter (ResNeXt-50's 4 per group; 8; 2 with a channel multiplier; strides
/// and dilation; 24 and 12 per group, which do not divide the vector: 2 or 4 groups fill
/// whole vectors), and groups that cannot be joined (a group count the join does not divide,
/// which go to the implicit GEMM): every build, one and two threads, NCHW, NHWC and NCHW16c,
/// within 1e-5 of the reference.
#[test]
fn small_groups_joined_into_super_groups_match_the_reference() {
    assert_eq!(super::blocked_supergroup(32, 4, 16), 4);
    assert_eq!(super::blocked_supergroup(32, 8, 8), 1);
    assert_eq!(super::blocked_supergroup(3, 4, 16), 1);
    assert_eq!(super::blocked_supergroup(4, 3, 16), 1);
    // Outputs that do not divide the vector: the fewest groups that fill whole vectors.
    assert_eq!(super::blocked_supergroup(2, 24, 16), 2);
    assert_eq!(super::blocked_supergroup(16, 3, 16), 16);
    assert_eq!(super::blocked_supergroup(8, 12, 16), 4);
    assert_eq!(super::blocked_supergroup(3, 24, 16), 1);
    assert_eq!(super::blocked_supergroup(2, 24, 8), 1);
    // (C, O, groups, kernel, stride, padding, dilation)
    let cases = [
        (32, 32, 8, 3, 1, 1, 1),
        (24, 48, 6, 3, 2, 1, 1),
        (16, 32, 16, 3, 1, 2, 2),
        (12, 12, 4, 3, 1, 1, 1),
        (12, 12, 3, 1, 1, 0, 1),
        (32, 32, 4, 5, 2, 2, 1),
        (48, 48, 2, 3, 1, 1, 1),
        (48, 48, 4, 3, 2, 1, 1),
        (36, 72, 6, 3, 1, 1, 1),
    ];
    for (i, &(c, o, g, k, s, p, d)) in cases.iter().enumerate() {
        let conv = Conv2d {
            stride: [s; 2],
            padding: [p; 2],
            dilation: [d; 2],
            groups: g,
        };
        let (xd, wd) = (
            format!("N=2,C={c},H=9,W=11"),
            format!("O={o},I={},H={k},W={k}", c / g),
        );
        let bias: Vec<f64> = (0..o).map(|i| (i % 3) as f64 * 0.5 - 0.5).collect();
        let ep = Epilogue {
            bias: Some(&bias),
            relu: true,
            scale: None,
        };
        for kernels in builds() {
            for layout in ["NCHW", "NHWC", "NCHW16c"] {
                for threads in [1, 2] {
                    assert_matches_reference(
                        &conv,
                        &xd,
                        &wd,
                        layout,
                        &ep,
                        threads,
                        kernels,
                        (i as u64, 50 + i as u64),
                        &format!("{c}->{o} groups {g}"),
                    );
                }
            }
        }
    }
}

#[test]
fn outputs_past_the_last_whole_vector_are_written_in_place() {
    // O not a multiple of the vector (1-40 channels: a last vector of 1-15 real lanes) in
    // layouts where the tiles store straight into the output: NHWC (the spare lanes belong to
    // the next pixel: stored and reloaded masked) and channel blocks as wide as the vector or
    // wider (the spare lanes are the block's padding: written as zeros). The output starts as
    // NaN, so every element, padding included, must be written; chunks of one vector (small
    // caches) make the tiles reload their partial sums, bias and ReLU are fused, 1 and 3
    // threads, every build.
    let bias: Vec<f64> = (0..40).map(|i| i as f64 * 0.07 - 1.3).collect();
    for small in [true, false] {
        SMALL_CACHES.with(|c| c.set(small));
        for kernels in builds() {
            let lanes = kernels.tables().0;
            for o in [1, 5, 8, 12, 20, 24, 40] {
                for (layout, threads, stride) in [
                    ("NHWC", 1, 1),
                    (&*format!("NCHW{lanes}c"), 3, 1),
                    (&*format!("NCHW{}c", 2 * lanes), 1, 2),
                ] {
                    let conv = Conv2d {
                        padding: [1, 1],
                        stride: [stride, stride],
                        ..Conv2d::default()
                    };
                    let ep = Epilogue {
                        bias: Some(&bias[..o]),
                        relu: o % 2 == 0,
                        scale: None,
                    };
                    let wd = format!("O={o},I=19,H=3,W=3");
                    let ops = Operands::new(&conv, "N=2,C=19,H=9,W=11", &wd, layout, (7, 8));
                    let want = ops.reference(&conv, &ep);
                    let packed = BlockedFilter::new(ops.w(), 1, kernels).unwrap();
                    assert!(conv2d_blocked_unsupported(&ops.x(), &packed).is_none());
                    let mut out = ops.nan_output();
                    conv2d_blocked_into(&conv, ops.x(), &packed, &ep, &ops.ys, &mut out, threads)
                        .unwrap();
                    assert_each_close(&out, &want, &format!("{kernels:?} {layout} O={o}"));
                }
            }
        }
    }
    SMALL_CACHES.with(|c| c.set(false));
}

#[test]
fn nchw_pointwise_products_match_the_reference() {
    // 1x1 filters at stride 1 on NCHW activations and output (the pixel-vector product): O of
    // 1-40 (tiles of R outputs with a last one partly past O), planes whose pixels end inside
    // a vector and inside a block of vectors (5 x 5, 7 x 9, 1 x 1, 13 x 13), input channels
    // in one chunk or several (small caches: chunks of 8, the partial sums reloaded), bias
    // and ReLU, two images, 1 and 3 threads, every build; the output starts as NaN.
    let bias: Vec<f64> = (0..40).map(|i| i as f64 * 0.05 - 0.9).collect();
    for small in [false, true] {
        SMALL_CACHES.with(|c| c.set(small));
        for kernels in builds() {
            for (o, c, h, w, threads) in [
                (1, 3, 5, 5, 1),
                (8, 19, 7, 9, 3),
                (24, 40, 13, 13, 1),
                (13, 17, 1, 1, 3),
                (40, 33, 8, 8, 3),
            ] {
                let ep = Epilogue {
                    bias: Some(&bias[..o]),
                    relu: o % 2 == 0,
                    scale: None,
                };
                let conv = Conv2d {
                    padding: [0, 0],
                    ..Conv2d::default()
                };
                let (xd, wd) = (
                    format!("N=2,C={c},H={h},W={w}"),
                    format!("O={o},I={c},H=1,W=1"),
                );
                let ops = Operands::new(&conv, &xd, &wd, "NCHW", (11, 12));
                let want = ops.reference(&conv, &ep);
                let packed = BlockedFilter::new(ops.w(), 1, kernels).unwrap();
                let mut out = ops.nan_output();
                if small {
                    // Caches this small keep the filter out of `applies`: the product itself.
                    let pool = (threads > 1).then(|| runtime::pool(threads).unwrap());
                    let dims = [2, o, h, w];
                    let xv = runtime::f32s(&ops.xb);
                    pointwise::convolve(
                        &xv,
                        &packed,
                        &ep,
                        dims,
                        &mut out,
                        threads,
                        pool.as_deref(),
                    )
                    .unwrap();
                } else {
                    assert!(pointwise::applies(&conv, &ops.xs, &ops.ys, &packed));
                    conv2d_blocked_into(&conv, ops.x(), &packed, &ep, &ops.ys, &mut out, threads)
                        .unwrap();
                }
                let what = format!("{kernels:?} O={o} C={c} {h}x{w} small caches {small}");
                assert_each_close(&out, &want, &what);
            }
        }
    }
    SMALL_CACHES.with(|c| c.set(false));
}

#[test]
fn empty_pointwise_problems_do_not_panic() {
    // No images: the NCHW product declines them (nothing to divide into blocks; planes of no
    // pixels are refused earlier, as a filter larger than its input), and the call writes the
    // empty output.
    let conv = Conv2d {
        padding: [0, 0],
        ..Conv2d::default()
    };
    let ops = Operands::new(&conv, "N=0,C=3,H=4,W=4", "O=5,I=3,H=1,W=1", "NCHW", (2, 3));
    let packed = BlockedFilter::new(ops.w(), 1, ConvKernels::Portable).unwrap();
    assert!(!pointwise::applies(&conv, &ops.xs, &ops.ys, &packed));
    let ep = Epilogue {
        bias: None,
        relu: false,
        scale: None,
    };
    let mut out: Vec<u8> = Vec::new();
    conv2d_blocked_into(&conv, ops.x(), &packed, &ep, &ops.ys, &mut out, 1).unwrap();
}
