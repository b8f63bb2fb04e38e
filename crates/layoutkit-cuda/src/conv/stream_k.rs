//! Stream-K for the TMA kernel ([`super::tma`]): where the output tiles are fewer than the
//! GPU's SMs (ResNet-50's `l4 1x1 2048->512 @7` at batch 64: 100 tiles of 128 x 128 on 132
//! SMs), a grid of as many persistent blocks as the GPU holds at once divides the K steps of
//! all tiles, `tiles x steps` in all, into equal ranges, one per block, so every SM multiplies
//! for the same time where one tile per block leaves a quarter of them idle.
//!
//! A block walks its range tile by tile: a *segment* is the part of one tile's steps inside
//! the range. A segment holding a tile's first step (its *head*) ends the tile: where the
//! tile's later steps belong to the blocks after it (their ranges start inside the tile, so
//! those are their first segments), it waits for each of them to leave its sums in the
//! workspace, adds them in block order (the same order on every run) and writes the output
//! with the usual epilogue. A segment that starts inside a tile writes its sums to the
//! workspace (its block's slot: a block has at most one such segment, its first) and raises
//! its block's flag. A block waits only for the first segments of the blocks after it, which
//! wait for nothing, so no wait can close a cycle as long as every block of the grid is
//! resident at once: the grid is at most the GPU's SMs times the blocks one SM holds
//! ([`stream_k_blocks`], from the GPU's own SM count). The flags return to zero as they are
//! read, ready for the next run on the same workspace.
//!
//! Workspace ([`stream_k_workspace_bytes`]): a slot of `bm x bn` 4-byte sums per block (f32,
//! or i32 for int8: exact), in the consumer threads' register order (each thread's sums
//! interleaved with the other threads' 16 bytes at a time), then one 4-byte flag per block.

use std::fmt::Write;

use super::hopper::HopperTile;
use super::persistent::origin_of;
use super::{ConvKernel, ConvShape};
use layoutkit_core::DType;

impl HopperTile {
    /// This TMA tile (NHWC, one split) with stream-K: persistent blocks as
    /// [`HopperTile::with_persistent`] makes them, sharing K ([`super::stream_k`]); None where
    /// persistent blocks do not fit.
    pub fn with_stream_k(self, kernel: &ConvKernel) -> Option<HopperTile> {
        if !self.tma || self.nchw {
            return None;
        }
        HopperTile { splits: 1, ..self }
            .with_persistent(kernel)
            .map(|t| HopperTile {
                stream_k: true,
                ..t
            })
    }
}

/// The choice `LAYOUTKIT_CONV_STREAM_K` makes: `0` never, `1` wherever the TMA tile takes
/// it, anything else (or unset) the rule.
pub fn stream_k_from_env() -> Option<bool> {
    match std::env::var("LAYOUTKIT_CONV_STREAM_K").as_deref() {
        Ok("0") => Some(false),
        Ok("1") => Some(true),
        _ => None,
    }
}

/// K steps of the TMA kernel for `kernel` with `tile`'s stage rows: taps x rows of channels.
pub fn stream_k_steps(kernel: &ConvKernel, tile: &HopperTile) -> usize {
    let s = &kernel.shape;
    let per_step = tile.k_bytes / kernel.input.size_bytes();
    s.kh * s.kw * s.c.div_ceil(per_step)
}

/// Blocks of a stream-K grid for `tile` on a GPU of `sms` SMs: as many as it holds at once
/// (every block must be resident: they wait for one another), at most one per K step.
pub fn stream_k_blocks(tile: &HopperTile, s: &ConvShape, steps: usize, sms: usize) -> usize {
    let (x, y) = tile.tiles(s);
    (sms * tile.resident()).min(x * y * steps).max(1)
}

/// Bytes of the workspace of a stream-K grid of `blocks` blocks: a tile of 4-byte sums per
/// block, then a flag per block.
pub fn stream_k_workspace_bytes(tile: &HopperTile, blocks: usize) -> usize {
    blocks * (tile.bm * tile.bn * 4 + 4)
}

