//! The Hopper kernel reading NCHW activations in place through a *footprint*: for each 64
//! channels, a producer warpgroup copies every input pixel the block tile reads (through any
//! tap) once into shared memory as K-major 128-byte rows, and the consumer warpgroups build
//! each tap's operand from those rows with `ldmatrix` (one row address per lane: the input
//! pixel its output pixel reads through the tap, or a zero row outside the input) and multiply
//! with `wgmma` taking A from registers.
//!
//! Why: [`super::nchw_loader`] stores every tap's rows (9 stores of each input value per 64
//! channels of a 3x3 filter, and 3 loads) and measured 0.36-0.49 of the NHWC kernel on the 3x3
//! layers, below converting the input first (0.68-0.73). Here each input value is loaded and
//! stored once per 64 channels, and the taps cost the consumers one `ldmatrix` per 16 x 16 of
//! the operand, the same shared-memory reads as `wgmma` reading A from shared memory.
//!
//! * The footprint of a tile of output pixels `m0 .. m0 + bm` (linear over N, OH, OW) is the
//!   range of input pixels, linear over N, H, W, from the first pixel's first tap to the last
//!   pixel's last tap, clipped to their images ([`tile_range`]); every input pixel inside an
//!   image that the tile reads lies in it (for padding no larger than the dilated filter's
//!   extent, which every "same" or "valid" convolution has). Row `q - lo8` holds pixel `q`,
//!   `lo8` the range's start rounded down to 8, its 16-byte chunk `c` at `c ^ (row % 8)`.
//! * Two footprint buffers (the producer fills the next 64 channels while the consumers read
//!   these), each with a `full` and an `empty` barrier; the filter by TMA into `stages` stages
//!   of `bn` rows (one tap each), issued by one thread of the producer's last warp, with the
//!   TMA kernel's `full` / `empty` barriers. K steps run channel-major, tap-minor: (64
//!   channels, tap).
//! * The consumers keep two sets of A registers (steps alternate), so one group of multiplies
//!   stays in flight while the next step's rows are loaded.
//! * Tiles of 64 to 256 rows; those of three consumer warpgroups (192 rows) and of two of 128
//!   rows shift registers from the producer to the consumers with `setmaxnreg`
//!   (`register_split`). Persistent blocks where there are more tiles than SMs
//!   ([`super::persistent`]): the producer fills the next tile's first footprint while the
//!   consumers write this tile's output, staged in shared memory of its own.
//!
//! Applies to f16 and bf16 NCHW activations with C a multiple of 64, no groups, padding no
//! larger than the dilated filter extent, where two footprint buffers of some tile fit in
//! shared memory ([`footprint_unsupported_reason`]). Measured and planned where faster than
//! converting the input to NHWC: [`footprint_preferred`].

use std::fmt::Write;

use super::hopper::{hopper_epilogue, HopperTile, SMEM_PER_SM};
use super::hopper_k::wgmma_function;
use super::nchw_loader::{nchw_common_reason, nchw_steps};
use super::persistent::{tile_loop, tile_origin};
use super::requant::q8_function;
use super::splitk::splits_for;
use super::staged::{staged_epilogue, Staged};
use super::tile_rule::MIN_FILL;
use super::{ConvKernel, ConvShape, SMS};

/// Threads of the producer warpgroup that copy the footprint (its last warp's first thread
/// issues the filter's copies).
pub const FOOTPRINT_THREADS: usize = 96;

/// Channels per K step: 128 bytes of 16-bit values.
const STEP_CHANNELS: usize = 64;

/// Units (8 channels x 8 pixels) a producer thread loads before it stores them: two, one
/// where the producer gives registers to the consumers (`register_split`).
fn units_in_flight(tile: &HopperTile) -> usize {
    if register_split(tile).is_some() {
        1
    } else {
        2
    }
}

