//! The register-blocked tile: `P` output pixels by `B` vectors of output channels, all
//! accumulators in registers for the whole reduction over taps and input channels. Per input
//! channel it loads `B` weight vectors, broadcasts `P` input values and issues `P * B` FMAs, so
//! the loads stay well under the FMA count (the kernel is bound by the FMA units, not by L1).
//!
//! The body is written once, generic over a [`Simd`] vector type; each instruction set gets an
//! entry compiled with its `#[target_feature]`, into which the generic body is inlined.

/// The vector operations the tile needs (all `unsafe`: pointers must be valid for `LANES`
/// floats, and the instruction set must be present, which the caller checks at run time).
pub(crate) trait Simd: Copy {
    const LANES: usize;
    /// Whether a run of exactly `LANES` channels (one block of `NCHW<lanes>c`) is stepped in
    /// a loop of constant length, which the compiler unrolls. Measured on VGG-16 at batch 1
    /// on a Zen 5 (`bench/results/conv-cpu.md`): AVX2 1.006-1.023x, AVX-512 (16 steps)
    /// 0.973-0.993x.
    const UNROLL_BLOCK_RUNS: bool;
    unsafe fn zero() -> Self;
    unsafe fn load(p: *const f32) -> Self;
    unsafe fn splat(v: f32) -> Self;
    /// `a * b + c`.
    unsafe fn fma(a: Self, b: Self, c: Self) -> Self;
    /// `max(0, a)` keeping NaN, as the reference does (`a < 0 ? 0 : a`).
    unsafe fn relu(a: Self) -> Self;
    unsafe fn store(p: *mut f32, v: Self);
    /// The first `n` lanes (`0 < n < LANES`) from `p` (only those are read), the others 0.
    unsafe fn load_first(p: *const f32, n: usize) -> Self;
    /// Writes the first `n` lanes (`0 < n < LANES`) of `v` to `p` (only those are written).
    unsafe fn store_first(p: *mut f32, v: Self, n: usize);
    /// `v` with the lanes from `n` on (`0 < n < LANES`) set to 0.
    unsafe fn keep_first(v: Self, n: usize) -> Self;
}

/// A run of input channels whose addresses step by one stride (`Shape::sc`): in `NCHW<x>c`,
/// the channels of one block; in NHWC or NCHW, all of them.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Run {
    /// Offset of the run's first channel from the pixel's address, in floats.
    pub x_off: usize,
    /// Its channel index within the reduction chunk (the row within a tap of the chunk's
    /// panel).
    pub chan: usize,
    pub count: usize,
}

/// What all tiles of one work item share.
#[derive(Clone, Copy)]
pub(crate) struct Shape<'a> {
    /// Per filter tap: offset of the tap's input pixel from the output pixel's base, and the
    /// offset of the tap's rows in the chunk's filter panel (floats).
    pub taps: &'a [(usize, usize)],
    /// The channel runs of this reduction chunk.
    pub runs: &'a [Run],
    /// Stride between the channels of a run.
    pub sc: usize,
    /// Input stride between neighbouring output pixels (the tile's `PSX` when not 0).
    pub psx: usize,
    /// Output stride between neighbouring pixels, and between the tile's channel vectors.
    pub psy: usize,
    pub yb: usize,
    /// For tiles over two output rows (`PX < P`): the input and output offsets of the second
    /// row's first pixel from the first row's (0 for tiles of one row).
    pub xrow: usize,
    pub yrow: usize,
    /// Floats per filter panel row (`B_MAX * LANES`).
    pub row: usize,
    /// `B * LANES` bias values for the tile's channels (used when `first`).
    pub bias: *const f32,
    /// First chunk of the reduction: start from the bias; else from the partial sums in `y`.
    pub first: bool,
    /// Last chunk with a fused ReLU.
    pub relu: bool,
    /// Real lanes of the tile's last vector when it runs past the output channels (`0 < tail
    /// < LANES`), else 0: it stores those lanes only ([`Simd::store_first`]) and reads its
    /// partial sums the same way, or, where `tail_pad` (its other lanes are the padding slots
    /// of a channel block), stores the whole vector with those lanes set to 0.
    pub tail: usize,
    pub tail_pad: bool,
}

