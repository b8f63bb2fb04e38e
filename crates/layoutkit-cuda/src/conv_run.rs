//! Running the tensor-core convolution ([`crate::conv`]) on a [`Cuda`] device.

use cudarc::driver::sys::{CUfunction_attribute_enum, CUstream};
use cudarc::driver::{DevicePtr, DevicePtrMut, LaunchConfig, PushKernelArg};

use crate::conv::grouped_wgmma::{
    filter_view, grouped_tile_reason, grouped_wgmma_unsupported_reason, needs_expansion,
};
use crate::conv::nchw_footprint::{footprint_rows, footprint_unsupported_reason};
use crate::conv::nhwc_footprint::{nhwc_buffer_rows, nhwc_footprint_unsupported_reason};
use crate::conv::splitk::{reduce_grid, reduce_source, workspace_bytes, REDUCE_THREADS};
use crate::conv::tma_map::{activation_map, filter_map, footprint_map, TensorMap};
use crate::conv::{
    block, conv_source, depthwise_applies, depthwise_launch, depthwise_source, direct_grid,
    direct_source, direct_unsupported_reason, grid, grouped_applies, grouped_launch,
    grouped_source, hopper_source, hopper_unsupported_reason, nchw_unsupported_reason,
    unsupported_reason, ConvKernel, DIRECT_THREADS,
};
use crate::conv_path::ConvPath;
use crate::conv_space_to_depth::PrePass;
use crate::{Cuda, Error, Launches, Timing};

impl Cuda {
    /// The device's compute capability (major, minor); an error below sm_80, which every
    /// convolution kernel here needs.
    pub(crate) fn conv_capability(&self) -> Result<(i32, i32), Error> {
        let (major, minor) = self
            .ctx
            .compute_capability()
            .map_err(|e| Error::driver("cuDeviceGetAttribute", e))?;
        if major < 8 {
            return Err(Error::Unsupported(format!(
                "the tensor-core convolution needs sm_80 or newer; this GPU is sm_{major}{minor}"
            )));
        }
        Ok((major, minor))
    }

    /// Runs `kernel` once: convolves `x` (the physical array in `kernel.layout`, of
    /// `kernel.input`) with `w` (OHWI, same type), multiplies by `scale` (O values; a
    /// requantised int8 kernel only, ones where None), adds `bias` (O values) and applies
    /// ReLU when `kernel.relu`; returns the output in `kernel.out_layout` of `kernel.out`.
    /// Then runs `repeats` more times on the same device memory, each timed with CUDA events
    /// around `launches` (a CUDA graph of that many launches, GPU time only, or launches
    /// queued from the host; the time is per launch, the split-K reduction included).
    ///
    /// The kernel is [`Cuda::conv_path`]'s: the Hopper kernel on sm_90 where it applies, else
    /// `mma.sync`; problems the tensor-core kernels do not take (see
    /// [`crate::conv::unsupported_reason`]) run in the direct kernel when it takes them (f16:
    /// groups, depthwise, any channel count; [`crate::conv::direct_unsupported_reason`]).
    ///
    /// Contract: errors (naming the tensor-core kernel's reason) for problems neither kernel
    /// takes, buffers of the wrong size, a bias that does not match `kernel.bias`, a scale for
    /// a kernel that does not requantise ([`crate::conv::requantised`]), and GPUs older than
    /// sm_80. f16: f32 sums of exact products; int8: exact i32 sums (requantised: the
    /// reference convolution's bytes, [`crate::conv::requant`]).
    pub fn conv2d_timed(
        &self,
        kernel: &ConvKernel,
        x: &[u8],
        w: &[u8],
        (bias, scale): (Option<&[f32]>, Option<&[f32]>),
        repeats: usize,
        launches: Launches,
    ) -> Result<(Vec<u8>, Timing), Error> {
        let path = self.conv_path(kernel)?;
        self.conv2d_timed_with(kernel, path, x, w, (bias, scale), repeats, launches)
    }

