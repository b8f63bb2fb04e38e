//! 2-D convolution on CUDA device memory: our tensor-core (or direct) kernels, run on the
//! caller's stream with no host copy. The package converts operands the kernel does not read
//! in place (other layouts, other types, the filter to OHWI) with our conversion kernels on the
//! same stream first, and the kernel's output to the asked layout and type after.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use layoutkit_core::DType;
use layoutkit_cuda::conv::ConvKernel;
use layoutkit_cuda::DeviceConv;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

use crate::conv::operand_layout;
use crate::convert::{gpu, locked};
use crate::layouts::parse_dtype;
use crate::{cuda_error, value_error};

/// An operand: format, shape, strides (elements), element type.
type Operand<'a> = (String, Vec<usize>, Vec<isize>, Bound<'a, PyAny>);

/// `conv2d_cuda_kernel`'s answer: input layout, input type, output type, input dims, output
/// dims, output layout.
type KernelInfo = (
    &'static str,
    &'static str,
    &'static str,
    String,
    String,
    &'static str,
);

/// The kernel for these operands ([`ConvKernel::for_problem`]'s rules).
#[allow(clippy::too_many_arguments)]
fn kernel(
    x: &Operand<'_>,
    w: &Operand<'_>,
    stride: (usize, usize),
    padding: (usize, usize),
    dilation: (usize, usize),
    groups: usize,
    bias: bool,
    relu: bool,
    out_dtype: Option<&Bound<'_, PyAny>>,
    x_dims: Option<&Bound<'_, PyAny>>,
    output_format: Option<&str>,
) -> PyResult<ConvKernel> {
    let xs = operand_layout(&x.0, &x.1, &x.2, x_dims)?;
    let ws = operand_layout(&w.0, &w.1, &w.2, None)?;
    let conv = layoutkit_core::conv::Conv2d {
        stride: [stride.0, stride.1],
        padding: [padding.0, padding.1],
        dilation: [dilation.0, dilation.1],
        groups,
    };
    let out = out_dtype.map(parse_dtype).transpose()?;
    ConvKernel::for_problem(
        &conv,
        &xs.dims(),
        &xs.layout().to_string(),
        parse_dtype(&x.3)?,
        &ws.dims(),
        parse_dtype(&w.3)?,
        bias,
        relu,
        out,
        output_format,
    )
    .map_err(value_error)
}

/// What the CUDA kernel for these operands reads and writes: `(layout, input dtype, output
/// dtype, input dims, output dims, output layout)`: the activations must be given contiguous
/// in `layout` and of the input type, the filter contiguous OHWI of the input type, and the
/// output is written contiguous in `output layout` (`output_format` where the kernel writes
/// it, else `layout`) with the output type. Errors (`ValueError`) name what no kernel takes.
#[pyfunction]
#[pyo3(signature = (x, w, stride, padding, dilation, groups, bias, relu, out_dtype = None, x_dims = None, output_format = None))]
#[allow(clippy::too_many_arguments)]
pub fn conv2d_cuda_kernel(
    x: Operand<'_>,
    w: Operand<'_>,
    stride: (usize, usize),
    padding: (usize, usize),
    dilation: (usize, usize),
    groups: usize,
    bias: bool,
    relu: bool,
    out_dtype: Option<&Bound<'_, PyAny>>,
    x_dims: Option<&Bound<'_, PyAny>>,
    output_format: Option<&str>,
) -> PyResult<KernelInfo> {
    let k = kernel(
        &x,
        &w,
        stride,
        padding,
        dilation,
        groups,
        bias,
        relu,
        out_dtype,
        x_dims,
        output_format,
    )?;
    // Some kernel takes it: `mma.sync`, the Hopper kernel (on sm_90; elsewhere the call
    // names why not) or the direct kernel.
    if let Some(why) = layoutkit_cuda::conv::unsupported_reason(&k).filter(|_| {
        layoutkit_cuda::conv::hopper_unsupported_reason(&k).is_some()
            && layoutkit_cuda::conv::direct_unsupported_reason(&k).is_some()
    }) {
        return Err(value_error(why));
    }
    let s = &k.shape;
    let x = format!("N={},C={},H={},W={}", s.n, s.c, s.h, s.w);
    let y = format!("N={},C={},H={},W={}", s.n, s.o, s.oh, s.ow);
    Ok((
        k.layout.format(),
        k.input.name(),
        k.out.name(),
        x,
        y,
        k.out_layout.format(),
    ))
}

