//! What the blocked convolution prepares before its tiles run: the filter as register-tile
//! panels (packed once), the activations as the tiles read them (in place where the layout
//! allows, else one blocked copy, padded or strided: [`super::padded`]), and the cache sizes
//! that set the reduction chunks and row groups.

use std::borrow::Cow;
use std::sync::OnceLock;

use layoutkit_core::conv::Conv2d;

use super::padded::Padded;
use crate::spin_pool::SpinPool;

/// Per-core data cache sizes in bytes: `(L1d, L2)`, read once from Linux's sysfs
/// (`/sys/devices/system/cpu/cpu0/cache/index*/`); 32 KiB and 256 KiB (small, so chunks stay
/// safe) where sysfs does not say.
pub(crate) fn cache_sizes() -> (usize, usize) {
    #[cfg(test)]
    if tests::SMALL_CACHES.with(|c| c.get()) {
        return (1, 1);
    }
    static SIZES: OnceLock<(usize, usize)> = OnceLock::new();
    *SIZES.get_or_init(|| {
        let (mut l1, mut l2) = (None, None);
        for i in 0..8 {
            let dir = format!("/sys/devices/system/cpu/cpu0/cache/index{i}");
            let read = |f: &str| std::fs::read_to_string(format!("{dir}/{f}")).ok();
            let (Some(level), Some(kind), Some(size)) = (read("level"), read("type"), read("size"))
            else {
                continue;
            };
            let size = size.trim();
            let bytes = match size.strip_suffix('K') {
                Some(k) => k.parse::<usize>().ok().map(|v| v * 1024),
                None => match size.strip_suffix('M') {
                    Some(m) => m.parse::<usize>().ok().map(|v| v << 20),
                    None => size.parse().ok(),
                },
            };
            match (level.trim(), kind.trim()) {
                ("1", "Data") | ("1", "Unified") => l1 = bytes,
                ("2", _) => l2 = bytes,
                _ => {}
            }
        }
        (l1.unwrap_or(32 << 10), l2.unwrap_or(256 << 10))
    })
}

/// Output channels of one group in vectors of `lanes`, and those vectors in pairs (one pair
/// per register tile; the last holds one vector when the count is odd).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Blocks {
    pub vectors: usize,
    pub pairs: usize,
}

impl Blocks {
    pub(crate) fn new(og: usize, lanes: usize) -> Blocks {
        let vectors = og.div_ceil(lanes);
        Blocks {
            vectors,
            pairs: vectors.div_ceil(2),
        }
    }
    /// Vectors in pair `j` (1 or 2).
    pub(crate) fn in_pair(&self, j: usize) -> usize {
        2.min(self.vectors - 2 * j)
    }
}

/// Input channels per reduction chunk for a filter of `taps` taps and tiles of two vectors of
/// `lanes`: as many whole vectors of channels as keep the chunk's weights (`taps * kc` panel
/// rows of `2 * lanes` floats) within half of the L1 data cache, at least one vector. The
/// tiles of a group of output rows run chunk by chunk, so the chunk's weights are read from L1
/// by every tile of the group, and the partial sums stay in L1 between chunks.
pub(crate) fn chunk_channels(taps: usize, lanes: usize) -> usize {
    let (l1, _) = cache_sizes();
    let row_bytes = 2 * lanes * 4;
    ((l1 / 2) / (taps * row_bytes) / lanes * lanes).max(lanes)
}

/// Output pixels per row group: as many as keep the group's partial sums (two vectors of
/// `lanes` per pixel) within a quarter of the L1 data cache (at least one).
pub(crate) fn group_pixels(lanes: usize) -> usize {
    let (l1, _) = cache_sizes();
    ((l1 / 4) / (2 * lanes * 4)).max(1)
}

