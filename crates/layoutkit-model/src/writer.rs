//! Output files written atomically: a temporary file in the destination's folder, sized up
//! front, filled tensor by tensor at known offsets (from several threads), synced and renamed
//! into place. Dropping an unfinished output deletes the temporary file, so a failure leaves
//! no partial file.

use std::path::{Path, PathBuf};

use crate::{Error, Result};

/// An output being written.
pub(crate) struct Output {
    tmp: tempfile::NamedTempFile,
    path: PathBuf,
}

impl Output {
    /// Creates the temporary file for `path`, `len` bytes long.
    pub fn create(path: &Path, len: usize) -> Result<Output> {
        let dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        let werr = |source| Error::Write {
            path: path.to_path_buf(),
            source,
        };
        let tmp = tempfile::Builder::new()
            .prefix(".layoutkit-")
            .suffix(".tmp")
            .tempfile_in(dir)
            .map_err(werr)?;
        tmp.as_file().set_len(len as u64).map_err(werr)?;
        Ok(Output {
            tmp,
            path: path.to_path_buf(),
        })
    }

    /// Writes `bytes` at `offset` (safe from several threads at once: positioned writes).
    pub fn write_at(&self, bytes: &[u8], offset: usize) -> Result<()> {
        let werr = |source| Error::Write {
            path: self.path.clone(),
            source,
        };
        #[cfg(unix)]
        {
            use std::os::unix::fs::FileExt;
            self.tmp
                .as_file()
                .write_all_at(bytes, offset as u64)
                .map_err(werr)
        }
        #[cfg(windows)]
        {
            use std::os::windows::fs::FileExt;
            let mut done = 0;
            while done < bytes.len() {
                let n = self
                    .tmp
                    .as_file()
                    .seek_write(&bytes[done..], (offset + done) as u64)
                    .map_err(werr)?;
                if n == 0 {
                    return Err(werr(std::io::ErrorKind::WriteZero.into()));
                }
                done += n;
            }
            Ok(())
        }
    }

    /// Syncs (when `sync`) and renames the file into place.
    pub fn finish(self, sync: bool) -> Result<()> {
        let werr = |source| Error::Write {
            path: self.path.clone(),
            source,
        };
        // Temporary files are created private (0600); an output is an ordinary file.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let perms = std::fs::Permissions::from_mode(0o644);
            self.tmp.as_file().set_permissions(perms).map_err(werr)?;
        }
        if sync {
            self.tmp.as_file().sync_all().map_err(werr)?;
        }
        self.tmp.persist(&self.path).map_err(|e| werr(e.error))?;
        Ok(())
    }
}

/// Writes a small file (an index) atomically.
pub(crate) fn write_small(path: &Path, bytes: &[u8], sync: bool) -> Result<()> {
    let out = Output::create(path, bytes.len())?;
    out.write_at(bytes, 0)?;
    out.finish(sync)
}
