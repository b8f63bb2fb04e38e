use thiserror::Error;

/// Errors of the CUDA backend.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum Error {
    /// Invalid layouts, dims, buffers or casts (from `layoutkit-core`).
    #[error(transparent)]
    Core(#[from] layoutkit_core::Error),
    /// No driver, no NVRTC, or no GPU.
    #[error("no CUDA device: {0}")]
    NoDevice(String),
    /// Something this backend does not do (the CPU converter does).
    #[error("not supported by the CUDA backend: {0}")]
    Unsupported(String),
    /// A CUDA driver call failed.
    #[error("CUDA {call} failed: {message}")]
    Driver { call: String, message: String },
    /// NVRTC could not compile a generated kernel (with its log).
    #[error("NVRTC compilation failed: {0}")]
    Compile(String),
}

impl Error {
    pub(crate) fn driver(call: &str, e: impl std::fmt::Debug) -> Error {
        Error::Driver {
            call: call.to_string(),
            message: format!("{e:?}"),
        }
    }
}
