//! 1x1 convolutions at stride 1 without padding, activations and output in NCHW: per image a
//! matrix product (output channels by pixels) vectorised along each plane's pixels. It wastes no
//! lanes whatever O is (the channel-vector tiles compute O = 24 as 32 on 16 lanes) and reads and
//! writes NCHW in place (the channel-vector tiles store into an `NCHW<lanes>c` buffer that a
//! conversion then turns into NCHW).
//!
//! A tile keeps `R` output channels by `V` vectors of pixels in registers over a chunk of input
//! channels: per input channel it loads `V` pixel vectors of that channel's plane, broadcasts `R`
//! weights (from the filter panels the channel-vector tiles use: for a 1x1 filter, panel row `k`
//! holds input channel `k`'s weights for the pair's `2 * lanes` outputs) and issues `R * V`
//! multiply-adds. The pixels of an item are one block of `V_MAX` vectors; the input channels
//! come in chunks whose block of input fits half of L1, and every tile of the block runs the
//! chunk, so the input is read from L1 by all output channels (the partial sums wait in the
//! output between chunks).

use layoutkit_core::conv::Conv2d;
use layoutkit_core::ShapedLayout;

use super::microkernel::Simd;
use super::packing::cache_sizes;
use super::runtime::f32s;
use super::schedule::for_items;
use super::{BlockedFilter, ConvKernels, Shared};
use crate::conv_fast::channel_block;
use crate::spin_pool::SpinPool;
use crate::{Epilogue, Error};

/// What a tile needs besides its pointers.
pub(super) struct PwShape {
    /// Floats between input planes (one per input channel), and between output planes.
    pub x_plane: usize,
    pub y_plane: usize,
    /// Floats between the panel rows of consecutive input channels.
    pub row: usize,
    /// Input channels of this chunk.
    pub k: usize,
    /// Output channels the tile stores (the first `rows` of its `R`).
    pub rows: usize,
    /// Real lanes of the last pixel vector (`0 < tail < LANES`) when the block ends inside
    /// one (only for `TAIL` tiles).
    pub tail: usize,
    /// First chunk (start from the bias) and last chunk (apply the ReLU).
    pub first: bool,
    pub relu: bool,
}

/// A tile entry: input at the block's first pixel of the chunk's first channel, the weights
/// of the tile's first output channel in the chunk's first panel row, the output at the tile's
/// first channel's plane and the block's first pixel, `R` bias values.
pub(super) type PwFn = unsafe fn(*const f32, *const f32, *mut f32, *const f32, &PwShape);

/// One tile of `R` output channels by `V` vectors of pixels (the last with `s.tail` real
/// lanes where `TAIL`).
///
/// # Safety
/// The `s.k` planes of input, `s.k` panel rows of `R` weights, `R` bias values and the
/// `s.rows` output planes must hold the tile's pixels (the last vector's first `s.tail` where
/// `TAIL`), and `S`'s instruction set must be present.
#[inline(always)]
pub(super) unsafe fn tile<S: Simd, const R: usize, const V: usize, const TAIL: bool>(
    x: *const f32,
    w: *const f32,
    y: *mut f32,
    bias: *const f32,
    s: &PwShape,
) {
    let load = |p: *const f32, v: usize| {
        if TAIL && v + 1 == V {
            S::load_first(p, s.tail)
        } else {
            S::load(p)
        }
    };
    let mut acc = [[S::zero(); V]; R];
    for (r, a) in acc.iter_mut().enumerate() {
        if s.first {
            *a = [S::splat(*bias.add(r)); V];
        } else if r < s.rows {
            for (v, a) in a.iter_mut().enumerate() {
                *a = load(y.add(r * s.y_plane + v * S::LANES), v);
            }
        }
    }
    for kk in 0..s.k {
        let xp = x.add(kk * s.x_plane);
        let mut xv = [S::zero(); V];
        for (v, x) in xv.iter_mut().enumerate() {
            *x = load(xp.add(v * S::LANES), v);
        }
        let wp = w.add(kk * s.row);
        for (r, a) in acc.iter_mut().enumerate() {
            let b = S::splat(*wp.add(r));
            for v in 0..V {
                a[v] = S::fma(xv[v], b, a[v]);
            }
        }
    }
    for (r, a) in acc.iter().enumerate().take(s.rows) {
        for (v, &a) in a.iter().enumerate() {
            let a = if s.relu { S::relu(a) } else { a };
            let at = y.add(r * s.y_plane + v * S::LANES);
            if TAIL && v + 1 == V {
                S::store_first(at, a, s.tail);
            } else {
                S::store(at, a);
            }
        }
    }
}

/// A build's tiles: `[V - 1][TAIL]` for `V` in `1..=V_MAX`, `R` outputs each.
pub(super) struct PwTiles {
    pub lanes: usize,
    pub r: usize,
    pub table: &'static [[PwFn; 2]],
}