    /// [`Cuda::conv2d_timed`] with the kernel `path` chosen by the caller (to compare them).
    ///
    /// Contract: as [`Cuda::conv2d_timed`]; errors when `path` does not take `kernel` (the
    /// Hopper kernel on a GPU other than sm_90 included).
    #[allow(clippy::too_many_arguments)]
    pub fn conv2d_timed_with(
        &self,
        kernel: &ConvKernel,
        path: ConvPath,
        x: &[u8],
        w: &[u8],
        (bias, scale): (Option<&[f32]>, Option<&[f32]>),
        repeats: usize,
        launches: Launches,
    ) -> Result<(Vec<u8>, Timing), Error> {
        let conv = self.prepare_conv_with(kernel, path)?;
        if bias.is_some() != kernel.bias {
            return Err(Error::Unsupported(
                "the bias given does not match the kernel's (ConvKernel::bias)".into(),
            ));
        }
        if scale.is_some() && !crate::conv::requantised(kernel) {
            return Err(Error::Unsupported(format!(
                "a requantisation scale is for int8 convolutions with an i8 output, not {} -> {}",
                kernel.input, kernel.out
            )));
        }
        conv.check_sizes(x.len(), w.len(), conv.y_bytes)?;
        let o = kernel.shape.o;
        for (what, v) in [("bias", bias), ("scale", scale)] {
            if let Some(v) = v.filter(|v| v.len() != o) {
                return Err(Error::Unsupported(format!(
                    "the {what} has {} values, the output has O = {o}",
                    v.len()
                )));
            }
        }
        let params = crate::conv::channel_params(kernel, bias, scale);
        let map = |e| Error::driver("cuMemcpyHtoD", e);
        let d_x = self.stream.clone_htod(x).map_err(map)?;
        let d_w = self.stream.clone_htod(w).map_err(map)?;
        let d_b = self.stream.clone_htod(&params).map_err(map)?;
        let alloc = |bytes: usize| {
            self.stream
                .alloc_zeros::<u8>(bytes.max(1))
                .map_err(|e| Error::driver("cuMemAlloc", e))
        };
        let mut d_y = alloc(conv.y_bytes)?;
        let timing = {
            let (xp, _x) = d_x.device_ptr(&self.stream);
            let (wp, _w) = d_w.device_ptr(&self.stream);
            let (bp, _b) = d_b.device_ptr(&self.stream);
            let (yp, _y) = d_y.device_ptr_mut(&self.stream);
            self.timed_launches(repeats, launches, |raw| {
                // SAFETY: the buffers were allocated above with the sizes `conv` needs
                // (checked by `check_sizes`), from CUDA's allocator (16-byte aligned), and
                // live until the timing has synchronised; `raw` is a live stream of this
                // context, and the runs never overlap in time (one stream at a time, the
                // other finished first), so the workspace is never shared.
                unsafe {
                    self.conv2d_on_stream(
                        &conv,
                        (xp, conv.x_bytes),
                        (wp, conv.w_bytes),
                        bp,
                        (yp, conv.y_bytes),
                        raw,
                    )
                }
            })?
        };
        let mut y = self
            .stream
            .clone_dtoh(&d_y)
            .map_err(|e| Error::driver("cuMemcpyDtoH", e))?;
        y.truncate(conv.y_bytes);
        Ok((y, timing))
    }

    /// Compiles (or finds in the caches) and loads `kernel` on [`Cuda::conv_path`]'s path,
    /// ready for [`Cuda::conv2d_on_stream`].
    pub fn prepare_conv(&self, kernel: &ConvKernel) -> Result<DeviceConv, Error> {
        let path = self.conv_path(kernel)?;
        self.prepare_conv_with(kernel, path)
    }

