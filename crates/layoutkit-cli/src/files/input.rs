//! Inputs: regular files mapped, streams read into memory.

use std::io::{IsTerminal, Read};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{bail, Context, Result};

use super::{input_name, is_stdio};

/// An input file's bytes: memory-mapped when it is a regular file, so converting a large
/// tensor needs little more memory than the pages in use (the kernel pages the input in and
/// out as it is read); read into memory when it is a stream (standard input, a FIFO, a
/// character device), which cannot be mapped.
pub enum Input {
    Mapped(memmap2::Mmap),
    Read(Vec<u8>),
    Empty,
}

impl std::ops::Deref for Input {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Input::Mapped(m) => m,
            Input::Read(v) => v,
            Input::Empty => &[],
        }
    }
}

/// Standard input holds one file; a second `-` would read an empty stream.
static STDIN_TAKEN: AtomicBool = AtomicBool::new(false);

/// The bytes of the `.npy` file at `path` (`-` reads standard input), naming it in errors.
///
/// A stream must start with the `.npy` magic string: anything else is refused after its first
/// six bytes rather than read whole.
pub fn read_input(path: &Path) -> Result<Input> {
    if is_stdio(path) {
        if STDIN_TAKEN.swap(true, Ordering::SeqCst) {
            bail!("standard input can be read once; name only one input `-`");
        }
        let stdin = std::io::stdin();
        if stdin.is_terminal() {
            bail!("standard input is a terminal; pipe a .npy file into it or name a file");
        }
        return read_stream(stdin.lock(), "standard input");
    }
    let file =
        std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    let meta = file
        .metadata()
        .with_context(|| format!("cannot read {}", path.display()))?;
    if meta.is_dir() {
        bail!("cannot read {}: it is a directory", path.display());
    }
    if !meta.is_file() {
        return read_stream(file, &input_name(path));
    }
    if meta.len() == 0 {
        return Ok(Input::Empty);
    }
    // SAFETY: the map is read-only and lives as long as the returned value. If another process
    // truncates or rewrites the file while we read it, the bytes we see may change (or reading
    // past a truncated end faults); that is the documented caveat of mapping files, the same
    // as any tool that maps its input.
    let map = unsafe { memmap2::Mmap::map(&file) }
        .with_context(|| format!("cannot map {}", path.display()))?;
    Ok(Input::Mapped(map))
}

const NPY_MAGIC: &[u8; 6] = b"\x93NUMPY";

/// Reads a stream whole after checking that it starts like a `.npy` file.
fn read_stream(mut r: impl Read, name: &str) -> Result<Input> {
    let mut data = Vec::with_capacity(1 << 16);
    (&mut r)
        .take(NPY_MAGIC.len() as u64)
        .read_to_end(&mut data)
        .with_context(|| format!("cannot read {name}"))?;
    if data.is_empty() {
        bail!("{name} is empty; expected a .npy file");
    }
    if data[..] != NPY_MAGIC[..data.len()] || data.len() < NPY_MAGIC.len() {
        bail!("{name} is not a .npy file (the magic string \\x93NUMPY is missing)");
    }
    r.read_to_end(&mut data)
        .with_context(|| format!("cannot read {name}"))?;
    Ok(Input::Read(data))
}
