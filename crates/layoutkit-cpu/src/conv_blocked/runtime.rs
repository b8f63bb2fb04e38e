//! What the blocked convolution needs from the machine and the process: the kernel build
//! (chosen at run time), thread pools and scratch buffers kept between calls, and f32 views of
//! byte buffers.

use std::sync::{Arc, Mutex};

use super::microkernel::{self, TileFn};
#[cfg(target_arch = "x86_64")]
use super::microkernel_x86;
use crate::spin_pool::SpinPool;
use crate::Error;

/// Which build of the tile runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConvKernels {
    /// The best the CPU has, unless the environment variable `LAYOUTKIT_CPU_KERNELS` says
    /// `avx2` (the AVX2 build on an AVX-512 CPU, as the conversion engine reads it) or
    /// `portable`.
    Auto,
    Avx512,
    Avx2,
    Portable,
}

impl ConvKernels {
    /// The concrete build `self` means on this CPU. Errors when the CPU lacks its
    /// instructions.
    ///
    /// ```
    /// use layoutkit_cpu::ConvKernels;
    /// assert_eq!(ConvKernels::Portable.resolve().unwrap(), ConvKernels::Portable);
    /// assert_ne!(ConvKernels::Auto.resolve().unwrap(), ConvKernels::Auto);
    /// ```
    pub fn resolve(self) -> Result<ConvKernels, Error> {
        let has = |k: ConvKernels| -> bool {
            #[cfg(target_arch = "x86_64")]
            {
                use std::arch::is_x86_feature_detected as f;
                match k {
                    ConvKernels::Avx512 => f!("avx512f"),
                    ConvKernels::Avx2 => f!("avx2") && f!("fma"),
                    _ => true,
                }
            }
            #[cfg(not(target_arch = "x86_64"))]
            {
                matches!(k, ConvKernels::Portable)
            }
        };
        match self {
            ConvKernels::Auto => {
                let env = std::env::var("LAYOUTKIT_CPU_KERNELS").unwrap_or_default();
                let order: &[ConvKernels] = match env.as_str() {
                    "portable" => &[ConvKernels::Portable],
                    "avx2" => &[ConvKernels::Avx2, ConvKernels::Portable],
                    _ => &[
                        ConvKernels::Avx512,
                        ConvKernels::Avx2,
                        ConvKernels::Portable,
                    ],
                };
                Ok(order
                    .iter()
                    .copied()
                    .find(|&k| has(k))
                    .unwrap_or(ConvKernels::Portable))
            }
            k if has(k) => Ok(k),
            k => Err(Error::Unsupported(format!(
                "this CPU cannot run the {k:?} convolution kernels"
            ))),
        }
    }

    /// f32 lanes of the build's vectors (16 for AVX-512, 8 for AVX2 and the portable code);
    /// `self` resolved ([`ConvKernels::resolve`]).
    pub fn lanes(self) -> usize {
        self.tables().0
    }

    /// Vector lanes and the tile tables of a resolved build: `[stride][P - 1][B - 1]`, the
    /// pixel stride 0 (read from the shape), one vector or two (see
    /// [`microkernel::TileTables`]), then the two-row tiles' `[stride][PX - 1][B - 1]` (none
    /// for the portable build).
    pub(super) fn tables(self) -> (usize, Tables, Tables) {
        fn slices<const N: usize>(t: &'static microkernel::TileTables<N>) -> Tables {
            [&t[0], &t[1], &t[2]]
        }
        match self {
            #[cfg(target_arch = "x86_64")]
            ConvKernels::Avx512 => (
                16,
                slices(&microkernel_x86::AVX512),
                slices(&microkernel_x86::AVX512_ROWS),
            ),
            #[cfg(target_arch = "x86_64")]
            ConvKernels::Avx2 => (
                8,
                slices(&microkernel_x86::AVX2),
                slices(&microkernel_x86::AVX2_ROWS),
            ),
            _ => (8, slices(&microkernel::PORTABLE), [&[]; 3]),
        }
    }
}

/// Tile tables by pixel stride (see [`ConvKernels::tables`]).
pub(super) type Tables = [&'static [[TileFn; 2]]; 3];

/// The filter `w` (axes O, I, H, W; any layout and element type) as f32 values in the layout
/// `format` (e.g. `OIHW`), with that layout shaped to `w`'s dims.
pub(crate) fn filter_f32(
    w: &crate::TensorRef<'_>,
    format: &str,
) -> Result<(layoutkit_core::ShapedLayout, Vec<f32>), crate::Error> {
    let to = layoutkit_core::parse_format(format)?.shaped(&w.layout.dims())?;
    let cast = layoutkit_core::CastSpec::new(w.dtype, layoutkit_core::DType::F32, None)?;
    let values = f32s(&crate::convert(w.layout, w.data, &to, &cast)?).into_owned();
    Ok((to, values))
}

/// `bytes` as f32 values: in place when aligned, else copied.
pub(crate) fn f32s(bytes: &[u8]) -> std::borrow::Cow<'_, [f32]> {
    // SAFETY: every bit pattern is a valid f32; `align_to` only reinterprets the aligned middle.
    let (head, mid, tail) = unsafe { bytes.align_to::<f32>() };
    if head.is_empty() && tail.is_empty() {
        return std::borrow::Cow::Borrowed(mid);
    }
    std::borrow::Cow::Owned(
        bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect(),
    )
}

/// The pool of `threads` threads (the caller and `threads - 1` spinning workers, built once
/// per count: building one per call would cost more than a small layer).
pub(crate) fn pool(threads: usize) -> Result<Arc<SpinPool>, Error> {
    SpinPool::get(threads).map_err(|e| Error::Threads {
        threads,
        reason: e.to_string(),
    })
}

/// Scratch buffers reused across calls (a padded input copy, an output in the tiles' layout),
/// so a call does not pay for fresh pages.
static SCRATCH: Mutex<Vec<Vec<f32>>> = Mutex::new(Vec::new());

/// A buffer from [`SCRATCH`] (any length, stale contents).
pub(super) fn take_scratch() -> Vec<f32> {
    SCRATCH
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .pop()
        .unwrap_or_default()
}

/// The largest buffer [`SCRATCH`] keeps (bytes): a process keeps at most four of these after
/// its convolutions return.
const SCRATCH_KEEP_BYTES: usize = 256 << 20;

/// Returns a buffer to [`SCRATCH`] (at most four kept, none over [`SCRATCH_KEEP_BYTES`]).
pub(super) fn give_scratch(v: Vec<f32>) {
    let mut s = SCRATCH.lock().unwrap_or_else(|e| e.into_inner());
    if s.len() < 4 && v.capacity() > 0 && v.capacity() * 4 <= SCRATCH_KEEP_BYTES {
        s.push(v);
    }
}
