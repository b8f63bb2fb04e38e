//! Conversions: planned once per (layouts, dims, strides, types), then run on CPU memory (the
//! fast engine, GIL released) or on CUDA device memory (our kernels, on the caller's stream).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use layoutkit_core::plan::ConversionPlan;
use layoutkit_core::{parse_format, view, CastSpec, Quantization};
use layoutkit_cpu::FastConversion;
use layoutkit_cuda::{Cuda, DeviceConversion};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::arrays::read_numpy;
use crate::layouts::{dims_dict, parse_dtype};
use crate::{cuda_error, dims_arg, value_error};

/// One open GPU per ordinal, shared by every conversion of the process.
type Gpus = Mutex<HashMap<usize, Arc<Mutex<Cuda>>>>;

pub(crate) fn gpu(ordinal: usize) -> PyResult<Arc<Mutex<Cuda>>> {
    static GPUS: OnceLock<Gpus> = OnceLock::new();
    let mut gpus = GPUS
        .get_or_init(Default::default)
        .lock()
        .map_err(|_| PyRuntimeError::new_err("a CUDA call panicked earlier in this process"))?;
    if let Some(g) = gpus.get(&ordinal) {
        return Ok(g.clone());
    }
    let g = Arc::new(Mutex::new(Cuda::new(ordinal).map_err(cuda_error)?));
    gpus.insert(ordinal, g.clone());
    Ok(g)
}

pub(crate) fn locked(g: &Mutex<Cuda>) -> PyResult<std::sync::MutexGuard<'_, Cuda>> {
    g.lock()
        .map_err(|_| PyRuntimeError::new_err("a CUDA call panicked earlier in this process"))
}

/// The name of CUDA device `device` (opens it; `RuntimeError` when there is none).
#[pyfunction]
pub fn cuda_device_name(py: Python<'_>, device: usize) -> PyResult<String> {
    py.detach(|| {
        let g = gpu(device)?;
        let name = locked(&g)?.name().to_string();
        Ok(name)
    })
}

/// A planned conversion of an array of one shape, strides and type from one layout to another
/// (made by `prepare`; the package caches them).
#[pyclass(module = "layoutkit", frozen)]
pub struct Conversion {
    plan: ConversionPlan,
    cast: CastSpec,
    src_bytes: usize,
    dst_bytes: usize,
    /// The source array's shape and strides (elements) the plan was made for.
    src_shape: Vec<usize>,
    src_strides: Vec<isize>,
    /// Kernels per CUDA ordinal, compiled on first use there.
    on_device: Mutex<HashMap<usize, Arc<DeviceConversion>>>,
    /// The CPU engine's work per thread count, made on first use with that count.
    on_cpu: Mutex<HashMap<usize, Arc<FastConversion>>>,
}

