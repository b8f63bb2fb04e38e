use std::fmt;

use crate::{Axis, Dims, Error, Result, ShapedLayout};

/// The most logical axes a layout may have.
pub const MAX_RANK: usize = 8;
/// The most physical tokens (axes plus blocks) a layout may have.
pub const MAX_TOKENS: usize = 24;

/// One physical dimension of a layout, outermost first in [`Layout::tokens`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Token {
    /// The outermost part of an axis (written upper case: `C`).
    Axis(Axis),
    /// An inner block of `size` of an axis (written `<size><lower case letter>`: `8c`).
    Block { axis: Axis, size: usize },
}

impl Token {
    /// The logical axis this token belongs to.
    pub fn axis(self) -> Axis {
        match self {
            Token::Axis(a) | Token::Block { axis: a, .. } => a,
        }
    }
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Token::Axis(a) => write!(f, "{}", a.letter()),
            Token::Block { axis, size } => write!(f, "{size}{}", axis.block_letter()),
        }
    }
}

/// A tensor memory layout: physical tokens outermost first, plus the value padding holds.
///
/// Contract (checked by [`Layout::new`]):
/// * every axis has exactly one [`Token::Axis`]; every block belongs to such an axis;
/// * every block has size >= 2 (blocks of 1 change nothing and are dropped, so that
///   `NCHW1c` and `NC/1HW1` are the same layout as `NCHW`);
/// * at most [`MAX_RANK`] axes and [`MAX_TOKENS`] tokens;
/// * the product of an axis's blocks fits in `usize`.
///
/// A logical index `i` of an axis with blocks `b1, b2, ..., bk` (in the order they appear)
/// decomposes as `i = ((outer*b1 + j1)*b2 + j2)*... + jk`; the axis is padded up to a multiple
/// of `b1*...*bk` and padding holds [`Layout::fill`] (zero unless declared).
///
/// ```
/// use layoutkit_core::parse_format;
/// let l = parse_format("OIHW4i16o4i").unwrap();
/// assert_eq!(l.rank(), 4);
/// assert_eq!(l.blocks(layoutkit_core::Axis::from_letter('I').unwrap()), vec![4, 4]);
/// ```
#[derive(Clone, Debug)]
pub struct Layout {
    tokens: Vec<Token>,
    axes: Vec<Axis>,
    fill: f64,
    image: Option<ImageGroups>,
    transform: Option<Transform>,
}

/// How the tokens of an image layout form an OpenCL 2-D RGBA image: the first `rows` tokens
/// are the rows (y), the last token (a block of 4) the lanes, the tokens between the columns
/// (x). The physical array is `[height, width, 4]`, a reshape of the row-major token array.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ImageGroups {
    pub rows: usize,
}

/// A numeric transform applied before the layout (the logical axes then describe the
/// transformed tensor, not the source).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Transform {
    /// MACE's Winograd filter transform `U = G g G^T` of 3x3 OIHW filters, for output tiles of
    /// `block` x `block` (2 or 4). The layout's axes are `T` (the `(block+2)^2` tile positions,
    /// row-major), `O` and `I`.
    WinogradFilter { block: u8 },
}

/// Lanes per pixel of an RGBA image.
pub const IMAGE_LANES: usize = 4;

impl PartialEq for Layout {
    fn eq(&self, other: &Self) -> bool {
        self.tokens == other.tokens
            && self.fill.to_bits() == other.fill.to_bits()
            && self.image == other.image
            && self.transform == other.transform
    }
}
impl Eq for Layout {}

