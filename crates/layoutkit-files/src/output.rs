//! The one routine through which every file is written (the rules are in the crate doc).

use std::fs::{File, OpenOptions, Permissions};
use std::io::Write;
use std::ops::Range;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use layoutkit_cpu::AlignedBuf;

use crate::{is_stdio, output_name, Error, Result};

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
/// * `create` decides where the bytes go from what the path is (see the crate doc); for a
///   regular file or a new path it creates and sizes the temporary file before returning, so
///   a full disk fails here, before any work;
/// * `bytes_mut` is exactly `len_bytes` long, zero-filled, and its start is page-aligned (a
///   map of the temporary file) or 64-byte aligned (a heap buffer): an offset that is a
///   multiple of 64, such as the end of a `.npy` header, stays 64-byte aligned;
/// * [`Output::writer`] lets several threads fill disjoint ranges at once (each range may be
///   written once; an overlap or a range past the end is an error, not a race);
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
    /// directory, a block device or a socket, standard output is a terminal) is
    /// [`Error::Unwritable`]; no space for `len_bytes` is [`Error::WriteFailed`].
    pub fn create(path: &Path, len_bytes: usize) -> Result<Output> {
        let name = output_name(path);
        let unwritable = |e: std::io::Error| Error::Unwritable(format!("cannot write {name}: {e}"));
        if is_stdio(path) {
            if std::io::IsTerminal::is_terminal(&std::io::stdout()) {
                return Err(Error::Unwritable(
                    "standard output is a terminal; redirect it to a file or a pipe".into(),
                ));
            }
            return Ok(Output {
                sink: Sink::Stream {
                    buf: stream_buffer(&name, len_bytes)?,
                    to: Stream::Stdout,
                },
                name,
            });
        }
        let target = resolve_links(path).map_err(unwritable)?;
        let existing = match std::fs::metadata(&target) {
            Ok(m) => Some(m),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(unwritable(e)),
        };
        if let Some(m) = &existing {
            let t = m.file_type();
            if t.is_fifo() || t.is_char_device() {
                // No O_TRUNC and no O_CREAT: the node is written as it is. Opening a FIFO
                // waits for its reader, as any writer's open does.
                let file = OpenOptions::new()
                    .write(true)
                    .open(&target)
                    .map_err(unwritable)?;
                return Ok(Output {
                    sink: Sink::Stream {
                        buf: stream_buffer(&name, len_bytes)?,
                        to: Stream::File(file),
                    },
                    name,
                });
            }
            if t.is_dir() {
                return Err(Error::Unwritable(format!(
                    "cannot write {name}: it is a directory"
                )));
            }
            if !t.is_file() {
                return Err(Error::Unwritable(format!(
                    "cannot write {name}: it is {}; layoutkit writes regular files, FIFOs, \
                     character devices and standard output",
                    kind_of(&t)
                )));
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
            .map_err(|e| {
                Error::Unwritable(format!(
                    "cannot write {name}: cannot create a temporary file in {}: {e}",
                    dir.display()
                ))
            })?;
        if let Some(m) = &existing {
            keep_mode_and_owner(tmp.as_file(), m).map_err(unwritable)?;
        }
        reserve(tmp.as_file(), len_bytes as u64).map_err(|e| {
            Error::WriteFailed(format!(
                "cannot write {name}: no room for {len_bytes} bytes in {}: {e}",
                dir.display()
            ))
        })?;
        let map = if len_bytes == 0 {
            None
        } else {
            // SAFETY: the temporary file was just created by us under a random name
            // (O_EXCL) and sized to `len_bytes` with its blocks allocated, so every page of
            // the map is backed; no other process knows the name. The map is dropped before
            // the file is renamed or removed.
            Some(
                unsafe { memmap2::MmapMut::map_mut(tmp.as_file()) }.map_err(|e| {
                    Error::WriteFailed(format!(
                        "cannot write {name}: cannot map its temporary file: {e}"
                    ))
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

    /// A handle through which several threads fill disjoint byte ranges of the output at once
    /// (see [`OutputWriter::write_at`]).
    pub fn writer(&mut self) -> OutputWriter<'_> {
        let bytes = self.bytes_mut();
        OutputWriter {
            ptr: bytes.as_mut_ptr(),
            len: bytes.len(),
            written: Mutex::new(Vec::new()),
            _bytes: std::marker::PhantomData,
        }
    }

    /// The output's name in messages (the path as given, or `standard output`).
    pub fn name(&self) -> &str {
        &self.name
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
    /// order and flushes. Every failure is an [`Error::WriteFailed`].
    pub fn commit(self) -> Result<()> {
        self.commit_with(true)
    }

    /// [`Output::commit`], with the syncs to disk left out when `durable` is false (the
    /// rename still makes the new content appear whole; only a system crash soon after could
    /// lose it). For benchmarks and scratch outputs.
    pub fn commit_with(self, durable: bool) -> Result<()> {
        let name = self.name;
        let failed = |what: &str, e: &dyn std::fmt::Display| {
            Error::WriteFailed(format!("cannot write {name}{what}: {e}"))
        };
        match self.sink {
            Sink::Stream { buf, to } => {
                match to {
                    Stream::Stdout => {
                        let mut out = std::io::stdout().lock();
                        out.write_all(&buf)
                            .and_then(|()| out.flush())
                            .map_err(|e| failed("", &e))?;
                    }
                    Stream::File(mut f) => {
                        f.write_all(&buf)
                            .and_then(|()| f.flush())
                            .map_err(|e| failed("", &e))?;
                    }
                }
                Ok(())
            }
            Sink::Replace(mut r) => {
                if let Some(map) = r.map.take() {
                    if durable {
                        map.flush().map_err(|e| failed("", &e))?;
                    }
                }
                if durable {
                    r.tmp.as_file().sync_all().map_err(|e| failed("", &e))?;
                }
                if std::env::var_os(ABORT_BEFORE_RENAME).is_some_and(|v| v == "1") {
                    std::process::abort();
                }
                // The path was a regular file (or absent) when it was opened; never rename
                // over anything else that appeared there since.
                if let Ok(m) = std::fs::symlink_metadata(&r.target) {
                    if !m.file_type().is_file() {
                        return Err(Error::Unwritable(format!(
                            "cannot write {name}: {} became {} while it was written",
                            r.target.display(),
                            kind_of(&m.file_type())
                        )));
                    }
                }
                r.tmp.persist(&r.target).map_err(|e| failed("", &e.error))?;
                if durable {
                    File::open(&r.dir)
                        .and_then(|d| d.sync_all())
                        .map_err(|e| failed(&format!(" (syncing {})", r.dir.display()), &e))?;
                }
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

/// The memory a streamed output is assembled in; too little is an [`Error::WriteFailed`].
fn stream_buffer(name: &str, len_bytes: usize) -> Result<AlignedBuf> {
    AlignedBuf::try_zeroed(len_bytes).ok_or_else(|| {
        Error::WriteFailed(format!(
            "cannot write {name}: the {len_bytes}-byte output does not fit in memory \
             (a stream is written from memory; write a regular file instead)"
        ))
    })
}

/// Fills an [`Output`] from several threads: each call writes one byte range, and no two
/// ranges may overlap (checked: the ranges written so far are remembered).
pub struct OutputWriter<'a> {
    ptr: *mut u8,
    len: usize,
    /// The ranges written so far, sorted by start.
    written: Mutex<Vec<Range<usize>>>,
    _bytes: std::marker::PhantomData<&'a mut [u8]>,
}

// SAFETY: the writer hands out no references to the bytes; `write_at` copies into a range that
// it first claims under the mutex, and claimed ranges never overlap, so no two threads ever
// touch the same byte. The borrow of the `Output` keeps the bytes alive and unaliased.
unsafe impl Send for OutputWriter<'_> {}
// SAFETY: as for `Send`.
unsafe impl Sync for OutputWriter<'_> {}

impl OutputWriter<'_> {
    /// Copies `bytes` to `offset..offset + bytes.len()` of the output.
    ///
    /// Errors ([`Error::WriteFailed`], naming the range): the range runs past the output's end,
    /// or overlaps a range already written.
    pub fn write_at(&self, offset: usize, bytes: &[u8]) -> Result<()> {
        let end = offset.checked_add(bytes.len()).filter(|&e| e <= self.len);
        let Some(end) = end else {
            return Err(Error::WriteFailed(format!(
                "bytes {offset}..+{} lie past the end of the {}-byte output",
                bytes.len(),
                self.len
            )));
        };
        if bytes.is_empty() {
            return Ok(());
        }
        {
            let mut written = self.written.lock().unwrap_or_else(|p| p.into_inner());
            let at = written.partition_point(|r| r.start < offset);
            let overlaps_before = at > 0 && written[at - 1].end > offset;
            let overlaps_after = at < written.len() && written[at].start < end;
            if overlaps_before || overlaps_after {
                return Err(Error::WriteFailed(format!(
                    "bytes {offset}..{end} of the output were already written"
                )));
            }
            written.insert(at, offset..end);
        }
        // SAFETY: `offset..end` lies inside the output's bytes (checked above) and was claimed
        // by this call alone (no claimed range overlaps it), so no other thread reads or writes
        // it; `bytes` cannot alias the output, which is exclusively borrowed by this writer.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.ptr.add(offset), bytes.len());
        }
        Ok(())
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writer_fills_disjoint_ranges_from_several_threads() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.bin");
        let mut out = Output::create(&path, 4096).unwrap();
        {
            let w = out.writer();
            std::thread::scope(|s| {
                for t in 0..8u8 {
                    let w = &w;
                    s.spawn(move || {
                        let chunk = vec![t + 1; 512];
                        w.write_at(t as usize * 512, &chunk).unwrap();
                    });
                }
            });
        }
        out.commit().unwrap();
        let bytes = std::fs::read(&path).unwrap();
        for (i, b) in bytes.iter().enumerate() {
            assert_eq!(*b as usize, i / 512 + 1, "byte {i}");
        }
    }

    #[test]
    fn writer_refuses_overlaps_and_ranges_past_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.bin");
        let mut out = Output::create(&path, 100).unwrap();
        let w = out.writer();
        w.write_at(10, &[1; 20]).unwrap();
        assert!(
            w.write_at(29, &[2; 2]).is_err(),
            "overlaps the end of 10..30"
        );
        assert!(
            w.write_at(0, &[2; 11]).is_err(),
            "overlaps the start of 10..30"
        );
        assert!(w.write_at(15, &[2; 1]).is_err(), "inside 10..30");
        assert!(w.write_at(95, &[2; 6]).is_err(), "past the end");
        assert!(
            w.write_at(usize::MAX, &[2; 2]).is_err(),
            "overflowing offset"
        );
        w.write_at(30, &[3; 70]).unwrap();
        w.write_at(0, &[4; 10]).unwrap();
        w.write_at(50, &[]).unwrap();
        drop(w);
        out.commit().unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(&bytes[..10], &[4; 10]);
        assert_eq!(&bytes[10..30], &[1; 20]);
        assert_eq!(&bytes[30..], &[3; 70]);
    }

    #[test]
    fn a_dropped_output_leaves_nothing_and_keeps_the_old_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.bin");
        std::fs::write(&path, b"old").unwrap();
        let mut out = Output::create(&path, 10).unwrap();
        out.bytes_mut().fill(7);
        drop(out);
        assert_eq!(std::fs::read(&path).unwrap(), b"old");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn commit_without_sync_still_replaces_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.bin");
        std::fs::write(&path, b"old").unwrap();
        let mut out = Output::create(&path, 5).unwrap();
        out.bytes_mut().copy_from_slice(b"fresh");
        out.commit_with(false).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"fresh");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
