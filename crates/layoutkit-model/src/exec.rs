//! Runs one tensor's plan (pack) or its inverse (unpack) with `layoutkit-cpu`: the fast engine,
//! or the reference converter (the oracle the tests compare with).

use layoutkit_core::plan::ConversionPlan;
use layoutkit_core::{parse_format, CastSpec, DType, Dims, Quantization, ShapedLayout};
use layoutkit_cpu::Error as CpuError;

use crate::jobs::Scratch;
use crate::plan::{Op, View};

/// Which converter runs the layout conversions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Engine {
    /// `layoutkit_cpu::convert_fast`: tiles, SIMD chosen at run time, threads.
    #[default]
    Fast,
    /// `layoutkit_cpu::convert_reference`: one element at a time (slow; for checking).
    Reference,
}

/// Converts `src` -> `dst` into `out` (exactly `dst`'s bytes).
/// `tmp` holds the intermediate of a split cast (reused from tensor to tensor: fresh pages
/// cost a fault each).
#[allow(clippy::too_many_arguments)]
pub(crate) fn convert_into(
    engine: Engine,
    threads: usize,
    src: &ShapedLayout,
    src_data: &[u8],
    dst: &ShapedLayout,
    out: &mut [u8],
    cast: &CastSpec,
    tmp: &mut Scratch,
) -> Result<(), CpuError> {
    match engine {
        Engine::Fast if splits(src, dst, cast) => {
            // A float cast fused into a transposition runs far below the speed of either part
            // alone (f32 -> f16 OIHW -> mace:conv2d_filter: 0.37 GB/s fused, 12.7 GB/s for the
            // cast and 4.0 GB/s for the f16 transposition on the 2-core machine), so the
            // layout is converted in the narrower type and the cast runs on contiguous data.
            // The result is the same bit for bit: the cast is per element and the fill (0) is
            // a destination value either way.
            let narrow = if cast.dst.size_bytes() < cast.src.size_bytes() {
                cast.dst
            } else {
                cast.src
            };
            let to_narrow = CastSpec::new(cast.src, narrow, None)?;
            let from_narrow = CastSpec::new(narrow, cast.dst, None)?;
            if narrow == cast.dst {
                let same = ConversionPlan::new(src, src)?;
                let tmp = tmp.get(src.bytes(narrow)?);
                layoutkit_cpu::convert_fast(&same, src_data, tmp, &to_narrow, threads)?;
                let plan = ConversionPlan::new(src, dst)?;
                layoutkit_cpu::convert_fast(&plan, tmp, out, &from_narrow, threads)
            } else {
                let plan = ConversionPlan::new(src, dst)?;
                let tmp = tmp.get(dst.bytes(narrow)?);
                layoutkit_cpu::convert_fast(&plan, src_data, tmp, &to_narrow, threads)?;
                let same = ConversionPlan::new(dst, dst)?;
                layoutkit_cpu::convert_fast(&same, tmp, out, &from_narrow, threads)
            }
        }
        Engine::Fast => {
            let plan = ConversionPlan::new(src, dst)?;
            layoutkit_cpu::convert_fast(&plan, src_data, out, cast, threads)
        }
        Engine::Reference => layoutkit_cpu::convert_reference(src, src_data, dst, out, cast),
    }
}

/// Whether a conversion runs as a layout change and a separate float cast.
fn splits(src: &ShapedLayout, dst: &ShapedLayout, cast: &CastSpec) -> bool {
    cast.src != cast.dst
        && cast.src.is_float()
        && cast.dst.is_float()
        && src.layout().to_string() != dst.layout().to_string()
}

fn convert_vec(
    engine: Engine,
    threads: usize,
    src: &ShapedLayout,
    src_data: &[u8],
    dst: &ShapedLayout,
    cast: &CastSpec,
) -> Result<Vec<u8>, CpuError> {
    let mut out = vec![0u8; dst.bytes(cast.dst)?];
    convert_into(
        engine,
        threads,
        src,
        src_data,
        dst,
        &mut out,
        cast,
        &mut Scratch::default(),
    )?;
    Ok(out)
}

fn shaped(view: &View) -> Result<ShapedLayout, CpuError> {
    Ok(view.layout.shaped(&view.dims)?)
}

/// A 1-D layout of `n` elements (a channel's slab).
fn line(n: usize) -> Result<ShapedLayout, CpuError> {
    Ok(parse_format("W")?.shaped(&Dims::parse(&format!("W={n}"))?)?)
}

/// The largest magnitude of each of `channels` equal runs of float elements.
fn channel_max(data: &[u8], dtype: DType, channels: usize) -> Vec<f64> {
    let size = dtype.size_bytes();
    let per = (data.len() / size).checked_div(channels).unwrap_or(0);
    let value = |b: &[u8]| -> f64 {
        match dtype {
            DType::F32 => f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
            DType::F64 => f64::from_le_bytes(b.try_into().unwrap_or([0; 8])),
            DType::F16 => half::f16::from_le_bytes([b[0], b[1]]).to_f64(),
            DType::BF16 => half::bf16::from_le_bytes([b[0], b[1]]).to_f64(),
            _ => 0.0,
        }
    };
    (0..channels)
        .map(|c| {
            data[c * per * size..(c + 1) * per * size]
                .chunks_exact(size)
                .map(|b| value(b).abs())
                .fold(0.0, |m, v| if v > m || v.is_nan() { v } else { m })
        })
        .collect()
}

