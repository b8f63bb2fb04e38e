//! The depthwise kernel's inner loops ([`super`]): one output row of channel vectors, its
//! interior's groups of pixels and its edge pixels.

use super::{Geometry, Lists, Rows, HALF, LANES};
use crate::conv_blocked::Simd;

/// `a * b + acc`, fused where `FMA` (only with hardware FMA: otherwise `mul_add` is a library
/// call; unfused sums round differently, which the contract's tolerance covers).
#[inline(always)]
fn madd<const FMA: bool>(acc: f32, a: f32, b: f32) -> f32 {
    if FMA {
        a.mul_add(b, acc)
    } else {
        acc + a * b
    }
}

/// Output pixels a thread computes together inside the interior (each tap's weights loaded
/// once for them).
const PIXELS: usize = 4;

/// The output columns `lo..hi` whose every tap along W lies inside the input row.
fn interior(g: &Geometry) -> (usize, usize) {
    let (sw, pw, dw) = (g.conv.stride[1], g.conv.padding[1], g.conv.dilation[1]);
    let lo = pw.div_ceil(sw).min(g.ow);
    let reach = (g.kw - 1) * dw;
    // iw = ow * sw + s * dw - pw <= w - 1 for s = kw - 1.
    let hi = if g.w + pw > reach {
        ((g.w - 1 + pw - reach) / sw + 1).min(g.ow)
    } else {
        0
    };
    (lo, hi.max(lo))
}

/// One output row of channel vectors; inlined into the wrappers so its fixed-size loops take
/// their features. Inside the interior, groups of output pixels (see [`sliding_group`] and [`general_group`]);
/// elsewhere one pixel at a time, its taps inside the image listed first. `S` is the build's
/// vector (16 lanes with AVX-512, 8 with AVX2 or portable code) and `H` its half (8 lanes, or
/// `S` itself) for the shapes of [`sliding_vectors`].
#[inline(always)]
pub(super) fn row<const FMA: bool, S: Simd, H: Simd>(
    r: &Rows<'_>,
    n: usize,
    cb: usize,
    oh: usize,
    out: &mut [f32],
    lists: &mut Lists,
) {
    let g = r.g;
    let c0 = cb * r.block;
    let chans = r.block.min(g.c - c0);
    let base = n * r.sn + cb * r.plane;
    let (lo, hi) = interior(g);
    // The filter rows inside the image: (offset of the input row, filter row).
    let Lists { rows, taps: offs } = lists;
    rows.clear();
    for rr in 0..g.kh {
        if let Some(ih) = g.in_row(oh, rr) {
            rows.push((base + ih * r.sh, rr));
        }
    }
    let rows: &[(usize, usize)] = rows;
    let slide = sliding_shape(g).filter(|_| r.sliding);
    // Sliding groups: 8 pixels with AVX-512 (2 x 8 sums, 2 x KW weights and 2 inputs of its
    // 32 registers) and with AVX2 at stride 1 (8 + KW + 1 of 16) but for 7 taps; 4 with AVX2
    // at stride 2 (in pairs of vectors, see `sliding_group`), AVX2 with 7 taps, and portable
    // code. The general loop takes groups of PIXELS, twice that for a block of one half vector
    // (`NCHW8c`), for as many independent sums per tap.
    let most = match (slide.is_some(), FMA) {
        (true, true) if S::LANES == LANES || (g.conv.stride[1] == 1 && g.kw < 7) => 8,
        (true, true) => 4,
        (true, false) => 4,
        (false, _) if chans < LANES => 2 * PIXELS,
        (false, _) => PIXELS,
    };
    let mut ow = 0;
    while ow < g.ow {
        let interior = ow >= lo && ow < hi;
        // The end of this run: the interior's, the left edge's, or the row's.
        let end = if interior {
            hi
        } else if ow < lo {
            lo.min(g.ow)
        } else {
            g.ow
        };
        // The largest group that fits in the run (only whole groups of PIXELS, or twice
        // that, in the general tap loop).
        let p = [8, 4, 2, 1]
            .into_iter()
            .find(|&p| p <= most && ow + p <= end)
            .unwrap_or(1);
        // The group's vectors, returning the first channel they leave. Edge runs of two or
        // more pixels (some taps outside the image: a 7x7 filter's three at each end of a
        // row) take sliding groups too, each tap tested; a lone edge pixel (a 3x3 filter's)
        // stays with the pixel loop, which ran those layers 1.05x faster.
        let done = match slide {
            _ if chans < HALF => None,
            Some(shape) if interior => {
                prefetch_next_group(r, rows, ow + p, p);
                Some(sliding_group::<S, H, false>(
                    r, rows, shape, p, ow, c0, chans, out,
                ))
            }
            Some(shape) if end - ow >= 2 => Some(sliding_group::<S, H, true>(
                r, rows, shape, p, ow, c0, chans, out,
            )),
            None if interior && p >= PIXELS => {
                prefetch_next_group(r, rows, ow + p, p);
                Some(general_group::<FMA>(r, rows, p, ow, c0, chans, out))
            }
            _ => None,
        };
        match done {
            Some(v) => {
                // The channels past the last whole vector (and a partial block's zero
                // lanes), where there are any: the pixel's tap list is not rebuilt for
                // nothing.
                if v < r.block {
                    for q in 0..p {
                        one_pixel::<FMA>(r, rows, offs, ow + q, c0, v, chans, out);
                    }
                }
                ow += p;
            }
            None => {
                one_pixel::<FMA>(r, rows, offs, ow, c0, 0, chans, out);
                ow += 1;
            }
        }
    }
}

