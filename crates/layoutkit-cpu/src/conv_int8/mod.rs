//! Int8 convolution with exact i32 sums: i8 activations and i8 filters (any layouts), the
//! products summed in i32 by tiles of 6 output pixels by 16 output channels ([`kernel`]).
//! The filter is packed once per call into `[group][16-channel block][tap][c/4][16 o][4 c]`
//! i8 blocks (the operand order of `vpdpbusd`), the activation copied once into a zero-padded
//! `N, H, W, C` i8 buffer whose group channels are padded to a multiple of four.
//!
//! Builds, chosen at run time: AVX-512 VNNI, AVX2, portable ([`ConvKernels`]: `Avx512` means
//! the VNNI tile and falls back to the AVX2 tile on CPUs without VNNI; `Auto` reads
//! `LAYOUTKIT_CPU_KERNELS` as the f32 engine does).
//!
//! The bias and ReLU are applied after the sums, in f64 exactly as the reference does, and
//! the result rounded once into the output type, so every output equals
//! [`crate::conv2d_reference`]'s bit for bit (the reference's f64 sum of i8 products is exact).

mod kernel;

use layoutkit_core::conv::Conv2d;
use layoutkit_core::{parse_format, CastSpec, DType, ShapedLayout};
use rayon::prelude::*;

use crate::conv_reference::check_problem;
use crate::{convert, ConvKernels, Epilogue, Error, TensorRef};
use kernel::{Tile, OT, PT};

/// Whether [`conv2d_int8`] takes these operands: i8 activations and i8 filters with four axes.
pub fn conv2d_int8_supports(x: &TensorRef<'_>, w: &TensorRef<'_>) -> bool {
    x.dtype == DType::I8
        && w.dtype == DType::I8
        && x.layout.axes().len() == 4
        && w.layout.axes().len() == 4
}

/// Which tile runs for `kernels` on this CPU (the x86 builds exist on x86-64 only).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
enum Build {
    Vnni,
    Avx2,
    Portable,
}

fn build(kernels: ConvKernels) -> Result<Build, Error> {
    let k = kernels.resolve()?;
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as f;
        let vnni = f!("avx512vnni") && f!("avx512vl") && f!("avx2");
        match k {
            ConvKernels::Avx512 if vnni => return Ok(Build::Vnni),
            ConvKernels::Avx512 | ConvKernels::Avx2 => return Ok(Build::Avx2),
            _ => {}
        }
    }
    let _ = k;
    Ok(Build::Portable)
}

/// The name of the tile `kernels` runs on this CPU (`"avx512-vnni"`, `"avx2"` or
/// `"portable"`), for reports.
pub fn conv2d_int8_build(kernels: ConvKernels) -> Result<&'static str, Error> {
    Ok(match build(kernels)? {
        Build::Vnni => "avx512-vnni",
        Build::Avx2 => "avx2",
        Build::Portable => "portable",
    })
}

