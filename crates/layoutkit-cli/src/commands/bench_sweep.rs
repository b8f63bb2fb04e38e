//! `layoutkit bench --sweep`: every conversion of the standard set and its inverse, and the
//! MACE image types, over a fixed grid of shape classes (channels x spatial extent) and batch
//! sizes, each row timed against a plain copy of the same bytes in the same run, ending with the
//! worst rows and the median ratio per size class.
//!
//! The grid (also in `layoutkit bench --help` and the README):
//! * channels 1, 3, 4, 16, 24, 250, 256, 1000, 2048; spatial 1x1, 7x7, 14x14, 56x56, 64x64,
//!   224x224, 1024x1024 (filters: 1x1, 3x3, 7x7, with O in the batch's role and I = channels);
//! * `small` (the default) takes 3 spatial extents per channel count (those models pair with
//!   it: few channels with large images, many channels with small planes), `full` every pair;
//! * per class, a batch N giving a tensor of 64 KiB..1 MiB (where one image is at most 1 MiB),
//!   one of about 32 MiB, and with `full` one of about 1 GiB (capped by `--sweep-max-mib`);
//!   single images larger than the target run with N = 1 up to the cap;
//! * f32 and f16 everywhere; f32 -> f16 and f32 -> i8 casts and i8 on NCHW <-> NHWC and
//!   NCHW -> NCHW32c (cuDNN's NC/32HW32) and back.

use std::io::IsTerminal;
use std::time::Instant;

use anyhow::{bail, Result};
use layoutkit_core::plan::ConversionPlan;
use layoutkit_core::{parse_format, CastSpec, DType, Dims};
use serde_json::{json, Value};

use super::bench::{bench_one, Row, Timing};
use crate::args::{BenchArgs, Device, SweepSize};

/// Activation conversions (axes N, C, H, W): the standard set's, their inverses, and MACE's
/// activation images.
const ACTIVATIONS: &[(&str, &str)] = &[
    ("NCHW", "NHWC"),
    ("NHWC", "NCHW"),
    ("NCHW", "NCHW32c"),
    ("NCHW32c", "NCHW"),
    ("NCHW", "kHWC8"),
    ("kHWC8", "NCHW"),
    ("NHWC", "mace:in_out_channel"),
    ("mace:in_out_channel", "NHWC"),
    ("NHWC", "mace:in_out_height"),
    ("mace:in_out_height", "NHWC"),
    ("NHWC", "mace:in_out_width"),
    ("mace:in_out_width", "NHWC"),
];

/// Filter conversions (axes O, I, H, W).
const FILTERS: &[(&str, &str)] = &[
    ("OIHW", "OIHW16i16o"),
    ("OIHW16i16o", "OIHW"),
    ("OIHW", "mace:conv2d_filter"),
    ("mace:conv2d_filter", "OIHW"),
];

/// Conversions that also run the casts and i8.
const CAST_ROWS: &[(&str, &str)] = &[
    ("NCHW", "NHWC"),
    ("NHWC", "NCHW"),
    ("NCHW", "NCHW32c"),
    ("NCHW32c", "NCHW"),
];

const CHANNELS: &[usize] = &[1, 3, 4, 16, 24, 250, 256, 1000, 2048];
const SPATIAL: &[usize] = &[1, 7, 14, 56, 64, 224, 1024];
const FILTER_SPATIAL: &[usize] = &[1, 3, 7];

/// The `small` grid's spatial extents per channel count.
fn small_spatial(c: usize) -> &'static [usize] {
    match c {
        1..=4 => &[64, 224, 1024],
        5..=64 => &[14, 56, 224],
        65..=512 => &[7, 14, 64],
        _ => &[1, 7, 14],
    }
}

const KIB: usize = 1 << 10;
const MIB: usize = 1 << 20;

/// One row of the sweep, before it is timed.
pub(crate) struct Case {
    pub from: &'static str,
    pub to: &'static str,
    pub dims: String,
    pub st: DType,
    pub dt: DType,
    /// Bytes of the source tensor.
    pub tensor_bytes: usize,
}

