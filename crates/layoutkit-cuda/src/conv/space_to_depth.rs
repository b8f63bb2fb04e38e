//! Strided convolutions of few channels as stride-1 convolutions over blocks of pixels
//! (space to depth). A convolution of stride `sh x sw` over `C` channels reads, for each
//! output pixel, `sh x sw` blocks of input pixels; regrouping the input so that each block of
//! `sh x sw` pixels becomes one pixel of `sh * sw * C` channels turns it into a stride-1
//! convolution with a smaller filter (ResNet's 7x7/2 stem over 3 channels becomes a 4x4
//! filter over 12 channels, padded to 16) whose pixels fill whole 16-byte copies, where the
//! original's 3-channel pixels (6 bytes) had to be loaded element by element.
//!
//! One pass ([`space_to_depth_source`]) writes the regrouped input and filter into scratch
//! memory, then the tensor-core kernel runs the regrouped problem
//! ([`space_to_depth_problem`]). The products and the output are the original convolution's
//! (every product of the original appears once; the added channels are zeros in both operands).
//!
//! Geometry, per axis with filter extent `k`, stride `s`, padding `p` and output extent `o`:
//! a filter tap `t` (0 <= t < k) reads input row `s * y + t - p`; writing `t - p = s * a + r`
//! (0 <= r < s) puts it at row `r` of block `y + a`. `a` runs from `a0 = floor(-p / s)` to
//! `floor((k - 1 - p) / s)`, so the regrouped filter has `k' = floor((k - 1 - p) / s) - a0 + 1`
//! taps and the regrouped input `o + k' - 1` blocks, block `b` holding input rows
//! `s * (b + a0) .. s * (b + a0) + s` (zeros outside the image): its convolution has no
//! padding and stride 1.

use std::fmt::Write;

use layoutkit_core::conv::Conv2d;
use layoutkit_core::DType;

use super::{ConvKernel, ConvLayout, ConvShape};

/// Threads per block of the regrouping pass.
pub const SPACE_TO_DEPTH_THREADS: u32 = 256;

/// One axis of the regrouping: the first block's offset `a0` (in blocks, <= 0), the
/// regrouped filter's taps and the regrouped input's blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Axis {
    stride: usize,
    first: isize,
    taps: usize,
    blocks: usize,
}

/// The regrouping of one axis (filter extent `k`, stride `s`, padding `p`, output extent
/// `out`), or None where a block would hold rows no tap reads (`k < s`).
fn axis(k: usize, s: usize, p: usize, out: usize) -> Option<Axis> {
    if k < s || s == 0 {
        return None;
    }
    let (k, s, p) = (k as isize, s as isize, p as isize);
    let first = (-p).div_euclid(s);
    let last = (k - 1 - p).div_euclid(s);
    let taps = (last - first + 1) as usize;
    Some(Axis {
        stride: s as usize,
        first,
        taps,
        blocks: out + taps - 1,
    })
}

/// Both axes of `k`'s regrouping (see the module).
fn axes(k: &ConvKernel) -> Option<(Axis, Axis)> {
    let s = &k.shape;
    let (st, pd) = (s.conv.stride, s.conv.padding);
    Some((
        axis(s.kh, st[0], pd[0], s.oh)?,
        axis(s.kw, st[1], pd[1], s.ow)?,
    ))
}

/// Channels of a regrouped pixel: `sh * sw * C` rounded up to whole 16-byte copies (and to
/// 16 elements for int8, which the Hopper kernel's int8 needs).
fn regrouped_channels(k: &ConvKernel) -> usize {
    let s = &k.shape;
    let per_copy = 16 / k.input.size_bytes();
    (s.conv.stride[0] * s.conv.stride[1] * s.c).next_multiple_of(per_copy)
}

/// The fewest multiply-adds for which [`space_to_depth_preferred`] regroups a problem: the
/// pass is one more launch (about 1.3 us of GPU time in a CUDA graph on an H200) and one
/// pass over the activations. Measured on an H200 (`bench/results/conv.md`, NHWC, the rule's
/// tiles, pass included): ResNet-50's 7x7/2 stem (118 M multiply-adds per image) 1.26x at
/// batch 1, 1.47-1.63x at batch 8-64; MobileNetV2's 3x3/2 over 3 channels (10.8 M per image)
/// 0.68x at batch 1, 1.04x at 8 (NCHW 0.96x), 1.16-1.18x at 32 and 64.
pub const SPACE_TO_DEPTH_MIN_MACS: usize = 100_000_000;

