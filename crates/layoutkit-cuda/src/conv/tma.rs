//! The Hopper kernel with its operands loaded by the Tensor Memory Accelerator (TMA) and its
//! warps specialised: one producer warp issues every load of a block, the warpgroups only
//! multiply.
//!
//! In [`super::hopper_source`]'s kernel every thread computes the addresses of its share of a
//! K step's rows (a pixel's position, the tap, the bounds of the padding) and issues
//! `cp.async` copies of 16 bytes, then all threads meet at a barrier before each step's
//! multiplies: the multiplies wait on the loads' issue and on the slowest warp. Here:
//!
//! * The activations (NHWC) are read with TMA's im2col mode: one instruction copies 64 output
//!   pixels' row of channels (128 bytes, or 64 or 32: [`row_bytes`]) for one filter tap, the
//!   hardware walking the pixels along W, H and N (the convolution's stride as the traversal
//!   stride), adding the tap's offset and filling zeros outside the input (the padding, the
//!   last tile's rows past the batch, channels past C). The filter (OHWI) is read as a tiled
//!   4-D box of `bn` output channels x a row of channels of one tap. Both land in swizzled rows
//!   as `wgmma` reads them (the other kernel's 128-byte rows where they are 128 bytes). See
//!   [`super::tma_map`] for the tensor maps.
//! * Each stage has two `mbarrier`s: `full` (the producer announces the stage's bytes; the
//!   copies complete it) and `empty` (every consumer warp arrives once its multiplies of the
//!   stage are done). The producer runs `stages` steps ahead of the slowest warpgroup with no
//!   block-wide barrier in the loop; each warpgroup keeps one group of multiplies in flight
//!   and releases a stage one step after it was read.
//! * The epilogue is the staged one (`staged.rs`; the direct one where the staged tile does not
//!   fit), synchronised among the warpgroups with a named barrier: the producer warp has left
//!   once its last copy is issued.
//!
//! K is walked one tap and a row of channels per step: 128 bytes (64 f16 or bf16, 128 int8),
//! the same steps as [`super::HopperK`]'s where C fills such rows, so the tile and split rules
//! serve both kernels; rows of 64 or 32 bytes where a tap's channels fill those
//! ([`row_bytes`]: int8 with C = 64, f16 with C = 32 or 96), more and smaller steps than the
//! other kernel's chunks of two taps.

use std::fmt::Write;

use layoutkit_core::DType;

use super::hopper::{hopper_epilogue, wgmma_function, HopperTile};
use super::persistent::{tile_loop, tile_origin};
use super::requant::q8_function;
use super::staged::{staged_epilogue, Staged};
use super::{ConvKernel, ConvLayout};

/// Pixels per im2col copy (a 64-row group of the tile, one `wgmma` M).
pub const PIXELS_PER_COPY: usize = 64;

/// Channels per K step of 128-byte rows: 128 bytes of `input`.
pub fn step_channels(input: DType) -> usize {
    128 / input.size_bytes()
}

/// Bytes of channels per K step (a stage row) of the TMA kernel for `k`: one filter tap and
/// 128 bytes, or 64 or 32 where a tap's channels are a multiple of that and not of 128 (int8
/// with C = 64: 9 steps of 64 bytes on a 3x3 filter, where 128-byte steps would hold two taps
/// that one im2col copy cannot fetch); with a 1x1 filter the narrowest of 128, 64 and 32 that
/// holds all of a pixel's channels, else 128 (the copies fill the channels past C with zeros).
/// The stage rows are stored with the swizzle of their width, which `wgmma` reads.
pub fn row_bytes(k: &ConvKernel) -> usize {
    let bytes = k.shape.c * k.input.size_bytes();
    if k.shape.kh * k.shape.kw == 1 {
        return [32, 64].into_iter().find(|&r| bytes <= r).unwrap_or(128);
    }
    [128, 64]
        .into_iter()
        .find(|&r| bytes.is_multiple_of(r))
        .unwrap_or(32)
}

impl HopperTile {
    /// This tile with `kernel`'s stage rows ([`row_bytes`]) where it loads NHWC activations by
    /// TMA; unchanged otherwise (other kernels' rows are 128 bytes).
    pub fn with_rows_of(self, kernel: &ConvKernel) -> HopperTile {
        if !self.tma || self.nchw {
            return self;
        }
        self.with_k_bytes(row_bytes(kernel))
            .expect("row_bytes gives 128, 64 or 32")
    }
}

