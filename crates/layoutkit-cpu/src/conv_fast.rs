//! Implicit-GEMM convolution on the CPU, directly on f32 activations in NCHW, NHWC or
//! `NCHW<x>c` (the family `N, C/x, H, W, x`: x = 1 is NCHW, x = C is NHWC), without an im2col
//! copy. The GEMM is `out[pixel][o] = sum over (c, r, s) of in[pixel, c, r, s] * w[o][c][r][s]`:
//! each work item is one output row `(n, oh)`, computed in register tiles of 4 output pixels by
//! 16 output channels, reading the input in place through per-channel offsets (so the layout's
//! channel stride is what the inner loop sees: 1 for NHWC and NCHWxc, H*W for NCHW).
//! The filter is packed once into 16-channel panels. Accumulation is in f32 (FMA where the CPU
//! has AVX2 and FMA, chosen at run time); tested against the f64 reference.

use layoutkit_core::conv::Conv2d;
use layoutkit_core::{parse_format, CastSpec, DType, Dims, ShapedLayout, Token};
use rayon::prelude::*;

use crate::conv_reference::{check_problem, no_scale};
use crate::{convert, Epilogue, Error, TensorRef};

/// Output channels per register tile (two AVX vectors).
const OT: usize = 16;
/// Output pixels per register tile.
const PT: usize = 4;

/// How channel `c` of an activation in the `N, C/x, H, W, x` family is addressed:
/// `offset = n * sn + h * sh + w * sw + chan[c]`.
pub(crate) struct Activation {
    pub(crate) sn: usize,
    pub(crate) sh: usize,
    pub(crate) sw: usize,
    pub(crate) chan: Vec<usize>,
}

/// The extent of the axis named `l` in `d`, if it has one.
pub(crate) fn letter(d: &Dims, l: char) -> Option<usize> {
    layoutkit_core::Axis::from_letter(l).and_then(|a| d.get(a))
}

/// The channel block `x` of a layout in the family, or None for other layouts.
pub(crate) fn channel_block(layout: &ShapedLayout) -> Option<usize> {
    let c = layout.extent(layoutkit_core::Axis::from_letter('C')?)?;
    match layout.layout().to_string().as_str() {
        "NCHW" => Some(1),
        "NHWC" => Some(c.max(1)),
        s => {
            let k = s.strip_prefix("NCHW")?.strip_suffix('c')?;
            let x: usize = k.parse().ok()?;
            // The family has exactly the tokens N C H W <x>c.
            let tokens = layout.layout().tokens();
            (tokens.len() == 5 && matches!(tokens[4], Token::Block { .. })).then_some(x)
        }
    }
}

/// The addressing of `x` from core's forward map. In the family only C is blocked, so the
/// offset is linear in n, h and w, and channels need one table.
pub(crate) fn activation(x: &ShapedLayout) -> Activation {
    let at = |n: usize, c: usize, h: usize, w: usize| {
        let coord: Vec<usize> = x
            .axes()
            .iter()
            .map(|a| match a.letter() {
                'N' => n,
                'C' => c,
                'H' => h,
                _ => w,
            })
            .collect();
        x.forward_unchecked(&coord)
    };
    let extent = |l: char| {
        x.axes()
            .iter()
            .position(|a| a.letter() == l)
            .map_or(0, |i| x.extents()[i])
    };
    // A stride is only asked for where the next coordinate is in range (forward's contract);
    // an axis of extent 1 only ever has index 0.
    let step = |l: char, next: [usize; 4]| {
        if extent(l) > 1 {
            at(next[0], next[1], next[2], next[3])
        } else {
            0
        }
    };
    Activation {
        sn: step('N', [1, 0, 0, 0]),
        sh: step('H', [0, 0, 1, 0]),
        sw: step('W', [0, 0, 0, 1]),
        chan: (0..extent('C')).map(|ci| at(0, ci, 0, 0)).collect(),
    }
}

