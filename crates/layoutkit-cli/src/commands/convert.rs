use std::path::Path;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use layoutkit_core::plan::ConversionPlan;
use layoutkit_core::{npy, parse_format, CastSpec, DType, Dims, Quantization, ShapedLayout};
use serde_json::json;

use super::list;
use crate::args::{ConvertArgs, Device, Engine};
use crate::files::{input_name, output_name, read_input, Output};

pub fn run(a: &ConvertArgs, json_out: bool) -> Result<()> {
    let from = parse_format(&a.from)?;
    let to = parse_format(&a.to)?.with_fill(a.fill.unwrap_or(0.0));
    let winograd = from.transform().is_some() || to.transform().is_some();
    if from.transform().is_some() && to.transform().is_some() {
        bail!("both --from and --to are Winograd filter images; convert one of them to a filter");
    }
    if !winograd && !from.same_axes(&to) {
        return Err(layoutkit_core::Error::AxesDiffer {
            src: a.from.clone(),
            src_axes: from.axes_string(),
            dst: a.to.clone(),
            dst_axes: to.axes_string(),
        }
        .into());
    }
    let dst_dtype: Option<DType> = a.to_dtype.as_deref().map(str::parse).transpose()?;

    let file = read_input(&a.input)?;
    let array = npy::decode(&file).with_context(|| input_name(&a.input))?;
    let shape = &array.header.shape;
    let src_dtype = array.header.dtype;
    let dst_dtype = dst_dtype.unwrap_or(src_dtype);

    let dims = match &a.dims {
        Some(d) => Dims::parse(d)?,
        None if from.image().is_some() => bail!(
            "{} is an image ({}); pass --dims (an image's shape does not determine them)",
            input_name(&a.input),
            list(shape)
        ),
        None => ShapedLayout::infer_dims(&from, shape).with_context(|| {
            format!(
                "{} has shape {}; pass --dims",
                input_name(&a.input),
                list(shape)
            )
        })?,
    };
    let src = from.shaped(&dims)?;
    if &src.array_shape() != shape {
        bail!(
            "{} has shape {} but {} with dims {} has array shape {}",
            input_name(&a.input),
            list(shape),
            from,
            dims,
            list(&src.array_shape())
        );
    }
    if a.dims.is_none() && from.is_blocked() {
        eprintln!(
            "note: --dims not given; took {dims} from the shape of {} (its padding, if any, is treated as data)",
            input_name(&a.input)
        );
    }
    let quant = match (a.scale, a.zero_point) {
        (None, None) => None,
        (scale, zero_point) => Some(Quantization {
            scale: scale.unwrap_or(1.0),
            zero_point: zero_point.unwrap_or(0),
        }),
    };
    let timed;
    let (dst, output, bytes_written) = if winograd {
        if a.device != Device::Cpu {
            bail!("the Winograd filter transform runs on the CPU; drop --device");
        }
        if quant.is_some() {
            bail!("--scale/--zero-point do not apply to the Winograd filter transform");
        }
        let start = Instant::now();
        let (dst, out) = if to.transform().is_some() {
            layoutkit_cpu::winograd_filter_to_image(&src, &array.data, src_dtype, &to, dst_dtype)?
        } else {
            let dst = to.shaped(&dims_for_filter(&from, &dims)?)?;
            let out = layoutkit_cpu::winograd_image_to_filter(
                &src,
                &array.data,
                src_dtype,
                &dst,
                dst_dtype,
            )?;
            (dst, out)
        };
        timed = start.elapsed().as_secs_f64();
        let output = output_of(&a.output, dst_dtype, &dst, &out)?;
        (dst, output, out.len())
    } else if a.device == Device::Cuda {
        let dst = to.shaped(&dims)?;
        let cast = CastSpec::new(src_dtype, dst_dtype, quant)?;
        let gpu = layoutkit_cuda::Cuda::new(0)?;
        let start = Instant::now();
        let out = gpu.convert(&src, &array.data, &dst, &cast)?;
        timed = start.elapsed().as_secs_f64();
        let output = output_of(&a.output, dst_dtype, &dst, &out)?;
        (dst, output, out.len())
    } else if a.device == Device::Opencl {
        if quant.is_some() {
            bail!("--scale/--zero-point casts run on the CPU only; drop --device opencl");
        }
        let dst = to.shaped(&dims)?;
        let cl = layoutkit_opencl::OpenCl::new(None)?;
        let start = Instant::now();
        let out = cl.convert(&src, &array.data, src_dtype, &dst, dst_dtype)?;
        timed = start.elapsed().as_secs_f64();
        let output = output_of(&a.output, dst_dtype, &dst, &out)?;
        (dst, output, out.len())
    } else {
        let dst = to.shaped(&dims)?;
        let cast = CastSpec::new(src_dtype, dst_dtype, quant)?;
        let plan = ConversionPlan::new(&src, &dst)?;
        let threads = a
            .threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
            .max(1);
        // The converter writes straight into the output (a map of its temporary file for a
        // regular file), so the tensor never has to fit in memory. The header's length is a
        // multiple of 64 and the output's start page- or 64-byte aligned, so the data is
        // 64-byte aligned for the engine's streaming stores.
        let header = npy::header_bytes(dst_dtype, &dst.array_shape());
        let data_bytes = dst.bytes(dst_dtype)?;
        let mut output = Output::create(&a.output, header.len() + data_bytes)?;
        let (h, out) = output.bytes_mut().split_at_mut(header.len());
        h.copy_from_slice(&header);
        let start = Instant::now();
        match a.engine {
            Engine::Fast => layoutkit_cpu::convert_fast(&plan, &array.data, out, &cast, threads)?,
            Engine::Planned => layoutkit_cpu::convert_planned(&plan, &array.data, out, &cast)?,
            Engine::Reference => {
                layoutkit_cpu::convert_reference(&src, &array.data, &dst, out, &cast)?
            }
        }
        timed = start.elapsed().as_secs_f64();
        (dst, output, data_bytes)
    };
    let seconds = timed;
    let to_stdout = output.is_stdout();
    output.commit()?;
    let input_name = input_name(&a.input);
    let output_name = output_name(&a.output);

    if json_out {
        let doc = json!({
            "input": a.input.display().to_string(),
            "output": a.output.display().to_string(),
            "from": from.to_string(),
            "to": to.to_string(),
            "dims": crate::json::dims(&dims),
            "src_shape": shape,
            "dst_shape": dst.array_shape(),
            "src_dtype": src_dtype.name(),
            "dst_dtype": dst_dtype.name(),
            "bytes_read": array.data.len(),
            "bytes_written": bytes_written,
            "engine": format!("{:?}", a.engine).to_lowercase(),
            "device": format!("{:?}", a.device).to_lowercase(),
            "convert_seconds": seconds,
        });
        if to_stdout {
            crate::json::eprint(&doc);
        } else {
            crate::json::print(&doc);
        }
    } else {
        let line = format!(
            "{} {} {} {}  ->  {} {} {} {}  ({} -> {} bytes, {:.3} ms)",
            input_name,
            from,
            list(shape),
            src_dtype,
            output_name,
            to,
            list(&dst.array_shape()),
            dst_dtype,
            array.data.len(),
            bytes_written,
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

/// An output holding the `.npy` file of `data` (already converted) in `dst`, ready to commit.
fn output_of(path: &Path, dtype: DType, dst: &ShapedLayout, data: &[u8]) -> Result<Output> {
    let header = npy::header_bytes(dtype, &dst.array_shape());
    let mut output = Output::create(path, header.len() + data.len())?;
    let (h, d) = output.bytes_mut().split_at_mut(header.len());
    h.copy_from_slice(&header);
    d.copy_from_slice(data);
    Ok(output)
}

/// The filter dims (O, I, H=3, W=3) for a Winograd image's dims: given as O,I,H,W, or as
/// T,O,I (then H and W are 3).
fn dims_for_filter(image: &layoutkit_core::Layout, dims: &Dims) -> Result<Dims> {
    let axis = |c| layoutkit_core::Axis::from_letter(c).expect("a letter");
    if dims.get(axis('H')).is_some() {
        return Ok(dims.clone());
    }
    let get = |c| {
        dims.get(axis(c))
            .ok_or_else(|| anyhow::anyhow!("--dims {dims} lacks {c} for {image}"))
    };
    Ok(Dims::new(vec![
        (axis('O'), get('O')?),
        (axis('I'), get('I')?),
        (axis('H'), 3),
        (axis('W'), 3),
    ])?)
}
