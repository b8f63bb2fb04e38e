//! Table blocks ([`super::gather`]) moved by vector permutes: where a block's destination is
//! one range from its first element (dense) and every element it reads lies within 128 bytes
//! of the lowest, each repetition is two masked loads of the source window, one two-source
//! permute per 64 destination bytes (`vpermt2b/w/d/q`, AVX-512 VBMI, BW or F) and one masked
//! store each, instead of one load and one store per element. The index vectors are made once
//! per work item from the block's table.
//!
//! OIHW16i16o -> OIHW with three input channels is such a block (48 elements of f16 from 96
//! bytes), which the table moved one element at a time: 16-18% of the copy on an AMD EPYC
//! Zen 5, where the copy runs at 37-40 GB/s.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

use layoutkit_core::plan::LoopDim;

/// A block's moves as permutes of its source window.
pub(super) struct Permutes {
    /// The lowest source element the block reads (from the repetition's start).
    low: isize,
    /// Bytes of the source window read (at most 128).
    window: usize,
    /// Destination bytes of one repetition.
    bytes: usize,
    /// Per 64 destination bytes, the index vector (lanes of the element size, little endian)
    /// into the window's two 64-byte halves.
    index: Vec<[u8; 64]>,
}

impl Permutes {
    /// The permutes of `moves` (from [`super::gather::block_moves`]: `(destination, source)`
    /// element offsets, sorted by destination) for elements of `size` bytes (1, 2, 4 or 8);
    /// None unless the destination offsets are 0, 1, 2, ... and the source offsets lie within
    /// 128 bytes.
    pub(super) fn of(moves: &[(isize, isize)], size: usize) -> Option<Permutes> {
        let dense = moves.iter().enumerate().all(|(j, m)| m.0 == j as isize);
        let low = moves.iter().map(|m| m.1).min()?;
        let high = moves.iter().map(|m| m.1).max()?;
        let window = (high - low + 1) as usize * size;
        if !dense || window > 128 || ![1, 2, 4, 8].contains(&size) {
            return None;
        }
        let lanes = 64 / size;
        let index = moves
            .chunks(lanes)
            .map(|chunk| {
                let mut v = [0u8; 64];
                for (lane, m) in chunk.iter().enumerate() {
                    let i = (m.1 - low) as u64;
                    v[lane * size..(lane + 1) * size].copy_from_slice(&i.to_le_bytes()[..size]);
                }
                v
            })
            .collect();
        Some(Permutes {
            low,
            window,
            bytes: moves.len() * size,
            index,
        })
    }
}

/// Bit mask of the first `n` (at most 64) bytes.
fn first(n: usize) -> u64 {
    if n >= 64 {
        u64::MAX
    } else {
        (1u64 << n) - 1
    }
}

