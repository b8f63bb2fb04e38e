//! Tile transposition over row tables: `dst[a][b] = src[b][a]` where `src[b]` is the start of
//! source row `b` (its elements, indexed by `a`, are contiguous) and `dst[a]` the start of
//! destination row `a` (indexed by `b`, contiguous). Rows are given as pointers so one kernel
//! serves plain matrices, compound row indices (a row index that is several loops, such as
//! `(i, h, w)` in `OIHW -> OIHW16i16o`) and fill rows (rows that read a line of the fill
//! value, which pads a record such as `kHWC8`'s eight channels).
//!
//! Kernels, dispatched on the element size `N` in bytes and chosen at run time:
//! * 4 bytes: AVX2 8 x 8 transposes; with streaming allowed and 64-byte aligned destination
//!   rows, 8 x 16 blocks whose rows are whole cache lines written with non-temporal stores;
//! * 2 bytes: SSE2 8 x 8 transposes, streamed as 8 x 32 blocks when aligned;
//! * 1 byte: SSE2 16 x 16 transposes, streamed as 16 x 64 blocks when aligned;
//! * larger units (8 to 64 bytes, e.g. the four lanes of an image pixel): unit moves along
//!   destination rows, streamed in 16-byte pieces when aligned;
//! * anything else, and every edge strip: a portable loop.

/// Where a tile's rows start: source row `b` (for `b < nb()`) and destination row `a` (for
/// `a < na()`).
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(crate) trait Rows: Copy {
    fn na(&self) -> usize;
    fn nb(&self) -> usize;
    fn src(&self, b: usize) -> *const u8;
    fn dst(&self, a: usize) -> *mut u8;
    /// Whether every destination row starts on a 64-byte boundary.
    fn dst_lines(&self) -> bool;
    /// The order the kernels walk the tile's blocks in: along the source rows (each read
    /// sequentially) when true, along the destination rows (each written sequentially, the
    /// source lines prefetched) when false. Measured: the latter for plain tiles (it wins
    /// where the destination rows are far apart, NHWC -> NCHW, and on image pixels), the former
    /// for tiles over compound rows (OIHW -> OIHW16i16o).
    fn src_major(&self) -> bool {
        false
    }
    /// Whether the destination rows of `N`-byte elements follow each other without gaps
    /// from a 64-byte boundary (a block of whole short rows is whole lines).
    fn dst_packed(&self, _n: usize) -> bool {
        false
    }
}

/// Rows `data_rows..` of the source read a line of the fill value instead: they pad each
/// destination row (a record such as `kHWC8`'s eight channels) in the same pass.
#[derive(Clone, Copy)]
pub(crate) struct Padded<R: Rows> {
    pub rows: R,
    pub data_rows: usize,
    /// At least `rows.na()` elements of the fill value.
    pub fill: *const u8,
}

impl<R: Rows> Rows for Padded<R> {
    fn na(&self) -> usize {
        self.rows.na()
    }
    fn nb(&self) -> usize {
        self.rows.nb()
    }
    #[inline(always)]
    fn src(&self, b: usize) -> *const u8 {
        if b < self.data_rows {
            self.rows.src(b)
        } else {
            self.fill
        }
    }
    #[inline(always)]
    fn dst(&self, a: usize) -> *mut u8 {
        self.rows.dst(a)
    }
    fn dst_lines(&self) -> bool {
        self.rows.dst_lines()
    }
    fn dst_packed(&self, n: usize) -> bool {
        self.rows.dst_packed(n)
    }
    fn src_major(&self) -> bool {
        self.rows.src_major()
    }
}

/// Rows a fixed number of bytes apart (a plain matrix): no tables to build.
#[derive(Clone, Copy)]
pub(crate) struct Strided {
    pub src: *const u8,
    pub src_row: usize,
    pub dst: *mut u8,
    pub dst_row: usize,
    pub na: usize,
    pub nb: usize,
}

impl Rows for Strided {
    fn na(&self) -> usize {
        self.na
    }
    fn nb(&self) -> usize {
        self.nb
    }
    #[inline(always)]
    fn src(&self, b: usize) -> *const u8 {
        self.src.wrapping_add(b * self.src_row)
    }
    #[inline(always)]
    fn dst(&self, a: usize) -> *mut u8 {
        self.dst.wrapping_add(a * self.dst_row)
    }
    fn dst_lines(&self) -> bool {
        self.dst as usize % 64 == 0 && (self.dst_row % 64 == 0 || self.na <= 1)
    }
    fn dst_packed(&self, n: usize) -> bool {
        self.dst as usize % 64 == 0 && self.dst_row == self.nb * n
    }
}

/// Source rows a fixed distance apart; destination rows at byte offsets from a table (a
/// compound row index whose offsets repeat from tile to tile, as `(i, h, w)` of
/// `OIHW16i16o`).
#[derive(Clone, Copy)]
pub(crate) struct Offsets<'t> {
    pub src: *const u8,
    pub src_row: usize,
    pub dst: *mut u8,
    /// One byte offset per destination row: `na` is its length.
    pub dst_rows: &'t [usize],
    pub nb: usize,
}