impl Case {
    fn label(&self) -> String {
        let ty = if self.st == self.dt {
            self.st.to_string()
        } else {
            format!("{}>{}", self.st, self.dt)
        };
        format!("{}->{} {ty} {}", self.from, self.to, self.dims)
    }
}

/// The size class a tensor of `bytes` falls in (the goals differ per class).
pub(crate) fn size_class(bytes: usize) -> &'static str {
    match bytes {
        b if b < MIB => "<1MiB",
        b if b < 8 * MIB => "1-8MiB",
        _ => ">=8MiB",
    }
}

/// The batch sizes of a class whose single image is `image` bytes: a small tensor (64 KiB to
/// 1 MiB) where an image fits, then one near each of `targets` bytes, up to `cap` bytes.
fn batches(image: usize, targets: &[usize], cap: usize) -> Vec<usize> {
    let mut out = Vec::new();
    if image <= MIB {
        out.push((64 * KIB).div_ceil(image).min(MIB / image).max(1));
    }
    for &t in targets {
        let n = (t + image / 2) / image;
        let n = n.max(1);
        if n * image <= cap && n * image >= 8 * MIB && !out.contains(&n) {
            out.push(n);
        }
    }
    out
}

/// The sweep's cases for `size`, up to `cap` bytes per tensor.
pub(crate) fn cases(size: SweepSize, cap: usize) -> Vec<Case> {
    let targets: &[usize] = match size {
        SweepSize::Small => &[32 * MIB],
        SweepSize::Full => &[32 * MIB, 1024 * MIB],
    };
    let mut out = Vec::new();
    let types = |from: &str, to: &str| {
        let mut t = vec![(DType::F32, DType::F32), (DType::F16, DType::F16)];
        if CAST_ROWS.contains(&(from, to)) {
            t.extend([
                (DType::F32, DType::F16),
                (DType::F32, DType::I8),
                (DType::I8, DType::I8),
            ]);
        }
        t
    };
    for &(from, to) in ACTIVATIONS {
        for (st, dt) in types(from, to) {
            for &c in CHANNELS {
                let spatial = match size {
                    SweepSize::Small => small_spatial(c),
                    SweepSize::Full => SPATIAL,
                };
                for &s in spatial {
                    let image = c * s * s * st.size_bytes();
                    for n in batches(image, targets, cap) {
                        out.push(Case {
                            from,
                            to,
                            dims: format!("N={n},C={c},H={s},W={s}"),
                            st,
                            dt,
                            tensor_bytes: n * image,
                        });
                    }
                }
            }
        }
    }
    for &(from, to) in FILTERS {
        for (st, dt) in types(from, to) {
            for &i in CHANNELS {
                for &s in FILTER_SPATIAL {
                    if size == SweepSize::Small && s != 3 && i != 3 {
                        continue;
                    }
                    let filter = i * s * s * st.size_bytes();
                    for o in batches(filter, targets, cap) {
                        out.push(Case {
                            from,
                            to,
                            dims: format!("O={o},I={i},H={s},W={s}"),
                            st,
                            dt,
                            tensor_bytes: o * filter,
                        });
                    }
                }
            }
        }
    }
    out
}

/// The median time of one call converting a 12-element tensor (NCHW -> NHWC, N=1,C=3,H=2,W=2,
/// f32), in seconds: with the conversion prepared beforehand (the engine's per-call overhead, as
/// the sweep's rows are timed), and through `convert_fast`, which cuts the plan into work items
/// on every call.
fn call_overhead(threads: usize) -> Result<(f64, f64)> {
    let dims = Dims::parse("N=1,C=3,H=2,W=2")?;
    let src = parse_format("NCHW")?.shaped(&dims)?;
    let dst = parse_format("NHWC")?.shaped(&dims)?;
    let plan = ConversionPlan::new(&src, &dst)?;
    let cast = CastSpec::new(DType::F32, DType::F32, None)?;
    let conversion = layoutkit_cpu::FastConversion::new(&plan, &cast, threads)?;
    let data = vec![0u8; 48];
    let mut out = vec![0u8; 48];
    let mut time = |unprepared: bool| -> Result<f64> {
        let mut times = Vec::with_capacity(2000);
        for _ in 0..2000 {
            let t0 = Instant::now();
            if unprepared {
                layoutkit_cpu::convert_fast(&plan, &data, &mut out, &cast, threads)?;
            } else {
                conversion.run(&data, &mut out)?;
            }
            times.push(t0.elapsed().as_secs_f64());
        }
        times.sort_by(f64::total_cmp);
        Ok(times[times.len() / 2])
    };
    Ok((time(false)?, time(true)?))
}

