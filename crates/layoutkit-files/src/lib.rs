//! Output files written the way a Unix tool does. Every command and library routine of
//! layoutkit that writes a file (`convert`, `conv`, `pack`, `unpack`, the Python package)
//! goes through [`Output`], so they all follow the same rules (the README's "Files" section):
//!
//! * a regular file, or a path that does not exist yet, is written through a temporary file in
//!   the same folder that is sized first (no space is reported before any work), filled through
//!   a writable memory map, synced, renamed over the path, and the folder synced: a crash leaves
//!   either the old file or the new one (and possibly a `.layoutkit-*.tmp` file beside it);
//! * the new file gets the mode `open(O_CREAT, 0666)` gives under the umask, or keeps the
//!   permission bits (and, where allowed, the owner) of the regular file it replaces;
//! * a symbolic link is followed to its final target, which is replaced as above; the link
//!   stays a link;
//! * a FIFO, a character device or `-` (standard output) is written directly, in order, after
//!   the output is complete in memory; a failed write (no space, closed pipe) is an error;
//! * nothing that is not a regular file is ever renamed over: directories, block devices and
//!   sockets are refused.
//!
//! Errors are [`Error`]s of two kinds: [`Error::Unwritable`] (the path cannot be written at
//! all: a missing or read-only folder, a directory; the caller's input is at fault) and
//! [`Error::WriteFailed`] (the system failed while writing: no space, an I/O error, a closed
//! pipe).

mod output;

pub use output::{write_output, Output, OutputWriter};

use std::fmt;
use std::path::Path;

/// Why an output could not be written; the message names the path and the cause.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// The path cannot be written at all (bad input): its folder is missing or read-only, it
    /// is a directory, a block device or a socket, standard output is a terminal.
    Unwritable(String),
    /// The system failed while the output was written: no space, an I/O error, a closed pipe,
    /// too little memory for a streamed output.
    WriteFailed(String),
}

impl Error {
    /// Whether the system failed (as opposed to a path that cannot be written).
    pub fn is_write_failure(&self) -> bool {
        matches!(self, Error::WriteFailed(_))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Unwritable(m) | Error::WriteFailed(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for Error {}

/// Result type of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Whether `path` names a standard stream (`-`).
pub fn is_stdio(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// How messages name an output path: `standard output` for `-`, else the path.
pub fn output_name(path: &Path) -> String {
    if is_stdio(path) {
        "standard output".to_string()
    } else {
        path.display().to_string()
    }
}
