//! Running a strided convolution of few channels through space to depth
//! ([`crate::conv::space_to_depth`]): the regrouping pass writes the regrouped activations and
//! filter into scratch memory the [`crate::DeviceConv`] keeps, on the same stream just before
//! the tensor-core kernel reads them.

use cudarc::driver::sys::CUstream;
use cudarc::driver::{CudaFunction, CudaSlice, DevicePtr, LaunchConfig, PushKernelArg};

use crate::conv::space_to_depth::{
    space_to_depth_bytes, space_to_depth_launch, space_to_depth_problem, space_to_depth_source,
    space_to_depth_unsupported_reason,
};
use crate::conv::{ConvKernel, HopperTile};
use crate::{ConvPath, Cuda, DeviceConv, Error};

/// A pass that runs before a convolution's kernel and rewrites its operands into scratch
/// memory: the space-to-depth regrouping (the regrouped activations, then the regrouped
/// filter at a 16-byte boundary), or with `filter_only` the super-groups' filter
/// ([`crate::conv::grouped_wgmma`]; the activations are read where they are).
pub(crate) struct PrePass {
    function: CudaFunction,
    config: LaunchConfig,
    scratch: CudaSlice<u8>,
    x_bytes: usize,
    filter_only: bool,
}

impl Cuda {
    /// The pass `name` of `source` (compiled, or found in the caches) on `grid_dim` blocks of
    /// `threads`, with scratch memory of `x_bytes` of activations (0 for a `filter_only`
    /// pass) and `w_bytes` of filter after them. Contract: the pass writes every byte of the
    /// scratch it is given before the convolution reads it.
    pub(crate) fn prepare_pass(
        &self,
        (source, name): (&str, &str),
        (grid_dim, threads): ((u32, u32, u32), u32),
        (x_bytes, w_bytes): (usize, usize),
        filter_only: bool,
    ) -> Result<PrePass, Error> {
        let function = self.compiled(source, name, Vec::new())?;
        // SAFETY: every byte is written by the pass before it is read (the contract).
        let scratch = unsafe { self.stream.alloc::<u8>((x_bytes + w_bytes).max(16)) }
            .map_err(|e| Error::driver("cuMemAlloc", e))?;
        self.stream
            .synchronize()
            .map_err(|e| Error::driver("cuStreamSynchronize", e))?;
        Ok(PrePass {
            function,
            config: LaunchConfig {
                grid_dim,
                block_dim: (threads, 1, 1),
                shared_mem_bytes: 0,
            },
            scratch,
            x_bytes,
            filter_only,
        })
    }

    /// Compiles (or finds in the caches) the regrouping pass of `kernel` and allocates its
    /// scratch memory. Contract: [`space_to_depth_problem`] takes `kernel`.
    fn prepare_space_to_depth(&self, kernel: &ConvKernel) -> Result<PrePass, Error> {
        // The pass's threads cover every 16-byte chunk of both regions.
        self.prepare_pass(
            (&space_to_depth_source(kernel), "conv_space_to_depth"),
            space_to_depth_launch(kernel),
            space_to_depth_bytes(kernel).expect("a problem it takes"),
            false,
        )
    }
}

impl PrePass {
    /// Bytes of scratch memory the pass keeps.
    pub(crate) fn scratch_bytes(&self) -> usize {
        self.scratch.len()
    }

    /// Queues the pass on `stream`, reading the activations at `x` and the OHWI filter at `w`;
    /// returns the device addresses of the activations and filter the convolution's kernel
    /// reads (`x` itself for a `filter_only` pass).
    ///
    /// # Safety
    /// `x` and `w` must address the original convolution's activations and filter in device
    /// memory of this context, aligned to their element size, valid until the pass has run;
    /// `stream` a live stream of that context; runs of one pass must not overlap in time
    /// (they share the scratch memory).
    pub(crate) unsafe fn launch(
        &self,
        cuda: &Cuda,
        x: u64,
        w: u64,
        stream: CUstream,
    ) -> Result<(u64, u64), Error> {
        let (base, _sync) = self.scratch.device_ptr(self.scratch.stream());
        let (xs, ws) = (base, base + self.x_bytes as u64);
        // SAFETY: the caller guarantees `stream` is a live stream of this context; the
        // wrapper does not own it.
        let borrowed = unsafe { cuda.ctx.wrap_borrowed_stream(stream) };
        let mut b = borrowed.launch_builder(&self.function);
        if self.filter_only {
            b.arg(&w).arg(&ws);
        } else {
            b.arg(&x).arg(&w).arg(&xs).arg(&ws);
        }
        // SAFETY: `conv_space_to_depth` takes (x, w, xs, ws), `conv_expand_groups` (w, ws),
        // as generated for this problem; the scratch holds the outputs (allocated with their
        // sizes, the filter's region starting at a multiple of 16 bytes: x_bytes is 0 or
        // rounded so) and the caller guarantees the inputs.
        unsafe { b.launch(self.config) }.map_err(|e| Error::driver("cuLaunchKernel", e))?;
        Ok((if self.filter_only { x } else { xs }, ws))
    }
}

impl Cuda {
    /// [`Cuda::prepare_conv_with`] for [`ConvPath::SpaceToDepth`]: the Hopper kernel with
    /// `tile` on the regrouped problem, and the regrouping pass. Errors where the problem is
    /// not regrouped or the Hopper kernel does not take the regrouped problem.
    pub(crate) fn prepare_space_to_depth_conv(
        &self,
        kernel: &ConvKernel,
        tile: HopperTile,
    ) -> Result<DeviceConv, Error> {
        let inner = space_to_depth_problem(kernel).ok_or_else(|| {
            Error::Unsupported(space_to_depth_unsupported_reason(kernel).unwrap_or_default())
        })?;
        let conv = self.prepare_conv_with(&inner, ConvPath::Hopper(tile))?;
        Ok(conv.regrouped(kernel, self.prepare_space_to_depth(kernel)?))
    }
}
