//! The Hopper kernel reading NHWC activations through *footprints*: for each row of channels
//! (128 or 64 bytes: [`super::tma::row_bytes`]), TMA copies every input pixel the block tile
//! reads through any tap into shared memory once, and the consumer warpgroups build each
//! tap's operand from those rows with `ldmatrix` (one row address per lane: the input pixel
//! its output pixel reads through the tap, or a zero row outside the input) and multiply with
//! `wgmma` taking A from registers.
//!
//! Why: the TMA kernel's im2col copies ([`super::tma`]) read each input pixel once per tap
//! from L2, 9 times on a 3x3 filter. Where a row of A feeds few output channels (int8 with
//! C = O = 64: 64 bytes per pixel and tap for 64 outputs) that is as many bytes per
//! multiply-add as f16 moves at twice the multiply rate, and int8 ran at 1.2x f16 there. Here
//! each input pixel is read about once per tile and row of channels (the footprint's halo
//! aside), and the taps cost the consumers one `ldmatrix` per 16 x 32 bytes of the operand.
//!
//! * An NHWC footprint is a run of whole pixels (linear over N, H, W; the range of
//!   [`super::nchw_footprint::tile_range`]), so a row of channels of it is a 2-D box of the
//!   activations seen as (C, N x H x W): copied by TMA in boxes of [`BOX_ROWS`] pixels with the
//!   swizzle of the row's width (the 16-byte chunk `c` of row `r` at `c ^ (r % 8)` for 128-byte
//!   rows, `c ^ ((r / 2) % 4)` for 64-byte ones); rows past the batch read zeros. Row `q - lo8`
//!   holds pixel `q`, `lo8` the range's start rounded down to 8.
//! * Two footprint buffers (the next row of channels, or the next tile's first, fills while
//!   these are read), each with a `full` and an `empty` barrier, filled by one thread of a
//!   producer warp; the filter by TMA into `stages` stages of `bn` rows (one tap each) from
//!   one thread of a second producer warp. K steps run channel-major, tap-minor. Tiles of three
//!   warpgroups or two of 128 rows give the producers a warpgroup of their own, whose
//!   registers the consumers take with `setmaxnreg` (without it the 192 x 128 tile spilled at
//!   the 128-register cap of its 416 threads); small tiles run two blocks per SM.
//! * `wgmma` with A in registers: m64nNk16 for f16 and bf16, m64nNk32 for int8, whose
//!   fragment (four 32-bit registers of four consecutive K bytes: rows `g` and `g + 8`, bytes
//!   `4 tg ..` and `16 + 4 tg ..` of the 32-byte slice) holds the same bytes at the same places
//!   as f16's, which `ldmatrix.x4` of 8 x 8 b16 matrices gives from 16-byte row pieces. Two sets
//!   of A registers (steps alternate), so one group of multiplies stays in flight while the
//!   next step's rows are loaded.
//! * Persistent blocks where there are more tiles than SMs ([`super::persistent`]): the
//!   producers fill the next tile's footprint and filter stages while the consumers write
//!   this tile's output, staged in shared memory of its own.
//!
//! Applies to NHWC activations of f16, bf16 or int8 with a pixel's channels a multiple of 64
//! bytes, no groups, padding no larger than the dilated filter extent, where two footprint
//! buffers of some tile fit in shared memory ([`nhwc_footprint_unsupported_reason`]); planned
//! where measured faster than the TMA and `cp.async` kernels ([`nhwc_footprint_preferred`]).

use std::fmt::Write;

use layoutkit_core::DType;

use super::hopper::{hopper_epilogue, HopperTile, SMEM_PER_SM};
use super::hopper_k::wgmma_function;
use super::nchw_footprint::{footprint_rows, range_statements, register_split};
use super::persistent::{tile_loop, tile_origin};
use super::requant::q8_function;
use super::splitk::splits_for;
use super::staged::{staged_epilogue, Staged};
use super::tile_rule::MIN_FILL;
use super::tma::row_bytes;
use super::{ConvKernel, ConvLayout, ConvShape, SMS};

