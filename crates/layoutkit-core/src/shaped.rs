use crate::{Axis, DType, Dims, Error, Layout, Result, Token};

/// One physical dimension of a [`ShapedLayout`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PhysDim {
    /// The token this dimension comes from.
    pub token: Token,
    /// Index of the token's axis in [`ShapedLayout::axes`].
    pub axis: usize,
    /// Number of indices along this dimension.
    pub extent: usize,
    /// How much one step along this dimension adds to the axis's logical index.
    pub weight: usize,
    /// Elements between consecutive indices in the physical array (row-major).
    pub stride: isize,
}

/// A [`Layout`] with logical extents: physical shape, strides and the maps between logical
/// coordinates and physical offsets.
///
/// Contract:
/// * the physical array is row-major over [`ShapedLayout::physical_shape`] and holds
///   [`ShapedLayout::elements`] elements (logical ones plus padding);
/// * `forward` is injective; `inverse(forward(c)) == Some(c)` for every coordinate `c`, and every
///   offset below `elements()` that `forward` does not reach is padding (`inverse` gives `None`);
/// * every size fits in `isize` (construction fails with [`Error::Overflow`] otherwise).
///
/// Coordinates are slices in the order of [`ShapedLayout::axes`] (the layout's axis order).
///
/// ```
/// use layoutkit_core::{parse_format, Dims};
/// let s = parse_format("NCHW8c").unwrap().shaped(&Dims::parse("N=1,C=10,H=2,W=2").unwrap()).unwrap();
/// assert_eq!(s.physical_shape(), vec![1, 2, 2, 2, 8]);
/// assert_eq!(s.forward(&[0, 9, 1, 0]).unwrap(), 32 + 16 + 1);
/// assert_eq!(s.inverse(32 + 16 + 1).unwrap(), Some(vec![0, 9, 1, 0]));
/// assert_eq!(s.inverse(32 + 16 + 2).unwrap(), None); // C=10 is padding
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShapedLayout {
    layout: Layout,
    extents: Vec<usize>,
    padded: Vec<usize>,
    phys: Vec<PhysDim>,
    elements: usize,
    /// Whether the strides are the row-major ones of the physical shape (false: a view made
    /// by [`ShapedLayout::with_strides`], readable as a source only).
    dense: bool,
}

impl ShapedLayout {
    /// Gives `layout` the extents in `dims`, which must name exactly the layout's axes.
    pub fn new(layout: Layout, dims: &Dims) -> Result<ShapedLayout> {
        let mismatch = |reason: String| Error::DimsMismatch {
            format: layout.to_string(),
            dims: dims.to_string(),
            reason,
        };
        for (a, _) in dims.entries() {
            if !layout.axes().contains(a) {
                return Err(mismatch(format!(
                    "axis {a} is not in the format (its axes are {})",
                    layout.axes_string()
                )));
            }
        }
        let mut extents = Vec::with_capacity(layout.rank());
        for &a in layout.axes() {
            let e = dims
                .get(a)
                .ok_or_else(|| mismatch(format!("axis {a} has no extent")))?;
            extents.push(e);
        }
        ShapedLayout::from_extents(layout, extents, &dims.to_string())
    }