impl Rows for Offsets<'_> {
    fn na(&self) -> usize {
        self.dst_rows.len()
    }
    fn nb(&self) -> usize {
        self.nb
    }
    #[inline(always)]
    fn src(&self, b: usize) -> *const u8 {
        self.src.wrapping_add(b * self.src_row)
    }
    #[inline(always)]
    fn dst(&self, a: usize) -> *mut u8 {
        self.dst.wrapping_add(self.dst_rows[a])
    }
    fn dst_lines(&self) -> bool {
        self.dst as usize % 64 == 0 && self.dst_rows.iter().all(|o| o % 64 == 0)
    }
    fn src_major(&self) -> bool {
        true
    }
}

/// Copies `src` to `dst` (same length), streaming the 64-byte aligned lines of the
/// destination past the cache.
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
        use std::arch::x86_64::*;
        let (s, d) = (src[head..].as_ptr(), rest.as_mut_ptr());
        for i in (0..lines).step_by(16) {
            // SAFETY: i + 16 <= lines <= both lengths past `head`; the destination address is
            // 16-byte aligned (64-byte aligned from `head` on); SSE2 is part of x86-64.
            unsafe {
                let v = _mm_loadu_si128(s.add(i) as *const __m128i);
                _mm_stream_si128(d.add(i) as *mut __m128i, v);
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    rest[..lines].copy_from_slice(&src[head..head + lines]);
    rest[lines..].copy_from_slice(&src[head + lines..]);
}

/// Rows from tables of pointers (compound row indices, fill rows).
#[derive(Clone, Copy)]
pub(crate) struct Table<'t> {
    pub src: &'t [*const u8],
    pub dst: &'t [*mut u8],
}

