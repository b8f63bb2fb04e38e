//! The Hopper kernel's int8 sources: `wgmma` with K = 32 and exact i32 sums, and outputs
//! requantised to i8 (the helpers are the Hopper tests').

use super::tests::{layer, stem};
use super::*;
use crate::conv::staged::{staged_fits, Staged};
use crate::conv::tile_rule::*;
use crate::conv::{conv_source, unsupported_reason};

#[test]
fn int8_runs_wgmma_k32_with_exact_i32_sums() {
    let mut k = stem(ConvLayout::Nhwc, 64);
    k.shape = layer(256, 256, 14, 1);
    k.input = DType::I8;
    k.out = DType::I32;
    k.bias = false;
    assert!(hopper_unsupported_reason(&k).is_none());
    // One tap and 128 channels (128 bytes) per step: 9 x 2 steps.
    assert_eq!(HopperK::of(&k), HopperK::Taps);
    assert_eq!(HopperK::Taps.steps(&k), 18);
    let t = HopperTile::new(128, 256, 4).unwrap();
    let src = hopper_source(&k, &t);
    assert!(src.contains("wgmma.mma_async.sync.aligned.m64n256k32.s32.s8.s8"));
    assert!(
        src.contains("\"+r\"(d[127])"),
        "i32 sums in integer registers"
    );
    assert!(src.contains("int acc[1][32][4];"));
    assert!(src.contains("const signed char* __restrict__ x"));
    assert!(src.contains("lcol = lch * 16;"));
    assert!(src.contains("c0 = (t % 2) * 128"));
    assert!(!src.contains("bias["), "no bias for int8");
    // The staged output tile holds i32.
    assert!(staged_fits(&k, &t, Staged::Output));
    assert!(src.contains("int* so = (int*)smem;"));
    // C = 48: chunks of 16 channels, 3 per tap, 27 chunks -> 4 steps.
    k.shape = ConvShape { c: 48, ..k.shape };
    let walk = HopperK::of(&k);
    assert_eq!(walk, HopperK::Chunks { registers: false });
    assert_eq!(walk.steps(&k), 4);
    let src = hopper_source(&k, &t);
    assert!(src.contains("cc = (q % 3) * 16"));
    // Split K: the workspace and the reduction add i32.
    k.shape = layer(512, 512, 7, 1);
    k.shape.n = 1;
    let plan = hopper_plan(&k);
    assert!(plan.splits > 1);
    let src = hopper_source(&k, &plan);
    assert!(src.contains("int* pz = (int*)part"));
    let reduce = super::super::splitk::reduce_source(&k, plan.splits);
    assert!(reduce.contains("const int* __restrict__ part, int* __restrict__ y"));
    assert!(reduce.contains("int v = 0;") && !reduce.contains("bias[oc]"));
}

#[test]
fn requantised_int8_writes_i8_through_q8() {
    let mut k = stem(ConvLayout::Nhwc, 64);
    k.shape = layer(256, 256, 14, 1);
    k.input = DType::I8;
    k.out = DType::I8;
    assert!(k.bias, "a requantised kernel may add a bias");
    assert!(hopper_unsupported_reason(&k).is_none());
    assert!(unsupported_reason(&k).is_none(), "mma.sync takes it too");
    let t = HopperTile::new(128, 256, 4).unwrap();
    let src = hopper_source(&k, &t);
    assert!(src.contains("signed char* __restrict__ y"));
    assert!(src.contains("double v = __dadd_rn(__dmul_rn(a, s), b);"));
    assert!(
        src.contains("fmin(fmax(v, 0.0), 127.0)"),
        "ReLU as the clamp's bound"
    );
    assert!(src.contains("q8(acc[mi][ni][2 * h], ps[c + 0], pb[c + 0])"));
    assert!(
        src.contains("pb[i] = oc < 256 ? (double)bias[256 + oc]"),
        "biases after scales"
    );
    assert!(
        src.contains("double* ps = (double*)(smem + 34816);"),
        "after 128 x 272 bytes"
    );
    assert!(staged_fits(&k, &t, Staged::Output));
    // The staged tile: 1-byte rows of 256 + 16 bytes (16-byte aligned for the copy out).
    assert!(src.contains("so + r * 272 + q * 16"));
    // mma.sync and the split-K reduction requantise the same way.
    assert!(conv_source(&k).contains("q8c(acc[mi][ni][2 * h + 1], bias, oc + 1)"));
    let reduce = super::super::splitk::reduce_source(&k, 4);
    assert!(reduce.contains("q8(v, (double)bias[oc], (double)bias[256 + oc])"));
    // The parameter buffer: scales (ones by default) then biases (zeros by default).
    let p = super::super::channel_params(&k, None, Some(&[0.5; 256]));
    assert_eq!((p.len(), p[0], p[256]), (512, 0.5, 0.0));
    let f = ConvKernel {
        input: DType::F16,
        out: DType::F16,
        ..k
    };
    assert_eq!(
        super::super::channel_params(&f, Some(&[2.0; 256]), None),
        vec![2.0; 256]
    );
    // int8 with a bias and an i32 output: no kernel (the i32 output is the exact sums).
    let i32_bias = ConvKernel {
        out: DType::I32,
        ..k
    };
    assert!(hopper_unsupported_reason(&i32_bias).is_some());
    assert!(unsupported_reason(&i32_bias).is_some());
}
