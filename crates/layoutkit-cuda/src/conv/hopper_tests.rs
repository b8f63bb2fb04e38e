//! Tests of the Hopper kernel's tile rules, K walks, splits of K and generated source.

use super::*;
use crate::conv::staged::{staged_fits, Staged};
use crate::conv::tile_rule::*;
use crate::conv::{conv_source, depthwise_applies, out_layout_reason, splitk, unsupported_reason};
use layoutkit_core::conv::Conv2d;

pub(super) fn layer(c: usize, o: usize, hw: usize, stride: usize) -> ConvShape {
    let oh = (hw + 2 - 3) / stride + 1;
    ConvShape {
        n: 64,
        h: hw,
        w: hw,
        c,
        o,
        kh: 3,
        kw: 3,
        oh,
        ow: oh,
        conv: Conv2d {
            stride: [stride; 2],
            padding: [1; 2],
            dilation: [1; 2],
            groups: 1,
        },
    }
}

#[test]
fn tiles_fit_the_shared_memory_and_fill_the_gpu() {
    assert!(HopperTile::new(128, 256, 5).is_none(), "240 KiB");
    assert!(HopperTile::new(96, 128, 4).is_none());
    // Columns: multiples of 16 from 32 up to 256 (narrow output channel counts: 96, 160; 80
    // and 112 for the TMA kernel only).
    for bn in [32, 48, 80, 96, 112, 160, 224] {
        assert!(HopperTile::new(64, bn, 4).is_some(), "{bn}");
    }
    for bn in [16, 40, 88, 288] {
        assert!(HopperTile::new(64, bn, 4).is_none(), "{bn}");
    }
    for bn in [48, 80, 112] {
        assert!(!HopperTile::new(64, bn, 4).unwrap().loads_fit(), "{bn}");
    }
    for (c, o, hw, st) in [(64, 64, 56, 1), (256, 256, 14, 1), (512, 512, 7, 1)] {
        let s = layer(c, o, hw, st);
        let t = hopper_tile(&s);
        assert_eq!(t.bm, 64 * t.mr * t.warpgroups);
        assert!(t.shared_bytes() <= SMEM_PER_SM);
        if o <= 64 {
            assert_eq!(t.bn, 64);
        }
    }
    // The widest tile that fits O and fills the GPU: 3136 pixels x 512 channels in
    // 128 x 256 tiles would be 50 blocks for 132 SMs, 128 x 128 make 100.
    let tile = |bm, bn, st, f| {
        HopperTile::new(bm, bn, st)
            .and_then(|t| t.with_in_flight(f))
            .unwrap()
    };
    for (c, o, hw, st, want) in [
        (512, 512, 7, 1, tile(128, 128, 4, 1)),
        (256, 256, 14, 1, tile(128, 256, 4, 1)),
        (128, 128, 28, 1, tile(128, 128, 3, 0)),
        (64, 64, 56, 1, tile(128, 64, 3, 0)),
    ] {
        let s = layer(c, o, hw, st);
        assert_eq!(hopper_tile(&s), want, "{c}->{o} @{hw}");
        assert!(want.fill(&s) >= 0.7);
    }
}

#[test]
fn source_has_one_wgmma_per_64_rows_and_16_channels() {
    let s = layer(128, 256, 28, 1);
    let kernel = ConvKernel {
        shape: s,
        layout: ConvLayout::Nhwc,
        out_layout: ConvLayout::Nhwc,
        input: DType::F16,
        out: DType::F16,
        bias: true,
        relu: true,
    };
    assert!(hopper_unsupported_reason(&kernel).is_none());
    let t = HopperTile::new(256, 128, 4).unwrap();
    let src = hopper_source(&kernel, &t);
    assert!(src.contains("wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16"));
    assert!(src.contains("for (int r = 0; r < 2; ++r) wgmma("));
    assert!(src.contains("cp.async.wait_group 1;"), "two steps ahead");
    assert!(src.contains("wgmma.wait_group.sync.aligned 1;"));
    let sync = hopper_source(&kernel, &t.with_in_flight(0).unwrap());
    assert!(sync.contains("cp.async.wait_group 2;"), "three steps ahead");
    assert!(sync.contains("wgmma.wait_group.sync.aligned 0;\\n\" ::: \"memory\");\n  }"));
    assert!(src.contains("float acc[2][16][4];"));
    let bf = ConvKernel {
        input: DType::BF16,
        out: DType::BF16,
        ..kernel
    };
    assert!(hopper_source(&bf, &t).contains(".f32.bf16.bf16"));
    for (why, k) in [
        (
            "int8 with a bias",
            ConvKernel {
                input: DType::I8,
                out: DType::I32,
                ..kernel
            },
        ),
        (
            "int8 with C = 8",
            ConvKernel {
                shape: ConvShape { c: 8, ..s },
                input: DType::I8,
                out: DType::I32,
                bias: false,
                ..kernel
            },
        ),
        (
            "NCHW",
            ConvKernel {
                layout: ConvLayout::Nchw,
                out_layout: ConvLayout::Nchw,
                ..kernel
            },
        ),
        (
            "groups",
            ConvKernel {
                shape: ConvShape {
                    conv: Conv2d {
                        groups: 2,
                        ..s.conv
                    },
                    ..s
                },
                ..kernel
            },
        ),
        (
            "NCHW with C = 128 (the mma.sync kernel's)",
            ConvKernel {
                layout: ConvLayout::Nchw,
                out_layout: ConvLayout::Nchw,
                ..kernel
            },
        ),
    ] {
        assert!(hopper_unsupported_reason(&k).is_some(), "{why}");
    }
}