/// Why the TMA kernel does not take `k` (which [`super::hopper_unsupported_reason`] takes), or
/// None when it does: NHWC activations; a pixel's channels a multiple of 16 bytes (TMA's
/// strides; C a multiple of 8 for f16 and bf16, of 16 for int8); K steps that are one tap each
/// ([`row_bytes`]): a pixel's channels a multiple of 32 bytes, or a 1x1 filter (a smaller C on a
/// larger filter would fill most of each step with zeros); a stride of at most 8 (TMA's
/// traversal stride); padding and the filter's dilated extent within the im2col box corners
/// TMA encodes for 4-D tensors (-128 to 127).
pub fn tma_unsupported_reason(k: &ConvKernel) -> Option<String> {
    let s = &k.shape;
    if k.layout != ConvLayout::Nhwc {
        return Some("the TMA kernel reads NHWC activations only".into());
    }
    let e = k.input.size_bytes();
    if !(s.c * e).is_multiple_of(16) {
        return Some(format!(
            "the TMA kernel needs a pixel's channels to be a multiple of 16 bytes (C = {})",
            s.c
        ));
    }
    if !(s.c * e).is_multiple_of(32) && s.kh * s.kw != 1 {
        return Some(format!(
            "the TMA kernel walks one tap per K step of 32, 64 or 128 bytes: C = {} is not a \
             multiple of {} on a {}x{} filter",
            s.c,
            32 / e,
            s.kh,
            s.kw
        ));
    }
    let c = &s.conv;
    if c.stride.iter().any(|&v| v > 8) {
        return Some("the TMA kernel's traversal stride is at most 8".into());
    }
    let corners = (0..2).flat_map(|i| {
        let extent = (if i == 0 { s.kh } else { s.kw } - 1) * c.dilation[i];
        [-(c.padding[i] as i64), c.padding[i] as i64 - extent as i64]
    });
    if corners.into_iter().any(|v| !(-128..=127).contains(&v)) {
        return Some(
            "the TMA kernel's im2col box corners (padding, dilated filter extent) must lie in \
             -128..=127"
                .into(),
        );
    }
    None
}

/// Whether the activations of `k` are read as a plain matrix (pixels x channels, a tiled
/// 2-D box per copy) rather than through im2col: a 1x1 filter with stride 1 and no padding,
/// where the implicit GEMM is an explicit one. `LAYOUTKIT_CONV_TMA_IM2COL=1` reads them
/// through im2col anyway (to compare the two).
pub fn plain_rows(k: &ConvKernel) -> bool {
    let s = &k.shape;
    s.kh == 1
        && s.kw == 1
        && s.conv.stride == [1, 1]
        && s.conv.padding == [0, 0]
        && std::env::var("LAYOUTKIT_CONV_TMA_IM2COL").as_deref() != Ok("1")
}

/// Whether the TMA kernel takes `k`.
pub fn tma_applies(k: &ConvKernel) -> bool {
    super::hopper_unsupported_reason(k).is_none() && tma_unsupported_reason(k).is_none()
}

/// Device functions: shared-memory addresses, `mbarrier` operations and the two TMA copies.
pub(super) fn tma_helpers(k: &mut String) {
    k.push_str(
        "struct __align__(64) TMap { unsigned long long v[16]; };\n\
__device__ __forceinline__ unsigned saddr(const void* p) {\n\
  unsigned a; asm volatile(\"{ .reg .u64 q; cvta.to.shared.u64 q, %1; cvt.u32.u64 %0, q; }\" : \"=r\"(a) : \"l\"(p)); return a;\n}\n\
__device__ __forceinline__ void mbar_init(unsigned long long* b, unsigned count) {\n\
  asm volatile(\"mbarrier.init.shared::cta.b64 [%0], %1;\" :: \"r\"(saddr(b)), \"r\"(count) : \"memory\");\n}\n\
__device__ __forceinline__ void mbar_expect(unsigned long long* b, unsigned bytes) {\n\
  asm volatile(\"mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\" :: \"r\"(saddr(b)), \"r\"(bytes) : \"memory\");\n}\n\
__device__ __forceinline__ void mbar_arrive(unsigned long long* b) {\n\
  asm volatile(\"mbarrier.arrive.shared::cta.b64 _, [%0];\" :: \"r\"(saddr(b)) : \"memory\");\n}\n\
__device__ __forceinline__ void mbar_wait(unsigned long long* b, unsigned parity) {\n\
  const unsigned a = saddr(b); unsigned done;\n\
  do {\n\
    asm volatile(\"{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }\" : \"=r\"(done) : \"r\"(a), \"r\"(parity) : \"memory\");\n\
  } while (!done);\n}\n\
__device__ __forceinline__ void tma_im2col(void* dst, const TMap* m, int c, int w, int h, int n, unsigned short ow, unsigned short oh, unsigned long long* b) {\n\
  asm volatile(\"cp.async.bulk.tensor.4d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], [%6], {%7, %8};\"\n\
    :: \"r\"(saddr(dst)), \"l\"((unsigned long long)m), \"r\"(c), \"r\"(w), \"r\"(h), \"r\"(n), \"r\"(saddr(b)), \"h\"(ow), \"h\"(oh) : \"memory\");\n}\n\
__device__ __forceinline__ void tma_rows(void* dst, const TMap* m, int c, int row, unsigned long long* b) {\n\
  asm volatile(\"cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\"\n\
    :: \"r\"(saddr(dst)), \"l\"((unsigned long long)m), \"r\"(c), \"r\"(row), \"r\"(saddr(b)) : \"memory\");\n}\n\
__device__ __forceinline__ void tma_tile(void* dst, const TMap* m, int c, int x, int y, int z, unsigned long long* b) {\n\
  asm volatile(\"cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], [%6];\"\n\
    :: \"r\"(saddr(dst)), \"l\"((unsigned long long)m), \"r\"(c), \"r\"(x), \"r\"(y), \"r\"(z), \"r\"(saddr(b)) : \"memory\");\n}\n",
    );
}

