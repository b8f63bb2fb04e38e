//! Vector kernels of [`super::records::compact`] (the first `data` bytes of each record of
//! `stride` bytes, written back to back) and of its inverse [`super::records::expand`]
//! (records of `data` bytes each written with fill up to `out` bytes). Both permute bytes
//! within a vector: AVX-512 (VBMI) 64 bytes at a time (`vpermb`, or `vpermt2b` taking the
//! fill from a template vector), masked loads and stores for the last records; AVX2 within
//! each 128-bit lane (`vpshufb`), the records the vectors leave to the caller's loop.
//!
//! Why: the compiler turned the scalar loops into one short load and store per record (f16
//! MACE `in_out_channel` images of one channel back to NHWC, 80 MiB: 64% of the copy on a
//! Xeon with AVX-512, a third of the run's samples in that loop; u8 RGB pixels into
//! `NCHW4c`'s 4-byte records: 40%).

use std::arch::x86_64::*;

/// Whether [`compact_avx512`] takes records of `stride` bytes: four or more whole records
/// per vector (the stride divides 16) and `data < stride`. With one or two records per
/// vector the scalar loop was faster (f16 `NCHW32c -> NCHW` of one channel, 64-byte
/// records: 61% of the copy against 49%; f32 `kHWC8 -> NCHW` of one channel, 32-byte
/// records, in cache: 84% against 62%).
pub(super) fn avx512_takes(data: usize, stride: usize) -> bool {
    (1..=16).contains(&stride) && 16usize.is_multiple_of(stride) && data < stride
}

/// Whether [`compact_avx2`] takes records of `stride` bytes: a 128-bit lane holds whole
/// records (the stride divides 16) with 4 data bytes or more (`data < stride`). With 1 or 2
/// (one-channel f16 `kHWC8` pixels) each 32-byte load took two 16-byte stores, slower than
/// the scalar loop (f16 `kHWC8 -> NCHW` of one channel in cache: 65% of the copy against
/// 41%).
pub(super) fn avx2_takes(data: usize, stride: usize) -> bool {
    avx512_takes(data, stride) && 16 / stride * data >= 4
}

/// The byte permutation of a vector of `N` bytes holding `N / stride` records: output byte
/// `i` is source byte `(i / data) * stride + i % data` for the data bytes (`i < N / stride *
/// data`); the others take index 0x80 (`vpshufb` writes zero there; `vpermb` reads the index
/// modulo 64, and the AVX-512 store leaves those bytes unwritten).
fn permutation<const N: usize>(data: usize, stride: usize) -> [u8; N] {
    let used = N / stride * data;
    std::array::from_fn(|i| {
        if i < used {
            ((i / data) * stride + i % data) as u8
        } else {
            0x80
        }
    })
}

/// The 16 bytes `v` in both 128-bit lanes (a `vpshufb` control or template).
#[target_feature(enable = "avx2")]
#[inline]
fn lanes(v: &[u8; 16]) -> __m256i {
    // SAFETY: 16 bytes read from a 16-byte array.
    _mm256_broadcastsi128_si256(unsafe { _mm_loadu_si128(v.as_ptr().cast()) })
}