/// Whether `k` is regrouped on a Hopper GPU: [`space_to_depth_unsupported_reason`] is None
/// and the convolution has at least [`SPACE_TO_DEPTH_MIN_MACS`] multiply-adds, or no other
/// kernel takes it at all (int8 with C < 16, which the tensor-core kernels and the direct
/// kernel do not read, runs regrouped at any size).
pub fn space_to_depth_preferred(k: &ConvKernel) -> bool {
    let only_way = super::hopper_unsupported_reason(k).is_some()
        && super::unsupported_reason(k).is_some()
        && super::direct_unsupported_reason(k).is_some();
    space_to_depth_unsupported_reason(k).is_none()
        && (k.macs() >= SPACE_TO_DEPTH_MIN_MACS || only_way)
}

/// Why `k` is not regrouped, or None where it can be: a convolution without groups or
/// dilation, strided on at least one axis with the filter at least as long as the stride on
/// both, whose pixels' channels fill less than one 16-byte copy (C under 8 in f16/bf16, under
/// 16 in int8), reading NHWC or NCHW of f16, bf16 or int8.
pub fn space_to_depth_unsupported_reason(k: &ConvKernel) -> Option<String> {
    let s = &k.shape;
    if s.conv.groups != 1 || s.conv.dilation != [1, 1] {
        return Some("space to depth is for convolutions without groups or dilation".into());
    }
    if s.conv.stride == [1, 1] {
        return Some("space to depth is for strided convolutions".into());
    }
    if !matches!(k.input, DType::F16 | DType::BF16 | DType::I8) {
        return Some(format!(
            "space to depth regroups f16, bf16 or i8, not {}",
            k.input
        ));
    }
    if s.c * k.input.size_bytes() >= 16 {
        return Some(format!(
            "space to depth is for pixels of less than 16 bytes (C = {} of {})",
            s.c, k.input
        ));
    }
    if !matches!(k.layout, ConvLayout::Nhwc | ConvLayout::Nchw) {
        return Some("space to depth reads NHWC or NCHW".into());
    }
    if axes(k).is_none() {
        return Some(format!(
            "space to depth needs the filter ({} x {}) at least as long as the stride ({} x {})",
            s.kh, s.kw, s.conv.stride[0], s.conv.stride[1]
        ));
    }
    None
}

/// The stride-1 problem `k` becomes (see the module): NHWC activations of
/// `sh * sw * C` channels (rounded up to whole 16-byte copies, and to 16 for int8) on the
/// regrouped planes, the regrouped filter, no padding;
/// the output, its layout, type and epilogue are `k`'s. None where
/// [`space_to_depth_unsupported_reason`] gives a reason.
pub fn space_to_depth_problem(k: &ConvKernel) -> Option<ConvKernel> {
    if space_to_depth_unsupported_reason(k).is_some() {
        return None;
    }
    let (ay, ax) = axes(k)?;
    let s = &k.shape;
    Some(ConvKernel {
        shape: ConvShape {
            n: s.n,
            h: ay.blocks,
            w: ax.blocks,
            c: regrouped_channels(k),
            o: s.o,
            kh: ay.taps,
            kw: ax.taps,
            oh: s.oh,
            ow: s.ow,
            conv: Conv2d {
                stride: [1, 1],
                padding: [0, 0],
                dilation: [1, 1],
                groups: 1,
            },
        },
        layout: ConvLayout::Nhwc,
        ..*k
    })
}

/// Bytes of the regrouped activations and of the regrouped filter (the scratch memory the
/// pass writes), for a `k` [`space_to_depth_problem`] takes.
pub fn space_to_depth_bytes(k: &ConvKernel) -> Option<(usize, usize)> {
    let inner = space_to_depth_problem(k)?;
    let s = &inner.shape;
    let e = k.input.size_bytes();
    Some((s.n * s.h * s.w * s.c * e, s.o * s.kh * s.kw * s.c * e))
}

