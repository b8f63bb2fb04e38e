//! `layoutkit bench`: conversion bandwidth against a plain copy of the same bytes, timed in the
//! same run.

use std::io::IsTerminal;
use std::time::Instant;

use anyhow::{bail, Result};
use layoutkit_core::plan::ConversionPlan;
use layoutkit_core::{parse_format, CastSpec, DType, Dims};
use rayon::prelude::*;
use serde_json::{json, Value};

use crate::args::{BenchArgs, Device};

/// The standard set: (from, to, dims). Every tensor is 64 MiB or more in f16.
const STANDARD: &[(&str, &str, &str)] = &[
    ("NCHW", "NHWC", "N=16,C=256,H=96,W=96"),
    ("NHWC", "NCHW", "N=16,C=256,H=96,W=96"),
    ("NCHW", "NCHW32c", "N=16,C=256,H=96,W=96"),
    ("NCHW", "kHWC8", "N=16,C=3,H=1024,W=1024"),
    ("OIHW", "OIHW16i16o", "O=4096,I=1024,H=3,W=3"),
    ("NHWC", "mace:in_out_channel", "N=16,H=96,W=96,C=250"),
];

pub(crate) struct Row {
    pub(crate) from: String,
    pub(crate) to: String,
    pub(crate) dims: String,
    pub(crate) dtype: DType,
    pub(crate) to_dtype: DType,
    pub(crate) bytes_moved: usize,
    pub(crate) median_s: f64,
    pub(crate) copy_median_s: f64,
    pub(crate) threads: usize,
    pub(crate) device: String,
}

impl Row {
    pub(crate) fn gbps(&self) -> f64 {
        self.bytes_moved as f64 / self.median_s / 1e9
    }
    pub(crate) fn copy_gbps(&self) -> f64 {
        self.bytes_moved as f64 / self.copy_median_s / 1e9
    }
    /// The conversion's bandwidth over the copy's.
    pub(crate) fn ratio(&self) -> f64 {
        self.copy_median_s / self.median_s
    }
    pub(crate) fn json(&self) -> Value {
        json!({
            "from": self.from, "to": self.to, "dims": self.dims,
            "dtype": self.dtype.name(), "to_dtype": self.to_dtype.name(),
            "device": self.device, "threads": self.threads,
            "bytes_moved": self.bytes_moved, "median_s": self.median_s,
            "gbps": self.gbps(), "copy_gbps": self.copy_gbps(),
            "ratio_to_copy": self.gbps() / self.copy_gbps(),
        })
    }
}