/// CUDA source of the kernel `conv_wgmma_tma(tx, tw, y, bias, part)` for `kernel` with
/// `tile` (`tile.tma`): `tx` the activations' im2col tensor map and `tw` the filter's tiled
/// one ([`super::tma_map`]), passed by value; `y`, `bias` and `part` as in
/// [`super::hopper_source`]'s kernel. Launched with `tile.block_threads()` threads (the
/// warpgroups, then the producer warp), `tile.grid()` and `tile.shared_bytes()` of dynamic
/// shared memory, compiled for sm_90a.
///
/// Contract: [`tma_applies`] holds for `kernel`.
pub fn tma_source(kernel: &ConvKernel, tile: &HopperTile) -> String {
    let s = &kernel.shape;
    let HopperTile { bm, bn, stages, .. } = *tile;
    let threads = tile.threads();
    let consumer_warps = threads / 32;
    let y_t = match kernel.out {
        DType::F16 | DType::BF16 => "unsigned short",
        DType::I32 => "int",
        DType::I8 => "signed char",
        _ => "float",
    };
    let row = tile.k_bytes;
    debug_assert_eq!(row, row_bytes(kernel), "the tile's rows are the kernel's");
    let per_step = row / kernel.input.size_bytes();
    // Super-groups walk their own channels: `kc` is the channel of the filter the tile reads,
    // `c0` the activations' ([`super::grouped_wgmma`]).
    let grouped = tile.group_channels > 0;
    assert!(
        !grouped || tile.group_channels == super::grouped_wgmma::supergroup_channels(kernel),
        "the tile's super-groups are the problem's"
    );
    let chunks = if grouped {
        tile.group_channels / per_step
    } else {
        s.c.div_ceil(per_step)
    };
    let channels = if grouped {
        format!(
            "kc = (t % {chunks}) * {per_step}, c0 = (n0 / {}) * {} + kc",
            super::grouped_wgmma::supergroup_outputs(kernel),
            tile.group_channels
        )
    } else {
        format!("c0 = (t % {chunks}) * {per_step}")
    };
    let kc = if grouped { "kc" } else { "c0" };
    let steps = s.kh * s.kw * chunks;
    let stage_bytes = (bm + bn) * row;
    let groups = bm / PIXELS_PER_COPY;
    let c = &s.conv;
    let mut k = String::new();
    k.push_str("// Generated by layoutkit-cuda (conv, Hopper wgmma, TMA loads).\n");
    super::source::helpers(&mut k, kernel.input);
    tma_helpers(&mut k);
    let clustered = tile.cluster > 1;
    assert!(
        !clustered || !tile.persistent,
        "clusters of one-tile blocks only"
    );
    if clustered {
        super::cluster::cluster_helpers(&mut k);
    }
    wgmma_function(&mut k, bn, kernel.input, row);
    q8_function(&mut k, kernel);
    let _ = writeln!(
        k,
        "extern \"C\" __global__ void __launch_bounds__({}, {}) conv_wgmma_tma(const __grid_constant__ TMap tx, const __grid_constant__ TMap tw, {y_t}* __restrict__ y, const float* __restrict__ bias, float* __restrict__ part) {{",
        tile.block_threads(),
        tile.resident()
    );
    warp_specialised_prologue(&mut k, kernel, tile, steps);
    // In a cluster every consumer warp of both blocks releases each stage, and the peer's
    // barriers must be set up before this block's first multicast copy.
    let (releases, sync) = if clustered {
        (
            consumer_warps * tile.cluster,
            "const unsigned crank = cluster_rank();\n  cluster_sync();",
        )
    } else {
        (consumer_warps, "__syncthreads();")
    };
    let _ = writeln!(
        k,
        "  if (tid == {threads}) {{\n    asm volatile(\"prefetch.tensormap [%0];\" :: \"l\"((unsigned long long)&tx) : \"memory\");\n    asm volatile(\"prefetch.tensormap [%0];\" :: \"l\"((unsigned long long)&tw) : \"memory\");\n  }}\n  if (tid == 0) {{\n    for (int i = 0; i < {stages}; ++i) {{ mbar_init(full + i, 1); mbar_init(empty + i, {releases}); }}\n    asm volatile(\"fence.mbarrier_init.release.cluster;\" ::: \"memory\");\n  }}\n  {sync}"
    );
    // The producer warp: one thread issues every copy. A 64-row group's first pixel gives the
    // im2col coordinates (its window's top-left corner in the input); the hardware walks the
    // group's next pixels from there.
    let (ohw, ow) = (s.oh * s.ow, s.ow);
    let a_copy = if plain_rows(kernel) {
        format!(
            "tma_rows(sa + i * {}, &tx, c0, m0 + i * {PIXELS_PER_COPY}, full + st)",
            PIXELS_PER_COPY * row
        )
    } else {
        format!(
            "tma_im2col(sa + i * {}, &tx, c0, cw[i], ch[i], cn[i], (unsigned short)(sx * {}), (unsigned short)(r * {}), full + st)",
            PIXELS_PER_COPY * row,
            c.dilation[1],
            c.dilation[0]
        )
    };
    // A persistent block's producer walks its tiles, counting its steps over all of them in
    // `gs` for the stages and the barriers' parities.
    let (tiles_open, tiles_close, n, inc) = if tile.persistent {
        (
            format!("      int gs = 0;\n{}\n", tile_loop(tile, kernel, "      ")),
            "      }\n",
            "gs",
            ", ++gs",
        )
    } else {
        (String::new(), "", "u", "")
    };
    let _ = writeln!(
        k,
        "  if (warp == {consumer_warps}) {{\n    if (lane == 0) {{\n{tiles_open}      int cw[{groups}], ch[{groups}], cn[{groups}];\n      #pragma unroll\n      for (int i = 0; i < {groups}; ++i) {{\n        const int p = m0 + i * {PIXELS_PER_COPY}, q = p % {ohw};\n        cn[i] = p / {ohw}; ch[i] = (q / {ow}) * {} - {}; cw[i] = (q % {ow}) * {} - {};\n      }}",
        c.stride[0], c.padding[0], c.stride[1], c.padding[1]
    );
    let wait = if clustered {
        "mbar_wait_cluster"
    } else {
        "mbar_wait"
    };
    let b_copy = super::cluster::filter_copy(tile, &format!("sa + {}", bm * row), kc);
    let _ = write!(
        k,
        "      for (int u = 0; u < nsteps; ++u{inc}) {{\n        const int st = {n} % {stages};\n        if ({n} >= {stages}) {wait}(empty + st, (({n} / {stages}) + 1) & 1);\n        const int t = t0 + u, rs = t / {chunks}, {channels}, r = rs / {kw}, sx = rs % {kw};\n        unsigned char* sa = smem + st * {stage_bytes};\n        mbar_expect(full + st, {stage_bytes});\n        #pragma unroll\n        for (int i = 0; i < {groups}; ++i)\n          {a_copy};\n        {b_copy};\n      }}\n{tiles_close}",
        kw = s.kw
    );
    super::cluster::producer_tail(&mut k, tile);
    k.push_str("    }\n    return;\n  }\n");
    consumers(&mut k, kernel, tile);
    k
}