/// The stem of ResNet-50 (7x7/2, C = 3, 224x224) as `kernel` of `layout`.
pub(super) fn stem(layout: ConvLayout, n: usize) -> ConvKernel {
    ConvKernel {
        shape: ConvShape {
            n,
            h: 224,
            w: 224,
            c: 3,
            o: 64,
            kh: 7,
            kw: 7,
            oh: 112,
            ow: 112,
            conv: Conv2d {
                stride: [2; 2],
                padding: [3; 2],
                dilation: [1; 2],
                groups: 1,
            },
        },
        layout,
        out_layout: layout,
        input: DType::F16,
        out: DType::F16,
        bias: true,
        relu: true,
    }
}

#[test]
fn channel_counts_not_multiples_of_64_walk_k_in_chunks_or_unpadded_elements() {
    // The stem: 49 taps of 3 channels. In NHWC 147 elements of K with no padding: 3 steps
    // of 64; in NCHW each tap a chunk padded to 8 channels: 7 steps.
    for (layout, walk, steps) in [
        (ConvLayout::Nhwc, HopperK::Dense, 3),
        (ConvLayout::Nchw, HopperK::Chunks { registers: true }, 7),
    ] {
        let k = stem(layout, 8);
        assert!(hopper_unsupported_reason(&k).is_none(), "{layout:?}");
        assert_eq!(HopperK::of(&k), walk);
        assert!(walk.registers());
        assert_eq!(walk.steps(&k), steps);
        let src = hopper_source(&k, &hopper_plan(&k));
        assert!(src.contains("auto fetch = [&](int t)"));
        assert!(
            src.contains("if (more) put((u + "),
            "stored after the multiplies"
        );
        assert!(
            !src.contains("cp16(sa"),
            "no 16-byte copies of 6-byte pixels"
        );
    }
    // 3x3, 3 channels: one step unpadded against two padded, too few saved (the padded
    // chunks); 5x5: 2 steps against 4 (unpadded).
    for (taps, walk) in [
        (3, HopperK::Chunks { registers: true }),
        (5, HopperK::Dense),
    ] {
        let mut k = stem(ConvLayout::Nhwc, 8);
        (k.shape.kh, k.shape.kw) = (taps, taps);
        assert_eq!(HopperK::of(&k), walk, "{taps}x{taps}");
    }
    // C = 96 in NHWC: 12 chunks per tap, each a whole 16-byte run: cp.async, 9 x 12 / 8
    // = 13.5 -> 14 steps for a 3x3 filter.
    let mut k = stem(ConvLayout::Nhwc, 1);
    k.shape = ConvShape {
        c: 96,
        kh: 3,
        kw: 3,
        ..k.shape
    };
    let walk = HopperK::of(&k);
    assert_eq!(walk, HopperK::Chunks { registers: false });
    assert_eq!(walk.steps(&k), 14);
    let src = hopper_source(&k, &HopperTile::new(128, 64, 4).unwrap());
    assert!(src.contains("const bool qv = q < 108;"));
    assert!(src.contains("cp16(sa + SW(lrow + i * 32), ga, ok ? 16 : 0);"));
    // C = 64: one tap per step, as before.
    k.shape.c = 64;
    assert_eq!(HopperK::of(&k), HopperK::Taps);
    assert_eq!(HopperK::Taps.steps(&k), 9);
}

