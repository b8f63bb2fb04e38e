//! Tile transposition over row tables: `dst[a][b] = src[b][a]` where `src[b]` is the start of
//! source row `b` (its elements, indexed by `a`, are contiguous) and `dst[a]` the start of
//! destination row `a` (indexed by `b`, contiguous). Rows are given as pointers so one kernel
//! serves plain matrices, compound row indices (a row index that is several loops, such as
//! `(i, h, w)` in `OIHW -> OIHW16i16o`) and fill rows (rows that read a line of the fill
//! value, which pads a record such as `kHWC8`'s eight channels).
//!
//! Kernels, dispatched on the element size `N` in bytes and chosen at run time:
//! * 4 bytes: AVX2 8 x 8 transposes; with 64-byte aligned destination rows, 8 x 16 blocks
//!   whose rows are whole cache lines, written with non-temporal stores where streaming is
//!   allowed, else plain ones;
//! * 2 bytes: AVX2 16 x 16 transposes, 16 x 32 blocks of whole lines when aligned (streamed
//!   or not, as for 4 bytes), and 16 x 8 blocks into rows of eight back to back (kHWC8); SSE2
//!   8 x 8 transposes without AVX2;
//! * 1 byte: SSE2 16 x 16 transposes, streamed as 16 x 64 blocks when aligned; the 8 to 15
//!   columns or rows past the last 16 in 16 x 8 or 8 x 16 blocks;
//! * larger units (8 to 64 bytes, e.g. the four lanes of an image pixel): unit moves along
//!   destination rows, streamed in 16-byte pieces when aligned;
//! * anything else, and every edge strip: a portable loop.

mod rows;
pub(crate) use rows::*;