/// The problem's extents, shared by every work item.
struct Geometry {
    h: usize,
    w: usize,
    ow: usize,
    o: usize,
    cg: usize,
    og: usize,
    groups: usize,
    kh: usize,
    kw: usize,
    conv: Conv2d,
}

/// Whether the fast path takes these operands: f32 activations in NCHW, NHWC or `NCHW<x>c`.
pub fn conv2d_fast_supports(x: &TensorRef<'_>) -> bool {
    x.dtype == DType::F32 && x.layout.axes().len() == 4 && channel_block(x.layout).is_some()
}

/// The convolution of [`crate::conv2d_reference`], computed by implicit GEMM on `threads`
/// threads, for f32 activations in NCHW, NHWC or `NCHW<x>c` (errors for others; the filter may
/// be in any layout and type, it is packed once).
///
/// Contract: same checks and output as the reference, except that sums are accumulated in f32
/// (`||out - ref|| / ||ref||` stays near f32 rounding; the tests hold it under 1e-5), and the
/// result does not depend on `threads`.
pub fn conv2d_fast(
    conv: &Conv2d,
    x: TensorRef<'_>,
    w: TensorRef<'_>,
    epilogue: &Epilogue<'_>,
    y: &ShapedLayout,
    y_dtype: DType,
    threads: usize,
) -> Result<Vec<u8>, Error> {
    no_scale(epilogue, "fast")?;
    check_problem(conv, x.layout, w.layout, epilogue, y)?;
    let packed = PackedFilter::new(w, conv.groups)?;
    conv2d_fast_packed(conv, x, &packed, epilogue, y, y_dtype, threads)
}

/// A filter packed once for [`conv2d_fast_packed`] (weights reused across calls, as an
/// inference engine keeps them): 16-output-channel f32 panels per group.
#[derive(Clone, Debug)]
pub struct PackedFilter {
    oihw: ShapedLayout,
    groups: usize,
    panels: Vec<f32>,
}

impl PackedFilter {
    /// Packs `w` (axes O, I, H, W; any layout and element type) for convolutions with `groups`
    /// groups. Errors when O is not a multiple of `groups` or the buffer does not match.
    pub fn new(w: TensorRef<'_>, groups: usize) -> Result<PackedFilter, Error> {
        let oihw = parse_format("OIHW")?.shaped(&w.layout.dims())?;
        let [o, cg, kh, kw] = [0, 1, 2, 3].map(|i| oihw.extents()[i]);
        if groups == 0 || o % groups != 0 {
            return Err(Error::Unsupported(format!(
                "a filter with O = {o} cannot be split into {groups} groups"
            )));
        }
        let (_, wv) = crate::conv_blocked::runtime::filter_f32(&w, "OIHW")?;
        let panels = pack_filter(&wv, groups, o / groups, cg, kh, kw);
        Ok(PackedFilter {
            oihw,
            groups,
            panels,
        })
    }
}

