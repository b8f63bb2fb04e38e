//! The Hopper (sm_90) path of the tensor-core convolution: the same implicit GEMM as
//! [`super::conv_source`], with warpgroup MMA (`wgmma.mma_async`) reading both operands from
//! shared memory instead of `mma.sync` on fragments each warp loads with `ldmatrix`.
//!
//! * A K step is one filter tap and 128 bytes of channels (64 f16 or bf16, 128 int8): each row
//!   of a stage is one 128-byte line stored with the 128-byte swizzle `wgmma` reads (the
//!   16-byte chunk `c` of row `r` at chunk `c ^ (r % 8)`, stages aligned to 1024 bytes). Rows
//!   are filled by `cp.async` as in the `mma.sync` kernel (zero-fill outside the input).
//! * Each warpgroup (4 warps) owns `mr` x 64 rows and every column of the block tile and issues
//!   one `wgmma` per 64 rows per 32 bytes of K (m64nNk16 with f32 sums for f16 and bf16,
//!   m64nNk32 with exact i32 sums for int8), the sums in registers. The multiplies of a step
//!   run while the threads wait for and issue the copies of the next ones: one `wgmma` group
//!   stays in flight, so a stage is refilled two steps after it was read (`stages - 2` steps
//!   are loaded ahead). A tile with no group in flight waits for each step's multiplies before
//!   the next step and loads `stages - 1` steps ahead (so the same depth needs one stage less
//!   of shared memory).
//! * Takes f16 and bf16 inputs in NHWC or NC/32HW32 with any channel count, and NCHW where the
//!   `mma.sync` kernel does not read it (C not a multiple of 32); int8 in NHWC or NC/32HW32
//!   with C a multiple of 16. K is walked one tap and 128 bytes of channels per step where C
//!   fills them, else in 16-byte chunks of channels ([`super::hopper_k`]); the epilogue (bias,
//!   ReLU, output type and layout) stages the output tile in shared memory and writes it in
//!   runs contiguous in the output layout ([`super::staged`]; the `mma.sync` kernel's epilogue
//!   where the tile does not fit).
//! * Problems with too few output tiles for the GPU divide K among blocks ([`super::splitk`]).

use std::fmt::Write;

use layoutkit_core::DType;

use super::grouped_wgmma::{
    supergroup_a_loads, supergroup_b_loads, supergroup_steps, supergroup_tap,
};
pub(super) use super::hopper_k::wgmma_function;
use super::hopper_k::{chunk_async_loads, chunk_channels, register_loads, wgmma_step, HopperK};
use super::requant::q8_function;
use super::source::{a_loads, b_loads, helpers, pixel_rows, tap};
use super::splitk::MAX_SPLITS;
pub(super) use super::staged::hopper_epilogue;
use super::{ConvKernel, ConvLayout, ConvShape, SMS};

/// Shared memory per SM the tile choice may use (the H100's and H200's 228 KiB, less the
/// 1 KiB each block reserves).
pub(super) const SMEM_PER_SM: usize = 227 * 1024;

/// A block tile of the Hopper kernel: `bm` x `bn` outputs (pixels x output channels),
/// `warpgroups` warpgroups of `mr` x 64 rows each (`bm = 64 * mr * warpgroups`), `stages`
/// shared-memory stages of one K step, `in_flight` (0 or 1) groups of multiplies left running
/// while the next step's copies are issued, and `splits` blocks per output tile that divide
/// the K steps among them (1: no split; see [`super::splitk`]). With `tma` the operands are
/// loaded by TMA from a producer warp ([`super::tma`]; `in_flight` is then 1 however many
/// stages), else by every thread with `cp.async`; with `nchw` (and `tma`) the activations
/// are NCHW, loaded by a producer warpgroup ([`super::nchw_loader`]). With `persistent` (and
/// `tma`, one split) a block walks several output tiles and stages its output in
/// `epilogue_bytes` of shared memory of its own, in `epilogue_passes` ([`super::persistent`]).
/// With `footprint_rows` the activations come through two footprint buffers of that many rows
/// and the filter through `stages` stages of `bn` rows: NCHW ones with `nchw`
/// ([`super::nchw_footprint`]), else NHWC ones with `tma` ([`super::nhwc_footprint`]). Each stage row (a pixel's or an output channel's share of a K
/// step) is `k_bytes` long: 128, or for the TMA kernel 64 or 32 where the channels of a filter
/// tap come in such rows ([`super::tma::row_bytes`]; stored with the swizzle of that width).
/// With `group_channels` (a grouped problem; 0 for none) each block's K walks the taps and
/// that many channels of its output tile's super-group ([`super::grouped_wgmma`]).
/// With `cluster` 2 (1: none) the TMA kernel runs in thread-block clusters of two blocks
/// along the pixels that share their filter tile, each loading half of it into both
/// ([`super::cluster`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HopperTile {
    pub bm: usize,
    pub bn: usize,
    pub stages: usize,
    pub warpgroups: usize,
    pub mr: usize,
    pub in_flight: usize,
    pub splits: usize,
    pub tma: bool,
    pub nchw: bool,
    pub persistent: bool,
    pub epilogue_bytes: usize,
    pub epilogue_passes: usize,
    pub footprint_rows: usize,
    pub k_bytes: usize,
    pub group_channels: usize,
    pub cluster: usize,
}

