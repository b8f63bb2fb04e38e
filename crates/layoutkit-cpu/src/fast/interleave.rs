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

#[path = "few_rows.rs"]
mod few_rows;
#[cfg(target_arch = "x86_64")]
#[path = "gather_split.rs"]
pub(super) mod gather_split;
pub(super) use few_rows::few_rows_pad;
use layoutkit_core::DType;

#[cfg(target_arch = "x86_64")]
#[path = "record_split.rs"]
mod record_split;

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

/// Whether [`deinterleave_strided`] splits records of `src_px` bytes into `c` rows of
/// `e`-byte elements by vector permutes on this CPU.
fn record_split_runs(src_px: usize, c: usize, e: usize) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        record_split::applies(src_px, c, e) && super::transpose::avx512_builds()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (src_px, c, e);
        false
    }
}

/// [`deinterleave`] from pixels `src_px` bytes apart (`src_px > c * e`: a blocked layout's
/// padded records, such as kHWC8's with 3 channels): `dst[k * dst_row + p] = src[p * src_px
/// + k]`. Records of 8 elements of 2 or 4 bytes by vector permutes where AVX-512 runs
/// (`record_split`), others element by element (the records are read a line or two each).
///
/// # Safety
/// As [`deinterleave`], the source being `n` records of `src_px` bytes.
pub(super) unsafe fn deinterleave_strided(
    src: *const u8,
    src_px: usize,
    dst: *mut u8,
    dst_row: usize,
    n: usize,
    c: usize,
    e: usize,
) -> bool {
    // Records of 8 elements of 2 or 4 bytes (kHWC8's) by vector permutes where AVX-512 runs,
    // the rest element by element.
    #[cfg(target_arch = "x86_64")]
    let (src, dst, n) = {
        let mut done = 0;
        if record_split_runs(src_px, c, e) {
            // SAFETY: the caller's contract; AVX-512 F and BW present (checked).
            done = unsafe { record_split::split_records(src, src_px, dst, dst_row, n, c, e) };
        }
        (
            src.wrapping_add(done * src_px),
            dst.wrapping_add(done * e),
            n - done,
        )
    };
    // Records half a line or more apart: their lines asked for ahead (the element loop on
    // i8 `NCHW32c -> NCHW` of 4 channels ran at 60% of this core's read rate, see
    // `records::far_records_prefetched`).
    let ahead = super::records::far_records_prefetched(src_px);
    macro_rules! go {
        ($e:literal, $c:literal) => {{
            for p in 0..n {
                if ahead {
                    super::records::prefetch_far_record(src, p, src_px);
                }
                // SAFETY: the caller's contract: record `p` holds `C` elements, destination
                // row `k` holds `n` elements.
                unsafe {
                    let px = src
                        .add(p * src_px)
                        .cast::<[[u8; $e]; $c]>()
                        .read_unaligned();
                    for (k, v) in px.iter().enumerate() {
                        dst.add(k * dst_row + p * $e)
                            .cast::<[u8; $e]>()
                            .write_unaligned(*v);
                    }
                }
            }
            true
        }};
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
    /// Runs tile `t` (units of `unit` elements) with the kernels above when one side has
    /// 2..=[`MAX_ROWS`] rows and the other side's rows are pixels: `nb` source rows into
    /// destination rows of `nb` units ([`interleave`]), or source rows of `na` units into `na`
    /// destination rows ([`deinterleave`]). Returns false (nothing written) for other tiles.
    ///
    /// Pixels back to back are read or written in place. Pixels further apart (a blocked
    /// layout's padded records, such as NCHW32c's or kHWC8's with 3 channels) are, as the
    /// source, split straight from the records (identity tiles, streamed) or gathered into
    /// the scratch tile (casts); as the destination of a cast, written whole with their fill
    /// where the tile carries it (`t.pad`, see [`few_rows_pad`]), else one by one (an
    /// identity conversion's strided destination is the transposes'). A cast runs as one
    /// contiguous run in the scratch tile between the (de)interleaving and the pixels' move. Where the job streams (`Job::stream`) and
    /// the destination is contiguous runs (interleaved pixels back to back, or the split
    /// rows), the tile is finished in the scratch tile and streamed out, so the destination's
    /// lines are not read for ownership before they are written (f32 NCHW -> NHWC of an RGB
    /// image: 66-69% of the copy with plain stores, 100-113% streamed, one thread).
    pub(super) fn tile_few_rows(
        &self,
        t: &super::tiles::StridedTile,
        unit: usize,
        scratch: &mut super::Scratch,
    ) -> bool {
        let (ss, ds) = (self.cast.src.size_bytes(), self.cast.dst.size_bytes());
        let (na, nb) = (t.na, t.nb);
        if t.s_first < 0 || t.d_first < 0 || t.s_row < 0 || t.d_row < 0 {
            return false;
        }
        let pad = t.pad;
        let records = t.d_row as usize == (nb + pad) * unit;
        let into_records = pad > 0 && self.planes_records_take(nb, unit, pad);
        if pad > 0 && !((few_rows_pad(&self.cast, nb, unit, pad) || into_records) && records) {
            return false;
        }
        let identity = self.cast.is_identity();
        let (s_row, d_row) = (t.s_row as usize, t.d_row as usize);
        let few = |r: usize| (2..=MAX_ROWS).contains(&r);
        let interleaving = few(nb) && d_row >= nb * unit && s_row >= na * unit;
        let splitting = !interleaving && few(na) && s_row >= na * unit && d_row >= nb * unit;
        let (rows, pixels, px_stride) = match (interleaving, splitting) {
            (true, _) => (nb, na, d_row),
            (_, true) if pad == 0 => (na, nb, s_row),
            _ => return false,
        };
        let packed = px_stride == rows * unit;
        let (se, de) = (unit * ss, unit * ds);
        let e = if interleaving { se } else { de };
        let n = pixels * rows * unit;
        // Identity tiles interleave only into pixels back to back (strided destination
        // pixels leave fill between them, which other tiles write); everything else goes
        // through the scratch tile's three ranges (see `few_rows_shape`).
        let (third, per_pixel) = self.few_rows_scratch(rows, unit, pad);
        let (records, third) = (pixels * (rows + pad) * unit * ds, pixels * third);
        // (Four 4-byte elements from records apart: as in `few_rows_shape`.)
        let four_fours = rows == 4 && e == 4 && !record_split_runs(s_row * ss, rows, e);
        let fits = pixels * per_pixel <= super::SCRATCH_BYTES
            && (packed || !identity || (splitting && self.stream && !four_fours) || into_records);
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
        let src_tile = &self.src[t.s_first as usize * ss..s_end * ss];
        let dst = self.dst.ptr.wrapping_add(t.d_first as usize * ds);
        let buf = scratch
            .stream_buf
            .get_or_insert_with(|| super::AlignedBuf::zeroed(super::SCRATCH_BYTES));
        if into_records && interleaving {
            // SAFETY: `planes_records_take`; the tile's source rows are inside the buffer
            // (asserted), the destination range belongs to this item; `buf` holds
            // SCRATCH_BYTES, at least the tile's `pixels * per_pixel`, which covers two
            // ranges of `pixels * 4 * e` bytes (`per_pixel` counts the records' `rows + pad
            // >= 4` elements and twice `rows`).
            return unsafe {
                self.planes_into_records(
                    src_tile,
                    s_row * ss,
                    dst,
                    (pixels, rows, e),
                    pad,
                    &mut buf[..],
                )
            };
        }
        // Scratch ranges: `n` source-type elements, `n` destination-type elements (the
        // cast's output) and a third: the padded records, or (streaming) the tile as it is
        // streamed out.
        let (a, rest) = buf.split_at_mut(n * ss);
        let (b, c) = rest.split_at_mut(n * ds);
        let c = &mut c[..third];
        if interleaving && identity && !self.stream {
            // In place (`packed`: checked by `fits`).
            // SAFETY: the tile's rows are inside the buffers (asserted); the destination
            // belongs to this item and does not overlap the source.
            return unsafe { interleave(src_tile.as_ptr(), s_row * ss, dst, pixels, rows, e) };
        }
        if interleaving {
            let cast: &[u8] = if ds < ss && matches!(de, 1 | 2 | 4 | 8) {
                // A narrowing cast: each source row cast first (contiguous runs, in `a`),
                // then the narrower elements interleaved into `b` (f32 -> i8 of an RGB image,
                // NCHW -> NHWC: the f32 interleave took twice the quantisation's time, the
                // byte interleave a quarter of the f32 one's data).
                // f32 -> f16 in one pass where it can ([`super::interleave_half`]), the
                // pixels after its last whole block as below.
                let done =
                    if unit == 1 && (self.cast.src, self.cast.dst) == (DType::F32, DType::F16) {
                        // SAFETY: the tile's `rows` source rows of `pixels` f32 values, `s_row`
                        // elements apart, are inside the buffer (asserted); `b` holds `n` f16.
                        unsafe {
                            super::interleave_half::f32_rows_to_f16_pixels(
                                src_tile.as_ptr(),
                                s_row * ss,
                                b.as_mut_ptr(),
                                pixels,
                                rows,
                            )
                        }
                    } else {
                        0
                    };
                let left = pixels - done;
                if left > 0 {
                    let row = left * de;
                    for k in 0..rows {
                        let from = &src_tile[k * s_row * ss + done * se..][..left * se];
                        (self.run)(
                            from,
                            &mut a[k * row..(k + 1) * row],
                            left * unit,
                            &self.cast,
                        );
                    }
                    // SAFETY: `a` holds `rows` rows of `left` destination units, `b` room for
                    // `n` destination elements, `done * rows` of them written.
                    unsafe {
                        let out = b.as_mut_ptr().add(done * rows * de);
                        interleave(a.as_ptr(), row, out, left, rows, de)
                    };
                }
                b
            } else {
                // SAFETY: the source rows are inside the buffer (asserted); `a` holds `n`
                // source elements.
                unsafe {
                    interleave(
                        src_tile.as_ptr(),
                        s_row * ss,
                        a.as_mut_ptr(),
                        pixels,
                        rows,
                        e,
                    )
                };
                if identity {
                    a
                } else {
                    (self.run)(a, b, n, &self.cast);
                    b
                }
            };
            if pad > 0 {
                // Whole records: the fill value everywhere (long copies of the fill line),
                // then each pixel's values at its record's start; one destination range.
                for part in c.chunks_mut(self.fill_line.len()) {
                    part.copy_from_slice(&self.fill_line[..part.len()]);
                }
                let (px_d, rec) = (rows * de, (rows + pad) * unit * ds);
                for (r, px) in c.chunks_exact_mut(rec).zip(cast.chunks_exact(px_d)) {
                    super::copy_few(&mut r[..px_d], px);
                }
                // SAFETY: the tile's records are back to back (checked) from `dst`, inside
                // the buffer (asserted) and this item's.
                let out = unsafe { std::slice::from_raw_parts_mut(dst, records) };
                self.out_copy(out, c);
            } else if packed {
                // SAFETY: the tile's destination range is inside the buffer (asserted) and
                // belongs to this item.
                let out = unsafe { std::slice::from_raw_parts_mut(dst, n * ds) };
                self.out_copy(out, cast);
            } else {
                let px_d = rows * de;
                for (p, px) in cast.chunks_exact(px_d).enumerate() {
                    // SAFETY: pixel `p` of the tile, inside the buffer (asserted), this item's.
                    let out =
                        unsafe { std::slice::from_raw_parts_mut(dst.add(p * d_row * ds), px_d) };
                    super::copy_few(out, px);
                }
            }
            return true;
        }
        #[cfg(target_arch = "x86_64")]
        if !packed
            && self.split_gathered(
                src_tile,
                (s_row * ss, d_row * ds),
                dst,
                (pixels, rows),
                unit,
                (a, b),
            )
        {
            return true;
        }
        if identity && !packed {
            // Records apart (streamed only: checked by `fits`): split straight from them into
            // `c`, whose rows are streamed out.
            let row_bytes = pixels * e;
            // SAFETY: the source records are inside the buffer (asserted); `c` holds `rows`
            // rows of `pixels` elements.
            unsafe {
                let out = c.as_mut_ptr();
                deinterleave_strided(
                    src_tile.as_ptr(),
                    s_row * ss,
                    out,
                    row_bytes,
                    pixels,
                    rows,
                    e,
                )
            };
            self.split_rows_out(&c[..rows * row_bytes], dst, row_bytes, d_row * ds);
            return true;
        }
        // Splitting: the pixels back to back (in place, or gathered into `a`), cast into
        // `b`, split into rows (in the destination, or in `c` and streamed out).
        let pixels_in: &[u8] = if packed {
            src_tile
        } else {
            let px_s = rows * se;
            for (p, px) in a.chunks_exact_mut(px_s).enumerate() {
                let at = p * s_row * ss;
                super::copy_few(px, &src_tile[at..at + px_s]);
            }
            a
        };
        // The rows: `c` (streamed out after) or the destination's.
        let row_bytes = pixels * e;
        let (out, out_row) = if self.stream {
            (c.as_mut_ptr(), row_bytes)
        } else {
            (dst, d_row * ds)
        };
        // f32 -> f16 in one pass where it can ([`super::interleave_half`]), the pixels after
        // its last whole block as below.
        let done = if unit == 1 && (self.cast.src, self.cast.dst) == (DType::F32, DType::F16) {
            // SAFETY: `pixels_in` holds the tile's pixels of f32 values; the rows of `pixels`
            // f16 values `out_row` bytes apart are in `c` (`rows` rows of `pixels` elements)
            // or the destination's (inside the buffer, asserted, this item's, apart).
            unsafe {
                super::interleave_half::f32_pixels_to_f16_rows(
                    pixels_in.as_ptr(),
                    out,
                    out_row,
                    pixels,
                    rows,
                )
            }
        } else {
            0
        };
        let left = pixels - done;
        if left > 0 {
            let rest = &pixels_in[done * rows * se..n * ss];
            let cast: &[u8] = if identity {
                rest
            } else {
                (self.run)(rest, b, left * rows * unit, &self.cast);
                b
            };
            // SAFETY: `cast` holds the tile's last `left` pixels; each row has room for them
            // after its first `done` elements.
            unsafe { deinterleave(cast.as_ptr(), out.add(done * e), out_row, left, rows, e) };
        }
        if self.stream {
            self.split_rows_out(&c[..rows * row_bytes], dst, row_bytes, d_row * ds);
        }
        true
    }
}

impl super::Job<'_> {
    /// Copies the split rows `rows` (back to back, `row_bytes` each) of a tile to its
    /// destination rows `d_row_bytes` apart from `dst` (streamed where the job streams): in
    /// one piece where the destination rows are back to back too (a MACE height-major image
    /// of one channel: each block's four lanes are four image rows of W pixels), so the
    /// streaming copy's fixed costs are paid once per tile, not once per row.
    fn split_rows_out(&self, rows: &[u8], dst: *mut u8, row_bytes: usize, d_row_bytes: usize) {
        if d_row_bytes == row_bytes {
            // SAFETY: the tile's destination rows are inside the buffer (asserted by the
            // caller), back to back from `dst`, and this item's.
            let out = unsafe { std::slice::from_raw_parts_mut(dst, rows.len()) };
            self.out_copy(out, rows);
            return;
        }
        for (k, part) in rows.chunks_exact(row_bytes).enumerate() {
            // SAFETY: destination row `k` of the tile, inside the buffer (asserted by the
            // caller), this item's, not overlapping the others (d_row >= nb * unit).
            let out =
                unsafe { std::slice::from_raw_parts_mut(dst.add(k * d_row_bytes), row_bytes) };
            self.out_copy(out, part);
        }
    }
}

#[cfg(test)]
#[path = "interleave_tests.rs"]
mod tests;
