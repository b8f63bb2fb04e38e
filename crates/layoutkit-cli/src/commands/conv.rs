use std::path::Path;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use layoutkit_core::cast::Scalar;
use layoutkit_core::conv::Conv2d;
use layoutkit_core::{npy, parse_format, CastSpec, DType, Dims, ShapedLayout};
use layoutkit_cpu::{
    conv2d_auto, conv2d_blocked, conv2d_engine, conv2d_fast, conv2d_reference, ConvKernels,
    CpuConvEngine, Epilogue, TensorRef,
};
use serde_json::json;

use super::list;
use crate::args::{ConvArgs, ConvEngine, Device};
use crate::files::{input_name, output_name, read_input, write_output};

/// An operand read from `path`: its shaped layout (dims from `dims` or the array's shape),
/// element type and bytes.
fn operand(
    path: &Path,
    format: &str,
    dims: Option<&str>,
) -> Result<(ShapedLayout, DType, Vec<u8>)> {
    let layout = parse_format(format)?;
    let file = read_input(path)?;
    let array = npy::decode(&file).with_context(|| input_name(path))?;
    let shape = &array.header.shape;
    let dims = match dims {
        Some(d) => Dims::parse(d)?,
        None => ShapedLayout::infer_dims(&layout, shape).with_context(|| {
            format!(
                "{} has shape {} for {layout}; pass its dims",
                input_name(path),
                list(shape)
            )
        })?,
    };
    let shaped = layout.shaped(&dims)?;
    if &shaped.array_shape() != shape {
        bail!(
            "{} has shape {} but {layout} with dims {dims} has array shape {}",
            input_name(path),
            list(shape),
            list(&shaped.array_shape())
        );
    }
    Ok((shaped, array.header.dtype, array.data.to_vec()))
}

/// A bias or scale file's values as f64 (any element type, one value per output channel;
/// `what` names it in errors).
fn read_channel_values(path: &Path, what: &str) -> Result<Vec<f64>> {
    let file = read_input(path)?;
    let array = npy::decode(&file).with_context(|| input_name(path))?;
    if array.header.shape.len() != 1 {
        bail!(
            "{} has shape {}; a {what} is one value per output channel",
            input_name(path),
            list(&array.header.shape)
        );
    }
    let t = array.header.dtype;
    let to_f64 = CastSpec::new(t, DType::F64, None)?;
    Ok(array
        .data
        .chunks_exact(t.size_bytes())
        .map(|b| match to_f64.apply(Scalar::read(t, b)) {
            Scalar::F64(v) => v,
            _ => unreachable!("a cast to f64 gives f64"),
        })
        .collect())
}

pub fn run(a: &ConvArgs, json_out: bool) -> Result<()> {
    let (Some(input), Some(filter), Some(output)) = (&a.input, &a.filter, &a.output) else {
        bail!("conv needs X.npy W.npy Y.npy (or `conv bench`)");
    };
    let (x, x_dtype, x_data) = operand(input, &a.input_format, a.input_dims.as_deref())?;
    let (w, w_dtype, w_data) = operand(filter, &a.filter_format, a.filter_dims.as_deref())?;
    let conv = Conv2d {
        stride: a.stride,
        padding: a.padding,
        dilation: a.dilation,
        groups: a.groups,
    };
    let y_dims = conv.output_dims(&x.dims(), &w.dims())?;
    let y_format = a.output_format.as_deref().unwrap_or(&a.input_format);
    let y = parse_format(y_format)?.shaped(&y_dims)?;
    let y_dtype = match a.output_dtype.as_deref() {
        Some(t) => t.parse()?,
        None if x_dtype.is_float() => x_dtype,
        None => DType::I32,
    };
    let bias = a
        .bias
        .as_deref()
        .map(|p| read_channel_values(p, "bias"))
        .transpose()?;
    let scale = a
        .scale
        .as_deref()
        .map(|p| read_channel_values(p, "scale"))
        .transpose()?;
    let epilogue = Epilogue {
        bias: bias.as_deref(),
        relu: a.relu,
        scale: scale.as_deref(),
    };
    let xr = TensorRef {
        layout: &x,
        dtype: x_dtype,
        data: &x_data,
    };
    let wr = TensorRef {
        layout: &w,
        dtype: w_dtype,
        data: &w_data,
    };
    let threads = a
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1);
    // `auto` is the library's choice (int8, blocked or reference); `blocked` the same where it
    // chooses a fast engine, else the blocked engine's own error.
    let auto = conv2d_engine(&xr, &wr);
    let engine = match a.engine {
        ConvEngine::Auto if auto == CpuConvEngine::Reference => ConvEngine::Reference,
        ConvEngine::Auto => ConvEngine::Blocked,
        e => e,
    };
    let start = Instant::now();
    let (out, engine) = match a.device {
        Device::Cuda => (conv_cuda(&conv, xr, wr, &epilogue, &y, y_dtype)?, "cuda"),
        Device::Cpu if engine == ConvEngine::Blocked && auto != CpuConvEngine::Reference => {
            let (out, ran) = conv2d_auto(
                &conv,
                xr,
                wr,
                &epilogue,
                &y,
                y_dtype,
                threads,
                ConvKernels::Auto,
            )?;
            (out, ran.name())
        }
        Device::Cpu if engine == ConvEngine::Blocked => (
            conv2d_blocked(
                &conv,
                xr,
                wr,
                &epilogue,
                &y,
                y_dtype,
                threads,
                ConvKernels::Auto,
            )?,
            "blocked",
        ),
        Device::Cpu if engine == ConvEngine::Fast => (
            conv2d_fast(&conv, xr, wr, &epilogue, &y, y_dtype, threads)?,
            "fast",
        ),
        Device::Cpu => (
            conv2d_reference(&conv, xr, wr, &epilogue, &y, y_dtype)?,
            "reference",
        ),
        Device::Opencl => bail!("conv runs on --device cpu or cuda"),
    };
    let seconds = start.elapsed().as_secs_f64();
    let header = npy::header_bytes(y_dtype, &y.array_shape());
    write_output(output, &[&header, &out])?;
    let to_stdout = crate::files::is_stdio(output);
    let macs = conv.macs(&x.dims(), &w.dims())?;
    if json_out {
        let doc = json!({
            "output": output.display().to_string(),
            "input_dims": crate::json::dims(&x.dims()),
            "filter_dims": crate::json::dims(&w.dims()),
            "output_dims": crate::json::dims(&y_dims),
            "output_format": y.layout().to_string(),
            "output_shape": y.array_shape(),
            "output_dtype": y_dtype.name(),
            "stride": a.stride,
            "padding": a.padding,
            "dilation": a.dilation,
            "groups": a.groups,
            "macs": macs,
            "engine": engine,
            "seconds": seconds,
        });
        if to_stdout {
            crate::json::eprint(&doc);
        } else {
            crate::json::print(&doc);
        }
    } else {
        let line = format!(
            "{} ({} {}) * {} ({} {}) -> {} {} {} {} ({} MACs, {engine}, {:.3} ms)",
            input_name(input),
            x.layout(),
            x.dims(),
            input_name(filter),
            w.layout(),
            w.dims(),
            output_name(output),
            y.layout(),
            y_dims,
            y_dtype,
            macs,
            seconds * 1e3
        );
        if to_stdout {
            eprintln!("{line}");
        } else {
            outln!("{line}");
        }
    }
    Ok(())
}