/// Packs `data` (the source tensor's bytes) by `op` into `out` (the destination's bytes).
/// Returns the per-channel scales of a quantised tensor.
#[allow(clippy::too_many_arguments)]
pub(crate) fn pack(
    op: &Op,
    engine: Engine,
    threads: usize,
    src_dtype: DType,
    dst_dtype: DType,
    data: &[u8],
    out: &mut [u8],
    tmp: &mut Scratch,
) -> Result<Option<Vec<f32>>, CpuError> {
    let Op::Convert {
        view,
        target,
        winograd,
        quant,
        ..
    } = op
    else {
        out.copy_from_slice(data);
        return Ok(None);
    };
    let src = shaped(view)?;
    if *winograd {
        let (_, image) = layoutkit_cpu::winograd_filter_to_image(
            &src,
            data,
            src_dtype,
            target.layout(),
            dst_dtype,
        )?;
        out.copy_from_slice(&image);
        return Ok(None);
    }
    let Some((qview, channels)) = quant else {
        let cast = CastSpec::new(src_dtype, dst_dtype, None)?;
        convert_into(engine, threads, &src, data, target, out, &cast, tmp)?;
        return Ok(None);
    };
    // Per-channel symmetric quantisation: the channels outermost (a plain permutation), each
    // channel's run cast with its own scale, then the int8 tensor to the target layout.
    let by_channel;
    let ordered: &[u8] = if qview.layout().to_string() == src.layout().to_string() {
        data
    } else {
        by_channel = convert_vec(
            engine,
            threads,
            &src,
            data,
            qview,
            &CastSpec::identity(src_dtype),
        )?;
        &by_channel
    };
    let maxes = channel_max(ordered, src_dtype, *channels);
    let mut scales = Vec::with_capacity(*channels);
    for (c, m) in maxes.iter().enumerate() {
        if !m.is_finite() {
            return Err(CpuError::Unsupported(format!(
                "output channel {c} holds a NaN or infinite weight; it cannot be quantised"
            )));
        }
        let s = (*m as f32) / 127.0;
        scales.push(if s > 0.0 && s.is_finite() { s } else { 1.0 });
    }
    let per = qview.elements() / (*channels).max(1);
    let slab = line(per)?;
    let slab_plan = ConversionPlan::new(&slab, &slab)?;
    let (ss, ds) = (src_dtype.size_bytes(), dst_dtype.size_bytes());
    let mut q = vec![0u8; qview.elements() * ds];
    for (c, &scale) in scales.iter().enumerate() {
        let cast = CastSpec::new(
            src_dtype,
            dst_dtype,
            Some(Quantization {
                scale,
                zero_point: 0,
            }),
        )?;
        let from = &ordered[c * per * ss..(c + 1) * per * ss];
        let to = &mut q[c * per * ds..(c + 1) * per * ds];
        match engine {
            Engine::Fast => layoutkit_cpu::convert_fast(&slab_plan, from, to, &cast, 1)?,
            Engine::Reference => layoutkit_cpu::convert_reference(&slab, from, &slab, to, &cast)?,
        }
    }
    convert_into(
        engine,
        threads,
        qview,
        &q,
        target,
        out,
        &CastSpec::identity(dst_dtype),
        tmp,
    )?;
    Ok(Some(scales))
}

/// The inverse of [`pack`]: `data` in the target layout (`dst_dtype`) back to the source view
/// in `src_dtype`, dequantising with `scales` where given.
#[allow(clippy::too_many_arguments)]
pub(crate) fn unpack(
    op: &Op,
    threads: usize,
    src_dtype: DType,
    dst_dtype: DType,
    data: &[u8],
    scales: Option<&[f32]>,
    out: &mut [u8],
    tmp: &mut Scratch,
) -> Result<(), CpuError> {
    let Op::Convert {
        view,
        target,
        winograd,
        quant,
        ..
    } = op
    else {
        out.copy_from_slice(data);
        return Ok(());
    };
    let src = shaped(view)?;
    if *winograd {
        let filter =
            layoutkit_cpu::winograd_image_to_filter(target, data, dst_dtype, &src, src_dtype)?;
        out.copy_from_slice(&filter);
        return Ok(());
    }
    let (Some((qview, channels)), Some(scales)) = (quant, scales) else {
        let cast = CastSpec::new(dst_dtype, src_dtype, None)?;
        return convert_into(Engine::Fast, threads, target, data, &src, out, &cast, tmp);
    };
    if scales.len() != *channels {
        return Err(CpuError::Unsupported(format!(
            "{} scales for {channels} output channels",
            scales.len()
        )));
    }
    let q = convert_vec(
        Engine::Fast,
        threads,
        target,
        data,
        qview,
        &CastSpec::identity(dst_dtype),
    )?;
    let per = qview.elements() / (*channels).max(1);
    let slab = line(per)?;
    let slab_plan = ConversionPlan::new(&slab, &slab)?;
    let (ss, ds) = (src_dtype.size_bytes(), dst_dtype.size_bytes());
    let mut real = vec![0u8; qview.elements() * ss];
    for (c, &scale) in scales.iter().enumerate() {
        let cast = CastSpec::new(
            dst_dtype,
            src_dtype,
            Some(Quantization {
                scale,
                zero_point: 0,
            }),
        )?;
        layoutkit_cpu::convert_fast(
            &slab_plan,
            &q[c * per * ds..(c + 1) * per * ds],
            &mut real[c * per * ss..(c + 1) * per * ss],
            &cast,
            1,
        )?;
    }
    convert_into(
        Engine::Fast,
        threads,
        qview,
        &real,
        &src,
        out,
        &CastSpec::identity(src_dtype),
        tmp,
    )
}