/// Asks for the input the next group of `p` pixels from `ow` reads in the filter rows this
/// output row is the first to read (the last `stride` of them), ahead of its loads: one
/// prefetch per 64 bytes of that range of each row.
#[inline(always)]
fn prefetch_next_group(r: &Rows<'_>, rows: &[(usize, usize)], ow: usize, p: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        let g = r.g;
        let (sw, pw) = (g.conv.stride[1], g.conv.padding[1]);
        let first = (ow * sw).saturating_sub(pw).min(g.w);
        let end = ((ow + p) * sw + g.kw).saturating_sub(pw).min(g.w);
        let bytes = (end - first) * r.sw * 4;
        let new_rows = g.conv.stride[0].min(rows.len());
        for &(row_at, _) in &rows[rows.len() - new_rows..] {
            let start = r.xs[row_at + first * r.sw..].as_ptr().cast::<i8>();
            for off in (0..bytes).step_by(64) {
                // SAFETY: a prefetch reads nothing and faults on no address; the address is
                // inside `xs` or just past it (wrapping_add: no pointer arithmetic contract).
                unsafe {
                    std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                        start.wrapping_add(off),
                    )
                };
            }
        }
    }
    let _ = (r, rows, ow, p);
}

/// The filter width and stride along W of the shapes [`sliding_vectors`] is built for (3x3
/// and 5x5 filters at stride 1 or 2, 7x7 at stride 1, no dilation along W: every depthwise
/// layer of MobileNet V1-V3, EfficientNet and ConvNeXt), or `None` for the general tap loop.
fn sliding_shape(g: &Geometry) -> Option<(usize, usize)> {
    let shape = (g.kw, g.conv.stride[1]);
    (g.conv.dilation[1] == 1 && matches!(shape, (3 | 5, 1 | 2) | (7, 1))).then_some(shape)
}

/// The general tap loop's channel vectors of `p` ([`PIXELS`] or twice that) interior pixels
/// from `ow`: vectors of 16 lanes in pairs, then one, then a half vector of 8; returns the
/// first channel not done.
#[inline(always)]
fn general_group<const FMA: bool>(
    r: &Rows<'_>,
    rows: &[(usize, usize)],
    p: usize,
    ow: usize,
    c0: usize,
    chans: usize,
    out: &mut [f32],
) -> usize {
    let mut v = 0;
    if p == PIXELS {
        while v + 2 * LANES <= chans {
            interior_vectors::<FMA, PIXELS, 2, LANES>(r, rows, ow, c0, v, out);
            v += 2 * LANES;
        }
        if v + LANES <= chans {
            interior_vectors::<FMA, PIXELS, 1, LANES>(r, rows, ow, c0, v, out);
            v += LANES;
        }
    }
    if v + HALF <= chans {
        if p == PIXELS {
            interior_vectors::<FMA, PIXELS, 1, HALF>(r, rows, ow, c0, v, out);
        } else {
            interior_vectors::<FMA, { 2 * PIXELS }, 1, HALF>(r, rows, ow, c0, v, out);
        }
        v += HALF;
    }
    v
}

