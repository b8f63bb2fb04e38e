use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cudarc::driver::sys::CUstream;
use cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaStream, DevicePtr, DevicePtrMut, LaunchConfig,
    PushKernelArg,
};
use cudarc::nvrtc::Ptx;
use layoutkit_core::plan::ConversionPlan;
use layoutkit_core::{CastSpec, ShapedLayout};

use crate::codegen::{fill_bits, generate_tuned, BufferShift, Launch, Tuning};
use crate::kernel_cache::KernelCache;
use crate::{Error, Timing};

/// A GPU with its stream and a cache of compiled kernels (in memory, and on disk through
/// [`KernelCache`]).
pub struct Cuda {
    pub(crate) ctx: Arc<CudaContext>,
    pub(crate) stream: Arc<CudaStream>,
    name: String,
    /// `sm_XY`: what kernels are compiled for.
    arch: String,
    /// Streaming multiprocessors (what the tile kernels' grids are sized for).
    multiprocessors: usize,
    disk: KernelCache,
    kernels: RefCell<HashMap<String, (Arc<CudaModule>, CudaFunction)>>,
}

/// One buffer shift's kernels, shared between the cache and the launches using them.
pub(crate) type ShiftedLaunches = Arc<Vec<(Launch, CudaFunction)>>;

/// A conversion ready to run on one GPU: its plan's kernels, compiled and loaded.
pub struct DeviceConversion {
    pub(crate) plan: ConversionPlan,
    pub(crate) cast: CastSpec,
    pub(crate) tuning: Tuning,
    pub(crate) launches: Vec<(Launch, CudaFunction)>,
    /// The kernels for buffers that start mid-vector, by [`BufferShift`], made on first use.
    pub(crate) shifted: Mutex<Vec<(BufferShift, ShiftedLaunches)>>,
    fill: u64,
    pub(crate) src_bytes: usize,
    pub(crate) dst_bytes: usize,
}

impl DeviceConversion {
    /// Bytes the source buffer must hold (a strided source: its span).
    pub fn src_bytes(&self) -> usize {
        self.src_bytes
    }

    /// Bytes of the destination's physical array.
    pub fn dst_bytes(&self) -> usize {
        self.dst_bytes
    }

