use thiserror::Error;

/// Errors of the CPU converters.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum Error {
    /// Invalid layouts, dims, buffers or casts (from `layoutkit-core`).
    #[error(transparent)]
    Core(#[from] layoutkit_core::Error),
}
