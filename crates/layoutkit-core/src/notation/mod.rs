//! Format names -> [`Layout`]. One submodule per family of names; [`parse_format`] dispatches.

pub(crate) mod aliases;
mod cudnn;
mod letters;

use crate::{Error, Layout, Result};

/// Parses any accepted format name into its layout.
///
/// Families (see `layout-notation.md` section 2 and `layoutkit formats`):
/// * canonical TVM style: `NCHW`, `NCHW8c`, `OIHW4i16o4i`, `NCDHW`, `W`, ...
/// * oneDNN tags (lower case = plain axis, upper case = blocked axis): `nchw`, `nChw16c`,
///   `OIhw16i16o`, `Ohwi16o`, `goihw`, ...
/// * cuDNN: `NC/32HW32` (any `NC/xHWx`, and `NC/xDHWx`), `NCHW_VECT_C:int8x4`, `NCHW_VECT_C:32`
/// * TensorRT: `kLINEAR`, `kCHW2`, `kCHW4`, `kCHW16`, `kCHW32`, `kHWC`, `kHWC4`, `kHWC8`,
///   `kHWC16`, `kDHWC`, `kDHWC8`, `kCDHW32`
/// * PyTorch memory formats: `contiguous`, `channels_last`, `channels_last_3d`
///
/// The result prints (`Display`) in canonical form; two names of one layout print the same.
///
/// ```
/// use layoutkit_core::parse_format;
/// for name in ["NCHW32c", "NC/32HW32", "kCHW32", "nChw32c", "NCHW_VECT_C:int8x32"] {
///     assert_eq!(parse_format(name).unwrap().to_string(), "NCHW32c");
/// }
/// assert_eq!(parse_format("channels_last").unwrap().to_string(), "NHWC");
/// assert!(parse_format("NCHW16C").is_err());
/// ```
pub fn parse_format(input: &str) -> Result<Layout> {
    let name = input.trim();
    if name.is_empty() {
        return Err(Error::Format {
            input: input.to_string(),
            reason: "empty format name".into(),
        });
    }
    if is_mace_name(name) {
        // MACE image layouts need the image (rows, columns, lanes) extension of the model;
        // they arrive with their own issue and plug in here.
        return Err(Error::FormatNotSupported {
            input: name.to_string(),
            reason: "MACE OpenCL image layouts are not implemented in this version".into(),
        });
    }
    if let Some(layout) = aliases::parse(name)? {
        return Ok(layout);
    }
    if let Some(layout) = cudnn::parse(name)? {
        return Ok(layout);
    }
    letters::parse(name)
}

const MACE_ENUM_NAMES: [&str; 9] = [
    "CONV2D_FILTER",
    "IN_OUT_CHANNEL",
    "ARGUMENT",
    "IN_OUT_HEIGHT",
    "IN_OUT_WIDTH",
    "WINOGRAD_FILTER",
    "DW_CONV2D_FILTER",
    "WEIGHT_HEIGHT",
    "WEIGHT_WIDTH",
];

/// Whether `name` is claimed by a named family (MACE enum names, aliases) before the letter
/// grammar sees it. One canonical string collides: the 8-axis layout `ARGUMENT` reads as MACE's
/// `ARGUMENT` buffer type; write those axes in another order.
pub fn is_reserved_name(name: &str) -> bool {
    is_mace_name(name) || aliases::ALIASES.iter().any(|(a, _, _)| *a == name)
}

fn is_mace_name(name: &str) -> bool {
    name.to_ascii_lowercase().starts_with("mace:")
        || MACE_ENUM_NAMES
            .iter()
            .any(|m| name.split(':').next() == Some(*m))
}