    /// The plan this conversion runs.
    pub fn plan(&self) -> &ConversionPlan {
        &self.plan
    }
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
        let (major, minor) = ctx
            .compute_capability()
            .map_err(|e| Error::driver("cuDeviceGetAttribute", e))?;
        let multiprocessors = ctx
            .attribute(
                cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
            )
            .map_err(|e| Error::driver("cuDeviceGetAttribute", e))?
            .max(1) as usize;
        let stream = ctx.default_stream();
        Ok(Cuda {
            ctx,
            stream,
            name,
            multiprocessors,
            arch: format!("sm_{major}{minor}"),
            disk: KernelCache::from_env(),
            kernels: RefCell::new(HashMap::new()),
        })
    }

    /// The GPU's architecture as NVRTC names it (`sm_90`).
    pub fn arch(&self) -> &str {
        &self.arch
    }

    /// Replaces the on-disk kernel cache (the default is [`KernelCache::from_env`]).
    pub fn set_kernel_cache(&mut self, cache: KernelCache) {
        self.disk = cache;
    }

    /// Plans the tile kernels of later conversions for `n` multiprocessors instead of the
    /// GPU's own count (the tiles that take several steps keep 8 blocks per multiprocessor):
    /// with 1, small tensors take the paths that large ones take on the whole GPU (tests).
    pub fn set_multiprocessors(&mut self, n: usize) {
        self.multiprocessors = n.max(1);
    }

    /// The GPU's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The kernel `name` of `source` compiled with NVRTC `options` for this GPU's architecture
    /// (unless the options name one), as a CUBIN: from memory, else from the disk cache, else
    /// compiled (and stored on disk). With `LAYOUTKIT_CUDA_DUMP=DIR` each source compiled is
    /// also written to DIR.
    pub(crate) fn compiled(
        &self,
        source: &str,
        name: &str,
        mut options: Vec<String>,
    ) -> Result<CudaFunction, Error> {
        if !options.iter().any(|o| o.starts_with("--gpu-architecture")) {
            options.push(format!("--gpu-architecture={}", self.arch));
        }
        let key = format!("{}\n{source}", options.join(" "));
        let mut cache = self.kernels.borrow_mut();
        if let Some((_, f)) = cache.get(&key) {
            return Ok(f.clone());
        }
        let disk_key = format!("{}\nnvrtc {}\n{key}", self.arch, nvrtc_version()?);
        // An entry the driver refuses (e.g. one a newer NVRTC wrote) is compiled anew.
        let cached = self
            .disk
            .load(&disk_key)
            .and_then(|image| self.ctx.load_module(Ptx::from_binary(image)).ok());
        let module = match cached {
            Some(m) => m,
            None => {
                if let Ok(dir) = std::env::var("LAYOUTKIT_CUDA_DUMP") {
                    // Every compiled source, for nvcc/ptxas and the profilers (a debugging aid).
                    let path =
                        std::path::Path::new(&dir).join(format!("{}-{name}.cu", cache.len()));
                    let _ =
                        std::fs::create_dir_all(&dir).and_then(|_| std::fs::write(&path, source));
                }
                let image = compile_cubin(source, &options)?;
                let m = self
                    .ctx
                    .load_module(Ptx::from_binary(image.clone()))
                    .map_err(|e| Error::driver("cuModuleLoadData", e))?;
                self.disk.store(&disk_key, &image);
                m
            }
        };
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
        let conv = self.prepare(&plan, cast)?;
        if src_data.len() != conv.src_bytes {
            return Err(layoutkit_core::Error::BufferSize {
                what: format!("source {} of {}", src.layout(), cast.src),
                expected_bytes: conv.src_bytes,
                actual_bytes: src_data.len(),
            }
            .into());
        }
        if conv.dst_bytes == 0 {
            return Ok((Vec::new(), Timing::default()));
        }
        let d_src = if src_data.is_empty() {
            self.stream.alloc_zeros::<u8>(1)
        } else {
            self.stream.clone_htod(src_data)
        }
        .map_err(|e| Error::driver("cuMemcpyHtoD", e))?;
        let mut d_dst = self
            .stream
            .alloc_zeros::<u8>(conv.dst_bytes)
            .map_err(|e| Error::driver("cuMemAlloc", e))?;
        let timing = {
            let (src_ptr, _read) = d_src.device_ptr(&self.stream);
            let (dst_ptr, _write) = d_dst.device_ptr_mut(&self.stream);
            self.timed(repeats, 1, || {
                // SAFETY: both buffers were allocated above with the sizes `conv` needs and
                // live until after the timing synchronises.
                unsafe { self.launch_all(&conv, &conv.launches, src_ptr, dst_ptr, &self.stream) }
            })?
        };
        let out = self
            .stream
            .clone_dtoh(&d_dst)
            .map_err(|e| Error::driver("cuMemcpyDtoH", e))?;
        Ok((out, timing))
    }

    /// Generates, compiles (or finds in the caches) and loads the kernels of `plan`.
    pub fn prepare(
        &self,
        plan: &ConversionPlan,
        cast: &CastSpec,
    ) -> Result<DeviceConversion, Error> {
        let tuning = Tuning {
            multiprocessors: self.multiprocessors,
            ..tuning_from_env()
        };
        let launches = generate_tuned(plan, cast, &tuning)?
            .into_iter()
            .map(|l| {
                let f = self.compiled(&l.source, l.name, Vec::new())?;
                Ok((l, f))
            })
            .collect::<Result<_, Error>>()?;
        Ok(DeviceConversion {
            src_bytes: plan.src().bytes(cast.src)?,
            dst_bytes: plan.dst().bytes(cast.dst)?,
            fill: fill_bits(plan, cast.dst),
            plan: plan.clone(),
            cast: *cast,
            tuning,
            launches,
            shifted: Mutex::new(Vec::new()),
        })
    }

    /// Queues `conv` on `stream` (a raw `CUstream` of this GPU's primary context, e.g. a
    /// framework's current stream; null is the legacy default stream), reading device memory
    /// at `src` and writing device memory at `dst`. Returns once queued: nothing is
    /// synchronised, so work queued on `stream` later sees the result, and other streams must
    /// wait for it (an event). Contract: bit-identical to `layoutkit_cpu::convert_reference`.
    ///
    /// # Safety
    /// `src` must address `src_bytes` readable bytes and `dst` `dst_bytes` writable bytes of
    /// device memory in this GPU's primary context, both valid until the queued work has run
    /// on `stream`, and `dst` must not overlap `src`; `stream` must be a live stream of that
    /// context.
    pub unsafe fn convert_on_stream(
        &self,
        conv: &DeviceConversion,
        (src, src_bytes): (u64, usize),
        (dst, dst_bytes): (u64, usize),
        stream: CUstream,
    ) -> Result<(), Error> {
        for (which, layout, expected, actual) in [
            ("source", conv.plan.src(), conv.src_bytes, src_bytes),
            ("destination", conv.plan.dst(), conv.dst_bytes, dst_bytes),
        ] {
            if expected != actual {
                return Err(layoutkit_core::Error::BufferSize {
                    what: format!("{which} {}", layout.layout()),
                    expected_bytes: expected,
                    actual_bytes: actual,
                }
                .into());
            }
        }
        if conv.dst_bytes == 0 {
            return Ok(());
        }
        // SAFETY: the caller guarantees `stream` is a live stream of this context; the
        // wrapper does not own it (dropping it destroys nothing).
        let borrowed = unsafe { self.ctx.wrap_borrowed_stream(stream) };
        // SAFETY: the buffers' sizes were checked against the plan above; their validity is
        // the caller's contract.
        unsafe { self.launch_conversion(conv, src, dst, &borrowed) }
    }

    /// Launches `launches` (kernels of `conv`) on `stream`.
    ///
    /// # Safety
    /// `src` and `dst` address device buffers of `conv.src_bytes` and `conv.dst_bytes` bytes
    /// (for shifted kernels, moved back by their shift).
    pub(crate) unsafe fn launch_all(
        &self,
        conv: &DeviceConversion,
        launches: &[(Launch, CudaFunction)],
        src: u64,
        dst: u64,
        stream: &Arc<CudaStream>,
    ) -> Result<(), Error> {
        let fill = conv.fill;
        let (v1, v2, v4) = (fill as u8, fill as u16, fill as u32);
        for (l, f) in launches {
            let cfg = LaunchConfig {
                grid_dim: l.grid,
                block_dim: l.block,
                shared_mem_bytes: 0,
            };
            let mut b = stream.launch_builder(f);
            if l.name != "fill" {
                b.arg(&src);
            }
            b.arg(&dst);
            if l.name != "convert" {
                match conv.cast.dst.size_bytes() {
                    1 => b.arg(&v1),
                    2 => b.arg(&v2),
                    4 => b.arg(&v4),
                    _ => b.arg(&fill),
                };
            }
            // SAFETY: the kernel's parameters are exactly these (generated with them:
            // `convert` takes source and destination pointers, `gather` those and a fill value
            // of the element's width, `fill` a pointer and the value), and its indices stay
            // inside the buffers (the plan's regions lie inside both physical arrays, whose
            // sizes the buffers have: the caller's contract).
            unsafe { b.launch(cfg) }.map_err(|e| Error::driver("cuLaunchKernel", e))?;
        }
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

    /// Times `repeats` launches of an empty kernel (one block of 32 threads) with CUDA events:
    /// the floor under any launch, what a small conversion is compared with.
    pub fn empty_kernel_timed(&self, repeats: usize) -> Result<Timing, Error> {
        let f = self.compiled(
            "extern \"C\" __global__ void empty_kernel() {}\n",
            "empty_kernel",
            Vec::new(),
        )?;
        let cfg = LaunchConfig {
            grid_dim: (1, 1, 1),
            block_dim: (32, 1, 1),
            shared_mem_bytes: 0,
        };
        self.timed(repeats, 1, || {
            let mut b = self.stream.launch_builder(&f);
            // SAFETY: the kernel takes no parameters and touches no memory.
            unsafe { b.launch(cfg) }.map_err(|e| Error::driver("cuLaunchKernel", e))?;
            Ok(())
        })
    }
}