impl Layout {
    /// Builds a layout from its tokens, outermost first, with fill value zero.
    /// `name` is only used in error messages.
    pub fn new(name: &str, tokens: Vec<Token>) -> Result<Layout> {
        let err = |reason: String| Error::Format {
            input: name.to_string(),
            reason,
        };
        for t in &tokens {
            if let Token::Block { axis, .. } = *t {
                if !tokens.contains(&Token::Axis(axis)) {
                    return Err(err(format!(
                        "block {t} has no axis {axis} (write {axis} somewhere in the format)"
                    )));
                }
            }
        }
        let tokens: Vec<Token> = tokens
            .into_iter()
            .filter(|t| !matches!(t, Token::Block { size: 1, .. }))
            .collect();
        if tokens.is_empty() {
            return Err(err("a layout needs at least one axis".into()));
        }
        if tokens.len() > MAX_TOKENS {
            return Err(err(format!(
                "{} physical dimensions; at most {MAX_TOKENS} are supported",
                tokens.len()
            )));
        }
        let mut axes = Vec::new();
        for t in &tokens {
            if let Token::Axis(a) = *t {
                if axes.contains(&a) {
                    return Err(err(format!("axis {a} appears twice")));
                }
                axes.push(a);
            }
        }
        if axes.len() > MAX_RANK {
            return Err(err(format!(
                "{} axes; at most {MAX_RANK} are supported",
                axes.len()
            )));
        }
        for t in &tokens {
            if let Token::Block { axis, size } = *t {
                if size == 0 {
                    return Err(err(format!("block 0{} has size zero", axis.block_letter())));
                }
            }
        }
        let layout = Layout {
            tokens,
            axes,
            fill: 0.0,
            image: None,
            transform: None,
        };
        for &a in &layout.axes {
            layout
                .blocks(a)
                .iter()
                .try_fold(1usize, |acc, &b| acc.checked_mul(b))
                .ok_or_else(|| err(format!("the blocks of axis {a} overflow")))?;
        }
        Ok(layout)
    }

    /// An image layout: `rows`, `columns` and the `lanes` token (a block of 4), as
    /// [`ImageGroups`] describes. Blocks of 1 are dropped from each group.
    ///
    /// ```
    /// use layoutkit_core::parse_format;
    /// let l = parse_format("mace:in_out_channel").unwrap();
    /// assert_eq!(l.to_string(), "NH|CW|4c");
    /// assert_eq!(l.image().unwrap().rows, 2);
    /// ```
    pub fn image_layout(
        name: &str,
        rows: Vec<Token>,
        columns: Vec<Token>,
        lanes: Token,
    ) -> Result<Layout> {
        let err = |reason: String| Error::Format {
            input: name.to_string(),
            reason,
        };
        if !matches!(
            lanes,
            Token::Block {
                size: IMAGE_LANES,
                ..
            }
        ) {
            return Err(err(format!(
                "the lanes of an image must be one block of {IMAGE_LANES} (e.g. 4c), not {lanes}"
            )));
        }
        let drop_ones = |v: Vec<Token>| -> Vec<Token> {
            v.into_iter()
                .filter(|t| !matches!(t, Token::Block { size: 1, .. }))
                .collect()
        };
        let rows = drop_ones(rows);
        let n_rows = rows.len();
        let mut tokens = rows;
        tokens.extend(drop_ones(columns));
        tokens.push(lanes);
        let mut layout = Layout::new(name, tokens)?;
        layout.image = Some(ImageGroups { rows: n_rows });
        Ok(layout)
    }

    /// The image grouping, for image layouts.
    pub fn image(&self) -> Option<ImageGroups> {
        self.image
    }

    /// The numeric transform applied before the layout, if any.
    pub fn transform(&self) -> Option<Transform> {
        self.transform
    }

    /// The same layout, marked as holding the result of `transform`.
    pub fn with_transform(mut self, transform: Transform) -> Layout {
        self.transform = Some(transform);
        self
    }

    /// The same layout with padding holding `fill` instead of zero.
    ///
    /// The fill is a value of the destination element type: it is converted to that type with
    /// round-to-nearest-even and saturation (no scale or zero point).
    pub fn with_fill(mut self, fill: f64) -> Layout {
        self.fill = fill;
        self
    }

    /// The value padding holds.
    pub fn fill(&self) -> f64 {
        self.fill
    }

