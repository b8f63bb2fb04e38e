//! What `layoutkit describe` reports about a layout with dims: one struct that the command
//! line prints (as text or JSON) and the Python package returns as a dict, so both show the
//! same keys and values.

use crate::{DType, Dims, Result, ShapedLayout};

/// A shaped layout's description for one element type.
///
/// ```
/// use layoutkit_core::{describe::Description, parse_format, DType, Dims};
/// let dims = Dims::parse("N=1,C=3,H=2,W=2").unwrap();
/// let d = Description::new("kHWC8", &parse_format("kHWC8").unwrap(), &dims, DType::F16).unwrap();
/// assert_eq!(d.canonical, "NHWC8c");
/// assert_eq!(d.physical_shape, vec![1, 2, 2, 1, 8]);
/// assert_eq!((d.logical_elements, d.padding_elements, d.bytes), (12, 20, 64));
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Description {
    /// The name as the caller wrote it.
    pub name: String,
    pub canonical: String,
    /// The dims in the caller's order (a Winograd image's transformed dims).
    pub dims: Dims,
    /// Token names of the physical array, outermost first (`N H W C 8c`).
    pub physical_axes: Vec<String>,
    /// The array's shape (`[height, width, 4]` for an image) and its row-major strides.
    pub physical_shape: Vec<usize>,
    pub strides: Vec<isize>,
    pub elements: usize,
    pub logical_elements: usize,
    pub padding_elements: usize,
    pub dtype: DType,
    pub bytes: usize,
    pub fill: f64,
    /// `(width, height)` of an image layout.
    pub image: Option<(usize, usize)>,
    /// An image layout's token shape (the array is `[height, width, 4]`).
    pub token_shape: Option<Vec<usize>>,
    /// The shaped layout described.
    pub shaped: ShapedLayout,
}

impl Description {
    /// Describes `layout` (parsed from `name`) with `dims` for elements of `dtype`.
    pub fn new(
        name: &str,
        layout: &crate::Layout,
        dims: &Dims,
        dtype: DType,
    ) -> Result<Description> {
        let s = layout.shaped(dims)?;
        let user_dims = layout.transformed_dims(dims)?;
        let logical = s.logical_elements();
        Ok(Description {
            name: name.to_string(),
            canonical: layout.to_string(),
            dims: user_dims,
            physical_axes: layout.tokens().iter().map(|t| t.to_string()).collect(),
            physical_shape: s.array_shape(),
            strides: s.array_strides(),
            elements: s.elements(),
            logical_elements: logical,
            padding_elements: s.elements() - logical,
            dtype,
            bytes: s.bytes(dtype)?,
            fill: layout.fill(),
            image: s.image_size(),
            token_shape: s.image_size().map(|_| s.physical_shape()),
            shaped: s,
        })
    }
}