    /// [`Cuda::prepare_conv`] on the path `path` (an error when it does not take `kernel`,
    /// the Hopper kernel on a GPU other than sm_90 included).
    pub fn prepare_conv_with(
        &self,
        kernel: &ConvKernel,
        path: ConvPath,
    ) -> Result<DeviceConv, Error> {
        if let ConvPath::SpaceToDepth(tile) = path {
            return self.prepare_space_to_depth_conv(kernel, tile);
        }
        let s = &kernel.shape;
        let (major, minor) = self.conv_capability()?;
        // A TMA tile's stage rows are the kernel's (a tile made by hand has 128-byte rows).
        let path = match path {
            ConvPath::Hopper(t) => ConvPath::Hopper(t.with_rows_of(kernel)),
            p => p,
        };
        let why_not = match path {
            ConvPath::Hopper(_) if major != 9 => Some(format!(
                "the Hopper kernel needs an sm_90 GPU; this one is sm_{major}{minor}"
            )),
            ConvPath::Hopper(t) if t.group_channels > 0 => {
                grouped_wgmma_unsupported_reason(kernel).or_else(|| grouped_tile_reason(kernel, &t))
            }
            ConvPath::Hopper(t) if t.footprint_rows > 0 && !t.nchw => {
                nhwc_footprint_unsupported_reason(kernel).or_else(|| {
                    let need = nhwc_buffer_rows(&kernel.shape, t.bm);
                    (t.footprint_rows < need || !t.tma).then(|| {
                        format!(
                            "the tile's NHWC footprint buffers hold {} rows; this problem needs {need}",
                            t.footprint_rows
                        )
                    })
                })
            }
            ConvPath::Hopper(t) if t.footprint_rows > 0 => footprint_unsupported_reason(kernel)
                .or_else(|| {
                    let need = footprint_rows(&kernel.shape, t.bm);
                    (t.footprint_rows < need).then(|| {
                        format!(
                            "the tile's footprint buffers hold {} rows; this problem needs {need}",
                            t.footprint_rows
                        )
                    })
                }),
            ConvPath::Hopper(t) if t.nchw => nchw_unsupported_reason(kernel),
            ConvPath::Hopper(t) if t.tma => hopper_unsupported_reason(kernel)
                .or_else(|| crate::conv::tma_unsupported_reason(kernel)),
            ConvPath::Hopper(_) => hopper_unsupported_reason(kernel),
            ConvPath::TensorCore => unsupported_reason(kernel),
            ConvPath::Direct => direct_unsupported_reason(kernel),
            ConvPath::SpaceToDepth(_) => unreachable!("prepared above"),
        };
        if let Some(why) = why_not {
            return Err(Error::Unsupported(why));
        }
        if let ConvPath::Hopper(t) = path {
            if t.with_cluster(t.cluster) != Some(t) {
                return Err(Error::Unsupported(format!(
                    "{t:?}: clusters of two take one-tile TMA blocks whose half of the columns \
                     is a multiple of 8"
                )));
            }
        }
        let arch = vec![format!("--gpu-architecture=sm_{major}{minor}")];
        // The split-K workspace (every element is written before it is read) and the
        // reduction that finishes the output.
        let (workspace, reduce) = match path {
            ConvPath::Hopper(tile) if tile.splits > 1 => {
                // SAFETY: the kernel writes every element before the reduction reads it.
                let w = unsafe {
                    self.stream
                        .alloc::<u8>(workspace_bytes(kernel, tile.splits))
                }
                .map_err(|e| Error::driver("cuMemAlloc", e))?;
                self.stream
                    .synchronize()
                    .map_err(|e| Error::driver("cuStreamSynchronize", e))?;
                let f = self.compiled(
                    &reduce_source(kernel, tile.splits),
                    "conv_splitk_reduce",
                    arch.clone(),
                )?;
                let cfg = LaunchConfig {
                    grid_dim: reduce_grid(kernel),
                    block_dim: (REDUCE_THREADS, 1, 1),
                    shared_mem_bytes: 0,
                };
                (Some(w), Some((f, cfg)))
            }
            _ => (None, None),
        };
        let (function, config) = match path {
            ConvPath::SpaceToDepth(_) => unreachable!("prepared above"),
            ConvPath::Hopper(tile) => {
                let name = match (tile.nchw, tile.tma) {
                    (true, _) => "conv_wgmma_nchw",
                    (false, true) => "conv_wgmma_tma",
                    _ => "conv_wgmma",
                };
                let f = self.compiled(
                    &hopper_source(kernel, &tile),
                    name,
                    vec![format!("--gpu-architecture=sm_{major}{minor}a")],
                )?;
                let smem = tile.shared_bytes();
                f.set_attribute(
                    CUfunction_attribute_enum::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    smem as i32,
                )
                .map_err(|e| Error::driver("cuFuncSetAttribute", e))?;
                let cfg = LaunchConfig {
                    grid_dim: tile.grid(s),
                    block_dim: (tile.block_threads() as u32, 1, 1),
                    shared_mem_bytes: smem as u32,
                };
                (f, cfg)
            }
            ConvPath::TensorCore => {
                let cfg = LaunchConfig {
                    grid_dim: grid(s),
                    block_dim: (block(s), 1, 1),
                    shared_mem_bytes: 0,
                };
                (self.compiled(&conv_source(kernel), "conv", arch)?, cfg)
            }
            ConvPath::Direct => {
                let (source, grid_dim, threads) = if depthwise_applies(kernel) {
                    let (g, t) = depthwise_launch(kernel);
                    (depthwise_source(kernel), g, t)
                } else if grouped_applies(kernel) {
                    let (g, t) = grouped_launch(kernel);
                    (grouped_source(kernel), g, t)
                } else {
                    (direct_source(kernel), direct_grid(kernel), DIRECT_THREADS)
                };
                let cfg = LaunchConfig {
                    grid_dim,
                    block_dim: (threads, 1, 1),
                    shared_mem_bytes: 0,
                };
                (self.compiled(&source, "conv_direct", arch)?, cfg)
            }
        };
        // Super-groups of groups under 64 channels read a block-diagonal filter a pass
        // writes first.
        let regroup = match path {
            ConvPath::Hopper(t) if t.group_channels > 0 && needs_expansion(kernel) => {
                Some(self.prepare_expand_groups(kernel)?)
            }
            _ => None,
        };
        let e = kernel.input.size_bytes();
        Ok(DeviceConv {
            kernel: *kernel,
            run_kernel: *kernel,
            path,
            function,
            config,
            workspace,
            reduce,
            regroup,
            x_bytes: kernel.x_elements() * e,
            w_bytes: kernel.w_elements() * e,
            y_bytes: kernel.y_elements() * kernel.out.size_bytes(),
        })
    }