/// One tile: input at the first output pixel's base, the reduction chunk's filter panel,
/// output at the first pixel. `PSX` is the input stride between pixels when it is known at
/// compile time (the broadcasts then address with constant displacements and need no index
/// arithmetic), 0 to read it from the shape. The tile's `P` pixels are rows of `PX`: pixel `p`
/// is column `p % PX` of row `p / PX`, rows `s.xrow` (input) and `s.yrow` (output) apart
/// (`PX = P`: one row).
///
/// # Safety
/// Every address the shape implies from `x`, `w` and `y` must be in bounds (the caller's
/// geometry guarantees it; for the last vector of a tile with `s.tail` set and not
/// `s.tail_pad`, its first `s.tail` lanes), `PSX` must be 0 or `s.psx`, `PX` must divide
/// `P`, and `S`'s instruction set must be present.
#[inline(always)]
pub(crate) unsafe fn tile<
    S: Simd,
    const P: usize,
    const B: usize,
    const PSX: usize,
    const PX: usize,
>(
    x: *const f32,
    w: *const f32,
    y: *mut f32,
    s: &Shape<'_>,
) {
    let psx = if PSX == 0 { s.psx } else { PSX };
    // Input and output offsets of pixel `p` (constant-folded for one row).
    let px_off = |p: usize| (p % PX) * psx + (p / PX) * s.xrow;
    let yo = |p: usize| (p % PX) * s.psy + (p / PX) * s.yrow;
    let mut acc = [[S::zero(); B]; P];
    if s.first {
        let mut bv = [S::zero(); B];
        for (b, v) in bv.iter_mut().enumerate() {
            *v = S::load(s.bias.add(b * S::LANES));
        }
        for a in acc.iter_mut() {
            *a = bv;
        }
    } else {
        let masked = s.tail != 0 && !s.tail_pad;
        for (p, a) in acc.iter_mut().enumerate() {
            for (b, v) in a.iter_mut().enumerate() {
                let at = y.add(yo(p) + b * s.yb);
                *v = if masked && b + 1 == B {
                    S::load_first(at, s.tail)
                } else {
                    S::load(at)
                };
            }
        }
    }
    // One input channel: B weight vectors, P broadcasts, P x B multiply-adds (a macro, not a
    // closure: closures do not take the caller's target features, and the vector
    // operations would not inline into them).
    macro_rules! step {
        ($xp:expr, $wp:expr) => {{
            let mut wv = [S::zero(); B];
            for (b, v) in wv.iter_mut().enumerate() {
                *v = S::load($wp.add(b * S::LANES));
            }
            for (p, a) in acc.iter_mut().enumerate() {
                let xv = S::splat(*$xp.add(px_off(p)));
                for b in 0..B {
                    a[b] = S::fma(xv, wv[b], a[b]);
                }
            }
        }};
    }
    for &(xo, wo) in s.taps {
        for run in s.runs {
            let mut xp = x.add(xo + run.x_off);
            let mut wp = w.add(wo + run.chan * s.row);
            if S::UNROLL_BLOCK_RUNS && run.count == S::LANES {
                // A channel block of NCHW<lanes>c: a loop of known length (unrolled).
                for _ in 0..S::LANES {
                    step!(xp, wp);
                    xp = xp.add(s.sc);
                    wp = wp.add(s.row);
                }
                continue;
            }
            for _ in 0..run.count {
                step!(xp, wp);
                xp = xp.add(s.sc);
                wp = wp.add(s.row);
            }
        }
    }
    for (p, a) in acc.iter().enumerate() {
        for (b, &v) in a.iter().enumerate() {
            let v = if s.relu { S::relu(v) } else { v };
            let at = y.add(yo(p) + b * s.yb);
            if s.tail != 0 && b + 1 == B {
                if s.tail_pad {
                    S::store(at, S::keep_first(v, s.tail));
                } else {
                    S::store_first(at, v, s.tail);
                }
            } else {
                S::store(at, v);
            }
        }
    }
}

