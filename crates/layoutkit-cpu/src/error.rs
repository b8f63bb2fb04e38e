use thiserror::Error;

/// Errors of the CPU converters and operators.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum Error {
    /// Invalid layouts, dims, buffers or casts (from `layoutkit-core`).
    #[error(transparent)]
    Core(#[from] layoutkit_core::Error),

    /// Operands a fast path does not take (the reference takes them).
    #[error("{0}")]
    Unsupported(String),

    /// The thread pool could not be started.
    #[error("cannot start {threads} threads: {reason}")]
    Threads { threads: usize, reason: String },
}