/// The C statements opening a stream-K block's loop over its segments: the block's range of
/// steps (`it .. it1` of `tiles x steps`), and per segment its `tile`, first step `t0`,
/// `nsteps` and the tile's first pixel and output channel (`m0`, `n0`).
pub(super) fn segment_loop(
    tile: &HopperTile,
    kernel: &ConvKernel,
    steps: usize,
    indent: &str,
) -> String {
    let (x, y) = tile.tiles(&kernel.shape);
    format!(
        "{indent}const long long total = {tiles}ll * {steps}, it1 = total * (blockIdx.x + 1) / gridDim.x;\n\
{indent}for (long long it = total * blockIdx.x / gridDim.x; it < it1; ) {{\n\
{indent}  const int tile = (int)(it / {steps}), t0 = (int)(it % {steps});\n\
{indent}  const int nsteps = (int)(it1 - it < {steps} - t0 ? it1 - it : {steps} - t0);\n\
{indent}  it += nsteps;\n\
{indent}  {}",
        origin_of("tile", tile, kernel),
        tiles = x * y,
    )
}

/// The warpgroups' statements after a segment's multiplies (all done) and before the
/// epilogue: a segment starting inside its tile leaves its sums in its block's slot, raises
/// its flag and goes on to the next segment; a head whose tile goes on in later blocks adds
/// their sums (waiting for each flag, clearing it). `sync` synchronises the warpgroups.
pub(super) fn fixup(
    k: &mut String,
    kernel: &ConvKernel,
    tile: &HopperTile,
    steps: usize,
    sync: &str,
) {
    let threads = tile.threads();
    let vectors = tile.mr * tile.bn / 8;
    let (v_t, make) = if kernel.input == DType::I8 {
        ("int4", "make_int4")
    } else {
        ("float4", "make_float4")
    };
    // DIAGNOSTIC (not kept): LAYOUTKIT_CONV_STREAM_K_FIXUP=none|write times the kernel without
    // the partial sums' traffic (wrong outputs).
    match std::env::var("LAYOUTKIT_CONV_STREAM_K_FIXUP").as_deref() {
        Ok("none") => {
            k.push_str("  if (t0 > 0) continue;\n");
            return;
        }
        Ok("write") => {
            let _ = writeln!(
                k,
                "  if (t0 > 0) {{\n    {v_t}* slots = ({v_t}*)part;\n    auto* a = &acc[0][0][0];\n    #pragma unroll\n    for (int j = 0; j < {vectors}; ++j)\n      __stcg(slots + ((long long)blockIdx.x * {vectors} + j) * {threads} + tid, {make}(a[4 * j], a[4 * j + 1], a[4 * j + 2], a[4 * j + 3]));\n    __threadfence();\n    {sync}\n    continue;\n  }}"
            );
            return;
        }
        _ => {}
    }
    let _ = writeln!(
        k,
        "  {{\n    {v_t}* slots = ({v_t}*)part;\n    unsigned* flags = (unsigned*)(part + (long long)gridDim.x * {tile_sums});\n    auto* a = &acc[0][0][0];\n    if (t0 > 0) {{\n      #pragma unroll\n      for (int j = 0; j < {vectors}; ++j)\n        __stcg(slots + ((long long)blockIdx.x * {vectors} + j) * {threads} + tid, {make}(a[4 * j], a[4 * j + 1], a[4 * j + 2], a[4 * j + 3]));\n      __threadfence();\n      {sync}\n      if (tid == 0) asm volatile(\"st.release.gpu.global.u32 [%0], 1;\" :: \"l\"(flags + blockIdx.x) : \"memory\");\n      continue;\n    }}\n    if (t0 + nsteps < {steps}) {{\n      const long long end = (long long)(tile + 1) * {steps};\n      for (int q = blockIdx.x + 1; q < gridDim.x && total * q / gridDim.x < end; ++q) {{\n        if (total * q / gridDim.x == total * (q + 1) / gridDim.x) continue;\n        if (tid == 0) {{\n          unsigned f = 0;\n          do {{ asm volatile(\"ld.acquire.gpu.global.u32 %0, [%1];\" : \"=r\"(f) : \"l\"(flags + q) : \"memory\"); }} while (f == 0);\n          flags[q] = 0;\n        }}\n        {sync}\n        #pragma unroll\n        for (int j = 0; j < {vectors}; ++j) {{\n          const {v_t} v = __ldcg(slots + ((long long)q * {vectors} + j) * {threads} + tid);\n          a[4 * j] += v.x; a[4 * j + 1] += v.y; a[4 * j + 2] += v.z; a[4 * j + 3] += v.w;\n        }}\n      }}\n    }}\n  }}",
        tile_sums = tile.bm * tile.bn,
    );
}

#[cfg(test)]
#[path = "stream_k_tests.rs"]
mod tests;
