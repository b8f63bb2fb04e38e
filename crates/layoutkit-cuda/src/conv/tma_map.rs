//! The tensor maps the TMA kernel ([`super::tma`]) reads its operands through, encoded on the
//! host by the driver for the buffers of one launch (a map holds its tensor's address).
//!
//! * Activations, NHWC (`im2col` mode): a 4-D tensor (C, W, H, N), innermost first. The
//!   pixel box's lower corner is minus the padding and its upper corner the padding less the
//!   dilated filter's extent (in W and H), so that the box walked with the convolution's
//!   stride as the traversal stride has exactly OW x OH positions: the top-left input pixel of
//!   each output pixel's window. A copy is 64 pixels x a K step's row of channels (128, 64 or
//!   32 bytes: [`super::tma::row_bytes`]), swizzled in rows of that width; positions outside
//!   the tensor read zeros.
//! * Filter, OHWI (tiled mode): a 4-D tensor (C, KW, KH, O) read in boxes of a row of
//!   channels x one tap x `bn` output channels, swizzled the same way; output channels and
//!   channels past the tensor read zeros.

use cudarc::driver::sys::{
    self, CUtensorMapDataType, CUtensorMapFloatOOBfill, CUtensorMapInterleave,
    CUtensorMapL2promotion, CUtensorMapSwizzle,
};
use cudarc::driver::DeviceRepr;
use layoutkit_core::DType;

use super::tma::{plain_rows, row_bytes, PIXELS_PER_COPY};
use super::{ConvKernel, HopperTile};
use crate::Error;

/// An encoded tensor map (the driver's 128-byte `CUtensorMap`, 64-byte aligned), passed to the
/// kernel by value.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
pub struct TensorMap([u64; 16]);

// SAFETY: plain bytes, 128 of them, matching the kernel's `const __grid_constant__ TMap`
// parameter (a 64-byte-aligned struct of 16 u64).
unsafe impl DeviceRepr for TensorMap {}

/// The driver's element type for `t` (int8 as bytes: TMA only copies them).
fn data_type(t: DType) -> CUtensorMapDataType {
    match t {
        DType::F16 => CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
        DType::BF16 => CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
        _ => CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_UINT8,
    }
}

/// The im2col tensor map of `kernel`'s NHWC activations at device address `x`.
///
/// Contract: [`super::tma_applies`] holds for `kernel`; `x` is 16-byte aligned. Errors are the
/// driver's (an invalid map).
pub fn activation_map(kernel: &ConvKernel, x: u64) -> Result<TensorMap, Error> {
    if plain_rows(kernel) {
        return rows_map(kernel, x);
    }
    let s = &kernel.shape;
    let c = &s.conv;
    let e = kernel.input.size_bytes() as u64;
    let dims = [s.c as u64, s.w as u64, s.h as u64, s.n as u64];
    let row = s.c as u64 * e;
    let strides = [row, row * s.w as u64, row * (s.w * s.h) as u64];
    // W first, then H.
    let extent = |i: usize, k: usize| ((k - 1) * c.dilation[i]) as i32;
    let lower = [-(c.padding[1] as i32), -(c.padding[0] as i32)];
    let upper = [
        c.padding[1] as i32 - extent(1, s.kw),
        c.padding[0] as i32 - extent(0, s.kh),
    ];
    let element_strides = [1u32, c.stride[1] as u32, c.stride[0] as u32, 1];
    let row = row_bytes(kernel);
    let mut map = TensorMap([0; 16]);
    // SAFETY: every pointer addresses an array of the length the driver reads for a rank-4
    // map (4 dims, 3 strides, 2 corners, 4 element strides); `map` is 128 bytes, 64-aligned.
    let r = unsafe {
        sys::cuTensorMapEncodeIm2col(
            map.0.as_mut_ptr().cast(),
            data_type(kernel.input),
            4,
            x as *mut std::ffi::c_void,
            dims.as_ptr(),
            strides.as_ptr(),
            lower.as_ptr(),
            upper.as_ptr(),
            (row as u64 / e) as u32,
            PIXELS_PER_COPY as u32,
            element_strides.as_ptr(),
            CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
            swizzle(row),
            CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
            CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        )
    };
    check(r, "cuTensorMapEncodeIm2col")?;
    Ok(map)
}

