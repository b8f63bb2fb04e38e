//! The CPU convolution engine chosen for a problem: one rule, shared by `layoutkit conv` and the
//! Python package.

use layoutkit_core::conv::Conv2d;
use layoutkit_core::{DType, ShapedLayout};

use crate::conv_blocked::ConvKernels;
use crate::{
    conv2d_blocked, conv2d_fast_supports, conv2d_int8, conv2d_int8_supports, conv2d_reference,
    Epilogue, Error, TensorRef,
};

/// A CPU convolution engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CpuConvEngine {
    /// [`conv2d_int8`]: i8 activations and filter, exact i32 sums.
    Int8,
    /// [`conv2d_blocked`]: f32 activations in NCHW, NHWC or `NCHW<x>c` (what its tiles do not
    /// cover goes to the implicit GEMM).
    Blocked,
    /// [`conv2d_reference`]: everything else.
    Reference,
}

impl CpuConvEngine {
    /// The engine's name as `layoutkit conv` reports it.
    pub fn name(self) -> &'static str {
        match self {
            CpuConvEngine::Int8 => "int8",
            CpuConvEngine::Blocked => "blocked",
            CpuConvEngine::Reference => "reference",
        }
    }
}

/// The engine for these operands: int8 for i8 activations and filter, the register-blocked
/// engine for f32 activations it reads (NCHW, NHWC, `NCHW<x>c`), the reference for anything else
/// and for strided views (operands that are not contiguous in their layout).
pub fn conv2d_engine(x: &TensorRef<'_>, w: &TensorRef<'_>) -> CpuConvEngine {
    if x.layout.is_strided() || w.layout.is_strided() {
        CpuConvEngine::Reference
    } else if conv2d_int8_supports(x, w) {
        CpuConvEngine::Int8
    } else if conv2d_fast_supports(x) {
        CpuConvEngine::Blocked
    } else {
        CpuConvEngine::Reference
    }
}

/// The convolution of [`conv2d_reference`] by the engine [`conv2d_engine`] chooses (the
/// reference where the epilogue has a requantisation scale the blocked engine lacks), on
/// `threads` threads with the kernel build `kernels` (int8 and blocked engines); returns the
/// output and the engine that ran.
///
/// Contract: each engine's own (the reference's output; f32 sums for the blocked engine,
/// exact for int8).
#[allow(clippy::too_many_arguments)]
pub fn conv2d_auto(
    conv: &Conv2d,
    x: TensorRef<'_>,
    w: TensorRef<'_>,
    epilogue: &Epilogue<'_>,
    y: &ShapedLayout,
    y_dtype: DType,
    threads: usize,
    kernels: ConvKernels,
) -> Result<(Vec<u8>, CpuConvEngine), Error> {
    let engine = match conv2d_engine(&x, &w) {
        CpuConvEngine::Blocked if epilogue.scale.is_some() => CpuConvEngine::Reference,
        e => e,
    };
    let threads = threads.max(1);
    let out = match engine {
        CpuConvEngine::Int8 => conv2d_int8(conv, x, w, epilogue, y, y_dtype, threads, kernels),
        CpuConvEngine::Blocked => {
            conv2d_blocked(conv, x, w, epilogue, y, y_dtype, threads, kernels)
        }
        CpuConvEngine::Reference => conv2d_reference(conv, x, w, epilogue, y, y_dtype),
    }?;
    Ok((out, engine))
}

#[cfg(test)]
mod tests {
    use super::*;
    use layoutkit_core::{parse_format, Dims};

    #[test]
    fn the_engine_follows_the_operands() {
        let x = parse_format("NCHW")
            .unwrap()
            .shaped(&Dims::parse("N=1,C=4,H=5,W=5").unwrap())
            .unwrap();
        let w = parse_format("OIHW")
            .unwrap()
            .shaped(&Dims::parse("O=2,I=4,H=3,W=3").unwrap())
            .unwrap();
        let bytes = vec![0u8; 1024];
        let t = |layout, dtype| TensorRef {
            layout,
            dtype,
            data: &bytes,
        };
        let engine = |xt, wt, xl| conv2d_engine(&t(xl, xt), &t(&w, wt));
        assert_eq!(engine(DType::I8, DType::I8, &x), CpuConvEngine::Int8);
        assert_eq!(engine(DType::F32, DType::F32, &x), CpuConvEngine::Blocked);
        assert_eq!(engine(DType::F16, DType::F32, &x), CpuConvEngine::Reference);
        // A view every other element of a larger array: strided, the reference's.
        let strided = x.with_strides(&[200, 50, 10, 2]).unwrap();
        assert!(strided.is_strided());
        assert_eq!(
            engine(DType::F32, DType::F32, &strided),
            CpuConvEngine::Reference
        );
        assert_eq!(CpuConvEngine::Int8.name(), "int8");
    }
}
