//! Requantisation of int8 convolutions in the epilogue: the exact i32 sum `acc` of output
//! channel `oc` becomes the i8 `sat(round(acc * scale[oc] + bias[oc]))` (ReLU before the
//! rounding where asked), the per-channel factor taking the product of the input and filter
//! scales to the output's. The arithmetic is that of the reference convolution
//! (`layoutkit_cpu::conv2d_reference`): the product and the sum each rounded to f64 once (no
//! fused multiply-add), then rounded half to even and saturated to [-128, 127], so the GPU's
//! bytes equal the reference's.
//!
//! The kernels' per-channel parameter buffer (`bias`) holds, for a requantised kernel, the O
//! scales followed by the O biases (f32; zeros where there is no bias):
//! [`channel_params`] builds it. The Hopper kernel's staged epilogue copies its block's
//! columns of them into shared memory as doubles before the tile is written (a thread of a
//! 256-column tile already holds 128 sums). A first version holding them in registers and
//! using conversion instructions ran at 0.67-0.91 of the i32 output's speed, this one at
//! 0.92-0.96 (`bench/results/conv.md`).

use layoutkit_core::DType;

use super::ConvKernel;

/// Whether `kernel` requantises: int8 inputs with an i8 output.
pub fn requantised(kernel: &ConvKernel) -> bool {
    kernel.input == DType::I8 && kernel.out == DType::I8
}

/// The f32 values of the kernels' per-channel parameter buffer for `kernel` with `bias` and
/// `scale` (each O values where given): the bias (zeros for none) for the float kernels, the
/// scales (ones for none) then the biases for a requantised int8 kernel, and O zeros (unread)
/// for an int8 kernel with an i32 output.
pub fn channel_params(
    kernel: &ConvKernel,
    bias: Option<&[f32]>,
    scale: Option<&[f32]>,
) -> Vec<f32> {
    let o = kernel.shape.o;
    let bias = bias.map_or_else(|| vec![0.0; o], <[f32]>::to_vec);
    if requantised(kernel) {
        let mut p = scale.map_or_else(|| vec![1.0; o], <[f32]>::to_vec);
        p.extend(bias);
        p
    } else {
        bias
    }
}

/// The device functions `q8(acc, s, b)` (the requantised value of sum `acc` with scale `s`
/// and bias `b`; ReLU baked in when `kernel.relu`) and `q8c(acc, p, oc)` (the same with
/// output channel `oc`'s parameters read from the parameter buffer `p`, 0 past O) for a
/// requantised `kernel`, or nothing for other kernels.
///
/// Conversions to and from 64-bit types run at a quarter of the FP64 add and multiply rate on
/// sm_90 (16 against 64 per clock per SM, the CUDA programming guide's throughput table), so
/// none is used: the sum
/// becomes a double through the exponent of 2^52 (`2^52 + 2^31 + acc`, exact, less the
/// constant), and the clamped value is rounded half to even by adding 1.5 x 2^52 (the
/// integer is then the low word). ReLU is the clamp's lower bound of 0, the same value as
/// clamping a ReLU'd value: six FP64 operations per output, the reference's roundings.
pub(super) fn q8_function(k: &mut String, kernel: &ConvKernel) {
    if !requantised(kernel) {
        return;
    }
    let o = kernel.shape.o;
    let lo = if kernel.relu { "0.0" } else { "-128.0" };
    k.push_str("__device__ __forceinline__ signed char q8(int acc, double s, double b) {\n");
    k.push_str("  const double a = __dadd_rn(__hiloint2double(0x43300000, acc ^ 0x80000000), -4503601774854144.0);\n");
    k.push_str("  double v = __dadd_rn(__dmul_rn(a, s), b);\n");
    k.push_str(&format!("  v = fmin(fmax(v, {lo}), 127.0);\n"));
    k.push_str("  return (signed char)__double2loint(__dadd_rn(v, 6755399441055744.0));\n}\n");
    k.push_str(&format!(
        "__device__ __forceinline__ signed char q8c(int acc, const float* __restrict__ p, int oc) {{\n  return oc < {o} ? q8(acc, (double)__ldg(p + oc), (double)__ldg(p + {o} + oc)) : (signed char)0;\n}}\n"
    ));
}