/// The first statements of every warp-specialised kernel: `smem`, the dynamic shared memory
/// aligned to 1024 bytes (the 128-byte swizzle's period), and the thread's indices (`tid`,
/// `lane`, `warp`, its warpgroup `wg`, and `g`, `tg` within the warp's fragments).
pub(super) fn aligned_smem_and_indices(k: &mut String) {
    for line in [
        "extern __shared__ unsigned char smem_raw[];",
        "const unsigned raw = saddr(smem_raw);",
        "unsigned char* smem = smem_raw + ((1024 - (raw & 1023)) & 1023);",
        "const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wg = warp >> 2;",
        "const int g = lane >> 2, tg = lane & 3;",
    ] {
        let _ = writeln!(k, "  {line}");
    }
}

/// The start of a kernel whose operands a producer (warp or warpgroup) loads while the
/// warpgroups multiply: shared memory aligned to 1024 bytes, thread indices, each stage's
/// `full` and `empty` barriers after the stages, the block tile's first pixel and output
/// channel (`m0`, `n0`; a persistent block sets them per tile) and its K steps
/// ([`super::hopper_k::block_steps`]).
pub(super) fn warp_specialised_prologue(
    k: &mut String,
    kernel: &ConvKernel,
    tile: &HopperTile,
    steps: usize,
) {
    let HopperTile { bm, bn, stages, .. } = *tile;
    aligned_smem_and_indices(k);
    // The barriers after the stages: full[0 .. stages), then empty.
    let _ = writeln!(
        k,
        "  unsigned long long* full = (unsigned long long*)(smem + {});\n  unsigned long long* empty = full + {stages};",
        stages * (bm + bn) * tile.k_bytes
    );
    if !tile.persistent {
        let _ = writeln!(k, "  {}", tile_origin(tile, kernel));
    }
    super::hopper_k::block_steps(k, steps, tile.splits);
}

