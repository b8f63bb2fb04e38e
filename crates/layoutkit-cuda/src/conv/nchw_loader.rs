//! The Hopper kernel reading NCHW activations in place: a producer warpgroup loads each filter
//! row's input rows once per 64 channels and writes every tap's K-major, 128-byte-swizzled
//! rows from registers, while the consumer warpgroups multiply as in [`super::tma`].
//!
//! Why not TMA for the activations too: a tiled TMA copy must start on a 16-byte boundary of
//! a row (with f16, a box starting at W = -1, 1 or 3 faults with an illegal instruction; at -8,
//! 0 and 8 it copies, zeros outside), so the taps of a 3x3 filter, shifted by one pixel along
//! the only contiguous dimension, cannot be copied; and with the 128-byte swizzle a box row
//! narrower than 128 bytes is padded to 128 in shared memory (probed on an H100,
//! `bench/results/conv.md`). Converting the input to NHWC first costs a memory pass, which
//! bounds that route at 0.72-0.80 of the NHWC kernel on the 3x3 layers.
//!
//! The producer's work for one filter row `r` and 64 channels: *units* of 8 channels x 8 input
//! pixels of one image row, aligned to 8 pixels along W, covering every input pixel the block
//! tile's output pixels read through that filter row (a *segment* is the part of one output row
//! inside the tile; its units run from the first input pixel of its first tap to the last of its
//! last). A thread loads its units (16-, 8-, 4- or 2-byte loads: the largest that divides a
//! row's bytes; zeros outside the input), then for each tap `s` of the row waits for a free
//! stage, transposes each unit's 8 x 8 values in registers into one 16-byte chunk (8 channels)
//! per pixel and stores the chunk into the row of the output pixel that reads that input pixel
//! through tap `s`, if any. Every output pixel of the tile reads exactly one input pixel per
//! tap, so every row of a stage is written once per step. Thread 0 of the producer also copies
//! the step's filter rows by TMA (as in [`super::tma`]). K steps run tap-innermost: (filter
//! row, 64 channels, tap), so a unit's registers serve the filter row's taps.
//!
//! Applies to f16 and bf16 NCHW activations with C a multiple of 64, any stride, padding and
//! dilation, no groups, where each producer thread holds at most
//! [`MAX_UNITS_PER_THREAD`] units for a tile ([`nchw_plan`]). Measured on an H100
//! (`bench/results/conv.md`): 1.3-1.9x the `mma.sync` kernel's NCHW loads (geometric mean),
//! so it reads NCHW in place where [`nchw_preferred`]; but 0.36-0.49 of the NHWC kernel on
//! ResNet-50's and VGG-16's 3x3 layers, below converting the input first (0.68-0.73).

use std::fmt::Write;

use layoutkit_core::DType;

use super::hopper::{wgmma_function, HopperTile};
use super::requant::q8_function;
use super::splitk::splits_for;
use super::tile_rule::MIN_FILL;
use super::{ConvKernel, ConvLayout, ConvShape};

/// Threads of the producer warpgroup.
pub const PRODUCER_THREADS: usize = 128;

/// The most units a producer thread keeps in registers (32 registers each).
pub const MAX_UNITS_PER_THREAD: usize = 3;

/// Channels per K step: 128 bytes of 16-bit values.
const STEP_CHANNELS: usize = 64;

/// How the producer divides a block tile's loads: the most segments (output rows) a tile of
/// `bm` pixels spans, and the most units a producer thread takes in any tile (a tile's units
/// are numbered segment by segment, 8 per block of 8 input pixels: [`segment_blocks`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Units {
    pub segments: usize,
    pub per_thread: usize,
}

/// Floor division by 8 (negative numerators round down), as the kernel computes it.
fn floor8(v: i64) -> i64 {
    v.div_euclid(8)
}

/// The 8-pixel blocks of input the output pixels `a .. b` of one row read through any tap of
/// a filter row: from the block holding the first tap's first input pixel to the block holding
/// the last tap's last.
pub fn segment_blocks(s: &ConvShape, a: usize, b: usize) -> usize {
    let c = &s.conv;
    let (sw, pw, dw) = (
        c.stride[1] as i64,
        c.padding[1] as i64,
        c.dilation[1] as i64,
    );
    let lo = a as i64 * sw - pw;
    let hi = (b as i64 - 1) * sw - pw + (s.kw as i64 - 1) * dw;
    (floor8(hi) - floor8(lo) + 1) as usize
}

