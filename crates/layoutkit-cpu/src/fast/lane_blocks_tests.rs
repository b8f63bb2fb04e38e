//! The lane blocks' recognition and chunk rule.
use super::*;
use crate::fast::loop_dim as l;

#[test]
fn height_major_image_blocks_are_recognised_both_ways() {
    // mace:in_out_height -> NHWC, C = 16, W = 14: [4 lanes][14 pixels][16 channels].
    let out = [l(4, 1, 224), l(14, 4, 16), l(16, 56, 1)];
    assert_eq!(
        LaneBlock::of(&out, 0, 2),
        Some(LaneBlock {
            dir: LaneDir::Out,
            x: 16,
            m: 14,
            lanes: 4,
            r: 4,
            xs: 56
        })
    );
    // The last block of H = 14: two lanes of four read.
    let tail = [l(2, 1, 224), l(14, 4, 16), l(16, 56, 1)];
    assert_eq!(
        LaneBlock::of(&tail, 0, 2).map(|b| (b.r, b.lanes)),
        Some((2, 4))
    );
    // NHWC -> mace:in_out_height, and its last block with two lanes of padding.
    let into = [l(16, 1, 56), l(14, 16, 4), l(4, 224, 1)];
    assert_eq!(LaneBlock::of(&into, 0, 2).map(|b| b.dir), Some(LaneDir::In));
    let into_tail = [l(16, 1, 56), l(14, 16, 4), l(2, 224, 1)];
    assert_eq!(
        LaneBlock::of(&into_tail, 2, 2).map(|b| (b.r, b.lanes)),
        Some((2, 4))
    );
    // Without the padding absorbed, the destination's lanes past r are another region's.
    assert_eq!(LaneBlock::of(&into_tail, 0, 2), None);
    // Not a reversal: NCHW -> NHWC's plane (two loops), a permutation that keeps the
    // middle loop's strides apart.
    assert_eq!(LaneBlock::of(&[l(16, 196, 1), l(196, 1, 16)], 0, 4), None);
    assert_eq!(
        LaneBlock::of(&[l(4, 1, 224), l(14, 4, 32), l(16, 56, 1)], 0, 2),
        None
    );
    // One pixel of three records per channel (W = 1, H = 3): too few rows for the block
    // kernels, too many channels for the interleaving ones.
    assert_eq!(
        LaneBlock::of(&[l(3, 1, 1000), l(1, 4, 1000), l(1000, 4, 1)], 0, 4),
        None
    );
    // Seven-pixel rows of many channels: the general tiles.
    assert_eq!(
        LaneBlock::of(&[l(4, 1, 1750), l(7, 4, 250), l(250, 28, 1)], 0, 4),
        None
    );
    // OIHW -> mace:conv2d_filter with I = 4, 3x3: read as taps x input channels x 4
    // output-channel lanes (9 channels, 16 lanes per pixel row: too few) or as 4
    // channels of 9-lane records (too few channels): neither.
    assert_eq!(
        LaneBlock::of(&[l(9, 1, 16), l(4, 9, 4), l(4, 36, 1)], 0, 2),
        None
    );
    // With 64 input channels the first reading holds.
    assert_eq!(
        LaneBlock::of(&[l(9, 1, 256), l(64, 9, 4), l(4, 576, 1)], 0, 2).map(|b| b.dir),
        Some(LaneDir::In)
    );
}

#[test]
fn chunks_cover_the_block_in_long_runs() {
    let cap = 64 << 10;
    let b = |dir, x, m| LaneBlock {
        dir,
        x,
        m,
        lanes: 4,
        r: 4,
        xs: 4 * m,
    };
    // Fits whole.
    assert_eq!(b(LaneDir::Out, 16, 14).chunk(2, cap), (16, 14));
    // C = 250 f32 on 64-pixel rows (256 KiB): whole pixel rows of 64 channels.
    assert_eq!(b(LaneDir::Out, 250, 64).chunk(4, cap), (64, 64));
    // Into the image the same: its destination is then one run per chunk.
    assert_eq!(b(LaneDir::In, 250, 64).chunk(4, cap), (64, 64));
    // Channel runs of a pixel shorter than 256 bytes: fewer pixels with every channel.
    assert_eq!(b(LaneDir::In, 250, 1024).chunk(4, cap), (250, 16));
    // Pixel rows too long for channel runs of 256 bytes: fewer pixels.
    assert_eq!(b(LaneDir::Out, 24, 1024).chunk(4, cap), (24, 170));
    // OIHW -> OIHW16i16o per block of 16 input channels, I = 256, 3x3: 16 output channels'
    // rows of 16 input channels x 9 taps, one block of 16 of each row (xs = I x 9); and the
    // inverse.
    // Read from rows apart: not taken.
    let b = LaneBlock::of(&[l(9, 1, 256), l(16, 9, 16), l(16, 2304, 1)], 0, 2);
    assert_eq!(b, None);
    // OIHW16i16o -> OIHW: written to rows apart, taken.
    let b = LaneBlock::of(&[l(16, 1, 2304), l(16, 16, 9), l(9, 256, 1)], 0, 2);
    assert_eq!(
        b.map(|b| (b.dir, b.x, b.m, b.lanes, b.xs)),
        Some((LaneDir::In, 16, 16, 9, 2304))
    );
    // With 4 input channels, as 9 taps of 16-lane records: records longer than the channels.
    assert_eq!(
        LaneBlock::of(&[l(16, 1, 36), l(4, 16, 9), l(9, 256, 1)], 0, 2),
        None
    );
}