/// The sliding kernel's channel vectors of `p` interior pixels from `ow`: `S` vectors in
/// pairs where `S` has 16 lanes, then one at a time, then one `H` where it is narrower;
/// returns the first channel not done.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn sliding_group<S: Simd, H: Simd, const EDGE: bool>(
    r: &Rows<'_>,
    rows: &[(usize, usize)],
    shape: (usize, usize),
    p: usize,
    ow: usize,
    c0: usize,
    chans: usize,
    out: &mut [f32],
) -> usize {
    let mut v = 0;
    // Pairs of vectors (not for 7 taps: 14 weights): AVX-512 (32 registers), and AVX2 at
    // stride 2 (groups of 4 pixels:
    // 8 sums, 6 weights and 2 inputs of its 16 registers; one vector at a time ran the
    // large stride-2 layers 0.6-0.9x the general loop there).
    if shape.0 < 7 && (S::LANES == LANES || (shape.1 == 2 && p <= 4)) {
        while v + 2 * S::LANES <= chans {
            sliding_p::<S, 2, EDGE>(r, rows, shape, p, ow, c0, v, out);
            v += 2 * S::LANES;
        }
    }
    while v + S::LANES <= chans {
        sliding_p::<S, 1, EDGE>(r, rows, shape, p, ow, c0, v, out);
        v += S::LANES;
    }
    if H::LANES < S::LANES && v + H::LANES <= chans {
        sliding_p::<H, 1, EDGE>(r, rows, shape, p, ow, c0, v, out);
        v += H::LANES;
    }
    v
}

/// [`sliding_vectors`] with the group size `p` and the shape as constants.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn sliding_p<S: Simd, const V: usize, const EDGE: bool>(
    r: &Rows<'_>,
    rows: &[(usize, usize)],
    shape: (usize, usize),
    p: usize,
    ow: usize,
    c0: usize,
    v: usize,
    out: &mut [f32],
) {
    macro_rules! by_shape {
        ($p:literal) => {
            match shape {
                (3, 1) => sliding_vectors::<S, $p, V, 3, 1, EDGE>(r, rows, ow, c0, v, out),
                (3, 2) => sliding_vectors::<S, $p, V, 3, 2, EDGE>(r, rows, ow, c0, v, out),
                (5, 1) => sliding_vectors::<S, $p, V, 5, 1, EDGE>(r, rows, ow, c0, v, out),
                (5, 2) => sliding_vectors::<S, $p, V, 5, 2, EDGE>(r, rows, ow, c0, v, out),
                _ => sliding_vectors::<S, $p, V, 7, 1, EDGE>(r, rows, ow, c0, v, out),
            }
        };
    }
    match p {
        8 => by_shape!(8),
        4 => by_shape!(4),
        2 => by_shape!(2),
        _ => by_shape!(1),
    }
}

/// `V` vectors of `S` (channels from `v`) of the `P` interior output pixels from `ow`, for a
/// filter `KW` wide at stride `SW` along W (no dilation): per filter row, each of the
/// `(P - 1) x SW + KW` input pixels the group reads is loaded once and multiplied into every
/// output pixel that reads it, with the row's `KW x V` weight vectors in registers (`P x KW x
/// V` multiply-adds from `(P - 1) x SW + KW + KW` loads per vector, where the general tap loop
/// loads an input vector per multiply-add). Each output's sum takes its taps in the same
/// order as the general loop (`r`, then `s`), with the same multiply-add, so the results are
/// the same.
#[inline(always)]
fn sliding_vectors<
    S: Simd,
    const P: usize,
    const V: usize,
    const KW: usize,
    const SW: usize,
    const EDGE: bool,
