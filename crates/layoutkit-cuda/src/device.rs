use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, LaunchConfig, PushKernelArg,
};
use cudarc::nvrtc::{compile_ptx_with_opts, CompileOptions};
use layoutkit_core::plan::ConversionPlan;
use layoutkit_core::{CastSpec, ShapedLayout};

use crate::codegen::{fill_bits, generate_tuned, Launch, Tuning};
use crate::Error;

/// Device times of repeated conversions (all of one conversion's launches), in seconds, from
/// CUDA events.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Timing {
    pub seconds: Vec<f64>,
}

impl Timing {
    /// The median (0 when nothing was timed).
    pub fn median(&self) -> f64 {
        let mut v = self.seconds.clone();
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied().unwrap_or(0.0)
    }
}

/// A GPU with its stream and a cache of compiled kernels.
pub struct Cuda {
    pub(crate) ctx: Arc<CudaContext>,
    pub(crate) stream: Arc<CudaStream>,
    name: String,
    kernels: RefCell<HashMap<String, (Arc<CudaModule>, CudaFunction)>>,
}

/// Whether a shared library of one of cudarc's candidate names loads.
fn loadable(lib: &str) -> bool {
    cudarc::get_lib_name_candidates(lib).iter().any(|name| {
        // SAFETY: loading the CUDA driver or NVRTC runs their initialisers, which is what
        // using them requires anyway; the handle is dropped at once (cudarc loads its own).
        unsafe { libloading::Library::new(name) }.is_ok()
    })
}

impl Cuda {
    /// Opens GPU `ordinal`. A missing driver, NVRTC or GPU is [`Error::NoDevice`] (checked
    /// before cudarc, which would panic).
    pub fn new(ordinal: usize) -> Result<Cuda, Error> {
        if !loadable("cuda") {
            return Err(Error::NoDevice(
                "the CUDA driver library (libcuda.so) is not installed".into(),
            ));
        }
        if !loadable("nvrtc") {
            return Err(Error::NoDevice(
                "NVRTC (libnvrtc.so) is not on the library path; add e.g. /usr/local/cuda/lib64 to LD_LIBRARY_PATH".into(),
            ));
        }
        let ctx = CudaContext::new(ordinal).map_err(|e| Error::NoDevice(format!("{e:?}")))?;
        let name = ctx.name().unwrap_or_else(|_| "CUDA device".into());
        let stream = ctx.default_stream();
        Ok(Cuda {
            ctx,
            stream,
            name,
            kernels: RefCell::new(HashMap::new()),
        })
    }

