//! # layoutkit-opencl
//!
//! Layout conversion on OpenCL devices, with real `image2d_t` images (`CL_RGBA`, `CL_FLOAT` or
//! `CL_HALF_FLOAT`) for image layouts such as MACE's. Kernels are generated from the layouts
//! ([`codegen`]) rather than written per layout, compiled once per conversion and cached.
//!
//! The OpenCL library is loaded at run time, so this crate builds and its device-free tests run
//! on machines without OpenCL; [`OpenCl::new`] then fails with [`Error::NoDevice`]. Pick a
//! device with the `LAYOUTKIT_OPENCL_DEVICE` environment variable (a substring of the platform
//! or device name) or [`OpenCl::new`]'s selector; otherwise the first GPU, else the first
//! device, is used.
//!
//! Images are checked against `CL_DEVICE_IMAGE2D_MAX_WIDTH/HEIGHT` before anything is
//! allocated, and every kernel samples with `CLK_ADDRESS_CLAMP`, so reads outside an image
//! give zero (what MACE's kernels rely on).

pub mod codegen;
mod device;
mod error;
mod run;

pub use device::{DeviceInfo, OpenCl};
pub use error::Error;
pub use run::Timing;
