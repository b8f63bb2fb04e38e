//! Table blocks ([`super::gather`]) moved by vector permutes: where a block's destination is
//! one range from its first element (dense) and every element it reads lies within
//! [`MAX_WINDOW`] bytes of the lowest, each repetition loads the source window (one vector
//! per 64 bytes) and makes each 64 destination bytes by one two-source permute
//! (`vpermt2b/w/d/q`, AVX-512 VBMI, BW or F) per pair of window vectors its elements come
//! from (merged by lane masks where more than one pair serves it), then one store, instead of
//! one load and one store per element. The index vectors are made once per work item from the
//! block's table.
//!
//! OIHW16i16o -> OIHW with three input channels is such a block (48 elements of f16 from 96
//! bytes), which the table moved one element at a time: 16-18% of the copy on an AMD EPYC
//! Zen 5, where the copy runs at 37-40 GB/s.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

use layoutkit_core::plan::LoopDim;

/// The widest source window a block is permuted from (16 vectors; a 14-pixel row of 16 f16
/// channels into a MACE channel image reads 448 bytes).
const MAX_WINDOW: usize = 1024;

/// One pair of window vectors' share of 64 destination bytes.
struct Part {
    /// The pair: window vectors `2 * pair` and `2 * pair + 1`.
    pair: usize,
    /// Index vector (lanes of the element size, little endian) into the pair.
    index: [u8; 64],
    /// The destination lanes this pair fills (bit per element lane).
    lanes: u64,
}

/// A block's moves as permutes of its source window.
pub(super) struct Permutes {
    /// Bytes per permuted lane: 8 or 4 where the block moves whole aligned pieces of that
    /// size (the four f16 lanes of a MACE image pixel are one 8-byte lane), else the element
    /// size ([`lane_bytes`]).
    lane: usize,
    /// Bytes per element (the unit of the block's offsets and of the batch's strides).
    size: usize,
    /// The lowest source element the block reads (from the repetition's start).
    low: isize,
    /// Bytes of the source window read (at most [`MAX_WINDOW`]).
    window: usize,
    /// Destination bytes of one repetition.
    bytes: usize,
    /// Per 64 destination bytes, the pairs its elements come from.
    parts: Vec<Vec<Part>>,
}

impl Permutes {
    /// The permutes of `moves` (from [`super::gather::block_moves`]: `(destination, source)`
    /// element offsets, sorted by destination) for elements of `size` bytes (1, 2, 4 or 8);
    /// None unless the destination offsets are 0, 1, 2, ... and the source offsets lie within
    /// [`MAX_WINDOW`] bytes.
    pub(super) fn of(moves: &[(isize, isize)], size: usize) -> Option<Permutes> {
        let dense = moves.iter().enumerate().all(|(j, m)| m.0 == j as isize);
        let low = moves.iter().map(|m| m.1).min()?;
        let high = moves.iter().map(|m| m.1).max()?;
        let window = (high - low + 1) as usize * size;
        if !dense || window > MAX_WINDOW || ![1, 2, 4, 8].contains(&size) {
            return None;
        }
        let lane = lane_bytes(moves, low, size);
        // Elements per lane, lanes per pair of vectors (128 bytes).
        let (per_lane, per_pair) = (lane / size, 128 / lane);
        let parts = moves
            .chunks(64 / size)
            .map(|chunk| {
                let mut parts: Vec<Part> = Vec::new();
                for (l, piece) in chunk.chunks(per_lane).enumerate() {
                    let at = (piece[0].1 - low) as usize * size / lane;
                    let pair = at / per_pair;
                    let k = match parts.iter().position(|p| p.pair == pair) {
                        Some(k) => k,
                        None => {
                            parts.push(Part {
                                pair,
                                index: [0; 64],
                                lanes: 0,
                            });
                            parts.len() - 1
                        }
                    };
                    let i = (at % per_pair) as u64;
                    let part = &mut parts[k];
                    part.index[l * lane..(l + 1) * lane].copy_from_slice(&i.to_le_bytes()[..lane]);
                    part.lanes |= 1 << l;
                }
                parts
            })
            .collect();
        Some(Permutes {
            lane,
            size,
            low,
            window,
            bytes: moves.len() * size,
            parts,
        })
    }