/// The warpgroups' part of such a kernel, to its end: wait for each stage to be full,
/// multiply it, release the stage read one step before; then the epilogue, synchronised among
/// the warpgroups with a named barrier (the producer has left). A persistent block does that
/// for each of its tiles, releases a tile's last stage once its multiplies are done, and
/// stages its output in the buffer after the stages ([`super::persistent`]).
pub(super) fn consumers(k: &mut String, kernel: &ConvKernel, tile: &HopperTile) {
    let HopperTile {
        bm,
        bn,
        stages,
        mr,
        k_bytes: row,
        ..
    } = *tile;
    let stage_bytes = (bm + bn) * row;
    let acc_t = if kernel.input == DType::I8 {
        "int"
    } else {
        "float"
    };
    let zero = format!(
        "  #pragma unroll\n  for (int i = 0; i < {}; ++i) (&acc[0][0][0])[i] = 0;",
        mr * bn / 2
    );
    let _ = writeln!(k, "  {acc_t} acc[{mr}][{}][4];", bn / 8);
    let (n, inc) = if tile.persistent {
        let _ = writeln!(k, "  int gs = 0;\n{}", tile_loop(tile, kernel, "  "));
        ("gs", ", ++gs")
    } else {
        ("u", "")
    };
    let _ = writeln!(
        k,
        "{zero}\n  for (int u = 0; u < nsteps; ++u{inc}) {{\n    const int st = {n} % {stages};\n    mbar_wait(full + st, ({n} / {stages}) & 1);\n    const unsigned char* sa = smem + st * {stage_bytes} + wg * {};\n    const unsigned char* sb = smem + st * {stage_bytes} + {};",
        mr * 64 * row,
        bm * row
    );
    super::hopper_k::wgmma_step(k, mr, row);
    let _ = writeln!(
        k,
        "    asm volatile(\"wgmma.wait_group.sync.aligned 1;\\n\" ::: \"memory\");\n    if (u > 0 && lane == 0) {}\n  }}",
        super::cluster::release(tile, &format!("({n} - 1) % {stages}"))
    );
    k.push_str("  asm volatile(\"wgmma.wait_group.sync.aligned 0;\\n\" ::: \"memory\");\n");
    // A cluster's producers wait for the release of every stage, the last ones included.
    if tile.cluster > 1 {
        let _ = writeln!(
            k,
            "  if (nsteps > 0 && lane == 0) {}",
            super::cluster::release(tile, &format!("(nsteps - 1) % {stages}"))
        );
    }
    let sync = format!(
        "asm volatile(\"bar.sync 1, {};\" ::: \"memory\");",
        tile.threads()
    );
    if tile.persistent {
        let _ = writeln!(
            k,
            "  if (lane == 0) mbar_arrive(empty + (gs - 1) % {stages});"
        );
        let row = format!("wg * {} + (warp & 3) * 16", mr * 64);
        staged_epilogue(k, kernel, tile, &row, Staged::Output, &sync);
        k.push_str("  }\n}\n");
        return;
    }
    hopper_epilogue(k, kernel, tile, &sync);
}

#[cfg(test)]
#[path = "tma_tests.rs"]
mod tests;
