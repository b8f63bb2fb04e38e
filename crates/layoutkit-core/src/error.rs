use thiserror::Error;

/// Everything that can go wrong in `layoutkit-core`. Each variant names the operation and the
/// input that caused it, so a caller can print it as one line.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum Error {
    /// A format name that does not parse.
    #[error("cannot parse format `{input}`: {reason}")]
    Format { input: String, reason: String },

    /// A family of names that is recognised but not implemented in this build.
    #[error("format `{input}` is not supported yet: {reason}")]
    FormatNotSupported { input: String, reason: String },

    /// A `--dims` string that does not parse.
    #[error("cannot parse dims `{input}`: {reason}")]
    Dims { input: String, reason: String },

    /// Dims that do not fit a layout (missing or extra axes).
    #[error("dims {dims} do not fit format {format}: {reason}")]
    DimsMismatch {
        format: String,
        dims: String,
        reason: String,
    },

    /// A size computation that does not fit in `usize`/`isize`.
    #[error("size overflow in {format} with dims {dims}: {what}")]
    Overflow {
        format: String,
        dims: String,
        what: String,
    },

    /// Two layouts with different logical axes.
    #[error(
        "{src} has axes {src_axes} but {dst} has axes {dst_axes}; a conversion needs the same axes"
    )]
    AxesDiffer {
        src: String,
        src_axes: String,
        dst: String,
        dst_axes: String,
    },

    /// Two shaped layouts whose logical extents differ.
    #[error("logical dims differ: {src} vs {dst}")]
    DimsDiffer { src: String, dst: String },

    /// A logical coordinate outside the dims.
    #[error("coordinate {coord} is outside dims {dims}")]
    CoordOutOfRange { coord: String, dims: String },

    /// A physical offset past the end of the physical array.
    #[error("offset {offset} is outside the {elements} physical elements of {format}")]
    OffsetOutOfRange {
        offset: usize,
        elements: usize,
        format: String,
    },

    /// An element type name that is not known.
    #[error("unknown element type `{0}` (expected one of f32, f16, bf16, f64, i8, u8, i32)")]
    UnknownDType(String),

    /// A cast that is not defined (for example scale/zero point on a float -> float cast).
    #[error("cannot cast {src} -> {dst}: {reason}")]
    Cast {
        src: String,
        dst: String,
        reason: String,
    },

    /// A `.npy` file that is malformed or uses a feature we do not read.
    #[error("bad .npy data: {0}")]
    Npy(String),

    /// A buffer whose length does not match the layout it is used with.
    #[error("{what}: buffer holds {actual_bytes} bytes, the layout needs {expected_bytes}")]
    BufferSize {
        what: String,
        expected_bytes: usize,
        actual_bytes: usize,
    },

    /// Convolution parameters or operand dims that do not fit together.
    #[error("conv2d with input {input}, filter {filter}: {reason}")]
    Conv {
        input: String,
        filter: String,
        reason: String,
    },

    /// Strides that cannot be read as a view of a layout's physical array.
    #[error("{format} cannot be read through strides {strides}: {reason}")]
    Strides {
        format: String,
        strides: String,
        reason: String,
    },

    /// An array (shape and strides) that cannot be read as a layout's physical array.
    #[error("an array of {view} cannot be read as {format}: {reason}")]
    View {
        format: String,
        view: String,
        reason: String,
    },
}
