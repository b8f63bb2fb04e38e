use super::*;
use crate::conv::nchw_footprint::{register_split, tile_range};
use crate::conv::test_nchw_shape as shape;

fn kernel(s: ConvShape, input: DType, out: DType) -> ConvKernel {
    ConvKernel {
        shape: s,
        layout: ConvLayout::Nhwc,
        out_layout: ConvLayout::Nhwc,
        input,
        out,
        bias: out == DType::I8 || input != DType::I8,
        relu: false,
    }
}

fn int8(s: ConvShape) -> ConvKernel {
    kernel(s, DType::I8, DType::I32)
}

fn xorshift(mut seed: u64) -> impl FnMut(usize) -> usize {
    move |n| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed >> 33) as usize % n
    }
}

/// Every input pixel inside its image that an output pixel of a tile reads through any tap
/// lies in the rows the producer copies (`nb` boxes of `BOX_ROWS` from `lo8`, within the
/// buffer's rows), at the row the consumers compute for it; the boxes never pass the buffer.
#[test]
fn every_tap_of_every_tile_lies_in_the_copied_boxes() {
    let mut next = xorshift(90210);
    let mut checked = 0;
    while checked < 300 {
        let k = 1 + next(5);
        let (stride, dil) = (1 + next(3), 1 + next(2));
        let pad = next((k - 1) * dil + 1);
        let (h, w) = (1 + next(24), 1 + next(24));
        if h + 2 * pad < dil * (k - 1) + 1 || w + 2 * pad < dil * (k - 1) + 1 {
            continue;
        }
        let s = shape(1 + next(9), 64, (h, w), 64, k, (stride, pad, dil));
        let bm = [64, 128, 192, 256][next(4)];
        let m = s.n * s.oh * s.ow;
        let rows = nhwc_buffer_rows(&s, bm);
        assert!(rows.is_multiple_of(BOX_ROWS));
        for m0 in (0..m).step_by(bm) {
            let (lo, hi) = tile_range(&s, m0, (m0 + bm).min(m));
            // As the kernel computes them: lo8, frows, then nb boxes.
            let lo8 = lo & !7;
            let frows = ((hi & !7) - lo8 + 8).max(8) as usize;
            let nb = frows.div_ceil(BOX_ROWS);
            assert!(
                nb * BOX_ROWS <= rows,
                "{s:?} tile {m0}: {nb} boxes, {rows} rows"
            );
            for p in m0..(m0 + bm).min(m) {
                let (n, q) = (p / (s.oh * s.ow), p % (s.oh * s.ow));
                let py = (q / s.ow * stride) as i64 - pad as i64;
                let px = (q % s.ow * stride) as i64 - pad as i64;
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
                            (0..frows as i64).contains(&row),
                            "{s:?} tile {m0} pixel {p} tap {r},{sx}: row {row} of {frows}"
                        );
                    }
                }
            }
        }
        checked += 1;
    }
}

/// The swizzle the consumers undo is TMA's: for 128-byte rows the chunk index XOR the row
/// modulo 8, for 64-byte rows XOR bits 7-8 of the row's byte offset; and every 8 consecutive
/// rows' same chunk lands in 8 distinct 16-byte bank groups (conflict-free `ldmatrix`).
#[test]
fn the_row_swizzle_is_tmas_and_spreads_eight_rows_over_the_banks() {
    for row_bytes in [64usize, 128] {
        let (chunks, mask) = (row_bytes / 16, if row_bytes == 128 { 7 } else { 3 });
        for r in 0..64usize {
            let z = if row_bytes == 128 {
                r & 7
            } else {
                (r >> 1) & 3
            };
            for c in 0..chunks {
                let plain = r * row_bytes + c * 16;
                let tma = plain ^ (((plain >> 7) & mask) << 4);
                assert_eq!(tma, r * row_bytes + ((c ^ z) << 4), "{row_bytes} {r} {c}");
            }
        }
        for r0 in 0..16usize {
            for c in 0..chunks {
                let mut groups: Vec<usize> = (r0..r0 + 8)
                    .map(|r| {
                        let z = if row_bytes == 128 {
                            r & 7
                        } else {
                            (r >> 1) & 3
                        };
                        ((r * row_bytes + ((c ^ z) << 4)) % 128) / 16
                    })
                    .collect();
                groups.sort();
                groups.dedup();
                assert_eq!(groups.len(), 8, "{row_bytes} rows {r0}.. chunk {c}");
            }
        }
    }
}