/// A tile entry for one instruction set and tile size.
pub(crate) type TileFn = unsafe fn(*const f32, *const f32, *mut f32, &Shape<'_>);

/// An instruction set's tables: `[S][i][B - 1]`, `i` the tile (`P - 1` for one-row tiles,
/// `PX - 1` for two-row ones), `B` in 1..=2, and `S` the pixel stride: 0 read from the shape, 1
/// one vector (`NCHW<lanes>c` at stride 1), 2 two vectors (stride 2).
pub(crate) type TileTables<const N: usize> = [[[TileFn; 2]; N]; 3];

/// The tables of an instruction set's entry `$entry::<P, PX, B, PSX>` for `$lanes` lanes:
/// `[S][i][B - 1]` for the listed `(P PX)` pairs (`i` their index), `B` in 1..=2, and `S` the
/// pixel stride: 0 read from the shape, 1 one vector (`NCHW<lanes>c` at stride 1), 2 two
/// vectors (stride 2). One-row tables list `(P P)` for `P` in `1..`, two-row tables
/// `(2PX PX)` (x86-64 only so far: NEON has no tile tables).
#[cfg(target_arch = "x86_64")]
macro_rules! tile_tables {
    ($entry:ident, $lanes:literal, $(($p:literal $px:literal))*) => {
        [
            [$([$entry::<$p, $px, 1, 0> as crate::conv_blocked::microkernel::TileFn,
                $entry::<$p, $px, 2, 0> as crate::conv_blocked::microkernel::TileFn]),*],
            [$([$entry::<$p, $px, 1, $lanes> as crate::conv_blocked::microkernel::TileFn,
                $entry::<$p, $px, 2, $lanes> as crate::conv_blocked::microkernel::TileFn]),*],
            [$([$entry::<$p, $px, 1, { 2 * $lanes }> as crate::conv_blocked::microkernel::TileFn,
                $entry::<$p, $px, 2, { 2 * $lanes }> as crate::conv_blocked::microkernel::TileFn]),*],
        ]
    };
}
// The x86 builds use the table macro from their own module.
#[cfg(target_arch = "x86_64")]
pub(crate) use tile_tables;

/// Eight lanes in plain Rust: the build every target has (compilers vectorise the fixed-size
/// lane loops: SSE2 on x86-64, NEON on aarch64).
#[derive(Clone, Copy)]
pub(crate) struct Portable([f32; 8]);

impl Simd for Portable {
    const LANES: usize = 8;
    const UNROLL_BLOCK_RUNS: bool = false;
    #[inline(always)]
    unsafe fn zero() -> Self {
        Portable([0.0; 8])
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> Self {
        // SAFETY: the caller guarantees 8 readable floats at `p`.
        Portable(unsafe { std::ptr::read_unaligned(p as *const [f32; 8]) })
    }
    #[inline(always)]
    unsafe fn splat(v: f32) -> Self {
        Portable([v; 8])
    }
    #[inline(always)]
    unsafe fn fma(a: Self, b: Self, c: Self) -> Self {
        // Separate multiply and add: `mul_add` is a library call where FMA is not guaranteed.
        let mut r = c.0;
        for ((r, a), b) in r.iter_mut().zip(a.0).zip(b.0) {
            *r += a * b;
        }
        Portable(r)
    }
    #[inline(always)]
    unsafe fn relu(a: Self) -> Self {
        Portable(a.0.map(|v| if v < 0.0 { 0.0 } else { v }))
    }
    #[inline(always)]
    unsafe fn store(p: *mut f32, v: Self) {
        // SAFETY: the caller guarantees 8 writable floats at `p`.
        unsafe { std::ptr::write_unaligned(p as *mut [f32; 8], v.0) }
    }
    #[inline(always)]
    unsafe fn load_first(p: *const f32, n: usize) -> Self {
        let mut v = [0.0; 8];
        for (l, v) in v.iter_mut().enumerate().take(n) {
            // SAFETY: the caller guarantees `n` readable floats at `p`.
            *v = unsafe { p.add(l).read_unaligned() };
        }
        Portable(v)
    }
    #[inline(always)]
    unsafe fn store_first(p: *mut f32, v: Self, n: usize) {
        for (l, &v) in v.0.iter().enumerate().take(n) {
            // SAFETY: the caller guarantees `n` writable floats at `p`.
            unsafe { p.add(l).write_unaligned(v) };
        }
    }
    #[inline(always)]
    unsafe fn keep_first(v: Self, n: usize) -> Self {
        let mut v = v.0;
        v[n..].fill(0.0);
        Portable(v)
    }
}

/// The portable entry (the stride always read from the shape: with a constant one, the
/// compiler's vectoriser may turn the plain-array lanes into gathers across pixels).
///
/// # Safety
/// As [`tile`].
pub(crate) unsafe fn tile_portable<const P: usize, const B: usize>(
    x: *const f32,
    w: *const f32,
    y: *mut f32,
    s: &Shape<'_>,
) {
    // SAFETY: forwarded contract.
    unsafe { tile::<Portable, P, B, 0, P>(x, w, y, s) }
}

/// Portable tiles: up to 4 pixels by 2 vectors of 8 channels, the stride read from the shape.
const PORTABLE_TILES: [[TileFn; 2]; 4] = [
    [tile_portable::<1, 1>, tile_portable::<1, 2>],
    [tile_portable::<2, 1>, tile_portable::<2, 2>],
    [tile_portable::<3, 1>, tile_portable::<3, 2>],
    [tile_portable::<4, 1>, tile_portable::<4, 2>],
];

/// The portable tables (the same tiles for every stride).
pub(crate) static PORTABLE: TileTables<4> = [PORTABLE_TILES; 3];