/// The version of the NVRTC library that compiles kernels (part of every disk cache key).
fn nvrtc_version() -> Result<String, Error> {
    let (mut major, mut minor) = (0, 0);
    // SAFETY: plain out-parameters; NVRTC is loadable (checked by `Cuda::new`).
    unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) }
        .result()
        .map_err(|e| Error::Compile(format!("nvrtcVersion: {e:?}")))?;
    Ok(format!("{major}.{minor}"))
}

/// Compiles `source` with NVRTC and returns its CUBIN (the options name a real architecture).
fn compile_cubin(source: &str, options: &[String]) -> Result<Vec<u8>, Error> {
    use cudarc::nvrtc::{result, sys};
    let fail = |what: &str, e: &dyn std::fmt::Debug| Error::Compile(format!("{what}: {e:?}"));
    let src = std::ffi::CString::new(source)
        .map_err(|_| Error::Compile("the kernel source holds a NUL byte".into()))?;
    let prog = result::create_program(&src, None).map_err(|e| fail("nvrtcCreateProgram", &e))?;
    // SAFETY: `prog` was created above and is destroyed once, below, on every path; the log
    // is a NUL-terminated buffer NVRTC filled.
    let out = unsafe {
        match result::compile_program(prog, options) {
            Err(e) => {
                let log = result::get_program_log(prog)
                    .map(|l| {
                        std::ffi::CStr::from_ptr(l.as_ptr())
                            .to_string_lossy()
                            .into_owned()
                    })
                    .unwrap_or_default();
                Err(Error::Compile(format!("{e:?}\n{log}\n{source}")))
            }
            Ok(()) => {
                let mut size = 0usize;
                sys::nvrtcGetCUBINSize(prog, &mut size)
                    .result()
                    .map_err(|e| fail("nvrtcGetCUBINSize", &e))
                    .and_then(|()| {
                        let mut image = vec![0u8; size];
                        sys::nvrtcGetCUBIN(prog, image.as_mut_ptr().cast())
                            .result()
                            .map(|()| image)
                            .map_err(|e| fail("nvrtcGetCUBIN", &e))
                    })
            }
        }
    };
    // SAFETY: destroyed once; nothing uses `prog` after this.
    let _ = unsafe { result::destroy_program(prog) };
    out
}

