//! Destination buffers aligned to a cache line, so the fast engine can write whole lines with
//! streaming stores.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ops::{Deref, DerefMut};

/// A zero-initialised byte buffer whose start is 64-byte aligned.
///
/// ```
/// let b = layoutkit_cpu::AlignedBuf::zeroed(100);
/// assert_eq!(b.len(), 100);
/// assert_eq!(b.as_ptr() as usize % 64, 0);
/// ```
pub struct AlignedBuf {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the buffer owns its allocation exclusively, like a Vec<u8>.
unsafe impl Send for AlignedBuf {}
// SAFETY: shared access only reads.
unsafe impl Sync for AlignedBuf {}

const ALIGN: usize = 64;

impl AlignedBuf {
    /// `len` zero bytes. Panics (like `Vec`) if the allocation fails or `len` overflows.
    pub fn zeroed(len: usize) -> AlignedBuf {
        let layout = Layout::from_size_align(len, ALIGN).expect("buffer size fits isize");
        AlignedBuf::try_zeroed(len).unwrap_or_else(|| std::alloc::handle_alloc_error(layout))
    }

    /// `len` zero bytes, or `None` when they cannot be allocated (or `len` exceeds
    /// `isize::MAX`), for callers that report a size a user asked for as an error.
    ///
    /// ```
    /// assert!(layoutkit_cpu::AlignedBuf::try_zeroed(usize::MAX - 8).is_none());
    /// assert_eq!(layoutkit_cpu::AlignedBuf::try_zeroed(3).unwrap().len(), 3);
    /// ```
    pub fn try_zeroed(len: usize) -> Option<AlignedBuf> {
        if len == 0 {
            return Some(AlignedBuf {
                ptr: std::ptr::null_mut(),
                len: 0,
            });
        }
        let layout = Layout::from_size_align(len, ALIGN).ok()?;
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        if ptr.is_null() {
            return None;
        }
        Some(AlignedBuf { ptr, len })
    }

    /// The bytes as a `Vec` (a copy).
    pub fn to_vec(&self) -> Vec<u8> {
        self.deref().to_vec()
    }
}

impl Deref for AlignedBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: `ptr` points to `len` initialised bytes owned by this buffer.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        if self.len == 0 {
            return &mut [];
        }
        // SAFETY: as in `deref`, and `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Clone for AlignedBuf {
    /// A copy in a new allocation, aligned as the original.
    fn clone(&self) -> AlignedBuf {
        let mut c = AlignedBuf::zeroed(self.len);
        c.copy_from_slice(self);
        c
    }
}

impl std::fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AlignedBuf({} bytes)", self.len)
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        if self.len > 0 {
            // SAFETY: allocated in `zeroed` with this size and alignment.
            unsafe { dealloc(self.ptr, Layout::from_size_align_unchecked(self.len, ALIGN)) };
        }
    }
}
