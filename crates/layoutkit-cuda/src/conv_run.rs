//! Running the tensor-core convolution ([`crate::conv`]) on a [`Cuda`] device.

use cudarc::driver::{LaunchConfig, PushKernelArg};

use crate::conv::{
    block, conv_source, direct_grid, direct_source, direct_unsupported_reason, grid,
    padded_elements, unsupported_reason, ConvKernel, DIRECT_THREADS,
};
use crate::{Cuda, Error, Timing};

impl Cuda {
    /// Runs `kernel` once: convolves `x` (the physical array in `kernel.layout`, of
    /// `kernel.input`) with `w` (OHWI, same type), adds `bias` (O values; f16 inputs only) and
    /// applies ReLU when `kernel.relu`; returns the output in `kernel.layout` of `kernel.out`.
    /// Then runs `repeats` more times on the same device memory, each timed with CUDA events
    /// around `launches` back-to-back launches (the time is per launch).
    ///
    /// Problems the tensor-core kernel does not take (see [`crate::conv::unsupported_reason`])
    /// run in the direct kernel when it takes them (f16: groups, depthwise, any channel count;
    /// [`crate::conv::direct_unsupported_reason`]).
    ///
    /// Contract: errors (naming the tensor-core kernel's reason) for problems neither kernel
    /// takes, buffers of the wrong size, a bias that does not match `kernel.bias`, and GPUs
    /// older than sm_80. f16: f32 sums of exact products; int8: exact i32 sums.
    pub fn conv2d_timed(
        &self,
        kernel: &ConvKernel,
        x: &[u8],
        w: &[u8],
        bias: Option<&[f32]>,
        repeats: usize,
        launches: usize,
    ) -> Result<(Vec<u8>, Timing), Error> {
        let s = &kernel.shape;
        let direct = match unsupported_reason(kernel) {
            None => false,
            Some(why) => match direct_unsupported_reason(kernel) {
                None => true,
                Some(_) => return Err(Error::Unsupported(why)),
            },
        };
        if bias.is_some() != kernel.bias {
            return Err(Error::Unsupported(
                "the bias given does not match the kernel's (ConvKernel::bias)".into(),
            ));
        }
        let (major, minor) = self
            .ctx
            .compute_capability()
            .map_err(|e| Error::driver("cuDeviceGetAttribute", e))?;
        if major < 8 {
            return Err(Error::Unsupported(format!(
                "the tensor-core convolution needs sm_80 or newer; this GPU is sm_{major}{minor}"
            )));
        }
        let e = kernel.input.size_bytes();
        let sizes = [
            (
                "activations",
                x.len(),
                padded_elements(kernel, s.c, s.h, s.w) * e,
            ),
            (
                "filter",
                w.len(),
                s.o * s.kh * s.kw * (s.c / s.conv.groups.max(1)) * e,
            ),
        ];
        for (what, got, want) in sizes {
            if got != want {
                return Err(layoutkit_core::Error::BufferSize {
                    what: format!("{what} ({})", kernel.input),
                    expected_bytes: want,
                    actual_bytes: got,
                }
                .into());
            }
        }
        let bias: Vec<f32> = match bias {
            Some(b) if b.len() == s.o => b.to_vec(),
            Some(b) => {
                return Err(Error::Unsupported(format!(
                    "the bias has {} values, the output has O = {}",
                    b.len(),
                    s.o
                )))
            }
            None => vec![0.0; s.o],
        };
        let (source, name) = if direct {
            (direct_source(kernel), "conv_direct")
        } else {
            (conv_source(kernel), "conv")
        };
        let f = self.compiled(
            &source,
            name,
            vec![format!("--gpu-architecture=sm_{major}{minor}")],
        )?;
        let map = |e| Error::driver("cuMemcpyHtoD", e);
        let d_x = self.stream.clone_htod(x).map_err(map)?;
        let d_w = self.stream.clone_htod(w).map_err(map)?;
        let d_b = self.stream.clone_htod(&bias).map_err(map)?;
        let out_bytes = padded_elements(kernel, s.o, s.oh, s.ow) * kernel.out.size_bytes();
        let mut d_y = self
            .stream
            .alloc_zeros::<u8>(out_bytes.max(1))
            .map_err(|e| Error::driver("cuMemAlloc", e))?;
        let cfg = LaunchConfig {
            grid_dim: if direct { direct_grid(kernel) } else { grid(s) },
            block_dim: (if direct { DIRECT_THREADS } else { block(s) }, 1, 1),
            shared_mem_bytes: 0,
        };
        let timing = self.timed(repeats, launches, || {
            let mut b = self.stream.launch_builder(&f);
            b.arg(&d_x).arg(&d_w).arg(&mut d_y).arg(&d_b);
            // SAFETY: `conv` and `conv_direct` take (x, w, y, bias) as generated for `kernel`;
            // the buffers have the sizes checked above and the kernels guard every index.
            unsafe { b.launch(cfg) }.map_err(|e| Error::driver("cuLaunchKernel", e))?;
            Ok(())
        })?;
        let mut y = self
            .stream
            .clone_dtoh(&d_y)
            .map_err(|e| Error::driver("cuMemcpyDtoH", e))?;
        y.truncate(out_bytes);
        Ok((y, timing))
    }
}
