//! Tests of [`super`]: the blocks' ranges divide every tile's steps among its segments, each
//! segment but a tile's head is its block's first, and the generated text carries the fixup.

use super::*;
use crate::conv::{hopper_source, test_kernel};

/// The segments of each block as the kernel walks them: (block, tile, t0, nsteps).
fn segments(tiles: usize, steps: usize, blocks: usize) -> Vec<(usize, usize, usize, usize)> {
    let total = (tiles * steps) as u64;
    let mut out = Vec::new();
    for b in 0..blocks as u64 {
        let (mut it, it1) = (total * b / blocks as u64, total * (b + 1) / blocks as u64);
        while it < it1 {
            let (tile, t0) = ((it / steps as u64) as usize, (it % steps as u64) as usize);
            let n = ((it1 - it) as usize).min(steps - t0);
            out.push((b as usize, tile, t0, n));
            it += n as u64;
        }
    }
    out
}

#[test]
fn segments_cover_every_step_once_and_only_first_segments_start_inside_a_tile() {
    for (tiles, steps, blocks) in [
        (100, 32, 132),
        (49, 15, 132),
        (7, 3, 132),
        (300, 9, 264),
        (1, 1, 1),
        (5, 40, 3),
    ] {
        let segs = segments(tiles, steps, blocks);
        let mut covered = vec![0u32; tiles * steps];
        for &(_, tile, t0, n) in &segs {
            assert!(n > 0 && t0 + n <= steps);
            for t in t0..t0 + n {
                covered[tile * steps + t] += 1;
            }
        }
        assert!(covered.iter().all(|&c| c == 1), "{tiles} {steps} {blocks}");
        for (i, &(b, _, t0, _)) in segs.iter().enumerate() {
            let first = i == 0 || segs[i - 1].0 != b;
            assert!(
                t0 == 0 || first,
                "a segment inside a tile is its block's first"
            );
        }
        // The head's wait list (blocks after it whose ranges start inside the tile) is
        // exactly the tile's other segments.
        let total = (tiles * steps) as u64;
        for &(b, tile, t0, n) in segs.iter().filter(|s| s.2 == 0) {
            let end = ((tile + 1) * steps) as u64;
            let waited: Vec<usize> = (b + 1..blocks)
                .take_while(|&q| total * q as u64 / (blocks as u64) < end)
                .filter(|&q| {
                    total * q as u64 / blocks as u64 != total * (q as u64 + 1) / blocks as u64
                })
                .collect();
            let others: Vec<usize> = segs
                .iter()
                .filter(|s| s.1 == tile && s.2 > 0)
                .map(|s| s.0)
                .collect();
            if t0 + n == steps {
                assert!(others.is_empty());
            } else {
                assert_eq!(waited, others, "tile {tile}");
            }
        }
    }
}

#[test]
fn a_stream_k_tile_walks_segments_and_leaves_or_adds_partial_sums() {
    // ResNet-50's l4 1x1 2048->512 @7 at batch 64.
    let k = test_kernel(64, 2048, 7, 512, 1, DType::F16);
    let t = HopperTile::new(128, 128, 4)
        .and_then(|t| t.with_tma(true))
        .unwrap()
        .with_stream_k(&k)
        .unwrap();
    assert!(t.stream_k && t.persistent && t.splits == 1);
    assert_eq!(stream_k_steps(&k, &t), 32);
    assert_eq!(stream_k_blocks(&t, &k.shape, 32, 132), 132);
    assert_eq!(stream_k_blocks(&t, &k.shape, 32, 114), 114);
    assert_eq!(stream_k_workspace_bytes(&t, 132), 132 * (128 * 128 * 4 + 4));
    let src = hopper_source(&k, &t);
    assert!(src.contains("const long long total = 100ll * 32"));
    assert!(src.contains("if (t0 > 0) {") && src.contains("st.release.gpu.global.u32"));
    assert!(src.contains("ld.acquire.gpu.global.u32"));
    assert!(
        !src.contains("const int t0 = 0, nsteps"),
        "segments set t0 and nsteps"
    );
    // int8 sums are added as i32.
    let mut q = k;
    (q.input, q.out, q.bias) = (DType::I8, DType::I32, false);
    let t8 = HopperTile::new(128, 128, 4)
        .and_then(|t| t.with_tma(true))
        .unwrap()
        .with_stream_k(&q)
        .unwrap();
    assert!(hopper_source(&q, &t8).contains("int4* slots"));
}
