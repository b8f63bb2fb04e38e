//! The Hopper kernel's epilogue through shared memory: the block's output tile is written from
//! the accumulators into the (then idle) stages, and copied out from there in runs the output
//! layout keeps contiguous, 16 bytes per thread where the layout allows.
//!
//! Written straight from the accumulators (as [`super::source::epilogue`] does for the
//! `mma.sync` kernel), each store of a warp covers 8 pixels x 4 pairs of channels: eight 16-byte
//! pieces of eight output rows in NHWC, half of each 32-byte sector, and in NCHW 2-byte values
//! scattered over eight channel planes. Staged, a warp stores contiguous runs: a pixel's
//! channels (NHWC and the split-K workspace; 512 bytes for a 256-column f16 tile), one
//! 32-channel group of consecutive pixels (NC/32HW32), or 128 bytes of one channel's pixels
//! (NCHW), filling whole 32-byte sectors away from the edges. Measured on the 1x1 layers (H100,
//! `bench/results/conv.md`): 1.3-2x faster in NHWC.
//!
//! Shared-memory layout of the staged tile (`T` the output element):
//! * pixel-major (NHWC, NC/32HW32, the workspace): row `r` (pixel) at `r * ld`, `ld = bn + 8`
//!   elements, so that the eight rows a warp's store touches start 16 (2-byte `T`) or 32
//!   (f32, i32) bytes apart in the banks (`bn + 16` for the 1-byte i8 of a requantised
//!   output, which keeps each row on a 16-byte boundary);
//! * channel-major (NCHW): column `c` (channel) at `c * ld`, `ld = bm + 4` elements (the four
//!   column pairs a warp's store touches 16 or 32 bytes apart).
//!
//! A persistent block ([`super::persistent`]) stages its tile in a buffer of its own, whole or,
//! where that leaves room for one more stage, in passes: one 64-row block of each warpgroup at
//! a time (`bm / mr` rows per pass).

use std::fmt::Write;

use layoutkit_core::DType;

use super::requant::requantised;
use super::source::{epilogue, output_offset, to_output, Frags};
use super::splitk::partial_epilogue;
use super::{ConvKernel, ConvLayout, HopperTile};

/// What the staged epilogue writes: the output (bias, ReLU, the output type and layout) or
/// the f32 partial sums of one split of K to the workspace (`part`, row-major M x O, see
/// [`super::splitk`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Staged {
    Output,
    Partial,
}

/// The element type, its size in bytes, whether the tile is staged channel-major, and the
/// leading dimension (elements) of the staged tile.
fn geometry(
    kernel: &ConvKernel,
    tile: &HopperTile,
    what: Staged,
) -> (&'static str, usize, bool, usize) {
    let (t, size) = match (what, kernel.out) {
        (Staged::Output, DType::F16 | DType::BF16) => ("unsigned short", 2),
        (Staged::Output, DType::I8) => ("signed char", 1),
        _ if kernel.input == DType::I8 => ("int", 4),
        _ => ("float", 4),
    };
    let channel_major = what == Staged::Output && kernel.out_layout == ConvLayout::Nchw;
    // Rows of 1-byte elements keep 16 bytes of padding, so every row starts on a 16-byte
    // boundary for the copy out.
    let ld = if channel_major {
        tile.bm / tile.epilogue_passes + 4
    } else if size == 1 {
        tile.bn + 16
    } else {
        tile.bn + 8
    };
    (t, size, channel_major, ld)
}

/// Bytes of shared memory the staged tile takes, staged in the tile's `epilogue_passes` (1, or its `mr`:
/// one 64-row block of each warpgroup per pass).
pub(super) fn staged_bytes(kernel: &ConvKernel, tile: &HopperTile, what: Staged) -> usize {
    let (_, size, channel_major, ld) = geometry(kernel, tile, what);
    tile_bytes(size, channel_major, ld, tile) + params_bytes(kernel, tile, what)
}