/// Compacts all `count` records (see [`super::records::compact`]'s contract: `src` holds
/// `(count - 1) * stride + data` bytes, `dst` `count * data`).
///
/// # Safety
/// The CPU has AVX-512F, BW and VBMI; [`avx512_takes`]`(data, stride)`.
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
pub(super) unsafe fn compact_avx512(
    src: &[u8],
    dst: &mut [u8],
    count: usize,
    data: usize,
    stride: usize,
) {
    debug_assert!(avx512_takes(data, stride));
    let src = &src[..(count - 1) * stride + data];
    let dst = &mut dst[..count * data];
    let per = 64 / stride;
    let out = per * data;
    let perm = permutation::<64>(data, stride);
    // SAFETY: 64 bytes read from a 64-byte array.
    let idx = unsafe { _mm512_loadu_si512(perm.as_ptr().cast()) };
    let store_mask: __mmask64 = (1u64 << out) - 1; // out <= 48
    let mut r = 0;
    // Whole vectors: the source's 64 bytes and the destination's `out` are in bounds.
    while (r + per) * stride <= src.len() {
        // SAFETY: in bounds (the loop condition; `r + per <= count`, so the destination
        // has `out` bytes at `r * data`).
        unsafe {
            let v = _mm512_loadu_si512(src.as_ptr().add(r * stride).cast());
            let c = _mm512_permutexvar_epi8(idx, v);
            _mm512_mask_storeu_epi8(dst.as_mut_ptr().add(r * data).cast(), store_mask, c);
        }
        r += per;
    }
    if r < count {
        // The last records (fewer than a vector's, the last one possibly cut to its data):
        // masked loads of the bytes left, masked stores of the records' data.
        let left_src = src.len() - r * stride;
        let left_dst = (count - r) * data;
        let load_mask: __mmask64 = (1u64 << left_src) - 1;
        let store_mask: __mmask64 = (1u64 << left_dst) - 1;
        // SAFETY: the masks cover only bytes in bounds (`left_src < 64`, else the loop
        // above would have taken them; `left_dst <= out < 64`), and masked-off bytes are
        // neither read nor written.
        unsafe {
            let v = _mm512_maskz_loadu_epi8(load_mask, src.as_ptr().add(r * stride).cast());
            let c = _mm512_permutexvar_epi8(idx, v);
            _mm512_mask_storeu_epi8(dst.as_mut_ptr().add(r * data).cast(), store_mask, c);
        }
    }
}

/// Compacts the first records of `src` into `dst`; returns how many records it wrote (the
/// caller writes the others). Each 32-byte load is permuted within its two 128-bit lanes
/// (`vpshufb`), which puts a lane's `out` data bytes first in the lane. Where `out` is 4 or 8,
/// the lanes of `16 / out` loads are placed side by side (each load's permutation puts its
/// bytes at its own offset in the lane, an OR joins them) and one permutation of 4- or 8-byte
/// pieces orders them for one whole 32-byte store. With 12 (three channels) each load's two
/// lanes are joined into one overlapping 32-byte store (the next store writes over the bytes
/// past the data). The loop stops where the next load would pass the source's end or the
/// next store the destination's.
///
/// # Safety
/// The CPU has AVX2; [`avx2_takes`]`(data, stride)`; `src` and `dst` as
/// [`compact_avx512`]'s.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn compact_avx2(
    src: &[u8],
    dst: &mut [u8],
    count: usize,
    data: usize,
    stride: usize,
) -> usize {
    debug_assert!(avx2_takes(data, stride));
    let src = &src[..(count - 1) * stride + data];
    let dst = &mut dst[..count * data];
    let per = 16 / stride;
    let out = per * data;
    // SAFETY: AVX2 present (this function's contract), bounds as checked in each.
    unsafe {
        match out {
            4 => joined::<4>(src, dst, stride, data),
            8 => joined::<2>(src, dst, stride, data),
            _ => overlapping(src, dst, stride, data), // 12 (`avx2_takes`)
        }
    }
}