    fn from_extents(layout: Layout, extents: Vec<usize>, dims_text: &str) -> Result<ShapedLayout> {
        let overflow = |what: String| Error::Overflow {
            format: layout.to_string(),
            dims: dims_text.to_string(),
            what,
        };
        let axes = layout.axes().to_vec();
        let mut padded = Vec::with_capacity(axes.len());
        let mut phys = Vec::with_capacity(layout.tokens().len());
        for (ai, &a) in axes.iter().enumerate() {
            let block = layout.block_product(a);
            let e = extents[ai];
            let outer = e / block + usize::from(!e.is_multiple_of(block));
            let p = outer
                .checked_mul(block)
                .ok_or_else(|| overflow(format!("axis {a} padded to a multiple of {block}")))?;
            padded.push(p);
        }
        // Weights: the axis token's is the product of all its blocks; a block's is the product
        // of the blocks of its axis written after it (blocks decompose in written order).
        for (ti, &t) in layout.tokens().iter().enumerate() {
            let ai = axes.iter().position(|&a| a == t.axis()).unwrap_or(0);
            let inner: usize = match t {
                Token::Axis(a) => layout.block_product(a),
                Token::Block { .. } => layout.tokens()[ti + 1..]
                    .iter()
                    .filter_map(|u| match *u {
                        Token::Block { axis, size } if axis == t.axis() => Some(size),
                        _ => None,
                    })
                    .product(),
            };
            let extent = match t {
                Token::Axis(_) => padded[ai] / layout.block_product(t.axis()),
                Token::Block { size, .. } => size,
            };
            phys.push(PhysDim {
                token: t,
                axis: ai,
                extent,
                weight: inner,
                stride: 0,
            });
        }
        let mut elements: usize = 1;
        for d in phys.iter_mut().rev() {
            d.stride = isize::try_from(elements)
                .map_err(|_| overflow("the strides exceed isize".into()))?;
            elements = elements
                .checked_mul(d.extent)
                .ok_or_else(|| overflow("the physical element count".into()))?;
        }
        if isize::try_from(elements).is_err() {
            return Err(overflow("the physical element count exceeds isize".into()));
        }
        Ok(ShapedLayout {
            layout,
            extents,
            padded,
            phys,
            elements,
            dense: true,
        })
    }

    /// The same layout read through other strides: `strides[k]` elements between consecutive
    /// indices of dimension `k` of [`ShapedLayout::array_shape`] (a strided view of an array a
    /// caller already holds, e.g. a slice of a batch).
    ///
    /// Contract: every stride of a dimension with more than one index is positive (negative
    /// and zero strides are refused: reversed and broadcast views); strides of dimensions with
    /// one index do not matter and are replaced by the row-major ones. The result's
    /// [`ShapedLayout::elements`] is the *span* of the view (its largest offset plus one), so
    /// a buffer check asks for exactly the bytes the view touches; `forward` uses the new
    /// strides. A strided view is a conversion *source* only: `inverse` and `physical_index`
    /// refuse it, and so does [`crate::plan::ConversionPlan::new`] as a destination. Image
    /// layouts take only their row-major `[height, width, 4]` strides (the result is the
    /// layout itself: their array is not their token shape).
    ///
    /// ```
    /// use layoutkit_core::{parse_format, Dims};
    /// let dims = Dims::parse("N=2,C=3,H=2,W=2").unwrap();
    /// let nchw = parse_format("NCHW").unwrap().shaped(&dims).unwrap();
    /// // The first 3 channels of an NCHW array with 8 channels.
    /// let view = nchw.with_strides(&[32, 4, 2, 1]).unwrap();
    /// assert_eq!(view.forward(&[1, 2, 1, 0]).unwrap(), 32 + 8 + 2);
    /// assert_eq!(view.elements(), 32 + 3 * 4 - (4 - 3) * 0 - 4 + 4); // span: up to (1, 2, 1, 1)
    /// assert!(view.is_strided());
    /// ```
    pub fn with_strides(&self, strides: &[isize]) -> Result<ShapedLayout> {
        let refuse = |reason: String| Error::Strides {
            format: self.layout.to_string(),
            strides: format!("{strides:?}"),
            reason,
        };
        if self.layout.image().is_some() {
            // An image's array is `[height, width, 4]`, not its tokens: row-major only.
            let shape = self.array_shape();
            let dense = self.array_strides();
            let row_major = strides.len() == shape.len()
                && (0..shape.len()).all(|k| shape[k] <= 1 || strides[k] == dense[k]);
            return if row_major {
                Ok(self.clone())
            } else {
                Err(refuse(
                    "an image layout is read only as a row-major [height, width, 4] array".into(),
                ))
            };
        }
        if strides.len() != self.phys.len() {
            return Err(refuse(format!(
                "{} strides given for {} physical dimensions",
                strides.len(),
                self.phys.len()
            )));
        }
        if strides
            .iter()
            .zip(&self.phys)
            .all(|(&s, d)| s == d.stride || d.extent <= 1)
        {
            return Ok(self.clone());
        }
        let mut view = self.clone();
        let mut last: usize = 0;
        for (d, &s) in view.phys.iter_mut().zip(strides) {
            if d.extent <= 1 {
                continue;
            }
            if s <= 0 {
                return Err(refuse(format!(
                    "dimension {} has stride {s} (reversed and broadcast views are not read in place)",
                    d.token
                )));
            }
            d.stride = s;
            last = (d.extent - 1)
                .checked_mul(s as usize)
                .and_then(|x| x.checked_add(last))
                .ok_or_else(|| refuse("the span exceeds usize".into()))?;
        }
        view.elements = if self.elements == 0 { 0 } else { last + 1 };
        if isize::try_from(view.elements).is_err() {
            return Err(refuse("the span exceeds isize".into()));
        }
        view.dense = false;
        Ok(view)
    }