    /// The GPU's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    fn function(&self, l: &Launch) -> Result<CudaFunction, Error> {
        self.compiled(&l.source, l.name, Vec::new())
    }

    /// The kernel `name` of `source` compiled with NVRTC `options` (cached per source and
    /// options). With `LAYOUTKIT_CUDA_DUMP=DIR` each source compiled is also written to DIR.
    pub(crate) fn compiled(
        &self,
        source: &str,
        name: &str,
        options: Vec<String>,
    ) -> Result<CudaFunction, Error> {
        let key = format!("{}\n{source}", options.join(" "));
        let mut cache = self.kernels.borrow_mut();
        if let Some((_, f)) = cache.get(&key) {
            return Ok(f.clone());
        }
        if let Ok(dir) = std::env::var("LAYOUTKIT_CUDA_DUMP") {
            // Every compiled source, for nvcc/ptxas and the profilers (a debugging aid).
            let path = std::path::Path::new(&dir).join(format!("{}-{name}.cu", cache.len()));
            let _ = std::fs::create_dir_all(&dir).and_then(|_| std::fs::write(&path, source));
        }
        let opts = CompileOptions {
            options,
            ..CompileOptions::default()
        };
        let ptx = compile_ptx_with_opts(source, opts)
            .map_err(|e| Error::Compile(format!("{e:?}\n{source}")))?;
        let module = self
            .ctx
            .load_module(ptx)
            .map_err(|e| Error::driver("cuModuleLoad", e))?;
        let f = module
            .load_function(name)
            .map_err(|e| Error::driver("cuModuleGetFunction", e))?;
        cache.insert(key, (module, f.clone()));
        Ok(f)
    }

    /// Converts `src_data` (the physical array of `src`) into the physical array of `dst`.
    ///
    /// Contract: bit-identical to `layoutkit_cpu::convert_reference`.
    pub fn convert(
        &self,
        src: &ShapedLayout,
        src_data: &[u8],
        dst: &ShapedLayout,
        cast: &CastSpec,
    ) -> Result<Vec<u8>, Error> {
        self.convert_timed(src, src_data, dst, cast, 0)
            .map(|(o, _)| o)
    }

    /// [`Cuda::convert`], then `repeats` more conversions on the same device memory, each timed
    /// with CUDA events around all of its launches.
    pub fn convert_timed(
        &self,
        src: &ShapedLayout,
        src_data: &[u8],
        dst: &ShapedLayout,
        cast: &CastSpec,
        repeats: usize,
    ) -> Result<(Vec<u8>, Timing), Error> {
        let plan = ConversionPlan::new(src, dst)?;
        let expected = src.bytes(cast.src)?;
        if src_data.len() != expected {
            return Err(layoutkit_core::Error::BufferSize {
                what: format!("source {} of {}", src.layout(), cast.src),
                expected_bytes: expected,
                actual_bytes: src_data.len(),
            }
            .into());
        }
        let out_bytes = dst.bytes(cast.dst)?;
        if out_bytes == 0 {
            return Ok((Vec::new(), Timing::default()));
        }
        let launches = generate_tuned(&plan, cast, &tuning_from_env())?;
        let functions: Vec<CudaFunction> = launches
            .iter()
            .map(|l| self.function(l))
            .collect::<Result<_, _>>()?;
        let d_src = if src_data.is_empty() {
            self.stream.alloc_zeros::<u8>(1)
        } else {
            self.stream.clone_htod(src_data)
        }
        .map_err(|e| Error::driver("cuMemcpyHtoD", e))?;
        let mut d_dst = self
            .stream
            .alloc_zeros::<u8>(out_bytes)
            .map_err(|e| Error::driver("cuMemAlloc", e))?;
        let fill = fill_bits(&plan, cast.dst);
        let timing = self.timed(repeats, 1, || {
            for (l, f) in launches.iter().zip(&functions) {
                self.launch(l, f, &d_src, &mut d_dst, fill, cast)?;
            }
            Ok(())
        })?;
        let out = self
            .stream
            .clone_dtoh(&d_dst)
            .map_err(|e| Error::driver("cuMemcpyDtoH", e))?;
        Ok((out, timing))
    }

    fn launch(
        &self,
        l: &Launch,
        f: &CudaFunction,
        src: &CudaSlice<u8>,
        dst: &mut CudaSlice<u8>,
        fill: u64,
        cast: &CastSpec,
    ) -> Result<(), Error> {
        let cfg = LaunchConfig {
            grid_dim: l.grid,
            block_dim: l.block,
            shared_mem_bytes: 0,
        };
        let mut b = self.stream.launch_builder(f);
        let (v1, v2, v4) = (fill as u8, fill as u16, fill as u32);
        if l.name != "fill" {
            b.arg(src);
        }
        b.arg(dst);
        if l.name != "convert" {
            match cast.dst.size_bytes() {
                1 => b.arg(&v1),
                2 => b.arg(&v2),
                4 => b.arg(&v4),
                _ => b.arg(&fill),
            };
        }
        // SAFETY: the kernel's parameters are exactly these (generated with them: `convert`
        // takes source and destination pointers, `gather` those and a fill value of the
        // element's width, `fill` a pointer and the value), and its indices stay
        // inside the buffers (the plan's regions lie inside both physical arrays, whose sizes
        // the buffers have).
        unsafe { b.launch(cfg) }.map_err(|e| Error::driver("cuLaunchKernel", e))?;
        Ok(())
    }

    /// Times `repeats` device-to-device copies of `bytes` bytes (the ceiling for a conversion
    /// moving the same bytes), with CUDA events.
    pub fn copy_timed(&self, bytes: usize, repeats: usize) -> Result<Timing, Error> {
        let n = bytes.max(1);
        let a = self
            .stream
            .alloc_zeros::<u8>(n)
            .map_err(|e| Error::driver("cuMemAlloc", e))?;
        let mut b = self
            .stream
            .alloc_zeros::<u8>(n)
            .map_err(|e| Error::driver("cuMemAlloc", e))?;
        let timing = self.timed(repeats, 1, || {
            self.stream
                .memcpy_dtod(&a, &mut b)
                .map_err(|e| Error::driver("cuMemcpyDtoD", e))
        })?;
        Ok(timing)
    }

    /// Runs `work` once untimed (warm-up), then `repeats` times `per` back-to-back calls, each
    /// group between two CUDA events; the time per call (group time / `per`) of each repetition.
    pub(crate) fn timed(
        &self,
        repeats: usize,
        per: usize,
        mut work: impl FnMut() -> Result<(), Error>,
    ) -> Result<Timing, Error> {
        let per = per.max(1);
        let event = || {
            self.stream
                .record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
                .map_err(|e| Error::driver("cuEventRecord", e))
        };
        let mut timing = Timing::default();
        for rep in 0..=repeats {
            let count = if rep == 0 { 1 } else { per };
            let start = event()?;
            for _ in 0..count {
                work()?;
            }
            let end = event()?;
            end.synchronize()
                .map_err(|e| Error::driver("cuEventSynchronize", e))?;
            if rep > 0 {
                let ms = start
                    .elapsed_ms(&end)
                    .map_err(|e| Error::driver("cuEventElapsedTime", e))?;
                timing.seconds.push(ms as f64 * 1e-3 / per as f64);
            }
        }
        Ok(timing)
    }
}

/// The kernel knobs: the defaults, or for measuring alternatives `LAYOUTKIT_CUDA_READ_BYTES`
/// and `LAYOUTKIT_CUDA_WRITE_BYTES` (1, 2, 4, 8 or 16: the widest load and store of the tile
/// kernels) and `LAYOUTKIT_CUDA_TILE_ELEMENTS` (elements per tile of units or of compound
/// source rows; 0 for square tiles) and `LAYOUTKIT_CUDA_MERGE_TAILS` (0: the partial cells
/// that end a tile's source rows in a kernel of their own).
fn tuning_from_env() -> Tuning {
    let var = |name: &str| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse::<usize>().ok())
    };
    let width = |name: &str, default: usize| {
        var(name)
            .filter(|v| matches!(v, 1 | 2 | 4 | 8 | 16))
            .unwrap_or(default)
    };
    let d = Tuning::default();
    Tuning {
        read_bytes: width("LAYOUTKIT_CUDA_READ_BYTES", d.read_bytes),
        write_bytes: width("LAYOUTKIT_CUDA_WRITE_BYTES", d.write_bytes),
        tile_elements: var("LAYOUTKIT_CUDA_TILE_ELEMENTS")
            .filter(|v| *v <= 8192)
            .unwrap_or(d.tile_elements),
        merge_tails: var("LAYOUTKIT_CUDA_MERGE_TAILS").map_or(d.merge_tails, |v| v != 0),
    }
}
