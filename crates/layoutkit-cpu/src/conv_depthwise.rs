//! Depthwise convolution on the CPU (groups = C = O: each output channel reads its own input
//! channel), f32, for activations in NCHW, NHWC or `NCHW<x>c`, which the blocked engine's
//! tiles (16 output channels of one group at a time) do not take and the implicit GEMM ran at
//! 1-2 GFLOP/s (MobileNetV2's `dw 3x3 144 @56`: 6.2 ms at batch 1 on two Zen 5 cores, where
//! PyTorch's NHWC took 0.083 ms).
//!
//! The output is written in the activations' own layout, one contiguous row at a time: a row
//! is `(n, channel block, oh)`, `OW x` values for a block of `x` channels (x = C in NHWC). A
//! pixel's channels of a block are vectors of 16 lanes, then a half vector of 8 (the rest one
//! at a time), each tap one multiply-add per vector: inside the row's interior 4 pixels at a
//! time with two vectors each (8 pixels with a half vector in `NCHW8c`), at the edges up to
//! four vectors of one pixel, the taps inside the image listed once per output pixel. Layouts
//! whose blocks have under 8 channels (NCHW, `NCHW2c`, `NCHW4c`) go through NHWC: the
//! activations converted, the output converted back (two memory passes; a kernel taking one
//! channel at a time ran 6x slower than NHWC on MobileNetV2's layers). Built for AVX-512,
//! AVX2 with FMA, or portable code, as [`ConvKernels`] chooses.
//!
//! Sums in f32, in tap order (`r` then `s`), bias first: the same operations in every layout,
//! so within a build the result does not depend on the layout or the threads (the AVX2 and
//! AVX-512 builds fuse each multiply-add, the portable one rounds the product first).

use layoutkit_core::conv::Conv2d;
use layoutkit_core::plan::ConversionPlan;
use layoutkit_core::{parse_format, CastSpec, DType, ShapedLayout};

use crate::conv_blocked::runtime::{f32s, filter_f32, pool};
#[cfg(target_arch = "x86_64")]
use crate::conv_blocked::{Avx2, Avx512};
use crate::conv_blocked::{ConvKernels, Portable, Shared};
use crate::conv_fast::{activation, channel_block, letter};
use crate::conv_reference::{check_problem, no_scale};
use crate::{convert, convert_fast, Epilogue, Error, TensorRef};

/// Lanes of a vector of channels or pixels.
const LANES: usize = 16;

/// Lanes of a half vector (the blocks of `NCHW8c`, and the last 8 channels where C is 8 more
/// than a multiple of 16).
const HALF: usize = 8;

/// Whether the depthwise kernel takes these operands: f32 activations in NCHW, NHWC or
/// `NCHW<x>c`, groups = C = O (a filter of one input channel per output channel).
pub fn conv2d_depthwise_supports(conv: &Conv2d, x: &TensorRef<'_>, w: &TensorRef<'_>) -> bool {
    takes(conv, x, letter(&w.layout.dims(), 'O'))
}

/// [`conv2d_depthwise_supports`] for a filter of `o` output channels.
fn takes(conv: &Conv2d, x: &TensorRef<'_>, o: Option<usize>) -> bool {
    crate::conv2d_fast_supports(x)
        && conv.groups > 1
        && letter(&x.layout.dims(), 'C') == Some(conv.groups)
        && o == Some(conv.groups)
}

/// The problem's extents, shared by every row.
struct Geometry {
    c: usize,
    h: usize,
    w: usize,
    ow: usize,
    kh: usize,
    kw: usize,
    conv: Conv2d,
}

impl Geometry {
    /// The input row read by output row `oh` through filter row `r`, if inside the image.
    fn in_row(&self, oh: usize, r: usize) -> Option<usize> {
        let ih = (oh * self.conv.stride[0] + r * self.conv.dilation[0]) as isize
            - self.conv.padding[0] as isize;
        (0..self.h as isize).contains(&ih).then_some(ih as usize)
    }