    /// Whether this is a strided view ([`ShapedLayout::with_strides`]) rather than a
    /// row-major physical array.
    pub fn is_strided(&self) -> bool {
        !self.dense
    }

    /// Infers the dims of an array whose shape is this layout's physical shape with no padding
    /// (each extent is the product of its axis's physical extents).
    ///
    /// Errors when the number of dimensions differs from the number of tokens or a product
    /// overflows. The result has no padding by construction.
    pub fn infer_dims(layout: &Layout, physical_shape: &[usize]) -> Result<Dims> {
        let tokens = layout.tokens();
        if tokens.len() != physical_shape.len() {
            return Err(Error::DimsMismatch {
                format: layout.to_string(),
                dims: format!("{physical_shape:?}"),
                reason: format!(
                    "the array has {} dimensions but the format has {} physical dimensions",
                    physical_shape.len(),
                    tokens.len()
                ),
            });
        }
        let mut entries = Vec::new();
        for &a in layout.axes() {
            let mut e: usize = 1;
            for (t, &n) in tokens.iter().zip(physical_shape) {
                if t.axis() == a {
                    if let Token::Block { size, .. } = *t {
                        if n != size {
                            return Err(Error::DimsMismatch {
                                format: layout.to_string(),
                                dims: format!("{physical_shape:?}"),
                                reason: format!(
                                    "the dimension of block {t} has extent {n}, not {size}"
                                ),
                            });
                        }
                    }
                    e = e.checked_mul(n).ok_or_else(|| Error::Overflow {
                        format: layout.to_string(),
                        dims: format!("{physical_shape:?}"),
                        what: format!("the extent of axis {a}"),
                    })?;
                }
            }
            entries.push((a, e));
        }
        Dims::new(entries)
    }

    /// The layout.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Logical axes, in layout order (the order of coordinates).
    pub fn axes(&self) -> &[Axis] {
        self.layout.axes()
    }

    /// Logical extents, in the order of [`ShapedLayout::axes`].
    pub fn extents(&self) -> &[usize] {
        &self.extents
    }

    /// Extents padded up to a multiple of each axis's block product.
    pub fn padded_extents(&self) -> &[usize] {
        &self.padded
    }

    /// The logical dims, in layout order.
    pub fn dims(&self) -> Dims {
        Dims::new(
            self.axes()
                .iter()
                .copied()
                .zip(self.extents.iter().copied())
                .collect(),
        )
        .unwrap_or_default()
    }

    /// The extent of `axis`, if the layout has it.
    pub fn extent(&self, axis: Axis) -> Option<usize> {
        self.axes()
            .iter()
            .position(|&a| a == axis)
            .map(|i| self.extents[i])
    }

    /// Physical dimensions, outermost first.
    pub fn phys_dims(&self) -> &[PhysDim] {
        &self.phys
    }

