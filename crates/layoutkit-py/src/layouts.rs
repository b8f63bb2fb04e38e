//! Layouts: the format catalogue, `Layout` (describe, shapes, strides, locate), dtype names.

use layoutkit_core::describe::Description;
use layoutkit_core::{parse_format, DType};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};

use crate::{dims_arg, value_error};

/// Every accepted format name: a list of dicts with `name`, `canonical`, `meaning`, `family`.
#[pyfunction]
pub fn formats(py: Python<'_>) -> PyResult<Bound<'_, PyList>> {
    let list = PyList::empty(py);
    for e in layoutkit_core::formats::catalogue().map_err(value_error)? {
        let d = PyDict::new(py);
        d.set_item("name", &e.name)?;
        d.set_item("canonical", &e.canonical)?;
        d.set_item("meaning", &e.description)?;
        d.set_item("family", e.family)?;
        list.append(d)?;
    }
    Ok(list)
}

/// The element type `obj` names: our names (`"f16"`, `"bfloat16"`, ...), a numpy dtype or
/// scalar type, a torch dtype (`torch.float16`), an ml_dtypes type.
pub(crate) fn parse_dtype(obj: &Bound<'_, PyAny>) -> PyResult<DType> {
    let text: String = if let Ok(s) = obj.cast::<PyString>() {
        s.to_string()
    } else if let Ok(name) = obj.getattr("name").and_then(|n| n.extract::<String>()) {
        // numpy dtypes (ml_dtypes' bfloat16 included). Their name does not say the byte
        // order: elements in the other order would be read as garbage.
        if let Ok(false) = obj.getattr("isnative").and_then(|n| n.extract::<bool>()) {
            let text = obj.str()?.to_string();
            return Err(value_error(format!(
                "element type {text} is not in this machine's byte order; layoutkit reads and \
                 writes native-order elements (x.astype(x.dtype.newbyteorder(\"=\")) makes a \
                 native copy)"
            )));
        }
        name
    } else if let Ok(name) = obj.getattr("__name__").and_then(|n| n.extract::<String>()) {
        // numpy scalar types (np.float32)
        name
    } else {
        // torch dtypes print as "torch.float16"
        obj.str()?.to_string()
    };
    let bare = text.strip_prefix("torch.").unwrap_or(&text);
    bare.parse::<DType>().map_err(|_| {
        PyTypeError::new_err(format!(
            "unsupported element type {text:?} (expected float32, float16, bfloat16, float64, int8, uint8 or int32)"
        ))
    })
}

/// Our short name (`"f16"`) of an element type given in any accepted form.
#[pyfunction]
pub fn dtype_name(dtype: &Bound<'_, PyAny>) -> PyResult<&'static str> {
    Ok(parse_dtype(dtype)?.name())
}

/// A memory layout by any accepted name (`"NCHW"`, `"kHWC8"`, `"NC/32HW32"`, `"OIhw16i16o"`,
/// `"channels_last"`, `"mace:in_out_channel"`, ...).
///
/// >>> lk.Layout("kHWC8").canonical
/// 'NHWC8c'
#[pyclass(module = "layoutkit", frozen)]
pub struct Layout {
    name: String,
    layout: layoutkit_core::Layout,
}

#[pymethods]
impl Layout {
    #[new]
    fn new(name: &str) -> PyResult<Layout> {
        Ok(Layout {
            name: name.to_string(),
            layout: parse_format(name).map_err(value_error)?,
        })
    }

    /// The name as given.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// The canonical form (`"NHWC8c"` for `"kHWC8"`).
    #[getter]
    fn canonical(&self) -> String {
        self.layout.to_string()
    }

    /// The logical axes, in layout order (`["N", "H", "W", "C"]`).
    #[getter]
    fn axes(&self) -> Vec<String> {
        self.layout
            .axes()
            .iter()
            .map(|a| a.letter().to_string())
            .collect()
    }

    /// Whether this is a 2-D image layout (MACE OpenCL images).
    #[getter]
    fn is_image(&self) -> bool {
        self.layout.image().is_some()
    }

    /// The same keys and values as `layoutkit describe --json`.
    #[pyo3(signature = (dims, dtype = None))]
    fn describe<'py>(
        &self,
        py: Python<'py>,
        dims: &Bound<'py, PyAny>,
        dtype: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let dtype = dtype.map(parse_dtype).transpose()?.unwrap_or(DType::F32);
        let d = Description::new(&self.name, &self.layout, &dims_arg(dims)?, dtype)
            .map_err(value_error)?;
        let out = PyDict::new(py);
        out.set_item("name", &d.name)?;
        out.set_item("canonical", &d.canonical)?;
        out.set_item("dims", dims_dict(py, &d.dims)?)?;
        out.set_item("physical_axes", &d.physical_axes)?;
        out.set_item("physical_shape", &d.physical_shape)?;
        out.set_item("strides", &d.strides)?;
        out.set_item("elements", d.elements)?;
        out.set_item("logical_elements", d.logical_elements)?;
        out.set_item("padding_elements", d.padding_elements)?;
        out.set_item("dtype", d.dtype.name())?;
        out.set_item("bytes", d.bytes)?;
        out.set_item("fill", d.fill)?;
        if let (Some((w, h)), Some(tokens)) = (d.image, &d.token_shape) {
            let image = PyDict::new(py);
            image.set_item("width", w)?;
            image.set_item("height", h)?;
            out.set_item("image", image)?;
            out.set_item("token_shape", tokens)?;
        }
        Ok(out)
    }

    /// The shape of the array holding this layout with `dims` (`[height, width, 4]` for an image).
    fn physical_shape(&self, dims: &Bound<'_, PyAny>) -> PyResult<Vec<usize>> {
        Ok(self.shaped(dims)?.array_shape())
    }

    /// The row-major strides (in elements) of that array.
    fn strides(&self, dims: &Bound<'_, PyAny>) -> PyResult<Vec<isize>> {
        Ok(self.shaped(dims)?.array_strides())
    }

    /// The physical offset (in elements) of a logical coordinate (`{"N": 0, "C": 5, ...}` or
    /// `"N=0,C=5,..."`), as `layoutkit locate --coord` gives it.
    fn offset(&self, dims: &Bound<'_, PyAny>, coord: &Bound<'_, PyAny>) -> PyResult<usize> {
        let s = self.shaped(dims)?;
        let c = s.coord_from_dims(&dims_arg(coord)?).map_err(value_error)?;
        s.forward(&c).map_err(value_error)
    }

    /// The logical coordinate stored at a physical offset, as a dict, or `None` for padding.
    fn coord<'py>(
        &self,
        py: Python<'py>,
        dims: &Bound<'py, PyAny>,
        offset: usize,
    ) -> PyResult<Option<Bound<'py, PyDict>>> {
        let s = self.shaped(dims)?;
        match s.inverse(offset).map_err(value_error)? {
            None => Ok(None),
            Some(c) => {
                let d = PyDict::new(py);
                for (a, i) in s.axes().iter().zip(c) {
                    d.set_item(a.letter().to_string(), i)?;
                }
                Ok(Some(d))
            }
        }
    }

    fn __repr__(&self) -> String {
        format!("Layout({:?}) = {}", self.name, self.layout)
    }
}

impl Layout {
    fn shaped(&self, dims: &Bound<'_, PyAny>) -> PyResult<layoutkit_core::ShapedLayout> {
        self.layout.shaped(&dims_arg(dims)?).map_err(value_error)
    }
}

/// `{"N": 1, ...}` in the dims' order.
pub(crate) fn dims_dict<'py>(
    py: Python<'py>,
    dims: &layoutkit_core::Dims,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (a, e) in dims.entries() {
        d.set_item(a.letter().to_string(), *e)?;
    }
    Ok(d)
}