impl HopperTile {
    /// The tile `bm x bn` with `stages` stages (2 to 8): one or two warpgroups of 64 or 128
    /// rows or three of 64 (192, TMA only: [`HopperTile::loads_fit`]), `bn` from 32 to 256
    /// (`wgmma`'s N), a multiple of 16 (of 32 unless loaded by TMA into an NHWC or NCHW
    /// output: [`HopperTile::loads_fit`], [`crate::conv_plan::hopper_tile`]); one group of multiplies in flight with three stages or more,
    /// none with two (a step is then loaded while the one before it is multiplied); None for
    /// other shapes.
    pub fn new(bm: usize, bn: usize, stages: usize) -> Option<HopperTile> {
        let (warpgroups, mr) = match bm {
            64 => (1, 1),
            128 => (2, 1),
            192 => (3, 1),
            256 => (2, 2),
            _ => return None,
        };
        let t = HopperTile {
            bm,
            bn,
            stages,
            warpgroups,
            mr,
            in_flight: usize::from(stages >= 3),
            splits: 1,
            tma: false,
            nchw: false,
            persistent: false,
            epilogue_bytes: 0,
            epilogue_passes: 1,
            footprint_rows: 0,
            k_bytes: 128,
            group_channels: 0,
            cluster: 1,
        };
        let ok = bn.is_multiple_of(16) && (32..=256).contains(&bn) && (2..=8).contains(&stages);
        (ok && t.shared_bytes() <= SMEM_PER_SM).then_some(t)
    }

    /// This tile with `in_flight` (0 or 1) groups of multiplies in flight; None for others and
    /// where that leaves no stage to load ahead into.
    pub fn with_in_flight(self, in_flight: usize) -> Option<HopperTile> {
        (in_flight <= 1 && in_flight + 2 <= self.stages).then_some(HopperTile { in_flight, ..self })
    }

    /// This tile with K divided among `splits` blocks (1 to [`MAX_SPLITS`]); None for others.
    pub fn with_splits(self, splits: usize) -> Option<HopperTile> {
        (1..=MAX_SPLITS)
            .contains(&splits)
            .then_some(HopperTile { splits, ..self })
    }

    /// This tile loading its operands by TMA from a producer warp (`tma`) or by every thread;
    /// None where the TMA kernel's barriers do not fit the shared memory, and for a tile of
    /// three warpgroups loading by every thread (its 384 threads do not divide its rows into
    /// passes of 16-byte chunks).
    pub fn with_tma(self, tma: bool) -> Option<HopperTile> {
        let t = HopperTile { tma, ..self };
        (t.shared_bytes() <= SMEM_PER_SM && t.loads_fit()).then_some(t)
    }

    /// This TMA tile with stage rows of `k_bytes` (128, 64 or 32; see [`super::tma::row_bytes`]);
    /// None for other widths and for tiles that do not load by TMA or read NCHW.
    pub fn with_k_bytes(self, k_bytes: usize) -> Option<HopperTile> {
        let ok = matches!(k_bytes, 32 | 64 | 128) && (k_bytes == 128 || (self.tma && !self.nchw));
        ok.then_some(HopperTile { k_bytes, ..self })
    }