    /// Moves the block `batch.extent` times as [`super::gather::move_blocks`] would:
    /// repetition `b` from source element `so + b * batch.src_stride` to destination element
    /// `d0 + b * batch.dst_stride`.
    ///
    /// Panics unless every byte read or written lies inside `src` and `dst`.
    ///
    /// # Safety
    /// The CPU has AVX-512 F, BW and VBMI.
    #[cfg(target_arch = "x86_64")]
    pub(super) unsafe fn run(
        &self,
        src: &[u8],
        dst: &mut [u8],
        at: (isize, isize),
        batch: LoopDim,
    ) {
        // SAFETY: the caller's contract.
        unsafe {
            match self.lane {
                8 => permute_blocks::<8>(src, dst, at, batch, self),
                4 => permute_blocks::<4>(src, dst, at, batch, self),
                2 => permute_blocks::<2>(src, dst, at, batch, self),
                _ => permute_blocks::<1>(src, dst, at, batch, self),
            }
        }
    }
}

impl Permutes {
    /// The byte offsets of repetition `b`'s source window and destination (repetition `b` from
    /// source element `so + b * batch.src_stride`, destination element `d0 + b *
    /// batch.dst_stride`), the element size multiplied in once rather than per repetition.
    fn repetition_bytes(
        &self,
        (so, d0): (isize, isize),
        batch: LoopDim,
    ) -> impl Fn(isize) -> (usize, usize) {
        let e = self.size as isize;
        let (s0, ss) = ((so + self.low) * e, batch.src_stride * e);
        let (ds0, ds) = (d0 * e, batch.dst_stride * e);
        move |b| ((s0 + b * ss) as usize, (ds0 + b * ds) as usize)
    }
}

/// The widest lane (8 or 4 bytes) in which every destination piece of the block (`moves`,
/// elements of `size` bytes, the lowest source element `low`) comes whole from one aligned
/// piece of its window, else the element size: a lane of 8 or 4 bytes is one `vpermt2q` /
/// `vpermt2d` (one micro-op on the AVX-512 CPUs of both vendors), where 2-byte elements took
/// `vpermt2w` (three micro-ops on Intel's cores). Single bytes (`vpermt2b`, VBMI) in place of
/// 2-byte lanes ran slower: f16 OIHW16i16o -> OIHW with I = 3 under 1 MiB, 100-111% -> 80-83%
/// of the copy on a Xeon (family 6 model 167, three alternations).
fn lane_bytes(moves: &[(isize, isize)], low: isize, size: usize) -> usize {
    [8, 4]
        .into_iter()
        .filter(|&lane| lane >= size)
        .find(|&lane| {
            let per_lane = lane / size;
            moves.len().is_multiple_of(per_lane)
                && moves.chunks(per_lane).all(|piece| {
                    ((piece[0].1 - low) as usize * size).is_multiple_of(lane)
                        && piece
                            .iter()
                            .enumerate()
                            .all(|(j, m)| m.1 == piece[0].1 + j as isize)
                })
        })
        .unwrap_or(size)
}

/// Bit mask of the first `n` (at most 64) bytes.
fn first(n: usize) -> u64 {
    if n >= 64 {
        u64::MAX
    } else {
        (1u64 << n) - 1
    }
}

/// The two-source permute of `N`-byte lanes: lane `i` of the result is lane `idx[i]` of the
/// 128 bytes `a`, `h`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
#[inline]
fn permute2<const N: usize>(a: __m512i, idx: __m512i, h: __m512i) -> __m512i {
    match N {
        1 => _mm512_permutex2var_epi8(a, idx, h),
        2 => _mm512_permutex2var_epi16(a, idx, h),
        4 => _mm512_permutex2var_epi32(a, idx, h),
        _ => _mm512_permutex2var_epi64(a, idx, h),
    }
}

