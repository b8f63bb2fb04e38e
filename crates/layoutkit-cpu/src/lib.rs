//! # layoutkit-cpu
//!
//! Layout conversion on the CPU.
//!
//! * [`convert_reference`]: one destination element at a time through the inverse and forward
//!   maps of `layoutkit-core`. Slow and obviously right: the oracle every other path (planned
//!   CPU, CUDA, OpenCL) is tested against.
//! * [`convert_planned`]: executes a [`ConversionPlan`]: strided boxes with the loops contiguous
//!   in both layouts merged, whole runs copied at once, padding filled, casts on the way.
//! * [`convert_fast`]: the fast engine: the same plan with whole runs as slice copies/casts,
//!   cache-sized transposition tiles (AVX2 where the CPU has it) and threads.
//! * [`convert`]: plans and runs in one call, allocating the destination.
//! * [`conv2d_reference`]: the reference 2-D convolution (f64, any operand layouts).
//! * [`conv2d_fast`]: implicit-GEMM convolution on f32 NCHW / NHWC / `NCHW<x>c` activations.
//! * [`conv2d_blocked`]: the register-blocked convolution (AVX-512 / AVX2 / portable tiles,
//!   filters packed once into [`BlockedFilter`] panels), falling back to [`conv2d_fast`].
//! * [`conv2d_int8`]: i8 x i8 convolution with exact i32 sums (AVX-512 VNNI / AVX2 / portable).
//!
//! ```
//! use layoutkit_core::{parse_format, CastSpec, DType, Dims};
//! let dims = Dims::parse("N=1,C=3,H=1,W=2").unwrap();
//! let nchw = parse_format("NCHW").unwrap().shaped(&dims).unwrap();
//! let khwc8 = parse_format("kHWC8").unwrap().shaped(&dims).unwrap();
//! let src: Vec<u8> = (0..6).collect();
//! let out = layoutkit_cpu::convert(&nchw, &src, &khwc8, &CastSpec::identity(DType::U8)).unwrap();
//! assert_eq!(out, vec![0, 2, 4, 0, 0, 0, 0, 0, 1, 3, 5, 0, 0, 0, 0, 0]);
//! ```
// `unsafe` lives only in the fast engine and the convolutions (SIMD kernels, the shared
// destination, the spinning pool that hands borrowed work to its threads), each block with a
// `// SAFETY:` line.
#![deny(unsafe_code)]

// The README's Rust examples are compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
mod readme_examples {}

mod conv_auto;
#[allow(unsafe_code)]
mod conv_blocked;
#[allow(unsafe_code)]
mod conv_depthwise;
#[allow(unsafe_code)]
mod conv_fast;
#[allow(unsafe_code)]
mod conv_int8;
mod conv_reference;
mod error;
#[allow(unsafe_code)]
mod fast;
mod planned;
mod reference;
#[allow(unsafe_code)]
mod spin_pool;
mod winograd;

pub use conv_auto::{conv2d_auto, conv2d_engine, CpuConvEngine};
pub use conv_blocked::{
    blocked_supergroup, conv2d_blocked, conv2d_blocked_into, conv2d_blocked_unsupported,
    expand_groups, BlockedFilter, ConvKernels,
};
pub use conv_depthwise::{conv2d_depthwise_into, conv2d_depthwise_supports, DepthwiseFilter};
pub use conv_fast::{conv2d_fast, conv2d_fast_packed, conv2d_fast_supports, PackedFilter};
pub use conv_int8::{conv2d_int8, conv2d_int8_build, conv2d_int8_supports};
pub use conv_reference::{conv2d_reference, Epilogue, TensorRef};
pub use error::Error;
pub use fast::{convert_fast, AlignedBuf, FastConversion};
pub use planned::convert_planned;
pub use reference::convert_reference;
pub use winograd::{winograd_filter_to_image, winograd_image_to_filter};

use layoutkit_core::plan::ConversionPlan;
use layoutkit_core::{CastSpec, ShapedLayout};

/// Plans `src -> dst` and runs it with [`convert_planned`], returning the destination bytes.
pub fn convert(
    src: &ShapedLayout,
    src_data: &[u8],
    dst: &ShapedLayout,
    cast: &CastSpec,
) -> Result<Vec<u8>, Error> {
    let plan = ConversionPlan::new(src, dst)?;
    let mut out = vec![0u8; dst.bytes(cast.dst)?];
    convert_planned(&plan, src_data, &mut out, cast)?;
    Ok(out)
}

/// Checks that the buffers hold exactly the physical arrays of `src` and `dst`.
fn check_buffers(
    src: &ShapedLayout,
    src_data: &[u8],
    dst: &ShapedLayout,
    dst_data: &[u8],
    cast: &CastSpec,
) -> Result<(), Error> {
    for (what, layout, data, dtype) in [
        ("source", src, src_data, cast.src),
        ("destination", dst, dst_data, cast.dst),
    ] {
        let expected = layout.bytes(dtype)?;
        if data.len() != expected {
            return Err(layoutkit_core::Error::BufferSize {
                what: format!("{what} {} of {dtype}", layout.layout()),
                expected_bytes: expected,
                actual_bytes: data.len(),
            }
            .into());
        }
    }
    Ok(())
}