    /// This tile walking K over super-groups of `channels` input channels (a multiple of 64;
    /// [`super::grouped_wgmma`]); None for tiles that read NCHW, split K or are persistent.
    pub fn with_group_channels(self, channels: usize) -> Option<HopperTile> {
        let ok = channels.is_multiple_of(64) && !self.nchw && self.splits == 1 && !self.persistent;
        ok.then_some(HopperTile {
            group_channels: channels,
            ..self
        })
    }

    /// K steps loaded ahead of the one being multiplied.
    fn ahead(&self) -> usize {
        self.stages - 1 - self.in_flight
    }

    /// Threads of the warpgroups that multiply (and run the epilogue).
    pub fn threads(&self) -> usize {
        128 * self.warpgroups
    }

    /// Threads per block: the warpgroups, and the producer warp with `tma` (two with NHWC
    /// footprints: one for the footprints, one for the filter, in a warpgroup of their own
    /// where the consumers take the producer's registers; the producer warpgroup with
    /// `nchw`).
    pub fn block_threads(&self) -> usize {
        self.threads()
            + match (self.nchw, self.tma) {
                (true, _) => super::nchw_loader::PRODUCER_THREADS,
                (false, true) if self.footprint_rows > 0 => {
                    if super::nchw_footprint::register_split(self).is_some() {
                        128
                    } else {
                        64
                    }
                }
                (false, true) => 32,
                _ => 0,
            }
    }

    /// Dynamic shared memory per block: the stages, 1 KiB to align them to 1024 bytes, with
    /// `tma` the stages' two `mbarrier`s each (in 256 bytes), and a persistent block's staged
    /// output tile.
    pub fn shared_bytes(&self) -> usize {
        self.stage_area() + 1024 + if self.tma { 256 } else { 0 } + self.epilogue_bytes
    }

    /// Bytes of the operands' buffers from the start of shared memory: the stages, or with
    /// `footprint_rows` two footprint buffers, a zero row block and the filter's stages (rows
    /// of `k_bytes`).
    pub fn stage_area(&self) -> usize {
        if self.footprint_rows > 0 {
            2 * self.footprint_rows * self.k_bytes + 1024 + self.stages * self.bn * self.k_bytes
        } else {
            self.stages * (self.bm + self.bn) * self.k_bytes
        }
    }

    /// Blocks of this tile that fit on one SM at once: as many as the shared memory holds, at
    /// most two (the registers of two blocks of up to 256 threads), and one where each thread
    /// keeps 128 sums (the 256-column tile: 128 registers per thread are two blocks' share),
    /// or with `tma` more than 64 or the block more than 288 threads; one with `nchw` (384
    /// threads holding a producer's units). NHWC footprint tiles: two where each thread keeps
    /// at most 32 sums in a block of at most 320 threads (102 registers each: the sums, two
    /// sets of operand registers and the addresses fit) and the shared memory holds both.
    pub(super) fn resident(&self) -> usize {
        if self.mr * self.bn / 2 >= 128 || self.nchw {
            return 1;
        }
        if self.footprint_rows > 0 {
            if self.mr * self.bn / 2 > 32 || self.block_threads() > 320 {
                return 1;
            }
            return (SMEM_PER_SM / self.shared_bytes()).clamp(1, 2);
        }
        // Two blocks of 288 threads leave each thread about 100 registers: 64 sums fit, the
        // 80 of a 160-column tile do not (ptxas refuses the `wgmma`); two of 416 (three
        // warpgroups and the producer) leave 78, too few for 64 sums (a 192 x 128 tile whose
        // rows of 64 bytes would let two blocks' stages fit).
        if self.tma && (self.mr * self.bn / 2 > 64 || self.block_threads() > 288) {
            return 1;
        }
        (SMEM_PER_SM / self.shared_bytes()).clamp(1, 2)
    }

    /// The share of the GPU's block slots (SMs x resident blocks) the blocks for `s` fill,
    /// on average over the waves they run in.
    pub fn fill(&self, s: &ConvShape) -> f64 {
        let (x, y) = self.tiles(s);
        let blocks = x * y * self.splits;
        let slots = SMS * self.resident();
        blocks as f64 / (blocks.div_ceil(slots) * slots) as f64
    }

    /// Output tiles of `s`: along the pixels, along the output channels.
    pub fn tiles(&self, s: &ConvShape) -> (usize, usize) {
        ((s.n * s.oh * s.ow).div_ceil(self.bm), s.o.div_ceil(self.bn))
    }