impl Units {
    /// The units of tiles of `bm` pixels for `s`, taken over every tile of the grid.
    pub fn of(s: &ConvShape, bm: usize) -> Units {
        let (m, ow) = (s.n * s.oh * s.ow, s.ow);
        let (mut segments, mut most) = (1, 1);
        for m0 in (0..m).step_by(bm) {
            let end = (m0 + bm).min(m);
            segments = segments.max((end - 1) / ow - m0 / ow + 1);
            let (mut p, mut units) = (m0, 0);
            while p < end {
                let a = p % ow;
                let b = ow.min(a + (end - p));
                units += 8 * segment_blocks(s, a, b);
                p += b - a;
            }
            most = most.max(units);
        }
        Units {
            segments,
            per_thread: most.div_ceil(PRODUCER_THREADS),
        }
    }
}

/// Why this kernel does not take `k` (the GPU aside), or None when it does; see the module.
pub fn nchw_unsupported_reason(k: &ConvKernel) -> Option<String> {
    if let Some(why) = nchw_common_reason(k) {
        return Some(why);
    }
    let s = &k.shape;
    if candidates(k).is_empty() {
        return Some(format!(
            "no tile of the NCHW loader keeps its units within {MAX_UNITS_PER_THREAD} per \
             producer thread for {}x{} output planes",
            s.oh, s.ow
        ));
    }
    None
}

/// What both kernels reading NCHW in place (this one and [`super::nchw_footprint`]) need:
/// NCHW f16 or bf16 activations (f16 or f32 output for f16, bf16 or f32 for bf16), no
/// groups, C a multiple of 64, tensors under 2^31 elements, an output layout the epilogue
/// writes; the reason where `k` has not, else None.
pub fn nchw_common_reason(k: &ConvKernel) -> Option<String> {
    let s = &k.shape;
    if k.layout != ConvLayout::Nchw {
        return Some("the NCHW loader reads NCHW activations".into());
    }
    if !matches!(
        (k.input, k.out),
        (DType::F16, DType::F16 | DType::F32) | (DType::BF16, DType::BF16 | DType::F32)
    ) {
        return Some(format!(
            "the NCHW loader takes f16 (f16 or f32 output) and bf16 (bf16 or f32), not {} -> {}",
            k.input, k.out
        ));
    }
    if s.conv.groups != 1 {
        return Some("the NCHW loader has no groups".into());
    }
    if !s.c.is_multiple_of(STEP_CHANNELS) {
        return Some(format!(
            "the NCHW loader needs C to be a multiple of {STEP_CHANNELS} (C = {})",
            s.c
        ));
    }
    let elems = [k.x_elements(), s.o * s.kh * s.kw * s.c, k.y_elements()];
    if elems.iter().any(|&e| e >= 1 << 31) {
        return Some("tensors of 2^31 elements or more are not in the CUDA kernel yet".into());
    }
    super::out_layout_reason(k)
}

impl HopperTile {
    /// This tile loading NCHW activations through a producer warpgroup (see
    /// [`super::nchw_loader`]): one block per SM (384 threads with two warpgroups that
    /// multiply), the filter by TMA. None where the stages and barriers do not fit.
    pub fn with_nchw_loader(self) -> Option<HopperTile> {
        if self.warpgroups > 2 {
            return None;
        }
        let t = HopperTile {
            nchw: true,
            in_flight: 1,
            ..self
        };
        t.with_tma(true)
    }
}

/// The tiles this kernel may run `k` with, largest first: 256 x 128 (two consumer warpgroups
/// of 128 rows), 128 rows and 256, 128 or 64 columns, 64 x 64 (one warpgroup), four stages,
/// none wider than O (rounded up to 64) and none whose units exceed
/// [`MAX_UNITS_PER_THREAD`] per producer thread.
pub fn candidates(k: &ConvKernel) -> Vec<HopperTile> {
    let s = &k.shape;
    // Whether tiles of 256, 128 and 64 rows keep their units within the bound (each walks
    // every tile of the grid once).
    let fit = |bm: usize| Units::of(s, bm).per_thread <= MAX_UNITS_PER_THREAD;
    let (fits256, fits128, fits64) = (fit(256), fit(128), fit(64));
    [(256, 128), (128, 256), (128, 128), (128, 64), (64, 64)]
        .into_iter()
        .filter(|&(_, bn)| bn <= s.o.next_multiple_of(64))
        .filter(|&(bm, _)| match bm {
            256 => fits256,
            128 => fits128,
            _ => fits64,
        })
        .filter_map(|(bm, bn)| HopperTile::new(bm, bn, 4)?.with_nchw_loader())
        .collect()
}

/// The narrowest output rows on which [`nchw_preferred`] takes this kernel.
pub const NCHW_LOADER_MIN_OW: usize = 14;

