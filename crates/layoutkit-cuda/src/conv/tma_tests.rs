//! Tests of the TMA kernel's applicability and generated source (on the GPU it is checked
//! against the reference by the CUDA convolution tests).

use super::*;
use crate::conv::{ConvShape, HopperTile};
use layoutkit_core::conv::Conv2d;

fn kernel(c: usize, o: usize, k: usize, input: DType) -> ConvKernel {
    let pad = k / 2;
    ConvKernel {
        shape: ConvShape {
            n: 2,
            h: 14,
            w: 14,
            c,
            o,
            kh: k,
            kw: k,
            oh: 14,
            ow: 14,
            conv: Conv2d {
                stride: [1; 2],
                padding: [pad; 2],
                dilation: [1; 2],
                groups: 1,
            },
        },
        layout: ConvLayout::Nhwc,
        out_layout: ConvLayout::Nhwc,
        input,
        out: if input == DType::I8 {
            DType::I32
        } else {
            input
        },
        bias: input != DType::I8,
        relu: true,
    }
}

#[test]
fn the_tma_kernel_takes_nhwc_with_whole_steps_or_a_1x1_filter() {
    assert!(tma_applies(&kernel(64, 64, 3, DType::F16)));
    assert!(tma_applies(&kernel(192, 40, 3, DType::BF16)));
    assert!(tma_applies(&kernel(128, 96, 3, DType::I8)));
    // A tap's channels in rows of 64 or 32 bytes.
    assert!(tma_applies(&kernel(64, 64, 3, DType::I8)));
    assert!(tma_applies(&kernel(96, 64, 3, DType::F16)));
    assert!(tma_applies(&kernel(16, 64, 5, DType::F16)));
    // 1x1: any whole 16 bytes of channels (the last step's channels past C read zeros).
    assert!(tma_applies(&kernel(24, 144, 1, DType::F16)));
    assert!(tma_applies(&kernel(16, 32, 1, DType::I8)));
    for (k, why) in [
        (kernel(24, 64, 3, DType::F16), "one tap per K step"),
        (kernel(48, 64, 3, DType::I8), "one tap per K step"),
        (kernel(12, 64, 1, DType::F16), "multiple of 16 bytes"),
        (
            ConvKernel {
                layout: ConvLayout::Nc32hw32,
                out_layout: ConvLayout::Nc32hw32,
                ..kernel(64, 64, 3, DType::F16)
            },
            "NHWC activations only",
        ),
    ] {
        let got = tma_unsupported_reason(&k).expect(why);
        assert!(got.contains(why), "{got}");
        assert!(!tma_applies(&k));
    }
    let mut wide = kernel(64, 64, 3, DType::F16);
    wide.shape.conv.dilation = [70; 2];
    wide.shape.conv.padding = [0; 2];
    assert!(tma_unsupported_reason(&wide)
        .unwrap()
        .contains("-128..=127"));
    let mut far = kernel(64, 64, 1, DType::F16);
    far.shape.conv.stride = [9, 1];
    assert!(tma_unsupported_reason(&far).unwrap().contains("at most 8"));
}

#[test]
fn the_producer_warp_issues_one_im2col_copy_per_64_rows_and_one_filter_copy_per_step() {
    let k = kernel(128, 256, 3, DType::F16);
    let t = HopperTile::new(128, 256, 4)
        .unwrap()
        .with_tma(true)
        .unwrap();
    assert_eq!((t.threads(), t.block_threads()), (256, 288));
    assert_eq!(
        t.shared_bytes(),
        HopperTile::new(128, 256, 4).unwrap().shared_bytes() + 256
    );
    let src = crate::conv::hopper_source(&k, &t);
    std::fs::write("/tmp/tma_src.cu", &src).unwrap();
    assert!(src.contains("__launch_bounds__(288, 1) conv_wgmma_tma("));
    assert!(src.contains("const __grid_constant__ TMap tx, const __grid_constant__ TMap tw"));
    // Warps 0-7 multiply; warp 8 loads: two 64-pixel groups, then the filter box.
    assert!(src.contains("if (warp == 8) {"));
    assert!(src.contains("for (int i = 0; i < 2; ++i)\n          tma_im2col(sa + i * 8192"));
    assert!(src.contains("tma_tile(sa + 16384, &tw, c0, sx, r, n0, full + st);"));
    assert!(src.contains("mbar_expect(full + st, 49152);"));
    // 18 steps of one tap and 64 channels; the stages' barriers after 4 x 48 KiB.
    assert!(src.contains("nsteps = 18;"));
    assert!(src.contains("rs = t / 2, c0 = (t % 2) * 64"));
    assert!(src.contains("(smem + 196608)"));
    assert!(src.contains("mbar_init(empty + i, 8)"));
    // No block-wide barrier after the barriers' set-up: the epilogue syncs the 256 consumers.
    let after_setup = src.split("__syncthreads();").nth(1).unwrap();
    assert!(!after_setup.contains("__syncthreads"));
    assert!(after_setup.contains("bar.sync 1, 256;"));
    assert!(src.contains("if (u > 0 && lane == 0) mbar_arrive(empty + (u - 1) % 4);"));
    // The producer's im2col origin: stride 1, padding 1.
    assert!(src.contains("ch[i] = (q / 14) * 1 - 1; cw[i] = (q % 14) * 1 - 1;"));
}