    /// The grid for `s`: output tiles in x (pixels) and y (channels), splits of K in z; for
    /// a persistent tile as many blocks as the GPU holds at once (at most one per tile), in x.
    pub fn grid(&self, s: &ConvShape) -> (u32, u32, u32) {
        let (x, y) = self.tiles(s);
        if self.persistent {
            return ((x * y).min(SMS * self.resident()) as u32, 1, 1);
        }
        // A cluster's blocks are consecutive in x; the last one may lie past the pixels.
        let x = x.next_multiple_of(self.cluster);
        (x as u32, y as u32, self.splits as u32)
    }
}

/// Why the Hopper kernel does not take `k` (the GPU aside), or None when it does: f16 or
/// bf16 inputs (f16 or f32 output for f16, bf16 or f32 for bf16), no groups, any channel
/// count in NHWC and NC/32HW32 (O a multiple of 32 there), and NCHW where the `mma.sync`
/// kernel does not read it in place (C not a multiple of 32: the stem's RGB images); int8
/// inputs with exact i32 sums (`wgmma` k32 s8 x s8; an i32 output, or i8 requantised) in NHWC
/// and NC/32HW32 with C a multiple of 16 (whole 16-byte chunks). The output in the layout
/// read, or NCHW from f16/bf16 NHWC at any channel count.
pub fn hopper_unsupported_reason(k: &ConvKernel) -> Option<String> {
    let s = &k.shape;
    if s.conv.groups != 1 {
        return Some("the Hopper kernel has no groups".into());
    }
    match (k.input, k.out) {
        (DType::F16, DType::F16 | DType::F32)
        | (DType::BF16, DType::BF16 | DType::F32)
        | (DType::I8, DType::I32 | DType::I8) => {}
        (i, o) => {
            return Some(format!(
                "the Hopper kernel takes f16 (f16 or f32 output), bf16 (bf16 or f32) and i8 (i32 \
                 or requantised i8), not {i} -> {o}"
            ))
        }
    }
    if let Some(why) = super::int8_reason(k) {
        return Some(why);
    }
    if k.input == DType::I8 && !s.c.is_multiple_of(16) {
        return Some(format!(
            "the Hopper kernel's int8 needs C to be a multiple of 16 (C = {})",
            s.c
        ));
    }
    if k.layout == ConvLayout::Nchw && s.c.is_multiple_of(32) {
        return Some(
            "NCHW with C a multiple of 32 runs in the NCHW loader's kernel (C a multiple of 64), \
             the mma.sync kernel or through NHWC"
                .into(),
        );
    }
    if k.layout == ConvLayout::Nc32hw32 && !s.o.is_multiple_of(32) {
        return Some(format!(
            "an NC/32HW32 output needs O to be a multiple of 32 (O = {})",
            s.o
        ));
    }
    let elems = [k.x_elements(), s.o * s.kh * s.kw * s.c, k.y_elements()];
    if elems.iter().any(|&e| e >= 1 << 31) {
        return Some("tensors of 2^31 elements or more are not in the CUDA kernel yet".into());
    }
    // Reading NHWC, the Hopper kernel's epilogues write NCHW at any channel count (the
    // shared rule also asks the mma.sync kernel to take the problem).
    let nchw_from_nhwc = k.layout == ConvLayout::Nhwc
        && k.out_layout == ConvLayout::Nchw
        && matches!(k.input, DType::F16 | DType::BF16);
    if nchw_from_nhwc {
        return None;
    }
    super::out_layout_reason(k)
}