/// The registers per thread the producer warpgroup keeps and the consumer warpgroups take
/// (`setmaxnreg`) for tiles whose consumers need more than an even share: three warpgroups of
/// 64 rows (512 threads, 128 registers each at launch) and two of 128 rows (384 threads,
/// 168 each; 64 sums and two sets of 32 operand registers per thread). None for the others.
pub(super) fn register_split(tile: &HopperTile) -> Option<(usize, usize)> {
    match (tile.warpgroups, tile.mr) {
        (3, 1) => Some((56, 152)),
        (2, 2) => Some((56, 224)),
        _ => None,
    }
}

/// The footprint of the output pixels `m0 .. mend` of `s` (see the module): the first and
/// last input pixel, linear over N, H and W, clipped to the first and last pixel's images.
pub fn tile_range(s: &ConvShape, m0: usize, mend: usize) -> (i64, i64) {
    let c = &s.conv;
    let (ohw, hw, w) = ((s.oh * s.ow) as i64, (s.h * s.w) as i64, s.w as i64);
    let at = |p: i64, last_tap: bool| {
        let (n, q) = (p / ohw, p % ohw);
        let (oy, ox) = (q / s.ow as i64, q % s.ow as i64);
        let (ey, ex) = if last_tap {
            (
                ((s.kh - 1) * c.dilation[0]) as i64,
                ((s.kw - 1) * c.dilation[1]) as i64,
            )
        } else {
            (0, 0)
        };
        let iy = oy * c.stride[0] as i64 - c.padding[0] as i64 + ey;
        let ix = ox * c.stride[1] as i64 - c.padding[1] as i64 + ex;
        (n, n * hw + iy * w + ix)
    };
    let (n0, lo) = at(m0 as i64, false);
    let (n1, hi) = at(mend as i64 - 1, true);
    (lo.max(n0 * hw), hi.min((n1 + 1) * hw - 1))
}

/// Rows of a tile's footprint buffer: from the range's start rounded down to 8 to its end
/// rounded up, at least 8.
fn range_rows(lo: i64, hi: i64) -> usize {
    let lo8 = lo.div_euclid(8) * 8;
    let hi8 = hi.div_euclid(8) * 8;
    ((hi8 - lo8 + 8).max(8)) as usize
}

/// The most footprint rows any tile of `bm` output pixels of `s` needs. A whole tile's
/// footprint depends only on where in its image it starts, which repeats every
/// `OH x OW / gcd(OH x OW, bm)` tiles, so those and the batch's last tile (the only partial
/// one, whose footprint is no larger than a whole one's from the same place) are all it
/// measures: the plan asks this for several tiles on every call, so it must not walk every
/// tile of a large batch.
pub fn footprint_rows(s: &ConvShape, bm: usize) -> usize {
    let (m, ohw) = (s.n * s.oh * s.ow, s.oh * s.ow);
    let rows = |m0: usize| {
        let (lo, hi) = tile_range(s, m0, (m0 + bm).min(m));
        range_rows(lo, hi)
    };
    let period = ohw / gcd(ohw, bm);
    let tiles = m.div_ceil(bm);
    (0..tiles.min(period + 1))
        .chain([tiles.saturating_sub(1)])
        .map(|t| rows(t * bm))
        .max()
        .unwrap_or(8)
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a.max(1)
    } else {
        gcd(b, a % b)
    }
}

impl HopperTile {
    /// This tile reading NCHW activations through footprints of `rows` rows (see
    /// [`super::nchw_footprint`]), with `stages` filter stages: one block per SM, the producer
    /// warpgroup after the consumer warpgroups (one to three of 64 rows, or two of 128). None
    /// for other tiles and where the buffers do not fit.
    pub fn with_footprint(self, rows: usize) -> Option<HopperTile> {
        if self.mr > 2 || rows == 0 || !rows.is_multiple_of(8) {
            return None;
        }
        let t = HopperTile {
            nchw: true,
            tma: true,
            in_flight: 1,
            footprint_rows: rows,
            ..self
        };
        (t.shared_bytes() <= SMEM_PER_SM).then_some(t)
    }
}