/// [`conv2d_fast`] with a filter packed beforehand by [`PackedFilter::new`] (same contract;
/// the packed filter's group count must be `conv.groups`).
pub fn conv2d_fast_packed(
    conv: &Conv2d,
    x: TensorRef<'_>,
    w: &PackedFilter,
    epilogue: &Epilogue<'_>,
    y: &ShapedLayout,
    y_dtype: DType,
    threads: usize,
) -> Result<Vec<u8>, Error> {
    no_scale(epilogue, "fast")?;
    let out = check_problem(conv, x.layout, &w.oihw, epilogue, y)?;
    if w.groups != conv.groups {
        return Err(Error::Unsupported(format!(
            "the filter was packed for {} groups, the convolution has {}",
            w.groups, conv.groups
        )));
    }
    if !conv2d_fast_supports(&x) {
        return Err(Error::Unsupported(format!(
            "the fast convolution takes f32 activations in NCHW, NHWC or NCHW<x>c, not {} {}; \
             use the reference",
            x.dtype,
            x.layout.layout()
        )));
    }
    let expected = x.layout.bytes(DType::F32)?;
    if x.data.len() != expected {
        return Err(layoutkit_core::Error::BufferSize {
            what: format!("activations {} of f32", x.layout.layout()),
            expected_bytes: expected,
            actual_bytes: x.data.len(),
        }
        .into());
    }
    let xs: Vec<f32> = x
        .data
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    let act = activation(x.layout);
    let [n, o, oh, ow] = [0, 1, 2, 3].map(|i| out.entries()[i].1);
    let [_, cg, kh, kw] = [0, 1, 2, 3].map(|i| w.oihw.extents()[i]);
    let plain_x = x.layout.dims();
    let get = |d: &Dims, l: char| {
        layoutkit_core::Axis::from_letter(l)
            .and_then(|a| d.get(a))
            .unwrap_or(0)
    };
    let g = Geometry {
        h: get(&plain_x, 'H'),
        w: get(&plain_x, 'W'),
        ow,
        o,
        cg,
        og: o / conv.groups,
        groups: conv.groups,
        kh,
        kw,
        conv: *conv,
    };
    let panels = &w.panels;
    let bias: Vec<f32> = match epilogue.bias {
        Some(b) => b.iter().map(|&v| v as f32).collect(),
        None => vec![0.0; o],
    };
    // NHWC f32 output rows, one work item each.
    let mut yv = vec![0f32; n * oh * ow * o];
    let row_len = (ow * o).max(1);
    let work = |(row, chunk): (usize, &mut [f32])| {
        let (ni, ohi) = (row / oh.max(1), row % oh.max(1));
        compute_row(&g, &act, &xs, panels, &bias, epilogue.relu, ni, ohi, chunk);
    };
    if threads <= 1 {
        yv.chunks_mut(row_len).enumerate().for_each(work);
    } else {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .map_err(|e| Error::Threads {
                threads,
                reason: e.to_string(),
            })?;
        pool.install(|| yv.par_chunks_mut(row_len).enumerate().for_each(work));
    }
    let nhwc = parse_format("NHWC")?.shaped(&out)?;
    let bytes: Vec<u8> = yv.iter().flat_map(|v| v.to_le_bytes()).collect();
    if y.layout().to_string() == "NHWC" && y_dtype == DType::F32 {
        return Ok(bytes);
    }
    convert(&nhwc, &bytes, y, &CastSpec::new(DType::F32, y_dtype, None)?)
}

/// The filter (`wv`, plain OIHW) as panels `[group][o tile][r][s][c][OT]`, output channels
/// past the group's end zero.
fn pack_filter(wv: &[f32], groups: usize, og: usize, cg: usize, kh: usize, kw: usize) -> Vec<f32> {
    let g = PackShape { og, cg, kh, kw };
    let tiles = g.og.div_ceil(OT);
    let panel = g.kh * g.kw * g.cg * OT;
    let mut p = vec![0f32; groups * tiles * panel];
    for gi in 0..groups {
        for t in 0..tiles {
            let base = (gi * tiles + t) * panel;
            for r in 0..g.kh {
                for s in 0..g.kw {
                    for c in 0..g.cg {
                        for j in 0..OT.min(g.og - t * OT) {
                            let oc = gi * g.og + t * OT + j;
                            p[base + ((r * g.kw + s) * g.cg + c) * OT + j] =
                                wv[((oc * g.cg + c) * g.kh + r) * g.kw + s];
                        }
                    }
                }
            }
        }
    }
    p
}

/// The filter extents the packing needs.
struct PackShape {
    og: usize,
    cg: usize,
    kh: usize,
    kw: usize,
}

/// One output row `(n, oh)` into `row` (`OW x O`, NHWC order).
#[allow(clippy::too_many_arguments)]
fn compute_row(
    g: &Geometry,
    act: &Activation,
    xs: &[f32],
    panels: &[f32],
    bias: &[f32],
    relu: bool,
    n: usize,
    oh: usize,
    row: &mut [f32],
) {
    #[cfg(target_arch = "x86_64")]
    if has_avx2_fma() {
        // SAFETY: the CPU has AVX2 and FMA (checked at run time just above).
        unsafe { compute_row_avx2(g, act, xs, panels, bias, relu, n, oh, row) };
        return;
    }
    compute_row_generic::<false>(g, act, xs, panels, bias, relu, n, oh, row);
}

