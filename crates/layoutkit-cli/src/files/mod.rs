//! Reading and writing files the way a Unix tool does: every command that reads `.npy`
//! operands goes through [`read_input`], every command that writes files through [`Output`].
//!
//! Inputs: a regular file is memory-mapped; `-` (standard input), a FIFO or a character
//! device is read into memory (it cannot be mapped) and must start like a `.npy` file.
//!
//! Outputs (the rules the README's "Files" section states):
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
//! Write failures (no space, I/O errors, a closed pipe) are [`crate::error::WriteFailed`] errors (exit
//! status 1); a path that cannot be written at all (a missing or read-only folder, a directory)
//! is bad input (exit status 2).

mod input;
mod output;

pub use input::read_input;
pub use output::{write_output, Output};

pub use crate::error::WriteFailed;

use std::path::Path;

/// Whether `path` names a standard stream (`-`).
pub fn is_stdio(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// How messages name a path: `standard input` / `standard output` for `-`, else the path.
pub fn name(path: &Path, stream: &str) -> String {
    if is_stdio(path) {
        stream.to_string()
    } else {
        path.display().to_string()
    }
}

/// How messages name an input path (`-` is standard input).
pub fn input_name(path: &Path) -> String {
    name(path, "standard input")
}

/// How messages name an output path (`-` is standard output).
pub fn output_name(path: &Path) -> String {
    name(path, "standard output")
}