/// Whether a thread of the pass writes a whole regrouped pixel (up to 64 bytes: its loads
/// then have constant offsets from the block's first input pixel, in runs where the block
/// lies inside the image), rather than one 16-byte chunk of one.
fn whole_pixels(k: &ConvKernel) -> bool {
    regrouped_channels(k) * k.input.size_bytes() <= 64
}

/// The pass's threads: (16-byte chunks of the regrouped filter, then pixels of the regrouped
/// activations where [`whole_pixels`], else their 16-byte chunks).
fn work_items(k: &ConvKernel) -> (usize, usize) {
    let (x, w) = space_to_depth_bytes(k).unwrap_or((0, 0));
    let per_item = if whole_pixels(k) {
        regrouped_channels(k) * k.input.size_bytes()
    } else {
        16
    };
    (w / 16, x / per_item)
}

/// Grid and block of the pass for `k` (one thread per 16-byte chunk of the regrouped filter,
/// then per regrouped pixel of up to 64 bytes or per 16-byte chunk of larger ones).
pub fn space_to_depth_launch(k: &ConvKernel) -> ((u32, u32, u32), u32) {
    let (w, x) = work_items(k);
    let blocks = (w + x).div_ceil(SPACE_TO_DEPTH_THREADS as usize).max(1);
    ((blocks as u32, 1, 1), SPACE_TO_DEPTH_THREADS)
}

/// Where element `j` of a regrouped pixel (or of a regrouped filter tap) comes from: its
/// row and column within the block of pixels and its channel, or None for the zeros that
/// pad the channels. Contract: the order of [`space_to_depth_source`]'s channels (row in the
/// block, then column, then channel).
pub fn block_element(k: &ConvKernel, j: usize) -> Option<(usize, usize, usize)> {
    let s = &k.shape;
    let (sh, sw) = (s.conv.stride[0], s.conv.stride[1]);
    (j < sh * sw * s.c).then(|| (j / (sw * s.c), j / s.c % sw, j % s.c))
}

/// [`block_element`] as CUDA statements: `r`, `u` and `c` (row and column within the block,
/// channel) of element `j` of a regrouped pixel or filter tap (`j` under `sh * sw * C`).
fn block_element_source(k: &ConvKernel) -> String {
    let s = &k.shape;
    format!(
        "const int r = j / {}, u = j / {c} % {}, c = j % {c};",
        s.conv.stride[1] * s.c,
        s.conv.stride[1],
        c = s.c
    )
}

/// The input row (or column) of block `b`'s row `r` on an axis: `stride * (b + a0) + r`
/// (outside the image where negative or past the extent).
fn input_index(a: Axis, b: usize, r: usize) -> isize {
    a.stride as isize * (b as isize + a.first) + r as isize
}

/// The original filter tap of regrouped tap `t`'s row `r` on an axis with padding `p`:
/// `stride * (t + a0) + r + p` (no tap where outside `0..k`).
fn filter_index(a: Axis, t: usize, r: usize, p: usize) -> isize {
    input_index(a, t, r) + p as isize
}

