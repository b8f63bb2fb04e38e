//! Tiles with few rows on one side: the planes of a few-channel image (RGB, RGBA) interleaved
//! into pixels (`NCHW -> NHWC` with C = 2..4) and pixels split back into planes (the inverse).
//! The transposing kernels work in blocks of 8 or 16 rows, so a tile of 3 rows fell through to
//! their element-at-a-time edge strips (f32 NCHW -> NHWC N=3,C=3,H=W=1024: 38% of the copy,
//! f16 23%, casts 2%). Here each pixel is a few elements, the destination (or source) of the
//! whole tile is one contiguous range, and the loops below are written so the compiler turns
//! them into shuffles of whole vectors (interleaved-access vectorisation), built for AVX-512
//! (with VBMI), AVX2 and the baseline, chosen at run time.
//!
//! Elements are `[u8; E]` (alignment 1), so sources at any byte offset are fine.

use layoutkit_core::plan::LoopDim;

/// The most rows (channels) these kernels take.
pub(super) const MAX_ROWS: usize = 4;

/// `dst[p * c + k] = src[k * src_row + p]` for `p < n`, `k < c`, elements of `e` bytes
/// (`src_row` and offsets in bytes): `c` source rows interleaved into one contiguous
/// destination range of `n * c` elements. Returns false (and writes nothing) when there is no
/// kernel for `(c, e)`: `c` in 2..=4, `e` in 1, 2, 4, 8.
///
/// # Safety
/// The `c` source rows of `n` elements and the destination range are inside live buffers, the
/// destination does not overlap the source and nobody else accesses it meanwhile.
pub(super) unsafe fn interleave(
    src: *const u8,
    src_row: usize,
    dst: *mut u8,
    n: usize,
    c: usize,
    e: usize,
) -> bool {
    macro_rules! go {
        ($e:literal, $c:literal) => {
            // SAFETY: the caller's contract.
            unsafe { dispatch::<$e, $c>(src, src_row, dst, n, Dir::Interleave) }
        };
    }
    dispatch_ce!(go, c, e)
}

/// `dst[k * dst_row + p] = src[p * c + k]` for `p < n`, `k < c` (the inverse of
/// [`interleave`]): one contiguous source range of `n` pixels of `c` elements split into `c`
/// destination rows. Returns false (and writes nothing) when there is no kernel for `(c, e)`.
///
/// # Safety
/// As [`interleave`], with the roles of source and destination exchanged; the destination rows
/// do not overlap each other (`dst_row >= n * e`).
pub(super) unsafe fn deinterleave(
    src: *const u8,
    dst: *mut u8,
    dst_row: usize,
    n: usize,
    c: usize,
    e: usize,
) -> bool {
    macro_rules! go {
        ($e:literal, $c:literal) => {
            // SAFETY: the caller's contract.
            unsafe { dispatch::<$e, $c>(src, dst_row, dst, n, Dir::Deinterleave) }
        };
    }
    dispatch_ce!(go, c, e)
}

/// Calls `$go!(E, C)` for the supported pairs; false for the others.
macro_rules! dispatch_ce {
    ($go:ident, $c:expr, $e:expr) => {
        match ($e, $c) {
            (1, 2) => $go!(1, 2),
            (1, 3) => $go!(1, 3),
            (1, 4) => $go!(1, 4),
            (2, 2) => $go!(2, 2),
            (2, 3) => $go!(2, 3),
            (2, 4) => $go!(2, 4),
            (4, 2) => $go!(4, 2),
            (4, 3) => $go!(4, 3),
            (4, 4) => $go!(4, 4),
            (8, 2) => $go!(8, 2),
            (8, 3) => $go!(8, 3),
            (8, 4) => $go!(8, 4),
            _ => return false,
        }
    };
}
use dispatch_ce;

#[derive(Clone, Copy)]
enum Dir {
    Interleave,
    Deinterleave,
}