/// The problem [`Pointwise::run`] computes: `y[n][o][p] = bias[o] + sum_k w[o][k] x[n][k][p]` (ReLU'd),
/// `p` over the `hw` pixels of a plane.
pub(super) struct Pointwise<'a> {
    pub x: Shared,
    pub y: Shared,
    pub n: usize,
    pub c: usize,
    pub o: usize,
    pub hw: usize,
    /// The 1x1 filter's panels (pairs of `2 * lanes` outputs, `c` rows each) and floats per
    /// panel row.
    pub panels: &'a [f32],
    pub row: usize,
    /// `o` rounded up to whole tiles of bias values (zeros past `o`).
    pub bias: &'a [f32],
    pub relu: bool,
}

impl Pointwise<'_> {
    /// Runs the product on `pool` (items: blocks of pixels of one image, split further into
    /// ranges of output tiles when there are fewer blocks than 8 per thread).
    ///
    /// # Safety
    /// `x` holds `n * c * hw` floats and `y` `n * o * hw` (NCHW), `panels` was packed for a
    /// 1x1 filter of `o` outputs and `c` inputs with rows of `row` floats, `bias` holds `o`
    /// rounded up to `tiles.r`, and `tiles` is a build this CPU has.
    pub(super) unsafe fn run(&self, tiles: &PwTiles, threads: usize, pool: Option<&SpinPool>) {
        let (lanes, r) = (tiles.lanes, tiles.r);
        let v_max = tiles.table.len();
        let block = v_max * lanes;
        let per_image = self.hw.div_ceil(block);
        let o_tiles = self.o.div_ceil(r);
        let target = if threads > 1 { 8 * threads } else { 1 };
        let ranges = target.div_ceil(self.n * per_image).clamp(1, o_tiles);
        let per_range = o_tiles.div_ceil(ranges);
        let ranges = o_tiles.div_ceil(per_range);
        // Input channels per chunk: the block's input within half of L1.
        let (l1, _) = cache_sizes();
        let kc_max = ((l1 / 2) / (block * 4)).max(8);
        let chunks = self.c.div_ceil(kc_max);
        let kc = self.c.div_ceil(chunks);
        let pair_outputs = self.row;
        let panel = self.c * self.row;
        let work = |item: usize| {
            let (bi, ri) = (item / ranges, item % ranges);
            let (ni, b0) = (bi / per_image, bi % per_image * block);
            let px = block.min(self.hw - b0);
            let (v, tail) = (px.div_ceil(lanes), px % lanes);
            let tile = tiles.table[v - 1][usize::from(tail != 0)];
            // SAFETY: the block's pixels lie in image `ni`'s planes (the caller's sizes).
            let x = unsafe { self.x.get().add(ni * self.c * self.hw + b0) };
            let y = unsafe { self.y.get().add(ni * self.o * self.hw + b0) };
            for k0 in (0..self.c).step_by(kc) {
                let k = kc.min(self.c - k0);
                for t in ri * per_range..((ri + 1) * per_range).min(o_tiles) {
                    let o0 = t * r;
                    let shape = PwShape {
                        x_plane: self.hw,
                        y_plane: self.hw,
                        row: self.row,
                        k,
                        rows: r.min(self.o - o0),
                        tail,
                        first: k0 == 0,
                        relu: self.relu && k0 + k == self.c,
                    };
                    // SAFETY: output tile `t`'s `r` channels lie in one pair's panel (`r`
                    // divides `2 * lanes`), whose rows `k0..k0 + k` hold their weights; the
                    // output planes `o0..o0 + rows` and input planes `k0..k0 + k` hold the
                    // block; items write disjoint (image, block, tile) regions.
                    unsafe {
                        let wp = self
                            .panels
                            .as_ptr()
                            .add(o0 / pair_outputs * panel + k0 * self.row + o0 % pair_outputs);
                        tile(
                            x.add(k0 * self.hw),
                            wp,
                            y.add(o0 * self.hw),
                            self.bias.as_ptr().add(o0),
                            &shape,
                        );
                    }
                }
            }
        };
        for_items(self.n * per_image * ranges, pool, work);
    }
}

/// Whether [`convolve`] takes the problem: a 1x1 filter at stride 1 without padding or
/// groups, activations and output in NCHW, and a filter within half of L2. Each block of
/// pixels reads the whole filter, which stays in L2 only if it fits there: on the Xeon of
/// `bench/results/conv-cpu.md`, 2048 -> 512 on 7 x 7 pixels (4 MB of weights, a block of 48
/// pixels and one of 1) ran 0.75x the channel-vector tiles with their conversions, where
/// filters of 25 KB - 1 MB ran 1.05-3.6x.
pub(super) fn applies(
    conv: &Conv2d,
    x: &ShapedLayout,
    y: &ShapedLayout,
    w: &BlockedFilter,
) -> bool {
    let e = w.oihw.extents();
    let (_, l2) = cache_sizes();
    // Empty tensors stay with the general path (no blocks, chunks or tiles to divide into).
    let empty = e[0] == 0 || e[1] == 0 || x.elements() == 0 || y.elements() == 0;
    !empty
        && e[0] * e[1] * 4 <= l2 / 2
        && (e[2], e[3]) == (1, 1)
        && conv.stride == [1, 1]
        && conv.padding == [0, 0]
        && conv.groups == 1
        && channel_block(x) == Some(1)
        && channel_block(y) == Some(1)
}