/// `v` with its `N`-byte lanes set in `lanes` taken from `t`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
#[inline]
fn merge<const N: usize>(v: __m512i, lanes: u64, t: __m512i) -> __m512i {
    match N {
        1 => _mm512_mask_mov_epi8(v, lanes, t),
        2 => _mm512_mask_mov_epi16(v, lanes as u32, t),
        4 => _mm512_mask_mov_epi32(v, lanes as u16, t),
        _ => _mm512_mask_mov_epi64(v, lanes as u8, t),
    }
}

/// Stores destination vector `v` at `at`: whole, or its first `left` bytes (at most 64 of
/// them).
///
/// # Safety
/// 64 bytes at `at` are writable with `whole`, else `left.min(64)`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
#[inline]
unsafe fn store(at: *mut u8, v: __m512i, whole: bool, left: usize) {
    // SAFETY: the caller's contract; masked bytes are not written.
    unsafe {
        if whole {
            _mm512_storeu_si512(at as *mut __m512i, v);
        } else {
            _mm512_mask_storeu_epi8(at as *mut i8, first(left), v);
        }
    }
}

/// [`super::gather::move_blocks`] by the permutes `p` of its table: repetition `b` from source
/// element `so + b * batch.src_stride` to destination element `d0 + b * batch.dst_stride`
/// (elements of the block's size), permuted in lanes of `N` bytes (`p`'s lane: call
/// [`Permutes::run`]).
///
/// Panics unless every byte read or written lies inside `src` and `dst` (checked once per
/// call).
///
/// # Safety
/// The CPU has AVX-512 F, BW and VBMI.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
unsafe fn permute_blocks<const N: usize>(
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
    let e = p.size;
    assert!(s_first.min(s_last) >= 0 && s_first.max(s_last) as usize * e + p.window <= src.len());
    assert!(d_first.min(d_last) >= 0 && d_first.max(d_last) as usize * e + p.bytes <= dst.len());
    if p.window <= 128 {
        // SAFETY: as this function's; the window is one pair.
        unsafe { permute_narrow::<N>(src, dst, (so, d0), batch, p) };
        return;
    }
    // Per destination vector, its parts: (pair, index vector, lane mask).
    let parts: Vec<Vec<(usize, __m512i, u64)>> = p
        .parts
        .iter()
        .map(|parts| {
            parts
                .iter()
                // SAFETY: 64 bytes each.
                .map(|q| unsafe {
                    (
                        q.pair,
                        _mm512_loadu_si512(q.index.as_ptr() as *const __m512i),
                        q.lanes,
                    )
                })
                .collect()
        })
        .collect();
    let vectors = p.window.div_ceil(64);
    // Where the repetitions' destinations follow each other with no gap, each repetition whose
    // whole vectors end inside the batch stores them whole (the repetitions after it overwrite
    // what ran over), and where the window's whole vectors lie inside `src` the loads are
    // whole too: masked stores of part of a vector cost the small blocks more than the
    // table's moves (AMD EPYC Zen 5: MACE's 1x1 filter image with I = 3, f32, 86% -> 32% of
    // the copy with every store masked).
    let follow = batch.dst_stride as usize * e == p.bytes && batch.dst_stride > 0;
    let (sp, dp) = (src.as_ptr(), dst.as_mut_ptr());
    let mut w = [_mm512_setzero_si512(); MAX_WINDOW / 64 + 1];
    let at = p.repetition_bytes((so, d0), batch);
    for b in 0..batch.extent as isize {
        let (s, d) = at(b);
        let whole_loads = s + vectors * 64 <= src.len();
        // Whole vectors end inside the batch's last repetition at the latest.
        let whole_stores =
            follow && (b as usize * p.bytes + parts.len() * 64) <= batch.extent * p.bytes;
        // SAFETY: the window `s .. s + p.window` and the destination `d .. d + p.bytes` are
        // inside `src` and `dst` (asserted above for the first and last repetition, and the
        // repetitions lie between them); masked lanes are neither read nor written; whole
        // loads read `s .. s + 64 * vectors` inside `src` (checked); whole stores write past
        // this repetition's bytes only into the repetitions after it (which follow with no
        // gap, end no earlier than the stores, checked, and are written after).
        unsafe {
            for (i, v) in w.iter_mut().enumerate().take(vectors) {
                *v = if whole_loads {
                    _mm512_loadu_si512(sp.add(s + 64 * i) as *const __m512i)
                } else {
                    let mask = first(p.window - 64 * i);
                    _mm512_maskz_loadu_epi8(mask, sp.add(s + 64 * i) as *const i8)
                };
            }
            for (c, parts) in parts.iter().enumerate() {
                // A loop, not `fold`: closures compile without this function's features
                // and would be called, not inlined.
                let v = match parts[..] {
                    // One pair serves every lane (lanes past the block's end are stored only
                    // where later repetitions overwrite them, or masked off).
                    [(pair, idx, _)] => permute2::<N>(w[2 * pair], idx, w[2 * pair + 1]),
                    _ => {
                        let mut v = _mm512_setzero_si512();
                        for &(pair, idx, lanes) in parts {
                            let t = permute2::<N>(w[2 * pair], idx, w[2 * pair + 1]);
                            v = merge::<N>(v, lanes, t);
                        }
                        v
                    }
                };
                store(dp.add(d + c * 64), v, whole_stores, p.bytes - c * 64);
            }
        }
    }
}