#[test]
fn int8_steps_are_128_channels_and_split_k_writes_partial_sums() {
    let k = kernel(256, 128, 3, DType::I8);
    let t = HopperTile::new(64, 128, 4)
        .unwrap()
        .with_splits(3)
        .unwrap()
        .with_tma(true)
        .unwrap();
    let src = crate::conv::hopper_source(&k, &t);
    assert!(src.contains("m64n128k32.s32.s8.s8"));
    assert!(src.contains("rs = t / 2, c0 = (t % 2) * 128"));
    assert!(src.contains("blockIdx.z * 18 / 3"));
    assert!(
        src.contains("(int*)part"),
        "i32 partial sums to the workspace"
    );
    assert!(src.contains("if (warp == 4) {"));
}

#[test]
fn the_tma_plan_puts_256_x_128_where_the_other_puts_128_x_256() {
    use crate::conv::{hopper_plan, hopper_plan_with};
    // Batch 64, 256 -> 256 3x3 on 28x28: 128 x 256 for the cp.async kernel, as many blocks
    // of 256 x 128 for the TMA kernel.
    let mut k = kernel(256, 256, 3, DType::F16);
    k.shape.n = 64;
    (k.shape.h, k.shape.w, k.shape.oh, k.shape.ow) = (28, 28, 28, 28);
    let plain = hopper_plan(&k);
    let tma = hopper_plan_with(&k, true);
    assert_eq!((plain.bm, plain.bn, plain.tma), (128, 256, false));
    assert_eq!((tma.bm, tma.bn, tma.stages, tma.tma), (256, 128, 4, true));
    let blocks = |t: &HopperTile| {
        let (x, y, z) = t.grid(&k.shape);
        x * y * z
    };
    assert_eq!(blocks(&plain), blocks(&tma));
    // O = 128: no 256-row tile (it only replaces the 256-column one).
    let mut narrow = k;
    narrow.shape.o = 128;
    let t = hopper_plan_with(&narrow, true);
    assert!(t.bm != 256 && t.tma, "{t:?}");
}

#[test]
fn a_taps_channels_make_rows_of_128_64_or_32_bytes() {
    // (C, filter, type) -> bytes per stage row.
    for (c, k, t, row) in [
        (64, 3, DType::F16, 128),
        (256, 3, DType::I8, 128),
        (64, 3, DType::I8, 64),
        (32, 3, DType::F16, 64),
        (96, 3, DType::F16, 64),
        (192, 3, DType::I8, 64),
        (16, 3, DType::F16, 32),
        (32, 7, DType::I8, 32),
        (48, 3, DType::F16, 32),
        // 1x1: the narrowest row that holds a pixel's channels, else 128-byte steps.
        (8, 1, DType::F16, 32),
        (16, 1, DType::F16, 32),
        (24, 1, DType::F16, 64),
        (64, 1, DType::I8, 64),
        (48, 1, DType::F16, 128),
        (160, 1, DType::F16, 128),
    ] {
        assert_eq!(row_bytes(&kernel(c, 64, k, t)), row, "C = {c}, {k}x{k} {t}");
    }
}

#[test]
fn rows_of_64_bytes_take_half_the_stage_two_multiplies_per_step_and_their_swizzle() {
    // int8 3x3 over 64 channels: 9 steps of one tap and 64 bytes.
    let k = kernel(64, 64, 3, DType::I8);
    let t = HopperTile::new(128, 64, 4)
        .and_then(|t| t.with_tma(true))
        .and_then(|t| t.with_k_bytes(64))
        .unwrap();
    assert_eq!(t.stage_area(), 4 * (128 + 64) * 64);
    let src = crate::conv::hopper_source(&k, &t);
    assert!(src.contains("nsteps = 9;"));
    assert!(src.contains("rs = t / 1, c0 = (t % 1) * 64"));
    assert!(src.contains("tma_im2col(sa + i * 4096"));
    assert!(src.contains("tma_tile(sa + 8192, &tw, c0, sx, r, n0, full + st);"));
    assert!(src.contains("mbar_expect(full + st, 12288);"));
    assert!(
        src.contains("(smem + 49152)"),
        "barriers after 4 stages of 12 KiB"
    );
    // Two 32-byte slices per row; the descriptor's 8-row groups 512 bytes apart, 64-byte
    // swizzle.
    assert!(src.contains("kk < 2; ++kk"));
    assert!(src.contains("(32ull << 32) | (2ull << 62)"));
    // 32-byte rows: one slice, groups 256 bytes apart, 32-byte swizzle.
    let k16 = kernel(16, 64, 3, DType::F16);
    let t32 = t.with_k_bytes(32).unwrap();
    let src = crate::conv::hopper_source(&k16, &t32);
    assert!(src.contains("kk < 1; ++kk"));
    assert!(src.contains("(16ull << 32) | (3ull << 62)"));
    assert!(src.contains("sdesc(sa + r * 2048 + kk * 32)"));
    // 128-byte rows as before, and no narrower rows outside the TMA kernel.
    let src = crate::conv::hopper_source(
        &kernel(64, 64, 3, DType::F16),
        &t.with_k_bytes(128).unwrap(),
    );
    assert!(src.contains("(64ull << 32) | (1ull << 62)") && src.contains("kk < 4; ++kk"));
    assert_eq!(HopperTile::new(128, 64, 4).unwrap().with_k_bytes(64), None);
    // Three warpgroups hold one block per SM even where 64-byte rows would fit two blocks'
    // stages (two of 416 threads leave too few registers for 64 sums).
    let tall = HopperTile::new(192, 128, 4)
        .and_then(|t| t.with_tma(true))
        .and_then(|t| t.with_k_bytes(64))
        .unwrap();
    assert!(2 * tall.shared_bytes() <= 227 * 1024);
    let src = crate::conv::hopper_source(&kernel(32, 128, 3, DType::F16), &tall);
    assert!(src.contains("__launch_bounds__(416, 1)"));
}
