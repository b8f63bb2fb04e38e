//! `layoutkit conv bench`: the convolutions per layer (ResNet-50, VGG-16) and activation layout;
//! the CPU side is in `conv_bench_cpu`.

use anyhow::{bail, Context, Result};
use layoutkit_core::DType;
use serde_json::json;

use crate::args::{ConvBenchArgs, Device};

use super::conv_layers::{custom, network, Layer};

/// Deterministic values in [-1, 1) as f32 bytes.
pub(super) fn noise(n: usize, seed: u64) -> Vec<u8> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .flat_map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0).to_le_bytes()
        })
        .collect()
}

pub fn run(a: &ConvBenchArgs, json_out: bool) -> Result<()> {
    if a.batch == 0 || a.repeats == 0 {
        bail!("--batch and --repeats must be at least 1");
    }
    let threads = a
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1);
    let default_layouts = if a.device == Device::Cuda {
        "NHWC,NCHW,NC/32HW32"
    } else {
        "NCHW,NHWC,NCHW8c,NCHW16c"
    };
    let layouts: Vec<String> = a
        .layouts
        .as_deref()
        .unwrap_or(default_layouts)
        .split(',')
        .map(|s| s.trim().to_string())
        .collect();
    let all = if a.layer.is_empty() {
        network(&a.net)?
    } else {
        a.layer.iter().map(|s| custom(s)).collect::<Result<_>>()?
    };
    let layers: Vec<&Layer> = all
        .iter()
        .filter(|l| a.filter.as_deref().is_none_or(|f| l.name.contains(f)))
        .collect();
    if layers.is_empty() {
        bail!(
            "no layer name contains `{}`",
            a.filter.as_deref().unwrap_or("")
        );
    }
    if a.list {
        if json_out {
            let list: Vec<_> = layers
                .iter()
                .map(|l| {
                    json!({"name": l.name, "c": l.c, "hw": l.hw, "o": l.o, "k": l.k,
                           "stride": l.stride, "padding": l.pad, "groups": l.groups})
                })
                .collect();
            crate::json::print(&json!({ "layers": list }));
        } else {
            for l in &layers {
                outln!(
                    "{:<28} C={:<5} H=W={:<4} O={:<5} {}x{} stride {} padding {} groups {}",
                    l.name,
                    l.c,
                    l.hw,
                    l.o,
                    l.k,
                    l.k,
                    l.stride,
                    l.pad,
                    l.groups
                );
            }
        }
        return Ok(());
    }
    if a.device == Device::Cuda {
        return run_cuda(a, &layers, &layouts, json_out);
    }
    if a.device != Device::Cpu {
        bail!("conv bench runs on --device cpu or cuda");
    }
    if a.types != "f16" {
        bail!("--types is for --device cuda (the CPU engine computes in f32)");
    }
    super::conv_bench_cpu::run(a, &layers, &layouts, threads, json_out)
}

