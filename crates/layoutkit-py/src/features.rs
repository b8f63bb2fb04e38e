//! AutoTVM itervar features of loop-nest IR text, as the command line computes them.

use layoutkit_loopir::features::{
    curve_sample, extract, flatten_f32, flatten_names, row_values, Options, Value,
};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::value_error;

fn extracted(ir_text: &str) -> PyResult<layoutkit_loopir::features::Features> {
    let program = layoutkit_loopir::parse(ir_text).map_err(value_error)?;
    extract(&program, &Options::default()).map_err(value_error)
}

fn values<'py>(py: Python<'py>, v: &[Value]) -> PyResult<Bound<'py, PyList>> {
    let list = PyList::empty(py);
    for x in v {
        match *x {
            Value::Int(i) => list.append(i)?,
            Value::Log(f) => list.append(f)?,
        }
    }
    Ok(list)
}

/// The rows of `layoutkit features --json`: dicts with `itervar`, `attr`, `arith`, `touch`
/// (a list of `[key, values]`).
#[pyfunction]
#[pyo3(signature = (ir_text, take_log = false))]
pub fn features<'py>(
    py: Python<'py>,
    ir_text: &str,
    take_log: bool,
) -> PyResult<Bound<'py, PyList>> {
    let f = extracted(ir_text)?;
    let rows = PyList::empty(py);
    for r in row_values(&f, take_log) {
        let d = PyDict::new(py);
        d.set_item("itervar", &r.itervar)?;
        d.set_item("attr", values(py, &r.attr)?)?;
        d.set_item("arith", values(py, &r.arith)?)?;
        let touch = PyList::empty(py);
        for (key, v) in &r.touch {
            touch.append(PyList::new(
                py,
                [key.into_pyobject(py)?.into_any(), values(py, v)?.into_any()],
            )?)?;
        }
        d.set_item("touch", touch)?;
        rows.append(d)?;
    }
    Ok(rows)
}

/// The flat float32 vector in AutoTVM's order, as little-endian bytes (the package wraps them
/// in a numpy array).
#[pyfunction]
#[pyo3(signature = (ir_text, take_log = true))]
pub fn features_flat(ir_text: &str, take_log: bool) -> PyResult<Vec<u8>> {
    let f = extracted(ir_text)?;
    Ok(flatten_f32(&f, take_log)
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect())
}

/// The name of each entry of the flat vector.
#[pyfunction]
pub fn features_names(ir_text: &str) -> PyResult<Vec<String>> {
    Ok(flatten_names(&extracted(ir_text)?))
}

/// The curve features (`sample_n` points per buffer access), as little-endian float32 bytes.
#[pyfunction]
#[pyo3(signature = (ir_text, sample_n = 30))]
pub fn features_curve(ir_text: &str, sample_n: usize) -> PyResult<Vec<u8>> {
    if sample_n == 0 {
        return Err(value_error("sample_n must be at least 1"));
    }
    let f = extracted(ir_text)?;
    let v = curve_sample(&f, sample_n).map_err(value_error)?;
    Ok(v.iter().flat_map(|x| x.to_le_bytes()).collect())
}
