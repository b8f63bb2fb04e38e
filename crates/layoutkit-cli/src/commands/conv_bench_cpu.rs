//! `layoutkit conv bench --device cpu`: the CPU convolution per layer and activation layout,
//! optionally with the conversions from and to NCHW around it (the layout lesson).

use std::time::Instant;

use anyhow::{bail, Result};
use layoutkit_core::plan::ConversionPlan;
use layoutkit_core::{parse_format, CastSpec, DType, ShapedLayout};
use layoutkit_cpu::{
    blocked_supergroup, conv2d_blocked_into, conv2d_blocked_unsupported, conv2d_depthwise_into,
    conv2d_depthwise_supports, conv2d_fast_packed, conv2d_fast_supports, convert_fast,
    expand_groups, AlignedBuf, BlockedFilter, ConvKernels, DepthwiseFilter, Epilogue, PackedFilter,
    TensorRef,
};
use serde_json::json;

use super::conv_bench::noise;
use super::conv_layers::Layer;
use crate::args::{ConvBenchArgs, CpuConvEngine, KernelBuild};

/// A filter packed for one engine (the blocked engine's depthwise layers: the depthwise
/// kernel's).
enum Packed {
    /// The filter and the groups it was packed for (fewer where groups were joined:
    /// [`blocked_supergroup`]).
    Blocked(BlockedFilter, usize),
    Depthwise(DepthwiseFilter, ConvKernels),
    Fast(PackedFilter),
}

/// One convolution into `out` (f32 in `y`'s layout; allocated once per layout, as an engine
/// plans its activation memory).
fn conv_once(
    l: &Layer,
    packed: &Packed,
    x: TensorRef<'_>,
    y: &ShapedLayout,
    out: &mut AlignedBuf,
    threads: usize,
) -> Result<()> {
    let conv = l.conv();
    let ep = Epilogue::default();
    match packed {
        Packed::Blocked(w, groups) => {
            let joined = layoutkit_core::conv::Conv2d {
                groups: *groups,
                ..conv
            };
            conv2d_blocked_into(&joined, x, w, &ep, y, out, threads)?
        }
        Packed::Depthwise(w, k) => conv2d_depthwise_into(&conv, x, w, &ep, y, out, threads, *k)?,
        Packed::Fast(w) => {
            let v = conv2d_fast_packed(&conv, x, w, &ep, y, DType::F32, threads)?;
            out.copy_from_slice(&v);
        }
    }
    Ok(())
}

/// `src` (f32 bytes in `from`) converted to `to` by the fast engine, into a new buffer.
fn converted(
    from: &ShapedLayout,
    src: &[u8],
    to: &ShapedLayout,
    threads: usize,
) -> Result<AlignedBuf> {
    let mut out = AlignedBuf::zeroed(to.bytes(DType::F32)?);
    let plan = ConversionPlan::new(from, to)?;
    convert_fast(
        &plan,
        src,
        &mut out,
        &CastSpec::identity(DType::F32),
        threads,
    )?;
    Ok(out)
}

/// Median and minimum seconds of `repeats` timed calls after one warm-up.
fn median_of(repeats: usize, mut f: impl FnMut() -> Result<()>) -> Result<(f64, f64)> {
    f()?;
    let mut times = Vec::with_capacity(repeats);
    for _ in 0..repeats {
        let t = Instant::now();
        f()?;
        times.push(t.elapsed().as_secs_f64());
    }
    times.sort_by(f64::total_cmp);
    Ok((times[times.len() / 2], times[0]))
}