#[test]
fn small_grids_split_k_and_large_ones_do_not() {
    // Batch 1, 512 -> 512 3x3 on 7x7: 8 tiles of 64 x 64 for 132 SMs, 72 K steps.
    let mut k = stem(ConvLayout::Nhwc, 1);
    k.shape = layer(512, 512, 7, 1);
    k.shape.n = 1;
    let plan = hopper_plan(&k);
    let (x, y, z) = plan.grid(&k.shape);
    assert_eq!((x * y, z as usize), (8, plan.splits));
    assert_eq!(
        plan.splits, 18,
        "2 x 132 slots / 8 blocks, 72 steps allow 18"
    );
    let src = hopper_source(&k, &plan);
    assert!(src.contains("const int t0 = (int)((long long)blockIdx.z * 72 / 18)"));
    assert!(src.contains("float* pz = (float*)part + (long long)blockIdx.z * 25088;"));
    assert!(!src.contains("bias[oc]"), "the reduction adds the bias");
    let reduce = super::super::splitk::reduce_source(&k, plan.splits);
    assert!(reduce.contains("for (int z = 0; z < 18; ++z) v += part[(long long)z * 25088 + e];"));
    assert!(reduce.contains("v += bias[oc];") && reduce.contains("f2h(v)"));
    // Batch 64 fills the GPU without a split.
    k.shape.n = 64;
    assert_eq!(hopper_plan(&k).splits, 1);
    assert!(hopper_source(&k, &hopper_plan(&k)).contains("const int t0 = 0, nsteps = 72;"));
    // Few K steps are not split below four per split.
    let mut one = k;
    one.shape = ConvShape {
        n: 1,
        kh: 1,
        kw: 1,
        c: 256,
        ..k.shape
    };
    assert_eq!(hopper_plan(&one).splits, 1, "4 steps");
    assert!(HopperTile::new(64, 64, 4)
        .unwrap()
        .with_splits(33)
        .is_none());
}

#[test]
fn two_stage_tiles_keep_no_multiplies_in_flight() {
    let t = HopperTile::new(128, 128, 2).unwrap();
    assert_eq!((t.in_flight, t.ahead()), (0, 1));
    assert!(
        t.with_in_flight(1).is_none(),
        "no stage left to load ahead into"
    );
    assert_eq!(t.resident(), 2);
    assert_eq!(HopperTile::new(128, 256, 4).unwrap().in_flight, 1);
    // 128 sums per thread: one block per SM whatever the shared memory allows.
    assert_eq!(HopperTile::new(128, 256, 2).unwrap().resident(), 1);
    assert_eq!(HopperTile::new(256, 128, 2).unwrap().resident(), 1);
    assert!(HopperTile::new(64, 64, 1).is_none());
}

#[test]
fn the_output_tile_is_staged_in_shared_memory_and_written_in_runs_of_its_layout() {
    let mut k = stem(ConvLayout::Nhwc, 64);
    k.shape = layer(256, 256, 14, 1);
    let t = HopperTile::new(128, 256, 4).unwrap();
    // NHWC f16: 16-byte pieces of a pixel's 256 channels, rows 264 halves apart.
    let src = hopper_source(&k, &t);
    assert!(src.contains("*(unsigned int*)(so + r * 264 + c)"));
    assert!(src.contains(
        "*(uint4*)(y + (long long)mm * 256 + oc) = *(const uint4*)(so + r * 264 + q * 8);"
    ));
    assert!(
        !src.contains("acc[mi][ni][2 * h] + bv[ni][0], v1"),
        "not the direct epilogue"
    );
    // NC/32HW32: 16-byte pieces of 32-channel groups.
    let nc32 = ConvKernel {
        layout: ConvLayout::Nc32hw32,
        out_layout: ConvLayout::Nc32hw32,
        ..k
    };
    assert!(hopper_source(&nc32, &t).contains("grp * 32 + q * 8); }"));
    // f32 output on two stages does not fit (128 x 264 x 4 bytes > 2 x 384 x 128): written
    // from the accumulators.
    let f32_out = ConvKernel {
        out: DType::F32,
        ..k
    };
    assert!(staged_fits(&f32_out, &t, Staged::Output));
    let two = HopperTile::new(128, 256, 2).unwrap();
    assert!(!staged_fits(&f32_out, &two, Staged::Output));
    assert!(hopper_source(&f32_out, &two).contains("*(float2*)(y + i) = make_float2(r0, r1);"));
    // NCHW (the stem): channel-major, two pixels of a channel per thread (112 x 112 even).
    let nchw = stem(ConvLayout::Nchw, 8);
    let src = hopper_source(&nchw, &HopperTile::new(128, 64, 4).unwrap());
    assert!(src.contains("so[c * 132 + r] = f2h(v0);"));
    assert!(src.contains("*(unsigned int*)(y + ((long long)(mm / 12544) * 64 + oc) * 12544 + mm % 12544) = *(const unsigned int*)(so + c * 132 + r);"));
    // Split K: the partial sums staged too, 4 floats per piece.
    let mut small = k;
    small.shape = layer(512, 512, 7, 1);
    small.shape.n = 1;
    let plan = hopper_plan(&small);
    assert!(plan.splits > 1);
    let src = hopper_source(&small, &plan);
    assert!(src.contains("float* pz = (float*)part + (long long)blockIdx.z * 25088;"));
    assert!(src.contains("*(uint4*)(pz + (long long)mm * 512 + oc)"));
}