/// Why this kernel does not take `k` (the GPU aside), or None when it does; see the module.
pub fn footprint_unsupported_reason(k: &ConvKernel) -> Option<String> {
    if let Some(why) = problem_reason(k) {
        return Some(why);
    }
    let (c, s) = (&k.shape.conv, &k.shape);
    if footprint_candidates(k).is_empty() {
        return Some(format!(
            "no tile's two footprint buffers fit in shared memory for {}x{} inputs, stride {}",
            s.h, s.w, c.stride[0]
        ));
    }
    None
}

/// [`footprint_unsupported_reason`] short of the tiles: what the problem itself must be.
fn problem_reason(k: &ConvKernel) -> Option<String> {
    if let Some(why) = nchw_common_reason(k) {
        return Some(why);
    }
    let (c, s) = (&k.shape.conv, &k.shape);
    if c.padding[0] > (s.kh - 1) * c.dilation[0] || c.padding[1] > (s.kw - 1) * c.dilation[1] {
        return Some(
            "the NCHW footprint kernel needs padding no larger than the dilated filter's extent"
                .into(),
        );
    }
    None
}

/// The tiles this kernel may run `k` with, in the plan's order of preference: 192 x 128 and
/// 192 x 64 (three consumer warpgroups), 128 x 128, 128 x 64, 64 x 128, 64 x 64, and last
/// 256 x 128 (measured slower than 192 x 128 on all but one layer), none wider than O
/// (rounded up to 64), each with the most filter stages (4 to 2) that fit beside its two
/// footprint buffers.
pub fn footprint_candidates(k: &ConvKernel) -> Vec<HopperTile> {
    let s = &k.shape;
    [
        (192, 128),
        (192, 64),
        (128, 128),
        (128, 64),
        (64, 128),
        (64, 64),
        (256, 128),
    ]
    .into_iter()
    .filter(|&(_, bn)| bn <= s.o.next_multiple_of(64))
    .filter_map(|(bm, bn)| {
        let rows = footprint_rows(s, bm);
        (2..=4)
            .rev()
            .find_map(|st| HopperTile::new(bm, bn, st)?.with_footprint(rows))
    })
    .collect()
}

/// The most input channels of a 1x1 layer [`footprint_preferred`] reads in place.
pub const MAX_POINTWISE_CHANNELS: usize = 256;

/// Whether this kernel is the faster way to run `k`'s NCHW activations (which it takes) than
/// converting them to NHWC first, unless told otherwise (`LAYOUTKIT_CONV_NCHW_FOOTPRINT=0/1`):
/// stride 1; a filter larger than 1x1 on planes of a multiple of 4 pixels (the producer loads
/// runs of 4 or 8 pixels, not single values), or a 1x1 filter over at most
/// [`MAX_POINTWISE_CHANNELS`] channels on planes of a multiple of 8; and the planned tile with
/// one split of K and at least one tile per SM.
///
/// Measured on an H100 (`bench/results/conv.md`, the 3x3 layers of ResNet-50 and VGG-16 at
/// batch 8 and 64, this kernel on its planned tile against the conversion route): ahead on
/// every layer this takes, 0.84-0.96 of the NHWC kernel against the conversion's 0.69-0.92
/// (VGG-16's `conv1_2` on 224-pixel rows 0.76 against 0.65); behind on the stride-2 layers
/// (footprints of four input pixels per output pixel: 0.25-0.55 against 0.55-0.74, except
/// `l2 3x3/2` at batch 64), on 7 x 7 planes (single-value loads) and where the tiles do not
/// fill the GPU (14 x 14 and 28 x 28 planes at batch 8, where K splits). On the 1x1 layers
/// (the kernel forced on every layer at batch 8 and 64, against the route `conv` planned
/// before, the conversion on all of them): ahead on those of 64-256 channels on 56 x 56 and
/// 28 x 28 planes (0.55-0.81 of NHWC against 0.42-0.65), behind with 384 channels or more
/// (0.29-0.52 against 0.42-0.68), on 14 x 14 and 7 x 7 planes and at stride 2 (0.05-0.14).
pub fn footprint_preferred(k: &ConvKernel) -> bool {
    let s = &k.shape;
    let shape_ok = if s.kh * s.kw == 1 {
        s.c <= MAX_POINTWISE_CHANNELS && (s.h * s.w).is_multiple_of(8)
    } else {
        (s.h * s.w).is_multiple_of(4)
    };
    if s.conv.stride != [1, 1] || !shape_ok || problem_reason(k).is_some() {
        return false;
    }
    // No plan: no tile fits, the kernel does not take `k`.
    footprint_plan_with(k, None).is_some_and(|t| {
        let (x, y) = t.tiles(s);
        t.splits == 1 && x * y >= SMS
    })
}

