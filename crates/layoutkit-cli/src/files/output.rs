//! Outputs: the one routine through which every command writes its files (the rules are in
//! the module doc of [`crate::files`] and in the README's "Files" section).

use std::fs::{File, OpenOptions, Permissions};
use std::io::Write;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use layoutkit_cpu::AlignedBuf;

use super::{is_stdio, output_name, WriteFailed};

/// Test hook: with `LAYOUTKIT_TEST_ABORT_BEFORE_RENAME=1` the process aborts after the
/// temporary file is written and synced, just before the rename, as a crash at that point
/// would; the CLI tests use it to check that the old file survives. Documented in the README.
const ABORT_BEFORE_RENAME: &str = "LAYOUTKIT_TEST_ABORT_BEFORE_RENAME";

/// Symbolic links followed before giving up, as the kernel's `ELOOP` limit.
const MAX_LINKS: usize = 40;

/// An output being written: opened for a known number of bytes, filled through
/// [`Output::bytes_mut`], then [`Output::commit`]ted.
///
/// Contract:
/// * `create` decides where the bytes go from what the path is (see [`crate::files`]); for a
///   regular file or a new path it creates and sizes the temporary file before returning, so
///   a full disk fails here, before any work;
/// * `bytes_mut` is exactly `len_bytes` long, zero-filled, and its start is page-aligned (a
///   map of the temporary file) or 64-byte aligned (a heap buffer): an offset that is a
///   multiple of 64, such as the end of a `.npy` header, stays 64-byte aligned;
/// * `commit` makes the bytes the content of the path (the rename, or the writes to a stream)
///   and reports every failure; dropping an `Output` without committing removes its temporary
///   file and writes nothing to a stream.
///
/// ```ignore
/// let mut out = Output::create(Path::new("y.npy"), header.len() + data_bytes)?;
/// let (h, data) = out.bytes_mut().split_at_mut(header.len());
/// h.copy_from_slice(&header);
/// fill(data);
/// out.commit()?;
/// ```
pub struct Output {
    /// How messages name the output (the path as given, or `standard output`).
    name: String,
    sink: Sink,
}

enum Sink {
    /// A regular file (or a new path): a temporary file beside it, renamed over it.
    Replace(Replace),
    /// Standard output, a FIFO or a character device: the bytes in memory, written in order
    /// at commit.
    Stream { buf: AlignedBuf, to: Stream },
}

struct Replace {
    /// The temporary file mapped writable (`None` for an empty output). Declared before `tmp`
    /// so it is unmapped before the file is removed.
    map: Option<memmap2::MmapMut>,
    tmp: tempfile::NamedTempFile,
    /// The path renamed over: the output path with every symbolic link resolved.
    target: PathBuf,
    /// The folder holding `target` and the temporary file (synced after the rename).
    dir: PathBuf,
}

enum Stream {
    Stdout,
    File(File),
}