#[test]
fn a_wide_tile_is_split_where_each_split_keeps_seven_steps() {
    let mut k = stem(ConvLayout::Nhwc, 32);
    // Batch 32, 512 -> 512 3x3 on 7x7: 200 blocks of 64 x 64 fill 76% of the slots unsplit,
    // but 26 blocks of 128 x 256 split 5 ways (14 steps each) fill 98%.
    k.shape = layer(512, 512, 7, 1);
    k.shape.n = 32;
    let plan = hopper_plan(&k);
    assert_eq!(
        (plan.bm, plan.bn, plan.stages, plan.splits),
        (128, 256, 4, 5)
    );
    assert!(plan.fill(&k.shape) >= 0.7);
    assert_eq!(hopper_tile(&k.shape).bm, 64, "the unsplit rule alone");
    // Batch 8, 128 -> 128 3x3 on 28x28: 18 steps would split 4 ways, 4 steps each: 64 x 64
    // unsplit.
    k.shape = layer(128, 128, 28, 1);
    k.shape.n = 8;
    let plan = hopper_plan(&k);
    assert_eq!((plan.bm, plan.bn, plan.splits), (64, 64, 1));
}

/// A kernel reading NHWC writes NCHW when asked (the route of NCHW activations): the loads
/// are NHWC's 16-byte channel runs, every output store (staged tile, direct epilogue, split-K
/// reduction) is at NCHW offsets, and what cannot write another layout says so.
#[test]
fn an_nhwc_kernel_writes_nchw_when_asked() {
    let s = layer(128, 96, 14, 1);
    let nhwc = ConvKernel {
        shape: s,
        relu: false,
        ..stem(ConvLayout::Nhwc, s.n)
    };
    let k = ConvKernel {
        out_layout: ConvLayout::Nchw,
        ..nhwc
    };
    assert!(out_layout_reason(&k).is_none());
    assert_eq!(k.y_elements(), nhwc.y_elements());
    let ohw = s.oh * s.ow;
    let nchw_store = format!("* {} + oc) * {ohw} + mm % {ohw}", s.o);
    let nhwc_store = format!("(long long)mm * {} + oc", s.o);
    for tile in [
        hopper_plan(&k),
        HopperTile::new(128, 128, 3).unwrap(),
        HopperTile::new(64, 64, 4).unwrap().with_splits(3).unwrap(),
    ] {
        let src = hopper_source(&k, &tile);
        assert!(src.contains("cp.async"), "NHWC channel runs: {tile:?}");
        // (Split K writes pixel-major f32 sums to its workspace; the reduction writes y.)
        if tile.splits <= 1 {
            assert!(src.contains(&nchw_store), "NCHW stores: {tile:?}");
            assert!(!src.contains(&nhwc_store), "no NHWC stores: {tile:?}");
        }
    }
    let reduce = splitk::reduce_source(&k, 3);
    assert!(reduce.contains(&nchw_store) && !reduce.contains(&nhwc_store));
    let mma = conv_source(&k);
    assert!(mma.contains(&nchw_store) && !mma.contains(&nhwc_store));
    // int8, other pairs of layouts and depthwise layers write the layout they read.
    for (why, bad) in [
        (
            "int8",
            ConvKernel {
                input: DType::I8,
                out: DType::I32,
                bias: false,
                ..k
            },
        ),
        (
            "NC/32HW32 from NHWC",
            ConvKernel {
                out_layout: ConvLayout::Nc32hw32,
                ..k
            },
        ),
        (
            "NHWC from NCHW",
            ConvKernel {
                layout: ConvLayout::Nchw,
                out_layout: ConvLayout::Nhwc,
                ..k
            },
        ),
    ] {
        assert!(out_layout_reason(&bad).is_some(), "{why}");
        assert!(unsupported_reason(&bad).is_some(), "{why}");
    }
    let mut dw = k;
    dw.shape.conv.groups = s.c;
    dw.shape.o = s.c;
    assert!(out_layout_reason(&dw).is_some() && !depthwise_applies(&dw));
}

