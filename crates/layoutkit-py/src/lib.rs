//! `layoutkit._native`: the Python package's extension module, a thin layer over the Rust
//! crates (no layout logic of its own). The public API is the `layoutkit` package beside this
//! crate (`python/layoutkit`), which finds the pointers, shapes and streams of numpy arrays and
//! framework tensors and calls the functions here.

use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};

mod arrays;
mod conv;
mod conv_cuda;
mod convert;
mod features;
mod layouts;
mod pack;

/// Bad names, dims, dtypes or shapes: `ValueError` with the command line's message.
pub(crate) fn value_error(e: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(e.to_string())
}

/// A CUDA error: no device or a driver failure is `RuntimeError`, bad input `ValueError`.
pub(crate) fn cuda_error(e: layoutkit_cuda::Error) -> PyErr {
    match e {
        layoutkit_cuda::Error::Core(c) => value_error(c),
        layoutkit_cuda::Error::Unsupported(_) => value_error(e),
        _ => PyRuntimeError::new_err(e.to_string()),
    }
}

/// Dims from the CLI's `"N=1,C=3"` string or a dict `{"N": 1, "C": 3}` (in its order).
pub(crate) fn dims_arg(obj: &Bound<'_, PyAny>) -> PyResult<layoutkit_core::Dims> {
    let text = if let Ok(s) = obj.cast::<PyString>() {
        s.to_string()
    } else if let Ok(d) = obj.cast::<PyDict>() {
        let mut parts = Vec::new();
        for (k, v) in d.iter() {
            let k: String = k
                .extract()
                .map_err(|_| PyTypeError::new_err("dims keys are axis letters (str)"))?;
            let v: usize = v.extract().map_err(|_| {
                PyValueError::new_err(format!("dims[{k:?}] is not a non-negative int"))
            })?;
            parts.push(format!("{k}={v}"));
        }
        parts.join(",")
    } else {
        return Err(PyTypeError::new_err(format!(
            "dims must be a dict like {{\"N\": 1, \"C\": 3}} or a string like \"N=1,C=3\", not {}",
            obj.get_type().name()?
        )));
    };
    layoutkit_core::Dims::parse(&text).map_err(value_error)
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(arrays::array_struct, m)?)?;
    m.add_function(wrap_pyfunction!(layouts::formats, m)?)?;
    m.add_function(wrap_pyfunction!(layouts::dtype_name, m)?)?;
    m.add_class::<layouts::Layout>()?;
    m.add_class::<convert::Conversion>()?;
    m.add_function(wrap_pyfunction!(convert::prepare, m)?)?;
    m.add_function(wrap_pyfunction!(convert::cuda_device_name, m)?)?;
    m.add_function(wrap_pyfunction!(conv::conv2d_cpu, m)?)?;
    m.add_function(wrap_pyfunction!(conv::conv2d_output, m)?)?;
    m.add_function(wrap_pyfunction!(conv_cuda::conv2d_cuda_kernel, m)?)?;
    m.add_function(wrap_pyfunction!(conv_cuda::conv2d_cuda, m)?)?;
    m.add_function(wrap_pyfunction!(features::features, m)?)?;
    m.add_function(wrap_pyfunction!(features::features_flat, m)?)?;
    m.add_function(wrap_pyfunction!(features::features_names, m)?)?;
    m.add_function(wrap_pyfunction!(features::features_curve, m)?)?;
    m.add_function(wrap_pyfunction!(pack::pack, m)?)?;
    m.add_function(wrap_pyfunction!(pack::pack_shard, m)?)?;
    m.add_function(wrap_pyfunction!(pack::write_packed_index, m)?)?;
    m.add_function(wrap_pyfunction!(pack::checkpoint_shards, m)?)?;
    m.add_function(wrap_pyfunction!(pack::unpack, m)?)?;
    Ok(())
}