/// The filter (`wv`, plain OIHW f32) as panels `[group][pair][chunk][tap][c][2 * lanes]`, the
/// input channels in chunks of `kc` (the last one shorter): a panel row holds the weights of
/// one input channel for the pair's output channels, zero past the group's end, so a tile
/// reads one row per input channel, and one chunk's rows lie together (the chunk of channels
/// `k0..k1` starts at row `k0 * taps`).
pub(crate) fn pack_filter(
    wv: &[f32],
    groups: usize,
    og: usize,
    cg: usize,
    taps: usize,
    lanes: usize,
    kc: usize,
) -> Vec<f32> {
    let b = Blocks::new(og, lanes);
    let row = 2 * lanes;
    let panel = taps * cg * row;
    let mut p = vec![0f32; groups * b.pairs * panel];
    for g in 0..groups {
        for j in 0..b.pairs {
            let base = (g * b.pairs + j) * panel;
            for k0 in (0..cg).step_by(kc.max(1)) {
                let len = kc.min(cg - k0);
                for t in 0..taps {
                    for c in k0..k0 + len {
                        let at = base + (k0 * taps + t * len + c - k0) * row;
                        for l in 0..row.min(og - (2 * j * lanes).min(og)) {
                            let o = g * og + 2 * j * lanes + l;
                            p[at + l] = wv[(o * cg + c) * taps + t];
                        }
                    }
                }
            }
        }
    }
    p
}

/// Activations as the tiles read them: `offset = n * sn + h * sh + w * sw + chan[c]`, with
/// the convolution's zero padding already applied (or none to apply).
pub(crate) struct Input<'a> {
    pub data: Cow<'a, [f32]>,
    pub sn: usize,
    pub sh: usize,
    pub sw: usize,
    pub chan: Vec<usize>,
    /// Pixels per row.
    pub width: usize,
    /// The stride the tiles still apply: the convolution's, or `[1, 1]` where the copy took
    /// every stride-th pixel already ([`subsamples`]).
    pub stride: [usize; 2],
}

/// The source activations: addressing as in [`Input`], extents `n, c, h, w`.
pub(crate) struct Source<'a> {
    pub data: &'a [f32],
    pub sn: usize,
    pub sh: usize,
    pub sw: usize,
    pub chan: Vec<usize>,
    pub dims: [usize; 4],
}

/// Whether the tiles read `src` in place: no padding to apply, and the channels of a pixel
/// step by one (NHWC, `NCHW<x>c` with `x >= 2`). NCHW (channels a plane apart) is copied:
/// each broadcast would touch its own cache line.
pub(crate) fn reads_in_place(src: &Source<'_>, conv: &Conv2d) -> bool {
    conv.padding == [0, 0] && (src.dims[1] < 2 || src.chan[1] == src.chan[0] + 1)
}

/// Whether the copy keeps only the pixels a 1x1 filter with a stride reads (unpadded): the
/// tiles then run at stride 1 over whole lines, instead of touching every other line (or
/// row) of the source and fetching the skipped ones with it, as oneDNN's "reduce to unit
/// stride" does.
pub(crate) fn subsamples(conv: &Conv2d, kernel: [usize; 2]) -> bool {
    kernel == [1, 1] && conv.padding == [0, 0] && conv.stride != [1, 1]
}