>(
    r: &Rows<'_>,
    rows: &[(usize, usize)],
    ow: usize,
    c0: usize,
    v: usize,
    out: &mut [f32],
) {
    let g = r.g;
    let l = S::LANES;
    let pw = g.conv.padding[1];
    let span = (P - 1) * SW + KW;
    assert!(c0 + v + V * l <= g.c.min(r.bias.len()) && P * V <= 16 && KW * V <= 10);
    // SAFETY (every load and store below): the vector instructions are present (the caller's
    // build); bias and weight reads lie within channels c0 + v .. c0 + v + V x l <= C
    // (asserted) of a tap's C weights; input reads within the bound asserted per row; the
    // stores within the group's P pixels of `out` (asserted at the end).
    unsafe {
        // Sum `k` is pixel `k / V`'s vector `k % V`; weight `k` is tap `k / V`'s vector `k % V`.
        let mut acc = [S::zero(); 16];
        let mut wr = [S::zero(); 10];
        for (k, a) in acc.iter_mut().enumerate().take(P * V) {
            *a = S::load(r.bias.as_ptr().add(c0 + v + (k % V) * l));
        }
        let xp = r.xs.as_ptr();
        for &(row_at, rr) in rows {
            for (k, w) in wr.iter_mut().enumerate().take(KW * V) {
                let at = (rr * KW + k / V) * g.c + c0 + v + (k % V) * l;
                *w = S::load(r.per_tap.as_ptr().add(at));
            }
            // The group's first input column (negative at a left edge) and the row's bound:
            // its last column for an edge group, whose taps are tested one by one, else the
            // group's last column.
            let first = (ow * SW) as isize - pw as isize;
            let last = if EDGE { g.w } else { (ow * SW - pw) + span };
            assert!(last == 0 || row_at + (last - 1) * r.sw + v + V * l <= r.xs.len());
            // Inside the interior, addresses from the group's first column (offsets the
            // compiler folds into each load).
            let at0 = if EDGE {
                0
            } else {
                row_at + (ow * SW - pw) * r.sw + v
            };
            // Written tap by tap (short loops of constant length, which the compiler unrolls
            // whole, where a loop over the input pixels with a test per output was not): the
            // loads of one input pixel by several taps have the same address and are merged.
            for s in 0..KW {
                for q in 0..P {
                    let at = if EDGE {
                        let col = first + (q * SW + s) as isize;
                        if !(0..g.w as isize).contains(&col) {
                            continue;
                        }
                        row_at + col as usize * r.sw + v
                    } else {
                        at0 + (q * SW + s) * r.sw
                    };
                    for j in 0..V {
                        let xv = S::load(xp.add(at + j * l));
                        let k = q * V + j;
                        acc[k] = S::fma(xv, wr[s * V + j], acc[k]);
                    }
                }
            }
        }
        assert!((ow + P - 1) * r.block + v + V * l <= out.len());
        let yp = out.as_mut_ptr();
        for (k, &a) in acc.iter().enumerate().take(P * V) {
            let a = if r.relu { S::relu(a) } else { a };
            S::store(yp.add((ow + k / V) * r.block + v + (k % V) * l), a);
        }
    }
}

/// `V` vectors of `L` channels from `v` of the `P` interior output pixels from `ow`: each
/// tap's `V` weight vectors loaded once for the pixels, `V x P` independent sums (so the
/// multiply-adds of one tap do not wait on each other), one bounds check per tap.
#[inline(always)]
fn interior_vectors<const FMA: bool, const P: usize, const V: usize, const L: usize>(
    r: &Rows<'_>,
    rows: &[(usize, usize)],
    ow: usize,
    c0: usize,
    v: usize,
    out: &mut [f32],
) {
    let g = r.g;
    let (sw, dw, pw) = (g.conv.stride[1], g.conv.dilation[1], g.conv.padding[1]);
    // Sum `k` is pixel `k / V`'s vector `k % V` (one flat array: nested ones were not kept in
    // registers).
    let mut acc = [[0f32; L]; 8];
    let sums = P * V;
    assert!(sums <= acc.len());
    for (k, a) in acc.iter_mut().enumerate().take(sums) {
        let b = c0 + v + (k % V) * L;
        a.copy_from_slice(&r.bias[b..b + L]);
    }
    let step = sw * r.sw;
    let xp = r.xs.as_ptr();
    for &(row_at, rr) in rows {
        for s in 0..g.kw {
            let wt = (rr * g.kw + s) * g.c + c0 + v;
            let wv = &r.per_tap[wt..wt + V * L];
            let at0 = row_at + (ow * sw + s * dw - pw) * r.sw + v;
            // One bounds check for the P x V vectors of this tap.
            assert!(at0 + (P - 1) * step + V * L <= r.xs.len());
            for (k, a) in acc.iter_mut().enumerate().take(sums) {
                let (p, j) = (k / V, k % V);
                // SAFETY: at0 + p * step + (j + 1) * L <= the bound asserted above,
                // which is at most xs.len(); f32 has no invalid bit patterns.
                let xv: [f32; L] = unsafe {
                    xp.add(at0 + p * step + j * L)
                        .cast::<[f32; L]>()
                        .read_unaligned()
                };
                let w: &[f32; L] = wv[j * L..(j + 1) * L].try_into().unwrap();
                for l in 0..L {
                    a[l] = madd::<FMA>(a[l], xv[l], w[l]);
                }
            }
        }
    }
    for (k, a) in acc.iter().enumerate().take(sums) {
        let at = (ow + k / V) * r.block + v + (k % V) * L;
        let o = &mut out[at..at + L];
        for l in 0..L {
            o[l] = if r.relu && a[l] < 0.0 { 0.0 } else { a[l] };
        }
    }
}