impl Output {
    /// Opens `path` (`-` is standard output) for an output of exactly `len_bytes` bytes.
    ///
    /// Errors: a path that cannot be written (its folder is missing or read-only, it is a
    /// directory, a block device or a socket, standard output is a terminal) is a plain error
    /// (exit status 2); no space for `len_bytes` is a [`WriteFailed`] (exit status 1).
    pub fn create(path: &Path, len_bytes: usize) -> Result<Output> {
        let name = output_name(path);
        if is_stdio(path) {
            if std::io::IsTerminal::is_terminal(&std::io::stdout()) {
                bail!("standard output is a terminal; redirect it to a file or a pipe");
            }
            return Ok(Output {
                sink: Sink::Stream {
                    buf: stream_buffer(&name, len_bytes)?,
                    to: Stream::Stdout,
                },
                name,
            });
        }
        let target = resolve_links(path).with_context(|| format!("cannot write {name}"))?;
        let existing = match std::fs::metadata(&target) {
            Ok(m) => Some(m),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(e).with_context(|| format!("cannot write {name}")),
        };
        if let Some(m) = &existing {
            let t = m.file_type();
            if t.is_fifo() || t.is_char_device() {
                // No O_TRUNC and no O_CREAT: the node is written as it is. Opening a FIFO
                // waits for its reader, as any writer's open does.
                let file = OpenOptions::new()
                    .write(true)
                    .open(&target)
                    .with_context(|| format!("cannot write {name}"))?;
                return Ok(Output {
                    sink: Sink::Stream {
                        buf: stream_buffer(&name, len_bytes)?,
                        to: Stream::File(file),
                    },
                    name,
                });
            }
            if t.is_dir() {
                bail!("cannot write {name}: it is a directory");
            }
            if !t.is_file() {
                bail!(
                    "cannot write {name}: it is {}; layoutkit writes regular files, FIFOs, \
                     character devices and standard output",
                    kind_of(&t)
                );
            }
        }
        let dir = match target.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        // Mode 0666 at creation, so the umask applies as it does to open(O_CREAT).
        let tmp = tempfile::Builder::new()
            .prefix(".layoutkit-")
            .suffix(".tmp")
            .permissions(Permissions::from_mode(0o666))
            .tempfile_in(&dir)
            .with_context(|| {
                format!(
                    "cannot write {name}: cannot create a temporary file in {}",
                    dir.display()
                )
            })?;
        if let Some(m) = &existing {
            keep_mode_and_owner(tmp.as_file(), m)
                .with_context(|| format!("cannot write {name}"))?;
        }
        reserve(tmp.as_file(), len_bytes as u64).map_err(|e| {
            anyhow::Error::new(e).context(WriteFailed(format!(
                "cannot write {name}: no room for {len_bytes} bytes in {}",
                dir.display()
            )))
        })?;
        let map = if len_bytes == 0 {
            None
        } else {
            // SAFETY: the temporary file was just created by us under a random name
            // (O_EXCL) and sized to `len_bytes` with its blocks allocated, so every page of
            // the map is backed; no other process knows the name. The map is dropped before
            // the file is renamed or removed.
            Some(
                unsafe { memmap2::MmapMut::map_mut(tmp.as_file()) }.with_context(|| {
                    format!("cannot write {name}: cannot map its temporary file")
                })?,
            )
        };
        Ok(Output {
            name,
            sink: Sink::Replace(Replace {
                map,
                tmp,
                target,
                dir,
            }),
        })
    }

    /// The output's bytes, zero-filled until written; see the alignment in the type's contract.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        match &mut self.sink {
            Sink::Replace(r) => r.map.as_deref_mut().unwrap_or(&mut []),
            Sink::Stream { buf, .. } => buf,
        }
    }

    /// Whether the output is standard output (so a command prints its summary on stderr).
    pub fn is_stdout(&self) -> bool {
        matches!(
            self.sink,
            Sink::Stream {
                to: Stream::Stdout,
                ..
            }
        )
    }

    /// Makes the bytes the output's content: for a regular file, syncs the temporary file,
    /// renames it over the target and syncs the folder; for a stream, writes the bytes in
    /// order and flushes. Every failure is a [`WriteFailed`] (exit status 1).
    pub fn commit(self) -> Result<()> {
        let name = self.name;
        let failed = |what: &str| WriteFailed(format!("cannot write {name}{what}"));
        match self.sink {
            Sink::Stream { buf, to } => {
                match to {
                    Stream::Stdout => {
                        let mut out = std::io::stdout().lock();
                        out.write_all(&buf)
                            .and_then(|()| out.flush())
                            .with_context(|| failed(""))?;
                    }
                    Stream::File(mut f) => {
                        f.write_all(&buf)
                            .and_then(|()| f.flush())
                            .with_context(|| failed(""))?;
                    }
                }
                Ok(())
            }
            Sink::Replace(mut r) => {
                if let Some(map) = r.map.take() {
                    map.flush().with_context(|| failed(""))?;
                }
                r.tmp.as_file().sync_all().with_context(|| failed(""))?;
                if std::env::var_os(ABORT_BEFORE_RENAME).is_some_and(|v| v == "1") {
                    std::process::abort();
                }
                // The path was a regular file (or absent) when it was opened; never rename
                // over anything else that appeared there since.
                if let Ok(m) = std::fs::symlink_metadata(&r.target) {
                    if !m.file_type().is_file() {
                        bail!(
                            "cannot write {name}: {} became {} while it was written",
                            r.target.display(),
                            kind_of(&m.file_type())
                        );
                    }
                }
                r.tmp
                    .persist(&r.target)
                    .map_err(|e| e.error)
                    .with_context(|| failed(""))?;
                File::open(&r.dir)
                    .and_then(|d| d.sync_all())
                    .with_context(|| failed(&format!(" (syncing {})", r.dir.display())))?;
                Ok(())
            }
        }
    }
}