    /// The input column read by output column `ow` through filter column `s`, if inside.
    fn in_col(&self, ow: usize, s: usize) -> Option<usize> {
        let iw = (ow * self.conv.stride[1] + s * self.conv.dilation[1]) as isize
            - self.conv.padding[1] as isize;
        (0..self.w as isize).contains(&iw).then_some(iw as usize)
    }
}

/// A depthwise filter prepared once (an engine keeps its weights): f32, each tap's channels.
#[derive(Clone, Debug)]
pub struct DepthwiseFilter {
    oihw: ShapedLayout,
    kh: usize,
    kw: usize,
    /// `[tap][c]`.
    per_tap: Vec<f32>,
}

impl DepthwiseFilter {
    /// Prepares `w` (axes O, I, H, W with I = 1; any layout and element type). Errors where
    /// I is not 1.
    pub fn new(w: TensorRef<'_>) -> Result<DepthwiseFilter, Error> {
        let oihw = parse_format("OIHW")?.shaped(&w.layout.dims())?;
        let [_, i, kh, kw] = [0, 1, 2, 3].map(|k| oihw.extents()[k]);
        if i != 1 {
            return Err(Error::Unsupported(format!(
                "a depthwise filter has one input channel per output channel, not I = {i}"
            )));
        }
        // HWIO with I = 1: each tap's weights of every channel together.
        let (_, per_tap) = filter_f32(&w, "HWIO")?;
        Ok(DepthwiseFilter {
            oihw,
            kh,
            kw,
            per_tap,
        })
    }
}

/// Depthwise convolution (see the module) into a new buffer in `y`'s layout and type.
///
/// Contract: `conv2d_depthwise_supports`; the reference's output up to f32 rounding of the
/// sums (the tests hold `||out - ref|| / ||ref||` under 1e-5), independent of `threads` and
/// the activations' layout.
#[allow(clippy::too_many_arguments)]
pub(crate) fn conv2d_depthwise(
    conv: &Conv2d,
    x: TensorRef<'_>,
    w: TensorRef<'_>,
    epilogue: &Epilogue<'_>,
    out_dims: &layoutkit_core::Dims,
    y: &ShapedLayout,
    y_dtype: DType,
    threads: usize,
    kernels: ConvKernels,
) -> Result<Vec<u8>, Error> {
    let filter = DepthwiseFilter::new(w)?;
    let y_same = x.layout.layout().shaped(out_dims)?;
    let mut out = crate::AlignedBuf::zeroed(y_same.bytes(DType::F32)?);
    conv2d_depthwise_into(
        conv, x, &filter, epilogue, &y_same, &mut out, threads, kernels,
    )?;
    if y.layout().to_string() == y_same.layout().to_string() && y_dtype == DType::F32 {
        return Ok(out.to_vec());
    }
    convert(&y_same, &out, y, &CastSpec::new(DType::F32, y_dtype, None)?)
}

/// Depthwise convolution (see the module) with a filter prepared by [`DepthwiseFilter::new`],
/// into `out` (f32 in `y`, which must be the activations' layout; every byte written).
///
/// Contract: the reference convolution's output up to f32 rounding of the sums (the tests
/// hold `||out - ref|| / ||ref||` under 1e-5), independent of `threads` and the activations'
/// layout within a build; errors for operands it does not take
/// ([`conv2d_depthwise_supports`]), an output in another layout, buffers of the wrong size.
#[allow(clippy::too_many_arguments)]
pub fn conv2d_depthwise_into(
    conv: &Conv2d,
    x: TensorRef<'_>,
    w: &DepthwiseFilter,
    epilogue: &Epilogue<'_>,
    y: &ShapedLayout,
    out: &mut [u8],
    threads: usize,
    kernels: ConvKernels,
) -> Result<(), Error> {
    depthwise_into(conv, x, w, epilogue, y, out, threads, kernels, true)
}