/// The tiled tensor map of `kernel`'s OHWI filter at device address `w`, in boxes of `tile.bn`
/// output channels (half of them for a tile in clusters: [`HopperTile::filter_box_rows`]).
///
/// Contract: as [`activation_map`].
pub fn filter_map(kernel: &ConvKernel, tile: &HopperTile, w: u64) -> Result<TensorMap, Error> {
    let s = &kernel.shape;
    let e = kernel.input.size_bytes() as u64;
    let dims = [s.c as u64, s.kw as u64, s.kh as u64, s.o as u64];
    let row = s.c as u64 * e;
    let strides = [row, row * s.kw as u64, row * (s.kw * s.kh) as u64];
    let boxes = [
        (tile.k_bytes as u64 / e) as u32,
        1,
        1,
        tile.filter_box_rows() as u32,
    ];
    let promotion = CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_256B;
    tiled_map(
        kernel.input,
        w,
        (&dims, &strides, &boxes),
        promotion,
        tile.k_bytes,
    )
}

/// The activations of a 1x1 convolution with stride 1 and no padding as a plain matrix: a 2-D
/// tensor (C, N x H x W) read in boxes of a row of channels x 64 pixels.
fn rows_map(kernel: &ConvKernel, x: u64) -> Result<TensorMap, Error> {
    let s = &kernel.shape;
    let e = kernel.input.size_bytes() as u64;
    let dims = [s.c as u64, (s.n * s.h * s.w) as u64];
    let strides = [s.c as u64 * e];
    let row = row_bytes(kernel);
    let boxes = [(row as u64 / e) as u32, PIXELS_PER_COPY as u32];
    let promotion = CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_128B;
    tiled_map(kernel.input, x, (&dims, &strides, &boxes), promotion, row)
}

/// The tiled tensor map of `kernel`'s NHWC activations at device address `x` for the NHWC
/// footprint kernel ([`super::nhwc_footprint`]): a 2-D tensor (C, N x H x W) read in boxes of
/// a stage row of channels (`tile.k_bytes`) x [`super::nhwc_footprint::BOX_ROWS`] pixels,
/// swizzled in rows of that width; pixels past the batch read zeros.
///
/// Contract: [`super::nhwc_footprint::nhwc_footprint_unsupported_reason`] is None for
/// `kernel`; `x` is 16-byte aligned. Errors are the driver's (an invalid map).
pub fn footprint_map(kernel: &ConvKernel, tile: &HopperTile, x: u64) -> Result<TensorMap, Error> {
    let s = &kernel.shape;
    let e = kernel.input.size_bytes() as u64;
    let dims = [s.c as u64, (s.n * s.h * s.w) as u64];
    let strides = [s.c as u64 * e];
    let boxes = [
        (tile.k_bytes as u64 / e) as u32,
        super::nhwc_footprint::BOX_ROWS as u32,
    ];
    let promotion = CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_128B;
    tiled_map(
        kernel.input,
        x,
        (&dims, &strides, &boxes),
        promotion,
        tile.k_bytes,
    )
}

/// A tiled tensor map of `t` elements at `address`: extents `dims` (innermost first), byte
/// `strides` of the outer dimensions, boxes of `boxes`, swizzled in rows of `row` bytes (the
/// boxes' inner extent), zeros outside, with the L2 `promotion` given.
fn tiled_map<const R: usize>(
    t: DType,
    address: u64,
    (dims, strides, boxes): (&[u64; R], &[u64], &[u32; R]),
    promotion: CUtensorMapL2promotion,
    row: usize,
) -> Result<TensorMap, Error> {
    debug_assert_eq!(strides.len() + 1, R);
    let element_strides = [1u32; R];
    let mut map = TensorMap([0; 16]);
    // SAFETY: every pointer addresses an array of the length the driver reads for a rank-R map
    // (R dims, R - 1 strides, R box extents, R element strides); `map` is 128 bytes, 64-aligned.
    let r = unsafe {
        sys::cuTensorMapEncodeTiled(
            map.0.as_mut_ptr().cast(),
            data_type(t),
            R as u32,
            address as *mut std::ffi::c_void,
            dims.as_ptr(),
            strides.as_ptr(),
            boxes.as_ptr(),
            element_strides.as_ptr(),
            CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
            swizzle(row),
            promotion,
            CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        )
    };
    check(r, "cuTensorMapEncodeTiled")?;
    Ok(map)
}

/// The swizzle of stage rows of `row` bytes (128, 64 or 32), the one `wgmma`'s descriptors
/// name (`hopper_k::wgmma_function`).
fn swizzle(row: usize) -> CUtensorMapSwizzle {
    match row {
        128 => CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B,
        64 => CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_64B,
        _ => CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_32B,
    }
}

fn check(r: sys::CUresult, call: &str) -> Result<(), Error> {
    if r == sys::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(Error::driver(call, r))
    }
}
