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
    // 1x1: any whole 16 bytes of channels (the last step's channels past C read zeros).
    assert!(tma_applies(&kernel(24, 144, 1, DType::F16)));
    assert!(tma_applies(&kernel(16, 32, 1, DType::I8)));
    for (k, why) in [
        (kernel(24, 64, 3, DType::F16), "one tap per K step"),
        (kernel(64, 64, 3, DType::I8), "one tap per K step"),
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