/// [`conv2d_depthwise_into`], with the sliding kernel for 3x3, 5x5 and 7x7 filters where
/// `sliding`, else the general tap loop everywhere (the same sums: tests compare the two).
#[allow(clippy::too_many_arguments)]
pub(crate) fn depthwise_into(
    conv: &Conv2d,
    x: TensorRef<'_>,
    w: &DepthwiseFilter,
    epilogue: &Epilogue<'_>,
    y: &ShapedLayout,
    out: &mut [u8],
    threads: usize,
    kernels: ConvKernels,
    sliding: bool,
) -> Result<(), Error> {
    no_scale(epilogue, "depthwise")?;
    let out_dims = check_problem(conv, x.layout, &w.oihw, epilogue, y)?;
    let c = w.oihw.extents()[0];
    if !takes(conv, &x, Some(c)) {
        return Err(Error::Unsupported(format!(
            "the depthwise convolution takes f32 NCHW, NHWC or NCHW<x>c activations with groups \
             = C = O, not {} {} with {} groups",
            x.dtype,
            x.layout.layout(),
            conv.groups
        )));
    }
    if y.layout().to_string() != x.layout.layout().to_string() {
        return Err(Error::Unsupported(format!(
            "the depthwise convolution writes its activations' layout ({}), not {}",
            x.layout.layout(),
            y.layout()
        )));
    }
    crate::check_buffers(x.layout, x.data, y, out, &CastSpec::identity(DType::F32))?;
    let kernels = kernels.resolve()?;
    let block = channel_block(x.layout).expect("checked above");
    if block < 8 && block != c {
        // NCHW, NCHW2c, NCHW4c: through NHWC (whose block is all C channels) (two memory passes, where a channel at a time
        // ran 6x slower than NHWC itself).
        let f32s_id = CastSpec::identity(DType::F32);
        let nhwc_x = parse_format("NHWC")?.shaped(&x.layout.dims())?;
        let nhwc_y = parse_format("NHWC")?.shaped(&out_dims)?;
        let mut xb = crate::AlignedBuf::zeroed(nhwc_x.bytes(DType::F32)?);
        let to_nhwc = ConversionPlan::new(x.layout, &nhwc_x)?;
        convert_fast(&to_nhwc, x.data, &mut xb, &f32s_id, threads)?;
        let mut yb = crate::AlignedBuf::zeroed(nhwc_y.bytes(DType::F32)?);
        let xn = TensorRef {
            layout: &nhwc_x,
            dtype: DType::F32,
            data: &xb,
        };
        depthwise_into(
            conv, xn, w, epilogue, &nhwc_y, &mut yb, threads, kernels, sliding,
        )?;
        return convert_fast(
            &ConversionPlan::new(&nhwc_y, y)?,
            &yb,
            out,
            &f32s_id,
            threads,
        );
    }
    let xs = f32s(x.data);
    let d = x.layout.dims();
    let get = |l: char| letter(&d, l).unwrap_or(0);
    let (oh, ow) = (
        letter(&out_dims, 'H').unwrap_or(0),
        letter(&out_dims, 'W').unwrap_or(0),
    );
    let g = Geometry {
        c,
        h: get('H'),
        w: get('W'),
        ow,
        kh: w.kh,
        kw: w.kw,
        conv: *conv,
    };
    let act = activation(x.layout);
    let bias: Vec<f32> = match epilogue.bias {
        Some(b) => b.iter().map(|&v| v as f32).collect(),
        None => vec![0.0; c],
    };
    let blocks = c.div_ceil(block);
    let rows = get('N') * blocks * oh;
    let row_len = ow * block;
    let ctx = Rows {
        g: &g,
        xs: &xs,
        per_tap: &w.per_tap,
        bias: &bias,
        relu: epilogue.relu,
        block,
        sn: act.sn,
        sh: act.sh,
        sw: act.sw,
        plane: if blocks > 1 { g.h * g.w * block } else { 0 },
        sliding,
    };
    // The rows in f32: `out` itself where it is aligned for f32, else a copy.
    // SAFETY: every bit pattern is a valid f32; `align_to_mut` only reinterprets the middle.
    let (head, mid, tail) = unsafe { out.align_to_mut::<f32>() };
    let aligned = head.is_empty() && tail.is_empty();
    let mut scratch = if aligned {
        Vec::new()
    } else {
        vec![0f32; rows * row_len]
    };
    let dst: &mut [f32] = if aligned { mid } else { &mut scratch };
    let shared = Shared(dst.as_mut_ptr());
    let work = |row: usize| {
        let (n, rest) = (row / (blocks * oh), row % (blocks * oh));
        // SAFETY: rows are disjoint ranges of `dst` (`row_len` values each, `rows` of them),
        // each written by one item only; `dst` outlives the call.
        let chunk =
            unsafe { std::slice::from_raw_parts_mut(shared.get().add(row * row_len), row_len) };
        run_row(kernels, &ctx, n, rest / oh, rest % oh, chunk);
    };
    if threads > 1 && rows > 1 {
        pool(threads)?.run(rows, &work);
    } else {
        (0..rows).for_each(work);
    }
    if !aligned {
        for (b, v) in out.chunks_exact_mut(4).zip(&scratch) {
            b.copy_from_slice(&v.to_le_bytes());
        }
    }
    Ok(())
}