/// Whether NCHW activations of `k` are planned in place through this kernel
/// ([`ConvKernel::for_problem`]): `LAYOUTKIT_CONV_NCHW_FOOTPRINT=1` wherever it takes them,
/// `=0` never, else where [`footprint_preferred`] and GPU 0 is a Hopper (sm_90, the only
/// GPUs it runs on).
pub fn footprint_planned(k: &ConvKernel) -> bool {
    match std::env::var("LAYOUTKIT_CONV_NCHW_FOOTPRINT").as_deref() {
        Ok("0") => false,
        Ok("1") => footprint_unsupported_reason(k).is_none(),
        _ => footprint_preferred(k) && crate::device::first_gpu_major() == Some(9),
    }
}

/// The tile and splits of K for `k`: the first candidate with at least one tile per SM or
/// whose blocks fill at least 70% of the GPU (one block per SM), else the one with the most
/// blocks, K split as [`splits_for`]
/// gives it; with persistent blocks where it has one split and more tiles than SMs (each
/// block's producer then fills the next tile's first footprint while its consumers finish
/// this one), unless `LAYOUTKIT_CONV_PERSISTENT=0` (`=1`: wherever they fit).
///
/// Contract: [`footprint_unsupported_reason`] is None for `k`.
pub fn footprint_plan(k: &ConvKernel) -> HopperTile {
    footprint_plan_with(k, None).expect("footprint_unsupported_reason checked the candidates")
}

/// [`footprint_plan`] with the tile `forced` (its footprint, splits and persistent blocks as
/// the plan gives them) where set; None where the forced tile's buffers do not fit, or (not
/// forced) where no candidate's do.
pub fn footprint_plan_with(k: &ConvKernel, forced: Option<HopperTile>) -> Option<HopperTile> {
    let s = &k.shape;
    let all = match forced {
        Some(t) => vec![t.with_footprint(footprint_rows(s, t.bm))?],
        None => footprint_candidates(k),
    };
    let pick = all
        .iter()
        .find(|t| {
            let (x, y) = t.tiles(s);
            x * y >= SMS || t.fill(s) >= MIN_FILL
        })
        .or_else(|| {
            all.iter().max_by_key(|t| {
                let (x, y, _) = t.grid(s);
                (x * y, std::cmp::Reverse(t.bm * t.bn))
            })
        })
        .copied()?;
    let planned = pick
        .with_splits(splits_for(&pick, s, nchw_steps(s)))
        .expect("splits_for stays in range");
    let (x, y) = planned.tiles(s);
    let wanted =
        super::persistent::persistent_from_env().unwrap_or(planned.splits == 1 && x * y > SMS);
    if !wanted {
        return Some(planned);
    }
    Some(planned.with_persistent(k).unwrap_or(planned))
}

/// The statements computing the tile's footprint start `lo8` (and with `rows`, its rows
/// `frows`) from `m0`, as [`tile_range`] does.
pub(super) fn range_statements(k: &mut String, s: &ConvShape, bm: usize, rows: bool) {
    let c = &s.conv;
    let (m, ohw, hw) = (s.n * s.oh * s.ow, s.oh * s.ow, s.h * s.w);
    let _ = writeln!(
        k,
        "    int lo8, frows;\n    {{\n      int n_ = m0 / {ohw}, q_ = m0 % {ohw};\n      const int lo = max(n_ * {hw} + ((q_ / {ow}) * {sh} - {ph}) * {w} + (q_ % {ow}) * {sw} - {pw}, n_ * {hw});\n      const int p1 = min(m0 + {bm}, {m}) - 1;\n      n_ = p1 / {ohw}; q_ = p1 % {ohw};\n      const int hi = min(n_ * {hw} + ((q_ / {ow}) * {sh} - {ph} + {ey}) * {w} + (q_ % {ow}) * {sw} - {pw} + {ex}, (n_ + 1) * {hw} - 1);\n      lo8 = lo & ~7;\n      frows = max((hi & ~7) - lo8 + 8, 8);\n    }}",
        ow = s.ow,
        w = s.w,
        sh = c.stride[0],
        sw = c.stride[1],
        ph = c.padding[0],
        pw = c.padding[1],
        ey = (s.kh - 1) * c.dilation[0],
        ex = (s.kw - 1) * c.dilation[1],
    );
    if !rows {
        k.push_str("    (void)frows;\n");
    }
}

