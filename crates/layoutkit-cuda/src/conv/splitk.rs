//! Split K for the Hopper kernel: when a problem's output tiles are too few to occupy the GPU
//! (batch 1 and 8 on 7x7 and 14x14 planes: eight 64 x 64 tiles for 132 SMs, each walking the
//! 72 K steps of a 512-channel 3x3 layer alone), the K steps are divided among `splits`
//! blocks per tile (`blockIdx.z`). Each writes its f32 sums (i32 for int8) to a workspace
//! (`splits` x M x O, M = output pixels, row-major), and a second kernel, one thread per
//! output element, adds the splits in order, then the bias, applies ReLU and writes the output
//! in its layout and type. The sums are the same products added in another, fixed order (f32),
//! within the kernels' tolerance of the reference, and the same from run to run (int8's are
//! exact).
//!
//! The second launch costs a few microseconds (measured on an H100, `bench/results/conv.md`:
//! 2 splits were slower than none on most layers, 3 and more faster where the rule below
//! chooses them). Finishing the sums in the last block of each tile instead (a counter per
//! tile, one launch) measured 2-5x slower at batch 1: one block then walks all the splits'
//! sums alone.

use std::fmt::Write;

use layoutkit_core::DType;

use super::requant::{q8_function, requantised};
use super::source::{output_offset, to_output, Frags};
use super::{ConvKernel, HopperTile, SMS};

/// Threads per block of the reduction kernel.
pub const REDUCE_THREADS: u32 = 256;

/// The fewest K steps a split is given.
const MIN_STEPS_PER_SPLIT: usize = 4;

/// The most splits.
pub const MAX_SPLITS: usize = 32;

/// The fewest splits used: fewer do not pay for the second launch and the workspace's traffic
/// (measured; see the module).
const MIN_SPLITS: usize = 3;

/// Splits of K for `tile` on a problem of `steps` K steps: as many as bring the tile's blocks
/// to about one wave of the GPU's block slots (SMs x blocks resident per SM; `slots /
/// blocks`, rounded down), at most [`MAX_SPLITS`] and leaving each split at least four steps;
/// 1 (no split) where that gives fewer than three (the second launch costs more than two
/// splits save).
pub fn splits_for(tile: &HopperTile, s: &super::ConvShape, steps: usize) -> usize {
    let (x, y, _) = HopperTile { splits: 1, ..*tile }.grid(s);
    let blocks = (x as usize * y as usize).max(1);
    let splits = (SMS * tile.resident() / blocks)
        .min(steps / MIN_STEPS_PER_SPLIT)
        .min(MAX_SPLITS);
    if splits >= MIN_SPLITS {
        splits
    } else {
        1
    }
}

/// Bytes of the workspace a split-K run of `kernel` with `splits` needs (0 for one split).
pub fn workspace_bytes(kernel: &ConvKernel, splits: usize) -> usize {
    let s = &kernel.shape;
    if splits <= 1 {
        0
    } else {
        splits * s.n * s.oh * s.ow * s.o * 4
    }
}

/// Writes the accumulators (`frags`) as f32 to the workspace `part` at split `blockIdx.z`,
/// without bias or ReLU (the reduction applies them), and ends the kernel.
pub(super) fn partial_epilogue(k: &mut String, kernel: &ConvKernel, frags: &Frags) {
    let s = &kernel.shape;
    let (m, o) = (s.n * s.oh * s.ow, s.o);
    let Frags {
        mi,
        ni,
        row0,
        mstride,
        col0,
    } = frags;
    let t = if kernel.input == DType::I8 {
        "int"
    } else {
        "float"
    };
    let _ = writeln!(
        k,
        "  {t}* pz = ({t}*)part + (long long)blockIdx.z * {};\n  #pragma unroll\n  for (int mi = 0; mi < {mi}; ++mi)\n    #pragma unroll\n    for (int ni = 0; ni < {ni}; ++ni)\n      #pragma unroll\n      for (int h = 0; h < 2; ++h) {{\n        const int mm = {row0} + mi * {mstride} + g + h * 8, oc = {col0} + ni * 8 + tg * 2;\n        if (mm < {m}) {{\n          const long long i = (long long)mm * {o} + oc;",
        m * o
    );
    if o % 2 == 0 {
        let _ = writeln!(
            k,
            "          if (oc < {o}) *({t}2*)(pz + i) = make_{t}2(acc[mi][ni][2 * h], acc[mi][ni][2 * h + 1]);"
        );
    } else {
        let _ = writeln!(
            k,
            "          if (oc < {o}) pz[i] = acc[mi][ni][2 * h];\n          if (oc + 1 < {o}) pz[i + 1] = acc[mi][ni][2 * h + 1];"
        );
    }
    k.push_str("        }\n      }\n}\n");
}

/// CUDA source of `conv_splitk_reduce(part, y, bias)`: one thread per output element (grid
/// [`reduce_grid`], [`REDUCE_THREADS`] threads), adding the `splits` partial sums in order,
/// then the bias (f32, O values), ReLU when `kernel.relu`, and writing `y` in `kernel.out_layout`
/// of `kernel.out`.
pub fn reduce_source(kernel: &ConvKernel, splits: usize) -> String {
    let s = &kernel.shape;
    let (m, o) = (s.n * s.oh * s.ow, s.o);
    let int = kernel.input == DType::I8;
    let requant = requantised(kernel);
    let y_t = match kernel.out {
        DType::F16 | DType::BF16 => "unsigned short",
        DType::I32 => "int",
        DType::I8 => "signed char",
        _ => "float",
    };
    // int8's partial sums are i32 (exact in any order); it has no bias, or q8 applies the
    // scale, the bias and ReLU.
    let (t, zero, bias) = if int {
        ("int", "0", "")
    } else {
        ("float", "0.f", "  v += bias[oc];\n")
    };
    let (at, _) = output_offset(kernel);
    let relu = if kernel.relu && !requant {
        format!("  v = v < {zero} ? {zero} : v;\n")
    } else {
        String::new()
    };
    let value = if requant {
        format!("q8(v, (double)bias[oc], (double)bias[{o} + oc])")
    } else {
        to_output(kernel, "v")
    };
    let mut k = String::from("// Generated by layoutkit-cuda (conv, split-K reduction).\n");
    k.push_str(super::F2H);
    k.push_str(super::F2BF);
    q8_function(&mut k, kernel);
    let _ = write!(
        k,
        "extern \"C\" __global__ void conv_splitk_reduce(const {t}* __restrict__ part, {y_t}* __restrict__ y, const float* __restrict__ bias) {{\n  const long long e = (long long)blockIdx.x * {REDUCE_THREADS} + threadIdx.x;\n  if (e >= {total}LL) return;\n  const int mm = (int)(e / {o}), oc = (int)(e % {o});\n  {t} v = {zero};\n  #pragma unroll 4\n  for (int z = 0; z < {splits}; ++z) v += part[(long long)z * {total} + e];\n{bias}{relu}  y[{at}] = {value};\n}}\n",
        total = m * o,
    );
    k
}

/// Grid of the reduction kernel for `kernel`.
pub fn reduce_grid(kernel: &ConvKernel) -> (u32, u32, u32) {
    let s = &kernel.shape;
    let total = s.n * s.oh * s.ow * s.o;
    (total.div_ceil(REDUCE_THREADS as usize) as u32, 1, 1)
}