    /// Queues `conv` on `stream` (a raw `CUstream` of this GPU's primary context, e.g. a
    /// framework's current stream), reading the activations at `x` (the physical array of
    /// `kernel.layout`), the filter at `w` (OHWI) and the per-channel parameters at `bias`
    /// ([`crate::conv::channel_params`]: O f32 bias values, zeros for none, which every float
    /// kernel reads; 2 x O for a requantised int8 kernel, the scales then the biases; unused
    /// by int8 kernels with an i32 output), and
    /// writing the output at `y` (in `kernel.out_layout`). Returns once queued: nothing is
    /// synchronised. Contract: as [`Cuda::conv2d_timed`] (the same kernels).
    ///
    /// # Safety
    /// `x`, `w` and `y` must address the bytes [`DeviceConv::bytes`] gives of device memory in
    /// this GPU's primary context (readable, readable, writable), `bias` `4 * O` readable bytes
    /// (`8 * O` for a requantised int8 kernel, any address for an int8 kernel with an i32
    /// output), all valid until the queued work has run; `y` must not
    /// overlap the others; `stream` must be a live stream of that context. A `conv` that
    /// keeps scratch memory ([`DeviceConv::workspace_bytes`] > 0: K split among blocks, or
    /// the space-to-depth pass's regrouped tensors, the super-groups' filter) keeps one: its runs must not
    /// overlap in time (queue them on one stream, or order the streams); otherwise use one
    /// DeviceConv per stream.
    ///
    /// The tensor-core kernels copy the activations and the filter, and the Hopper kernel
    /// stores the output, 16 bytes at a time (the space-to-depth pass reads the activations
    /// in runs of up to 16 bytes, the depthwise kernel NCHW rows in runs of up to 16 bytes and
    /// NHWC channel pairs, the grouped kernel a group's channels and filter rows in runs of
    /// up to 16 bytes): on those paths `x`, `w` and `y` must start on
    /// 16-byte boundaries (an error otherwise; allocations from CUDA's allocators do).
    pub unsafe fn conv2d_on_stream(
        &self,
        conv: &DeviceConv,
        (x, x_bytes): (u64, usize),
        (w, w_bytes): (u64, usize),
        bias: u64,
        (y, y_bytes): (u64, usize),
        stream: CUstream,
    ) -> Result<(), Error> {
        conv.check_sizes(x_bytes, w_bytes, y_bytes)?;
        if conv.y_bytes == 0 {
            return Ok(());
        }
        // The direct kernel loads and stores elements, the depthwise and grouped ones vectors.
        let vectors = !matches!(conv.path, ConvPath::Direct)
            || depthwise_applies(&conv.kernel)
            || grouped_applies(&conv.kernel);
        if vectors && [x, w, y].iter().any(|p| p % 16 != 0) {
            return Err(Error::Unsupported(format!(
                "the {} convolution kernel needs its activations, filter and output on 16-byte \
                 boundaries (addresses {x:#x}, {w:#x}, {y:#x})",
                conv.path
            )));
        }
        // SAFETY: the caller guarantees `stream` is a live stream of this context; the
        // wrapper does not own it (dropping it destroys nothing).
        let borrowed = unsafe { self.ctx.wrap_borrowed_stream(stream) };
        let (x, w) = match &conv.regroup {
            // SAFETY: the caller's guarantees for x, w and stream, and the runs of one
            // DeviceConv never overlapping, are the pass's.
            Some(pass) => unsafe { pass.launch(self, x, w, stream) }?,
            None => (x, w),
        };
        let part = conv.workspace_address();
        let maps = conv.tensor_maps(x, w)?;
        if let (ConvPath::Hopper(t), Some((Some(tx), tw))) = (conv.path, &maps) {
            if t.cluster > 1 {
                self.ctx
                    .bind_to_thread()
                    .map_err(|e| Error::driver("cuCtxSetCurrent", e))?;
                let mut params = [
                    tx as *const TensorMap as *mut std::ffi::c_void,
                    tw as *const TensorMap as *mut _,
                    &y as *const u64 as *mut _,
                    &bias as *const u64 as *mut _,
                    &part as *const u64 as *mut _,
                ];
                // SAFETY: `conv_wgmma_tma(tx, tw, y, bias, part)` as generated for
                // `conv.kernel` in clusters of `t.cluster` blocks along x (the grid's x a
                // multiple of it); the parameters point at locals alive through the call; the
                // buffers are the caller's contract, as below.
                unsafe {
                    crate::conv::cluster::launch_in_clusters(
                        &conv.function,
                        conv.config,
                        t.cluster,
                        stream,
                        &mut params,
                    )
                }?;
                return self.finish_split(conv, &borrowed, part, y, bias);
            }
        }
        let mut b = borrowed.launch_builder(&conv.function);
        if let Some((Some(tx), tw)) = &maps {
            b.arg(tx).arg(tw);
        } else if let Some((None, tw)) = &maps {
            b.arg(&x).arg(tw);
        } else {
            b.arg(&x).arg(&w);
        }
        b.arg(&y).arg(&bias);
        if matches!(conv.path, ConvPath::Hopper(_) | ConvPath::SpaceToDepth(_)) {
            b.arg(&part);
        }
        // SAFETY: the kernels take (x, w, y, bias) pointers, `conv_wgmma` also the
        // workspace, `conv_wgmma_tma` the maps of x and w in place of their pointers, as
        // generated for `conv.kernel`; the buffer sizes were checked above
        // (their validity is the caller's contract), the workspace is `conv`'s own (the
        // caller orders the runs of one DeviceConv), and the kernels guard every index.
        unsafe { b.launch(conv.config) }.map_err(|e| Error::driver("cuLaunchKernel", e))?;
        self.finish_split(conv, &borrowed, part, y, bias)
    }