/// Runs the sweep (CPU only) and prints its rows and summary.
pub fn run(a: &BenchArgs, json_out: bool) -> Result<()> {
    if a.device == Device::Opencl {
        bail!("--sweep runs on --device cpu or cuda");
    }
    // On CUDA every row's kernels are compiled once (kept in the disk cache) and each row is
    // timed with CUDA events against a device copy of the same bytes; rows of 1 MiB or less
    // are also compared with an empty kernel's launch timed in the same run.
    let gpu = match a.device {
        Device::Cuda => Some(layoutkit_cuda::Cuda::new(0)?),
        _ => None,
    };
    if a.threads == 0 {
        bail!("--threads must be at least 1");
    }
    let cap = a.sweep_max_mib.saturating_mul(MIB);
    let words: Vec<&str> = a
        .sweep_filter
        .as_deref()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let cases: Vec<Case> = cases(a.sweep_size, cap)
        .into_iter()
        .filter(|c| {
            let l = c.label();
            words.iter().all(|w| l.contains(w))
        })
        .collect();
    if a.list {
        for c in &cases {
            outln!("{}", c.label());
        }
        return Ok(());
    }
    let progress = std::io::stderr().is_terminal();
    let mut rows: Vec<(Row, usize)> = Vec::new();
    for (k, c) in cases.iter().enumerate() {
        if progress {
            eprint!("\r[{}/{}] {:60}", k + 1, cases.len(), c.label());
        }
        // Small tensors take microseconds: more repetitions for a stable median.
        let repeats = a
            .repeats
            .max(1)
            .max((4 * MIB / c.tensor_bytes.max(1)).min(500));
        let timing = Timing {
            repeats,
            threads: a.threads,
            src_offset: a.src_offset as usize,
        };
        let row = bench_one(
            c.from,
            c.to,
            &c.dims,
            c.st,
            c.dt,
            timing,
            None,
            gpu.as_ref(),
        )?;
        rows.push((row, c.tensor_bytes));
    }
    if progress {
        eprintln!("\r{:80}", "");
    }
    // CPU: the engine's per-call overhead; CUDA: an empty kernel's launch, GPU time.
    let (overhead, empty_kernel) = match &gpu {
        Some(g) => (
            (0.0, 0.0),
            Some(g.empty_kernel_timed(a.repeats.max(50))?.median()),
        ),
        None => (call_overhead(a.threads)?, None),
    };
    let classes = summary(&rows);
    if json_out {
        let list: Vec<Value> = rows
            .iter()
            .map(|(r, bytes)| {
                let mut v = r.json();
                v["tensor_bytes"] = json!(bytes);
                v["size_class"] = json!(size_class(*bytes));
                if let Some(e) = empty_kernel.filter(|_| *bytes <= MIB) {
                    v["over_empty_kernel"] = json!(r.median_s / e);
                }
                v
            })
            .collect();
        crate::json::print(&json!({
            "threads": a.threads,
            "sweep_size": format!("{:?}", a.sweep_size).to_lowercase(),
            "kernels": std::env::var("LAYOUTKIT_CPU_KERNELS").unwrap_or_else(|_| "auto".into()),
            "device": if gpu.is_some() { "cuda" } else { "cpu" },
            "gpu": gpu.as_ref().map(|g| g.name().to_string()),
            "call_overhead_s": if gpu.is_some() { None } else { Some(overhead.0) },
            "call_overhead_unprepared_s": if gpu.is_some() { None } else { Some(overhead.1) },
            "empty_kernel_s": empty_kernel,
            "rows": list,
            "classes": classes.iter().map(|c| json!({
                "size_class": c.name, "rows": c.count, "median_ratio": c.median,
                "worst": c.worst.iter().map(|&i| rows[i].0.json()).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
        }));
        return Ok(());
    }
    outln!(
        "{:>7} {:>8} {:34} {:26} {:>9} {:>7} {:>7} {:>6}",
        "class",
        "type",
        "conversion",
        "dims",
        "MiB",
        "GB/s",
        "copy",
        "ratio"
    );
    for (r, bytes) in &rows {
        outln!("{}", line(r, *bytes));
    }
    outln!();
    match empty_kernel {
        Some(e) => {
            let small: Vec<f64> = rows
                .iter()
                .filter(|(_, b)| *b <= MIB)
                .map(|(r, _)| r.median_s / e)
                .collect();
            let worst = small.iter().cloned().fold(0.0, f64::max);
            outln!(
                "empty kernel launch {:.2} us; rows of 1 MiB or less: {} within 1.5x of it, worst {:.2}x",
                e * 1e6,
                small.iter().filter(|&&x| x <= 1.5).count(),
                worst
            );
        }
        None => outln!(
            "threads {}; per-call overhead (12-element f32 NCHW->NHWC, conversion prepared beforehand): {:.2} us ({:.2} us cutting the plan into work items on each call, as convert_fast does)",
            a.threads,
            overhead.0 * 1e6,
            overhead.1 * 1e6
        ),
    }
    for c in &classes {
        outln!(
            "{}: {} rows, median {:.0}% of the copy; worst:",
            c.name,
            c.count,
            100.0 * c.median
        );
        for &i in &c.worst {
            outln!("{}", line(&rows[i].0, rows[i].1));
        }
    }
    Ok(())
}

fn line(r: &Row, bytes: usize) -> String {
    let ty = if r.dtype == r.to_dtype {
        r.dtype.to_string()
    } else {
        format!("{}>{}", r.dtype, r.to_dtype)
    };
    format!(
        "{:>7} {:>8} {:34} {:26} {:>9.3} {:>7.2} {:>7.2} {:>5.0}%",
        size_class(bytes),
        ty,
        format!("{}->{}", r.from, r.to),
        r.dims,
        bytes as f64 / MIB as f64,
        r.gbps(),
        r.copy_gbps(),
        100.0 * r.ratio()
    )
}

/// Per size class: the row count, the median ratio to the copy, the five worst rows.
struct Class {
    name: &'static str,
    count: usize,
    median: f64,
    worst: Vec<usize>,
}

fn summary(rows: &[(Row, usize)]) -> Vec<Class> {
    let mut out = Vec::new();
    for name in ["<1MiB", "1-8MiB", ">=8MiB"] {
        let mut idx: Vec<usize> = (0..rows.len())
            .filter(|&i| size_class(rows[i].1) == name)
            .collect();
        if idx.is_empty() {
            continue;
        }
        idx.sort_by(|&i, &j| rows[i].0.ratio().total_cmp(&rows[j].0.ratio()));
        out.push(Class {
            name,
            count: idx.len(),
            median: rows[idx[idx.len() / 2]].0.ratio(),
            worst: idx.iter().copied().take(5).collect(),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every case parses, its layouts shape its dims, and its tensor is within the cap; the
    /// small grid has both small and large tensors of every activation conversion.
    #[test]
    fn cases_are_valid_and_span_the_sizes() {
        let cs = cases(SweepSize::Small, 1024 * MIB);
        assert!(cs.len() > 100);
        for c in &cs {
            let dims = Dims::parse(&c.dims).unwrap();
            parse_format(c.from).unwrap().shaped(&dims).unwrap();
            parse_format(c.to).unwrap().shaped(&dims).unwrap();
            assert!(c.tensor_bytes <= 1024 * MIB, "{}", c.label());
        }
        for &(from, to) in ACTIVATIONS {
            let of = |class: &str| {
                cs.iter()
                    .any(|c| c.from == from && c.to == to && size_class(c.tensor_bytes) == class)
            };
            assert!(of("<1MiB") && of(">=8MiB"), "{from}->{to}");
        }
        let full = cases(SweepSize::Full, 1024 * MIB);
        assert!(full.len() > cs.len());
        assert!(full.iter().any(|c| c.tensor_bytes > 512 * MIB));
    }
}