/// The convolution on the GPU. The kernel reads the activations in their own layout when it
/// has it (NHWC, NCHW, NC/32HW32), else in NHWC; i8 activations and filter run the int8
/// kernel with exact i32 sums (no bias; or requantised with the scale and bias when `y_dtype`
/// is i8; the scale and bias are rounded to f32), bf16 activations the bf16 kernel, everything else f16,
/// both with f32 sums (operands rounded on the host, exact when already of that type). The
/// filter goes over as OHWI; the kernel's output (f32 or i32, in the layout it writes: NCHW
/// when `y` is NCHW and an f16/bf16 kernel reads NHWC, else the layout it reads) is converted
/// on the host to `y`'s layout and `y_dtype`.
fn conv_cuda(
    conv: &Conv2d,
    x: TensorRef<'_>,
    w: TensorRef<'_>,
    epilogue: &Epilogue<'_>,
    y: &ShapedLayout,
    y_dtype: DType,
) -> Result<Vec<u8>> {
    use layoutkit_cuda::conv::ConvKernel;
    let (xd, wd) = (x.layout.dims(), w.layout.dims());
    let out = conv.output_dims(&xd, &wd)?;
    let kernel = ConvKernel::for_problem(
        conv,
        &xd,
        &x.layout.layout().to_string(),
        x.dtype,
        &wd,
        w.dtype,
        epilogue.bias.is_some(),
        epilogue.relu,
        // int8 operands requantised to an i8 output: the kernel writes i8 itself.
        (y_dtype == DType::I8).then_some(DType::I8),
        Some(&y.layout().to_string()),
    )?;
    let (input, layout) = (kernel.input, kernel.layout);
    let to = |t: TensorRef<'_>, format: &str, d: &Dims| -> Result<Vec<u8>> {
        let dst = parse_format(format)?.shaped(d)?;
        Ok(layoutkit_cpu::convert(
            t.layout,
            t.data,
            &dst,
            &CastSpec::new(t.dtype, input, None)?,
        )?)
    };
    let xb = to(x, layout.format(), &xd)?;
    let wb = to(w, "OHWI", &wd)?;
    let f32s = |v: &[f64]| -> Vec<f32> { v.iter().map(|&v| v as f32).collect() };
    let bias = epilogue.bias.map(f32s);
    let scale = epilogue.scale.map(f32s);
    let gpu = layoutkit_cuda::Cuda::new(0)?;
    let (raw, _) = gpu.conv2d_timed(
        &kernel,
        &xb,
        &wb,
        (bias.as_deref(), scale.as_deref()),
        0,
        layoutkit_cuda::Launches::Host(1),
    )?;
    let plain = parse_format(kernel.out_layout.format())?.shaped(&out)?;
    Ok(layoutkit_cpu::convert(
        &plain,
        &raw,
        y,
        &CastSpec::new(kernel.out, y_dtype, None)?,
    )?)
}