/// Whether this kernel is the faster way to read `k`'s NCHW activations in place than the
/// `mma.sync` kernel's register loads: stride 1 and output rows of at least
/// [`NCHW_LOADER_MIN_OW`] pixels. Measured on an H100 (three networks' 40 layers with C a
/// multiple of 64, batch 1, 8 and 64, both kernels in place, `bench/results/conv.md`): on those
/// layers 1.53-1.91x the `mma.sync` kernel (geometric mean; 0.88-1.04 at worst); on the
/// others (stride 2, 7-pixel rows) 0.82-0.90 at batch 8 and 64 (1.74 at batch 1, where the
/// rule gives up some speed for one rule at every batch), where a tile's segments are short
/// and most of each 8-pixel unit's loads and stores serve no output row.
pub fn nchw_preferred(k: &ConvKernel) -> bool {
    k.shape.conv.stride == [1, 1] && k.shape.ow >= NCHW_LOADER_MIN_OW
}

/// K steps of this kernel for `s`: taps x C / 64.
pub fn nchw_steps(s: &ConvShape) -> usize {
    s.kh * s.kw * s.c / STEP_CHANNELS
}

/// The tile and splits of K for `k`: the first candidate whose blocks fill at least 70% of
/// the GPU (one block per SM), else the one with the most blocks, K split as
/// [`splits_for`] gives it.
///
/// Contract: [`nchw_unsupported_reason`] is None for `k`.
pub fn nchw_plan(k: &ConvKernel) -> HopperTile {
    let s = &k.shape;
    let steps = nchw_steps(s);
    let all = candidates(k);
    let pick = all
        .iter()
        .find(|t| t.fill(s) >= MIN_FILL)
        .or_else(|| {
            all.iter().max_by_key(|t| {
                let (x, y, _) = t.grid(s);
                (x * y, std::cmp::Reverse(t.bm * t.bn))
            })
        })
        .copied()
        .expect("nchw_unsupported_reason checked the candidates");
    pick.with_splits(splits_for(&pick, s, steps))
        .expect("splits_for stays in range")
}

/// The statements loading unit `i` for filter row `r` and channel chunk `cc` (8 channels x 4
/// words of 2 pixels, zeros outside the input) and transposing it into `o[i]`: a 16-byte
/// chunk of the 8 channels per pixel.
fn unit_loads(k: &mut String, s: &ConvShape) {
    let c = &s.conv;
    let vec = [8, 4, 2, 1]
        .into_iter()
        .find(|v| s.w.is_multiple_of(*v))
        .expect("1 divides W");
    let plane = s.h * s.w;
    let _ = writeln!(
        k,
        "        {{\n          const int ih = uoh[i] * {} - {} + r * {};\n          const bool rowok = uact[i] && ih >= 0 && ih < {};\n          const unsigned short* src = x + (((long long)un[i] * {} + cc * {STEP_CHANNELS} + ucg[i] * 8) * {} + (rowok ? ih : 0)) * {} + uiw[i];",
        c.stride[0], c.padding[0], c.dilation[0], s.h, s.c, s.h, s.w
    );
    let _ = writeln!(
        k,
        "          #pragma unroll\n          for (int ch = 0; ch < 8; ++ch) {{\n            const unsigned short* sc = src + (long long)ch * {plane};"
    );
    match vec {
        8 => k.push_str(
            "            const bool ok = rowok && uiw[i] >= 0 && uiw[i] + 8 <= W_;\n            const uint4 q = ok ? __ldg((const uint4*)sc) : make_uint4(0, 0, 0, 0);\n            v[i][ch][0] = q.x; v[i][ch][1] = q.y; v[i][ch][2] = q.z; v[i][ch][3] = q.w;\n",
        ),
        4 => k.push_str(
            "            #pragma unroll\n            for (int h = 0; h < 2; ++h) {\n              const bool ok = rowok && uiw[i] + 4 * h >= 0 && uiw[i] + 4 * h + 4 <= W_;\n              const uint2 q = ok ? __ldg((const uint2*)(sc + 4 * h)) : make_uint2(0, 0);\n              v[i][ch][2 * h] = q.x; v[i][ch][2 * h + 1] = q.y;\n            }\n",
        ),
        2 => k.push_str(
            "            #pragma unroll\n            for (int h = 0; h < 4; ++h) {\n              const bool ok = rowok && uiw[i] + 2 * h >= 0 && uiw[i] + 2 * h + 2 <= W_;\n              v[i][ch][h] = ok ? __ldg((const unsigned*)(sc + 2 * h)) : 0u;\n            }\n",
        ),
        _ => k.push_str(
            "            #pragma unroll\n            for (int h = 0; h < 4; ++h) {\n              const int a = uiw[i] + 2 * h;\n              const unsigned lo = rowok && a >= 0 && a < W_ ? (unsigned)__ldg(sc + 2 * h) : 0u;\n              const unsigned hi = rowok && a + 1 >= 0 && a + 1 < W_ ? (unsigned)__ldg(sc + 2 * h + 1) : 0u;\n              v[i][ch][h] = lo | (hi << 16);\n            }\n",
        ),
    }
    // Every unit's loads are issued before the first is used (their latencies overlap), then
    // one 16-byte chunk per pixel: the pixel's 8 channels, two to a word.
    k.push_str("          }\n        }\n      #pragma unroll\n      for (int i = 0; i < PER_; ++i)\n        #pragma unroll\n        for (int p = 0; p < 8; ++p) {\n          const unsigned sel = (p & 1) ? 0x7632u : 0x5410u;\n          #pragma unroll\n          for (int j = 0; j < 4; ++j) o[i][p][j] = __byte_perm(v[i][2 * j][p >> 1], v[i][2 * j + 1][p >> 1], sel);\n        }\n");
}