pub(super) fn run(
    a: &ConvBenchArgs,
    layers: &[&Layer],
    layouts: &[String],
    threads: usize,
    json_out: bool,
) -> Result<()> {
    if a.types != "f16" {
        bail!("--types is for --device cuda (the CPU engine computes in f32)");
    }
    let kernels = match a.kernels {
        KernelBuild::Auto => ConvKernels::Auto,
        KernelBuild::Avx512 => ConvKernels::Avx512,
        KernelBuild::Avx2 => ConvKernels::Avx2,
        KernelBuild::Portable => ConvKernels::Portable,
    }
    .resolve()?;
    let engine = match a.engine {
        CpuConvEngine::Blocked => format!("blocked-{kernels:?}").to_lowercase(),
        CpuConvEngine::Fast => "fast".to_string(),
    };
    let mut rows = Vec::new();
    if !json_out {
        outln!("engine: {engine}, {threads} thread(s), batch {}", a.batch);
        outln!(
            "{:<30} {:<8} {:>8} {:>9} {:>9} {:>12}",
            "layer",
            "layout",
            "GFLOP",
            "ms",
            "GFLOP/s",
            "ms +conv"
        );
    }
    for (li, l) in layers.iter().enumerate() {
        let conv = l.conv();
        let (xd, wd) = l.dims(a.batch)?;
        let yd = conv.output_dims(&xd, &wd)?;
        let flop = 2.0 * conv.macs(&xd, &wd)? as f64;
        let ws = parse_format("OIHW")?.shaped(&wd)?;
        let wb = noise(ws.elements(), 7 + li as u64);
        let wr = TensorRef {
            layout: &ws,
            dtype: DType::F32,
            data: &wb,
        };
        // Packed once per layer, outside the timing (an engine keeps packed weights).
        let depthwise = l.groups > 1 && l.groups == l.c && l.groups == l.o;
        let packed = match a.engine {
            CpuConvEngine::Blocked if depthwise => {
                Packed::Depthwise(DepthwiseFilter::new(wr)?, kernels)
            }
            CpuConvEngine::Blocked => {
                let s = blocked_supergroup(l.groups, l.o / l.groups, kernels.lanes());
                if s > 1 {
                    let (ws, wb) = expand_groups(wr, l.groups, s)?;
                    let wide = TensorRef {
                        layout: &ws,
                        dtype: DType::F32,
                        data: &wb,
                    };
                    Packed::Blocked(
                        BlockedFilter::new(wide, l.groups / s, kernels)?,
                        l.groups / s,
                    )
                } else {
                    Packed::Blocked(BlockedFilter::new(wr, l.groups, kernels)?, l.groups)
                }
            }
            CpuConvEngine::Fast => Packed::Fast(PackedFilter::new(wr, l.groups)?),
        };
        let nchw_x = parse_format("NCHW")?.shaped(&xd)?;
        let nchw_y = parse_format("NCHW")?.shaped(&yd)?;
        let x_plain = noise(nchw_x.elements(), li as u64);
        for name in layouts {
            eprint!("\r{} {name} ...        ", l.name);
            let xs = parse_format(name)?.shaped(&xd)?;
            let ys = parse_format(name)?.shaped(&yd)?;
            let xb = converted(&nchw_x, &x_plain, &xs, threads)?;
            let xr = TensorRef {
                layout: &xs,
                dtype: DType::F32,
                data: &xb,
            };
            let refused = match &packed {
                Packed::Blocked(w, _) => conv2d_blocked_unsupported(&xr, w),
                Packed::Depthwise(..) => (!conv2d_depthwise_supports(&conv, &xr, &wr))
                    .then(|| "the depthwise kernel takes NCHW, NHWC or NCHW<x>c".to_string()),
                Packed::Fast(_) => (!conv2d_fast_supports(&xr))
                    .then(|| "the fast convolution takes NCHW, NHWC or NCHW<x>c".to_string()),
            };
            // What an engine does not take (the blocked kernels' grouped layers whose output
            // channels per group are not whole vectors and cannot be joined into super-groups)
            // is listed as skipped, as the CUDA rows are.
            if let Some(why) = refused {
                if json_out {
                    rows.push(json!({"layer": l.name, "layout": xs.layout().to_string(),
                                     "device": "cpu", "engine": engine, "skipped": why}));
                } else {
                    eprint!("\r");
                    outln!("{:<30} {:<8} skipped: {why}", l.name, name);
                }
                continue;
            }
            let mut out = AlignedBuf::zeroed(ys.bytes(DType::F32)?);
            let (median, min) = median_of(a.repeats, || {
                conv_once(l, &packed, xr, &ys, &mut out, threads)?;
                std::hint::black_box(&out);
                Ok(())
            })?;
            // NCHW in, convert, convolve, convert back to NCHW (NCHW itself converts nothing).
            let is_nchw = xs.layout().to_string() == "NCHW";
            let with_conv = if a.with_conversions {
                Some(median_of(a.repeats, || {
                    if is_nchw {
                        conv_once(l, &packed, xr, &ys, &mut out, threads)?;
                        std::hint::black_box(&out);
                        return Ok(());
                    }
                    let xin = converted(&nchw_x, &x_plain, &xs, threads)?;
                    let xr = TensorRef {
                        layout: &xs,
                        dtype: DType::F32,
                        data: &xin,
                    };
                    conv_once(l, &packed, xr, &ys, &mut out, threads)?;
                    std::hint::black_box(converted(&ys, &out, &nchw_y, threads)?);
                    Ok(())
                })?)
                .map(|(med, _)| med)
            } else {
                None
            };
            let gflops = flop / median / 1e9;
            if json_out {
                rows.push(json!({
                    "layer": l.name, "layout": xs.layout().to_string(),
                    "input_dims": crate::json::dims(&xd), "filter_dims": crate::json::dims(&wd),
                    "stride": l.stride, "padding": l.pad, "flop": flop, "median_s": median,
                    "min_s": min, "gflops": gflops, "median_with_conversions_s": with_conv,
                    "threads": threads, "device": "cpu", "engine": engine,
                }));
            } else {
                eprint!("\r");
                let wc = with_conv.map_or(String::from("-"), |s| format!("{:.3}", s * 1e3));
                outln!(
                    "{:<30} {:<8} {:>8.2} {:>9.3} {:>9.1} {:>12}",
                    l.name,
                    name,
                    flop / 1e9,
                    median * 1e3,
                    gflops,
                    wc
                );
            }
        }
    }
    eprint!("\r{:40}\r", "");
    if json_out {
        crate::json::print(&json!({
            "batch": a.batch, "threads": threads, "engine": engine, "results": rows,
        }));
    }
    Ok(())
}