    /// Shape of the physical (row-major) array.
    pub fn physical_shape(&self) -> Vec<usize> {
        self.phys.iter().map(|d| d.extent).collect()
    }

    /// Strides of the physical array, in elements.
    pub fn strides(&self) -> Vec<isize> {
        self.phys.iter().map(|d| d.stride).collect()
    }

    /// Physical element count, padding included (for a strided view: its span, the largest
    /// offset plus one).
    pub fn elements(&self) -> usize {
        self.elements
    }

    /// Logical element count (product of the extents; never more than `elements()`).
    pub fn logical_elements(&self) -> usize {
        self.extents.iter().product()
    }

    /// Whether any axis is padded.
    pub fn has_padding(&self) -> bool {
        self.extents != self.padded
    }

    /// Bytes of the physical array for elements of `dtype`.
    pub fn bytes(&self, dtype: DType) -> Result<usize> {
        self.elements
            .checked_mul(dtype.size_bytes())
            .filter(|&b| isize::try_from(b).is_ok())
            .ok_or_else(|| Error::Overflow {
                format: self.layout.to_string(),
                dims: self.dims().to_string(),
                what: format!("the byte count for {dtype}"),
            })
    }

    /// `(width, height)` of an image layout: the products of its column and row extents.
    pub fn image_size(&self) -> Option<(usize, usize)> {
        let g = self.layout.image()?;
        let n = self.phys.len();
        let height = self.phys[..g.rows].iter().map(|d| d.extent).product();
        let width = self.phys[g.rows..n - 1].iter().map(|d| d.extent).product();
        Some((width, height))
    }

    /// Shape of the array a file or device buffer holds: `[height, width, 4]` for an image
    /// layout, the physical shape otherwise.
    pub fn array_shape(&self) -> Vec<usize> {
        match self.image_size() {
            Some((w, h)) => vec![h, w, crate::IMAGE_LANES],
            None => self.physical_shape(),
        }
    }

    /// Strides of [`ShapedLayout::array_shape`], in elements: row-major, or a strided view's.
    pub fn array_strides(&self) -> Vec<isize> {
        if !self.dense {
            return self.strides();
        }
        let shape = self.array_shape();
        let mut strides = vec![1isize; shape.len()];
        for k in (0..shape.len().saturating_sub(1)).rev() {
            strides[k] = strides[k + 1] * shape[k + 1] as isize;
        }
        strides
    }

    /// The pixel `(x, y, lane)` holding physical offset `offset` of an image layout.
    pub fn pixel_of(&self, offset: usize) -> Result<Option<(usize, usize, usize)>> {
        self.check_offset(offset)?;
        Ok(self.image_size().map(|(w, _)| {
            let p = offset / crate::IMAGE_LANES;
            (p % w, p / w, offset % crate::IMAGE_LANES)
        }))
    }

    /// The physical offset of pixel `(x, y)`, lane `lane`, of an image layout.
    pub fn offset_of_pixel(&self, x: usize, y: usize, lane: usize) -> Result<usize> {
        let Some((w, h)) = self.image_size() else {
            return Err(Error::CoordOutOfRange {
                coord: format!("pixel ({x}, {y}) lane {lane}"),
                dims: format!("{} (not an image layout)", self.dims()),
            });
        };
        if x >= w || y >= h || lane >= crate::IMAGE_LANES {
            return Err(Error::CoordOutOfRange {
                coord: format!("pixel ({x}, {y}) lane {lane}"),
                dims: format!(
                    "an image of width {w}, height {h}, {} lanes",
                    crate::IMAGE_LANES
                ),
            });
        }
        Ok((y * w + x) * crate::IMAGE_LANES + lane)
    }

    /// Whether `other` has the same axes with the same extents (in any order).
    pub fn same_dims(&self, other: &ShapedLayout) -> bool {
        self.layout.same_axes(&other.layout)
            && self
                .axes()
                .iter()
                .zip(&self.extents)
                .all(|(&a, &e)| other.extent(a) == Some(e))
    }