/// Bytes of the staged output tile alone (16-byte aligned), staged in the tile's passes.
fn tile_bytes(size: usize, channel_major: bool, ld: usize, tile: &HopperTile) -> usize {
    (size
        * ld
        * if channel_major {
            tile.bn
        } else {
            tile.bm / tile.epilogue_passes
        })
    .next_multiple_of(16)
}

/// Bytes of the requantisation parameters staged after the tile: the scale and bias of each
/// of the tile's columns as doubles (0 for other kernels).
fn params_bytes(kernel: &ConvKernel, tile: &HopperTile, what: Staged) -> usize {
    if what == Staged::Output && requantised(kernel) {
        2 * 8 * tile.bn
    } else {
        0
    }
}

/// Whether the staged tile fits in the stages of `tile` (else the kernel writes from the
/// accumulators directly).
pub(super) fn staged_fits(kernel: &ConvKernel, tile: &HopperTile, what: Staged) -> bool {
    staged_bytes(kernel, tile, what) <= tile.stages * (tile.bm + tile.bn) * tile.k_bytes
}

/// Writes the Hopper kernel's epilogue through shared memory: `acc[mi][ni][4]` as laid out by
/// `wgmma` m64nN (fragment (mi, ni) at tile rows `row + mi * 64 + g (+ 8)`, columns `ni * 8 +
/// tg * 2 (+ 1)`; `row` a C expression relative to the tile), the tile at (`m0`, `n0`) of the
/// output. [`Staged::Output`] adds the bias, applies ReLU and writes `y` in the kernel's output
/// type and layout (requantised int8: [`super::requant`]); [`Staged::Partial`] writes the raw
/// sums to split `blockIdx.z` of `part`.
///
/// `sync` is the barrier among the threads that run the epilogue (`__syncthreads();` where
/// every thread of the block does; a named barrier over the warpgroups where a producer warp
/// has left). The tile is staged in the stages (idle by then), or for a persistent `tile` in
/// its buffer after them ([`HopperTile::epilogue_offset`]), in its `epilogue_passes`.
///
/// Does not end the kernel's body: the statements run once per tile. Contract: without
/// `persistent`, [`staged_fits`] holds and the stages are not read again; with it, the buffer
/// holds [`staged_bytes`] and no thread of the epilogue still reads it from an earlier tile
/// except before the first `sync`; every multiply has completed in this thread (`wgmma`
/// groups waited for).
pub(super) fn staged_epilogue(
    k: &mut String,
    kernel: &ConvKernel,
    tile: &HopperTile,
    row: &str,
    what: Staged,
    sync: &str,
) {
    let s = &kernel.shape;
    let (m, o, ohw) = (s.n * s.oh * s.ow, s.o, s.oh * s.ow);
    let (bm, bn, threads) = (tile.bm, tile.bn, tile.threads());
    let (mi, ni) = (tile.mr, bn / 8);
    let (t, size, channel_major, ld) = geometry(kernel, tile, what);
    // A persistent tile's own buffer after the stages, in its passes; else the idle stages.
    let (at, passes) = if tile.persistent {
        let at = format!("(smem + {})", tile.epilogue_offset());
        (at, tile.epilogue_passes)
    } else {
        ("smem".to_string(), 1)
    };
    let output = what == Staged::Output;
    // int8: exact i32 sums (the workspace holds i32 too), requantised by q8 (scale, bias,
    // ReLU) for an i8 output, else no bias.
    let requant = output && requantised(kernel);
    let int = kernel.input == DType::I8 && !requant;
    let (v_t, zero) = match (requant, int) {
        (true, _) => ("signed char", "0"),
        (_, true) => ("int", "0"),
        _ => ("float", "0.f"),
    };
    // Every warpgroup has waited for its own multiplies; after this barrier none reads a stage.
    let _ = writeln!(k, "  {sync}\n  {t}* so = ({t}*){at};");
    if requant {
        // The tile's scales and biases, as doubles, after the staged tile (read by q8 from
        // shared memory; a barrier before the first read).
        let after = tile_bytes(size, channel_major, ld, tile);
        let _ = writeln!(
            k,
            "  double* ps = (double*)({at} + {after});\n  double* pb = ps + {bn};\n  for (int i = tid; i < {bn}; i += {threads}) {{\n    const int oc = n0 + i;\n    ps[i] = oc < {o} ? (double)bias[oc] : 0.0;\n    pb[i] = oc < {o} ? (double)bias[{o} + oc] : 0.0;\n  }}\n  {sync}"
        );
    } else if output && !int {
        let _ = writeln!(
            k,
            "  float bv[{ni}][2];\n  #pragma unroll\n  for (int ni = 0; ni < {ni}; ++ni)\n    #pragma unroll\n    for (int e = 0; e < 2; ++e) {{\n      const int oc = n0 + ni * 8 + tg * 2 + e;\n      bv[ni][e] = oc < {o} ? bias[oc] : 0.f;\n    }}"
        );
    }
    let add = |v: &str, e: usize| {
        if requant {
            format!("q8({v}, ps[c + {e}], pb[c + {e}])")
        } else if output {
            let b = if int {
                v.to_string()
            } else {
                format!("{v} + bv[ni][{e}]")
            };
            if kernel.relu {
                format!("({b} < {zero} ? {zero} : {b})")
            } else {
                b
            }
        } else {
            v.to_string()
        }
    };
    let conv = |v: &str| {
        if output {
            to_output(kernel, v)
        } else {
            v.to_string()
        }
    };
    let dst = if output { "y" } else { "pz" };
    // Staged in passes, the buffer holds one 64-row block of each warpgroup at a time: pass p
    // writes the accumulators' row block p, buffer row lr being tile row
    // (lr / 64) * (mr * 64) + p * 64 + lr % 64.
    let rows = bm / passes;
    for p in 0..passes {
        let (mi0, mi1, r, map) = if passes == 1 {
            (
                0,
                mi,
                format!("{row} + mi * 64 + g + h * 8"),
                "r".to_string(),
            )
        } else {
            // The previous pass's copies out have read the buffer.
            if p > 0 {
                let _ = writeln!(k, "  {sync}");
            }
            (
                p,
                p + 1,
                "wg * 64 + (warp & 3) * 16 + g + h * 8".to_string(),
                format!("(r / 64) * {} + {} + r % 64", mi * 64, p * 64),
            )
        };
        let _ = writeln!(
            k,
            "  #pragma unroll\n  for (int mi = {mi0}; mi < {mi1}; ++mi)\n    #pragma unroll\n    for (int ni = 0; ni < {ni}; ++ni)\n      #pragma unroll\n      for (int h = 0; h < 2; ++h) {{\n        const int r = {r}, c = ni * 8 + tg * 2;\n        const {v_t} v0 = {}, v1 = {};",
            add("acc[mi][ni][2 * h]", 0),
            add("acc[mi][ni][2 * h + 1]", 1)
        );
        if channel_major {
            let _ = writeln!(
                k,
                "        so[c * {ld} + r] = {};\n        so[(c + 1) * {ld} + r] = {};",
                conv("v0"),
                conv("v1")
            );
        } else if size == 1 {
            let _ = writeln!(
                k,
                "        *(unsigned short*)(so + r * {ld} + c) = (unsigned short)((unsigned char)v0 | ((unsigned)(unsigned char)v1 << 8));"
            );
        } else if size == 2 {
            let _ = writeln!(
                k,
                "        *(unsigned int*)(so + r * {ld} + c) = (unsigned int){} | ((unsigned int){} << 16);",
                conv("v0"),
                conv("v1")
            );
        } else {
            let _ = writeln!(
                k,
                "        *({v_t}2*)(so + r * {ld} + c) = make_{v_t}2(v0, v1);"
            );
        }
        let _ = writeln!(k, "      }}\n  {sync}");
        if !output && p == 0 {
            let _ = writeln!(
                k,
                "  {t}* pz = ({t}*)part + (long long)blockIdx.z * {};",
                m * o
            );
        }
        // Elements per 16-byte chunk, and the columns of the tile worth copying: all of them, or
        // O's where one tile spans every output channel (a 64-column tile for O = 16 copies 16).
        let v = 16 / size;
        let cols = if o <= bn { o.next_multiple_of(v) } else { bn };
        let copy_out = |k: &mut String, count: usize, body: &str| {
            let _ = writeln!(
                k,
                "  #pragma unroll 4\n  for (int i = tid; i < {count}; i += {threads}) {{\n{body}  }}"
            );
        };
        if channel_major {
            if ohw % 2 == 0 {
                // Two consecutive pixels of one channel per thread (never in two images: OHW even).
                let pair = if size == 2 { "unsigned int" } else { "float2" };
                let half = rows / 2;
                copy_out(
                    k,
                    half * cols,
                    &format!(
                        "    const int r = (i % {half}) * 2, c = i / {half}, mm = m0 + {map}, oc = n0 + c;\n    if (mm < {m} && oc < {o}) *({pair}*)({dst} + ((long long)(mm / {ohw}) * {o} + oc) * {ohw} + mm % {ohw}) = *(const {pair}*)(so + c * {ld} + r);\n"
                    ),
                );
            } else {
                copy_out(
                    k,
                    rows * cols,
                    &format!(
                        "    const int r = i % {rows}, c = i / {rows}, mm = m0 + {map}, oc = n0 + c;\n    if (mm < {m} && oc < {o}) {dst}[((long long)(mm / {ohw}) * {o} + oc) * {ohw} + mm % {ohw}] = so[c * {ld} + r];\n"
                    ),
                );
            }
        } else if output && kernel.out_layout == ConvLayout::Nc32hw32 {
            // 32 channels of one pixel are contiguous: a thread per 16-byte piece of them, the
            // pieces of consecutive pixels next.
            let (at, _) = output_offset(kernel);
            let g = 32 / v;
            copy_out(
                k,
                rows * cols / v,
                &format!(
                    "    const int q = i % {g}, r = (i / {g}) % {rows}, grp = i / {}, mm = m0 + {map}, oc = n0 + grp * 32 + q * {v};\n    if (mm < {m} && oc < {o}) {{ const long long at = {at}; *(uint4*)({dst} + at) = *(const uint4*)(so + r * {ld} + grp * 32 + q * {v}); }}\n",
                    g * rows
                ),
            );
        } else if o % v == 0 {
            // Row-major (NHWC or the workspace): 16-byte pieces of a pixel's channels.
            let ch = cols / v;
            copy_out(
                k,
                rows * ch,
                &format!(
                    "    const int r = i / {ch}, q = i % {ch}, mm = m0 + {map}, oc = n0 + q * {v};\n    if (mm < {m} && oc < {o}) *(uint4*)({dst} + (long long)mm * {o} + oc) = *(const uint4*)(so + r * {ld} + q * {v});\n"
                ),
            );
        } else {
            copy_out(
                k,
                rows * cols,
                &format!(
                    "    const int r = i / {cols}, c = i % {cols}, mm = m0 + {map}, oc = n0 + c;\n    if (mm < {m} && oc < {o}) {dst}[(long long)mm * {o} + oc] = so[r * {ld} + c];\n"
                ),
            );
        }
    }
}

/// Ends a Hopper kernel's body after its last `wgmma` group is waited for: the staged
/// epilogue where the tile fits the stages (`sync` the barrier among the threads that run it),
/// else the direct one; partial sums to the workspace with a split of K, else the output.
pub(super) fn hopper_epilogue(k: &mut String, kernel: &ConvKernel, tile: &HopperTile, sync: &str) {
    let row = format!("wg * {} + (warp & 3) * 16", tile.mr * 64);
    let what = if tile.splits > 1 {
        Staged::Partial
    } else {
        Staged::Output
    };
    if staged_fits(kernel, tile, what) {
        staged_epilogue(k, kernel, tile, &row, what, sync);
        k.push_str("}\n");
        return;
    }
    let frags = Frags {
        mi: tile.mr,
        ni: tile.bn / 8,
        row0: format!("m0 + {row}"),
        mstride: 64,
        col0: "n0".into(),
    };
    if tile.splits > 1 {
        partial_epilogue(k, kernel, &frags);
    } else {
        epilogue(k, kernel, &frags);
    }
}
