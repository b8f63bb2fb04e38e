use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};

/// An input file's bytes: memory-mapped, so converting a large tensor needs little more
/// memory than the output (the kernel pages the input in and out as it is read).
pub enum Input {
    Mapped(memmap2::Mmap),
    Empty,
}

impl std::ops::Deref for Input {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Input::Mapped(m) => m,
            Input::Empty => &[],
        }
    }
}

/// Maps an input file read-only, naming it in the error.
pub fn read_input(path: &Path) -> Result<Input> {
    let file =
        std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    let len = file
        .metadata()
        .with_context(|| format!("cannot read {}", path.display()))?
        .len();
    if len == 0 {
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

/// Writes `parts` to `path` through a temporary file in the same folder and a rename, so a
/// failure never leaves a half-written output.
pub fn write_atomic(path: &Path, parts: &[&[u8]]) -> Result<()> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let mut tmp = tempfile::Builder::new()
        .prefix(".layoutkit-")
        .suffix(".tmp")
        .tempfile_in(dir)
        .with_context(|| format!("cannot create a temporary file in {}", dir.display()))?;
    for part in parts {
        tmp.write_all(part)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    tmp.as_file()
        .sync_all()
        .with_context(|| format!("cannot write {}", path.display()))?;
    tmp.persist(path)
        .map_err(|e| e.error)
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}
