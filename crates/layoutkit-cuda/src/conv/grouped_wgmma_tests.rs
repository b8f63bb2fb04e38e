use super::*;
use crate::conv::{hopper_source, ConvShape};

use layoutkit_core::conv::Conv2d;

/// A 3x3 NHWC f16 layer of `c` channels in `groups` groups on 14 x 14 planes.
fn grouped(c: usize, groups: usize) -> ConvKernel {
    ConvKernel {
        shape: ConvShape {
            n: 2,
            h: 14,
            w: 14,
            c,
            o: c,
            kh: 3,
            kw: 3,
            oh: 14,
            ow: 14,
            conv: Conv2d {
                padding: [1, 1],
                groups,
                ..Conv2d::default()
            },
        },
        layout: ConvLayout::Nhwc,
        out_layout: ConvLayout::Nhwc,
        input: DType::F16,
        out: DType::F16,
        bias: true,
        relu: true,
    }
}

#[test]
fn super_groups_hold_whole_steps_of_channels() {
    // ResNeXt-50 32x4d: groups of 4, 8, 16, 32 channels join into 64-channel super-groups.
    for (c, cg) in [(128, 4), (256, 8), (512, 16), (1024, 32)] {
        let k = grouped(c, c / cg);
        assert!(grouped_wgmma_unsupported_reason(&k).is_none(), "{c}");
        assert_eq!(supergroup_channels(&k), 64);
        assert_eq!(supergroup_outputs(&k), 64);
        assert!(needs_expansion(&k));
        assert_eq!(supergroup_steps(&k), 9);
    }
    // Groups of 128 channels are super-groups of their own: two steps per tap, no pass.
    let wide = grouped(512, 4);
    assert_eq!(supergroup_channels(&wide), 128);
    assert_eq!(supergroup_steps(&wide), 18);
    assert!(!needs_expansion(&wide));
    // RegNet's groups of 24 and 48 channels: the fewest groups that fill whole steps, 192
    // channels (8 and 4 groups), three steps per tap.
    for (c, cg, joined) in [(192, 24, 8), (384, 48, 4)] {
        let k = grouped(c, c / cg);
        assert!(grouped_wgmma_unsupported_reason(&k).is_none(), "{c}");
        assert_eq!(supergroup_channels(&k), 192);
        assert_eq!(supergroup_outputs(&k), 192);
        assert_eq!(supergroup_channels(&k) / cg, joined);
        assert_eq!(supergroup_steps(&k), 27);
        assert!(needs_expansion(&k));
    }
    // A channel multiplier of 2 doubles the super-group's outputs.
    let mut two = grouped(256, 32);
    two.shape.o = 512;
    assert_eq!(supergroup_outputs(&two), 128);
}

#[test]
fn problems_outside_the_kernel_say_why() {
    let depthwise = grouped(64, 64);
    assert!(grouped_wgmma_unsupported_reason(&depthwise)
        .unwrap()
        .contains("depthwise"));
    // Groups of 24 channels with C = 96: one super-group of 192 channels, half of them past C
    // (read as zeros).
    let partial = grouped(96, 4);
    assert!(grouped_wgmma_unsupported_reason(&partial).is_none());
    assert_eq!(supergroup_channels(&partial), 192);
    // C = 48: a tap's channels are 96 bytes, not whole TMA rows of 128: loaded by cp.async.
    let narrow = grouped(48, 2);
    assert!(grouped_wgmma_unsupported_reason(&narrow).is_none());
    assert!(!grouped_wgmma_tile(&narrow).tma);
    // Joins of 192 channels ran slower than the per-group kernel: f16 keeps it at any size,
    // bf16 (no other kernel) takes the super-groups.
    let mut regnet = grouped(240, 10);
    regnet.shape.n = 64;
    assert!(regnet.macs() >= MIN_SUPERGROUP_MACS && !grouped_wgmma_preferred(&regnet));
    let bf16 = ConvKernel {
        input: DType::BF16,
        out: DType::BF16,
        ..regnet
    };
    assert!(grouped_wgmma_preferred(&bf16));
    let mut resnext = grouped(256, 32);
    resnext.shape.n = 64;
    assert!(grouped_wgmma_preferred(&resnext));
    let src = hopper_source(&narrow, &grouped_wgmma_tile(&narrow));
    assert!(src.contains("c0 = (n0 / 192) * 192 + cw"));
    assert!(src.contains("nsteps = 27;"));
    assert!(src.contains("const bool ok = c0 + lcol < 48 && pv[i]"));
    let ragged = grouped(36, 3); // C not a multiple of 8: no 16-byte runs
    assert!(grouped_wgmma_unsupported_reason(&ragged)
        .unwrap()
        .contains("multiple of 8"));
    let threes = grouped(192, 64); // groups of 3: 64 groups would join
    assert!(grouped_wgmma_unsupported_reason(&threes)
        .unwrap()
        .contains("at most 16"));
    let nchw = ConvKernel {
        layout: ConvLayout::Nchw,
        out_layout: ConvLayout::Nchw,
        ..grouped(128, 32)
    };
    assert!(grouped_wgmma_unsupported_reason(&nchw)
        .unwrap()
        .contains("NHWC"));
    let int8 = ConvKernel {
        input: DType::I8,
        out: DType::I32,
        bias: false,
        ..grouped(128, 32)
    };
    assert!(grouped_wgmma_unsupported_reason(&int8).is_some());
    let dense = grouped(128, 1);
    assert!(grouped_wgmma_unsupported_reason(&dense).is_some());
    // No channels at all: a reason, not a division by zero.
    let mut empty = grouped(128, 32);
    empty.shape.c = 0;
    assert!(grouped_wgmma_unsupported_reason(&empty).is_some());
    assert!(!grouped_wgmma_preferred(&empty));
}