/// Runs the build of the kernel for the CPU (AVX-512 unless `LAYOUTKIT_CPU_KERNELS=avx2`,
/// AVX2, baseline). `row` is the source row distance (interleave) or the destination's.
///
/// # Safety
/// As [`interleave`] / [`deinterleave`].
unsafe fn dispatch<const E: usize, const C: usize>(
    src: *const u8,
    row: usize,
    dst: *mut u8,
    n: usize,
    dir: Dir,
) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        if super::transpose::avx512_builds() {
            // SAFETY: the CPU has AVX-512F/BW/VL/VBMI (checked); the caller's contract.
            unsafe { x86_avx512::<E, C>(src, row, dst, n, dir) };
            return true;
        }
        if super::transpose::avx2_builds() {
            // SAFETY: the CPU has AVX2 (checked); the caller's contract.
            unsafe { x86_avx2::<E, C>(src, row, dst, n, dir) };
            return true;
        }
    }
    // SAFETY: the caller's contract.
    unsafe { kernel::<E, C>(src, row, dst, n, dir) };
    true
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx2,bmi2")]
unsafe fn x86_avx512<const E: usize, const C: usize>(
    src: *const u8,
    row: usize,
    dst: *mut u8,
    n: usize,
    dir: Dir,
) {
    // SAFETY: the caller's contract.
    unsafe { kernel::<E, C>(src, row, dst, n, dir) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,bmi2")]
unsafe fn x86_avx2<const E: usize, const C: usize>(
    src: *const u8,
    row: usize,
    dst: *mut u8,
    n: usize,
    dir: Dir,
) {
    // SAFETY: the caller's contract.
    unsafe { kernel::<E, C>(src, row, dst, n, dir) }
}

/// The loops, inlined into each build. Slices (of 1-aligned `[u8; E]`) rather than pointers
/// so the compiler knows source and destination do not alias, which it needs to vectorise.
#[inline(always)]
unsafe fn kernel<const E: usize, const C: usize>(
    src: *const u8,
    row: usize,
    dst: *mut u8,
    n: usize,
    dir: Dir,
) {
    match dir {
        Dir::Interleave => {
            // SAFETY: the caller's contract: C rows of n elements from `src`, `row` bytes
            // apart, and n * C elements from `dst`, not overlapping them.
            let rows: [&[[u8; E]]; C] = std::array::from_fn(|k| unsafe {
                std::slice::from_raw_parts(src.add(k * row).cast(), n)
            });
            let out: &mut [[[u8; E]; C]] = unsafe { std::slice::from_raw_parts_mut(dst.cast(), n) };
            for (p, px) in out.iter_mut().enumerate() {
                for k in 0..C {
                    // SAFETY: p < n, each row's length.
                    px[k] = unsafe { *rows[k].get_unchecked(p) };
                }
            }
        }
        Dir::Deinterleave => {
            // SAFETY: as above, roles exchanged.
            let pixels: &[[[u8; E]; C]] = unsafe { std::slice::from_raw_parts(src.cast(), n) };
            let rows: [&mut [[u8; E]]; C] = std::array::from_fn(|k| unsafe {
                std::slice::from_raw_parts_mut(dst.add(k * row).cast(), n)
            });
            for (p, px) in pixels.iter().enumerate() {
                for k in 0..C {
                    // SAFETY: p < n, each row's length.
                    unsafe { *rows[k].get_unchecked_mut(p) = px[k] };
                }
            }
        }
    }
}

impl super::Job<'_> {
    /// The tile shape `(ta, tb)` for a tile plane that [`Self::tile_few_rows`] runs (one
    /// source-contiguous loop, no padding, 2..=[`MAX_ROWS`] rows packed into pixels on one
    /// side): as many pixels as fill the scratch tile, so each tile moves tens of KiB in long
    /// runs (the transposes' shapes, made for 8 or 16 rows, gave 3-row tiles of 256 pixels).
    /// `None` for other planes.
    pub(super) fn few_rows_shape(
        &self,
        a_loops: &[LoopDim],
        b: LoopDim,
        unit: usize,
        pad: usize,
    ) -> Option<(usize, usize)> {
        let [a] = a_loops else { return None };
        let (ss, ds) = (self.cast.src.size_bytes(), self.cast.dst.size_bytes());
        let identity = self.cast.is_identity();
        // Room in the scratch tile for a tile in both types (casts, strided pixels).
        let pixels = |rows: usize| (super::SCRATCH_BYTES / (rows * unit * (ss + ds))).max(1);
        if pad > 0 || b.src_stride < 0 || a.dst_stride < 0 {
            return None;
        }
        let e_ok = |e: usize| matches!(e, 1 | 2 | 4 | 8);
        // Pixels back to back, or (casts) apart.
        let fits = |stride: isize, rows: usize| {
            stride as usize == rows * unit || (!identity && stride as usize > rows * unit)
        };
        if (2..=MAX_ROWS).contains(&b.extent) && fits(a.dst_stride, b.extent) && e_ok(unit * ss) {
            // Channels as source rows, pixels as destination rows.
            return Some((pixels(b.extent).min(a.extent), b.extent));
        }
        if (2..=MAX_ROWS).contains(&a.extent) && fits(b.src_stride, a.extent) && e_ok(unit * ds) {
            return Some((a.extent, pixels(a.extent).min(b.extent)));
        }
        None
    }

    /// Runs tile `t` (units of `unit` elements) with the kernels above when one side has
    /// 2..=[`MAX_ROWS`] rows and the other side's rows are pixels: `nb` source rows into
    /// destination rows of `nb` units ([`interleave`]), or source rows of `na` units into `na`
    /// destination rows ([`deinterleave`]). Pixels back to back are read or written in place;
    /// pixels further apart (a blocked layout's padded records, such as NCHW32c's with 3
    /// channels) only in casts, through the scratch tile, where the alternative was one kernel
    /// call per element. A cast runs as one contiguous run in the scratch tile between the
    /// (de)interleaving and the pixels' move. Returns false (nothing written) for other tiles.
    pub(super) fn tile_few_rows(
        &self,
        t: &super::tiles::StridedTile,
        unit: usize,
        scratch: &mut super::Scratch,
    ) -> bool {
        let (ss, ds) = (self.cast.src.size_bytes(), self.cast.dst.size_bytes());
        let (na, nb) = (t.na, t.nb);
        if t.pad > 0 || t.s_first < 0 || t.d_first < 0 || t.s_row < 0 || t.d_row < 0 {
            return false;
        }
        let identity = self.cast.is_identity();
        let (s_row, d_row) = (t.s_row as usize, t.d_row as usize);
        let few = |r: usize| (2..=MAX_ROWS).contains(&r);
        let interleaving = few(nb) && d_row >= nb * unit && s_row >= na * unit;
        let splitting = !interleaving && few(na) && s_row >= na * unit && d_row >= nb * unit;
        let (rows, pixels, px_stride) = match (interleaving, splitting) {
            (true, _) => (nb, na, d_row),
            (_, true) => (na, nb, s_row),
            _ => return false,
        };
        let packed = px_stride == rows * unit;
        let (se, de) = (unit * ss, unit * ds);
        let e = if interleaving { se } else { de };
        let n = pixels * rows * unit;
        // Identity tiles only in place; the others through both scratch ranges.
        let fits = if identity {
            packed
        } else {
            n * (ss + ds) <= super::SCRATCH_BYTES
        };
        if !matches!(e, 1 | 2 | 4 | 8) || !fits {
            return false;
        }
        // Bounds: the first and last elements of the tile inside the buffers.
        let s_end = t.s_first as usize + (nb - 1) * s_row + na * unit;
        let d_end = t.d_first as usize + (na - 1) * d_row + nb * unit;
        assert!(
            s_end * ss <= self.src.len() && d_end * ds <= self.dst.len,
            "a tile lies outside its buffer (plan and buffers disagree)"
        );
        let src = self.src.as_ptr().wrapping_add(t.s_first as usize * ss);
        let dst = self.dst.ptr.wrapping_add(t.d_first as usize * ds);
        if packed && identity {
            // SAFETY: the tile's rows are inside the buffers (asserted); the destination
            // belongs to this item; destination rows do not overlap (d_row >= nb * unit).
            return unsafe {
                if interleaving {
                    interleave(src, s_row * ss, dst, pixels, rows, e)
                } else {
                    deinterleave(src, dst, d_row * ds, pixels, rows, e)
                }
            };
        }
        let buf = scratch
            .stream_buf
            .get_or_insert_with(|| super::AlignedBuf::zeroed(super::SCRATCH_BYTES));
        // Two scratch ranges: the source type's `n` elements, then the destination type's.
        let (a, b) = buf.split_at_mut(n * ss);
        let b = &mut b[..n * ds];
        let (px_s, px_d) = (rows * se, rows * de);
        if interleaving {
            // SAFETY: as above; the scratch holds `n` source elements (checked).
            unsafe { interleave(src, s_row * ss, a.as_mut_ptr(), pixels, rows, e) };
            if packed {
                // SAFETY: the destination range of the tile is inside the buffer (asserted)
                // and belongs to this item.
                let out = unsafe { std::slice::from_raw_parts_mut(dst, n * ds) };
                (self.run)(a, out, n, &self.cast);
                return true;
            }
            (self.run)(a, b, n, &self.cast);
            for (p, px) in b.chunks_exact(px_d).enumerate() {
                // SAFETY: pixel `p` of the tile, inside the buffer (asserted), this item's.
                let out = unsafe { std::slice::from_raw_parts_mut(dst.add(p * d_row * ds), px_d) };
                super::copy_few(out, px);
            }
        } else {
            if packed {
                (self.run)(
                    &self.src[t.s_first as usize * ss..s_end * ss],
                    b,
                    n,
                    &self.cast,
                );
            } else {
                for (p, px) in a.chunks_exact_mut(px_s).enumerate() {
                    let at = (t.s_first as usize + p * s_row) * ss;
                    super::copy_few(px, &self.src[at..at + px_s]);
                }
                (self.run)(a, b, n, &self.cast);
            }
            // SAFETY: the scratch holds the cast pixels; the destination rows are inside the
            // buffer (asserted), belong to this item and do not overlap.
            unsafe { deinterleave(b.as_ptr(), dst, d_row * ds, pixels, rows, e) };
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One build of [`kernel`].
    type Build = unsafe fn(*const u8, usize, *mut u8, usize, Dir);

    /// Every build of both kernels (baseline, AVX2, AVX-512 where the CPU has it) against the
    /// definition, for every element size and row count, pixel counts around vector widths,
    /// sources and destinations at odd byte offsets.
    fn check<const E: usize, const C: usize>() {
        for n in [1, 2, 7, 15, 16, 17, 31, 64, 65, 200] {
            for off in [0, 1, 3] {
                let row = n * E + 5;
                let src: Vec<u8> = (0..off + C * row).map(|i| (i * 7 % 251) as u8).collect();
                let s = src[off..].as_ptr();
                let want_i: Vec<u8> = (0..n * C * E)
                    .map(|i| {
                        let (p, k, b) = (i / (C * E), i / E % C, i % E);
                        src[off + k * row + p * E + b]
                    })
                    .collect();
                let want_d: Vec<u8> = (0..C * row)
                    .map(|i| {
                        let (k, p, b) = (i / row, i % row / E, i % row % E);
                        if i % row < n * E {
                            src[off + p * C * E + k * E + b]
                        } else {
                            0
                        }
                    })
                    .collect();
                #[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut))]
                let mut builds: Vec<Build> = vec![kernel::<E, C>];
                #[cfg(target_arch = "x86_64")]
                {
                    if crate::fast::transpose::avx2_builds() {
                        builds.push(x86_avx2::<E, C>);
                    }
                    if crate::fast::transpose::avx512_builds() {
                        builds.push(x86_avx512::<E, C>);
                    }
                }
                for build in builds {
                    let mut got = vec![0u8; off + n * C * E];
                    // SAFETY: C rows of n elements from `s`, `row` bytes apart; n * C elements
                    // of destination (the CPU has each build's features: checked above).
                    unsafe { build(s, row, got[off..].as_mut_ptr(), n, Dir::Interleave) };
                    assert_eq!(&got[off..], &want_i[..], "interleave E={E} C={C} n={n}");
                    let mut got = vec![0u8; off + C * row];
                    // SAFETY: n pixels of C elements from `s`; C rows of `row >= n * E` bytes.
                    unsafe { build(s, row, got[off..].as_mut_ptr(), n, Dir::Deinterleave) };
                    assert_eq!(&got[off..], &want_d[..], "deinterleave E={E} C={C} n={n}");
                }
            }
        }
    }

    #[test]
    fn every_build_matches_the_definition() {
        check::<1, 2>();
        check::<1, 3>();
        check::<1, 4>();
        check::<2, 2>();
        check::<2, 3>();
        check::<2, 4>();
        check::<4, 2>();
        check::<4, 3>();
        check::<4, 4>();
        check::<8, 2>();
        check::<8, 3>();
        check::<8, 4>();
    }
}