/// Writes `parts`, one after another, as the content of `path` through an [`Output`].
pub fn write_output(path: &Path, parts: &[&[u8]]) -> Result<()> {
    let len = parts.iter().map(|p| p.len()).sum();
    let mut out = Output::create(path, len)?;
    let mut at = 0;
    let bytes = out.bytes_mut();
    for p in parts {
        bytes[at..at + p.len()].copy_from_slice(p);
        at += p.len();
    }
    out.commit()
}

/// The former name of [`write_output`], for callers written before it.
#[allow(dead_code)]
pub fn write_atomic(path: &Path, parts: &[&[u8]]) -> Result<()> {
    write_output(path, parts)
}

/// The memory a streamed output is assembled in; too little is a [`WriteFailed`].
fn stream_buffer(name: &str, len_bytes: usize) -> Result<AlignedBuf> {
    AlignedBuf::try_zeroed(len_bytes).ok_or_else(|| {
        WriteFailed(format!(
            "cannot write {name}: the {len_bytes}-byte output does not fit in memory \
             (a stream is written from memory; write a regular file instead)"
        ))
        .into()
    })
}

/// `path` with every symbolic link at its end followed (a dangling link gives the path it
/// points to, which is then created). Links in the folders above are left to the kernel: the
/// temporary file and the rename go through the same folder either way.
fn resolve_links(path: &Path) -> std::io::Result<PathBuf> {
    let mut p = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => {
                let to = std::fs::read_link(&p)?;
                p = match p.parent() {
                    Some(dir) if to.is_relative() => dir.join(to),
                    _ => to,
                };
            }
            _ => return Ok(p),
        }
    }
    Err(std::io::Error::other(format!(
        "more than {MAX_LINKS} symbolic links"
    )))
}

/// The replaced file's permission bits, and its owner where we may set it (root, or the
/// owner's own group change); failing to keep the owner is not an error.
fn keep_mode_and_owner(tmp: &File, old: &std::fs::Metadata) -> std::io::Result<()> {
    tmp.set_permissions(Permissions::from_mode(old.mode() & 0o777))?;
    let now = tmp.metadata()?;
    if (now.uid(), now.gid()) != (old.uid(), old.gid()) {
        let _ = std::os::unix::fs::fchown(tmp, Some(old.uid()), Some(old.gid()));
    }
    Ok(())
}

/// Allocates `len` bytes of disk for `file` (so writes through its map cannot fail for want
/// of space, which would be a SIGBUS), falling back to writing zeros on file systems without
/// `fallocate`.
fn reserve(file: &File, len: u64) -> std::io::Result<()> {
    if len == 0 {
        return Ok(());
    }
    match rustix::fs::fallocate(file, rustix::fs::FallocateFlags::empty(), 0, len) {
        Ok(()) => return Ok(()),
        Err(e) if e == rustix::io::Errno::OPNOTSUPP || e == rustix::io::Errno::NOSYS => {}
        Err(e) => return Err(e.into()),
    }
    let zeros = vec![0u8; 1 << 20];
    let mut w = file;
    let mut left = len;
    while left > 0 {
        let n = left.min(zeros.len() as u64) as usize;
        w.write_all(&zeros[..n])?;
        left -= n as u64;
    }
    Ok(())
}

fn kind_of(t: &std::fs::FileType) -> &'static str {
    if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_symlink() {
        "a symbolic link"
    } else {
        "not a regular file"
    }
}