/// The activations the tiles read: `src` in place, or (see [`reads_in_place`]) a copy in
/// `N, C/b, H + 2 * pad, W + 2 * pad, b` with `b = lanes` (NHWC when `C < lanes`, so a
/// 3-channel first layer is not padded to 16 channels) and zero borders, or (see
/// [`subsamples`]) a copy of the strided pixels only, `N, C/b, OH, OW, b`; copied by `pool`
/// into `scratch` (a buffer reused across calls: every element the tiles read is written
/// here, borders included, so its old contents do not matter). `kernel` is the filter's
/// `[KH, KW]`.
pub(crate) fn prepare_input<'a>(
    src: Source<'a>,
    conv: &Conv2d,
    kernel: [usize; 2],
    lanes: usize,
    pool: Option<&SpinPool>,
    mut scratch: Vec<f32>,
) -> Input<'a> {
    let sub = subsamples(conv, kernel);
    if !sub && reads_in_place(&src, conv) {
        return Input {
            data: Cow::Borrowed(src.data),
            sn: src.sn,
            sh: src.sh,
            sw: src.sw,
            chan: src.chan,
            width: src.dims[3],
            stride: conv.stride,
        };
    }
    let p = if sub {
        Padded::new(src.dims, [0, 0], conv.stride, lanes)
    } else {
        Padded::new(src.dims, conv.padding, [1, 1], lanes)
    };
    let plane = p.hp * p.line();
    scratch.resize(src.dims[0] * p.ncb * plane, 0.0);
    let mut data = scratch;
    // One line per unit of work, so that one image of few channels (a first layer) still
    // spreads over the threads.
    for_each_line(&mut data, p.line(), pool, |(i, line)| {
        let (pi, li) = (i / p.hp, i % p.hp);
        p.fill_line(&src, pi / p.ncb, pi % p.ncb, li, line);
    });
    Input {
        data: Cow::Owned(data),
        sn: p.ncb * plane,
        sh: p.line(),
        sw: p.blk,
        chan: p.chan(plane),
        width: p.wp,
        stride: if sub { [1, 1] } else { conv.stride },
    }
}

/// Copies `w` pixels of the source row at `sbase` (every `step`-th pixel), channels
/// `c0..c0 + count`, into `drow` as `w` runs of `blk` floats (the lanes past `count` left as
/// they are).
#[allow(clippy::too_many_arguments)]
pub(super) fn copy_row(
    src: &Source<'_>,
    sbase: usize,
    c0: usize,
    count: usize,
    blk: usize,
    w: usize,
    step: usize,
    drow: &mut [f32],
) {
    let contiguous = (1..count).all(|l| src.chan[c0 + l] == src.chan[c0] + l);
    let s0 = sbase + src.chan[c0];
    if contiguous && step == 1 && src.sw == blk && count == blk {
        drow[..w * blk].copy_from_slice(&src.data[s0..s0 + w * blk]);
    } else if contiguous {
        for (wi, d) in drow.chunks_exact_mut(blk).take(w).enumerate() {
            let s = s0 + wi * step * src.sw;
            d[..count].copy_from_slice(&src.data[s..s + count]);
        }
    } else {
        for l in 0..count {
            let s = sbase + src.chan[c0 + l];
            for wi in 0..w {
                drow[wi * blk + l] = src.data[s + wi * step * src.sw];
            }
        }
    }
}

/// Runs `fill(i, line)` on every `line`-float line of `data` (the `i`-th), on `pool`'s
/// threads in runs of lines of at least 16 KiB when there is a pool.
fn for_each_line(
    data: &mut [f32],
    line: usize,
    pool: Option<&SpinPool>,
    fill: impl Fn((usize, &mut [f32])) + Sync,
) {
    let line = line.max(1);
    match pool {
        Some(p) => {
            let lines = data.len().div_ceil(line);
            let per = ((16 << 10) / (line * 4) + 1).max(lines.div_ceil(8 * p.threads()));
            let (len, base) = (data.len(), super::Shared(data.as_mut_ptr()));
            p.run(lines.div_ceil(per), &|item| {
                for i in item * per..((item + 1) * per).min(lines) {
                    let end = ((i + 1) * line).min(len);
                    // SAFETY: line `i` lies inside `data`, and each line belongs to one item.
                    let part = unsafe {
                        std::slice::from_raw_parts_mut(base.get().add(i * line), end - i * line)
                    };
                    fill((i, part));
                }
            });
        }
        None => data.chunks_mut(line).enumerate().for_each(fill),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::cell::Cell;

    thread_local! {
        /// Cache sizes that replace the machine's on this thread, so unit tests reach the
        /// chunked reduction (one vector of channels per chunk) and one-row groups with small
        /// channel counts.
        pub(crate) static SMALL_CACHES: Cell<bool> = const { Cell::new(false) };
    }
}
