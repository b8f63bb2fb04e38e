//! Reading and writing files the way a Unix tool does: every command that reads `.npy`
//! operands goes through [`read_input`], every command that writes files through [`Output`].
//!
//! Inputs: a regular file is memory-mapped; `-` (standard input), a FIFO or a character
//! device is read into memory (it cannot be mapped) and must start like a `.npy` file.
//!
//! Outputs go through [`layoutkit_files::Output`] (re-exported here), whose crate doc states
//! the rules (the README's "Files" section): regular files replaced atomically, symbolic links
//! followed, FIFOs, character devices and `-` written in place, nothing else renamed over.
//! Write failures (no space, I/O errors, a closed pipe) are exit status 1; a path that cannot
//! be written at all (a missing or read-only folder, a directory) is bad input (exit status 2).

mod input;

pub use input::read_input;
pub use layoutkit_files::{is_stdio, output_name, write_output, Output};

use std::path::Path;

/// How messages name an input path: `standard input` for `-`, else the path.
pub fn input_name(path: &Path) -> String {
    if is_stdio(path) {
        "standard input".to_string()
    } else {
        path.display().to_string()
    }
}
