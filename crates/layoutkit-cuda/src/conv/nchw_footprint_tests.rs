use super::*;
use crate::conv::{test_nchw_kernel as kernel, test_nchw_shape as shape, ConvLayout};

fn xorshift(mut seed: u64) -> impl FnMut(usize) -> usize {
    move |n| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed >> 33) as usize % n
    }
}

/// Every input pixel inside its image that an output pixel of a tile reads through any tap
/// lies in the tile's footprint (rows `lo8 ..` of `range_rows`), at the row the consumers
/// compute for it, and no tile needs more rows than `footprint_rows` gives the buffers.
#[test]
fn footprints_hold_every_tap_of_every_tile() {
    let mut next = xorshift(4711);
    let mut checked = 0;
    while checked < 300 {
        let k = 1 + next(5);
        let (stride, dil) = (1 + next(3), 1 + next(2));
        let pad = next((k - 1) * dil + 1);
        let (h, w) = (1 + next(20), 1 + next(20));
        if h + 2 * pad < dil * (k - 1) + 1 || w + 2 * pad < dil * (k - 1) + 1 {
            continue;
        }
        let s = shape(1 + next(9), 64, (h, w), 64, k, (stride, pad, dil));
        let bm = [64, 128, 192, 256][next(4)];
        let m = s.n * s.oh * s.ow;
        let most = footprint_rows(&s, bm);
        // Every tile's rows, walked one by one: the period shortcut finds their largest.
        let walked = (0..m)
            .step_by(bm)
            .map(|m0| {
                let (lo, hi) = tile_range(&s, m0, (m0 + bm).min(m));
                range_rows(lo, hi)
            })
            .max()
            .unwrap();
        assert_eq!(most, walked, "{s:?} bm {bm}");
        for m0 in (0..m).step_by(bm) {
            let (lo, hi) = tile_range(&s, m0, (m0 + bm).min(m));
            let rows = range_rows(lo, hi);
            assert!(rows <= most && rows.is_multiple_of(8), "{s:?} {m0}");
            let lo8 = lo.div_euclid(8) * 8;
            for p in m0..(m0 + bm).min(m) {
                let (n, q) = (p / (s.oh * s.ow), p % (s.oh * s.ow));
                let py = (q / s.ow * stride) as i64 - pad as i64;
                let px = (q % s.ow * stride) as i64 - pad as i64;
                // The consumers' row: pb + r * dh * W + sx * dw.
                let pb = (n * s.h * s.w) as i64 + py * w as i64 + px - lo8;
                for r in 0..k {
                    for sx in 0..k {
                        let (iy, ix) = (py + (r * dil) as i64, px + (sx * dil) as i64);
                        if iy < 0 || ix < 0 || iy >= h as i64 || ix >= w as i64 {
                            continue;
                        }
                        let at = ((n * s.h) as i64 + iy) * w as i64 + ix;
                        let row = pb + (r * dil * w) as i64 + (sx * dil) as i64;
                        assert_eq!(row, at - lo8);
                        assert!(
                            (0..rows as i64).contains(&row),
                            "{s:?} tile {m0} pixel {p} tap {r},{sx}: row {row} of {rows}"
                        );
                    }
                }
            }
        }
        checked += 1;
    }
}

/// ResNet-50's and VGG-16's 3x3 layers at batch 64 get a 128-row tile; the source has the
/// register-operand `wgmma`, the `ldmatrix` loads and both barrier pairs, and fits the GPU.
#[test]
fn common_layers_get_a_tile_and_a_source() {
    for (c, hw, o, stride) in [
        (64, 56, 64, 1),
        (128, 28, 128, 1),
        (256, 14, 256, 1),
        (512, 7, 512, 1),
        (64, 224, 64, 1),
        (128, 112, 128, 1),
        (128, 56, 128, 2),
    ] {
        let k = kernel(shape(64, c, (hw, hw), o, 3, (stride, 1, 1)));
        assert_eq!(footprint_unsupported_reason(&k), None, "{hw} {stride}");
        let t = footprint_plan(&k);
        assert!(t.nchw && t.tma && t.footprint_rows >= footprint_rows(&k.shape, t.bm));
        assert!(t.shared_bytes() <= SMEM_PER_SM, "{t:?}");
        assert_eq!(t.block_threads(), t.threads() + 128);
        let src = super::super::hopper_source(&k, &t);
        for needle in [
            "conv_wgmma_nchw(",
            "wgmma_ra(",
            "ldmatrix.sync.aligned.m8n8.x4",
            "mbar_init(afull",
            "mbar_init(bfull",
            "NCHW footprint",
        ] {
            assert!(src.contains(needle), "{needle}");
        }
    }
}