fn run_tile(b: Build, t: &Tile<'_>, acc: &mut [[i32; OT]; PT]) {
    match b {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `build` checked AVX2, AVX-512 VNNI and AVX-512VL; the driver keeps offsets in range.
        Build::Vnni => unsafe { kernel::tile_vnni(t, acc) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `build` checked AVX2.
        Build::Avx2 => unsafe { kernel::tile_avx2(t, acc) },
        _ => kernel::tile_generic(t, acc),
    }
}

/// The exact i32 sums of the convolution, plain `N, O, OH, OW`, computed with `kernels` on
/// `threads` threads. Pre: the problem passed [`check_problem`] and both operands are i8.
fn sums(
    conv: &Conv2d,
    x: TensorRef<'_>,
    w: TensorRef<'_>,
    out: [usize; 4],
    threads: usize,
    kernels: ConvKernels,
) -> Result<Vec<i32>, Error> {
    let b = build(kernels)?;
    let [n, o, oh, ow] = out;
    let id = CastSpec::identity(DType::I8);
    let nchw = parse_format("NHWC")?.shaped(&x.layout.dims())?;
    let oihw = parse_format("OIHW")?.shaped(&w.layout.dims())?;
    let [_, h, wi, c] = [0, 1, 2, 3].map(|i| nchw.extents()[i]);
    let [_, cg, kh, kw] = [0, 1, 2, 3].map(|i| oihw.extents()[i]);
    let xs = convert(x.layout, x.data, &nchw, &id)?;
    let ws = convert(w.layout, w.data, &oihw, &id)?;
    let g_n = conv.groups;
    let og = o / g_n;
    let cg4 = cg.div_ceil(4) * 4;
    let c4 = cg4 / 4;
    let taps = kh * kw;
    let obs = og.div_ceil(OT);

    // Filter panels and the VNNI compensation 128 * sum(w) per output channel.
    let block = taps * c4 * OT * 4;
    let mut panels = vec![0i8; g_n * obs * block];
    let mut comp = vec![[0i32; OT]; g_n * obs];
    for g in 0..g_n {
        for ol in 0..og {
            let (ob, oo) = (ol / OT, ol % OT);
            let base = (g * obs + ob) * block;
            for cl in 0..cg {
                for t in 0..taps {
                    let v = ws[((g * og + ol) * cg + cl) * taps + t] as i8;
                    panels[base + ((t * c4 + cl / 4) * OT + oo) * 4 + cl % 4] = v;
                    comp[g * obs + ob][oo] += 128 * v as i32;
                }
            }
        }
    }

    // Zero-padded input: [n][hp][wp][g][cg4].
    let [ph, pw] = conv.padding;
    let (hp, wp) = (h + 2 * ph, wi + 2 * pw);
    let ps = g_n * cg4;
    let mut xp = vec![0i8; n * hp * wp * ps];
    for ni in 0..n {
        for hi in 0..h {
            for wj in 0..wi {
                let src = ((ni * h + hi) * wi + wj) * c;
                let dst = ((ni * hp + hi + ph) * wp + wj + pw) * ps;
                for g in 0..g_n {
                    for cl in 0..cg {
                        xp[dst + g * cg4 + cl] = xs[src + g * cg + cl] as i8;
                    }
                }
            }
        }
    }
    let tap_off: Vec<usize> = (0..taps)
        .map(|t| ((t / kw) * conv.dilation[0] * wp + (t % kw) * conv.dilation[1]) * ps)
        .collect();

    // Rows of [ow][OT] per (n, g, ob, oh).
    let mut rows = vec![0i32; n * g_n * obs * oh * ow * OT];
    let work = |(item, row): (usize, &mut [i32])| {
        let yh = item % oh;
        let gb = (item / oh) % (g_n * obs);
        let ni = item / (oh * g_n * obs);
        let g = gb / obs;
        let mut acc = [[0i32; OT]; PT];
        let mut x0 = 0;
        while x0 < ow {
            let pixels = PT.min(ow - x0);
            let mut xo = [0usize; PT];
            for (p, xv) in xo.iter_mut().enumerate().take(pixels) {
                let (ih, iw) = (yh * conv.stride[0], (x0 + p) * conv.stride[1]);
                *xv = ((ni * hp + ih) * wp + iw) * ps + g * cg4;
            }
            let t = Tile {
                x: xo,
                pixels,
                input: &xp,
                tap_off: &tap_off,
                c4,
                w: &panels[gb * block..][..block],
                comp: &comp[gb],
            };
            run_tile(b, &t, &mut acc);
            for p in 0..pixels {
                row[(x0 + p) * OT..][..OT].copy_from_slice(&acc[p]);
            }
            x0 += pixels;
        }
    };
    let chunk = (ow * OT).max(1);
    if threads <= 1 || rows.is_empty() {
        rows.chunks_mut(chunk).enumerate().for_each(work);
    } else {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .map_err(|e| Error::Unsupported(format!("a pool of {threads} threads: {e}")))?
            .install(|| rows.par_chunks_mut(chunk).enumerate().for_each(work));
    }

    let mut plain = vec![0i32; n * o * oh * ow];
    for ni in 0..n {
        for oi in 0..o {
            let (g, ol) = (oi / og, oi % og);
            let gb = g * obs + ol / OT;
            for yh in 0..oh {
                let r = ((ni * g_n * obs + gb) * oh + yh) * ow * OT;
                let d = ((ni * o + oi) * oh + yh) * ow;
                for yw in 0..ow {
                    plain[d + yw] = rows[r + yw * OT + ol % OT];
                }
            }
        }
    }
    Ok(plain)
}

/// The convolution of [`crate::conv2d_reference`] for i8 activations and i8 filters (any
/// layouts, any groups, stride, padding and dilation), on `threads` threads with the tile
/// `kernels` resolves to.
///
/// Contract: same checks as the reference, and the same bytes: products are summed exactly in
/// i32 (the sum of `C/groups * KH * KW` products of at most `2^14` each must fit in i32, true
/// below 131072 terms), then scale, bias and ReLU in f64 and one rounding into `y_dtype` (an
/// i8 output with a scale is the requantised convolution), as the reference does. Errors when the operands are not i8 ([`conv2d_int8_supports`]) or the CPU
/// lacks the build.
#[allow(clippy::too_many_arguments)]
pub fn conv2d_int8(
    conv: &Conv2d,
    x: TensorRef<'_>,
    w: TensorRef<'_>,
    epilogue: &Epilogue<'_>,
    y: &ShapedLayout,
    y_dtype: DType,
    threads: usize,
    kernels: ConvKernels,
) -> Result<Vec<u8>, Error> {
    if !conv2d_int8_supports(&x, &w) {
        return Err(Error::Unsupported(format!(
            "the int8 convolution takes i8 activations and filters, not {} and {}",
            x.dtype, w.dtype
        )));
    }
    let out = check_problem(conv, x.layout, w.layout, epilogue, y)?;
    let e = |i: usize| out.entries()[i].1;
    let dims = [e(0), e(1), e(2), e(3)];
    let terms = w.layout.dims().entries()[1..]
        .iter()
        .map(|d| d.1)
        .product::<usize>();
    if terms >= 1 << 17 {
        return Err(Error::Unsupported(format!(
            "{terms} products per output may overflow the i32 sum"
        )));
    }
    let s = sums(conv, x, w, dims, threads, kernels)?;
    let plain_y = parse_format("NCHW")?.shaped(&out)?;
    let hw = dims[2] * dims[3];
    let plain = epilogue.bias.is_none() && epilogue.scale.is_none();
    let (bytes, src_dtype): (Vec<u8>, DType) = if plain {
        let relu = epilogue.relu;
        let v = s.iter().flat_map(|&v| {
            let v = if relu { v.max(0) } else { v };
            v.to_le_bytes()
        });
        (v.collect(), DType::I32)
    } else {
        let v = s.iter().enumerate().flat_map(|(i, &v)| {
            let oi = (i / hw) % dims[1];
            let mut a = v as f64;
            if let Some(f) = epilogue.scale {
                a *= f[oi];
            }
            if let Some(b) = epilogue.bias {
                a += b[oi];
            }
            // ReLU keeps NaN (a comparison, as in the reference).
            if epilogue.relu && a < 0.0 {
                a = 0.0;
            }
            a.to_le_bytes()
        });
        (v.collect(), DType::F64)
    };
    convert(
        &plain_y,
        &bytes,
        y,
        &CastSpec::new(src_dtype, y_dtype, None)?,
    )
}