/// The regrouped activations and filter computed on the host (the pass's reference):
/// `x` in `k.layout`, `w` in OHWI, elements of `k.input`'s size; returns the NHWC regrouped
/// activations and OHWI regrouped filter of [`space_to_depth_problem`]. None where it does
/// not take `k`.
pub fn space_to_depth_host(k: &ConvKernel, x: &[u8], w: &[u8]) -> Option<(Vec<u8>, Vec<u8>)> {
    let inner = space_to_depth_problem(k)?;
    let (ay, ax) = axes(k)?;
    let (s, t) = (&k.shape, &inner.shape);
    let e = k.input.size_bytes();
    let mut xs = vec![0u8; t.n * t.h * t.w * t.c * e];
    let mut ws = vec![0u8; t.o * t.kh * t.kw * t.c * e];
    let inside = |v: isize, n: usize| (v >= 0 && (v as usize) < n).then_some(v as usize);
    for (i, chunk) in xs.chunks_exact_mut(e).enumerate() {
        let (j, px) = (i % t.c, i / t.c);
        let (bx, by, n) = (px % t.w, px / t.w % t.h, px / (t.w * t.h));
        let Some((r, q, c)) = block_element(k, j) else {
            continue;
        };
        let (Some(iy), Some(ix)) = (
            inside(input_index(ay, by, r), s.h),
            inside(input_index(ax, bx, q), s.w),
        ) else {
            continue;
        };
        let at = match k.layout {
            ConvLayout::Nchw => ((n * s.c + c) * s.h + iy) * s.w + ix,
            _ => ((n * s.h + iy) * s.w + ix) * s.c + c,
        };
        chunk.copy_from_slice(&x[at * e..at * e + e]);
    }
    for (i, chunk) in ws.chunks_exact_mut(e).enumerate() {
        let (j, tap) = (i % t.c, i / t.c);
        let (tx, ty, o) = (tap % t.kw, tap / t.kw % t.kh, tap / (t.kw * t.kh));
        let Some((r, q, c)) = block_element(k, j) else {
            continue;
        };
        let pd = s.conv.padding;
        let (Some(ky), Some(kx)) = (
            inside(filter_index(ay, ty, r, pd[0]), s.kh),
            inside(filter_index(ax, tx, q, pd[1]), s.kw),
        ) else {
            continue;
        };
        let at = ((o * s.kh + ky) * s.kw + kx) * s.c + c;
        chunk.copy_from_slice(&w[at * e..at * e + e]);
    }
    Some((xs, ws))
}

/// The CUDA type of a load of `bytes` bytes (a power of two up to 16).
fn word_type(bytes: usize) -> &'static str {
    match bytes {
        16 => "uint4",
        8 => "uint2",
        4 => "unsigned",
        2 => "unsigned short",
        _ => "unsigned char",
    }
}

/// The largest power of two up to 16 that divides every one of `values`.
fn common_alignment(values: &[usize]) -> usize {
    let mut a = 16;
    while values.iter().any(|v| v % a != 0) {
        a /= 2;
    }
    a
}

/// CUDA source of `conv_space_to_depth(x, w, xs, ws)` for `k`: reads the activations `x` (in
/// `k.layout`) and the OHWI filter `w`, writes the regrouped activations `xs` (NHWC) and
/// filter `ws` (OHWI) of [`space_to_depth_problem`], the bytes of [`space_to_depth_bytes`],
/// each element where [`space_to_depth_host`] puts it: one thread per 16-byte chunk of the
/// filter, then per regrouped pixel of up to 64 bytes (runs of the input loaded in words as
/// wide as their alignment where the block lies inside the image, element by element at its
/// edges) or per 16-byte chunk of one. Contract: [`space_to_depth_problem`] takes `k`, and
/// `x`, `w`, `xs` and `ws` start on 16-byte boundaries.
pub fn space_to_depth_source(k: &ConvKernel) -> String {
    let inner = space_to_depth_problem(k).expect("space_to_depth_source: a problem it takes");
    let (ay, ax) = axes(k).expect("axes of a problem it takes");
    let (s, t) = (&k.shape, &inner.shape);
    let e = k.input.size_bytes();
    let per = 16 / e;
    let elem = word_type(e);
    let (wc, xc) = work_items(k);
    let (sh, sw) = (s.conv.stride[0], s.conv.stride[1]);
    let mut src = String::from("// Generated by layoutkit-cuda (space to depth).\n");
    let _ = writeln!(
        src,
        "extern \"C\" __global__ void __launch_bounds__({SPACE_TO_DEPTH_THREADS}) \
         conv_space_to_depth(const {elem}* __restrict__ x, const {elem}* __restrict__ w, \
         {elem}* __restrict__ xs, {elem}* __restrict__ ws) {{\n\
         \x20 long long i = (long long)blockIdx.x * {SPACE_TO_DEPTH_THREADS} + threadIdx.x;\n\
         \x20 if (i < {wc}ll) {{\n\
         \x20   union {{ uint4 v; {elem} e[{per}]; }} out;\n\
         \x20   const long long first = i * {per};\n\
         \x20   const int j0 = (int)(first % {tc}); const long long tap = first / {tc};\n\
         \x20   const int tx = (int)(tap % {kw2}), ty = (int)(tap / {kw2} % {kh2});\n\
         \x20   const long long o = tap / {kk2};\n\
         \x20   #pragma unroll\n\
         \x20   for (int q = 0; q < {per}; ++q) {{\n\
         \x20     const int j = j0 + q;\n\
         \x20     {element}\n\
         \x20     const int ky = {sh} * (ty + ({ay0})) + r + {ph}, kx = {sw} * (tx + ({ax0})) + u + {pw};\n\
         \x20     const bool ok = j < {real} && ky >= 0 && ky < {kh} && kx >= 0 && kx < {kw};\n\
         \x20     out.e[q] = ok ? w[((o * {kh} + ky) * {kw} + kx) * {c} + c] : ({elem})0;\n\
         \x20   }}\n\
         \x20   *(uint4*)(ws + first) = out.v;\n\
         \x20   return;\n\
         \x20 }}\n\
         \x20 i -= {wc}ll;\n\
         \x20 if (i >= {xc}ll) return;",
        tc = t.c,
        kw2 = t.kw,
        kh2 = t.kh,
        kk2 = t.kh * t.kw,
        element = block_element_source(k),
        c = s.c,
        real = sh * sw * s.c,
        ay0 = ay.first,
        ax0 = ax.first,
        ph = s.conv.padding[0],
        pw = s.conv.padding[1],
        kh = s.kh,
        kw = s.kw,
    );
    if whole_pixels(k) {
        src.push_str(&pixel_body(k, (ay, ax), t.c));
    } else {
        src.push_str(&chunk_body(k, (ay, ax), t));
    }
    src.push_str("}\n");
    src
}