/// CUDA source of the kernel `conv_wgmma(x, w, y, bias, part)` for `kernel` with `tile`: the
/// parameters of [`super::conv_source`]'s `conv` and the split-K workspace `part` (f32,
/// [`super::splitk::workspace_bytes`]; unused with one split), launched with
/// `tile.threads()` threads, `tile.grid()` and `tile.shared_bytes()` of dynamic shared
/// memory, compiled for sm_90a. With more than one split it writes its sums to `part`, not
/// `y`, and [`super::splitk::reduce_source`]'s kernel finishes the output.
///
/// Contract: `hopper_unsupported_reason(kernel)` is None, or for a tile with
/// `group_channels` [`super::grouped_wgmma::grouped_wgmma_unsupported_reason`] is.
pub fn hopper_source(kernel: &ConvKernel, tile: &HopperTile) -> String {
    if tile.footprint_rows > 0 && tile.nchw {
        return super::nchw_footprint::footprint_source(kernel, tile);
    }
    if tile.footprint_rows > 0 {
        return super::nhwc_footprint::nhwc_footprint_source(kernel, tile);
    }
    if tile.nchw {
        return super::nchw_loader::nchw_source(kernel, tile);
    }
    if tile.tma {
        return super::tma::tma_source(kernel, tile);
    }
    let s = &kernel.shape;
    let HopperTile {
        bm,
        bn,
        stages,
        mr,
        splits,
        ..
    } = *tile;
    let threads = tile.threads();
    let y_t = match kernel.out {
        DType::F16 | DType::BF16 => "unsigned short",
        DType::I32 => "int",
        DType::I8 => "signed char",
        _ => "float",
    };
    let (x_t, acc_t) = match kernel.input {
        DType::I8 => ("signed char", "int"),
        _ => ("unsigned short", "float"),
    };
    let per = chunk_channels(kernel);
    // Rows of 8 chunks of 16 bytes: each pass of the block's threads loads `step` rows.
    let step = threads / 8;
    assert!(
        tile.loads_fit(),
        "{tile:?}: rows not whole passes of the threads' loads"
    );
    let (ar, br) = (bm / step, bn / step);
    let grouped = tile.group_channels > 0;
    // Super-groups walk whole 64-channel steps of their own channels whatever C is (channels
    // past C read as zeros).
    let walk = if grouped {
        HopperK::Taps
    } else {
        HopperK::of(kernel)
    };
    let registers = walk.registers();
    assert!(
        !grouped || !tile.persistent,
        "super-groups run in the cp.async kernel without persistent blocks"
    );
    assert!(
        !grouped || tile.group_channels == super::grouped_wgmma::supergroup_channels(kernel),
        "the tile's super-groups are the problem's"
    );
    let steps = if grouped {
        supergroup_steps(kernel)
    } else {
        walk.steps(kernel)
    };
    let stage_bytes = (bm + bn) * 128;
    let mut k = String::new();
    k.push_str("// Generated by layoutkit-cuda (conv, Hopper wgmma).\n");
    helpers(&mut k, kernel.input);
    wgmma_function(&mut k, bn, kernel.input, 128);
    q8_function(&mut k, kernel);
    let _ = writeln!(
        k,
        "extern \"C\" __global__ void __launch_bounds__({threads}, {}) conv_wgmma(const {x_t}* __restrict__ x, const {x_t}* __restrict__ w, {y_t}* __restrict__ y, const float* __restrict__ bias, float* __restrict__ part) {{",
        tile.resident()
    );
    for line in [
        "extern __shared__ unsigned char smem_raw[];",
        "unsigned raw; asm volatile(\"{ .reg .u64 q; cvta.to.shared.u64 q, %1; cvt.u32.u64 %0, q; }\" : \"=r\"(raw) : \"l\"(smem_raw));",
        "unsigned char* smem = smem_raw + ((1024 - (raw & 1023)) & 1023);",
        "const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wg = warp >> 2;",
        "const int g = lane >> 2, tg = lane & 3;",
    ] {
        let _ = writeln!(k, "  {line}");
    }
    let _ = writeln!(
        k,
        "  {}\n  {acc_t} acc[{mr}][{}][4];\n  #pragma unroll\n  for (int i = 0; i < {}; ++i) (&acc[0][0][0])[i] = 0;",
        super::persistent::tile_origin(tile, kernel),
        bn / 8,
        mr * bn / 2
    );
    // This block's K steps: t0 .. t0 + nsteps (all of them without a split).
    super::hopper_k::block_steps(&mut k, steps, splits);
    let _ = writeln!(
        k,
        "  const int lrow = tid >> 3, lch = tid & 7, lcol = lch * {per};"
    );
    // The byte offset of row `row`'s chunk `lch` in a stage (the 128-byte swizzle).
    k.push_str("  #define SW(row) ((row) * 128 + ((lch ^ ((row) & 7)) << 4))\n");
    pixel_rows(&mut k, s, ar, step);
    let a_dst = format!("sa + SW(lrow + i * {step})");
    let b_dst = format!("sa + {} + SW(lrow + i * {step})", bm * 128);
    match walk {
        HopperK::Taps => {
            let tap = if grouped {
                supergroup_tap(kernel)
            } else {
                tap(s, 8 * per)
            };
            let _ = writeln!(
                k,
                "  auto load = [&](int t, int st) {{\n{tap}\n    unsigned char* sa = smem + st * {stage_bytes};"
            );
            if grouped {
                supergroup_a_loads(&mut k, kernel, ar, step, &a_dst);
                supergroup_b_loads(&mut k, kernel, br, step, &b_dst);
            } else {
                a_loads(&mut k, kernel, ar, step, &a_dst);
                b_loads(&mut k, kernel, br, step, &b_dst);
            }
            k.push_str("  };\n");
        }
        HopperK::Chunks { registers: false } => {
            let _ = writeln!(
                k,
                "  auto load = [&](int t, int st) {{\n    unsigned char* sa = smem + st * {stage_bytes};"
            );
            chunk_async_loads(&mut k, kernel, (ar, br, step), &a_dst, &b_dst);
            k.push_str("  };\n");
        }
        HopperK::Chunks { registers: true } | HopperK::Dense => {
            let at_stage = |d: &str| d.replace("sa + ", &format!("smem + st * {stage_bytes} + "));
            register_loads(
                &mut k,
                kernel,
                (ar, br, step),
                &at_stage(&a_dst),
                &at_stage(&b_dst),
            );
        }
    }
    let commit = "asm volatile(\"cp.async.commit_group;\\n\" ::: \"memory\");";
    let ahead = tile.ahead();
    // Prologue: steps 0 .. ahead-1 in flight (an empty group where there are fewer steps).
    let issue = |t: &str, st: &str| {
        if registers {
            format!("{{ fetch({t}); put({st}); }}")
        } else {
            format!("load({t}, {st});")
        }
    };
    for p in 0..ahead {
        let _ = writeln!(
            k,
            "  if ({p} < nsteps) {}\n  {commit}",
            issue(&format!("t0 + {p}"), &p.to_string())
        );
    }
    let _ = writeln!(k, "  for (int u = 0; u < nsteps; ++u) {{");
    // Step u's copies are done once at most ahead-1 newer groups are pending; the proxy fence
    // makes them (and stores from registers) visible to wgmma's reads, the barrier to every
    // warpgroup, and it also means every warpgroup's multiplies of step u-1-in_flight are done
    // (each waited for them below), so their stage, the one step u+ahead fills, can be
    // refilled.
    let _ = writeln!(
        k,
        "    asm volatile(\"cp.async.wait_group {};\\n\" ::: \"memory\");\n    asm volatile(\"fence.proxy.async.shared::cta;\\n\" ::: \"memory\");\n    __syncthreads();\n    const bool more = u + {ahead} < nsteps;",
        ahead - 1
    );
    if registers {
        // The loads of step u + ahead are issued now; they are stored after this step's
        // multiplies are issued.
        let _ = writeln!(k, "    if (more) fetch(t0 + u + {ahead});");
    } else {
        let _ = writeln!(
            k,
            "    if (more) load(t0 + u + {ahead}, (u + {ahead}) % {stages});"
        );
    }
    let _ = writeln!(k, "    {commit}");
    let _ = writeln!(
        k,
        "    const unsigned char* sa = smem + (u % {stages}) * {stage_bytes} + wg * {};\n    const unsigned char* sb = smem + (u % {stages}) * {stage_bytes} + {};",
        mr * 64 * 128,
        bm * 128
    );
    wgmma_step(&mut k, mr, 128);
    if registers {
        let _ = writeln!(k, "    if (more) put((u + {ahead}) % {stages});");
    }
    let _ = writeln!(
        k,
        "    asm volatile(\"wgmma.wait_group.sync.aligned {};\\n\" ::: \"memory\");\n  }}",
        tile.in_flight
    );
    k.push_str("  asm volatile(\"wgmma.wait_group.sync.aligned 0;\\n\" ::: \"memory\");\n");
    hopper_epilogue(&mut k, kernel, tile, "__syncthreads();");
    k
}

#[cfg(test)]
#[path = "hopper_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "hopper_int8_tests.rs"]
mod int8_tests;