/// Copies `src` to `dst` (same length), streaming the 64-byte aligned lines of the
/// destination past the cache (32-byte stores with AVX2: measured in one process alternating
/// both, f16 OIHW -> OIHW16i16o, whose tiles all go through here, 6.2-7.1 -> 5.7-6.2 ms
/// against 16-byte stores; 64-byte AVX-512 stores were no faster).
pub(crate) fn stream_copy(dst: &mut [u8], src: &[u8]) {
    assert_eq!(dst.len(), src.len());
    let head = (dst.as_ptr() as usize).wrapping_neg() % 64;
    if head >= dst.len() {
        dst.copy_from_slice(src);
        return;
    }
    let (dh, rest) = dst.split_at_mut(head);
    dh.copy_from_slice(&src[..head]);
    let lines = rest.len() / 64 * 64;
    #[cfg(target_arch = "x86_64")]
    {
        let (s, d) = (src[head..].as_ptr(), rest.as_mut_ptr());
        // SAFETY: `lines` bytes are readable from `s` and writable from `d`, which is 64-byte
        // aligned; the features are checked.
        unsafe {
            if avx2() {
                x86::stream_lines_avx2(d, s, lines)
            } else {
                x86::stream_lines(d, s, lines)
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    rest[..lines].copy_from_slice(&src[head..head + lines]);
    rest[lines..].copy_from_slice(&src[head + lines..]);
}

thread_local! {
    /// Whether this thread's kernels ask for source lines ahead of their loads (see
    /// [`set_prefetches`]).
    static PREFETCHES: std::cell::Cell<bool> = const { std::cell::Cell::new(true) };
}

/// Sets whether the kernels this thread runs next prefetch their source: the engine sets it
/// per work item from its job (no prefetch where source and destination fit in the threads'
/// L2 caches: the lines are there already, and the prefetch instructions cost 1.2-1.4x on
/// 100-200 KB NCHW -> NHWC transposes on a Zen 5).
pub(crate) fn set_prefetches(on: bool) {
    PREFETCHES.with(|p| p.set(on));
}

/// This thread's setting from [`set_prefetches`] (on by default).
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(crate) fn prefetches() -> bool {
    PREFETCHES.with(|p| p.get())
}

/// Transposes one tile of `na x nb` elements of `N` bytes.
///
/// `stream` allows non-temporal stores (for a final destination, never for a scratch buffer
/// that is read back at once); they are used only on whole, 64-byte aligned lines, and the
/// engine fences them at the end of each work item ([`store_fence`]).
///
/// # Safety
/// For every `b < src.len()`, `src[b] .. src[b] + dst.len() * N` is readable; for every
/// `a < dst.len()`, `dst[a] .. dst[a] + src.len() * N` is writable, and no written byte is
/// read through `src` or written twice.
pub(crate) unsafe fn transpose_rows<const N: usize, R: Rows>(rows: R, stream: bool) {
    let (na, nb) = (rows.na(), rows.nb());
    if na == 0 || nb == 0 {
        return;
    }
    let lines = stream && rows.dst_lines();
    // Short rows packed together: a block of 8 rows of 8 is whole lines.
    let packed = stream && nb == 8 && na % 8 == 0 && rows.dst_packed(N);
    let (src, dst) = (rows, rows);
    #[cfg(target_arch = "x86_64")]
    {
        // An AVX2 kernel, compiled for AVX-512VL where the CPU has it (see `x86::avx512`).
        macro_rules! wide {
            ($kernel:ident($rows:expr)) => {
                if avx512() {
                    x86::avx512::$kernel(&$rows)
                } else {
                    x86::avx2::$kernel(&$rows)
                }
            };
        }
        // SAFETY (all arms): the kernels touch only elements a < na, b < nb of the rows,
        // which the caller guarantees; the CPU features are checked first.
        let (da, db) = unsafe {
            match N {
                4 if avx2() && lines && na >= 8 && nb >= 16 => wide!(f32_lines(rows)),
                4 if avx2() && packed => wide!(f32_blocks_streamed(rows)),
                4 if avx2() && rows.dst_lines() && na >= 8 && nb >= 16 => {
                    wide!(f32_lines_stored(rows))
                }
                4 if avx2() && na >= 8 && nb >= 8 => wide!(f32_blocks_stored(rows)),
                2 if avx2() && lines && na >= 16 && nb >= 32 => wide!(u16_lines(rows)),
                2 if avx2() && rows.dst_lines() && na >= 16 && nb >= 32 => {
                    wide!(u16_lines_stored(rows))
                }
                2 if avx2() && na >= 16 && nb >= 16 => wide!(u16_blocks(rows)),
                2 if lines && na >= 8 && nb >= 32 => x86::u16_lines(rows),
                2 if avx2() && packed && na >= 16 => wide!(u16_packed8(rows)),
                2 if packed => x86::u16_blocks::<true, R>(rows),
                2 if na >= 8 && nb >= 8 => x86::u16_blocks::<false, R>(rows),
                1 if avx2() && lines && na >= 16 && nb >= 64 => wide!(u8_lines32(rows)),
                1 if avx2() && na >= 16 && nb >= 32 => wide!(u8_blocks32(rows)),
                1 if lines && na >= 16 && nb >= 64 => x86::u8_lines(rows),
                1 if na >= 16 && nb >= 16 => x86::u8_blocks(rows),
                8 if avx2() && lines && na >= 4 && nb >= 8 => wide!(u64_lines(rows)),
                8 if avx2() && na >= 4 && nb >= 4 => wide!(u64_blocks(rows)),
                16 if avx2() && lines && na >= 2 && nb >= 4 => wide!(u128_lines(rows)),
                8 | 16 | 32 | 64 => {
                    x86::units::<N, R>(rows, lines);
                    (na, nb)
                }
                _ => (0, 0),
            }
        };
        // A strip a wide kernel left, in narrower blocks: 8 x 8 for 2-byte elements after 16
        // columns (f16 tiles of 28 rows, a MACE height-major image's 7 x 4 lanes, left 12 of
        // 28 columns to the element loop), 4 x 4 for 4-byte ones after 8; the whole tile
        // where no wide kernel ran (4 to 7 rows of 4-byte elements: NHWC -> NCHW of 7-pixel
        // images).
        let da = if da == 0 { na } else { da };
        let strip = Window::<R, N> {
            rows,
            a0: 0,
            b0: db,
            na: da,
        };
        // With AVX-512BW, after a 2-byte block kernel: a strip of 9-15 columns (which the 8 x 8
        // blocks would leave 1-7 columns of to the element loop) goes to masked blocks whole
        // (see `x86::edges`), and so do two or more rows past the last whole block: f16
        // NCHW -> NHWC N=16,C=250,H=W=64, whose tiles of 131 pixels left 2 of 250 channels
        // and 3 pixels to the element loop, one thread 0.37-0.38 -> 0.42-0.45 of the copy
        // (two sets of three alternating runs). Not narrower strips, single rows, tiles no
        // block kernel ran on, or 4-byte elements: a masked block that stores a few columns
        // or rows still loads and transposes sixteen, and masked stores of 8-12 bytes ran
        // slower than the narrow kernels and the element loop (f16 MACE filter images with
        // 4-column strips 0.15 -> 0.06 of the copy, f32 height-major images of 3 channels
        // 0.17 -> 0.09; f16 7 x 7 planes with one row left 0.91x).
        let masked = N == 2 && db > 0 && avx512_bw();
        let strip_masked = masked && (9..16).contains(&(nb - db));
        // SAFETY (both): the strip is inside the tile (rows ..da, columns db..nb).
        let (sa, sb) = match N {
            _ if strip_masked => unsafe {
                x86::edges::masked_region::<N, R>(rows, (0, da), (db, nb));
                (da, nb - db)
            },
            2 if da >= 8 && nb - db >= 8 => unsafe { x86::u16_blocks::<false, _>(strip) },
            2 if da >= 4 && nb - db >= 8 => unsafe { x86::u16_rows4(strip) },
            2 if da >= 8 && nb - db >= 4 => unsafe { x86::u16_blocks4(strip) },
            4 if da >= 4 && nb - db >= 4 => unsafe { x86::u32_blocks4(strip) },
            1 if da >= 16 && nb - db >= 8 => unsafe { x86::u8_blocks8(strip) },
            _ => (0, 0),
        };
        // The strips left: columns db + sb.. of rows ..sa, columns db.. of rows sa..da, then
        // rows da.. whole (two or more in masked blocks as above, else the element loop).
        let rows_end = if masked && na - da >= 2 { na } else { da };
        unsafe {
            scalar::<N, R>(src, dst, 0, sa, db + sb, nb);
            scalar::<N, R>(src, dst, sa, da, db, nb);
            if rows_end > da {
                x86::edges::masked_region::<N, R>(rows, (da, rows_end), (0, nb));
            }
            // Rows past the last whole block that no masked block took: bytes, 8 to 15 rows
            // in 8 x 16 blocks (NHWC -> NCHW of 24 channels); 2-byte elements, 4 to 7 rows
            // in 4 x 8 blocks.
            type RowsKernel<W> = unsafe fn(W) -> (usize, usize);
            let tail_kernel: Option<RowsKernel<Window<R, N>>> = match N {
                _ if rows_end != da => None,
                1 if na - da >= 8 && nb >= 16 => Some(x86::u8_rows8),
                2 if na - da >= 4 && nb >= 8 => Some(x86::u16_rows4),
                _ => None,
            };
            let ra = match tail_kernel {
                Some(kernel) => {
                    let tail = Window::<R, N> {
                        rows,
                        a0: da,
                        b0: 0,
                        na: na - da,
                    };
                    let (ra, rb) = kernel(tail);
                    scalar::<N, R>(src, dst, da, da + ra, rb, nb);
                    ra
                }
                None => 0,
            };
            scalar::<N, R>(src, dst, rows_end + ra, na, 0, nb);
        }
    }
    #[cfg(target_arch = "aarch64")]
    {
        let _ = (lines, packed);
        // SAFETY: the kernels touch only elements a < na, b < nb of the rows, which the
        // caller guarantees; NEON is part of the aarch64 baseline.
        let (da, db) = unsafe {
            match N {
                4 if na >= 4 && nb >= 4 => neon::u32_blocks(rows),
                2 if na >= 8 && nb >= 8 => neon::u16_blocks(rows),
                _ => (0, 0),
            }
        };
        // SAFETY: as the caller guarantees.
        unsafe {
            scalar::<N, R>(src, dst, 0, da, db, nb);
            scalar::<N, R>(src, dst, da, na, 0, nb);
        }
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        let _ = (lines, packed);
        // SAFETY: as the caller guarantees.
        unsafe { scalar::<N, R>(src, dst, 0, na, 0, nb) };
    }
}

#[cfg(target_arch = "aarch64")]
mod neon;

/// [`transpose_rows`] for an element (or unit) size known only at run time.
///
/// # Safety
/// As [`transpose_rows`] with `N = bytes`.
pub(crate) unsafe fn transpose_rows_dyn<R: Rows>(rows: R, bytes: usize, stream: bool) {
    // SAFETY: as the caller guarantees.
    unsafe { transpose_rows_inlined(rows, bytes, stream) }
}

/// [`transpose_rows_dyn`] inlined into its caller, for the tiles that call it once per small
/// tile: the rows stay in registers until the kernel's call, where passed down by value they
/// were copied in 16-byte pieces from the 8-byte stores that had just written them, a
/// store-forwarding stall per tile (f16 `NHWC -> mace:in_out_width` C=16 14 x 14, tiles of
/// 16 x 16 elements: 16-17% -> 20-21% of the copy; i8 `NCHW -> NCHW32c` 7 x 7 32-33% ->
/// 35%). Inlined everywhere, the casts' tiles ran 2% slower.
///
/// # Safety
/// As [`transpose_rows`] with `N = bytes`.
#[inline(always)]
pub(crate) unsafe fn transpose_rows_inlined<R: Rows>(rows: R, bytes: usize, stream: bool) {
    // SAFETY: as the caller guarantees.
    unsafe {
        match bytes {
            1 => transpose_rows::<1, R>(rows, stream),
            2 => transpose_rows::<2, R>(rows, stream),
            4 => transpose_rows::<4, R>(rows, stream),
            8 => transpose_rows::<8, R>(rows, stream),
            16 => transpose_rows::<16, R>(rows, stream),
            32 => transpose_rows::<32, R>(rows, stream),
            64 => transpose_rows::<64, R>(rows, stream),
            _ => {
                for a in 0..rows.na() {
                    for b in 0..rows.nb() {
                        std::ptr::copy_nonoverlapping(
                            rows.src(b).add(a * bytes),
                            rows.dst(a).add(b * bytes),
                            bytes,
                        );
                    }
                }
            }
        }
    }
}

/// The portable loop over rows `a0..a1`, columns `b0..b1`.
///
/// # Safety
/// As [`transpose_rows`].
unsafe fn scalar<const N: usize, R: Rows>(
    rows: R,
    _: R,
    a0: usize,
    a1: usize,
    b0: usize,
    b1: usize,
) {
    if b0 >= b1 || a0 >= a1 {
        return;
    }
    if b1 - b0 < 4 {
        // A few columns (what a block kernel leaves of a 49-pixel plane): each source row
        // read along `a`, the destination rows walked (the loop over columns, one iteration
        // long for each row, was half of this function's time: i8 NCHW32c -> NCHW and NHWC
        // -> NCHW on 7 x 7 planes 1.4-1.7x with this, the sweep under 1 MiB 1.021x, rows at
        // half the copy's speed 399 -> 416 of 796, four alternations; walking the source rows
        // in the loop below as well measured slower on tiles of 3 rows).
        for b in b0..b1 {
            let s = rows.src(b);
            let mut dst = rows.dst_walk(a0);
            for a in a0..a1 {
                // SAFETY: a < na and b < nb: inside both rows by the caller's contract.
                unsafe { std::ptr::copy_nonoverlapping(s.add(a * N), dst().add(b * N), N) };
            }
        }
        return;
    }
    for a in a0..a1 {
        let d = rows.dst(a);
        for b in b0..b1 {
            // SAFETY: a < na and b < nb: inside both rows by the caller's contract.
            unsafe { std::ptr::copy_nonoverlapping(rows.src(b).add(a * N), d.add(b * N), N) };
        }
    }
}

/// Asks for the cache line at `p` (a hint: never faults, so any address is allowed).
#[inline(always)]
pub(crate) fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch has no architectural effect; SSE is part of x86-64.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p as *const i8)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Asks for the cache line at `p` into L2 (`prefetcht1`; a hint, as [`prefetch`]).
#[inline(always)]
pub(crate) fn prefetch_l2(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch has no architectural effect; SSE is part of x86-64.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T1 }>(p as *const i8)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Orders this thread's streaming stores before whatever follows (the engine calls it at the
/// end of every work item, before the item counts as done).
pub(crate) fn store_fence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SSE is part of x86-64.
    unsafe {
        std::arch::x86_64::_mm_sfence()
    };
}

#[cfg(target_arch = "x86_64")]
fn avx2() -> bool {
    use std::sync::OnceLock;
    static HAS: OnceLock<bool> = OnceLock::new();
    *HAS.get_or_init(|| std::arch::is_x86_feature_detected!("avx2"))
}

/// Whether the AVX2 kernels run as compiled for AVX-512VL: the CPU has AVX-512F and
/// AVX-512VL, and the environment variable `LAYOUTKIT_CPU_KERNELS` is not `avx2` (read once;
/// the test command sets it to run the property tests on the AVX2 builds too). Unit tests can
/// turn it off on their thread (`AVX2_BUILDS`).
#[cfg(target_arch = "x86_64")]
fn avx512() -> bool {
    use std::sync::OnceLock;
    static HAS: OnceLock<bool> = OnceLock::new();
    #[cfg(test)]
    if tests::AVX2_BUILDS.with(|c| c.get()) {
        return false;
    }
    *HAS.get_or_init(|| {
        std::env::var_os("LAYOUTKIT_CPU_KERNELS").is_none_or(|v| v != "avx2")
            && std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512vl")
    })
}

/// Whether the masked AVX-512 edge blocks run: as [`avx512`], and the CPU has BW.
#[cfg(target_arch = "x86_64")]
fn avx512_bw() -> bool {
    use std::sync::OnceLock;
    static HAS: OnceLock<bool> = OnceLock::new();
    avx512() && *HAS.get_or_init(|| std::arch::is_x86_feature_detected!("avx512bw"))
}

/// Whether kernels built for AVX-512 (F, BW, VL, VBMI) run: as [`avx512`], and the CPU has
/// BW and VBMI too.
#[cfg(target_arch = "x86_64")]
pub(super) fn avx512_builds() -> bool {
    use std::sync::OnceLock;
    static HAS: OnceLock<bool> = OnceLock::new();
    avx512()
        && *HAS.get_or_init(|| {
            std::arch::is_x86_feature_detected!("avx512bw")
                && std::arch::is_x86_feature_detected!("avx512vbmi")
                && std::arch::is_x86_feature_detected!("bmi2")
        })
}

/// Whether the AVX-512 quantising kernels run: as [`avx512`], and the CPU has BW and DQ.
#[cfg(target_arch = "x86_64")]
pub(super) fn avx512_quantise() -> bool {
    use std::sync::OnceLock;
    static HAS: OnceLock<bool> = OnceLock::new();
    avx512()
        && *HAS.get_or_init(|| {
            std::arch::is_x86_feature_detected!("avx512bw")
                && std::arch::is_x86_feature_detected!("avx512dq")
        })
}

/// Whether kernels built for AVX2 run (the CPU has AVX2 and BMI2).
#[cfg(target_arch = "x86_64")]
pub(super) fn avx2_builds() -> bool {
    use std::sync::OnceLock;
    static HAS: OnceLock<bool> = OnceLock::new();
    avx2() && *HAS.get_or_init(|| std::arch::is_x86_feature_detected!("bmi2"))
}

#[cfg(target_arch = "x86_64")]
pub(super) mod x86;

#[cfg(test)]
#[path = "transpose_tests.rs"]
pub(super) mod tests;