/// Plans converting an array of `shape` and `strides` (elements) and element type `dtype`,
/// whose memory holds layout `src`, into a new row-major array of layout `dst`.
#[pyfunction]
#[pyo3(signature = (src, dst, shape, strides, dtype, dims = None, to_dtype = None, fill = 0.0, scale = 1.0, zero_point = 0))]
#[allow(clippy::too_many_arguments)]
pub fn prepare(
    src: &str,
    dst: &str,
    shape: Vec<usize>,
    strides: Vec<isize>,
    dtype: &Bound<'_, PyAny>,
    dims: Option<&Bound<'_, PyAny>>,
    to_dtype: Option<&Bound<'_, PyAny>>,
    fill: f64,
    scale: f32,
    zero_point: i32,
) -> PyResult<Conversion> {
    let from = parse_format(src).map_err(value_error)?;
    let to = parse_format(dst).map_err(value_error)?.with_fill(fill);
    if from.transform().is_some() || to.transform().is_some() {
        return Err(value_error(
            "the Winograd filter transform is not a layout conversion; use `layoutkit convert` on the command line",
        ));
    }
    if !from.same_axes(&to) {
        return Err(value_error(layoutkit_core::Error::AxesDiffer {
            src: src.to_string(),
            src_axes: from.axes_string(),
            dst: dst.to_string(),
            dst_axes: to.axes_string(),
        }));
    }
    let src_dtype = parse_dtype(dtype)?;
    let dst_dtype = to_dtype.map(parse_dtype).transpose()?.unwrap_or(src_dtype);
    let dims = dims.map(dims_arg).transpose()?;
    let src_shaped =
        view::shaped_view(&from, dims.as_ref(), &shape, &strides).map_err(value_error)?;
    let dst_shaped = to.shaped(&src_shaped.dims()).map_err(value_error)?;
    let quant = (scale != 1.0 || zero_point != 0).then_some(Quantization { scale, zero_point });
    let cast = CastSpec::new(src_dtype, dst_dtype, quant).map_err(value_error)?;
    let plan = ConversionPlan::new(&src_shaped, &dst_shaped).map_err(value_error)?;
    Ok(Conversion {
        src_bytes: src_shaped.bytes(src_dtype).map_err(value_error)?,
        dst_bytes: dst_shaped.bytes(dst_dtype).map_err(value_error)?,
        plan,
        cast,
        src_shape: shape,
        src_strides: strides,
        on_device: Mutex::new(HashMap::new()),
        on_cpu: Mutex::new(HashMap::new()),
    })
}

#[pymethods]
impl Conversion {
    /// The small-array path for numpy: converts the numpy array `x` into the numpy array `y`
    /// (fresh, row-major, of the output's shape and type) reading both through their
    /// `__array_struct__`, on up to `threads` threads. Returns `False`, touching nothing, when
    /// either array is not what this plan was made for (shape, strides, element type; `y`
    /// writable, row-major, of `dst_bytes`, apart from `x`): the package then takes the
    /// general path, which explains what is wrong.
    fn run_numpy(
        &self,
        py: Python<'_>,
        x: &Bound<'_, PyAny>,
        y: &Bound<'_, PyAny>,
        threads: usize,
    ) -> PyResult<bool> {
        let (Some(xa), Some(ya)) = (read_numpy(x), read_numpy(y)) else {
            return Ok(false);
        };
        let fits = xa.shape == self.src_shape
            && xa.strides == self.src_strides
            && xa.dtype == self.cast.src.name()
            && ya.dtype == self.cast.dst.name()
            && !ya.readonly
            && ya.row_major()
            && ya.bytes() == self.dst_bytes;
        let apart =
            xa.address + self.src_bytes <= ya.address || ya.address + self.dst_bytes <= xa.address;
        if !fits || !apart {
            return Ok(false);
        }
        self.run_cpu(py, xa.address, ya.address, self.dst_bytes, threads)?;
        Ok(true)
    }

    /// The shape of the destination array.
    #[getter]
    fn out_shape(&self) -> Vec<usize> {
        self.plan.dst().array_shape()
    }