/// The offset of input element (`iy`, `ix`, `c`) of image `n` in `k.layout` (C expressions).
fn x_offset(k: &ConvKernel, iy: &str, ix: &str, c: &str) -> String {
    let s = &k.shape;
    match k.layout {
        ConvLayout::Nchw => format!("((n * {} + {c}) * {} + {iy}) * {} + {ix}", s.c, s.h, s.w),
        _ => format!("((n * {} + {iy}) * {} + {ix}) * {} + {c}", s.h, s.w, s.c),
    }
}

/// The activations' part of the pass with one thread per regrouped pixel of `tc` channels.
fn pixel_body(k: &ConvKernel, (ay, ax): (Axis, Axis), tc: usize) -> String {
    let s = &k.shape;
    let e = k.input.size_bytes();
    let (sh, sw) = (s.conv.stride[0], s.conv.stride[1]);
    let vectors = tc * e / 16;
    let elem = word_type(e);
    let mut b = format!(
        "  const int bx = (int)(i % {tw}), by = (int)(i / {tw} % {th});\n\
         \x20 const long long n = i / {thw};\n\
         \x20 const int iy0 = {sh} * (by + ({ay0})), ix0 = {sw} * (bx + ({ax0}));\n\
         \x20 union {{ uint4 v[{vectors}]; uint2 d[{d}]; unsigned u[{u}]; unsigned short h[{hh}]; unsigned char b[{bytes}]; {elem} e[{tc}]; }} px;\n\
         \x20 #pragma unroll\n\
         \x20 for (int g = 0; g < {vectors}; ++g) px.v[g] = make_uint4(0u, 0u, 0u, 0u);\n\
         \x20 if (iy0 >= 0 && iy0 + {sh} <= {h} && ix0 >= 0 && ix0 + {sw} <= {w}) {{\n",
        tw = ax.blocks,
        th = ay.blocks,
        thw = ay.blocks * ax.blocks,
        ay0 = ay.first,
        ax0 = ax.first,
        bytes = tc * e,
        d = tc * e / 8,
        u = tc * e / 4,
        hh = tc * e / 2,
        h = s.h,
        w = s.w,
    );
    match k.layout {
        ConvLayout::Nchw => {
            // Per block row and channel: a run of `sw` pixels of one plane.
            let v = common_alignment(&[sw * e, s.w * e]);
            let vt = word_type(v);
            for r in 0..sh {
                for c in 0..s.c {
                    let at = x_offset(k, &format!("iy0 + {r}"), "ix0", &c.to_string());
                    let _ = writeln!(
                        b,
                        "    {{\n      const unsigned char* src = (const unsigned char*)(x + {at});\n      union {{ {vt} w[{words}]; {elem} e[{sw}]; }} t;",
                        words = sw * e / v
                    );
                    for q in 0..sw * e / v {
                        let _ = writeln!(b, "      t.w[{q}] = *(const {vt}*)(src + {});", q * v);
                    }
                    for u in 0..sw {
                        let _ = writeln!(b, "      px.e[{}] = t.e[{u}];", (r * sw + u) * s.c + c);
                    }
                    b.push_str("    }\n");
                }
            }
        }
        _ => {
            // Per block row: a run of `sw` pixels' channels, contiguous in the input and in
            // the regrouped pixel.
            let run = sw * s.c * e;
            let v = common_alignment(&[run, s.w * s.c * e]);
            let vt = word_type(v);
            // The member of `px` of words of `v` bytes.
            let member = match v {
                16 => "v",
                8 => "d",
                4 => "u",
                2 => "h",
                _ => "b",
            };
            for r in 0..sh {
                let at = x_offset(k, &format!("iy0 + {r}"), "ix0", "0");
                let _ = writeln!(
                    b,
                    "    {{\n      const unsigned char* src = (const unsigned char*)(x + {at});"
                );
                for q in 0..run / v {
                    let _ = writeln!(
                        b,
                        "      px.{member}[{}] = *(const {vt}*)(src + {});",
                        (r * run + q * v) / v,
                        q * v
                    );
                }
                b.push_str("    }\n");
            }
        }
    }
    b.push_str("  } else {\n");
    for r in 0..sh {
        for u in 0..sw {
            let _ = writeln!(
                b,
                "    if (iy0 + {r} >= 0 && iy0 + {r} < {h} && ix0 + {u} >= 0 && ix0 + {u} < {w}) {{",
                h = s.h,
                w = s.w
            );
            for c in 0..s.c {
                let at = x_offset(
                    k,
                    &format!("iy0 + {r}"),
                    &format!("ix0 + {u}"),
                    &c.to_string(),
                );
                let _ = writeln!(b, "      px.e[{}] = x[{at}];", (r * sw + u) * s.c + c);
            }
            b.push_str("    }\n");
        }
    }
    b.push_str("  }\n");
    for g in 0..vectors {
        let _ = writeln!(
            b,
            "  *(uint4*)(xs + i * {tc} + {}) = px.v[{g}];",
            g * 16 / e
        );
    }
    b
}