/// Problems outside the kernel are refused with a reason: padding beyond the filter, C not a
/// multiple of 64, NHWC activations, inputs too wide for two footprints.
#[test]
fn refuses_what_it_does_not_take() {
    let too_padded = kernel(shape(1, 64, (16, 16), 64, 3, (1, 3, 1)));
    assert!(footprint_unsupported_reason(&too_padded)
        .unwrap()
        .contains("padding"));
    let odd_c = kernel(shape(1, 96, (16, 16), 64, 3, (1, 1, 1)));
    assert!(footprint_unsupported_reason(&odd_c).is_some());
    let nhwc = ConvKernel {
        layout: ConvLayout::Nhwc,
        ..kernel(shape(1, 64, (16, 16), 64, 3, (1, 1, 1)))
    };
    assert!(footprint_unsupported_reason(&nhwc).is_some());
    let wide = kernel(shape(1, 64, (8, 4096), 64, 3, (1, 1, 1)));
    assert!(footprint_unsupported_reason(&wide)
        .unwrap()
        .contains("footprint buffers"));
}

/// The rule takes the 3x3 layers it was measured ahead on (ResNet-50's and VGG-16's stride-1
/// layers whose tiles fill the GPU, planes of 14 to 224) and leaves the others to the
/// conversion route: stride 2, 7 x 7 planes, grids under one block per SM; and the 1x1 layers
/// of at most 256 channels on 56 x 56 and 28 x 28 planes, not the wider ones or smaller
/// planes.
#[test]
fn the_rule_reads_in_place_the_layers_measured_faster_that_way() {
    let layer = |n: usize, c: usize, hw: usize, o: usize, k: usize, stride: usize| {
        kernel(shape(n, c, (hw, hw), o, k, (stride, k / 2, 1)))
    };
    for n in [8, 64] {
        for (c, hw, o) in [
            (64, 224, 64),
            (64, 112, 128),
            (128, 112, 128),
            (128, 56, 256),
            (256, 56, 256),
        ] {
            assert!(
                footprint_preferred(&layer(n, c, hw, o, 3, 1)),
                "b{n} {c} @{hw}"
            );
        }
        for (c, hw, o, stride) in [
            (128, 56, 128, 2),
            (256, 28, 256, 2),
            (512, 14, 512, 2),
            (512, 7, 512, 1),
        ] {
            assert!(
                !footprint_preferred(&layer(n, c, hw, o, 3, stride)),
                "b{n} {c} @{hw}"
            );
        }
        assert!(!footprint_preferred(&layer(n, 512, 28, 256, 1, 1)));
        assert!(!footprint_preferred(&layer(n, 256, 14, 1024, 1, 1)));
        assert!(!footprint_preferred(&layer(n, 256, 56, 512, 1, 2)));
    }
    for (c, o) in [(64, 64), (64, 256), (256, 64), (256, 128)] {
        assert!(
            footprint_preferred(&layer(64, c, 56, o, 1, 1)),
            "1x1 {c}->{o}"
        );
    }
    // Batch 8: 64 -> 256 fills 262 tiles of 192 x 128; 64 -> 64 only 131 of 192 x 64.
    assert!(footprint_preferred(&layer(8, 64, 56, 256, 1, 1)));
    assert!(!footprint_preferred(&layer(8, 64, 56, 64, 1, 1)));
    for (c, hw, o) in [(64, 56, 64), (128, 28, 128), (256, 14, 256), (512, 28, 512)] {
        assert!(footprint_preferred(&layer(64, c, hw, o, 3, 1)), "{c} @{hw}");
    }
    // Batch 8 on 14 x 14 and 28 x 28 planes: too few tiles.
    assert!(!footprint_preferred(&layer(8, 256, 14, 256, 3, 1)));
    assert!(!footprint_preferred(&layer(8, 128, 28, 128, 3, 1)));
}