/// The producer's loads of unit `u` (8 channels `cg * 8 ..` of chunk `ci` x the 8 pixels
/// `lo8 + (u / 8) * 8 ..`) into `v[i][ch][word]`, zeros past the batch: the widest loads
/// (8, 4, 2 or 1 pixels) whose runs never cross an image.
fn unit_loads(k: &mut String, s: &ConvShape) {
    let hw = s.h * s.w;
    let total = s.n * hw;
    let vec = [8, 4, 2, 1]
        .into_iter()
        .find(|v| hw.is_multiple_of(*v))
        .expect("1 divides H x W");
    let _ = writeln!(
        k,
        "          const int cg = u & 7, q = lo8 + (u >> 3) * 8;\n          #pragma unroll\n          for (int h = 0; h < {runs}; ++h) {{\n            const int qq = q + h * {vec}, n_ = qq / {hw}, j_ = qq - n_ * {hw};\n            const bool ok = act && qq < {total};\n            const unsigned short* src = x + ((long long)(n_ * {c} + ci * {STEP_CHANNELS} + cg * 8) * {hw} + j_);\n            #pragma unroll\n            for (int ch = 0; ch < 8; ++ch) {{\n              const unsigned short* sc = src + (long long)ch * {hw};",
        runs = 8 / vec,
        c = s.c,
    );
    match vec {
        8 => k.push_str(
            "              const uint4 v4 = ok ? __ldg((const uint4*)sc) : make_uint4(0, 0, 0, 0);\n              v[i][ch][0] = v4.x; v[i][ch][1] = v4.y; v[i][ch][2] = v4.z; v[i][ch][3] = v4.w;\n",
        ),
        4 => k.push_str(
            "              const uint2 v2 = ok ? __ldg((const uint2*)sc) : make_uint2(0, 0);\n              v[i][ch][2 * h] = v2.x; v[i][ch][2 * h + 1] = v2.y;\n",
        ),
        2 => k.push_str("              v[i][ch][h] = ok ? __ldg((const unsigned*)sc) : 0u;\n"),
        _ => k.push_str(
            "              const unsigned e = ok ? (unsigned)__ldg(sc) : 0u;\n              if (h & 1) v[i][ch][h >> 1] |= e << 16; else v[i][ch][h >> 1] = e;\n",
        ),
    }
    k.push_str("            }\n          }\n");
}

