use thiserror::Error;

/// Errors of the OpenCL backend.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum Error {
    /// Invalid layouts, dims or buffers (from `layoutkit-core`).
    #[error(transparent)]
    Core(#[from] layoutkit_core::Error),
    /// No OpenCL library, platform or device.
    #[error("no OpenCL device: {0}")]
    NoDevice(String),
    /// An image larger than the device allows (checked before any allocation).
    #[error("image {width}x{height} exceeds the device's CL_DEVICE_IMAGE2D_MAX_WIDTH x HEIGHT = {max_width}x{max_height} ({device})")]
    ImageTooLarge {
        width: usize,
        height: usize,
        max_width: usize,
        max_height: usize,
        device: String,
    },
    /// Something this backend does not do (the CPU converter does).
    #[error("not supported by the OpenCL backend: {0}")]
    Unsupported(String),
    /// An OpenCL call failed.
    #[error("OpenCL {call} failed: {code}")]
    Cl { call: String, code: String },
    /// The kernel did not compile (with the build log).
    #[error("OpenCL kernel build failed: {0}")]
    Build(String),
}

impl Error {
    pub(crate) fn cl(call: &str, e: impl std::fmt::Display) -> Error {
        Error::Cl {
            call: call.to_string(),
            code: e.to_string(),
        }
    }
}