/// Pixels per TMA copy of a footprint: the buffers hold a whole number of such boxes.
pub const BOX_ROWS: usize = 32;

/// K steps of `k` in this kernel: a tap and a row of channels each.
pub fn nhwc_footprint_steps(k: &ConvKernel) -> usize {
    let s = &k.shape;
    s.kh * s.kw * (s.c * k.input.size_bytes()).div_ceil(row_bytes(k))
}

/// Rows of a footprint buffer for tiles of `bm` output pixels of `s`: the most any tile
/// needs ([`footprint_rows`]), rounded up to whole boxes.
pub fn nhwc_buffer_rows(s: &ConvShape, bm: usize) -> usize {
    footprint_rows(s, bm).next_multiple_of(BOX_ROWS)
}

impl HopperTile {
    /// This TMA tile reading NHWC activations of `k` through footprint buffers of `rows` rows
    /// (a multiple of [`BOX_ROWS`]) with rows of `k`'s width ([`row_bytes`]); None for tiles of
    /// more than two 64-row blocks per warpgroup and where the buffers do not fit.
    pub fn with_nhwc_footprint(self, k: &ConvKernel, rows: usize) -> Option<HopperTile> {
        if self.mr > 2 || rows == 0 || !rows.is_multiple_of(BOX_ROWS) {
            return None;
        }
        let t = HopperTile {
            nchw: false,
            tma: true,
            in_flight: 1,
            footprint_rows: rows,
            k_bytes: row_bytes(k),
            ..self
        };
        (t.shared_bytes() <= SMEM_PER_SM).then_some(t)
    }
}

/// Why this kernel does not take `k` (the GPU aside), or None when it does; see the module.
pub fn nhwc_footprint_unsupported_reason(k: &ConvKernel) -> Option<String> {
    if let Some(why) = problem_reason(k) {
        return Some(why);
    }
    if nhwc_footprint_candidates(k).is_empty() {
        let s = &k.shape;
        return Some(format!(
            "no tile's two NHWC footprint buffers fit in shared memory for {}x{} inputs, stride {}",
            s.h, s.w, s.conv.stride[0]
        ));
    }
    None
}

/// [`nhwc_footprint_unsupported_reason`] short of the tiles: what the problem must be.
fn problem_reason(k: &ConvKernel) -> Option<String> {
    if let Some(why) = super::hopper_unsupported_reason(k) {
        return Some(why);
    }
    let s = &k.shape;
    let c = &s.conv;
    if k.layout != ConvLayout::Nhwc {
        return Some("the NHWC footprint kernel reads NHWC activations".into());
    }
    if !(s.c * k.input.size_bytes()).is_multiple_of(64) {
        return Some(format!(
            "the NHWC footprint kernel needs a pixel's channels to be a multiple of 64 bytes \
             (C = {})",
            s.c
        ));
    }
    if c.padding[0] > (s.kh - 1) * c.dilation[0] || c.padding[1] > (s.kw - 1) * c.dilation[1] {
        return Some(
            "the NHWC footprint kernel needs padding no larger than the dilated filter's extent"
                .into(),
        );
    }
    None
}

/// The tiles this kernel may run `k` with, in the plan's order of preference: 192 x 128,
/// 256 x 64 (where O is at most 64, the first), 192 x 64, 128 x 128, 128 x 64, 64 x 128,
/// 64 x 64, none wider than O (rounded up to 64), each with the most filter stages (4 to 2)
/// that fit beside its two footprint buffers (four measured as fast as five on `l1`: a
/// stage's filter rows are a few KiB, its index a division on every step).
pub fn nhwc_footprint_candidates(k: &ConvKernel) -> Vec<HopperTile> {
    let s = &k.shape;
    [
        (192, 128),
        (256, 64),
        (192, 64),
        (128, 128),
        (128, 64),
        (64, 128),
        (64, 64),
    ]
    .into_iter()
    .filter(|&(_, bn)| bn <= s.o.next_multiple_of(64))
    .filter_map(|(bm, bn)| {
        let rows = nhwc_buffer_rows(s, bm);
        (2..=4)
            .rev()
            .find_map(|st| HopperTile::new(bm, bn, st)?.with_nhwc_footprint(k, rows))
    })
    .collect()
}

