use thiserror::Error;

/// Errors of `layoutkit-loopir`.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum Error {
    /// Malformed IR text: `LINE:COL: what was expected`.
    #[error("{line}:{col}: {message}")]
    Parse {
        line: usize,
        col: usize,
        message: String,
    },
    /// IR the extractor rejects (TVM rejects it too, or reads uninitialised memory on it).
    #[error("{0}")]
    Invalid(String),
}

impl Error {
    pub(crate) fn at(line: usize, col: usize, message: impl Into<String>) -> Error {
        Error::Parse {
            line,
            col,
            message: message.into(),
        }
    }
}
