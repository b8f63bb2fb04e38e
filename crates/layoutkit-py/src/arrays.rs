//! Reading numpy arrays fast: the `__array_struct__` capsule (numpy's C-level array interface)
//! gives the data pointer, shape, strides, element kind and flags in one attribute lookup,
//! where `__array_interface__` builds a dictionary of Python objects on every call (the largest
//! part of a small conversion's call time). Works under the stable ABI (capsules are in it).

use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyTuple};

/// numpy's `PyArrayInterface` (numpy/ndarrayobject.h; layout fixed since numpy 1.0).
#[repr(C)]
struct ArrayInterface {
    two: i32,
    nd: i32,
    typekind: u8,
    itemsize: i32,
    flags: i32,
    shape: *const isize,
    strides: *const isize,
    data: *mut std::ffi::c_void,
    descr: *mut std::ffi::c_void,
}

const NPY_ARRAY_NOTSWAPPED: i32 = 0x0200;
const NPY_ARRAY_WRITEABLE: i32 = 0x0400;

/// Our short name of a numpy element kind and size, for the types read this way (anything
/// else, such as ml_dtypes' bfloat16, goes through `__array_interface__`).
fn dtype_name(kind: u8, size: i32) -> Option<&'static str> {
    Some(match (kind, size) {
        (b'f', 2) => "f16",
        (b'f', 4) => "f32",
        (b'f', 8) => "f64",
        (b'i', 1) => "i8",
        (b'i', 4) => "i32",
        (b'u', 1) => "u8",
        _ => return None,
    })
}

/// A numpy array as its `__array_struct__` describes it.
pub(crate) struct NumpyArray {
    pub address: usize,
    pub shape: Vec<usize>,
    /// In elements.
    pub strides: Vec<isize>,
    pub dtype: &'static str,
    pub itemsize: usize,
    pub readonly: bool,
}

impl NumpyArray {
    /// Whether the array is row-major (C-contiguous).
    pub fn row_major(&self) -> bool {
        let mut expected = 1isize;
        for (&n, &s) in self.shape.iter().zip(&self.strides).rev() {
            if n > 1 && s != expected {
                return false;
            }
            expected *= n as isize;
        }
        true
    }

    /// Bytes of a row-major array of this shape.
    pub fn bytes(&self) -> usize {
        self.shape.iter().product::<usize>() * self.itemsize
    }
}

/// `x` read through its `__array_struct__`, or `None` when that is not possible (see
/// [`array_struct`]).
pub(crate) fn read_numpy(x: &Bound<'_, PyAny>) -> Option<NumpyArray> {
    let attr = x.getattr(pyo3::intern!(x.py(), "__array_struct__")).ok()?;
    let capsule = attr.cast::<PyCapsule>().ok()?;
    // numpy's capsule has no name.
    let ptr = capsule.pointer_checked(None).ok()?;
    // SAFETY: numpy's `__array_struct__` capsule holds a `PyArrayInterface` that lives as long
    // as the capsule (held by `capsule` here; no Python code runs while it is read); `two == 2`
    // is its documented sanity check.
    let s = unsafe { ptr.cast::<ArrayInterface>().as_ref() };
    if s.two != 2 || s.flags & NPY_ARRAY_NOTSWAPPED == 0 || s.nd < 0 || s.itemsize <= 0 {
        return None;
    }
    let dtype = dtype_name(s.typekind, s.itemsize)?;
    let nd = s.nd as usize;
    let (shape, strides): (&[isize], &[isize]) = if nd == 0 {
        (&[], &[])
    } else {
        // SAFETY: `shape` and `strides` point to `nd` values each (the interface's contract);
        // numpy always fills strides in the capsule.
        unsafe {
            (
                std::slice::from_raw_parts(s.shape, nd),
                std::slice::from_raw_parts(s.strides, nd),
            )
        }
    };
    let size = s.itemsize as isize;
    if strides.iter().any(|st| st % size != 0) || shape.iter().any(|&n| n < 0) {
        return None;
    }
    Some(NumpyArray {
        address: s.data as usize,
        shape: shape.iter().map(|&n| n as usize).collect(),
        strides: strides.iter().map(|st| st / size).collect(),
        dtype,
        itemsize: s.itemsize as usize,
        readonly: s.flags & NPY_ARRAY_WRITEABLE == 0,
    })
}

/// `(address, shape, strides in elements, dtype name, read-only)` of a numpy array read through
/// its `__array_struct__`, or `None` when that is not possible (no capsule, a byte-swapped or
/// unusual element type, strides that are not whole elements): the caller then takes the
/// general path, which reports such arrays precisely.
#[pyfunction]
#[allow(clippy::type_complexity)]
pub fn array_struct<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
) -> PyResult<
    Option<(
        usize,
        Bound<'py, PyTuple>,
        Bound<'py, PyTuple>,
        &'static str,
        bool,
    )>,
> {
    let Some(a) = read_numpy(x) else {
        return Ok(None);
    };
    Ok(Some((
        a.address,
        PyTuple::new(py, &a.shape)?,
        PyTuple::new(py, &a.strides)?,
        a.dtype,
        a.readonly,
    )))
}
