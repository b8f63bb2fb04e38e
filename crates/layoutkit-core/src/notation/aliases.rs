//! Fixed names: TensorRT `TensorFormat`s and PyTorch memory formats.

use crate::{Layout, Result};

/// `(accepted name, canonical form, description)`. Matching is exact (case-sensitive).
///
/// TensorRT's `kLINEAR` is row-major in the tensor's own axis order; for the 4-D activations it
/// is used with that is NCHW (write `NCDHW` for 5-D tensors).
pub(crate) const ALIASES: &[(&str, &str, &str)] = &[
    ("kLINEAR", "NCHW", "TensorRT row-major (4-D: NCHW)"),
    ("kCHW2", "NCHW2c", "TensorRT: C in blocks of 2, zero padded"),
    ("kCHW4", "NCHW4c", "TensorRT: C in blocks of 4, zero padded"),
    (
        "kCHW16",
        "NCHW16c",
        "TensorRT: C in blocks of 16, zero padded",
    ),
    (
        "kCHW32",
        "NCHW32c",
        "TensorRT: C in blocks of 32, zero padded",
    ),
    ("kHWC", "NHWC", "TensorRT: channels last, no padding"),
    ("kHWC4", "NHWC4c", "TensorRT: channels last, C padded to 4"),
    (
        "kHWC8",
        "NHWC8c",
        "TensorRT: channels last, C padded to 8 (f16)",
    ),
    (
        "kHWC16",
        "NHWC16c",
        "TensorRT: channels last, C padded to 16",
    ),
    ("kDHWC", "NDHWC", "TensorRT 3-D channels last"),
    (
        "kDHWC8",
        "NDHWC8c",
        "TensorRT 3-D channels last, C padded to 8",
    ),
    ("kCDHW32", "NCDHW32c", "TensorRT 3-D, C in blocks of 32"),
    (
        "contiguous",
        "NCHW",
        "PyTorch torch.contiguous_format (4-D)",
    ),
    ("channels_last", "NHWC", "PyTorch torch.channels_last"),
    (
        "channels_last_3d",
        "NDHWC",
        "PyTorch torch.channels_last_3d",
    ),
];

/// `Ok(None)` when `name` is not an alias.
pub(super) fn parse(name: &str) -> Result<Option<Layout>> {
    let bare = name
        .strip_prefix("torch.")
        .or_else(|| name.strip_prefix("TensorFormat::"))
        .or_else(|| name.strip_prefix("TensorFormat."))
        .unwrap_or(name);
    // Exact match only: a case-insensitive match would collide with canonical names
    // (`KDHWC` is a canonical five-axis layout, not `kDHWC`).
    let hit = ALIASES.iter().find(|(alias, _, _)| *alias == bare);
    match hit {
        Some((_, canonical, _)) => super::letters::parse(canonical).map(Some),
        None => Ok(None),
    }
}