/// Whether this kernel is the faster way to run `k` than the TMA and `cp.async` kernels
/// (unless told otherwise: [`nhwc_footprint_planned`]): int8 with a filter larger than 1x1 at
/// stride 1 over at most [`MAX_FOOTPRINT_CHANNELS`] channels, where the planned tile has one
/// split and persistent blocks (more tiles than SMs).
///
/// Measured on an H200 (`bench/results/conv.md`, the 3x3 layers of ResNet-50 and VGG-16 at
/// batch 64 and 32, the build before and this one alternated, and the kernel forced on every
/// layer it takes): ahead on the layers of at most 128 input channels with persistent
/// tiles: ResNet-50's `l1 3x3 64->64 @56` (256 x 64, 1.11x the `cp.async` kernel with i32
/// sums, 1.09x requantised) and `l2 3x3 128->128 @28` (192 x 128, 1.09x / 1.09x the TMA
/// kernel), VGG-16's `conv2_1` (1.14-1.16x), `conv2_2` requantised (1.13x) and `conv3_1`
/// (1.04-1.21x). Behind with 256 input channels or more (0.80-0.94x), at stride 2
/// (0.35-0.82x: footprints of four input pixels per output pixel), on 7 x 7 planes
/// (0.64-0.68x), without persistent blocks (`conv2_2` with i32 sums 0.78x, `l1` 0.87-0.94x)
/// and for f16 on all but one layer (0.32-0.97x; VGG-16's `conv2_1` 1.08x).
pub fn nhwc_footprint_preferred(k: &ConvKernel) -> bool {
    let s = &k.shape;
    let wanted = k.input == DType::I8
        && s.kh * s.kw > 1
        && s.conv.stride == [1, 1]
        && s.c <= MAX_FOOTPRINT_CHANNELS
        && problem_reason(k).is_none();
    wanted && nhwc_footprint_plan_with(k, None).is_some_and(|t| t.splits == 1 && t.persistent)
}

/// The most input channels of a layer [`nhwc_footprint_preferred`] takes.
pub const MAX_FOOTPRINT_CHANNELS: usize = 128;

/// Whether `k` is planned through this kernel ([`crate::Cuda::conv_path`]):
/// `LAYOUTKIT_CONV_FOOTPRINT=1` wherever it takes it, `=0` never, else where
/// [`nhwc_footprint_preferred`].
pub fn nhwc_footprint_planned(k: &ConvKernel) -> bool {
    match std::env::var("LAYOUTKIT_CONV_FOOTPRINT").as_deref() {
        Ok("0") => false,
        Ok("1") => nhwc_footprint_unsupported_reason(k).is_none(),
        _ => nhwc_footprint_preferred(k),
    }
}

/// The tile and splits of K for `k`: the first candidate with at least one tile per SM or
/// whose blocks fill at least 70% of the GPU, else the one with the most blocks, K split as
/// [`splits_for`] gives it; with persistent blocks where it has one split and more tiles than
/// SMs, unless `LAYOUTKIT_CONV_PERSISTENT=0` (`=1`: wherever they fit).
///
/// Contract: [`nhwc_footprint_unsupported_reason`] is None for `k`.
pub fn nhwc_footprint_plan(k: &ConvKernel) -> HopperTile {
    nhwc_footprint_plan_with(k, None).expect("the reason checked the candidates")
}

