use super::*;
use crate::conv::{test_nchw_kernel as kernel, test_nchw_shape as shape};

/// Every input pixel that an output pixel of a tile reads through any tap lies in the units
/// the kernel gives that pixel's segment: segment `j` of the tile, blocks from the one holding
/// its first tap's first pixel, `segment_blocks` of them (the kernel's indexing, here on the
/// host); and the tile's units fit the producer's threads as `Units::of` counts them.
#[test]
fn units_cover_every_tap_of_every_tile() {
    let mut seed = 99u64;
    let mut next = |n: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed >> 33) as usize % n
    };
    for _ in 0..300 {
        let k = 1 + next(5);
        let sp = (1 + next(3), next(3), 1 + next(2));
        let hw = (k * sp.2 + next(30), k * sp.2 + next(60));
        let s = shape(1 + next(3), 64, hw, 64, k, sp);
        for bm in [64, 128, 256] {
            let u = Units::of(&s, bm);
            let mut most = 0;
            let m = s.n * s.oh * s.ow;
            let c = &s.conv;
            for m0 in (0..m).step_by(bm) {
                let end = (m0 + bm).min(m);
                let mut units = 0;
                let mut q = m0;
                while q < end {
                    let a = q % s.ow;
                    let b = s.ow.min(a + (end - q));
                    units += 8 * segment_blocks(&s, a, b);
                    q += b - a;
                }
                most = most.max(units);
                for p in m0..end {
                    let j = p / s.ow - m0 / s.ow;
                    assert!(j < u.segments, "{s:?} bm {bm}: segment {j}");
                    let pj = if j == 0 { m0 } else { (m0 / s.ow + j) * s.ow };
                    let owa = pj % s.ow;
                    let owb = s.ow.min(owa + (end - pj));
                    let blocks = segment_blocks(&s, owa, owb);
                    let lo = owa as i64 * c.stride[1] as i64 - c.padding[1] as i64;
                    let first = lo.div_euclid(8) * 8;
                    let ow = p % s.ow;
                    for sx in 0..s.kw {
                        let iw =
                            (ow * c.stride[1] + sx * c.dilation[1]) as i64 - c.padding[1] as i64;
                        let block = (iw - first).div_euclid(8);
                        assert!(
                            (0..blocks as i64).contains(&block),
                            "{s:?} bm {bm}: pixel {p} tap {sx} in block {block} of {blocks}"
                        );
                    }
                }
            }
            assert!(most <= u.per_thread * PRODUCER_THREADS, "{s:?} bm {bm}");
        }
    }
}

/// ResNet-50's and VGG-16's 3x3 layers at batch 1 and 64 have a tile, and every tile keeps its
/// producer threads' units within the bound; the plan's tile is one of them.
#[test]
fn the_standard_3x3_layers_have_a_tile() {
    for (c, hw, stride) in [
        (64, 56, 1),
        (128, 56, 2),
        (128, 28, 1),
        (256, 28, 2),
        (256, 14, 1),
        (512, 14, 2),
        (512, 7, 1),
        (64, 224, 1),
        (128, 112, 1),
    ] {
        for n in [1, 64] {
            let k = kernel(shape(n, c, (hw, hw), c, 3, (stride, 1, 1)));
            assert_eq!(nchw_unsupported_reason(&k), None, "{c} @{hw}/{stride}");
            let t = nchw_plan(&k);
            assert!(t.nchw && t.tma && t.resident() == 1, "{t:?}");
            assert!(Units::of(&k.shape, t.bm).per_thread <= MAX_UNITS_PER_THREAD);
            let src = nchw_source(&k, &t);
            assert!(src.contains("conv_wgmma_nchw"));
            assert_eq!(
                src.matches('{').count(),
                src.matches('}').count(),
                "{c} @{hw}"
            );
        }
    }
}

/// What the kernel does not take: other layouts, types, groups, C not a multiple of 64.
#[test]
fn unsupported_problems_say_why() {
    let base = kernel(shape(1, 64, (8, 8), 64, 3, (1, 1, 1)));
    let nhwc = ConvKernel {
        layout: ConvLayout::Nhwc,
        out_layout: ConvLayout::Nhwc,
        ..base
    };
    assert!(nchw_unsupported_reason(&nhwc).unwrap().contains("NCHW"));
    let odd = kernel(shape(1, 96, (8, 8), 64, 3, (1, 1, 1)));
    assert!(nchw_unsupported_reason(&odd)
        .unwrap()
        .contains("multiple of 64"));
    let int8 = ConvKernel {
        input: DType::I8,
        out: DType::I32,
        ..base
    };
    assert!(nchw_unsupported_reason(&int8).is_some());
    let mut grouped = base;
    grouped.shape.conv.groups = 2;
    assert!(nchw_unsupported_reason(&grouped)
        .unwrap()
        .contains("groups"));
}