    /// Queues the split-K reduction of `conv` (where it splits K) after its launch.
    fn finish_split(
        &self,
        conv: &DeviceConv,
        stream: &cudarc::driver::CudaStream,
        part: u64,
        y: u64,
        bias: u64,
    ) -> Result<(), Error> {
        if let Some((f, cfg)) = &conv.reduce {
            let mut r = stream.launch_builder(f);
            r.arg(&part).arg(&y).arg(&bias);
            // SAFETY: `conv_splitk_reduce` takes (part, y, bias) as generated for
            // `conv.kernel`; `part` was written by the launch just before on this stream.
            unsafe { r.launch(*cfg) }.map_err(|e| Error::driver("cuLaunchKernel", e))?;
        }
        Ok(())
    }
}

/// A convolution ready to run on one GPU: its kernel compiled and loaded, with the launch
/// shape and the buffer sizes it needs.
pub struct DeviceConv {
    /// The convolution the caller asked for (its buffers' sizes).
    kernel: ConvKernel,
    /// The problem `function` computes: `kernel`, or its regrouped problem after `regroup`.
    run_kernel: ConvKernel,
    path: ConvPath,
    function: cudarc::driver::CudaFunction,
    config: LaunchConfig,
    /// The split-K workspace (the splits' partial sums) and the reduction that finishes the
    /// output, where the Hopper kernel divides K among several blocks.
    workspace: Option<cudarc::driver::CudaSlice<u8>>,
    reduce: Option<(cudarc::driver::CudaFunction, LaunchConfig)>,
    /// The pass that runs first: space to depth ([`ConvPath::SpaceToDepth`]), or the
    /// super-groups' filter ([`crate::conv::grouped_wgmma`]).
    regroup: Option<PrePass>,
    x_bytes: usize,
    w_bytes: usize,
    y_bytes: usize,
}