/// CUDA source of the kernel `conv_wgmma_nchw(x, tw, y, bias, part)` for `kernel` with
/// `tile` (`tile.footprint_rows > 0`), with the parameters, launch and contract of
/// [`super::nchw_loader::nchw_source`]'s kernel.
///
/// Contract: [`footprint_unsupported_reason`] is None for `kernel` and `tile.footprint_rows`
/// is at least [`footprint_rows`] for its `bm`.
pub fn footprint_source(kernel: &ConvKernel, tile: &HopperTile) -> String {
    let s = &kernel.shape;
    let c = &s.conv;
    let HopperTile {
        bm, bn, stages, mr, ..
    } = *tile;
    let threads = tile.threads();
    let consumer_warps = threads / 32;
    let units = units_in_flight(tile);
    let y_t = match kernel.out {
        layoutkit_core::DType::F16 | layoutkit_core::DType::BF16 => "unsigned short",
        _ => "float",
    };
    let taps = s.kh * s.kw;
    let steps = nchw_steps(s);
    let a_bytes = tile.footprint_rows * 128;
    let zero_at = 2 * a_bytes;
    let b_at = zero_at + 1024;
    let bar_at = b_at + stages * bn * 128;
    let (m, ohw, hw) = (s.n * s.oh * s.ow, s.oh * s.ow, s.h * s.w);
    let mut k = String::new();
    k.push_str("// Generated by layoutkit-cuda (conv, Hopper wgmma, NCHW footprint).\n");
    super::source::helpers(&mut k, kernel.input);
    super::tma::tma_helpers(&mut k);
    wgmma_function(&mut k, bn, kernel.input, 128);
    super::nhwc_footprint::wgmma_registers_function(&mut k, bn, kernel.input);
    q8_function(&mut k, kernel);
    let _ = writeln!(
        k,
        "extern \"C\" __global__ void __launch_bounds__({}, 1) conv_wgmma_nchw(const unsigned short* __restrict__ x, const __grid_constant__ TMap tw, {y_t}* __restrict__ y, const float* __restrict__ bias, float* __restrict__ part) {{",
        tile.block_threads()
    );
    super::tma::aligned_smem_and_indices(&mut k);
    let _ = writeln!(
        k,
        "  unsigned long long* afull = (unsigned long long*)(smem + {bar_at});\n  unsigned long long* aempty = afull + 2;\n  unsigned long long* bfull = afull + 4;\n  unsigned long long* bempty = bfull + {stages};"
    );
    super::hopper_k::block_steps(&mut k, steps, tile.splits);
    let _ = writeln!(
        k,
        "  if (tid == {threads}) asm volatile(\"prefetch.tensormap [%0];\" :: \"l\"((unsigned long long)&tw) : \"memory\");\n  if (tid < 64) ((uint4*)(smem + {zero_at}))[tid] = make_uint4(0, 0, 0, 0);\n  if (tid == 0) {{\n    for (int i = 0; i < 2; ++i) {{ mbar_init(afull + i, {FOOTPRINT_THREADS}); mbar_init(aempty + i, {consumer_warps}); }}\n    for (int i = 0; i < {stages}; ++i) {{ mbar_init(bfull + i, 1); mbar_init(bempty + i, {consumer_warps}); }}\n    asm volatile(\"fence.mbarrier_init.release.cluster;\" ::: \"memory\");\n  }}\n  __syncthreads();\n  const int cf = t0 / {taps}, cl = (t0 + nsteps - 1) / {taps};"
    );
    // A block's tiles: a persistent block walks several (its steps and chunks counted over
    // all of them, `gs` and `gj`, for the stages, buffers and parities), else one.
    let open = |indent: &str| {
        if tile.persistent {
            tile_loop(tile, kernel, indent)
        } else {
            format!("{indent}{{\n{indent}  {}", tile_origin(tile, kernel))
        }
    };
    // The producer warpgroup: the filter's copies from one thread of its last warp, the
    // footprints from its first three warps.
    let _ = writeln!(
        k,
        "  if (tid >= {threads}) {{\n{}    const int pt = tid - {threads};\n    if (pt >= {FOOTPRINT_THREADS}) {{\n      if (pt == {FOOTPRINT_THREADS}) {{\n        int gs = 0;\n{}\n          for (int u = 0; u < nsteps; ++u, ++gs) {{\n            const int st = gs % {stages};\n            if (gs >= {stages}) mbar_wait(bempty + st, ((gs / {stages}) + 1) & 1);\n            const int t = t0 + u, ci = t / {taps}, tap = t - ci * {taps}, r = tap / {kw}, sx = tap - r * {kw};\n            mbar_expect(bfull + st, {});\n            tma_tile(smem + {b_at} + st * {}, &tw, ci * {STEP_CHANNELS}, sx, r, n0, bfull + st);\n          }}\n        }}\n      }}\n      return;\n    }}\n    int gj = 0;\n{}",
        register_split(tile).map_or(String::new(), |(p, _)| format!(
            "    asm volatile(\"setmaxnreg.dec.sync.aligned.u32 {p};\\n\" ::: \"memory\");\n"
        )),
        open("        "),
        bn * 128,
        bn * 128,
        open("    "),
        kw = s.kw
    );
    range_statements(&mut k, s, bm, true);
    let _ = writeln!(
        k,
        "    for (int ci = cf; ci <= cl; ++ci, ++gj) {{\n      const int buf = gj & 1;\n      if (gj >= 2) mbar_wait(aempty + buf, ((gj >> 1) - 1) & 1);\n      unsigned char* fa = smem + buf * {a_bytes};\n      for (int u0 = pt; u0 < frows; u0 += {}) {{\n        unsigned v[{units}][8][4];\n        #pragma unroll\n        for (int i = 0; i < {units}; ++i) {{\n          const int u = u0 + i * {FOOTPRINT_THREADS};\n          const bool act = u < frows;",
        FOOTPRINT_THREADS * units
    );
    unit_loads(&mut k, s);
    // Each unit's 8 x 8 values transposed into one 16-byte chunk (8 channels) per pixel.
    let _ = writeln!(
        k,
        "        }}\n        #pragma unroll\n        for (int i = 0; i < {units}; ++i) {{\n          const int u = u0 + i * {FOOTPRINT_THREADS};\n          if (u >= frows) continue;\n          const int cg = u & 7, rb = (u >> 3) * 8;\n          #pragma unroll\n          for (int p = 0; p < 8; ++p) {{\n            const unsigned sel = (p & 1) ? 0x7632u : 0x5410u;\n            unsigned o[4];\n            #pragma unroll\n            for (int jj = 0; jj < 4; ++jj) o[jj] = __byte_perm(v[i][2 * jj][p >> 1], v[i][2 * jj + 1][p >> 1], sel);\n            *(uint4*)(fa + (rb + p) * 128 + ((cg ^ p) << 4)) = make_uint4(o[0], o[1], o[2], o[3]);\n          }}\n        }}\n      }}\n      mbar_arrive(afull + buf);\n    }}\n    }}\n    return;\n  }}"
    );
    // The consumers: per tile, each lane's output pixel (its ldmatrix row), the steps, the
    // release of the tile's last stage and buffer once its multiplies are done, the epilogue.
    let _ = writeln!(
        k,
        "{}  float acc[{mr}][{}][4];\n  unsigned a0[{mr}][4][4], a1[{mr}][4][4];\n  const unsigned sm = saddr(smem);\n  int gs = 0, gj = 0;",
        register_split(tile).map_or(String::new(), |(_, c)| format!(
            "  asm volatile(\"setmaxnreg.inc.sync.aligned.u32 {c};\\n\" ::: \"memory\");\n"
        )),
        bn / 8,
    );
    if tile.persistent {
        let _ = writeln!(k, "{}", tile_loop(tile, kernel, "  "));
    } else {
        let _ = writeln!(k, "  {}", tile_origin(tile, kernel));
    }
    let _ = writeln!(
        k,
        "  #pragma unroll\n  for (int i = 0; i < {}; ++i) (&acc[0][0][0])[i] = 0;",
        mr * bn / 2
    );
    range_statements(&mut k, s, bm, false);
    let _ = writeln!(
        k,
        "  bool pv[{mr}]; int py[{mr}], px[{mr}], pb[{mr}];\n  #pragma unroll\n  for (int rb = 0; rb < {mr}; ++rb) {{\n    const int pp = m0 + wg * {} + rb * 64 + (warp & 3) * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;\n    pv[rb] = pp < {m};\n    const int pn = pp / {ohw}, pq = pp % {ohw};\n    py[rb] = (pq / {ow}) * {sh} - {ph}; px[rb] = (pq % {ow}) * {sw} - {pw}; pb[rb] = pn * {hw} + py[rb] * {w} + px[rb] - lo8;\n  }}",
        mr * 64,
        ow = s.ow,
        w = s.w,
        sh = c.stride[0],
        sw = c.stride[1],
        ph = c.padding[0],
        pw = c.padding[1],
    );
    let step = |k: &mut String, uu: &str, a: &str| {
        let _ = writeln!(
            k,
            "    {{\n      const int uu = {uu}, t = t0 + uu, ci = t / {taps}, tap = t - ci * {taps}, r = tap / {kw}, sx = tap - r * {kw};\n      const int jg = gj + ci - cf, buf = jg & 1, sg = gs + uu, st = sg % {stages};\n      if (tap == 0 || uu == 0) mbar_wait(afull + buf, (jg >> 1) & 1);\n      #pragma unroll\n      for (int rb = 0; rb < {mr}; ++rb) {{\n        const int iy = py[rb] + r * {dh}, ix = px[rb] + sx * {dw};\n        const bool ok = pv[rb] && iy >= 0 && iy < {h} && ix >= 0 && ix < {w};\n        const int row = ok ? pb[rb] + r * {dh} * {w} + sx * {dw} : (lane & 7);\n        const unsigned ra = (ok ? sm + buf * {a_bytes} : sm + {zero_at}) + row * 128;\n        #pragma unroll\n        for (int kk = 0; kk < 4; ++kk) ldsm4s({a}[rb][kk], ra + ((((kk << 1) | (lane >> 4)) ^ (row & 7)) << 4));\n      }}\n      mbar_wait(bfull + st, (sg / {stages}) & 1);\n      const unsigned char* sb = smem + {b_at} + st * {};\n      asm volatile(\"wgmma.fence.sync.aligned;\\n\" ::: \"memory\");\n      #pragma unroll\n      for (int kk = 0; kk < 4; ++kk)\n        #pragma unroll\n        for (int rb = 0; rb < {mr}; ++rb) wgmma_ra(&acc[rb][0][0], {a}[rb][kk], sdesc(sb + kk * 32));\n      asm volatile(\"wgmma.commit_group.sync.aligned;\\n\" ::: \"memory\");\n      asm volatile(\"wgmma.wait_group.sync.aligned 1;\\n\" ::: \"memory\");\n      if (uu > 0 && lane == 0) {{\n        mbar_arrive(bempty + (sg - 1) % {stages});\n        if (tap == 0) mbar_arrive(aempty + ((jg - 1) & 1));\n      }}\n    }}",
            bn * 128,
            kw = s.kw,
            dh = c.dilation[0],
            dw = c.dilation[1],
            h = s.h,
            w = s.w,
        );
    };
    // Steps in pairs (the two register sets), an odd first step before the loop: with the
    // second step of a pair conditional, or an odd step after the loop, ptxas serialises
    // every `wgmma` (C7513: it cannot tell that the registers a step loads are not those of
    // the group still in flight).
    k.push_str("  if (nsteps & 1)\n");
    step(&mut k, "0", "a1");
    k.push_str("  for (int u = nsteps & 1; u + 1 < nsteps; u += 2) {\n");
    step(&mut k, "u", "a0");
    step(&mut k, "u + 1", "a1");
    k.push_str("  }\n");
    let _ = writeln!(
        k,
        "  gs += nsteps; gj += cl - cf + 1;\n  asm volatile(\"wgmma.wait_group.sync.aligned 0;\\n\" ::: \"memory\");\n  if (lane == 0) {{\n    mbar_arrive(bempty + (gs - 1) % {stages});\n    mbar_arrive(aempty + ((gj - 1) & 1));\n  }}"
    );
    let sync = format!("asm volatile(\"bar.sync 1, {threads};\" ::: \"memory\");");
    if tile.persistent {
        let row = format!("wg * {} + (warp & 3) * 16", mr * 64);
        staged_epilogue(&mut k, kernel, tile, &row, Staged::Output, &sync);
        k.push_str("  }\n}\n");
        return k;
    }
    // The epilogue stages the output tile in the buffers (idle once every step is read).
    let view = HopperTile {
        stages: tile.stage_area() / ((bm + bn) * 128),
        ..*tile
    };
    hopper_epilogue(&mut k, kernel, &view, &sync);
    k
}

#[cfg(test)]
#[path = "nchw_footprint_tests.rs"]
mod tests;
