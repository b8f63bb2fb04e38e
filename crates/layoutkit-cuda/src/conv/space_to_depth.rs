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

/// Why `k` is not regrouped, or None where it is: a convolution without groups or dilation,
/// strided on at least one axis with the filter at least as long as the stride on both, whose
/// pixels' channels fill less than one 16-byte copy (C under 8 in f16/bf16, under 16 in int8),
/// reading NHWC or NCHW of f16, bf16 or int8. Measured on an H200 (`bench/results/conv.md`):
/// ResNet-50's 7x7/2 stem's regrouped 4x4 filter over 16 channels runs in 0.55x the time of
/// the stem in the same kernel at batch 64 (0.54x at batch 1), MobileNetV2's 3x3/2 over 3
/// channels as 2x2 over 16 in 0.60x (batch 64).
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
/// [`regrouped_channels`] channels on the regrouped planes, the regrouped filter, no padding;
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

/// 16-byte chunks the pass writes: (filter, activations).
fn chunks(k: &ConvKernel) -> (usize, usize) {
    let (x, w) = space_to_depth_bytes(k).unwrap_or((0, 0));
    (w / 16, x / 16)
}

/// Grid and block of the pass for `k` (one thread per 16-byte chunk of the regrouped filter,
/// then of the regrouped activations).
pub fn space_to_depth_launch(k: &ConvKernel) -> ((u32, u32, u32), u32) {
    let (w, x) = chunks(k);
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

/// CUDA source of `conv_space_to_depth(x, w, xs, ws)` for `k`: reads the activations `x` (in
/// `k.layout`) and the OHWI filter `w`, writes the regrouped activations `xs` (NHWC) and
/// filter `ws` (OHWI) of [`space_to_depth_problem`], the bytes of [`space_to_depth_bytes`],
/// 16 bytes per thread (the filter's chunks first), each element where
/// [`space_to_depth_host`] puts it. Contract: [`space_to_depth_problem`] takes `k`.
pub fn space_to_depth_source(k: &ConvKernel) -> String {
    let inner = space_to_depth_problem(k).expect("space_to_depth_source: a problem it takes");
    let (ay, ax) = axes(k).expect("axes of a problem it takes");
    let (s, t) = (&k.shape, &inner.shape);
    let e = k.input.size_bytes();
    let per = 16 / e;
    let elem = if e == 2 {
        "unsigned short"
    } else {
        "unsigned char"
    };
    let (wc, xc) = chunks(k);
    let (sh, sw) = (s.conv.stride[0], s.conv.stride[1]);
    let real = sh * sw * s.c;
    let x_at = match k.layout {
        ConvLayout::Nchw => format!(
            "((n * {c} + c) * {h} + iy) * {w} + ix",
            c = s.c,
            h = s.h,
            w = s.w
        ),
        _ => format!(
            "((n * {h} + iy) * {w} + ix) * {c} + c",
            c = s.c,
            h = s.h,
            w = s.w
        ),
    };
    let mut src = String::from("// Generated by layoutkit-cuda (space to depth).\n");
    let _ = writeln!(
        src,
        "extern \"C\" __global__ void __launch_bounds__({SPACE_TO_DEPTH_THREADS}) \
         conv_space_to_depth(const {elem}* __restrict__ x, const {elem}* __restrict__ w, \
         {elem}* __restrict__ xs, {elem}* __restrict__ ws) {{\n\
         \x20 long long i = (long long)blockIdx.x * {SPACE_TO_DEPTH_THREADS} + threadIdx.x;\n\
         \x20 union {{ uint4 v; {elem} e[{per}]; }} out;\n\
         \x20 if (i < {wc}ll) {{\n\
         \x20   const long long first = i * {per};\n\
         \x20   const int j0 = (int)(first % {tc}); const long long tap = first / {tc};\n\
         \x20   const int tx = (int)(tap % {kw2}), ty = (int)(tap / {kw2} % {kh2});\n\
         \x20   const long long o = tap / {kk2};\n\
         \x20   #pragma unroll\n\
         \x20   for (int q = 0; q < {per}; ++q) {{\n\
         \x20     const int j = j0 + q;\n\
         \x20     const int r = j / {rsc}, u = j / {c} % {sw}, c = j % {c};\n\
         \x20     const int ky = {sh} * (ty + ({ay0})) + r + {ph}, kx = {sw} * (tx + ({ax0})) + u + {pw};\n\
         \x20     const bool ok = j < {real} && ky >= 0 && ky < {kh} && kx >= 0 && kx < {kw};\n\
         \x20     out.e[q] = ok ? w[((o * {kh} + ky) * {kw} + kx) * {c} + c] : ({elem})0;\n\
         \x20   }}\n\
         \x20   *(uint4*)(ws + first) = out.v;\n\
         \x20   return;\n\
         \x20 }}\n\
         \x20 i -= {wc}ll;\n\
         \x20 if (i >= {xc}ll) return;\n\
         \x20 const long long first = i * {per};\n\
         \x20 const int j0 = (int)(first % {tc}); const long long px = first / {tc};\n\
         \x20 const int bx = (int)(px % {tw}), by = (int)(px / {tw} % {th});\n\
         \x20 const long long n = px / {thw};\n\
         \x20 #pragma unroll\n\
         \x20 for (int q = 0; q < {per}; ++q) {{\n\
         \x20   const int j = j0 + q;\n\
         \x20   const int r = j / {rsc}, u = j / {c} % {sw}, c = j % {c};\n\
         \x20   const int iy = {sh} * (by + ({ay0})) + r, ix = {sw} * (bx + ({ax0})) + u;\n\
         \x20   const bool ok = j < {real} && iy >= 0 && iy < {h} && ix >= 0 && ix < {w};\n\
         \x20   out.e[q] = ok ? x[{x_at}] : ({elem})0;\n\
         \x20 }}\n\
         \x20 *(uint4*)(xs + first) = out.v;\n\
         }}",
        tc = t.c,
        kw2 = t.kw,
        kh2 = t.kh,
        kk2 = t.kh * t.kw,
        rsc = sw * s.c,
        c = s.c,
        ay0 = ay.first,
        ax0 = ax.first,
        ph = s.conv.padding[0],
        pw = s.conv.padding[1],
        kh = s.kh,
        kw = s.kw,
        tw = t.w,
        th = t.h,
        thw = t.h * t.w,
        h = s.h,
        w = s.w,
    );
    src
}

#[cfg(test)]
mod tests {
    use super::*;
    use layoutkit_core::parse_format;
    use layoutkit_core::Dims;
    use layoutkit_cpu::{conv2d_reference, Epilogue, TensorRef};
    use proptest::prelude::*;

    fn kernel(
        c: usize,
        hw: (usize, usize),
        k: (usize, usize),
        stride: [usize; 2],
        pad: [usize; 2],
    ) -> ConvKernel {
        let out = |x: usize, k: usize, s: usize, p: usize| (x + 2 * p - k) / s + 1;
        ConvKernel {
            shape: ConvShape {
                n: 2,
                h: hw.0,
                w: hw.1,
                c,
                o: 5,
                kh: k.0,
                kw: k.1,
                oh: out(hw.0, k.0, stride[0], pad[0]),
                ow: out(hw.1, k.1, stride[1], pad[1]),
                conv: Conv2d {
                    stride,
                    padding: pad,
                    dilation: [1, 1],
                    groups: 1,
                },
            },
            layout: ConvLayout::Nhwc,
            out_layout: ConvLayout::Nhwc,
            input: DType::I8,
            out: DType::I32,
            bias: false,
            relu: false,
        }
    }

    #[test]
    fn the_stem_becomes_a_4x4_filter_over_16_channels_without_padding() {
        let mut stem = kernel(3, (224, 224), (7, 7), [2, 2], [3, 3]);
        stem.input = DType::F16;
        stem.out = DType::F16;
        let inner = space_to_depth_problem(&stem).unwrap();
        let t = inner.shape;
        assert_eq!((t.h, t.w, t.c, t.kh, t.kw), (115, 115, 16, 4, 4));
        assert_eq!(
            (t.oh, t.ow, t.conv.padding, t.conv.stride),
            (112, 112, [0, 0], [1, 1])
        );
        // MobileNetV2's first layer: 3x3/2 over 3 channels, padding 1 -> 2x2 over 16.
        let mut mb = kernel(3, (224, 224), (3, 3), [2, 2], [1, 1]);
        mb.input = DType::BF16;
        mb.out = DType::BF16;
        let t = space_to_depth_problem(&mb).unwrap().shape;
        assert_eq!((t.h, t.c, t.kh), (113, 16, 2));
        // A 16x16/16 patch embedding over RGB: one tap of 768 channels.
        let mut vit = kernel(3, (224, 224), (16, 16), [16, 16], [0, 0]);
        vit.input = DType::F16;
        let t = space_to_depth_problem(&vit).unwrap().shape;
        assert_eq!((t.h, t.c, t.kh, t.oh), (14, 768, 1, 14));
        // int8 pads a block's channels to 16.
        let t = space_to_depth_problem(&kernel(3, (9, 9), (3, 3), [2, 2], [1, 1])).unwrap();
        assert_eq!(t.shape.c, 16);
        let mut nchw = stem;
        nchw.layout = ConvLayout::Nchw;
        nchw.out_layout = ConvLayout::Nchw;
        let t = space_to_depth_problem(&nchw).unwrap();
        assert_eq!(
            (t.layout, t.out_layout),
            (ConvLayout::Nhwc, ConvLayout::Nchw)
        );
        let src = space_to_depth_source(&nchw);
        assert!(
            src.contains("x[((n * 3 + c) * 224 + iy) * 224 + ix]"),
            "{src}"
        );
    }

    #[test]
    fn problems_it_leaves_name_why() {
        let base = kernel(3, (16, 16), (3, 3), [2, 2], [1, 1]);
        let why = |f: &dyn Fn(&mut ConvKernel)| {
            let mut k = base;
            f(&mut k);
            space_to_depth_unsupported_reason(&k).unwrap()
        };
        assert!(why(&|k| k.shape.conv.stride = [1, 1]).contains("strided"));
        assert!(why(&|k| k.shape.c = 16).contains("16 bytes"));
        assert!(why(&|k| k.shape.conv.groups = 3).contains("groups"));
        assert!(why(&|k| k.shape.conv.dilation = [2, 2]).contains("dilation"));
        assert!(why(&|k| k.shape.kh = 1).contains("at least as long"));
        assert!(why(&|k| k.layout = ConvLayout::Nc32hw32).contains("NHWC or NCHW"));
        assert!(why(&|k| k.input = DType::F32).contains("f16, bf16 or i8"));
        let mut f16 = base;
        f16.input = DType::F16;
        f16.shape.c = 8;
        assert!(space_to_depth_unsupported_reason(&f16).is_some());
        f16.shape.c = 7;
        assert!(space_to_depth_unsupported_reason(&f16).is_none());
    }

    /// The reference convolution of `k` (int8, i32 output) on `x` in `layout` and OHWI `w`.
    fn reference(k: &ConvKernel, x: &[u8], w: &[u8]) -> Vec<u8> {
        let s = &k.shape;
        let dims = |t: &str| Dims::parse(t).unwrap();
        let xd = dims(&format!("N={},C={},H={},W={}", s.n, s.c, s.h, s.w));
        let wd = dims(&format!("O={},I={},H={},W={}", s.o, s.c, s.kh, s.kw));
        let yd = s.conv.output_dims(&xd, &wd).unwrap();
        let shaped = |f: &str, d: &Dims| parse_format(f).unwrap().shaped(d).unwrap();
        let t = |layout, data| TensorRef {
            layout,
            dtype: DType::I8,
            data,
        };
        let ep = Epilogue {
            bias: None,
            relu: false,
            scale: None,
        };
        conv2d_reference(
            &s.conv,
            t(&shaped(k.layout.format(), &xd), x),
            t(&shaped("OHWI", &wd), w),
            &ep,
            &shaped("NHWC", &yd),
            DType::I32,
        )
        .unwrap()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(96))]
        /// The regrouped problem on the regrouped tensors gives the original convolution's
        /// exact int8 sums: strides 2-4 on either axis, filters as long as the stride up to
        /// 7, any padding under the filter, 1-15 channels, NHWC and NCHW.
        #[test]
        fn the_regrouped_convolution_equals_the_original(
            c in 1usize..16, sh in 1usize..5, sw in 1usize..5, kh in 1usize..8, kw in 1usize..8,
            ph in 0usize..7, pw in 0usize..7, h in 4usize..14, w in 4usize..14, nchw: bool,
            seed: u64,
        ) {
            prop_assume!((sh, sw) != (1, 1) && kh >= sh && kw >= sw && ph < kh && pw < kw);
            prop_assume!(h + 2 * ph >= kh && w + 2 * pw >= kw);
            let mut k = kernel(c, (h, w), (kh, kw), [sh, sw], [ph, pw]);
            if nchw {
                k.layout = ConvLayout::Nchw;
            }
            let s = k.shape;
            let noise = |n: usize, salt: u64| -> Vec<u8> {
                (0..n as u64)
                    .map(|i| ((i ^ seed ^ salt).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as u8)
                    .collect()
            };
            let x = noise(s.n * s.c * s.h * s.w, 1);
            let wt = noise(s.o * s.kh * s.kw * s.c, 2);
            let inner = space_to_depth_problem(&k).unwrap();
            let (xs, ws) = space_to_depth_host(&k, &x, &wt).unwrap();
            prop_assert_eq!((xs.len(), ws.len()), space_to_depth_bytes(&k).unwrap());
            prop_assert_eq!(reference(&inner, &xs, &ws), reference(&k, &x, &wt));
        }
    }
}
