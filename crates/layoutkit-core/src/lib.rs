//! # layoutkit-core
//!
//! The layout model every other layoutkit crate builds on:
//!
//! * [`Axis`], [`Layout`] and [`Token`]: a layout is a list of physical tokens, outermost first.
//!   An upper-case letter is an axis (its outermost part), `<k><letter>` an inner block of size `k`.
//! * [`parse_format`] accepts every family of names (canonical TVM style, cuDNN, TensorRT, oneDNN,
//!   PyTorch) and [`Layout`]'s `Display` prints the canonical form.
//! * [`Dims`] gives the logical extents; [`ShapedLayout`] is a layout with extents: physical
//!   shape, strides, the forward map (coordinate -> offset) and its inverse (offset -> coordinate
//!   or padding). All size arithmetic is checked.
//! * [`DType`] and [`CastSpec`]: element types and the exact casts between them.
//! * [`npy`]: `.npy` reading and writing, byte-identical to numpy's own files.
//! * [`plan`]: conversion plans (pure data, reused by every backend).
//! * [`tiling`]: which loops of a plan's regions form transposition tiles, and padding merged
//!   into the copies it completes.
//! * [`index_expr`]: the per-element maps as C expressions, for kernel generators.
//! * [`view`]: arrays a caller holds (shape and strides) read in place as a physical array.
//! * [`conv`]: 2-D convolution geometry (stride, padding, dilation, groups, output dims).
//!
//! ```
//! use layoutkit_core::{parse_format, Dims};
//! let khwc8 = parse_format("kHWC8").unwrap();
//! assert_eq!(khwc8.to_string(), "NHWC8c");
//! let shaped = khwc8.shaped(&Dims::parse("N=16,C=3,H=224,W=224").unwrap()).unwrap();
//! assert_eq!(shaped.physical_shape(), vec![16, 224, 224, 1, 8]);
//! assert_eq!(shaped.elements(), 6_422_528);
//! ```
#![forbid(unsafe_code)]

mod axis;
pub mod cast;
pub mod conv;
pub mod describe;
mod dims;
mod dtype;
mod error;
pub mod formats;
pub mod index_expr;
mod layout;
mod notation;
pub mod npy;
pub mod plan;
mod shaped;
pub mod tiling;
pub mod view;
pub mod winograd;

pub use axis::Axis;
pub use cast::{CastSpec, Quantization};
pub use dims::Dims;
pub use dtype::DType;
pub use error::Error;
pub use layout::{ImageGroups, Layout, Token, Transform, IMAGE_LANES, MAX_RANK, MAX_TOKENS};
pub use notation::{is_reserved_name, parse_format};
pub use shaped::{PhysDim, ShapedLayout};

/// Result type of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