/// The tensor-core kernel per layer, activation layout and type (f16 or bf16 with an output of
/// the same type, i8 with the i32 sums, or i8 requantised to i8 with a per-channel scale:
/// `i8q`); combinations the kernel does not take are listed as skipped.
fn run_cuda(
    a: &ConvBenchArgs,
    layers: &[&Layer],
    layouts: &[String],
    json_out: bool,
) -> Result<()> {
    use layoutkit_cuda::conv::{out_layout_reason, ConvKernel, ConvLayout, ConvShape};
    // `NCHW>NHWC`: NCHW activations converted to NHWC and the kernel reading NHWC, which
    // writes NCHW itself (f16/bf16; int8's output is converted back), timed together;
    // `NCHW-planned`: what `conv` runs for NCHW activations (that route
    // or the NCHW kernel in place, as ConvKernel::for_problem plans it; see layoutkit-cuda's
    // conv_nchw.rs).
    let kinds: Vec<(ConvLayout, Route)> = layouts
        .iter()
        .map(|l| match l.replace(' ', "").as_str() {
            "NCHW>NHWC" => Ok((ConvLayout::Nhwc, Route::ViaNhwc)),
            "NCHW-planned" => Ok((ConvLayout::Nchw, Route::Planned)),
            _ => ConvLayout::from_format(l)
                .map(|k| (k, Route::Kernel))
                .with_context(|| {
                    format!(
                        "the CUDA kernel reads NHWC, NCHW or NC/32HW32 activations (or \
                         NCHW>NHWC: NCHW converted through NHWC, NCHW-planned: as `conv` \
                         plans NCHW), not `{l}`"
                    )
                }),
        })
        .collect::<Result<_>>()?;
    // (name, input, output)
    let types: Vec<(&str, DType, DType)> = a
        .types
        .split(',')
        .map(|t| match t.trim() {
            "f16" => Ok(("f16", DType::F16, DType::F16)),
            "bf16" => Ok(("bf16", DType::BF16, DType::BF16)),
            "i8" => Ok(("i8", DType::I8, DType::I32)),
            "i8q" => Ok(("i8q", DType::I8, DType::I8)),
            other => bail!("--types takes f16, bf16, i8 and i8q, not `{other}`"),
        })
        .collect::<Result<_>>()?;
    let gpu = layoutkit_cuda::Cuda::new(0)?;
    // Ten convolutions per timed repetition, in a CUDA graph (GPU time only) unless asked.
    let launches = if a.host_launches {
        layoutkit_cuda::Launches::Host(10)
    } else {
        layoutkit_cuda::Launches::Graph(10)
    };
    let mut rows = Vec::new();
    if !json_out {
        outln!(
            "device: {} (OHWI filter; f16/bf16: f32 sums, f16/bf16 output; i8: i32 sums and output; i8q: i32 sums requantised to i8; TOPS; times of {} launches)",
            gpu.name(),
            if a.host_launches { "host-queued" } else { "CUDA-graph" }
        );
        outln!(
            "{:<26} {:<10} {:>5} {:>10} {:>9} {:>10} {:>9}  kernel",
            "layer",
            "layout",
            "type",
            "GFLOP",
            "ms",
            "TFLOP/s",
            "MiB moved"
        );
    }
    for (li, l) in layers.iter().enumerate() {
        let conv = l.conv();
        let (xd, wd) = l.dims(a.batch)?;
        // Square inputs and kernels: OH = OW.
        let oh = conv.output_dims(&xd, &wd)?.entries()[2].1;
        let shape = ConvShape {
            n: a.batch,
            h: l.hw,
            w: l.hw,
            c: l.c,
            o: l.o,
            kh: l.k,
            kw: l.k,
            oh,
            ow: oh,
            conv,
        };
        let flop = 2.0 * conv.macs(&xd, &wd)? as f64;
        let w_elems = l.o * l.k * l.k * (l.c / l.groups);
        // Requantisation scales of the size that takes these sums into the int8 range.
        let scale: Vec<f32> = (0..l.o).map(|i| (1 + i % 5) as f32 / 65536.0).collect();
        for &(name, input, out) in &types {
            let (x, w) = if input == DType::I8 {
                (
                    byte_noise(a.batch * l.hw * l.hw * l.c, li as u64),
                    byte_noise(w_elems, 7 + li as u64),
                )
            } else {
                (
                    half_noise(a.batch * l.hw * l.hw * l.c, li as u64, input),
                    half_noise(w_elems, 7 + li as u64, input),
                )
            };
            for &(layout, route) in &kinds {
                let label = match route {
                    Route::ViaNhwc => "NCHW>NHWC",
                    Route::Planned => "NCHW-planned",
                    Route::Kernel => layout.format(),
                };
                let mut kernel = ConvKernel {
                    shape,
                    layout,
                    out_layout: layout,
                    input,
                    out,
                    bias: false,
                    relu: false,
                };
                let mut via_nhwc = route == Route::ViaNhwc;
                if via_nhwc {
                    // The kernel writes NCHW itself where it can (f16/bf16), else its NHWC
                    // output is converted back.
                    let to_nchw = ConvKernel {
                        out_layout: ConvLayout::Nchw,
                        ..kernel
                    };
                    if out_layout_reason(&to_nchw).is_none() {
                        kernel = to_nchw;
                    }
                }
                if route == Route::Planned {
                    let planned = ConvKernel::for_problem(
                        &conv,
                        &xd,
                        "NCHW",
                        input,
                        &wd,
                        input,
                        false,
                        false,
                        Some(kernel.out),
                        None,
                    )?;
                    via_nhwc = planned.layout == ConvLayout::Nhwc;
                    kernel.layout = planned.layout;
                    kernel.out_layout = planned.out_layout;
                }
                // Problems the tensor-core kernels do not take (the stem's C = 3, groups) run
                // in the direct kernel where it takes them, as `conv` runs them.
                let path = match gpu.conv_path(&kernel) {
                    Ok(p) => p,
                    Err(e) => {
                        let why = e.to_string();
                        if json_out {
                            rows.push(json!({"layer": l.name, "layout": label,
                                         "dtype": name, "skipped": why}));
                        } else {
                            outln!("{:<26} {:<10} {:>5} skipped: {why}", l.name, label, name);
                        }
                        continue;
                    }
                };
                eprint!("\r{} {label} {name} ...        ", l.name);
                let (_, t) = if via_nhwc {
                    gpu.conv2d_nchw_via_nhwc_timed(&kernel, &x, &w, a.repeats, launches)?
                } else {
                    let scale = layoutkit_cuda::conv::requantised(&kernel).then_some(&scale[..]);
                    gpu.conv2d_timed(&kernel, &x, &w, (None, scale), a.repeats, launches)?
                };
                let median = t.median();
                let e = input.size_bytes();
                let moved = ((a.batch * l.hw * l.hw * l.c + w_elems) * e
                    + a.batch * oh * oh * l.o * kernel.out.size_bytes())
                    as f64
                    / (1 << 20) as f64;
                let tflops = flop / median / 1e12;
                eprint!("\r");
                if json_out {
                    rows.push(json!({
                        "layer": l.name, "layout": label, "dtype": name,
                        "flop": flop, "median_s": median, "tflops": tflops, "mib_moved": moved,
                        "device": "cuda", "kernel": path.label(&kernel),
                        "launches": launches.name(),
                        "route": if via_nhwc { "via NHWC" } else { "in place" },
                    }));
                } else {
                    outln!(
                        "{:<26} {:<10} {:>5} {:>10.2} {:>9.4} {:>10.1} {:>9.1}  {}",
                        l.name,
                        label,
                        name,
                        flop / 1e9,
                        median * 1e3,
                        tflops,
                        moved,
                        path.label(&kernel)
                    );
                }
            }
        }
    }
    eprint!("\r{:40}\r", "");
    if json_out {
        crate::json::print(&json!({ "batch": a.batch, "device": gpu.name(),
                                    "launches": launches.name(), "results": rows }));
    }
    Ok(())
}

/// How a CUDA row reads its activations (see `run_cuda`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Route {
    /// The kernel reads the layout itself.
    Kernel,
    /// NCHW converted to NHWC for the kernel, which writes NCHW (f16, bf16) or NHWC converted
    /// back (int8).
    ViaNhwc,
    /// NCHW as `conv` plans it.
    Planned,
}

/// Deterministic bytes (int8 values over their whole range).
fn byte_noise(n: usize, seed: u64) -> Vec<u8> {
    noise(n.div_ceil(4), seed).into_iter().take(n).collect()
}

/// f16 or bf16 (`t`) bit patterns of deterministic values in [-1, 1).
fn half_noise(n: usize, seed: u64, t: DType) -> Vec<u8> {
    noise(n, seed)
        .chunks_exact(4)
        .flat_map(|b| {
            let v = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            if t == DType::BF16 {
                half::bf16::from_f32(v).to_le_bytes()
            } else {
                half::f16::from_f32(v).to_le_bytes()
            }
        })
        .collect()
}
