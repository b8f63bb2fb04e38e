//! The reference 2-D convolution: direct loops in f64 over plain NCHW/OIHW copies of the
//! operands. Slow and obviously right; every convolution implementation is tested against it.

use layoutkit_core::conv::Conv2d;
use layoutkit_core::{parse_format, CastSpec, DType, Dims, Error as CoreError, ShapedLayout};

use crate::{convert_reference, Error};

/// One operand: a shaped layout, its element type and its physical array.
#[derive(Clone, Copy, Debug)]
pub struct TensorRef<'a> {
    pub layout: &'a ShapedLayout,
    pub dtype: DType,
    pub data: &'a [u8],
}

/// What happens to each output element after the sum: `* scale[o]` (requantisation: the
/// per-output-channel factor that takes an int8 convolution's i32 sums to the output's
/// quantised scale), `+ bias[o]`, then `max(0, .)`, each where present. The float engines
/// take no scale (`no_scale`); the reference and the int8 convolution do.
#[derive(Clone, Copy, Debug, Default)]
pub struct Epilogue<'a> {
    pub bias: Option<&'a [f64]>,
    pub relu: bool,
    pub scale: Option<&'a [f64]>,
}

/// Errors when `epilogue` has a requantisation scale: for the engines that have none (the
/// float convolutions; a scale is for int8 sums).
pub(crate) fn no_scale(epilogue: &Epilogue<'_>, engine: &str) -> Result<(), Error> {
    match epilogue.scale {
        Some(_) => Err(Error::Unsupported(format!(
            "the {engine} convolution has no requantisation scale (int8 operands have one)"
        ))),
        None => Ok(()),
    }
}

/// `t` as plain `plain` (`NCHW` or `OIHW`) f64 values, logical order.
fn to_plain_f64(t: TensorRef<'_>, plain: &str) -> Result<Vec<f64>, Error> {
    let dst = parse_format(plain)?.shaped(&t.layout.dims())?;
    let mut bytes = vec![0u8; dst.bytes(DType::F64)?];
    convert_reference(
        t.layout,
        t.data,
        &dst,
        &mut bytes,
        &CastSpec::new(t.dtype, DType::F64, None)?,
    )?;
    Ok(bytes
        .chunks_exact(8)
        .map(|b| f64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]))
        .collect())
}

/// Checks a convolution problem: the parameters against the operands' dims, `y`'s dims against
/// the output dims, and the bias length against `O`. Returns the output dims `N, C, H, W`.
pub(crate) fn check_problem(
    conv: &Conv2d,
    x: &ShapedLayout,
    w: &ShapedLayout,
    epilogue: &Epilogue<'_>,
    y: &ShapedLayout,
) -> Result<Dims, Error> {
    let (xd, wd) = (x.dims(), w.dims());
    let out = conv.output_dims(&xd, &wd)?;
    let conv_err = |reason: String| -> Error {
        CoreError::Conv {
            input: xd.to_string(),
            filter: wd.to_string(),
            reason,
        }
        .into()
    };
    let fits = y.axes().len() == 4
        && out
            .entries()
            .iter()
            .all(|&(axis, e)| y.extent(axis) == Some(e));
    if !fits {
        return Err(conv_err(format!(
            "the output layout {} has dims {}, the convolution gives {out}",
            y.layout(),
            y.dims()
        )));
    }
    let o = out.entries()[1].1;
    for (what, v) in [("bias", epilogue.bias), ("scale", epilogue.scale)] {
        if let Some(v) = v {
            if v.len() != o {
                return Err(conv_err(format!(
                    "the {what} has {} values, the output has O = {o} channels",
                    v.len()
                )));
            }
        }
    }
    Ok(out)
}

/// The convolution of `x` (axes `N, C, H, W`, any layout and element type) with `w` (axes
/// `O, I, H, W`), then `epilogue`, written into layout `y` with elements of `y_dtype`.
///
/// Contract: `y`'s dims are `conv.output_dims(x, w)` (errors otherwise, as for bad parameters,
/// a bias whose length is not `O`, or buffers that do not match their layouts). Every product is
/// exact in f64 and the sum is accumulated in f64 in the order `c, kh, kw`, then multiplied
/// by the scale and added to the bias in f64 (each rounded to f64 once); the result is
/// rounded once to `y_dtype` (round half to even; integer types saturate, so i8 operands give
/// the exact i32 sum whenever it fits). Padding of `y`'s layout holds its fill value.
pub fn conv2d_reference(
    conv: &Conv2d,
    x: TensorRef<'_>,
    w: TensorRef<'_>,
    epilogue: &Epilogue<'_>,
    y: &ShapedLayout,
    y_dtype: DType,
) -> Result<Vec<u8>, Error> {
    let out = check_problem(conv, x.layout, w.layout, epilogue, y)?;
    let e = |d: &layoutkit_core::Dims, i: usize| d.entries()[i].1;
    let [n, o, oh, ow] = [0, 1, 2, 3].map(|i| e(&out, i));
    let plain_x = parse_format("NCHW")?.shaped(&x.layout.dims())?;
    let plain_w = parse_format("OIHW")?.shaped(&w.layout.dims())?;
    let [_, c, h, wi] = [0, 1, 2, 3].map(|i| plain_x.extents()[i]);
    let [_, ci, kh, kw] = [0, 1, 2, 3].map(|i| plain_w.extents()[i]);
    let xv = to_plain_f64(x, "NCHW")?;
    let wv = to_plain_f64(w, "OIHW")?;
    let og = o / conv.groups;
    let mut yv = vec![0f64; n * o * oh * ow];
    for ni in 0..n {
        for oi in 0..o {
            let g = oi / og;
            for yh in 0..oh {
                for yw in 0..ow {
                    let mut acc = 0f64;
                    for cl in 0..ci {
                        let cx = g * ci + cl;
                        for r in 0..kh {
                            // Input row: yh * stride + r * dilation - padding (skipped outside).
                            let ih = (yh * conv.stride[0] + r * conv.dilation[0])
                                .checked_sub(conv.padding[0])
                                .filter(|&v| v < h);
                            let Some(ih) = ih else { continue };
                            for s in 0..kw {
                                let iw = (yw * conv.stride[1] + s * conv.dilation[1])
                                    .checked_sub(conv.padding[1])
                                    .filter(|&v| v < wi);
                                let Some(iw) = iw else { continue };
                                acc += xv[((ni * c + cx) * h + ih) * wi + iw]
                                    * wv[((oi * ci + cl) * kh + r) * kw + s];
                            }
                        }
                    }
                    if let Some(f) = epilogue.scale {
                        acc *= f[oi];
                    }
                    if let Some(b) = epilogue.bias {
                        acc += b[oi];
                    }
                    // ReLU keeps NaN (a comparison, not `max`).
                    if epilogue.relu && acc < 0.0 {
                        acc = 0.0;
                    }
                    yv[((ni * o + oi) * oh + yh) * ow + yw] = acc;
                }
            }
        }
    }
    let plain_y = parse_format("NCHW")?.shaped(&out)?;
    let bytes: Vec<u8> = yv.iter().flat_map(|v| v.to_le_bytes()).collect();
    let mut result = vec![0u8; y.bytes(y_dtype)?];
    convert_reference(
        &plain_y,
        &bytes,
        y,
        &mut result,
        &CastSpec::new(DType::F64, y_dtype, None)?,
    )?;
    Ok(result)
}
