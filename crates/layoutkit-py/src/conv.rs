//! 2-D convolution on CPU arrays (the engine `layoutkit_cpu::conv2d_engine` chooses: int8, the
//! register-blocked engine, or the reference), with the command line's rules for output layout
//! and type.

use layoutkit_core::conv::Conv2d;
use layoutkit_core::{parse_format, view, DType, ShapedLayout};
use layoutkit_cpu::{conv2d_auto, ConvKernels, Epilogue, TensorRef};
use pyo3::prelude::*;

use crate::layouts::parse_dtype;
use crate::value_error;

/// An operand: format, shape, strides (elements), element type, address.
type Operand<'a> = (String, Vec<usize>, Vec<isize>, Bound<'a, PyAny>, usize);

/// The convolution's parameters from Python (stride, padding, dilation as (h, w); groups).
fn conv2d(
    stride: (usize, usize),
    padding: (usize, usize),
    dilation: (usize, usize),
    groups: usize,
) -> Conv2d {
    Conv2d {
        stride: [stride.0, stride.1],
        padding: [padding.0, padding.1],
        dilation: [dilation.0, dilation.1],
        groups,
    }
}

/// The operands' shaped layouts and types, and the output's, as `conv2d_cpu` uses them.
struct Problem {
    conv: Conv2d,
    xs: ShapedLayout,
    ws: ShapedLayout,
    ys: ShapedLayout,
    xt: DType,
    wt: DType,
    yt: DType,
}

/// The layout of an operand given as (format, shape, strides): its logical dims from `dims`
/// when given (needed where the layout pads, e.g. NC/32HW32 with C not a multiple of 32),
/// else from the shape.
pub(crate) fn operand_layout(
    format: &str,
    shape: &[usize],
    strides: &[isize],
    dims: Option<&Bound<'_, PyAny>>,
) -> PyResult<ShapedLayout> {
    let dims = dims.map(crate::dims_arg).transpose()?;
    view::shaped_view(
        &parse_format(format).map_err(value_error)?,
        dims.as_ref(),
        shape,
        strides,
    )
    .map_err(value_error)
}

impl Problem {
    fn new(
        x: &Operand<'_>,
        w: &Operand<'_>,
        x_dims: Option<&Bound<'_, PyAny>>,
        conv: Conv2d,
        output_format: Option<&str>,
        out_dtype: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Problem> {
        let (xt, wt) = (parse_dtype(&x.3)?, parse_dtype(&w.3)?);
        let xs = operand_layout(&x.0, &x.1, &x.2, x_dims)?;
        let ws = operand_layout(&w.0, &w.1, &w.2, None)?;
        let y_dims = conv
            .output_dims(&xs.dims(), &ws.dims())
            .map_err(value_error)?;
        let ys = parse_format(output_format.unwrap_or(&x.0))
            .map_err(value_error)?
            .shaped(&y_dims)
            .map_err(value_error)?;
        let yt = match out_dtype {
            Some(t) => parse_dtype(t)?,
            None if xt.is_float() => xt,
            None => DType::I32,
        };
        Ok(Problem {
            conv,
            xs,
            ws,
            ys,
            xt,
            wt,
            yt,
        })
    }
}

/// The output's shape and element type (our short name) for these operands, as `conv2d_cpu`
/// will produce it (`output_format` defaults to the input's, `out_dtype` to the input's for
/// floats and i32 for integers).
#[pyfunction]
#[pyo3(signature = (x, w, stride, padding, dilation, groups, output_format = None, out_dtype = None, x_dims = None))]
#[allow(clippy::too_many_arguments)]
pub fn conv2d_output(
    x: Operand<'_>,
    w: Operand<'_>,
    stride: (usize, usize),
    padding: (usize, usize),
    dilation: (usize, usize),
    groups: usize,
    output_format: Option<String>,
    out_dtype: Option<&Bound<'_, PyAny>>,
    x_dims: Option<&Bound<'_, PyAny>>,
) -> PyResult<(Vec<usize>, &'static str)> {
    let p = Problem::new(
        &x,
        &w,
        x_dims,
        conv2d(stride, padding, dilation, groups),
        output_format.as_deref(),
        out_dtype,
    )?;
    Ok((p.ys.array_shape(), p.yt.name()))
}

/// Convolves CPU arrays: `x` and `w` read in place (any layouts, strided views too), an
/// optional requantisation scale and bias (f64 values, one per output channel; the scale for
/// int8 operands), ReLU; writes the output (row-major, `output_format`, `out_dtype`) to
/// address `y` of `y_len` bytes. GIL released.
#[pyfunction]
#[pyo3(signature = (x, w, bias, y, y_len, stride, padding, dilation, groups, relu, output_format = None, out_dtype = None, threads = 1, x_dims = None, scale = None))]
#[allow(clippy::too_many_arguments)]
pub fn conv2d_cpu(
    py: Python<'_>,
    x: Operand<'_>,
    w: Operand<'_>,
    bias: Option<Vec<f64>>,
    y: usize,
    y_len: usize,
    stride: (usize, usize),
    padding: (usize, usize),
    dilation: (usize, usize),
    groups: usize,
    relu: bool,
    output_format: Option<String>,
    out_dtype: Option<&Bound<'_, PyAny>>,
    threads: usize,
    x_dims: Option<&Bound<'_, PyAny>>,
    scale: Option<Vec<f64>>,
) -> PyResult<()> {
    let Problem {
        conv,
        xs,
        ws,
        ys,
        xt,
        wt,
        yt,
    } = Problem::new(
        &x,
        &w,
        x_dims,
        conv2d(stride, padding, dilation, groups),
        output_format.as_deref(),
        out_dtype,
    )?;
    let want = ys.bytes(yt).map_err(value_error)?;
    if y_len != want {
        return Err(value_error(format!(
            "the output holds {y_len} bytes; {} of {yt} needs {want}",
            ys.layout()
        )));
    }
    let (x_len, w_len) = (
        xs.bytes(xt).map_err(value_error)?,
        ws.bytes(wt).map_err(value_error)?,
    );
    let (xp, wp) = (x.4, w.4);
    py.detach(|| {
        // SAFETY: the package passes addresses of arrays it holds, whose shapes and strides
        // gave `xs` and `ws` (so they span `x_len` and `w_len` bytes), and of a writable
        // row-major output of `want` bytes.
        let (xd, wd) = unsafe {
            (
                std::slice::from_raw_parts(xp as *const u8, x_len),
                std::slice::from_raw_parts(wp as *const u8, w_len),
            )
        };
        let xr = TensorRef {
            layout: &xs,
            dtype: xt,
            data: xd,
        };
        let wr = TensorRef {
            layout: &ws,
            dtype: wt,
            data: wd,
        };
        let epilogue = Epilogue {
            bias: bias.as_deref(),
            relu,
            scale: scale.as_deref(),
        };
        // As `layoutkit conv` chooses (`conv2d_engine`): int8 for i8 operands, the
        // register-blocked engine for f32 NCHW/NHWC/NCHW<x>c, else (strided views included)
        // the reference.
        let out = conv2d_auto(
            &conv,
            xr,
            wr,
            &epilogue,
            &ys,
            yt,
            threads,
            ConvKernels::Auto,
        )
        .map(|(out, _)| out)
        .map_err(value_error)?;
        if want > 0 {
            // SAFETY: see above; `out` has exactly `want` bytes (the engine's contract).
            unsafe { std::ptr::copy_nonoverlapping(out.as_ptr(), y as *mut u8, want) };
        }
        Ok(())
    })
}