/// [`super::gather::move_blocks`] by the permutes `p` of its table: repetition `b` from source
/// element `so + b * batch.src_stride` to destination element `d0 + b * batch.dst_stride`,
/// elements of `N` bytes.
///
/// Panics unless every byte read or written lies inside `src` and `dst` (checked once per
/// call).
///
/// # Safety
/// The CPU has AVX-512 F, BW and VBMI.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
pub(super) unsafe fn permute_blocks<const N: usize>(
    src: &[u8],
    dst: &mut [u8],
    (so, d0): (isize, isize),
    batch: LoopDim,
    p: &Permutes,
) {
    if batch.extent == 0 || p.bytes == 0 {
        return;
    }
    let last = batch.extent as isize - 1;
    let (s_first, s_last) = (so + p.low, so + p.low + last * batch.src_stride);
    let (d_first, d_last) = (d0, d0 + last * batch.dst_stride);
    assert!(s_first.min(s_last) >= 0 && s_first.max(s_last) as usize * N + p.window <= src.len());
    assert!(d_first.min(d_last) >= 0 && d_first.max(d_last) as usize * N + p.bytes <= dst.len());
    let index: Vec<__m512i> = p
        .index
        .iter()
        // SAFETY: 64 bytes each.
        .map(|v| unsafe { _mm512_loadu_si512(v.as_ptr() as *const __m512i) })
        .collect();
    let (lo_mask, hi_mask) = (first(p.window), first(p.window.saturating_sub(64)));
    // Where the repetitions' destinations follow each other with no gap, each repetition whose
    // whole vectors end inside the batch stores them whole (the repetitions after it overwrite
    // what ran over), and where 128 bytes from the window's start lie inside `src` the loads
    // are whole too: masked stores of part of a vector cost the small blocks more than the
    // table's moves (AMD EPYC Zen 5: MACE's 1x1 filter image with I = 3, f32, 86% -> 32% of
    // the copy with every store masked).
    let follow = batch.dst_stride as usize * N == p.bytes && batch.dst_stride > 0;
    let (sp, dp) = (src.as_ptr(), dst.as_mut_ptr());
    for b in 0..batch.extent as isize {
        let s = (so + p.low + b * batch.src_stride) as usize * N;
        let d = (d0 + b * batch.dst_stride) as usize * N;
        let whole_loads = s + 128 <= src.len();
        // Whole vectors end inside the batch's last repetition at the latest.
        let whole_stores =
            follow && (b as usize * p.bytes + index.len() * 64) <= batch.extent * p.bytes;
        // SAFETY: the window `s .. s + p.window` and the destination `d .. d + p.bytes` are
        // inside `src` and `dst` (asserted above for the first and last repetition, and the
        // repetitions lie between them); masked lanes are neither read nor written; whole
        // loads read `s .. s + 128` inside `src` (checked); whole stores write past this
        // repetition's bytes only into the repetitions after it (which follow with no gap,
        // end no earlier than the stores, checked, and are written after).
        unsafe {
            let (a, h) = if whole_loads {
                (
                    _mm512_loadu_si512(sp.add(s) as *const __m512i),
                    _mm512_loadu_si512(sp.add(s + 64) as *const __m512i),
                )
            } else {
                (
                    _mm512_maskz_loadu_epi8(lo_mask, sp.add(s) as *const i8),
                    _mm512_maskz_loadu_epi8(hi_mask, sp.add(s + 64) as *const i8),
                )
            };
            for (c, &idx) in index.iter().enumerate() {
                let v = match N {
                    1 => _mm512_permutex2var_epi8(a, idx, h),
                    2 => _mm512_permutex2var_epi16(a, idx, h),
                    4 => _mm512_permutex2var_epi32(a, idx, h),
                    _ => _mm512_permutex2var_epi64(a, idx, h),
                };
                let at = dp.add(d + c * 64);
                if whole_stores {
                    _mm512_storeu_si512(at as *mut __m512i, v);
                } else {
                    _mm512_mask_storeu_epi8(at as *mut i8, first(p.bytes - c * 64), v);
                }
            }
        }
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;
    use crate::fast::gather::{block_moves, move_blocks};
    use crate::fast::loop_dim as l;

    /// Blocks moved by permutes equal the table's moves, byte for byte, for every element size,
    /// blocks of one to three 64-byte destination chunks, windows up to 128 bytes, repetitions
    /// overlapping in the source and at odd offsets; blocks the permutes do not take say so.
    #[test]
    fn permutes_move_what_the_table_moves() {
        if !crate::fast::transpose::avx512_builds() {
            return;
        }
        // (block loops, unit, size)
        let blocks: [(&[LoopDim], usize, usize); 7] = [
            (&[l(3, 16, 1), l(16, 1, 3)], 1, 2), // OIHW16i16o -> OIHW, I = 3, f16
            (&[l(3, 16, 1), l(16, 1, 3)], 1, 4), // the same, f32 (window 192: refused)
            (&[l(3, 1, 4), l(4, 3, 1)], 1, 4),   // MACE 1x1 filter image, I = 3
            (&[l(4, 1, 3), l(3, 4, 1)], 1, 1),   // bytes
            (&[l(2, 2, 4), l(2, 4, 2)], 2, 8),   // units of two 8-byte elements
            (&[l(9, 1, 12), l(3, 9, 4), l(4, 27, 1)], 1, 2), // 108 f16, window 216: refused
            (&[l(2, 8, 1), l(8, 1, 2)], 1, 8),   // 16 elements of 8 bytes, window 128
        ];
        let mut took = 0;
        for (k, (loops, unit, size)) in blocks.into_iter().enumerate() {
            let moves = block_moves(loops, unit, size, false).expect("a table block");
            let Some(p) = Permutes::of(&moves, size) else {
                assert!(k == 1 || k == 5, "block {k} refused");
                continue;
            };
            took += 1;
            let count = moves.len() as isize;
            let span = moves.iter().map(|m| m.1).max().unwrap() + 1;
            for (src_stride, dst_stride, reps, so, d0) in [
                (span, count, 7, 0, 0),
                (span / 2 + 1, count + 3, 5, 3, 5),
                (span, count, 1, 1, 0),
            ] {
                let batch = l(reps, src_stride, dst_stride);
                let src_len = (so + (reps as isize - 1) * src_stride + span) as usize * size;
                let dst_len = (d0 + (reps as isize - 1) * dst_stride + count + 2) as usize * size;
                let src: Vec<u8> = (0..src_len).map(|i| (i * 7 + 3) as u8).collect();
                let mut want = vec![0xa5u8; dst_len];
                let mut got = want.clone();
                match size {
                    1 => move_blocks::<1>(&src, &mut want, (so, d0), batch, &moves),
                    2 => move_blocks::<2>(&src, &mut want, (so, d0), batch, &moves),
                    4 => move_blocks::<4>(&src, &mut want, (so, d0), batch, &moves),
                    _ => move_blocks::<8>(&src, &mut want, (so, d0), batch, &moves),
                }
                // SAFETY: AVX-512 F, BW and VBMI present (checked).
                unsafe {
                    match size {
                        1 => permute_blocks::<1>(&src, &mut got, (so, d0), batch, &p),
                        2 => permute_blocks::<2>(&src, &mut got, (so, d0), batch, &p),
                        4 => permute_blocks::<4>(&src, &mut got, (so, d0), batch, &p),
                        _ => permute_blocks::<8>(&src, &mut got, (so, d0), batch, &p),
                    }
                }
                assert_eq!(got, want, "block {k}, batch {batch:?}");
            }
        }
        assert_eq!(took, 5);
    }
}