/// What every row reads.
struct Rows<'a> {
    g: &'a Geometry,
    xs: &'a [f32],
    per_tap: &'a [f32],
    bias: &'a [f32],
    relu: bool,
    /// Channels per block of the layout (C in NHWC, 1 in NCHW).
    block: usize,
    /// Strides of n, h, w in the activations; `plane` of a channel block (0 with one block).
    sn: usize,
    sh: usize,
    sw: usize,
    plane: usize,
    /// Whether 3x3, 5x5 and 7x7 filters take the sliding kernel (else the general tap loop).
    sliding: bool,
}

/// A row's lists, kept per thread from row to row (a row of 28 pixels x 8 channels took a
/// tenth of its time allocating them): the filter rows inside the image (offset of the input
/// row, filter row) and an edge pixel's taps inside the image (input offset, tap).
#[derive(Default)]
struct Lists {
    rows: Vec<(usize, usize)>,
    taps: Vec<(usize, usize)>,
}

thread_local! {
    static LISTS: std::cell::RefCell<Lists> = std::cell::RefCell::default();
}

/// Row `(n, channel block cb, oh)` into `out` (`OW x block` values) with the build `kernels`.
fn run_row(kernels: ConvKernels, r: &Rows<'_>, n: usize, cb: usize, oh: usize, out: &mut [f32]) {
    // The vector code is in the build's own functions, not in this closure (closures do not
    // take a caller's target features).
    LISTS.with_borrow_mut(|l| {
        #[cfg(target_arch = "x86_64")]
        match kernels {
            // SAFETY: `resolve` returned this build only where the CPU has its instructions.
            ConvKernels::Avx512 => return unsafe { row_avx512(r, n, cb, oh, out, l) },
            // SAFETY: as above (AVX2 and FMA).
            ConvKernels::Avx2 => return unsafe { row_avx2(r, n, cb, oh, out, l) },
            _ => {}
        }
        let _ = kernels;
        row::<false, Portable, Portable>(r, n, cb, oh, out, l);
    })
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
fn row_avx512(r: &Rows<'_>, n: usize, cb: usize, oh: usize, out: &mut [f32], l: &mut Lists) {
    row::<true, Avx512, Avx2>(r, n, cb, oh, out, l);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn row_avx2(r: &Rows<'_>, n: usize, cb: usize, oh: usize, out: &mut [f32], l: &mut Lists) {
    row::<true, Avx2, Avx2>(r, n, cb, oh, out, l);
}

#[path = "conv_depthwise_row.rs"]
mod row_kernels;
use row_kernels::row;

#[cfg(test)]
#[path = "conv_depthwise_tests.rs"]
mod tests;