/// The activations' part of the pass with one thread per 16-byte chunk of a regrouped pixel.
fn chunk_body(k: &ConvKernel, (ay, ax): (Axis, Axis), t: &ConvShape) -> String {
    let s = &k.shape;
    let e = k.input.size_bytes();
    let per = 16 / e;
    let elem = word_type(e);
    let (sh, sw) = (s.conv.stride[0], s.conv.stride[1]);
    let at = x_offset(k, "iy", "ix", "c");
    format!(
        "  union {{ uint4 v; {elem} e[{per}]; }} out;\n\
         \x20 const long long first = i * {per};\n\
         \x20 const int j0 = (int)(first % {tc}); const long long px = first / {tc};\n\
         \x20 const int bx = (int)(px % {tw}), by = (int)(px / {tw} % {th});\n\
         \x20 const long long n = px / {thw};\n\
         \x20 #pragma unroll\n\
         \x20 for (int q = 0; q < {per}; ++q) {{\n\
         \x20   const int j = j0 + q;\n\
         \x20   {element}\n\
         \x20   const int iy = {sh} * (by + ({ay0})) + r, ix = {sw} * (bx + ({ax0})) + u;\n\
         \x20   const bool ok = j < {real} && iy >= 0 && iy < {h} && ix >= 0 && ix < {w};\n\
         \x20   out.e[q] = ok ? x[{at}] : ({elem})0;\n\
         \x20 }}\n\
         \x20 *(uint4*)(xs + first) = out.v;\n",
        tc = t.c,
        tw = t.w,
        th = t.h,
        thw = t.h * t.w,
        element = block_element_source(k),
        real = sh * sw * s.c,
        ay0 = ay.first,
        ax0 = ax.first,
        h = s.h,
        w = s.w,
    )
}

#[cfg(test)]
#[path = "space_to_depth_tests.rs"]
mod tests;
