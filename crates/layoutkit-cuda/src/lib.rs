//! # layoutkit-cuda
//!
//! Layout conversion on NVIDIA GPUs. A [`ConversionPlan`](layoutkit_core::plan::ConversionPlan)
//! (computed once in `layoutkit-core`) becomes one kernel per region ([`codegen`]): shared-memory
//! tiles where the source's and the destination's contiguous loops differ, coalesced element
//! loops elsewhere, fills for padding, casts fused in the same pass. Kernels are compiled at run
//! time with NVRTC to CUBINs for the GPU at hand, cached in memory and on disk ([`kernel_cache`]).
//! [`Cuda::convert_on_stream`] converts device memory a caller holds (a framework's tensor) on
//! the caller's stream, with no host copy.
//!
//! [`conv`]: implicit-GEMM convolution with tensor cores on NHWC, NCHW or NC/32HW32
//! activations, f16 (f32 sums) or int8 (i32 sums) ([`Cuda::conv2d_timed`]).
//!
//! The driver and NVRTC are loaded at run time (`cudarc`'s dynamic loading), so the crate builds
//! and its device-free tests run anywhere; [`Cuda::new`] then fails with [`Error::NoDevice`].

pub mod codegen;
pub mod conv;
mod conv_env;
mod conv_grouped_wgmma;
mod conv_nchw;
mod conv_path;
pub mod conv_plan;
mod conv_run;
mod conv_space_to_depth;
pub use conv_path::ConvPath;
pub use conv_run::DeviceConv;
mod device;
mod error;
pub mod kernel_cache;
mod shifted;
mod timing;

pub use device::{Cuda, DeviceConversion};
pub use error::Error;
pub use kernel_cache::KernelCache;
pub use timing::{Launches, Timing};