/// ResNet-50's 3x3 layers of stride 1 at batch 64 get a tile, 64- or 128-byte rows as their
/// channels give, buffers that fit, two producer warps, and a source with the register-operand
/// `wgmma` of their type, the `ldmatrix` loads and both barrier pairs.
#[test]
fn resnet_layers_get_a_tile_and_a_source() {
    for (c, hw, input, out) in [
        (64, 56, DType::I8, DType::I32),
        (64, 56, DType::I8, DType::I8),
        (128, 28, DType::I8, DType::I32),
        (256, 14, DType::I8, DType::I8),
        (512, 7, DType::I8, DType::I32),
        (64, 56, DType::F16, DType::F16),
        (128, 28, DType::BF16, DType::F32),
    ] {
        let k = kernel(shape(64, c, (hw, hw), c, 3, (1, 1, 1)), input, out);
        assert_eq!(nhwc_footprint_unsupported_reason(&k), None, "{c} @{hw}");
        let t = nhwc_footprint_plan(&k);
        assert!(t.tma && !t.nchw && t.footprint_rows >= nhwc_buffer_rows(&k.shape, t.bm));
        assert_eq!(t.k_bytes, row_bytes(&k));
        assert!(t.shared_bytes() <= SMEM_PER_SM, "{t:?}");
        let producers = if register_split(&t).is_some() {
            128
        } else {
            64
        };
        assert_eq!(t.block_threads(), t.threads() + producers);
        let src = super::super::hopper_source(&k, &t);
        let mma = if input == DType::I8 {
            "k32.s32.s8.s8"
        } else {
            "k16.f32"
        };
        for needle in [
            "conv_wgmma_tma(",
            "wgmma_ra(",
            mma,
            "ldmatrix.sync.aligned.m8n8.x4",
            "mbar_init(afull",
            "mbar_init(bfull",
            "tma_rows(",
            "NHWC footprint",
        ] {
            assert!(src.contains(needle), "{c} @{hw}: {needle}");
        }
        assert_eq!(src.matches('{').count(), src.matches('}').count());
    }
    // l1: 64-byte rows, a 256 x 64 tile walking 9 steps, persistent (784 tiles); l2 @28:
    // 192 x 128 with 128-byte rows, persistent (262 tiles), three stages beside its i32 tile.
    let l1 = int8(shape(64, 64, (56, 56), 64, 3, (1, 1, 1)));
    let t = nhwc_footprint_plan(&l1);
    assert_eq!(
        (t.bm, t.bn, t.stages, t.k_bytes, t.persistent),
        (256, 64, 4, 64, true)
    );
    let l2 = int8(shape(64, 128, (28, 28), 128, 3, (1, 1, 1)));
    let t = nhwc_footprint_plan(&l2);
    assert_eq!(
        (t.bm, t.bn, t.stages, t.k_bytes, t.persistent),
        (192, 128, 3, 128, true)
    );
    assert_eq!(nhwc_footprint_steps(&l1), 9);
}

/// Problems outside the kernel are refused with a reason: NCHW activations, channels not a
/// multiple of 64 bytes, padding beyond the filter, rows too long for two footprints.
#[test]
fn refuses_what_it_does_not_take() {
    let nchw = ConvKernel {
        layout: ConvLayout::Nchw,
        ..kernel(
            shape(1, 64, (16, 16), 64, 3, (1, 1, 1)),
            DType::F16,
            DType::F16,
        )
    };
    assert!(nhwc_footprint_unsupported_reason(&nchw).is_some());
    let narrow = int8(shape(1, 32, (16, 16), 64, 3, (1, 1, 1)));
    assert!(nhwc_footprint_unsupported_reason(&narrow)
        .unwrap()
        .contains("64 bytes"));
    let padded = int8(shape(1, 64, (16, 16), 64, 3, (1, 3, 1)));
    assert!(nhwc_footprint_unsupported_reason(&padded)
        .unwrap()
        .contains("padding"));
    let wide = int8(shape(1, 128, (8, 8192), 64, 5, (1, 2, 1)));
    assert!(nhwc_footprint_unsupported_reason(&wide)
        .unwrap()
        .contains("footprint buffers"));
}

/// The rule takes the int8 layers it was measured ahead on (ResNet-50's `l1 3x3` and `l2 3x3
/// @28` at batch 64, persistent tiles) and leaves the others: 256 channels and more, stride
/// 2, f16, and batches whose tiles do not outnumber the SMs.
#[test]
fn the_rule_takes_the_int8_layers_measured_faster() {
    let layer = |n: usize, c: usize, hw: usize, stride: usize, input: DType| {
        let out = if input == DType::I8 {
            DType::I32
        } else {
            input
        };
        kernel(shape(n, c, (hw, hw), c, 3, (stride, 1, 1)), input, out)
    };
    assert!(nhwc_footprint_preferred(&layer(64, 64, 56, 1, DType::I8)));
    assert!(nhwc_footprint_preferred(&layer(64, 128, 28, 1, DType::I8)));
    let mut q = layer(64, 64, 56, 1, DType::I8);
    q.out = DType::I8;
    assert!(nhwc_footprint_preferred(&q));
    for (n, c, hw, stride, input) in [
        (64, 256, 14, 1, DType::I8),
        (64, 512, 7, 1, DType::I8),
        (64, 128, 56, 2, DType::I8),
        (64, 64, 56, 1, DType::F16),
        (64, 128, 28, 1, DType::BF16),
        (8, 64, 56, 1, DType::I8),
        (8, 128, 28, 1, DType::I8),
    ] {
        assert!(
            !nhwc_footprint_preferred(&layer(n, c, hw, stride, input)),
            "b{n} {c} @{hw}/{stride} {input}"
        );
    }
    let pointwise = int8(shape(64, 64, (56, 56), 64, 1, (1, 0, 1)));
    assert!(!nhwc_footprint_preferred(&pointwise));
}
