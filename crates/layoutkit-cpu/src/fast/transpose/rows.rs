//! The tiles' rows ([`Rows`]: where each source and destination row starts) and the views
//! the kernels take of them: plain matrices, tables of row pointers, compound destination
//! rows, and the wrappers for strips, fill rows and the next band's lines.

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
    /// Whether the first two source rows are under a page apart (pixels, image rows; NCHW's
    /// channel rows are farther): such rows are read differently (shorter prefetches, and
    /// the staged 8-bit casts read a whole stage before converting it).
    fn src_rows_close(&self) -> bool {
        self.nb() >= 2 && self.src(1).addr().abs_diff(self.src(0).addr()) < 4096
    }
    /// Whether the destination rows of `N`-byte elements follow each other without gaps
    /// from a 64-byte boundary (a block of whole short rows is whole lines).
    fn dst_packed(&self, _n: usize) -> bool {
        false
    }
    /// Source lines later tiles read, which this tile asks for spread over its blocks: the
    /// first line's address and how many follow (see [`Ahead`]; none by default).
    fn ahead(&self) -> (*const u8, usize) {
        (std::ptr::null(), 0)
    }
    /// Whether the kernels ask for the source ahead of their loads: the thread's setting
    /// ([`super::set_prefetches`]), which [`Prefetching`] fixes at compile time.
    fn prefetched(&self) -> bool {
        super::prefetches()
    }
    /// Source rows `b, b + 1, ...`, one per call (`src` of each by default; rows a fixed
    /// distance apart step one pointer, see [`Step`]).
    #[inline(always)]
    fn src_walk(&self, b: usize) -> impl FnMut() -> *const u8 {
        let (rows, mut k) = (*self, b);
        move || {
            k += 1;
            rows.src(k - 1)
        }
    }
    /// Destination rows `a, a + 1, ...`, one per call (as [`Rows::src_walk`]).
    #[inline(always)]
    fn dst_walk(&self, a: usize) -> impl FnMut() -> *mut u8 {
        let (rows, mut k) = (*self, a);
        move || {
            k += 1;
            rows.dst(k - 1)
        }
    }
}

/// Pointers `step` bytes apart from a first, one add each. An empty `asm!` hides each
/// pointer from the optimiser, which would otherwise fold the additions of an unrolled block
/// back into `first + k * step`: an `imul` per row, on the port that also runs half of the
/// 256-bit shuffles on Intel cores from Ice Lake on (the byte transpose's 16 x 32 block
/// computed 48 row addresses with `imul` beside its 64 shuffles). Used by the byte, 2-byte
/// and 8-byte block kernels; the float kernels' 8 x 8 blocks keep `src(b + k)` (stepped,
/// f32 NCHW -> NCHW32c under 1 MiB ran 0.90x).
#[derive(Clone, Copy)]
pub(crate) struct Step {
    next: *mut u8,
    step: usize,
}

impl Step {
    #[inline(always)]
    pub(crate) fn new(first: *mut u8, step: usize) -> Step {
        Step { next: first, step }
    }

    /// The next pointer.
    #[inline(always)]
    pub(crate) fn take(&mut self) -> *mut u8 {
        let p = self.next;
        let q = p.wrapping_add(self.step);
        // The address alone goes through the `asm!` (the pointer keeps its provenance).
        #[allow(unused_mut)]
        let mut addr = q.addr();
        #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
        // SAFETY: an empty instruction sequence that leaves the register as it is.
        unsafe {
            std::arch::asm!("/* {0} */", inout(reg) addr, options(pure, nomem, nostack, preserves_flags))
        };
        self.next = q.with_addr(addr);
        p
    }
}