#[test]
fn the_tile_stays_inside_one_super_group() {
    let k = grouped(256, 32);
    let tile = grouped_wgmma_tile(&k);
    assert_eq!(tile.group_channels, 64);
    assert!(grouped_tile_reason(&k, &tile).is_none());
    assert!(tile.tma && tile.splits == 1 && !tile.persistent);
    // 2 x 14 x 14 pixels: 4 tiles of 128 rows x 4 super-groups, under one block per SM.
    assert_eq!((tile.bm, tile.bn, tile.stages), (64, 64, 4));
    let wide = HopperTile::new(128, 128, 4)
        .and_then(|t| t.with_group_channels(64))
        .unwrap();
    assert!(grouped_tile_reason(&k, &wide)
        .unwrap()
        .contains("does not divide"));
    // TMA tiles walk the super-groups too (the filter's map over its 64 channels).
    let tma = HopperTile::new(128, 64, 4)
        .and_then(|t| t.with_tma(true))
        .and_then(|t| t.with_group_channels(64))
        .unwrap();
    assert!(grouped_tile_reason(&k, &tma).is_none());
    assert_eq!(filter_view(&k).shape.c, 64);
    let src = hopper_source(&k, &tma);
    assert!(
        src.contains("kc = (t % 1) * 64, c0 = (n0 / 64) * 64 + kc"),
        "{src}"
    );
    assert!(src.contains("tma_tile(sa + 16384, &tw, kc, sx, r, n0, full + st)"));
    let persistent = HopperTile {
        persistent: true,
        ..tma
    };
    assert!(grouped_tile_reason(&k, &persistent).is_some());
}

#[test]
fn the_sources_read_the_super_group_channels() {
    let k = grouped(256, 32);
    let cp_async = grouped_wgmma_tile(&k).with_tma(false).unwrap();
    let src = hopper_source(&k, &cp_async);
    // The activations' channel from the tile's super-group, the filter over 64 channels.
    assert!(src.contains("c0 = (n0 / 64) * 64 + cw"), "{src}");
    assert!(src.contains("w + ((oc * 3 + r) * 3 + sx) * 64 + cw + lcol"));
    assert!(src.contains("nsteps = 9;"));
    // Channels past C (a last super-group that C does not fill) read as zeros.
    assert!(
        src.contains("const bool ok = c0 + lcol < 256 && pv[i]"),
        "{src}"
    );
    let pass = expand_source(&k);
    assert!(pass.contains("conv_expand_groups"));
    assert!(pass.contains("(oc / 64) * 64 + j - (oc / 8) * 8"));
    assert_eq!(expand_grid(&k) as usize, (256 * 9 * 64usize).div_ceil(256));
}

/// The pass's index arithmetic, run on the CPU: every element of the expanded filter is the
/// grouped filter's where the channel is in the output channel's group, else zero, and every
/// grouped element appears exactly once.
#[test]
fn the_expanded_filter_is_block_diagonal() {
    for (c, o, g) in [
        (128, 128, 32),
        (256, 512, 32),
        (64, 32, 8),
        (128, 64, 2),
        (192, 192, 8),
        (384, 384, 8),
    ] {
        let mut k = grouped(c, g);
        k.shape.o = o;
        let (cg, og, cs, os, taps) = (
            c / g,
            o / g,
            supergroup_channels(&k),
            supergroup_outputs(&k),
            9,
        );
        let w: Vec<usize> = (0..o * taps * cg).map(|i| i + 1).collect();
        let mut seen = vec![0usize; w.len()];
        for i in 0..expanded_filter_elements(&k) {
            let (j, rest) = (i % cs, i / cs);
            let (tap, oc) = (rest % taps, rest / taps);
            let ch = (oc / os) * cs + j;
            let in_group = ch / cg == oc / og;
            let cc = ch as isize - ((oc / og) * cg) as isize;
            assert_eq!((0..cg as isize).contains(&cc), in_group, "{c} {o} {g} {i}");
            if in_group {
                seen[(oc * taps + tap) * cg + cc as usize] += 1;
            }
        }
        assert!(seen.iter().all(|&n| n == 1), "{c} {o} {g}");
    }
}