/// Device buffers as (address, bytes): activations, filter, output; and the bias's address.
type Buffer = (u64, usize);
type Pointers = (Buffer, Buffer, u64, Buffer);

/// Compiled kernels per (device, stream, kernel), shared by every call of the process: one
/// per stream, as a convolution that splits K keeps a workspace that runs on one stream at a
/// time may use (the compiled code itself is shared through the kernel cache).
type Prepared = Mutex<HashMap<(usize, usize, String), Arc<DeviceConv>>>;

/// Queues the convolution on CUDA device `device`, stream `stream`: `x`, `w`, `b` and `y` are
/// device addresses of the operands [`conv2d_cuda_kernel`] describes for the same arguments
/// (`output_format` included; `b`: the per-channel parameters, f32: O bias values, zeros for
/// none; for int8 requantised to i8 the O scales then the O biases; ignored by int8 kernels
/// with an i32 output), `*_len` their sizes in bytes (checked).
#[pyfunction]
#[pyo3(signature = (device, x, w, stride, padding, dilation, groups, bias, relu, out_dtype, pointers, stream, x_dims = None, output_format = None))]
#[allow(clippy::too_many_arguments)]
pub fn conv2d_cuda(
    py: Python<'_>,
    device: usize,
    x: Operand<'_>,
    w: Operand<'_>,
    stride: (usize, usize),
    padding: (usize, usize),
    dilation: (usize, usize),
    groups: usize,
    bias: bool,
    relu: bool,
    out_dtype: Option<&Bound<'_, PyAny>>,
    pointers: Pointers,
    stream: usize,
    x_dims: Option<&Bound<'_, PyAny>>,
    output_format: Option<&str>,
) -> PyResult<()> {
    static PREPARED: OnceLock<Prepared> = OnceLock::new();
    let k = kernel(
        &x,
        &w,
        stride,
        padding,
        dilation,
        groups,
        bias,
        relu,
        out_dtype,
        x_dims,
        output_format,
    )?;
    let requant = layoutkit_cuda::conv::requantised(&k);
    if (k.input != DType::I8 && bias || requant) && pointers.2 == 0 {
        return Err(value_error("the bias (channel parameters) pointer is null"));
    }
    let (xp, wp, bp, yp) = pointers;
    py.detach(|| {
        let g = gpu(device)?;
        let cuda = locked(&g)?;
        let key = (device, stream, format!("{k:?}"));
        let conv = {
            let mut map = PREPARED
                .get_or_init(Default::default)
                .lock()
                .map_err(|_| PyRuntimeError::new_err("a CUDA call panicked earlier"))?;
            match map.get(&key) {
                Some(c) => c.clone(),
                None => {
                    let c = Arc::new(cuda.prepare_conv(&k).map_err(cuda_error)?);
                    map.insert(key, c.clone());
                    c
                }
            }
        };
        // SAFETY: the package passes device addresses of tensors it holds on `device` (the
        // primary context, where PyTorch and CuPy allocate) with their sizes in bytes (checked
        // against the kernel's), the per-channel parameters (O f32 values, 2 x O for a
        // requantised int8 kernel), a fresh output, and the caller's live current stream.
        unsafe { cuda.conv2d_on_stream(&conv, xp, wp, bp, yp, stream as _) }.map_err(cuda_error)
    })
}