impl Rows for Table<'_> {
    fn na(&self) -> usize {
        self.dst.len()
    }
    fn nb(&self) -> usize {
        self.src.len()
    }
    #[inline(always)]
    fn src(&self, b: usize) -> *const u8 {
        self.src[b]
    }
    #[inline(always)]
    fn dst(&self, a: usize) -> *mut u8 {
        self.dst[a]
    }
    fn dst_lines(&self) -> bool {
        self.dst.iter().all(|p| *p as usize % 64 == 0)
    }
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
        // SAFETY (all arms): the kernels touch only elements a < na, b < nb of the rows,
        // which the caller guarantees; the CPU features are checked first.
        let (da, db) = unsafe {
            match N {
                4 if avx2() && lines && na >= 8 && nb >= 16 => x86::f32_lines(rows),
                4 if avx2() && packed => x86::f32_blocks::<true, R>(rows),
                4 if avx2() && na >= 8 && nb >= 8 => x86::f32_blocks::<false, R>(rows),
                2 if avx2() && lines && na >= 16 && nb >= 32 => x86::u16_lines_avx2(rows),
                2 if avx2() && na >= 16 && nb >= 16 => x86::u16_blocks_avx2(rows),
                2 if lines && na >= 8 && nb >= 32 => x86::u16_lines(rows),
                2 if packed => x86::u16_blocks::<true, R>(rows),
                2 if na >= 8 && nb >= 8 => x86::u16_blocks::<false, R>(rows),
                1 if lines && na >= 16 && nb >= 64 => x86::u8_lines(rows),
                1 if na >= 16 && nb >= 16 => x86::u8_blocks(rows),
                8 if avx2() && lines && na >= 4 && nb >= 8 => x86::u64_lines(rows),
                8 if avx2() && na >= 4 && nb >= 4 => x86::u64_blocks(rows),
                16 if avx2() && lines && na >= 2 && nb >= 4 => x86::u128_lines(rows),
                8 | 16 | 32 | 64 => {
                    x86::units::<N, R>(rows, lines);
                    (na, nb)
                }
                _ => (0, 0),
            }
        };
        // The strips the kernel left: columns db.. of rows ..da, then rows da.. whole.
        unsafe {
            scalar::<N, R>(src, dst, 0, da, db, nb);
            scalar::<N, R>(src, dst, da, na, 0, nb);
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
mod neon {
    //! The aarch64 kernels (NEON is part of the baseline). Each returns `(da, db)`: it did
    //! rows `..da`, columns `..db`. Safety for all: the contract of
    //! [`super::transpose_rows`].
    use super::Rows;
    use std::arch::aarch64::*;

    /// 4 x 4 blocks of 4-byte elements: two rounds of `trn` (32-bit, then 64-bit lanes).
    pub(super) unsafe fn u32_blocks<R: Rows>(r: R) -> (usize, usize) {
        let (na, nb) = (r.na() / 4 * 4, r.nb() / 4 * 4);
        for a in (0..na).step_by(4) {
            for b in (0..nb).step_by(4) {
                // SAFETY: rows b..b+4 at columns a..a+4 and rows a..a+4 at columns b..b+4
                // are inside the tile.
                unsafe {
                    let l = |k: usize| vld1q_u32((r.src(b + k) as *const u32).add(a));
                    let (r0, r1, r2, r3) = (l(0), l(1), l(2), l(3));
                    let t0 = vtrn1q_u32(r0, r1);
                    let t1 = vtrn2q_u32(r0, r1);
                    let t2 = vtrn1q_u32(r2, r3);
                    let t3 = vtrn2q_u32(r2, r3);
                    let q = |x: uint32x4_t| vreinterpretq_u64_u32(x);
                    let o = |x: uint64x2_t| vreinterpretq_u32_u64(x);
                    let out = [
                        o(vtrn1q_u64(q(t0), q(t2))),
                        o(vtrn1q_u64(q(t1), q(t3))),
                        o(vtrn2q_u64(q(t0), q(t2))),
                        o(vtrn2q_u64(q(t1), q(t3))),
                    ];
                    for (k, v) in out.into_iter().enumerate() {
                        vst1q_u32((r.dst(a + k) as *mut u32).add(b), v);
                    }
                }
            }
        }
        (na, nb)
    }

    /// 8 x 8 blocks of 2-byte elements: `trn` on 16-, 32- and 64-bit lanes.
    pub(super) unsafe fn u16_blocks<R: Rows>(r: R) -> (usize, usize) {
        let (na, nb) = (r.na() / 8 * 8, r.nb() / 8 * 8);
        for a in (0..na).step_by(8) {
            for b in (0..nb).step_by(8) {
                // SAFETY: inside the tile, as above.
                unsafe {
                    let mut v = [vdupq_n_u16(0); 8];
                    for (k, x) in v.iter_mut().enumerate() {
                        *x = vld1q_u16((r.src(b + k) as *const u16).add(a));
                    }
                    // Pairs of rows: 2x2 blocks of 16-bit elements.
                    let mut t = [vdupq_n_u16(0); 8];
                    for i in 0..4 {
                        t[2 * i] = vtrn1q_u16(v[2 * i], v[2 * i + 1]);
                        t[2 * i + 1] = vtrn2q_u16(v[2 * i], v[2 * i + 1]);
                    }
                    // Quads: 2x2 blocks of 32-bit pairs.
                    let w = |x: uint16x8_t| vreinterpretq_u32_u16(x);
                    let mut u = [vdupq_n_u32(0); 8];
                    for g in 0..2 {
                        for j in 0..2 {
                            u[4 * g + j] = vtrn1q_u32(w(t[4 * g + j]), w(t[4 * g + 2 + j]));
                            u[4 * g + 2 + j] = vtrn2q_u32(w(t[4 * g + j]), w(t[4 * g + 2 + j]));
                        }
                    }
                    // Eights: 2x2 blocks of 64-bit quads.
                    let q = |x: uint32x4_t| vreinterpretq_u64_u32(x);
                    for j in 0..4 {
                        let lo = vtrn1q_u64(q(u[j]), q(u[4 + j]));
                        let hi = vtrn2q_u64(q(u[j]), q(u[4 + j]));
                        vst1q_u16((r.dst(a + j) as *mut u16).add(b), vreinterpretq_u16_u64(lo));
                        vst1q_u16(
                            (r.dst(a + 4 + j) as *mut u16).add(b),
                            vreinterpretq_u16_u64(hi),
                        );
                    }
                }
            }
        }
        (na, nb)
    }
}

/// [`transpose_rows`] for an element (or unit) size known only at run time.
///
/// # Safety
/// As [`transpose_rows`] with `N = bytes`.
pub(crate) unsafe fn transpose_rows_dyn<R: Rows>(rows: R, bytes: usize, stream: bool) {
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
    if b0 >= b1 {
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

#[cfg(target_arch = "x86_64")]
mod x86 {
    //! The x86-64 kernels. Each returns `(da, db)`: it did rows `..da`, columns `..db`.
    //! Safety for all: the contract of [`super::transpose_rows`], plus the CPU feature each
    //! names (SSE2 is part of x86-64).
    use super::Rows;
    use std::arch::x86_64::*;

    /// How far ahead along a source row [`prefetch_next_line`] asks for data.
    const PF_DIST: usize = 256;

    /// Asks for the line after `p`'s into the L2 cache: the next blocks along the
    /// destination rows read it, and source rows visited a block at a time defeat the hardware
    /// prefetchers. A prefetch never faults, so addresses past the buffer are harmless.
    #[inline(always)]
    fn prefetch_next_line(p: *const u8) {
        // SAFETY: a prefetch is a hint with no architectural effect; SSE is part of x86-64.
        unsafe { _mm_prefetch::<_MM_HINT_T1>(p.wrapping_add(PF_DIST) as *const i8) };
    }

    /// The 8x8 transpose of eight rows of eight floats.
    #[target_feature(enable = "avx2")]
    #[inline]
    fn transpose8(r: [__m256; 8]) -> [__m256; 8] {
        let t0 = _mm256_unpacklo_ps(r[0], r[1]);
        let t1 = _mm256_unpackhi_ps(r[0], r[1]);
        let t2 = _mm256_unpacklo_ps(r[2], r[3]);
        let t3 = _mm256_unpackhi_ps(r[2], r[3]);
        let t4 = _mm256_unpacklo_ps(r[4], r[5]);
        let t5 = _mm256_unpackhi_ps(r[4], r[5]);
        let t6 = _mm256_unpacklo_ps(r[6], r[7]);
        let t7 = _mm256_unpackhi_ps(r[6], r[7]);
        let u0 = _mm256_shuffle_ps::<0x44>(t0, t2);
        let u1 = _mm256_shuffle_ps::<0xEE>(t0, t2);
        let u2 = _mm256_shuffle_ps::<0x44>(t1, t3);
        let u3 = _mm256_shuffle_ps::<0xEE>(t1, t3);
        let u4 = _mm256_shuffle_ps::<0x44>(t4, t6);
        let u5 = _mm256_shuffle_ps::<0xEE>(t4, t6);
        let u6 = _mm256_shuffle_ps::<0x44>(t5, t7);
        let u7 = _mm256_shuffle_ps::<0xEE>(t5, t7);
        [
            _mm256_permute2f128_ps::<0x20>(u0, u4),
            _mm256_permute2f128_ps::<0x20>(u1, u5),
            _mm256_permute2f128_ps::<0x20>(u2, u6),
            _mm256_permute2f128_ps::<0x20>(u3, u7),
            _mm256_permute2f128_ps::<0x31>(u0, u4),
            _mm256_permute2f128_ps::<0x31>(u1, u5),
            _mm256_permute2f128_ps::<0x31>(u2, u6),
            _mm256_permute2f128_ps::<0x31>(u3, u7),
        ]
    }

    /// 8 x 8 blocks of floats; with `STREAM`, streaming stores (the caller checked that the
    /// destination rows are packed from a 64-byte boundary, so each block is whole lines).
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn f32_blocks<const STREAM: bool, R: Rows>(r: R) -> (usize, usize) {
        let (na, nb) = (r.na() / 8 * 8, r.nb() / 8 * 8);
        let src_major = r.src_major();
        let (no, so, ni, si) = if src_major {
            (nb, 8, na, 8)
        } else {
            (na, 8, nb, 8)
        };
        for o in (0..no).step_by(so) {
            for i in (0..ni).step_by(si) {
                let (a, b) = if src_major { (i, o) } else { (o, i) };
                // SAFETY: rows b..b+8 at columns a..a+8 and rows a..a+8 at columns b..b+8
                // are inside the tile.
                unsafe {
                    let t = transpose8(std::array::from_fn(|k| {
                        if !src_major {
                            prefetch_next_line(r.src(b + k).wrapping_add(a * 4));
                        }
                        _mm256_loadu_ps((r.src(b + k) as *const f32).add(a))
                    }));
                    for (k, v) in t.into_iter().enumerate() {
                        let p = (r.dst(a + k) as *mut f32).add(b);
                        if STREAM {
                            _mm256_stream_ps(p, v);
                        } else {
                            _mm256_storeu_ps(p, v);
                        }
                    }
                }
            }
        }
        (na, nb)
    }

    /// 8 x 16 blocks of floats: each destination row gets one whole line, streamed.
    /// Destination rows are 64-byte aligned (checked by the caller).
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn f32_lines<R: Rows>(r: R) -> (usize, usize) {
        let (na, nb) = (r.na() / 8 * 8, r.nb() / 16 * 16);
        let src_major = r.src_major();
        let (no, so, ni, si) = if src_major {
            (nb, 16, na, 8)
        } else {
            (na, 8, nb, 16)
        };
        for o in (0..no).step_by(so) {
            for i in (0..ni).step_by(si) {
                let (a, b) = if src_major { (i, o) } else { (o, i) };
                // SAFETY: inside the tile; destination addresses are 64-byte aligned rows plus
                // a multiple of 64 bytes.
                unsafe {
                    let lo = transpose8(std::array::from_fn(|k| {
                        if !src_major {
                            prefetch_next_line(r.src(b + k).wrapping_add(a * 4));
                        }
                        _mm256_loadu_ps((r.src(b + k) as *const f32).add(a))
                    }));
                    let hi = transpose8(std::array::from_fn(|k| {
                        if !src_major {
                            prefetch_next_line(r.src(b + 8 + k).wrapping_add(a * 4));
                        }
                        _mm256_loadu_ps((r.src(b + 8 + k) as *const f32).add(a))
                    }));
                    for k in 0..8 {
                        let p = (r.dst(a + k) as *mut f32).add(b);
                        _mm256_stream_ps(p, lo[k]);
                        _mm256_stream_ps(p.add(8), hi[k]);
                    }
                }
            }
        }
        (na, nb)
    }

    /// Four source rows from `b`, 8-byte columns `a..a+4`, transposed.
    #[target_feature(enable = "avx2")]
    #[inline]
    unsafe fn u64_block4<R: Rows>(rows: R, a: usize, b: usize) -> [__m256d; 4] {
        let mut r = [_mm256_setzero_pd(); 4];
        for (k, v) in r.iter_mut().enumerate() {
            // SAFETY: inside the tile (the caller's contract).
            if !rows.src_major() {
                prefetch_next_line(rows.src(b + k).wrapping_add(a * 8));
            }
            *v = unsafe { _mm256_loadu_pd(rows.src(b + k).add(a * 8) as *const f64) };
        }
        let t0 = _mm256_unpacklo_pd(r[0], r[1]);
        let t1 = _mm256_unpackhi_pd(r[0], r[1]);
        let t2 = _mm256_unpacklo_pd(r[2], r[3]);
        let t3 = _mm256_unpackhi_pd(r[2], r[3]);
        [
            _mm256_permute2f128_pd::<0x20>(t0, t2),
            _mm256_permute2f128_pd::<0x20>(t1, t3),
            _mm256_permute2f128_pd::<0x31>(t0, t2),
            _mm256_permute2f128_pd::<0x31>(t1, t3),
        ]
    }

    /// 4 x 4 blocks of 8-byte elements (or units), plain stores.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn u64_blocks<R: Rows>(r: R) -> (usize, usize) {
        let (na, nb) = (r.na() / 4 * 4, r.nb() / 4 * 4);
        let src_major = r.src_major();
        let (no, so, ni, si) = if src_major {
            (nb, 4, na, 4)
        } else {
            (na, 4, nb, 4)
        };
        for o in (0..no).step_by(so) {
            for i in (0..ni).step_by(si) {
                let (a, b) = if src_major { (i, o) } else { (o, i) };
                // SAFETY: inside the tile.
                unsafe {
                    let t = u64_block4(r, a, b);
                    for (k, v) in t.into_iter().enumerate() {
                        _mm256_storeu_pd(r.dst(a + k).add(b * 8) as *mut f64, v);
                    }
                }
            }
        }
        (na, nb)
    }

    /// 4 x 8 blocks of 8-byte elements: each destination row's line streamed.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn u64_lines<R: Rows>(r: R) -> (usize, usize) {
        let (na, nb) = (r.na() / 4 * 4, r.nb() / 8 * 8);
        let src_major = r.src_major();
        let (no, so, ni, si) = if src_major {
            (nb, 8, na, 4)
        } else {
            (na, 4, nb, 8)
        };
        for o in (0..no).step_by(so) {
            for i in (0..ni).step_by(si) {
                let (a, b) = if src_major { (i, o) } else { (o, i) };
                // SAFETY: inside the tile; aligned destination lines.
                unsafe {
                    let lo = u64_block4(r, a, b);
                    let hi = u64_block4(r, a, b + 4);
                    for k in 0..4 {
                        let p = r.dst(a + k).add(b * 8) as *mut f64;
                        _mm256_stream_pd(p, lo[k]);
                        _mm256_stream_pd(p.add(4), hi[k]);
                    }
                }
            }
        }
        (na, nb)
    }

    /// 2 x 4 blocks of 16-byte units (an image pixel of four floats): each of the two
    /// destination rows gets one whole line, streamed.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn u128_lines<R: Rows>(r: R) -> (usize, usize) {
        let (na, nb) = (r.na() / 2 * 2, r.nb() / 4 * 4);
        let src_major = r.src_major();
        let (no, so, ni, si) = if src_major {
            (nb, 4, na, 2)
        } else {
            (na, 2, nb, 4)
        };
        for o in (0..no).step_by(so) {
            for i in (0..ni).step_by(si) {
                let (a, b) = if src_major { (i, o) } else { (o, i) };
                // SAFETY: inside the tile; aligned destination lines.
                unsafe {
                    // Units a, a+1 of source rows b..b+4.
                    let mut y = [_mm256_setzero_si256(); 4];
                    for (k, v) in y.iter_mut().enumerate() {
                        if !src_major {
                            prefetch_next_line(r.src(b + k).wrapping_add(a * 16));
                        }
                        *v = _mm256_loadu_si256(r.src(b + k).add(a * 16) as *const __m256i);
                    }
                    let p = r.dst(a).add(b * 16) as *mut __m256i;
                    _mm256_stream_si256(p, _mm256_permute2x128_si256::<0x20>(y[0], y[1]));
                    _mm256_stream_si256(p.add(1), _mm256_permute2x128_si256::<0x20>(y[2], y[3]));
                    let q = r.dst(a + 1).add(b * 16) as *mut __m256i;
                    _mm256_stream_si256(q, _mm256_permute2x128_si256::<0x31>(y[0], y[1]));
                    _mm256_stream_si256(q.add(1), _mm256_permute2x128_si256::<0x31>(y[2], y[3]));
                }
            }
        }
        (na, nb)
    }

    /// Sixteen rows of sixteen 2-byte elements from source rows `b..b+16`, columns
    /// `a..a+16`, transposed: vector `c` is column `a + c`.
    #[target_feature(enable = "avx2")]
    #[inline]
    unsafe fn u16_block16<R: Rows>(rows: R, a: usize, b: usize) -> [__m256i; 16] {
        let mut r = [_mm256_setzero_si256(); 16];
        for (k, v) in r.iter_mut().enumerate() {
            // SAFETY: inside the tile (the caller's contract).
            *v = unsafe { _mm256_loadu_si256(rows.src(b + k).add(a * 2) as *const __m256i) };
            if !rows.src_major() {
                prefetch_next_line(rows.src(b + k).wrapping_add(a * 2));
            }
        }
        // Within each 128-bit lane (columns 8L..8L+8): pairs of rows, then quads, then eights.
        let mut t = [_mm256_setzero_si256(); 16];
        for i in 0..8 {
            t[2 * i] = _mm256_unpacklo_epi16(r[2 * i], r[2 * i + 1]);
            t[2 * i + 1] = _mm256_unpackhi_epi16(r[2 * i], r[2 * i + 1]);
        }
        // u[4g + c]: rows 4g..4g+4, columns 2c, 2c+1 of each lane.
        let mut u = [_mm256_setzero_si256(); 16];
        for g in 0..4 {
            u[4 * g] = _mm256_unpacklo_epi32(t[4 * g], t[4 * g + 2]);
            u[4 * g + 1] = _mm256_unpackhi_epi32(t[4 * g], t[4 * g + 2]);
            u[4 * g + 2] = _mm256_unpacklo_epi32(t[4 * g + 1], t[4 * g + 3]);
            u[4 * g + 3] = _mm256_unpackhi_epi32(t[4 * g + 1], t[4 * g + 3]);
        }
        // v[8h + c]: rows 8h..8h+8, column c of each lane.
        let mut v = [_mm256_setzero_si256(); 16];
        for h in 0..2 {
            for c in 0..4 {
                v[8 * h + 2 * c] = _mm256_unpacklo_epi64(u[8 * h + c], u[8 * h + 4 + c]);
                v[8 * h + 2 * c + 1] = _mm256_unpackhi_epi64(u[8 * h + c], u[8 * h + 4 + c]);
            }
        }
        // Column c of lane 0 and of lane 1: rows 0..8 from v[c], rows 8..16 from v[8 + c].
        let mut out = [_mm256_setzero_si256(); 16];
        for c in 0..8 {
            out[c] = _mm256_permute2x128_si256::<0x20>(v[c], v[8 + c]);
            out[8 + c] = _mm256_permute2x128_si256::<0x31>(v[c], v[8 + c]);
        }
        out
    }

    /// 16 x 16 blocks of 2-byte elements, plain stores.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn u16_blocks_avx2<R: Rows>(r: R) -> (usize, usize) {
        let (na, nb) = (r.na() / 16 * 16, r.nb() / 16 * 16);
        let src_major = r.src_major();
        let (no, so, ni, si) = if src_major {
            (nb, 16, na, 16)
        } else {
            (na, 16, nb, 16)
        };
        for o in (0..no).step_by(so) {
            for i in (0..ni).step_by(si) {
                let (a, b) = if src_major { (i, o) } else { (o, i) };
                // SAFETY: inside the tile.
                unsafe {
                    let t = u16_block16(r, a, b);
                    for (k, v) in t.into_iter().enumerate() {
                        _mm256_storeu_si256(r.dst(a + k).add(b * 2) as *mut __m256i, v);
                    }
                }
            }
        }
        (na, nb)
    }

    /// 16 x 32 blocks of 2-byte elements: two transposes, each destination row's line
    /// streamed in two consecutive stores.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn u16_lines_avx2<R: Rows>(r: R) -> (usize, usize) {
        let (na, nb) = (r.na() / 16 * 16, r.nb() / 32 * 32);
        let src_major = r.src_major();
        let (no, so, ni, si) = if src_major {
            (nb, 32, na, 16)
        } else {
            (na, 16, nb, 32)
        };
        for o in (0..no).step_by(so) {
            for i in (0..ni).step_by(si) {
                let (a, b) = if src_major { (i, o) } else { (o, i) };
                // SAFETY: inside the tile; aligned destination lines.
                unsafe {
                    let lo = u16_block16(r, a, b);
                    let hi = u16_block16(r, a, b + 16);
                    for k in 0..16 {
                        let p = r.dst(a + k).add(b * 2) as *mut __m256i;
                        _mm256_stream_si256(p, lo[k]);
                        _mm256_stream_si256(p.add(1), hi[k]);
                    }
                }
            }
        }
        (na, nb)
    }

    /// The 8x8 transpose of eight rows of eight 2-byte elements.
    #[inline(always)]
    fn transpose8x16(r: [__m128i; 8]) -> [__m128i; 8] {
        // SAFETY: SSE2 is part of x86-64.
        unsafe {
            let b0 = _mm_unpacklo_epi16(r[0], r[1]);
            let b1 = _mm_unpackhi_epi16(r[0], r[1]);
            let b2 = _mm_unpacklo_epi16(r[2], r[3]);
            let b3 = _mm_unpackhi_epi16(r[2], r[3]);
            let b4 = _mm_unpacklo_epi16(r[4], r[5]);
            let b5 = _mm_unpackhi_epi16(r[4], r[5]);
            let b6 = _mm_unpacklo_epi16(r[6], r[7]);
            let b7 = _mm_unpackhi_epi16(r[6], r[7]);
            let c0 = _mm_unpacklo_epi32(b0, b2);
            let c1 = _mm_unpackhi_epi32(b0, b2);
            let c2 = _mm_unpacklo_epi32(b1, b3);
            let c3 = _mm_unpackhi_epi32(b1, b3);
            let c4 = _mm_unpacklo_epi32(b4, b6);
            let c5 = _mm_unpackhi_epi32(b4, b6);
            let c6 = _mm_unpacklo_epi32(b5, b7);
            let c7 = _mm_unpackhi_epi32(b5, b7);
            [
                _mm_unpacklo_epi64(c0, c4),
                _mm_unpackhi_epi64(c0, c4),
                _mm_unpacklo_epi64(c1, c5),
                _mm_unpackhi_epi64(c1, c5),
                _mm_unpacklo_epi64(c2, c6),
                _mm_unpackhi_epi64(c2, c6),
                _mm_unpacklo_epi64(c3, c7),
                _mm_unpackhi_epi64(c3, c7),
            ]
        }
    }

    /// Eight source rows from `b`, columns `a..a+8`, transposed.
    #[inline(always)]
    unsafe fn u16_block<R: Rows>(r: R, a: usize, b: usize) -> [__m128i; 8] {
        // SAFETY: inside the tile (the caller's contract).
        transpose8x16(std::array::from_fn(|k| unsafe {
            _mm_loadu_si128(r.src(b + k).add(a * 2) as *const __m128i)
        }))
    }

    /// 8 x 8 blocks of 2-byte elements; with `STREAM`, streaming stores (as
    /// [`f32_blocks`]).
    pub(super) unsafe fn u16_blocks<const STREAM: bool, R: Rows>(r: R) -> (usize, usize) {
        let (na, nb) = (r.na() / 8 * 8, r.nb() / 8 * 8);
        let src_major = r.src_major();
        let (no, so, ni, si) = if src_major {
            (nb, 8, na, 8)
        } else {
            (na, 8, nb, 8)
        };
        for o in (0..no).step_by(so) {
            for i in (0..ni).step_by(si) {
                let (a, b) = if src_major { (i, o) } else { (o, i) };
                // SAFETY: inside the tile.
                unsafe {
                    let t = u16_block(r, a, b);
                    for (k, v) in t.into_iter().enumerate() {
                        let p = r.dst(a + k).add(b * 2) as *mut __m128i;
                        if STREAM {
                            _mm_stream_si128(p, v);
                        } else {
                            _mm_storeu_si128(p, v);
                        }
                    }
                }
            }
        }
        (na, nb)
    }

    /// 8 x 32 blocks of 2-byte elements: four transposes, then each destination row's line
    /// streamed in four consecutive stores.
    pub(super) unsafe fn u16_lines<R: Rows>(r: R) -> (usize, usize) {
        let (na, nb) = (r.na() / 8 * 8, r.nb() / 32 * 32);
        let src_major = r.src_major();
        let (no, so, ni, si) = if src_major {
            (nb, 32, na, 8)
        } else {
            (na, 8, nb, 32)
        };
        for o in (0..no).step_by(so) {
            for i in (0..ni).step_by(si) {
                let (a, b) = if src_major { (i, o) } else { (o, i) };
                // SAFETY: inside the tile; aligned destination lines.
                unsafe {
                    let q: [[__m128i; 8]; 4] = std::array::from_fn(|j| u16_block(r, a, b + 8 * j));
                    for k in 0..8 {
                        let p = r.dst(a + k).add(b * 2) as *mut __m128i;
                        for (j, block) in q.iter().enumerate() {
                            _mm_stream_si128(p.add(j), block[k]);
                        }
                    }
                }
            }
        }
        (na, nb)
    }

    /// Sixteen source rows from `b`, columns `a..a+16` of bytes, transposed: vector `c` of
    /// the result is source column `a + c` across the sixteen rows.
    #[inline(always)]
    unsafe fn u8_block<R: Rows>(rows: R, a: usize, b: usize) -> [__m128i; 16] {
        // Four unpack stages, each doubling the rows that a lane group spans and halving the
        // columns a vector holds. SSE2 is part of x86-64.
        // SAFETY: inside the tile (the caller's contract).
        let r: [__m128i; 16] = std::array::from_fn(|k| unsafe {
            _mm_loadu_si128(rows.src(b + k).add(a) as *const __m128i)
        });
        // s1[g][h]: rows 2g, 2g+1 interleaved, columns 8h..8h+8.
        let s1: [[__m128i; 2]; 8] = std::array::from_fn(|g| unsafe {
            [
                _mm_unpacklo_epi8(r[2 * g], r[2 * g + 1]),
                _mm_unpackhi_epi8(r[2 * g], r[2 * g + 1]),
            ]
        });
        // s2[g][c]: rows 4g..4g+4, columns 4c..4c+4.
        let s2: [[__m128i; 4]; 4] = std::array::from_fn(|g| {
            std::array::from_fn(|c| unsafe {
                let (x, y) = (s1[2 * g][c / 2], s1[2 * g + 1][c / 2]);
                if c % 2 == 0 {
                    _mm_unpacklo_epi16(x, y)
                } else {
                    _mm_unpackhi_epi16(x, y)
                }
            })
        });
        // s3[g][c]: rows 8g..8g+8, columns 2c, 2c+1.
        let s3: [[__m128i; 8]; 2] = std::array::from_fn(|g| {
            std::array::from_fn(|c| unsafe {
                let (x, y) = (s2[2 * g][c / 2], s2[2 * g + 1][c / 2]);
                if c % 2 == 0 {
                    _mm_unpacklo_epi32(x, y)
                } else {
                    _mm_unpackhi_epi32(x, y)
                }
            })
        });
        // Column c: all sixteen rows.
        std::array::from_fn(|c| unsafe {
            let (x, y) = (s3[0][c / 2], s3[1][c / 2]);
            if c % 2 == 0 {
                _mm_unpacklo_epi64(x, y)
            } else {
                _mm_unpackhi_epi64(x, y)
            }
        })
    }

    /// 16 x 16 blocks of bytes, plain stores.
    pub(super) unsafe fn u8_blocks<R: Rows>(r: R) -> (usize, usize) {
        let (na, nb) = (r.na() / 16 * 16, r.nb() / 16 * 16);
        let src_major = r.src_major();
        let (no, so, ni, si) = if src_major {
            (nb, 16, na, 16)
        } else {
            (na, 16, nb, 16)
        };
        for o in (0..no).step_by(so) {
            for i in (0..ni).step_by(si) {
                let (a, b) = if src_major { (i, o) } else { (o, i) };
                // SAFETY: inside the tile.
                unsafe {
                    let t = u8_block(r, a, b);
                    for (k, v) in t.into_iter().enumerate() {
                        _mm_storeu_si128(r.dst(a + k).add(b) as *mut __m128i, v);
                    }
                }
            }
        }
        (na, nb)
    }

    /// 16 x 64 blocks of bytes: four transposes, each destination line streamed.
    pub(super) unsafe fn u8_lines<R: Rows>(r: R) -> (usize, usize) {
        let (na, nb) = (r.na() / 16 * 16, r.nb() / 64 * 64);
        let src_major = r.src_major();
        let (no, so, ni, si) = if src_major {
            (nb, 64, na, 16)
        } else {
            (na, 16, nb, 64)
        };
        for o in (0..no).step_by(so) {
            for i in (0..ni).step_by(si) {
                let (a, b) = if src_major { (i, o) } else { (o, i) };
                // SAFETY: inside the tile; aligned destination lines.
                unsafe {
                    let q: [[__m128i; 16]; 4] = std::array::from_fn(|j| u8_block(r, a, b + 16 * j));
                    for k in 0..16 {
                        let p = r.dst(a + k).add(b) as *mut __m128i;
                        for (j, block) in q.iter().enumerate() {
                            _mm_stream_si128(p.add(j), block[k]);
                        }
                    }
                }
            }
        }
        (na, nb)
    }

    /// Units of `N` bytes (8 to 64) moved along each destination row; with `lines`, whole
    /// aligned 64-byte pieces of the row are streamed.
    pub(super) unsafe fn units<const N: usize, R: Rows>(r: R, lines: bool) {
        let nb = r.nb();
        let per_line = 64 / N;
        for a in 0..r.na() {
            let d = r.dst(a);
            let mut b = 0;
            if lines {
                while b + per_line <= nb {
                    // SAFETY: units b..b+per_line of row a are inside the tile, and the row
                    // start is 64-byte aligned with b a multiple of per_line.
                    unsafe {
                        let p = d.add(b * N) as *mut __m128i;
                        for piece in 0..4 {
                            let bytes = piece * 16;
                            let (u, off) = (b + bytes / N, bytes % N);
                            let v = if N == 8 {
                                _mm_set_epi64x(
                                    (r.src(u + 1).add(a * N) as *const i64).read_unaligned(),
                                    (r.src(u).add(a * N) as *const i64).read_unaligned(),
                                )
                            } else {
                                _mm_loadu_si128(r.src(u).add(a * N + off) as *const __m128i)
                            };
                            _mm_stream_si128(p.add(piece), v);
                        }
                    }
                    b += per_line;
                }
            }
            for bb in b..nb {
                // SAFETY: inside the tile.
                unsafe { std::ptr::copy_nonoverlapping(r.src(bb).add(a * N), d.add(bb * N), N) };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kernel (and the edge strips around it) equals the portable loop, on tile shapes
    /// around each block size, with and without streaming, aligned and not.
    fn check<const N: usize>() {
        for (na, nb) in [
            (1, 1),
            (8, 8),
            (9, 17),
            (16, 16),
            (17, 65),
            (32, 64),
            (33, 130),
            (8, 32),
        ] {
            for stream in [false, true] {
                for skew in [0usize, N] {
                    let s_row = na * N + 24;
                    let src: Vec<u8> = (0..nb * s_row).map(|i| (i * 7 % 251) as u8).collect();
                    let d_row = (nb * N).div_ceil(64) * 64 + 64;
                    let mut got = super::super::AlignedBuf::zeroed(na * d_row + 64);
                    let mut want = vec![0u8; got.len()];
                    let srows: Vec<*const u8> =
                        (0..nb).map(|b| src[b * s_row..].as_ptr()).collect();
                    let base = got.as_mut_ptr();
                    // SAFETY: rows lie inside the buffers (d_row >= nb * N + skew).
                    let drows: Vec<*mut u8> = (0..na)
                        .map(|a| unsafe { base.add(a * d_row + skew) })
                        .collect();
                    // SAFETY: every row holds the tile's elements.
                    unsafe {
                        transpose_rows::<N, _>(
                            Table {
                                src: &srows,
                                dst: &drows,
                            },
                            stream,
                        )
                    };
                    store_fence();
                    for a in 0..na {
                        for b in 0..nb {
                            let (d, s) = (a * d_row + skew + b * N, b * s_row + a * N);
                            want[d..d + N].copy_from_slice(&src[s..s + N]);
                        }
                    }
                    assert_eq!(
                        &got[..],
                        &want[..],
                        "N={N} {na}x{nb} stream {stream} skew {skew}"
                    );
                }
            }
        }
    }

    #[test]
    fn kernels_equal_the_portable_loop() {
        check::<1>();
        check::<2>();
        check::<4>();
        check::<8>();
        check::<16>();
        check::<32>();
        check::<12>();
    }
}