/// `V` vectors of `L` channels from `v` of output pixel `ow` over the taps `offs` (input offset
/// of the pixel's block, tap): `V` independent sums per tap, one bounds check per tap.
#[inline(always)]
fn pixel_vectors<const FMA: bool, const V: usize, const L: usize>(
    r: &Rows<'_>,
    offs: &[(usize, usize)],
    ow: usize,
    c0: usize,
    v: usize,
    out: &mut [f32],
) {
    let g = r.g;
    let mut acc = [[0f32; L]; V];
    for (k, a) in acc.iter_mut().enumerate() {
        let b = c0 + v + k * L;
        a.copy_from_slice(&r.bias[b..b + L]);
    }
    let xp = r.xs.as_ptr();
    for &(at, t) in offs {
        let wt = t * g.c + c0 + v;
        let wv = &r.per_tap[wt..wt + V * L];
        assert!(at + v + V * L <= r.xs.len());
        for (k, a) in acc.iter_mut().enumerate() {
            // SAFETY: at + v + (k + 1) * L <= the bound asserted above, at most
            // xs.len(); f32 has no invalid bit patterns.
            let xv: [f32; L] =
                unsafe { xp.add(at + v + k * L).cast::<[f32; L]>().read_unaligned() };
            let w: &[f32; L] = wv[k * L..(k + 1) * L].try_into().unwrap();
            for l in 0..L {
                a[l] = madd::<FMA>(a[l], xv[l], w[l]);
            }
        }
    }
    for (k, a) in acc.iter().enumerate() {
        let at = ow * r.block + v + k * L;
        let o = &mut out[at..at + L];
        for l in 0..L {
            o[l] = if r.relu && a[l] < 0.0 { 0.0 } else { a[l] };
        }
    }
}

/// Channels `from..` of output pixel `ow` (vectors of 16, a half vector of 8, then one at a
/// time), and zeros in
/// the lanes past C of a partial last block.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn one_pixel<const FMA: bool>(
    r: &Rows<'_>,
    rows: &[(usize, usize)],
    offs: &mut Vec<(usize, usize)>,
    ow: usize,
    c0: usize,
    from: usize,
    chans: usize,
    out: &mut [f32],
) {
    let g = r.g;
    // The taps inside the image: (input offset of the pixel's block, tap).
    offs.clear();
    for &(row_at, rr) in rows {
        for s in 0..g.kw {
            if let Some(iw) = g.in_col(ow, s) {
                offs.push((row_at + iw * r.sw, rr * g.kw + s));
            }
        }
    }
    let mut v = from;
    // Four vectors at a time (four independent sums per tap), then two, then one, then a half vector.
    while v + 4 * LANES <= chans {
        pixel_vectors::<FMA, 4, LANES>(r, offs, ow, c0, v, out);
        v += 4 * LANES;
    }
    if v + 2 * LANES <= chans {
        pixel_vectors::<FMA, 2, LANES>(r, offs, ow, c0, v, out);
        v += 2 * LANES;
    }
    if v + LANES <= chans {
        pixel_vectors::<FMA, 1, LANES>(r, offs, ow, c0, v, out);
        v += LANES;
    }
    if v + HALF <= chans {
        pixel_vectors::<FMA, 1, HALF>(r, offs, ow, c0, v, out);
        v += HALF;
    }
    let o = &mut out[ow * r.block..(ow + 1) * r.block];
    for (e, oe) in o.iter_mut().enumerate().take(chans).skip(v) {
        let mut acc = r.bias[c0 + e];
        for &(at, t) in offs.iter() {
            acc = madd::<FMA>(acc, r.xs[at + e], r.per_tap[t * g.c + c0 + e]);
        }
        *oe = if r.relu && acc < 0.0 { 0.0 } else { acc };
    }
    o[chans..].fill(0.0);
}
