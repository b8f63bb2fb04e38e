//! Helpers the CUDA convolution tests share: the device (or a skip), deterministic data, the
//! kernel for a problem, and element values for comparisons.
// Each test binary uses a part of these.
#![allow(dead_code)]

use layoutkit_core::conv::Conv2d;
use layoutkit_core::DType;
use layoutkit_cuda::conv::{ConvKernel, ConvLayout, ConvShape};
use layoutkit_cuda::Cuda;

/// The GPU, or None (the test is skipped) unless LAYOUTKIT_REQUIRE_CUDA=1 asks for one.
pub fn device() -> Option<Cuda> {
    match Cuda::new(0) {
        Ok(c) => Some(c),
        Err(e) => {
            if std::env::var("LAYOUTKIT_REQUIRE_CUDA").as_deref() == Ok("1") {
                panic!("LAYOUTKIT_REQUIRE_CUDA=1 but {e}");
            }
            eprintln!("skipped: {e}");
            None
        }
    }
}

/// A deterministic xorshift stream (the test problems' data).
pub fn xorshift(seed: u64) -> impl Iterator<Item = u64> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    std::iter::repeat_with(move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    })
}

/// int8 values in [-128, 127].
pub fn i8_noise(n: usize, seed: u64) -> Vec<u8> {
    xorshift(seed).take(n).map(|s| (s >> 56) as u8).collect()
}

/// bf16 bit patterns of values in [-1, 1).
pub fn bf16_noise(n: usize, seed: u64) -> Vec<u8> {
    f16_noise(n, seed)
        .chunks_exact(2)
        .flat_map(|c| {
            let v = half::f16::from_le_bytes([c[0], c[1]]).to_f32();
            half::bf16::from_f32(v).to_le_bytes()
        })
        .collect()
}

/// f16 bit patterns of values in [-1, 1) (multiples of 1/64: exact in f16).
pub fn f16_noise(n: usize, seed: u64) -> Vec<u8> {
    xorshift(seed)
        .take(n)
        .flat_map(|s| {
            let v = ((s >> 58) as f32 - 32.0) / 32.0 + ((s >> 20) % 64) as f32 / 2048.0;
            half::f16::from_f32(v).to_le_bytes()
        })
        .collect()
}

/// The elements of `b` (of type `t`) as f64, for comparisons with the reference.
pub fn values(b: &[u8], t: DType) -> Vec<f64> {
    match t {
        DType::F16 => b
            .chunks_exact(2)
            .map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f64())
            .collect(),
        DType::BF16 => b
            .chunks_exact(2)
            .map(|c| half::bf16::from_le_bytes([c[0], c[1]]).to_f64())
            .collect(),
        DType::I32 => b
            .chunks_exact(4)
            .map(|c| i32::from_le_bytes(c.try_into().unwrap()) as f64)
            .collect(),
        _ => b
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()) as f64)
            .collect(),
    }
}

/// One problem: n, c, h, w, o, kernel size, stride, padding, dilation, groups.
pub type Problem = (
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
);

/// The kernel input for `problem` in `layout` with `input` -> `out` (bias for 16-bit inputs).
pub fn kernel_for(
    problem: Problem,
    layout: ConvLayout,
    input: DType,
    out: DType,
    relu: bool,
) -> ConvKernel {
    let (n, c, h, w, o, k, stride, pad, dil, groups) = problem;
    let conv = Conv2d {
        stride: [stride; 2],
        padding: [pad; 2],
        dilation: [dil; 2],
        groups,
    };
    let oh = |x: usize| (x + 2 * pad - dil * (k - 1) - 1) / stride + 1;
    ConvKernel {
        shape: ConvShape {
            n,
            h,
            w,
            c,
            o,
            kh: k,
            kw: k,
            oh: oh(h),
            ow: oh(w),
            conv,
        },
        layout,
        out_layout: layout,
        input,
        out,
        bias: input != DType::I8,
        relu,
    }
}