impl DeviceConv {
    /// `self` (prepared for `kernel`'s regrouped problem) as `kernel`'s convolution: `pass`
    /// runs first, the buffers are `kernel`'s.
    pub(crate) fn regrouped(self, kernel: &ConvKernel, pass: PrePass) -> DeviceConv {
        let ConvPath::Hopper(tile) = self.path else {
            unreachable!("space to depth runs the Hopper kernel")
        };
        let e = kernel.input.size_bytes();
        DeviceConv {
            kernel: *kernel,
            path: ConvPath::SpaceToDepth(tile),
            regroup: Some(pass),
            x_bytes: kernel.x_elements() * e,
            w_bytes: kernel.w_elements() * e,
            ..self
        }
    }

    /// The kernel that runs.
    pub fn path(&self) -> ConvPath {
        self.path
    }

    /// Bytes of scratch memory this convolution keeps: the split-K workspace and the
    /// space-to-depth pass's regrouped tensors or the super-groups' filter (0 without any).
    pub fn workspace_bytes(&self) -> usize {
        self.workspace.as_ref().map_or(0, |w| w.len())
            + self.regroup.as_ref().map_or(0, |p| p.scratch_bytes())
    }

    /// The device address of the split-K workspace (0 without one).
    fn workspace_address(&self) -> u64 {
        self.workspace.as_ref().map_or(0, |w| {
            let (ptr, _sync) = cudarc::driver::DevicePtr::device_ptr(w, w.stream());
            ptr
        })
    }

    /// The tensor maps of the activations at `x` (None where the NCHW loader reads them
    /// through their pointer) and the filter at `w` for the TMA kernels (None for the other
    /// kernels).
    #[allow(clippy::type_complexity)]
    fn tensor_maps(&self, x: u64, w: u64) -> Result<Option<(Option<TensorMap>, TensorMap)>, Error> {
        match self.path {
            ConvPath::Hopper(tile) if tile.nchw => {
                Ok(Some((None, filter_map(&self.run_kernel, &tile, w)?)))
            }
            ConvPath::Hopper(tile) if tile.footprint_rows > 0 => Ok(Some((
                Some(footprint_map(&self.run_kernel, &tile, x)?),
                filter_map(&self.run_kernel, &tile, w)?,
            ))),
            ConvPath::Hopper(tile) if tile.tma && tile.group_channels > 0 => Ok(Some((
                Some(activation_map(&self.run_kernel, x)?),
                filter_map(&filter_view(&self.run_kernel), &tile, w)?,
            ))),
            ConvPath::Hopper(tile) | ConvPath::SpaceToDepth(tile) if tile.tma => Ok(Some((
                Some(activation_map(&self.run_kernel, x)?),
                filter_map(&self.run_kernel, &tile, w)?,
            ))),
            _ => Ok(None),
        }
    }

    /// Bytes of the activations, the filter (OHWI) and the output.
    pub fn bytes(&self) -> (usize, usize, usize) {
        (self.x_bytes, self.w_bytes, self.y_bytes)
    }

    fn check_sizes(&self, x: usize, w: usize, y: usize) -> Result<(), Error> {
        let k = &self.kernel;
        for (what, got, want) in [
            (format!("activations ({})", k.input), x, self.x_bytes),
            (format!("filter ({})", k.input), w, self.w_bytes),
            (format!("output ({})", k.out), y, self.y_bytes),
        ] {
            if got != want {
                return Err(layoutkit_core::Error::BufferSize {
                    what,
                    expected_bytes: want,
                    actual_bytes: got,
                }
                .into());
            }
        }
        Ok(())
    }
}