/// The [`Rows`] methods a wrapper of rows (field `rows`) passes through unchanged: all but
/// `src` and `ahead`, which each wrapper writes (and, with `@except_prefetched`, but
/// `prefetched`); `@src` passes `src` (and its walk) through too.
macro_rules! forward_rows {
    () => {
        forward_rows!(@except_prefetched);
        fn prefetched(&self) -> bool {
            self.rows.prefetched()
        }
    };
    (@src) => {
        #[inline(always)]
        fn src(&self, b: usize) -> *const u8 {
            self.rows.src(b)
        }
        #[inline(always)]
        fn src_walk(&self, b: usize) -> impl FnMut() -> *const u8 {
            self.rows.src_walk(b)
        }
    };
    (@except_prefetched) => {
        fn na(&self) -> usize {
            self.rows.na()
        }
        fn nb(&self) -> usize {
            self.rows.nb()
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
        #[inline(always)]
        fn dst_walk(&self, a: usize) -> impl FnMut() -> *mut u8 {
            self.rows.dst_walk(a)
        }
    };
}

/// `rows` whose [`Rows::prefetched`] is `ON`, known to the compiler: the block kernels are
/// compiled for each, and have no test before each row's prefetch. (The test per row, 32
/// per block of the byte transpose, cost its tiles 15-25% in cache: i8 NCHW -> NCHW32c, one
/// thread, 32 x 32 to 56 x 56 planes, 49-53% of the copy, 55-64% with the prefetch taken out
/// of the block, 62-65% with this and [`Step`]'s row pointers together, as with the
/// prefetch taken out.)
#[derive(Clone, Copy)]
pub(crate) struct Prefetching<R: Rows, const ON: bool> {
    pub rows: R,
}

impl<R: Rows, const ON: bool> Rows for Prefetching<R, ON> {
    forward_rows!(@except_prefetched);
    forward_rows!(@src);
    fn ahead(&self) -> (*const u8, usize) {
        self.rows.ahead()
    }
    fn prefetched(&self) -> bool {
        ON
    }
}

/// `rows` with `lines` source lines from `next` to ask for while the tile runs (the share of
/// the next band of source rows that falls to this tile; see `x86::Prefetch`).
#[derive(Clone, Copy)]
pub(crate) struct Ahead<R: Rows> {
    pub rows: R,
    pub next: *const u8,
    pub lines: usize,
}

impl<R: Rows> Rows for Ahead<R> {
    forward_rows!();
    forward_rows!(@src);
    fn ahead(&self) -> (*const u8, usize) {
        (self.next, self.lines)
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
    forward_rows!();
    #[inline(always)]
    fn src(&self, b: usize) -> *const u8 {
        if b < self.data_rows {
            self.rows.src(b)
        } else {
            self.fill
        }
    }
    fn ahead(&self) -> (*const u8, usize) {
        self.rows.ahead()
    }
}

/// Rows `a0..a0 + na` and columns `b0..` of `rows` (`N`-byte elements) as a tile of their
/// own: what a wide kernel leaves, for a narrower one (a 16 x 16 kernel on 28 columns leaves a
/// strip of 12; a 16-row kernel on 24 destination rows leaves 8).
#[derive(Clone, Copy)]
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(crate) struct Window<R: Rows, const N: usize> {
    pub rows: R,
    pub a0: usize,
    pub b0: usize,
    pub na: usize,
}

impl<R: Rows, const N: usize> Rows for Window<R, N> {
    fn na(&self) -> usize {
        self.na
    }
    fn nb(&self) -> usize {
        self.rows.nb() - self.b0
    }
    #[inline(always)]
    fn src(&self, b: usize) -> *const u8 {
        self.rows.src(self.b0 + b).wrapping_add(self.a0 * N)
    }
    #[inline(always)]
    fn dst(&self, a: usize) -> *mut u8 {
        self.rows.dst(self.a0 + a).wrapping_add(self.b0 * N)
    }
    #[inline(always)]
    fn src_walk(&self, b: usize) -> impl FnMut() -> *const u8 {
        let (mut rows, offset) = (self.rows.src_walk(self.b0 + b), self.a0 * N);
        move || rows().wrapping_add(offset)
    }
    #[inline(always)]
    fn dst_walk(&self, a: usize) -> impl FnMut() -> *mut u8 {
        let (mut rows, offset) = (self.rows.dst_walk(self.a0 + a), self.b0 * N);
        move || rows().wrapping_add(offset)
    }
    fn dst_lines(&self) -> bool {
        false
    }
    fn src_major(&self) -> bool {
        self.rows.src_major()
    }
    fn prefetched(&self) -> bool {
        self.rows.prefetched()
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
    #[inline(always)]
    fn src_walk(&self, b: usize) -> impl FnMut() -> *const u8 {
        let mut step = Step::new(self.src(b).cast_mut(), self.src_row);
        move || step.take().cast_const()
    }
    #[inline(always)]
    fn dst_walk(&self, a: usize) -> impl FnMut() -> *mut u8 {
        let mut step = Step::new(self.dst(a), self.dst_row);
        move || step.take()
    }
    fn dst_lines(&self) -> bool {
        (self.dst as usize).is_multiple_of(64) && (self.dst_row.is_multiple_of(64) || self.na <= 1)
    }
    fn dst_packed(&self, n: usize) -> bool {
        (self.dst as usize).is_multiple_of(64) && self.dst_row == self.nb * n
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
    /// Whether every offset in `dst_rows` is a multiple of 64 (known to the caller, which
    /// checks it once per table rather than once per tile).
    pub rows_on_lines: bool,
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
    #[inline(always)]
    fn src_walk(&self, b: usize) -> impl FnMut() -> *const u8 {
        let mut step = Step::new(self.src(b).cast_mut(), self.src_row);
        move || step.take().cast_const()
    }
    fn dst_lines(&self) -> bool {
        (self.dst as usize).is_multiple_of(64) && self.rows_on_lines
    }
    fn src_major(&self) -> bool {
        true
    }
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
        self.dst.iter().all(|p| (*p as usize).is_multiple_of(64))
    }
}

/// `rows` whose source rows are read from a stage instead: row `b` at `stage + b * run`
/// (the tile's source rows, already cast, in cache; see `fast::half_tiles`). The next
/// band's lines are still `rows`' own.
#[derive(Clone, Copy)]
pub(crate) struct Staged<R: Rows> {
    pub rows: R,
    pub stage: *const u8,
    pub run: usize,
}

impl<R: Rows> Rows for Staged<R> {
    forward_rows!();
    #[inline(always)]
    fn src(&self, b: usize) -> *const u8 {
        self.stage.wrapping_add(b * self.run)
    }
    fn ahead(&self) -> (*const u8, usize) {
        self.rows.ahead()
    }
}