/// [`compact_avx2`] for `out = 16 / K` data bytes per lane: `K` loads per 32-byte store.
#[target_feature(enable = "avx2")]
unsafe fn joined<const K: usize>(src: &[u8], dst: &mut [u8], stride: usize, data: usize) -> usize {
    let out = 16 / K;
    let per = 16 / stride;
    let base = permutation::<16>(data, stride);
    // Load k's permutation: its data bytes at offset `k * out` of each lane, zeros elsewhere.
    let ctl: [__m256i; K] = std::array::from_fn(|k| {
        let mut c = [0x80u8; 16];
        c[k * out..(k + 1) * out].copy_from_slice(&base[..out]);
        lanes(&c)
    });
    // The joined lanes hold load 0's low lane, load 1's low lane, ... then the high lanes:
    // pieces of `out` bytes to interleave into load order.
    let order = if K == 4 {
        _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)
    } else {
        _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7)
    };
    let step = 2 * per * K; // records per store
    let mut r = 0;
    while (r + step) * stride <= src.len() && (r + step) * data <= dst.len() {
        let mut v = _mm256_setzero_si256();
        for (k, ctl) in ctl.iter().enumerate() {
            // SAFETY: in bounds (the loop condition).
            let x =
                unsafe { _mm256_loadu_si256(src.as_ptr().add((r + 2 * per * k) * stride).cast()) };
            v = _mm256_or_si256(v, _mm256_shuffle_epi8(x, *ctl));
        }
        let v = _mm256_permutevar8x32_epi32(v, order);
        // SAFETY: in bounds (the loop condition: 32 bytes of records).
        unsafe { _mm256_storeu_si256(dst.as_mut_ptr().add(r * data).cast(), v) };
        r += step;
    }
    r
}

/// [`compact_avx2`] for 12 data bytes per lane (three channels): per load, the high lane's
/// data moved next to the low lane's and stored by one 32-byte store, whose last 8 bytes
/// the next store writes over.
#[target_feature(enable = "avx2")]
unsafe fn overlapping(src: &[u8], dst: &mut [u8], stride: usize, data: usize) -> usize {
    let per = 16 / stride;
    let out = per * data;
    debug_assert_eq!(out, 12);
    let perm = permutation::<16>(data, stride);
    let ctl = lanes(&perm);
    // Dwords 0-2 (the low lane's data), then 4-6 (the high lane's).
    let order = _mm256_setr_epi32(0, 1, 2, 4, 5, 6, 0, 0);
    let mut r = 0;
    while (r + 2 * per) * stride <= src.len() && r * data + 32 <= dst.len() {
        // SAFETY: in bounds (the loop condition).
        unsafe {
            let v = _mm256_loadu_si256(src.as_ptr().add(r * stride).cast());
            let c = _mm256_shuffle_epi8(v, ctl);
            let d = dst.as_mut_ptr().add(r * data);
            _mm256_storeu_si256(d.cast(), _mm256_permutevar8x32_epi32(c, order));
        }
        r += 2 * per;
    }
    r
}

/// The permutation and the template of [`expand_avx512`] / [`expand_avx2`] for vectors of
/// `N` bytes (`N / out` records of `out` bytes): output byte `i` of a record's data is
/// source byte `(i / out) * data + i % out` (index into the loaded vector), a fill byte is
/// taken from the template (index `N + i` for the AVX-512 two-source permutation, 0x80, a
/// zero, for `vpshufb`, then ORed with the template); the template holds the fill in
/// the records' padding and zeros in their data.
pub(super) fn expansion<const N: usize>(
    data: usize,
    out: usize,
    fill: &[u8],
    two_sources: bool,
) -> ([u8; N], [u8; N]) {
    let idx = std::array::from_fn(|i| {
        let (rec, off) = (i / out, i % out);
        if off < data {
            (rec * data + off) as u8
        } else if two_sources {
            (N + i) as u8
        } else {
            0x80
        }
    });
    let template = std::array::from_fn(|i| {
        let off = i % out;
        if off < data {
            0
        } else {
            fill[off - data]
        }
    });
    (idx, template)
}

/// Whether [`expand_avx512`] takes records of `data` bytes into `out`: four or more whole
/// records per vector, as [`avx512_takes`] with `out` for the stride (two 32-byte records
/// per vector ran 0.89x the scalar loop: f32 `NCHW -> kHWC8` of one channel, 32 MiB).
pub(super) fn avx512_expands(data: usize, out: usize) -> bool {
    avx512_takes(data, out)
}

/// Whether [`expand_avx2`] takes records of `data` bytes into `out`: a 128-bit lane holds
/// whole records (`out` divides 16), `data < out`.
pub(super) fn avx2_expands(data: usize, out: usize) -> bool {
    avx512_takes(data, out)
}