    /// For each axis of `self`, its index in `other`'s axes. Contract: same axes.
    pub fn axis_permutation_to(&self, other: &ShapedLayout) -> Vec<usize> {
        self.axes()
            .iter()
            .map(|a| other.axes().iter().position(|b| b == a).unwrap_or(0))
            .collect()
    }

    /// A coordinate from `A=i,B=j,...` form, in layout order. Every axis must be given.
    pub fn coord_from_dims(&self, coord: &Dims) -> Result<Vec<usize>> {
        let mut out = Vec::with_capacity(self.axes().len());
        for &a in self.axes() {
            let i = coord.get(a).ok_or_else(|| Error::CoordOutOfRange {
                coord: coord.to_string(),
                dims: format!("{} (axis {a} is missing)", self.dims()),
            })?;
            out.push(i);
        }
        if let Some((a, _)) = coord
            .entries()
            .iter()
            .find(|(a, _)| !self.axes().contains(a))
        {
            return Err(Error::CoordOutOfRange {
                coord: coord.to_string(),
                dims: format!("{} (axis {a} is not in the format)", self.dims()),
            });
        }
        Ok(out)
    }

    /// Physical offset of logical coordinate `coord` (layout order).
    pub fn forward(&self, coord: &[usize]) -> Result<usize> {
        if coord.len() != self.extents.len() || coord.iter().zip(&self.extents).any(|(c, e)| c >= e)
        {
            return Err(Error::CoordOutOfRange {
                coord: format!("{coord:?}"),
                dims: self.dims().to_string(),
            });
        }
        Ok(self.forward_unchecked(coord))
    }

    /// [`ShapedLayout::forward`] without the range check. Contract: `coord` is in range (a
    /// coordinate out of range gives an unspecified offset, never undefined behaviour).
    pub fn forward_unchecked(&self, coord: &[usize]) -> usize {
        let mut offset = 0usize;
        for d in &self.phys {
            let idx = (coord[d.axis] / d.weight) % d.extent.max(1);
            offset = offset.wrapping_add(idx.wrapping_mul(d.stride as usize));
        }
        offset
    }

    /// Physical index (one per physical dimension) of `offset`.
    pub fn physical_index(&self, offset: usize) -> Result<Vec<usize>> {
        self.check_offset(offset)?;
        Ok(self
            .phys
            .iter()
            .map(|d| (offset / d.stride as usize) % d.extent)
            .collect())
    }

    /// Logical coordinate stored at `offset`, or `None` if it is padding.
    pub fn inverse(&self, offset: usize) -> Result<Option<Vec<usize>>> {
        self.check_offset(offset)?;
        let mut coord = vec![0usize; self.extents.len()];
        Ok(self.inverse_into(offset, &mut coord).then_some(coord))
    }

    /// Allocation-free inverse: writes the coordinate into `coord` and returns whether it is a
    /// logical element (false: padding). Contract: `offset < elements()`, `coord.len() == rank`,
    /// not a strided view.
    pub fn inverse_into(&self, offset: usize, coord: &mut [usize]) -> bool {
        coord.iter_mut().for_each(|c| *c = 0);
        for d in &self.phys {
            let idx = (offset / d.stride as usize) % d.extent;
            coord[d.axis] += idx * d.weight;
        }
        coord.iter().zip(&self.extents).all(|(c, e)| c < e)
    }

    fn check_offset(&self, offset: usize) -> Result<()> {
        if !self.dense {
            return Err(Error::Strides {
                format: self.layout.to_string(),
                strides: format!("{:?}", self.strides()),
                reason: "a strided view maps coordinates to offsets only (no inverse)".into(),
            });
        }
        if offset >= self.elements {
            return Err(Error::OffsetOutOfRange {
                offset,
                elements: self.elements,
                format: self.layout.to_string(),
            });
        }
        Ok(())
    }
}
