//! The depthwise kernel's inner loops ([`super`]): one output row of channel vectors, its
//! interior's groups of pixels and its edge pixels.

use super::{Geometry, Rows, HALF, LANES};

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
/// their features. Inside the interior, [`PIXELS`] output pixels at a time (twice as many for
/// a block of one half vector); elsewhere one, its taps inside the image listed first.
#[inline(always)]
pub(super) fn row<const FMA: bool>(r: &Rows<'_>, n: usize, cb: usize, oh: usize, out: &mut [f32]) {
    let g = r.g;
    let c0 = cb * r.block;
    let chans = r.block.min(g.c - c0);
    let base = n * r.sn + cb * r.plane;
    let (lo, hi) = interior(g);
    // The filter rows inside the image: (offset of the input row, filter row).
    let rows: Vec<(usize, usize)> = (0..g.kh)
        .filter_map(|rr| g.in_row(oh, rr).map(|ih| (base + ih * r.sh, rr)))
        .collect();
    let mut offs: Vec<(usize, usize)> = Vec::with_capacity(g.kh * g.kw);
    // A block of one half vector (`NCHW8c`) takes twice the pixels, for as many independent
    // sums per tap.
    if (HALF..LANES).contains(&chans) {
        let mut ow = 0;
        while ow < g.ow {
            let p = if ow + 2 * PIXELS <= hi {
                2 * PIXELS
            } else {
                PIXELS
            };
            if ow >= lo && ow + p <= hi {
                if p == PIXELS {
                    interior_vectors::<FMA, PIXELS, 1, HALF>(r, &rows, ow, c0, 0, out);
                } else {
                    interior_vectors::<FMA, { 2 * PIXELS }, 1, HALF>(r, &rows, ow, c0, 0, out);
                }
                if HALF < r.block {
                    for q in 0..p {
                        one_pixel::<FMA>(r, &rows, &mut offs, ow + q, c0, HALF, chans, out);
                    }
                }
                ow += p;
            } else {
                one_pixel::<FMA>(r, &rows, &mut offs, ow, c0, 0, chans, out);
                ow += 1;
            }
        }
        return;
    }
    let mut ow = 0;
    while ow < g.ow {
        if ow >= lo && ow + PIXELS <= hi && chans >= HALF {
            // PIXELS interior pixels: every tap along W inside; whole vectors of channels,
            // two at a time (eight independent sums per tap), then the last one, then a half
            // vector (blocks of 8 channels, C = 8 mod 16).
            let mut v = 0;
            while v + 2 * LANES <= chans {
                interior_vectors::<FMA, PIXELS, 2, LANES>(r, &rows, ow, c0, v, out);
                v += 2 * LANES;
            }
            if v + LANES <= chans {
                interior_vectors::<FMA, PIXELS, 1, LANES>(r, &rows, ow, c0, v, out);
                v += LANES;
            }
            if v + HALF <= chans {
                interior_vectors::<FMA, PIXELS, 1, HALF>(r, &rows, ow, c0, v, out);
                v += HALF;
            }
            // The channels past the last whole vector (and a partial block's zero lanes),
            // where there are any: the pixel's tap list is not rebuilt for nothing.
            if v < r.block {
                for p in 0..PIXELS {
                    one_pixel::<FMA>(r, &rows, &mut offs, ow + p, c0, v, chans, out);
                }
            }
            ow += PIXELS;
        } else {
            one_pixel::<FMA>(r, &rows, &mut offs, ow, c0, 0, chans, out);
            ow += 1;
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
            o[l] = if r.relu { a[l].max(0.0) } else { a[l] };
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
            o[l] = if r.relu { a[l].max(0.0) } else { a[l] };
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
        *oe = if r.relu { acc.max(0.0) } else { acc };
    }
    o[chans..].fill(0.0);
}