#[cfg(target_arch = "x86_64")]
fn has_avx2_fma() -> bool {
    static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HAS.get_or_init(|| {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
    })
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)]
fn compute_row_avx2(
    g: &Geometry,
    act: &Activation,
    xs: &[f32],
    panels: &[f32],
    bias: &[f32],
    relu: bool,
    n: usize,
    oh: usize,
    row: &mut [f32],
) {
    compute_row_generic::<true>(g, act, xs, panels, bias, relu, n, oh, row);
}

/// The row computation; inlined into the AVX2 wrapper so its fixed-size loops are compiled
/// with the wrapper's features. `FMA` chooses fused multiply-adds (only with hardware FMA:
/// without it `mul_add` is a library call).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn compute_row_generic<const FMA: bool>(
    g: &Geometry,
    act: &Activation,
    xs: &[f32],
    panels: &[f32],
    bias: &[f32],
    relu: bool,
    n: usize,
    oh: usize,
    row: &mut [f32],
) {
    let c = &g.conv;
    let tiles = g.og.div_ceil(OT);
    let panel = g.kh * g.kw * g.cg * OT;
    for gi in 0..g.groups {
        let chan = &act.chan[gi * g.cg..(gi + 1) * g.cg];
        for t in 0..tiles {
            let wp = &panels[(gi * tiles + t) * panel..][..panel];
            let o0 = gi * g.og + t * OT;
            let valid_o = OT.min(g.og - t * OT);
            for ow0 in (0..g.ow).step_by(PT) {
                let mut acc = [[0f32; OT]; PT];
                for r in 0..g.kh {
                    let ih = (oh * c.stride[0] + r * c.dilation[0]).checked_sub(c.padding[0]);
                    let Some(ih) = ih.filter(|&v| v < g.h) else {
                        continue;
                    };
                    for s in 0..g.kw {
                        // Pixels outside the input (or past the row's end) read channel c of
                        // element 0 and weigh it by 0.
                        let mut base = [0usize; PT];
                        let mut mask = [0f32; PT];
                        for p in 0..PT {
                            let owp = ow0 + p;
                            let iw = (owp * c.stride[1] + s * c.dilation[1])
                                .checked_sub(c.padding[1])
                                .filter(|&v| v < g.w && owp < g.ow);
                            if let Some(iw) = iw {
                                base[p] = n * act.sn + ih * act.sh + iw * act.sw;
                                mask[p] = 1.0;
                            }
                        }
                        let wrs = &wp[(r * g.kw + s) * g.cg * OT..][..g.cg * OT];
                        // Interior tiles (every pixel inside the input) skip the mask.
                        let interior = mask.iter().all(|&m| m == 1.0);
                        for (ci, &off) in chan.iter().enumerate() {
                            let wrow: &[f32; OT] = wrs[ci * OT..ci * OT + OT]
                                .try_into()
                                .expect("a panel row holds OT values");
                            let mut a = [0f32; PT];
                            for p in 0..PT {
                                a[p] = xs[base[p] + off];
                            }
                            if !interior {
                                for p in 0..PT {
                                    a[p] *= mask[p];
                                }
                            }
                            for p in 0..PT {
                                for j in 0..OT {
                                    acc[p][j] = if FMA {
                                        a[p].mul_add(wrow[j], acc[p][j])
                                    } else {
                                        acc[p][j] + a[p] * wrow[j]
                                    };
                                }
                            }
                        }
                    }
                }
                for (p, accp) in acc.iter().enumerate() {
                    let owp = ow0 + p;
                    if owp >= g.ow {
                        break;
                    }
                    let dst = &mut row[owp * g.o + o0..][..valid_o];
                    for (j, d) in dst.iter_mut().enumerate() {
                        let mut v = accp[j] + bias[o0 + j];
                        if relu && v < 0.0 {
                            v = 0.0;
                        }
                        *d = v;
                    }
                }
            }
        }
    }
}