/// [`nhwc_footprint_plan`] with the tile `forced` (its footprint, splits and persistent
/// blocks as the plan gives them) where set; None where the forced tile's buffers do not
/// fit, or (not forced) where no candidate's do.
pub fn nhwc_footprint_plan_with(k: &ConvKernel, forced: Option<HopperTile>) -> Option<HopperTile> {
    let s = &k.shape;
    let all = match forced {
        Some(t) => vec![t.with_nhwc_footprint(k, nhwc_buffer_rows(s, t.bm))?],
        None => nhwc_footprint_candidates(k),
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
        .with_splits(splits_for(&pick, s, nhwc_footprint_steps(k)))
        .expect("splits_for stays in range");
    let (x, y) = planned.tiles(s);
    let wanted =
        super::persistent::persistent_from_env().unwrap_or(planned.splits == 1 && x * y > SMS);
    if !wanted {
        return Some(planned);
    }
    Some(planned.with_persistent(k).unwrap_or(planned))
}

/// `wgmma` with A from registers (four 32-bit registers of a 16 x 32-byte fragment per
/// thread, as `ldmatrix.x4` gives them) and B from shared memory: `wgmma_ra(d, a, b_desc)`,
/// m64nNk16 with f32 sums for f16 and bf16, m64nNk32 with i32 sums for int8; and `ldsm4s`,
/// `ldmatrix.x4` from a shared-memory address.
pub(super) fn wgmma_registers_function(k: &mut String, n: usize, input: DType) {
    let regs = n / 2;
    let list: Vec<String> = (0..regs).map(|i| format!("%{i}")).collect();
    let (d_t, c, shape, tail) = match input {
        DType::I8 => ("int", "r", format!("m64n{n}k32.s32.s8.s8"), "p"),
        DType::BF16 => (
            "float",
            "f",
            format!("m64n{n}k16.f32.bf16.bf16"),
            "p, 1, 1, 0",
        ),
        _ => (
            "float",
            "f",
            format!("m64n{n}k16.f32.f16.f16"),
            "p, 1, 1, 0",
        ),
    };
    let outs: Vec<String> = (0..regs).map(|i| format!("\"+{c}\"(d[{i}])")).collect();
    let _ = writeln!(
        k,
        "__device__ __forceinline__ void wgmma_ra({d_t}* d, const unsigned* a, unsigned long long db) {{\n  asm volatile(\"{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{}, 0;\\nwgmma.mma_async.sync.aligned.{shape} {{{}}}, {{%{}, %{}, %{}, %{}}}, %{}, {tail};\\n}}\\n\"\n    : {}\n    : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"l\"(db), \"r\"(1));\n}}",
        regs + 5,
        list.join(", "),
        regs,
        regs + 1,
        regs + 2,
        regs + 3,
        regs + 4,
        outs.join(", ")
    );
    k.push_str(
        "__device__ __forceinline__ void ldsm4s(unsigned* r, unsigned a) {\n  asm volatile(\"ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\" : \"=r\"(r[0]), \"=r\"(r[1]), \"=r\"(r[2]), \"=r\"(r[3]) : \"r\"(a) : \"memory\");\n}\n",
    );
}

/// The C expression of the swizzle of footprint row `row` (a C expression) for rows of
/// `row_bytes`: what TMA XORs into a row's 16-byte chunk index (bits 4.. of the address take
/// bits 7.. of it, the buffers being aligned to the swizzle's period).
fn swizzle_of(row: &str, row_bytes: usize) -> String {
    match row_bytes {
        128 => format!("(({row}) & 7)"),
        _ => format!("((({row}) >> 1) & 3)"),
    }
}

/// CUDA source of the kernel `conv_wgmma_tma(tx, tw, y, bias, part)` for `kernel` with
/// `tile` (`tile.footprint_rows > 0`, not `nchw`): `tx` the activations' tensor map of
/// [`super::tma_map::footprint_map`], `tw` the filter's, the rest as in
/// [`super::tma::tma_source`]'s kernel; launched with `tile.block_threads()` threads (the
/// warpgroups, then the two producer warps), `tile.grid()` and `tile.shared_bytes()`.
///
/// Contract: [`nhwc_footprint_unsupported_reason`] is None for `kernel`, `tile.k_bytes` is
/// [`row_bytes`] and `tile.footprint_rows` at least [`nhwc_buffer_rows`] for its `bm`.
pub fn nhwc_footprint_source(kernel: &ConvKernel, tile: &HopperTile) -> String {
    let s = &kernel.shape;
    let c = &s.conv;
    let HopperTile {
        bm,
        bn,
        stages,
        mr,
        k_bytes: row,
        ..
    } = *tile;
    debug_assert_eq!(row, row_bytes(kernel), "the tile's rows are the kernel's");
    let threads = tile.threads();
    let consumer_warps = threads / 32;
    let y_t = match kernel.out {
        DType::F16 | DType::BF16 => "unsigned short",
        DType::I32 => "int",
        DType::I8 => "signed char",
        _ => "float",
    };
    let acc_t = if kernel.input == DType::I8 {
        "int"
    } else {
        "float"
    };
    let per_step = row / kernel.input.size_bytes();
    let slices = row / 32;
    let taps = s.kh * s.kw;
    let steps = nhwc_footprint_steps(kernel);
    let a_bytes = tile.footprint_rows * row;
    let zero_at = 2 * a_bytes;
    let b_at = zero_at + 1024;
    let b_bytes = bn * row;
    let bar_at = b_at + stages * b_bytes;
    debug_assert_eq!(bar_at, tile.stage_area());
    let (m, ohw, hw) = (s.n * s.oh * s.ow, s.oh * s.ow, s.h * s.w);
    let mut k = String::new();
    k.push_str("// Generated by layoutkit-cuda (conv, Hopper wgmma, NHWC footprint).\n");
    super::source::helpers(&mut k, kernel.input);
    super::tma::tma_helpers(&mut k);
    wgmma_function(&mut k, bn, kernel.input, row);
    wgmma_registers_function(&mut k, bn, kernel.input);
    q8_function(&mut k, kernel);
    let _ = writeln!(
        k,
        "extern \"C\" __global__ void __launch_bounds__({}, {}) conv_wgmma_tma(const __grid_constant__ TMap tx, const __grid_constant__ TMap tw, {y_t}* __restrict__ y, const float* __restrict__ bias, float* __restrict__ part) {{",
        tile.block_threads(),
        tile.resident()
    );
    super::tma::aligned_smem_and_indices(&mut k);
    let _ = writeln!(
        k,
        "  unsigned long long* afull = (unsigned long long*)(smem + {bar_at});\n  unsigned long long* aempty = afull + 2;\n  unsigned long long* bfull = afull + 4;\n  unsigned long long* bempty = bfull + {stages};"
    );
    super::hopper_k::block_steps(&mut k, steps, tile.splits);
    let _ = writeln!(
        k,
        "  if (tid == {threads}) {{\n    asm volatile(\"prefetch.tensormap [%0];\" :: \"l\"((unsigned long long)&tx) : \"memory\");\n    asm volatile(\"prefetch.tensormap [%0];\" :: \"l\"((unsigned long long)&tw) : \"memory\");\n  }}\n  if (tid < 64) ((uint4*)(smem + {zero_at}))[tid] = make_uint4(0, 0, 0, 0);\n  if (tid == 0) {{\n    for (int i = 0; i < 2; ++i) {{ mbar_init(afull + i, 1); mbar_init(aempty + i, {consumer_warps}); }}\n    for (int i = 0; i < {stages}; ++i) {{ mbar_init(bfull + i, 1); mbar_init(bempty + i, {consumer_warps}); }}\n    asm volatile(\"fence.mbarrier_init.release.cluster;\" ::: \"memory\");\n  }}\n  __syncthreads();\n  const int cf = t0 / {taps}, cl = (t0 + nsteps - 1) / {taps};"
    );
    // A block's tiles: a persistent block walks several (its steps and footprints counted
    // over all of them, `gs` and `gj`, for the stages, buffers and parities), else one.
    let open = |indent: &str| {
        if tile.persistent {
            tile_loop(tile, kernel, indent)
        } else {
            format!("{indent}{{\n{indent}  {}", tile_origin(tile, kernel))
        }
    };
    // The footprint producer: one thread copies each row of channels of each tile's
    // footprint once its buffer is free (the consumers are done with the one before last).
    // Tiles whose consumers need more than an even share of the registers take them from the
    // producer warpgroup (`setmaxnreg`, as in `nchw_footprint`); its last two warps are idle.
    let split = register_split(tile);
    if let Some((p, _)) = split {
        let _ = writeln!(
            k,
            "  if (warp >= {consumer_warps}) asm volatile(\"setmaxnreg.dec.sync.aligned.u32 {p};\\n\" ::: \"memory\");"
        );
    }
    let _ = writeln!(
        k,
        "  if (warp == {consumer_warps}) {{\n    if (lane == 0) {{\n      int gj = 0;\n{}",
        open("      ")
    );
    range_statements(&mut k, s, bm, true);
    let box_bytes = BOX_ROWS * row;
    let _ = writeln!(
        k,
        "        const int nb = (frows + {}) / {BOX_ROWS};\n        for (int ci = cf; ci <= cl; ++ci, ++gj) {{\n          const int buf = gj & 1;\n          if (gj >= 2) mbar_wait(aempty + buf, ((gj >> 1) - 1) & 1);\n          unsigned char* fa = smem + buf * {a_bytes};\n          mbar_expect(afull + buf, nb * {box_bytes});\n          for (int j = 0; j < nb; ++j) tma_rows(fa + j * {box_bytes}, &tx, ci * {per_step}, lo8 + j * {BOX_ROWS}, afull + buf);\n        }}\n      }}\n    }}\n    return;\n  }}",
        BOX_ROWS - 1
    );
    // The filter producer: one thread copies each step's `bn` filter rows into its stage.
    let _ = writeln!(
        k,
        "  if (warp >= {}) {{\n    if (warp == {consumer_warps} + 1 && lane == 0) {{\n      int gs = 0;\n{}\n        for (int u = 0; u < nsteps; ++u, ++gs) {{\n          const int st = gs % {stages};\n          if (gs >= {stages}) mbar_wait(bempty + st, ((gs / {stages}) + 1) & 1);\n          const int t = t0 + u, ci = t / {taps}, tap = t - ci * {taps}, r = tap / {kw}, sx = tap - r * {kw};\n          mbar_expect(bfull + st, {b_bytes});\n          tma_tile(smem + {b_at} + st * {b_bytes}, &tw, ci * {per_step}, sx, r, n0, bfull + st);\n        }}\n      }}\n    }}\n    return;\n  }}",
        consumer_warps + 1,
        open("      "),
        kw = s.kw
    );
    // The consumers: per tile, each lane's output pixel (its ldmatrix row), the steps, the
    // release of the tile's last stage and buffer once its multiplies are done, the epilogue.
    if let Some((_, c)) = split {
        let _ = writeln!(
            k,
            "  asm volatile(\"setmaxnreg.inc.sync.aligned.u32 {c};\\n\" ::: \"memory\");"
        );
    }
    let _ = writeln!(
        k,
        "  {acc_t} acc[{mr}][{}][4];\n  unsigned a0[{mr}][{slices}][4], a1[{mr}][{slices}][4];\n  const unsigned sm = saddr(smem);\n  int gs = 0, gj = 0;",
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
        "  bool pv[{mr}]; int py[{mr}], px[{mr}], fb[{mr}];\n  #pragma unroll\n  for (int rb = 0; rb < {mr}; ++rb) {{\n    const int pp = m0 + wg * {} + rb * 64 + (warp & 3) * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;\n    pv[rb] = pp < {m};\n    const int pn = pp / {ohw}, pq = pp % {ohw};\n    py[rb] = (pq / {ow}) * {sh} - {ph}; px[rb] = (pq % {ow}) * {sw} - {pw}; fb[rb] = pn * {hw} + py[rb] * {w} + px[rb] - lo8;\n  }}",
        mr * 64,
        ow = s.ow,
        w = s.w,
        sh = c.stride[0],
        sw = c.stride[1],
        ph = c.padding[0],
        pw = c.padding[1],
    );
    let swz = swizzle_of("row", row);
    let step = |k: &mut String, uu: &str, a: &str| {
        let _ = writeln!(
            k,
            "    {{\n      const int uu = {uu}, t = t0 + uu, ci = t / {taps}, tap = t - ci * {taps}, r = tap / {kw}, sx = tap - r * {kw};\n      const int jg = gj + ci - cf, buf = jg & 1, sg = gs + uu, st = sg % {stages};\n      if (tap == 0 || uu == 0) mbar_wait(afull + buf, (jg >> 1) & 1);\n      #pragma unroll\n      for (int rb = 0; rb < {mr}; ++rb) {{\n        const int iy = py[rb] + r * {dh}, ix = px[rb] + sx * {dw};\n        const bool ok = pv[rb] && iy >= 0 && iy < {h} && ix >= 0 && ix < {w};\n        const int row = ok ? fb[rb] + r * {dh} * {w} + sx * {dw} : (lane & 7);\n        const unsigned ra = (ok ? sm + buf * {a_bytes} : sm + {zero_at}) + row * {row};\n        const int sz = {swz};\n        #pragma unroll\n        for (int kk = 0; kk < {slices}; ++kk) ldsm4s({a}[rb][kk], ra + ((((kk << 1) | (lane >> 4)) ^ sz) << 4));\n      }}\n      mbar_wait(bfull + st, (sg / {stages}) & 1);\n      const unsigned char* sb = smem + {b_at} + st * {b_bytes};\n      asm volatile(\"wgmma.fence.sync.aligned;\\n\" ::: \"memory\");\n      #pragma unroll\n      for (int kk = 0; kk < {slices}; ++kk)\n        #pragma unroll\n        for (int rb = 0; rb < {mr}; ++rb) wgmma_ra(&acc[rb][0][0], {a}[rb][kk], sdesc(sb + kk * 32));\n      asm volatile(\"wgmma.commit_group.sync.aligned;\\n\" ::: \"memory\");\n      asm volatile(\"wgmma.wait_group.sync.aligned 1;\\n\" ::: \"memory\");\n      if (uu > 0 && lane == 0) {{\n        mbar_arrive(bempty + (sg - 1) % {stages});\n        if (tap == 0) mbar_arrive(aempty + ((jg - 1) & 1));\n      }}\n    }}",
            kw = s.kw,
            dh = c.dilation[0],
            dw = c.dilation[1],
            h = s.h,
            w = s.w,
        );
    };
    // Steps in pairs (the two register sets), an odd first step before the loop (as in
    // `nchw_footprint`: otherwise ptxas serialises every `wgmma`, C7513).
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
        let rows = format!("wg * {} + (warp & 3) * 16", mr * 64);
        staged_epilogue(&mut k, kernel, tile, &rows, Staged::Output, &sync);
        k.push_str("  }\n}\n");
        return k;
    }
    // The epilogue stages the output tile in the buffers (idle once every step is read).
    let view = HopperTile {
        stages: tile.stage_area() / ((bm + bn) * row),
        ..*tile
    };
    hopper_epilogue(&mut k, kernel, &view, &sync);
    k
}

#[cfg(test)]
#[path = "nhwc_footprint_tests.rs"]
mod tests;
