//! The catalogue behind `layoutkit formats`: every named format, its family, canonical form
//! (computed by the parser, not written by hand) and a one-line description.

use crate::{parse_format, Result};

/// One catalogue line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FormatEntry {
    pub name: String,
    pub family: &'static str,
    pub canonical: String,
    pub description: String,
}

/// Names of the canonical family, with descriptions.
const CANONICAL: &[(&str, &str)] = &[
    (
        "NCHW",
        "activations, channels first (PyTorch, cuDNN default)",
    ),
    (
        "NHWC",
        "activations, channels last (TensorFlow, TensorRT kHWC)",
    ),
    ("NCHW4c", "C in blocks of 4, padded"),
    ("NCHW8c", "C in blocks of 8, padded"),
    ("NCHW16c", "C in blocks of 16, padded"),
    ("NCHW32c", "C in blocks of 32, padded (cuDNN NC/32HW32)"),
    (
        "NHWC8c",
        "channels last with C padded to 8 (TensorRT kHWC8)",
    ),
    ("NCDHW", "3-D activations, channels first"),
    ("NDHWC", "3-D activations, channels last"),
    ("OIHW", "filters, output channels outermost"),
    ("HWOI", "filters, spatial outermost (older MACE buffers)"),
    ("HWIO", "filters as TensorFlow stores them"),
    ("MIHW", "depthwise filters (M = depth multiplier)"),
    (
        "HWIM",
        "depthwise filters, spatial outermost (older MACE buffers)",
    ),
    ("OIHW16i16o", "filters in 16x16 blocks of I and O, padded"),
    (
        "OIHW4i16o4i",
        "I blocked twice (I/16, 4, 4) around 16o, padded",
    ),
    ("GOIHW", "grouped filters"),
    ("W", "1-D tensor (bias, scale)"),
];

const ONEDNN: &[(&str, &str)] = &[
    ("nchw", "oneDNN plain NCHW"),
    ("nhwc", "oneDNN plain NHWC"),
    ("nChw8c", "oneDNN C blocked by 8 (AVX2)"),
    ("nChw16c", "oneDNN C blocked by 16 (AVX-512)"),
    ("ncdhw", "oneDNN plain 3-D"),
    ("nCdhw16c", "oneDNN 3-D, C blocked by 16"),
    ("oihw", "oneDNN plain filters"),
    ("OIhw16i16o", "oneDNN filters blocked 16i16o"),
    ("OIhw4i16o4i", "oneDNN filters blocked 4i16o4i (VNNI)"),
    ("Ohwi16o", "oneDNN filters, O blocked by 16, hwi inner"),
    ("goihw", "oneDNN grouped filters"),
];

const CUDNN: &[(&str, &str)] = &[
    ("NC/4HW4", "cuDNN NC/xHWx with x=4 (any x is accepted)"),
    ("NC/32HW32", "cuDNN NC/xHWx with x=32"),
    ("NC/1HW1", "cuDNN NC/xHWx with x=1: plain NCHW"),
    (
        "NCHW_VECT_C:int8x4",
        "cuDNN CUDNN_TENSOR_NCHW_VECT_C with CUDNN_DATA_INT8x4",
    ),
    (
        "NCHW_VECT_C:int8x32",
        "cuDNN CUDNN_TENSOR_NCHW_VECT_C with CUDNN_DATA_INT8x32",
    ),
];

/// Every catalogued name, grouped by family. Contract: every name parses.
pub fn catalogue() -> Result<Vec<FormatEntry>> {
    let mut out = Vec::new();
    let mut add = |family: &'static str, name: &str, description: &str| -> Result<()> {
        out.push(FormatEntry {
            name: name.to_string(),
            family,
            canonical: parse_format(name)?.to_string(),
            description: description.to_string(),
        });
        Ok(())
    };
    for (name, d) in CANONICAL {
        add("canonical", name, d)?;
    }
    for (name, d) in CUDNN {
        add("cudnn", name, d)?;
    }
    for (name, _, d) in crate::notation::aliases::ALIASES {
        let family = if name.starts_with('k') {
            "tensorrt"
        } else {
            "pytorch"
        };
        add(family, name, d)?;
    }
    for (name, d) in ONEDNN {
        add("onednn", name, d)?;
    }
    for (_, name, _, d) in crate::notation::mace::MACE_TYPES {
        add("mace", name, d)?;
    }
    Ok(out)
}

/// The grammar, for `layoutkit formats` to print after the catalogue.
pub const GRAMMAR: &str = "\
Any canonical name is accepted: upper-case letters are axes (outermost first), `<k><letter>` is an
inner block of k of that axis (padded up to a multiple of the block product, padding = fill value).
An axis may be blocked several times: OIHW4i16o4i splits I as I/16, 4, 4.
oneDNN tags: lower case = plain axis, upper case = blocked axis (nChw16c = NCHW16c).
cuDNN: any NC/xHWx (= NCHWxc) or NC/xDHWx. TensorRT k* names and PyTorch memory formats are aliases.
Images (OpenCL RGBA, as MACE stores tensors): ROWS|COLUMNS|LANES, e.g. NH|CW|4c: the physical array
is [height, width, 4] with height = product of the row extents, width = product of the columns.
MACE enum names (IN_OUT_CHANNEL, ...) are accepted too.";