/// [`permute_blocks`] for windows of at most 128 bytes (one pair of vectors, one permute per
/// destination vector), after its checks.
///
/// # Safety
/// As [`permute_blocks`], whose checks have passed; `p.window <= 128`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
unsafe fn permute_narrow<const N: usize>(
    src: &[u8],
    dst: &mut [u8],
    (so, d0): (isize, isize),
    batch: LoopDim,
    p: &Permutes,
) {
    let index: Vec<__m512i> = p
        .parts
        .iter()
        // SAFETY: 64 bytes each; one part per destination vector (the window is one pair).
        .map(|parts| unsafe { _mm512_loadu_si512(parts[0].index.as_ptr() as *const __m512i) })
        .collect();
    let (lo_mask, hi_mask) = (first(p.window), first(p.window.saturating_sub(64)));
    // As in `permute_blocks`: whole stores where the repetitions follow each other, whole
    // loads where 128 bytes from the window's start lie inside `src`.
    let e = p.size;
    let follow = batch.dst_stride as usize * e == p.bytes && batch.dst_stride > 0;
    let (sp, dp) = (src.as_ptr(), dst.as_mut_ptr());
    let at = p.repetition_bytes((so, d0), batch);
    for b in 0..batch.extent as isize {
        let (s, d) = at(b);
        let whole_loads = s + 128 <= src.len();
        let whole_stores =
            follow && (b as usize * p.bytes + index.len() * 64) <= batch.extent * p.bytes;
        // SAFETY: as in `permute_blocks`.
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
                let v = permute2::<N>(a, idx, h);
                store(dp.add(d + c * 64), v, whole_stores, p.bytes - c * 64);
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
    /// blocks of one to fourteen 64-byte destination chunks, windows up to 1024 bytes (one to
    /// eight pairs of vectors, destination vectors served by several pairs), repetitions
    /// overlapping in the source and at odd offsets; blocks the permutes do not take say so.
    #[test]
    fn permutes_move_what_the_table_moves() {
        if !crate::fast::transpose::avx512_builds() {
            return;
        }
        // (block loops, unit, size)
        // NHWC -> MACE channel image, one row of 14 (7) pixels of 16 channels: [4][14][4]
        // from [14][16] (units of the 4 lanes).
        let mace: &[LoopDim] = &[l(4, 4, 56), l(14, 16, 4)];
        let mace7: &[LoopDim] = &[l(4, 4, 28), l(7, 16, 4)];
        let blocks: [(&[LoopDim], usize, usize); 11] = [
            (&[l(3, 16, 1), l(16, 1, 3)], 1, 2), // OIHW16i16o -> OIHW, I = 3, f16
            (&[l(3, 16, 1), l(16, 1, 3)], 1, 4), // the same, f32 (window 192)
            (&[l(3, 1, 4), l(4, 3, 1)], 1, 4),   // MACE 1x1 filter image, I = 3
            (&[l(4, 1, 3), l(3, 4, 1)], 1, 1),   // bytes
            (&[l(2, 2, 4), l(2, 4, 2)], 2, 8),   // units of two 8-byte elements
            (&[l(9, 1, 12), l(3, 9, 4), l(4, 27, 1)], 1, 2), // 108 f16, window 216
            (&[l(2, 8, 1), l(8, 1, 2)], 1, 8),   // 16 elements of 8 bytes, window 128
            (mace, 4, 2),                        // window 448
            (mace7, 4, 4),                       // window 448, f32
            (&[l(2, 200, 1), l(2, 1, 2)], 1, 8), // window 1616: refused
            (&[l(2, 100, 1), l(2, 1, 2)], 1, 8), // window 816, one element per pair
        ];
        let mut took = 0;
        for (k, (loops, unit, size)) in blocks.into_iter().enumerate() {
            let moves = block_moves(loops, unit, size, false).expect("a table block");
            let Some(p) = Permutes::of(&moves, size) else {
                assert_eq!(k, 9, "block {k} refused");
                continue;
            };
            if k == 7 {
                // Destination vectors served by two pairs each.
                assert!(p.parts.iter().any(|parts| parts.len() > 1));
            }
            // Whole 8- or 4-byte pieces permute as such (the image pixels' four lanes of f16
            // or f32, 8-byte elements), scattered elements as elements.
            let lanes = [2, 4, 4, 1, 8, 2, 8, 8, 8, 0, 8];
            assert_eq!(p.lane, lanes[k], "block {k}");
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
                unsafe { p.run(&src, &mut got, (so, d0), batch) };
                assert_eq!(got, want, "block {k}, batch {batch:?}");
            }
        }
        assert_eq!(took, 10);
    }

    /// The lane is the widest of 8 and 4 bytes whose pieces each come whole from an aligned
    /// piece of the window, else the element size.
    #[test]
    fn lanes_are_the_widest_whole_aligned_pieces() {
        // Destination element j from the listed source elements (in destination order).
        let moves = |from: &[isize]| -> Vec<(isize, isize)> {
            from.iter()
                .enumerate()
                .map(|(j, &s)| (j as isize, s))
                .collect()
        };
        // Runs of four 2-byte elements from multiples of four: 8-byte lanes.
        assert_eq!(lane_bytes(&moves(&[4, 5, 6, 7, 0, 1, 2, 3]), 0, 2), 8);
        // Runs of two: 4-byte lanes; the window's start (`low`) counts.
        assert_eq!(lane_bytes(&moves(&[6, 7, 2, 3]), 2, 2), 4);
        assert_eq!(lane_bytes(&moves(&[7, 8, 3, 4]), 3, 2), 4);
        assert_eq!(lane_bytes(&moves(&[7, 8, 3, 4]), 2, 2), 2);
        // Single elements: the element size; 8-byte elements: 8.
        assert_eq!(lane_bytes(&moves(&[2, 0, 3, 1]), 0, 2), 2);
        assert_eq!(lane_bytes(&moves(&[2, 0, 3, 1]), 0, 1), 1);
        assert_eq!(lane_bytes(&moves(&[1, 0]), 0, 8), 8);
        // A block that ends inside a lane: the element size.
        assert_eq!(lane_bytes(&moves(&[0, 1, 2, 3, 4, 5]), 0, 2), 4);
        assert_eq!(lane_bytes(&moves(&[0, 1, 2]), 0, 2), 2);
    }
}
