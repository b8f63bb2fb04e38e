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
}

impl PartialEq for Layout {
    fn eq(&self, other: &Self) -> bool {
        self.tokens == other.tokens && self.fill.to_bits() == other.fill.to_bits()
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
    pub fn shaped(&self, dims: &Dims) -> Result<ShapedLayout> {
        ShapedLayout::new(self.clone(), dims)
    }
}

/// Prints the canonical (TVM-style) form: `NCHW8c`, `OIHW4i16o4i`.
impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for t in &self.tokens {
            write!(f, "{t}")?;
        }
        Ok(())
    }
}
