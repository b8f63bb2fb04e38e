use std::path::PathBuf;

use thiserror::Error;

/// Everything that can go wrong reading, packing or unpacking a model. Each variant names the
/// file and, where there is one, the tensor, so a caller can print it as one line.
#[derive(Debug, Error)]
pub enum Error {
    /// A file that cannot be opened, mapped or read.
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },

    /// An output folder that cannot be created.
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },

    /// An output file that cannot be written (from `layoutkit-files`, which writes every
    /// output: atomically for regular files, in place for FIFOs and devices).
    #[error(transparent)]
    Output(#[from] layoutkit_files::Error),

    /// A model file that is malformed (truncated, bad header, bad protobuf, bad index).
    #[error("{path}: {reason}")]
    Malformed { path: PathBuf, reason: String },

    /// A tensor that cannot be read or packed as asked.
    #[error("{path}: tensor `{tensor}`: {reason}")]
    Tensor {
        path: PathBuf,
        tensor: String,
        reason: String,
    },

    /// A tensor whose role (filter, depthwise filter, dense weight, bias) cannot be decided.
    #[error("{path}: tensor `{tensor}`: role is ambiguous: {reason}")]
    AmbiguousRole {
        path: PathBuf,
        tensor: String,
        reason: String,
    },

    /// A layout conversion that failed (from `layoutkit-cpu`).
    #[error("{path}: tensor `{tensor}`: {source}")]
    Convert {
        path: PathBuf,
        tensor: String,
        source: Box<layoutkit_cpu::Error>,
    },

    /// A profile name that is not known.
    #[error("unknown profile `{0}` (expected one of mace-gpu, onednn-avx2, onednn-avx512, cudnn-nhwc, tensorrt-int8, layoutkit-cuda)")]
    UnknownProfile(String),

    /// A `--rule NAME_GLOB=LAYOUT` that does not parse.
    #[error("bad rule `{rule}`: {reason}")]
    Rule { rule: String, reason: String },

    /// Options that do not fit together or do not fit the model.
    #[error("{0}")]
    Options(String),

    /// A packed file without layoutkit's metadata, or with metadata that does not fit it.
    #[error("{path}: {reason}")]
    NotPacked { path: PathBuf, reason: String },
}

impl Error {
    /// Whether the system failed while an output was written (no space, an I/O error, a
    /// closed pipe), as opposed to bad input.
    pub fn is_write_failure(&self) -> bool {
        matches!(self, Error::Output(e) if e.is_write_failure())
    }
}

/// Result type of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
