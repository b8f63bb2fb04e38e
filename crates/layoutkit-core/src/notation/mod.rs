//! Format names -> [`Layout`]. One submodule per family of names; [`parse_format`] dispatches.

pub(crate) mod aliases;
mod cudnn;
mod letters;
pub(crate) mod mace;

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
/// * MACE OpenCL image buffer types: `mace:in_out_channel`, `IN_OUT_CHANNEL`, ... and the image
///   notation they print as, `ROWS|COLUMNS|LANES` (`NH|CW|4c`)
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
    if mace::is_mace_name(name) {
        return mace::parse(name);
    }
    if name.contains('|') {
        return mace::parse_image(name);
    }
    if let Some(layout) = aliases::parse(name)? {
        return Ok(layout);
    }
    if let Some(layout) = cudnn::parse(name)? {
        return Ok(layout);
    }
    letters::parse(name)
}

/// Whether `name` is claimed by a named family (MACE enum names, aliases) before the letter
/// grammar sees it. One canonical string collides: the 8-axis layout `ARGUMENT` reads as MACE's
/// `ARGUMENT` buffer type; write those axes in another order.
pub fn is_reserved_name(name: &str) -> bool {
    mace::is_mace_name(name) || aliases::ALIASES.iter().any(|(a, _, _)| *a == name)
}