pub fn run(a: &BenchArgs, json_out: bool) -> Result<()> {
    map_large_buffers();
    if a.sweep {
        return super::bench_sweep::run(a, json_out);
    }
    if a.threads == 0 {
        bail!("--threads must be at least 1");
    }
    let dtype: DType = a.dtype.parse()?;
    let to_dtype: DType = a
        .to_dtype
        .as_deref()
        .map(str::parse)
        .transpose()?
        .unwrap_or(dtype);
    let mut jobs: Vec<(String, String, String, DType, DType)> = Vec::new();
    match (&a.from, &a.to, &a.dims) {
        (Some(f), Some(t), Some(d)) => {
            jobs.push((f.clone(), t.clone(), d.clone(), dtype, to_dtype))
        }
        _ => {
            for t in [DType::F32, DType::F16] {
                for (f, to, d) in STANDARD {
                    jobs.push((f.to_string(), to.to_string(), d.to_string(), t, t));
                }
            }
        }
    }
    let cl = match a.device {
        Device::Opencl => Some(layoutkit_opencl::OpenCl::new(None)?),
        _ => None,
    };
    let gpu = match a.device {
        Device::Cuda => Some(layoutkit_cuda::Cuda::new(0)?),
        _ => None,
    };
    let progress = std::io::stderr().is_terminal() && jobs.len() > 1;
    let mut rows = Vec::new();
    for (k, (f, t, d, st, dt)) in jobs.iter().enumerate() {
        if progress {
            eprint!("\r[{}/{}] {f} -> {t} {st} ...{:20}", k + 1, jobs.len(), "");
        }
        rows.push(bench_one(
            f,
            t,
            d,
            *st,
            *dt,
            Timing {
                repeats: a.repeats.max(1),
                threads: a.threads,
                src_offset: a.src_offset as usize,
            },
            cl.as_ref(),
            gpu.as_ref(),
        )?);
    }
    if progress {
        eprintln!("\r{:70}", "");
    }
    if json_out {
        let list: Vec<Value> = rows.iter().map(Row::json).collect();
        crate::json::print(&if list.len() == 1 {
            list[0].clone()
        } else {
            Value::Array(list)
        });
        return Ok(());
    }
    if let Some(cl) = &cl {
        outln!(
            "device: {} ({}, {})",
            cl.info().name,
            cl.info().platform,
            cl.info().version
        );
    }
    // Columns as wide as their longest entry (MACE image names are long).
    let conversion = |r: &Row| format!("{}->{}", r.from, r.to);
    let dtype = |r: &Row| {
        if r.dtype == r.to_dtype {
            r.dtype.to_string()
        } else {
            format!("{}>{}", r.dtype, r.to_dtype)
        }
    };
    let width = |len: &dyn Fn(&Row) -> usize, header: usize| {
        rows.iter().map(len).max().unwrap_or(0).max(header)
    };
    let tw = width(&|r| dtype(r).len(), 4);
    let cw = width(&|r| conversion(r).len(), 10);
    let dw = width(&|r| r.dims.len(), 4);
    outln!(
        "{:7} {:>tw$} {:cw$} {:dw$} {:>9} {:>9} {:>9} {:>7}",
        "device",
        "type",
        "conversion",
        "dims",
        "MiB",
        "GB/s",
        "copy GB/s",
        "ratio"
    );
    for r in &rows {
        outln!(
            "{:7} {:>tw$} {:cw$} {:dw$} {:>9.1} {:>9.2} {:>9.2} {:>6.0}%",
            r.device,
            dtype(r),
            conversion(r),
            r.dims,
            r.bytes_moved as f64 / 2.0 / (1 << 20) as f64,
            r.gbps(),
            r.copy_gbps(),
            100.0 * r.gbps() / r.copy_gbps()
        );
    }
    Ok(())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// How a conversion is timed.
#[derive(Clone, Copy)]
pub(crate) struct Timing {
    /// Timed repetitions after one warm-up.
    pub(crate) repeats: usize,
    /// CPU threads for the conversion and the copy.
    pub(crate) threads: usize,
    /// Source bytes past a 64-byte boundary.
    pub(crate) src_offset: usize,
}

/// Times one conversion (and the copy of as many bytes, alternately) on the device asked for.
/// Makes every allocation of 1 MiB or more a fresh mapping (page-aligned), where glibc would
/// otherwise serve it from the heap once a mapped chunk has been freed (its threshold rises to
/// the freed size): a row's buffers then sit wherever the benchmark's earlier allocations left
/// room. Measured on a Xeon (family 6 model 167), f16 `NCHW -> NCHW32c` C=24 on 14 x 14 (32
/// MiB), one process per run: 74-108% of the copy over six runs from the heap, 88-100% over
/// eight with every buffer mapped. (Other C libraries: unchanged.)
fn map_large_buffers() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        extern "C" {
            fn mallopt(param: std::ffi::c_int, value: std::ffi::c_int) -> std::ffi::c_int;
        }
        /// glibc's `M_MMAP_THRESHOLD` (malloc.h).
        const M_MMAP_THRESHOLD: std::ffi::c_int = -3;
        // SAFETY: `mallopt` only sets an allocator parameter; called before the benchmark's
        // buffers are allocated, and allocations made under either threshold stay valid.
        unsafe {
            mallopt(M_MMAP_THRESHOLD, 1 << 20);
        }
    }
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn bench_one(
    from: &str,
    to: &str,
    dims: &str,
    st: DType,
    dt: DType,
    Timing {
        repeats,
        threads,
        src_offset,
    }: Timing,
    cl: Option<&layoutkit_opencl::OpenCl>,
    gpu: Option<&layoutkit_cuda::Cuda>,
) -> Result<Row> {
    let dims_parsed = Dims::parse(dims)?;
    let src = parse_format(from)?.shaped(&dims_parsed)?;
    let dst = parse_format(to)?.shaped(&dims_parsed)?;
    let src_bytes = src.bytes(st)?;
    let dst_bytes = dst.bytes(dt)?;
    let bytes_moved = src_bytes + dst_bytes;
    // Deterministic data (the values do not matter for identity copies or f32 <-> f16),
    // `src_offset` bytes past a 64-byte boundary (the destination starts on one).
    let mut data_buf = layoutkit_cpu::AlignedBuf::zeroed(src_bytes + src_offset);
    let data = &mut data_buf[src_offset..];
    for (i, v) in data.iter_mut().enumerate() {
        *v = (i.wrapping_mul(2654435761) >> 13) as u8 & 0x3f;
    }
    let data: &[u8] = data;
    if let Some(gpu) = gpu {
        let cast = CastSpec::new(st, dt, None)?;
        let (_, t) = gpu.convert_timed(&src, data, &dst, &cast, repeats)?;
        let c = gpu.copy_timed(bytes_moved / 2, repeats)?;
        return Ok(Row {
            from: from.to_string(),
            to: to.to_string(),
            dims: dims.to_string(),
            dtype: st,
            to_dtype: dt,
            bytes_moved,
            median_s: t.median(),
            copy_median_s: c.median(),
            threads: 1,
            device: "cuda".to_string(),
        });
    }
    let (median_s, copy_median_s, device) = match cl {
        Some(cl) => {
            let (_, t) = cl.convert_timed(&src, data, st, &dst, dt, repeats)?;
            let c = cl.copy_timed(bytes_moved / 2, repeats)?;
            (t.median(), c.median(), "opencl".to_string())
        }
        None => {
            let plan = ConversionPlan::new(&src, &dst)?;
            let cast = CastSpec::new(st, dt, None)?;
            // Prepared once, as a caller converting the same shapes repeatedly keeps it (the
            // Python package's converters do): the timing is of the conversion, not of cutting
            // the plan into work items.
            let conversion = layoutkit_cpu::FastConversion::new(&plan, &cast, threads)?;
            let mut out = layoutkit_cpu::AlignedBuf::zeroed(dst_bytes);
            // The same number of bytes through a plain copy, on the same number of threads,
            // timed alternately with the conversion: the machine's state (other tenants,
            // clock) drifts during a run, and alternating exposes both to the same drift. With
            // several threads the copy is also timed on the calling thread alone and the faster
            // of the two counts (the copy at its best): a small copy spends most of its time
            // dispatching to the pool, while the engine runs conversions under its parallel
            // threshold on the calling thread, so the pool's copy alone made a 64 KiB
            // conversion look twice as fast as a copy.
            let n = bytes_moved / 2;
            let a = vec![1u8; n];
            let mut b = vec![0u8; n];
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()?;
            let mut times = Vec::new();
            let mut copies = Vec::new();
            for rep in 0..=repeats {
                let t0 = Instant::now();
                conversion.run(data, &mut out)?;
                let t = t0.elapsed().as_secs_f64();
                let t0 = Instant::now();
                b.copy_from_slice(std::hint::black_box(&a));
                std::hint::black_box(&mut b);
                let mut c = t0.elapsed().as_secs_f64();
                if threads > 1 {
                    let chunk = n.div_ceil(threads).max(1);
                    let t0 = Instant::now();
                    pool.install(|| {
                        b.par_chunks_mut(chunk)
                            .zip(a.par_chunks(chunk))
                            .for_each(|(d, s)| d.copy_from_slice(s));
                    });
                    std::hint::black_box(&mut b);
                    c = c.min(t0.elapsed().as_secs_f64());
                }
                // The first round touches fresh pages: a warm-up.
                if rep > 0 {
                    times.push(t);
                    copies.push(c);
                }
            }
            (median(times), median(copies), "cpu".to_string())
        }
    };
    Ok(Row {
        from: from.to_string(),
        to: to.to_string(),
        dims: dims.to_string(),
        dtype: st,
        to_dtype: dt,
        bytes_moved,
        median_s,
        copy_median_s,
        threads: if cl.is_some() { 1 } else { threads },
        device,
    })
}