/// Narrow tiles (96 or 160 columns for O = 96 or 160): `wgmma`'s N is the tile's width, and
/// the filter rows are loaded in whole passes of the block's threads.
#[test]
fn narrow_tiles_multiply_their_width_at_once() {
    let mut k = stem(ConvLayout::Nhwc, 8);
    k.shape = layer(576, 96, 14, 1);
    for (bm, bn) in [(64, 96), (128, 96), (64, 160), (128, 32)] {
        let t = HopperTile::new(bm, bn, 4).unwrap();
        let src = hopper_source(&k, &t);
        assert!(src.contains(&format!("m64n{bn}k16")), "{bm}x{bn}");
        assert!(
            src.contains(&format!("float acc[1][{}][4]", bn / 8)),
            "{bm}x{bn}"
        );
    }
}

#[test]
fn few_k_steps_leave_out_the_tile_that_holds_a_whole_sm() {
    // 1x1 64 -> 256 on 56x56 at batch 64: one K step, 1568 blocks of 128 x 256.
    let mut k = stem(ConvLayout::Nhwc, 64);
    k.shape = ConvShape {
        c: 64,
        o: 256,
        h: 56,
        w: 56,
        oh: 56,
        ow: 56,
        kh: 1,
        kw: 1,
        conv: Conv2d {
            stride: [1; 2],
            padding: [0; 2],
            dilation: [1; 2],
            groups: 1,
        },
        ..k.shape
    };
    for c in [64, 128, 160] {
        k.shape.c = c;
        assert!(HopperK::of(&k).steps(&k) <= MAX_STEPS_WITHOUT_THE_WIDEST);
        let plan = hopper_plan(&k);
        assert!(plan.bm * plan.bn < 128 * 256, "C = {c}: {plan:?}");
        assert_eq!((plan.bm, plan.bn), (128, 128), "C = {c}");
    }
    // Four steps and more: the widest tile where it fills the GPU, as before.
    k.shape.c = 256;
    assert_eq!(HopperK::of(&k).steps(&k), 4);
    let plan = hopper_plan(&k);
    assert_eq!((plan.bm, plan.bn), (128, 256));
}

#[test]
fn wide_tiles_split_k_only_into_eight_steps_or_more() {
    let mut k = stem(ConvLayout::Nhwc, 1);
    // VGG-16's conv3_2 at batch 1: 36 K steps; 256 x 128 in 5 splits would give 7 each.
    k.shape = layer(256, 256, 56, 1);
    k.shape.n = 1;
    assert!(super::super::tma_applies(&k));
    let plan = hopper_plan_with(&k, true);
    assert_eq!(plan.splits, 1, "{plan:?}");
    // 98 blocks of 64 x 128, one per SM in one wave (`tile_rule`'s one-wave tile).
    assert_eq!((plan.bm, plan.bn), (64, 128));
    // ResNet-50's l4 3x3 at batch 8: 72 steps, 128 x 128 in 8 splits of 9.
    k.shape = layer(512, 512, 7, 1);
    k.shape.n = 8;
    let plan = hopper_plan_with(&k, true);
    assert_eq!((plan.bm, plan.bn, plan.splits), (128, 128, 8), "{plan:?}");
    // The rule of 7 steps, as `LAYOUTKIT_CONV_WIDE_SPLIT_STEPS=7` asks for it, splits conv3_2.
    k.shape = layer(256, 256, 56, 1);
    k.shape.n = 1;
    let plan = hopper_plan_tuned(&k, true, 7);
    assert_eq!((plan.bm, plan.bn, plan.splits), (256, 128, 5));
}
