//! Running grouped convolutions as super-groups on the Hopper kernel
//! ([`crate::conv::grouped_wgmma`]): the pass that writes the super-groups' block-diagonal
//! filter into scratch memory the [`crate::DeviceConv`] keeps, on the same stream just before
//! the kernel reads it.

use cudarc::driver::LaunchConfig;

use crate::conv::grouped_wgmma::{
    expand_grid, expand_source, expanded_filter_elements, EXPAND_THREADS,
};
use crate::conv::ConvKernel;
use crate::conv_space_to_depth::PrePass;
use crate::{Cuda, Error};

impl Cuda {
    /// Compiles (or finds in the caches) the filter pass of grouped `kernel` and allocates
    /// the filter it writes. Contract: `kernel`'s groups have fewer than 64 channels
    /// ([`crate::conv::grouped_wgmma::needs_expansion`]).
    pub(crate) fn prepare_expand_groups(&self, kernel: &ConvKernel) -> Result<PrePass, Error> {
        let bytes = expanded_filter_elements(kernel) * kernel.input.size_bytes();
        let function = self.compiled(&expand_source(kernel), "conv_expand_groups", Vec::new())?;
        // SAFETY: the pass writes every element before the convolution reads them (one
        // thread per element).
        let scratch = unsafe { self.stream.alloc::<u8>(bytes.max(16)) }
            .map_err(|e| Error::driver("cuMemAlloc", e))?;
        self.stream
            .synchronize()
            .map_err(|e| Error::driver("cuStreamSynchronize", e))?;
        Ok(PrePass {
            function,
            config: LaunchConfig {
                grid_dim: (expand_grid(kernel), 1, 1),
                block_dim: (EXPAND_THREADS, 1, 1),
                shared_mem_bytes: 0,
            },
            scratch,
            x_bytes: 0,
            filter_only: true,
        })
    }
}