    /// Physical tokens, outermost first.
    pub fn tokens(&self) -> &[Token] {
        &self.tokens
    }

    /// Logical axes, in the order their upper-case letters appear.
    pub fn axes(&self) -> &[Axis] {
        &self.axes
    }

    /// Number of logical axes.
    pub fn rank(&self) -> usize {
        self.axes.len()
    }

    /// Block sizes of `axis`, in the order they appear (empty if unblocked or absent).
    pub fn blocks(&self, axis: Axis) -> Vec<usize> {
        self.tokens
            .iter()
            .filter_map(|t| match *t {
                Token::Block { axis: a, size } if a == axis => Some(size),
                _ => None,
            })
            .collect()
    }

    /// Product of the blocks of `axis` (1 if unblocked); extents are padded to a multiple of it.
    pub fn block_product(&self, axis: Axis) -> usize {
        // Cannot overflow: checked in `new`.
        self.blocks(axis).iter().product()
    }

    /// Whether any axis is blocked (and so may be padded).
    pub fn is_blocked(&self) -> bool {
        self.tokens.iter().any(|t| matches!(t, Token::Block { .. }))
    }

    /// Whether both layouts have the same set of logical axes.
    pub fn same_axes(&self, other: &Layout) -> bool {
        let mut a = self.axes.clone();
        let mut b = other.axes.clone();
        a.sort();
        b.sort();
        a == b
    }

    /// The logical axes as a string in layout order, e.g. `NCHW`.
    pub fn axes_string(&self) -> String {
        self.axes.iter().map(|a| a.letter()).collect()
    }

    /// This layout with extents: see [`ShapedLayout::new`].
    ///
    /// A Winograd filter layout (axes `T, O, I`) also accepts the dims of the filter it
    /// transforms, `O, I, H=3, W=3`, and takes `T = (block + 2)^2`.
    pub fn shaped(&self, dims: &Dims) -> Result<ShapedLayout> {
        ShapedLayout::new(self.clone(), &self.transformed_dims(dims)?)
    }

    /// The dims of the transformed tensor for the dims of the source (unchanged without a
    /// transform, or when they already name the transformed axes).
    pub fn transformed_dims(&self, dims: &Dims) -> Result<Dims> {
        let Some(Transform::WinogradFilter { block }) = self.transform else {
            return Ok(dims.clone());
        };
        let axis = |c| crate::Axis::from_letter(c).expect("a letter");
        if dims.get(axis('T')).is_some() {
            return Ok(dims.clone());
        }
        let (h, w) = (dims.get(axis('H')), dims.get(axis('W')));
        if h != Some(3) || w != Some(3) {
            return Err(Error::DimsMismatch {
                format: self.to_string(),
                dims: dims.to_string(),
                reason: "the Winograd filter transform takes 3x3 filters (H=3, W=3)".into(),
            });
        }
        let get = |c| {
            dims.get(axis(c)).ok_or_else(|| Error::DimsMismatch {
                format: self.to_string(),
                dims: dims.to_string(),
                reason: format!("axis {c} has no extent"),
            })
        };
        let t = (block as usize + 2) * (block as usize + 2);
        Dims::new(vec![
            (axis('T'), t),
            (axis('O'), get('O')?),
            (axis('I'), get('I')?),
        ])
    }
}

/// Prints the canonical (TVM-style) form: `NCHW8c`, `OIHW4i16o4i`.
impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(Transform::WinogradFilter { block }) = self.transform {
            write!(f, "winograd{block}:")?;
        }
        let n = self.tokens.len();
        for (i, t) in self.tokens.iter().enumerate() {
            if let Some(g) = self.image {
                // ROWS|COLUMNS|LANES, with either of the first two possibly empty.
                if i == g.rows {
                    write!(f, "|")?;
                }
                if i + 1 == n {
                    write!(f, "|")?;
                }
            }
            write!(f, "{t}")?;
        }
        Ok(())
    }
}