/// Writes all `count` records (see [`super::records::expand`]'s contract: `src` holds
/// `count * data` bytes, `dst` `count * out`, `fill` `out - data`): per 64 output bytes one
/// masked load of the records' data, one two-source byte permutation (data and template),
/// one store; the last records by a masked load and store.
///
/// # Safety
/// The CPU has AVX-512F, BW and VBMI; [`avx512_expands`]`(data, out)`.
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
pub(super) unsafe fn expand_avx512(
    src: &[u8],
    dst: &mut [u8],
    count: usize,
    (data, out): (usize, usize),
    fill: &[u8],
) {
    debug_assert!(avx512_expands(data, out));
    let src = &src[..count * data];
    let dst = &mut dst[..count * out];
    let per = 64 / out;
    let need = per * data;
    let (idx, template) = expansion::<64>(data, out, fill, true);
    // SAFETY: 64 bytes read from 64-byte arrays.
    let (idx, template) = unsafe {
        (
            _mm512_loadu_si512(idx.as_ptr().cast()),
            _mm512_loadu_si512(template.as_ptr().cast()),
        )
    };
    let load_mask: __mmask64 = (1u64 << need) - 1;
    let mut r = 0;
    while r + per <= count {
        // SAFETY: `need` bytes of source and 64 of destination in bounds (`r + per <=
        // count`); masked-off bytes are not read.
        unsafe {
            let v = _mm512_maskz_loadu_epi8(load_mask, src.as_ptr().add(r * data).cast());
            let c = _mm512_permutex2var_epi8(v, idx, template);
            _mm512_storeu_si512(dst.as_mut_ptr().add(r * out).cast(), c);
        }
        r += per;
    }
    if r < count {
        let left = count - r;
        let load_mask: __mmask64 = (1u64 << (left * data)) - 1;
        let store_mask: __mmask64 = (1u64 << (left * out)) - 1;
        // SAFETY: `left < per`, so the masks cover fewer than 64 bytes, all in bounds.
        unsafe {
            let v = _mm512_maskz_loadu_epi8(load_mask, src.as_ptr().add(r * data).cast());
            let c = _mm512_permutex2var_epi8(v, idx, template);
            _mm512_mask_storeu_epi8(dst.as_mut_ptr().add(r * out).cast(), store_mask, c);
        }
    }
}

/// Writes the first records of `dst` (as [`expand_avx512`]); returns how many (the caller
/// writes the others). Per 32 output bytes: each 128-bit lane's records' data loaded by one
/// 16-byte load, placed by `vpshufb` and ORed with the template. The loop stops where a
/// load would pass the source's end.
///
/// # Safety
/// The CPU has AVX2; [`avx2_expands`]`(data, out)`; `src` and `dst` as [`expand_avx512`]'s.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn expand_avx2(
    src: &[u8],
    dst: &mut [u8],
    count: usize,
    (data, out): (usize, usize),
    fill: &[u8],
) -> usize {
    debug_assert!(avx2_expands(data, out));
    let src = &src[..count * data];
    let dst = &mut dst[..count * out];
    let per = 16 / out;
    let need = per * data;
    let (ctl, template) = expansion::<16>(data, out, fill, false);
    let (ctl, template) = (lanes(&ctl), lanes(&template));
    let mut r = 0;
    while r + 2 * per <= count && r * data + need + 16 <= src.len() {
        // SAFETY: in bounds (the loop condition: both 16-byte loads inside the source, 32
        // bytes of destination records).
        unsafe {
            let s = src.as_ptr().add(r * data);
            let v = _mm256_loadu2_m128i(s.add(need).cast(), s.cast());
            let c = _mm256_or_si256(_mm256_shuffle_epi8(v, ctl), template);
            _mm256_storeu_si256(dst.as_mut_ptr().add(r * out).cast(), c);
        }
        r += 2 * per;
    }
    r
}