/// The convolution of `x` (NCHW, f32) by the 1x1 filter `w` into `out` (NCHW, f32, every
/// byte written), where [`applies`] holds and the caller has checked the operands.
pub(super) fn convolve(
    x: &[f32],
    w: &BlockedFilter,
    epilogue: &Epilogue<'_>,
    [n, o, oh, ow]: [usize; 4],
    out: &mut [u8],
    threads: usize,
    pool: Option<&SpinPool>,
) -> Result<(), Error> {
    let tiles = tiles_for(w.kernels);
    let c = w.oihw.extents()[1];
    let mut bias = vec![0f32; o.next_multiple_of(tiles.r)];
    if let Some(b) = epilogue.bias {
        for (d, &b) in bias.iter_mut().zip(b) {
            *d = b as f32;
        }
    }
    // SAFETY: every bit pattern is a valid f32.
    let (head, out32, tail) = unsafe { out.align_to_mut::<f32>() };
    if !head.is_empty() || !tail.is_empty() {
        return Err(Error::Unsupported(
            "the output buffer is not aligned to 4 bytes".into(),
        ));
    }
    let panels = f32s(&w.panels);
    let pw = Pointwise {
        x: Shared(x.as_ptr() as *mut f32),
        y: Shared(out32.as_mut_ptr()),
        n,
        c,
        o,
        hw: oh * ow,
        panels: &panels,
        row: 2 * tiles.lanes,
        bias: &bias,
        relu: epilogue.relu,
    };
    // SAFETY: the caller checked the buffers against NCHW layouts of these extents; the panels
    // were packed by `w.kernels`, whose lanes `tiles` has, for a 1x1 filter of `o` x `c`.
    unsafe { pw.run(tiles, threads, pool) };
    Ok(())
}

/// The tiles of a (resolved) build.
fn tiles_for(kernels: ConvKernels) -> &'static PwTiles {
    match kernels {
        #[cfg(target_arch = "x86_64")]
        ConvKernels::Avx512 => &AVX512,
        #[cfg(target_arch = "x86_64")]
        ConvKernels::Avx2 => &AVX2,
        _ => &PORTABLE,
    }
}

/// The portable entry.
///
/// # Safety
/// As [`tile`].
unsafe fn tile_portable<const V: usize, const TAIL: bool>(
    x: *const f32,
    w: *const f32,
    y: *mut f32,
    bias: *const f32,
    s: &PwShape,
) {
    // SAFETY: forwarded contract.
    unsafe { tile::<super::Portable, 4, V, TAIL>(x, w, y, bias, s) }
}

/// Portable tiles: 4 outputs by up to 2 vectors of 8 pixels.
pub(super) static PORTABLE: PwTiles = PwTiles {
    lanes: 8,
    r: 4,
    table: &[
        [tile_portable::<1, false>, tile_portable::<1, true>],
        [tile_portable::<2, false>, tile_portable::<2, true>],
    ],
};

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{tile, PwShape, PwTiles};
    use crate::conv_blocked::{Avx2, Avx512};

    /// AVX2 + FMA: 4 outputs by up to 2 vectors of 8 pixels (8 of the 16 ymm registers; with
    /// 3 vectors, 12 accumulators, 3 pixel vectors and a broadcast fill all 16, and the tile ran
    /// 0.85-0.93x on the Xeon of `bench/results/conv-cpu.md`).
    ///
    /// # Safety
    /// As [`tile`]; the CPU must have AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    unsafe fn tile_avx2<const V: usize, const TAIL: bool>(
        x: *const f32,
        w: *const f32,
        y: *mut f32,
        bias: *const f32,
        s: &PwShape,
    ) {
        tile::<Avx2, 4, V, TAIL>(x, w, y, bias, s)
    }

    /// AVX-512F: 8 outputs by up to 3 vectors of 16 pixels (24 of the 32 zmm registers).
    ///
    /// # Safety
    /// As [`tile`]; the CPU must have AVX-512F.
    #[target_feature(enable = "avx512f")]
    unsafe fn tile_avx512<const V: usize, const TAIL: bool>(
        x: *const f32,
        w: *const f32,
        y: *mut f32,
        bias: *const f32,
        s: &PwShape,
    ) {
        tile::<Avx512, 8, V, TAIL>(x, w, y, bias, s)
    }

    pub(in crate::conv_blocked) static AVX2: PwTiles = PwTiles {
        lanes: 8,
        r: 4,
        table: &[
            [tile_avx2::<1, false>, tile_avx2::<1, true>],
            [tile_avx2::<2, false>, tile_avx2::<2, true>],
        ],
    };

    pub(in crate::conv_blocked) static AVX512: PwTiles = PwTiles {
        lanes: 16,
        r: 8,
        table: &[
            [tile_avx512::<1, false>, tile_avx512::<1, true>],
            [tile_avx512::<2, false>, tile_avx512::<2, true>],
            [tile_avx512::<3, false>, tile_avx512::<3, true>],
        ],
    };
}
#[cfg(target_arch = "x86_64")]
pub(super) use x86::{AVX2, AVX512};