    /// The destination's element type (our short name).
    #[getter]
    fn out_dtype(&self) -> &'static str {
        self.cast.dst.name()
    }

    /// Bytes the source view spans.
    #[getter]
    fn src_bytes(&self) -> usize {
        self.src_bytes
    }

    /// Bytes of the destination array.
    #[getter]
    fn dst_bytes(&self) -> usize {
        self.dst_bytes
    }

    /// Whether the source is read through strides (not a row-major array of its layout).
    #[getter]
    fn strided(&self) -> bool {
        self.plan.src().is_strided()
    }

    /// The logical dims.
    #[getter]
    fn dims<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        dims_dict(py, &self.plan.dst().dims())
    }

    /// Runs on CPU memory: reads `src_bytes` bytes at address `src`, writes `dst_bytes` at
    /// `dst` (`dst_len` is the caller's buffer size, checked), on up to `threads` threads (one
    /// more per half MiB of output at most) with the GIL released. The package passes addresses of arrays it holds references to.
    fn run_cpu(
        &self,
        py: Python<'_>,
        src: usize,
        dst: usize,
        dst_len: usize,
        threads: usize,
    ) -> PyResult<()> {
        self.check_dst(dst_len)?;
        if self.dst_bytes == 0 {
            return Ok(());
        }
        // A thread costs tens of microseconds to start: one more per half MiB written at most.
        let threads = threads.clamp(1, 1 + self.dst_bytes / (512 << 10));
        let (s, d) = (src, dst);
        py.detach(|| {
            let conversion = self.on_cpu(threads)?;
            // SAFETY: the package passes the address of an array whose shape and strides
            // made this plan (so it spans `src_bytes` readable bytes from `src`) and of a
            // writable, row-major array of `dst_len == dst_bytes` bytes that does not overlap
            // it; both arrays are referenced by the caller until this call returns.
            let (src, dst) = unsafe {
                (
                    std::slice::from_raw_parts(s as *const u8, self.src_bytes),
                    std::slice::from_raw_parts_mut(d as *mut u8, self.dst_bytes),
                )
            };
            conversion.run(src, dst).map_err(value_error)
        })
    }

    /// Queues the conversion on CUDA device `device`, stream `stream` (a raw `cudaStream_t`;
    /// 0 is the legacy default stream), reading device memory at `src` and writing `dst`.
    /// Compiles (or loads from the disk cache) the kernels on first use on that device.
    fn run_cuda(
        &self,
        py: Python<'_>,
        device: usize,
        src: u64,
        dst: u64,
        dst_len: usize,
        stream: usize,
    ) -> PyResult<()> {
        self.check_dst(dst_len)?;
        py.detach(|| {
            let g = gpu(device)?;
            let cuda = locked(&g)?;
            let conv = self.on(&cuda, device)?;
            // SAFETY: as `run_cpu`, for device memory of `device`'s primary context (where
            // PyTorch, CuPy and JAX allocate), and `stream` is the caller's live stream.
            unsafe {
                cuda.convert_on_stream(
                    &conv,
                    (src, self.src_bytes),
                    (dst, self.dst_bytes),
                    stream as _,
                )
            }
            .map_err(cuda_error)
        })
    }
}

impl Conversion {
    fn check_dst(&self, dst_len: usize) -> PyResult<()> {
        if dst_len != self.dst_bytes {
            return Err(value_error(format!(
                "the output holds {dst_len} bytes; {} of {} needs {}",
                self.plan.dst().layout(),
                self.cast.dst,
                self.dst_bytes
            )));
        }
        Ok(())
    }

    /// This conversion's kernels on `cuda` (ordinal `device`), prepared once.
    fn on(&self, cuda: &Cuda, device: usize) -> PyResult<Arc<DeviceConversion>> {
        cached(&self.on_device, device, || {
            cuda.prepare(&self.plan, &self.cast).map_err(cuda_error)
        })
    }

    /// The CPU engine's work items for `threads` threads, made once per count (cutting the
    /// plan into items costs microseconds, as much as converting a small array).
    fn on_cpu(&self, threads: usize) -> PyResult<Arc<FastConversion>> {
        cached(&self.on_cpu, threads, || {
            FastConversion::new(&self.plan, &self.cast, threads).map_err(value_error)
        })
    }
}

/// The value for `key` in `map`, made by `make` the first time.
fn cached<V>(
    map: &Mutex<HashMap<usize, Arc<V>>>,
    key: usize,
    make: impl FnOnce() -> PyResult<V>,
) -> PyResult<Arc<V>> {
    let mut map = map
        .lock()
        .map_err(|_| PyRuntimeError::new_err("a conversion panicked earlier in this process"))?;
    if let Some(v) = map.get(&key) {
        return Ok(v.clone());
    }
    let v = Arc::new(make()?);
    map.insert(key, v.clone());
    Ok(v)
}