/// CUDA source of the kernel `conv_wgmma_nchw(x, tw, y, bias, part)` for `kernel` with
/// `tile` (`tile.nchw`): `x` the NCHW activations, `tw` the filter's tiled tensor map
/// ([`super::tma_map::filter_map`]), `y`, `bias` and `part` as in
/// [`super::hopper_source`]'s kernel. Launched with `tile.block_threads()` threads (the
/// consumer warpgroups, then the producer warpgroup), `tile.grid()` and
/// `tile.shared_bytes()` of dynamic shared memory, compiled for sm_90a.
///
/// Contract: [`nchw_unsupported_reason`] is None for `kernel` and `tile` is one of its
/// candidates (its units fit).
pub fn nchw_source(kernel: &ConvKernel, tile: &HopperTile) -> String {
    let s = &kernel.shape;
    let c = &s.conv;
    let HopperTile { bm, bn, stages, .. } = *tile;
    let threads = tile.threads();
    let consumer_warps = threads / 32;
    let y_t = match kernel.out {
        DType::F16 | DType::BF16 => "unsigned short",
        _ => "float",
    };
    let chunks = s.c / STEP_CHANNELS;
    let steps = nchw_steps(s);
    let stage_bytes = (bm + bn) * 128;
    let units = Units::of(s, bm);
    let per = units.per_thread;
    let (m, ohw) = (s.n * s.oh * s.ow, s.oh * s.ow);
    let mut k = String::new();
    k.push_str("// Generated by layoutkit-cuda (conv, Hopper wgmma, NCHW loader warpgroup).\n");
    super::source::helpers(&mut k, kernel.input);
    super::tma::tma_helpers(&mut k);
    wgmma_function(&mut k, bn, kernel.input, 128);
    q8_function(&mut k, kernel);
    k.push_str(
        "__device__ __forceinline__ void mbar_expect_tx(unsigned long long* b, unsigned bytes) {\n  asm volatile(\"mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\" :: \"r\"(saddr(b)), \"r\"(bytes) : \"memory\");\n}\n",
    );
    let _ = writeln!(k, "#define W_ {}\n#define PER_ {per}", s.w);
    let _ = writeln!(
        k,
        "extern \"C\" __global__ void __launch_bounds__({}, 1) conv_wgmma_nchw(const unsigned short* __restrict__ x, const __grid_constant__ TMap tw, {y_t}* __restrict__ y, const float* __restrict__ bias, float* __restrict__ part) {{",
        tile.block_threads()
    );
    super::tma::warp_specialised_prologue(&mut k, kernel, tile, steps);
    let _ = writeln!(
        k,
        "  if (tid == {threads}) asm volatile(\"prefetch.tensormap [%0];\" :: \"l\"((unsigned long long)&tw) : \"memory\");\n  if (tid == 0) {{\n    for (int i = 0; i < {stages}; ++i) {{ mbar_init(full + i, {PRODUCER_THREADS}); mbar_init(empty + i, {consumer_warps}); }}\n    asm volatile(\"fence.mbarrier_init.release.cluster;\" ::: \"memory\");\n  }}\n  __syncthreads();"
    );
    // The producer warpgroup: its units' places, then the filter rows' loads and taps' stores.
    let (sw, pw, dw) = (c.stride[1], c.padding[1], c.dilation[1]);
    let _ = writeln!(
        k,
        "  if (tid >= {threads}) {{\n    const int pt = tid - {threads};\n    const int mend = min(m0 + {bm}, {m}), row0 = m0 / {ow}, nseg = (mend - 1) / {ow} - row0 + 1;\n    bool uact[{per}]; int un[{per}], uoh[{per}], uiw[{per}], uowa[{per}], uowb[{per}], urow[{per}], ucg[{per}];\n    #pragma unroll\n    for (int i = 0; i < {per}; ++i) {{\n      int u = pt + i * {PRODUCER_THREADS};\n      uact[i] = false; un[i] = uoh[i] = uiw[i] = uowa[i] = uowb[i] = urow[i] = ucg[i] = 0;\n      #pragma unroll 1\n      for (int j = 0; j < nseg; ++j) {{\n        const int pj = j == 0 ? m0 : (row0 + j) * {ow};\n        const int owa = pj % {ow}, owb = min({ow}, owa + (mend - pj));\n        const int lo = owa * {sw} - {pw}, hi = (owb - 1) * {sw} - {pw} + {};\n        const int lo8 = lo >= 0 ? lo / 8 : -((7 - lo) / 8), hi8 = hi >= 0 ? hi / 8 : -((7 - hi) / 8);\n        const int nb = hi8 - lo8 + 1;\n        if (u < 8 * nb) {{\n          uact[i] = true; ucg[i] = u % 8; uiw[i] = (lo8 + u / 8) * 8;\n          un[i] = pj / {ohw}; uoh[i] = (pj / {ow}) % {oh}; uowa[i] = owa; uowb[i] = owb; urow[i] = pj - m0 - owa;\n          break;\n        }}\n        u -= 8 * nb;\n      }}\n    }}",
        (s.kw - 1) * dw,
        ow = s.ow,
        oh = s.oh,
    );
    let _ = writeln!(
        k,
        "    unsigned o[{per}][8][4];\n    const int g0 = t0 / {kw}, g1 = (t0 + nsteps + {kw} - 1) / {kw};\n    for (int grp = g0; grp < g1; ++grp) {{\n      const int r = grp / {chunks}, cc = grp % {chunks};\n      unsigned v[{per}][8][4];\n      #pragma unroll\n      for (int i = 0; i < {per}; ++i)",
        kw = s.kw
    );
    unit_loads(&mut k, s);
    let _ = writeln!(
        k,
        "      for (int sx = 0; sx < {kw}; ++sx) {{\n        const int t = grp * {kw} + sx;\n        if (t < t0 || t >= t0 + nsteps) continue;\n        const int u = t - t0, st = u % {stages};\n        if (u >= {stages}) mbar_wait(empty + st, ((u / {stages}) + 1) & 1);\n        unsigned char* sa = smem + st * {stage_bytes};\n        if (pt == 0) {{\n          mbar_expect_tx(full + st, {});\n          tma_tile(sa + {}, &tw, cc * {STEP_CHANNELS}, sx, r, n0, full + st);\n        }}",
        bn * 128,
        bm * 128,
        kw = s.kw
    );
    let (pre, guard) = if sw == 1 {
        (
            "          const int pmin = max(0, uowa[i] - d), pmax = min(8, uowb[i] - d), rb = urow[i] + d;\n",
            "            if (p < pmin || p >= pmax) continue;\n            const int row = rb + p;\n".to_string(),
        )
    } else {
        (
            "",
            format!("            const int q = d + p;\n            if (q < 0 || q % {sw} != 0) continue;\n            const int ow = q / {sw};\n            if (ow < uowa[i] || ow >= uowb[i]) continue;\n            const int row = urow[i] + ow;\n"),
        )
    };
    let _ = writeln!(
        k,
        "        #pragma unroll\n        for (int i = 0; i < {per}; ++i) {{\n          if (!uact[i]) continue;\n          const int d = uiw[i] + {pw} - sx * {dw};\n{pre}          #pragma unroll\n          for (int p = 0; p < 8; ++p) {{\n{guard}            *(uint4*)(sa + row * 128 + ((ucg[i] ^ (row & 7)) << 4)) = make_uint4(o[i][p][0], o[i][p][1], o[i][p][2], o[i][p][3]);\n          }}\n        }}\n        asm volatile(\"fence.proxy.async.shared::cta;\" ::: \"memory\");\n        mbar_arrive(full + st);\n      }}\n    }}\n    return;\n  }}"
    );
    // The consumers, as in the TMA kernel.
    super::tma::consumers(&mut k, kernel, tile);
    k
}

#[cfg(test)]
#[path = "nchw_loader_tests.rs"]
mod tests;
