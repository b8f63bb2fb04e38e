//! Compiled kernels kept on disk, so a new process loads the kernels an earlier one compiled
//! instead of running NVRTC again (a compile costs tens to hundreds of milliseconds, a load
//! well under one).
//!
//! Where: `$LAYOUTKIT_CACHE_DIR`, else `$XDG_CACHE_HOME/layoutkit`, else
//! `~/.cache/layoutkit`; entries under `kernels/`. `LAYOUTKIT_CACHE_DIR=off` turns the cache off.
//!
//! Contract:
//! * an entry is found only under its whole key (the kernel source, the compile options, the
//!   GPU architecture and the NVRTC version): the file name is a hash of the key, and the
//!   entry holds the key itself, compared byte for byte on load;
//! * an entry is written to a temporary file in the same folder and renamed into place, so a
//!   reader sees a whole entry or none, and concurrent writers of one key are harmless;
//! * an entry that is truncated, corrupt (checksum), from another key or of another format is
//!   ignored (and replaced by the caller's next store); the cache never turns a load into an
//!   error: failing to read or write it only means compiling.

use std::io::Write;
use std::path::{Path, PathBuf};

/// The first bytes of every entry (format version 1).
const MAGIC: &[u8] = b"layoutkit kernel cache 1\n";

/// A folder of compiled kernels (or none: caching off).
#[derive(Clone, Debug)]
pub struct KernelCache {
    dir: Option<PathBuf>,
}

impl KernelCache {
    /// The cache at `dir` (`None`: no caching).
    pub fn at(dir: Option<PathBuf>) -> KernelCache {
        KernelCache { dir }
    }

    /// The cache the environment names (see the module doc).
    pub fn from_env() -> KernelCache {
        let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
        let root = match var("LAYOUTKIT_CACHE_DIR") {
            Some(v) if v == "off" => None,
            Some(v) => Some(PathBuf::from(v)),
            None => var("XDG_CACHE_HOME")
                .map(|x| PathBuf::from(x).join("layoutkit"))
                .or_else(|| var("HOME").map(|h| PathBuf::from(h).join(".cache/layoutkit"))),
        };
        KernelCache::at(root.map(|r| r.join("kernels")))
    }

    /// The folder entries go to, if caching is on.
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    fn path(&self, key: &str) -> Option<PathBuf> {
        let dir = self.dir.as_ref()?;
        Some(dir.join(format!("{:016x}.bin", fnv1a(key.as_bytes()))))
    }

    /// The image stored under `key`, if a whole, uncorrupted entry for exactly that key exists.
    pub fn load(&self, key: &str) -> Option<Vec<u8>> {
        let bytes = std::fs::read(self.path(key)?).ok()?;
        decode(&bytes, key)
    }

    /// Stores `image` under `key` (atomically; errors are ignored: the cache is an optimisation).
    pub fn store(&self, key: &str, image: &[u8]) {
        let (Some(dir), Some(path)) = (self.dir.as_ref(), self.path(key)) else {
            return;
        };
        let write = || -> std::io::Result<()> {
            std::fs::create_dir_all(dir)?;
            let mut tmp = tempfile::Builder::new()
                .prefix(".entry-")
                .tempfile_in(dir)?;
            tmp.write_all(&encode(key, image))?;
            tmp.as_file().sync_data()?;
            tmp.persist(&path).map_err(|e| e.error)?;
            Ok(())
        };
        let _ = write();
    }
}

/// 64-bit FNV-1a: names entries and checks their payload (not a cryptographic hash: the key
/// inside the entry is what makes a match).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

fn encode(key: &str, image: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(MAGIC.len() + key.len() + image.len() + 24);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(key.len() as u64).to_le_bytes());
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(&(image.len() as u64).to_le_bytes());
    out.extend_from_slice(image);
    out.extend_from_slice(&fnv1a(image).to_le_bytes());
    out
}

fn decode(bytes: &[u8], key: &str) -> Option<Vec<u8>> {
    let rest = bytes.strip_prefix(MAGIC)?;
    let (len, rest) = take_u64(rest)?;
    let (stored_key, rest) = rest.split_at_checked(usize::try_from(len).ok()?)?;
    if stored_key != key.as_bytes() {
        return None;
    }
    let (len, rest) = take_u64(rest)?;
    let (image, rest) = rest.split_at_checked(usize::try_from(len).ok()?)?;
    let (sum, rest) = take_u64(rest)?;
    (rest.is_empty() && sum == fnv1a(image)).then(|| image.to_vec())
}

fn take_u64(bytes: &[u8]) -> Option<(u64, &[u8])> {
    let (head, rest) = bytes.split_at_checked(8)?;
    Some((u64::from_le_bytes(head.try_into().ok()?), rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache() -> (tempfile::TempDir, KernelCache) {
        let dir = tempfile::tempdir().unwrap();
        let c = KernelCache::at(Some(dir.path().join("kernels")));
        (dir, c)
    }

    #[test]
    fn a_stored_image_loads_under_its_key_only() {
        let (_d, c) = cache();
        assert_eq!(c.load("k1"), None);
        c.store("k1", b"cubin bytes");
        assert_eq!(c.load("k1").as_deref(), Some(&b"cubin bytes"[..]));
        assert_eq!(c.load("k2"), None);
        c.store("k1", b"newer");
        assert_eq!(c.load("k1").as_deref(), Some(&b"newer"[..]));
    }

    #[test]
    fn damaged_or_foreign_entries_are_ignored() {
        let (_d, c) = cache();
        c.store("key", b"0123456789");
        let path = c.path("key").unwrap();
        let whole = std::fs::read(&path).unwrap();
        // Every truncation and every single flipped byte is refused.
        for cut in 0..whole.len() {
            std::fs::write(&path, &whole[..cut]).unwrap();
            assert_eq!(c.load("key"), None, "truncated at {cut}");
        }
        for i in 0..whole.len() {
            let mut bad = whole.clone();
            bad[i] ^= 0x40;
            std::fs::write(&path, &bad).unwrap();
            assert_eq!(c.load("key"), None, "byte {i} flipped");
        }
        // Another key's entry under this key's name (a hash collision) is not this key's.
        std::fs::write(&path, encode("other key", b"0123456789")).unwrap();
        assert_eq!(c.load("key"), None);
        // A store replaces the damaged entry.
        c.store("key", b"fresh");
        assert_eq!(c.load("key").as_deref(), Some(&b"fresh"[..]));
    }

    #[test]
    fn caching_off_stores_nothing() {
        let c = KernelCache::at(None);
        c.store("k", b"x");
        assert_eq!(c.load("k"), None);
    }

    #[test]
    fn an_unwritable_folder_is_not_an_error() {
        let c = KernelCache::at(Some(PathBuf::from("/proc/no-such-folder/kernels")));
        c.store("k", b"x");
        assert_eq!(c.load("k"), None);
    }
}