/// The kernel knobs: the defaults, or for measuring alternatives `LAYOUTKIT_CUDA_READ_BYTES`
/// and `LAYOUTKIT_CUDA_WRITE_BYTES` (1, 2, 4, 8 or 16: the widest load and store of the tile
/// kernels), `LAYOUTKIT_CUDA_FLAT_WRITE_BYTES` (4, 8 or 16: the store where a tile's
/// destination rows are one flat run) and `LAYOUTKIT_CUDA_TILE_ELEMENTS` (elements per tile
/// of units or of compound source rows; 0 for square tiles), `LAYOUTKIT_CUDA_MERGE_TAILS` (0:
/// the partial cells that end a tile's source rows in a kernel of their own),
/// `LAYOUTKIT_CUDA_STEPS` (0: one step of every loop outside a tile per tile),
/// `LAYOUTKIT_CUDA_FLAT_STEPS` (0: none for tiles written as one flat run),
/// `LAYOUTKIT_CUDA_WHOLE_ROWS` (0: no tiles of whole source rows read as one run) and
/// `LAYOUTKIT_CUDA_THIN` (0: transpositions with a short side in the element tile).
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
        flat_write_bytes: width("LAYOUTKIT_CUDA_FLAT_WRITE_BYTES", d.flat_write_bytes).max(4),
        tile_elements: var("LAYOUTKIT_CUDA_TILE_ELEMENTS")
            .filter(|v| *v <= 8192)
            .unwrap_or(d.tile_elements),
        merge_tails: var("LAYOUTKIT_CUDA_MERGE_TAILS").map_or(d.merge_tails, |v| v != 0),
        steps: var("LAYOUTKIT_CUDA_STEPS").map_or(d.steps, |v| v != 0),
        flat_steps: var("LAYOUTKIT_CUDA_FLAT_STEPS").map_or(d.flat_steps, |v| v != 0),
        whole_rows: var("LAYOUTKIT_CUDA_WHOLE_ROWS").map_or(d.whole_rows, |v| v != 0),
        thin: var("LAYOUTKIT_CUDA_THIN").map_or(d.thin, |v| v != 0),
        ..d
    }
}

/// The compute capability's major number of GPU 0, read once per process (no context is
/// created); None without a CUDA driver or GPU. Planning rules that depend on the GPU
/// generation but run before a device is opened ([`crate::conv::ConvKernel::for_problem`])
/// ask this.
pub fn first_gpu_major() -> Option<i32> {
    static MAJOR: std::sync::OnceLock<Option<i32>> = std::sync::OnceLock::new();
    *MAJOR.get_or_init(|| {
        if !loadable("cuda") {
            return None;
        }
        use cudarc::driver::{result, sys};
        result::init().ok()?;
        let dev = result::device::get(0).ok()?;
        // SAFETY: `dev` is a device handle the driver just returned, after `cuInit`.
        unsafe {
            result::device::get_attribute(
                dev,
                sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
            )
        }
        .ok()
    })
}
