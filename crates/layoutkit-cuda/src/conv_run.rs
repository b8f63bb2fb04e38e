//! Running the tensor-core convolution ([`crate::conv`]) on a [`Cuda`] device.

use cudarc::driver::sys::CUfunction_attribute_enum;
use cudarc::driver::{LaunchConfig, PushKernelArg};

use crate::conv::{
    block, conv_source, direct_grid, direct_source, direct_unsupported_reason, grid, hopper_source,
    hopper_tile, hopper_unsupported_reason, padded_elements, unsupported_reason, ConvKernel,
    HopperTile, DIRECT_THREADS,
};
use crate::{Cuda, Error, Timing};

/// The kernel that runs a convolution on a given GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConvPath {
    /// Warpgroup MMA (sm_90) with this tile.
    Hopper(HopperTile),
    /// `mma.sync` tensor cores (sm_80 and newer).
    TensorCore,
    /// One thread per output (groups, depthwise, other channel counts).
    Direct,
}

impl std::fmt::Display for ConvPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConvPath::Hopper(t) => {
                write!(f, "wgmma {}x{}x{}", t.bm, t.bn, t.stages)?;
                if t.in_flight == 0 {
                    write!(f, "x0")?;
                }
                Ok(())
            }
            ConvPath::TensorCore => write!(f, "mma.sync"),
            ConvPath::Direct => write!(f, "direct"),
        }
    }
}

/// The Hopper tile `LAYOUTKIT_CONV_TILE` asks for (`BMxBNxSTAGES`, e.g. `128x128x4`, or
/// `BMxBNxSTAGESx0` for no multiplies in flight across steps), if set.
fn tile_from_env() -> Result<Option<HopperTile>, Error> {
    let Ok(v) = std::env::var("LAYOUTKIT_CONV_TILE") else {
        return Ok(None);
    };
    let parts: Vec<usize> = v.split('x').filter_map(|p| p.parse().ok()).collect();
    let tile = match parts[..] {
        [bm, bn, st] => HopperTile::new(bm, bn, st),
        [bm, bn, st, f] => HopperTile::new(bm, bn, st).and_then(|t| t.with_in_flight(f)),
        _ => {
            return Err(Error::Unsupported(format!(
                "LAYOUTKIT_CONV_TILE={v}: expected BMxBNxSTAGES[x0], e.g. 128x128x4"
            )))
        }
    };
    tile.map(Some).ok_or_else(|| {
        Error::Unsupported(format!(
            "LAYOUTKIT_CONV_TILE={v}: the Hopper tiles are 64, 128 or 256 rows by 64, 128 or \
             256 columns with 3-8 stages that fit in 227 KiB, and 1 (default) or 0 groups of \
             multiplies in flight"
        ))
    })
}

impl Cuda {
    /// The device's compute capability (major, minor); an error below sm_80, which every
    /// convolution kernel here needs.
    fn conv_capability(&self) -> Result<(i32, i32), Error> {
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

    /// The kernel [`Cuda::conv2d_timed`] runs `kernel` with on this GPU: the Hopper kernel on
    /// sm_90 when it takes the problem (unless `LAYOUTKIT_CONV_WGMMA=0`; its tile from
    /// [`hopper_tile`] unless `LAYOUTKIT_CONV_TILE=BMxBNxSTAGES`), else the `mma.sync` kernel,
    /// else the direct one.
    ///
    /// Contract: errors (naming the tensor-core kernel's reason) for problems no kernel takes
    /// and for GPUs older than sm_80.
    pub fn conv_path(&self, kernel: &ConvKernel) -> Result<ConvPath, Error> {
        let (major, _) = self.conv_capability()?;
        let wgmma = std::env::var("LAYOUTKIT_CONV_WGMMA").as_deref() != Ok("0");
        if major == 9 && wgmma && hopper_unsupported_reason(kernel).is_none() {
            let tile = tile_from_env()?.unwrap_or_else(|| hopper_tile(&kernel.shape));
            return Ok(ConvPath::Hopper(tile));
        }
        match unsupported_reason(kernel) {
            None => Ok(ConvPath::TensorCore),
            Some(why) => match direct_unsupported_reason(kernel) {
                None => Ok(ConvPath::Direct),
                Some(_) => Err(Error::Unsupported(why)),
            },
        }
    }

    /// Runs `kernel` once: convolves `x` (the physical array in `kernel.layout`, of
    /// `kernel.input`) with `w` (OHWI, same type), adds `bias` (O values; f16 inputs only) and
    /// applies ReLU when `kernel.relu`; returns the output in `kernel.layout` of `kernel.out`.
    /// Then runs `repeats` more times on the same device memory, each timed with CUDA events
    /// around `launches` back-to-back launches (the time is per launch).
    ///
    /// The kernel is [`Cuda::conv_path`]'s: the Hopper kernel on sm_90 where it applies, else
    /// `mma.sync`; problems the tensor-core kernels do not take (see
    /// [`crate::conv::unsupported_reason`]) run in the direct kernel when it takes them (f16:
    /// groups, depthwise, any channel count; [`crate::conv::direct_unsupported_reason`]).
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
        let path = self.conv_path(kernel)?;
        self.conv2d_timed_with(kernel, path, x, w, bias, repeats, launches)
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
        bias: Option<&[f32]>,
        repeats: usize,
        launches: usize,
    ) -> Result<(Vec<u8>, Timing), Error> {
        let s = &kernel.shape;
        let (major, minor) = self.conv_capability()?;
        let why_not = match path {
            ConvPath::Hopper(_) if major != 9 => Some(format!(
                "the Hopper kernel needs an sm_90 GPU; this one is sm_{major}{minor}"
            )),
            ConvPath::Hopper(_) => hopper_unsupported_reason(kernel),
            ConvPath::TensorCore => unsupported_reason(kernel),
            ConvPath::Direct => direct_unsupported_reason(kernel),
        };
        if let Some(why) = why_not {
            return Err(Error::Unsupported(why));
        }
        if bias.is_some() != kernel.bias {
            return Err(Error::Unsupported(
                "the bias given does not match the kernel's (ConvKernel::bias)".into(),
            ));
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
        let arch = vec![format!("--gpu-architecture=sm_{major}{minor}")];
        let (f, cfg) = match path {
            ConvPath::Hopper(tile) => {
                let f = self.compiled(
                    &hopper_source(kernel, &tile),
                    "conv_wgmma",
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
                    block_dim: (tile.threads() as u32, 1, 1),
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
                let cfg = LaunchConfig {
                    grid_dim: direct_grid(kernel),
                    block_dim: (DIRECT_THREADS, 1, 1),
                    shared_mem_bytes: 0,
                };
                (
                    self.compiled(&direct_source(kernel), "conv_direct", arch)?,
                    cfg,
                )
            }
        };
        let map = |e| Error::driver("cuMemcpyHtoD", e);
        let d_x = self.stream.clone_htod(x).map_err(map)?;
        let d_w = self.stream.clone_htod(w).map_err(map)?;
        let d_b = self.stream.clone_htod(&bias).map_err(map)?;
        let out_bytes = padded_elements(kernel, s.o, s.oh, s.ow) * kernel.out.size_bytes();
        let mut d_y = self
            .stream
            .alloc_zeros::<u8>(out_bytes.max(1))
            .map_err(|e| Error::driver("cuMemAlloc", e))?;
        let timing = self.timed(repeats, launches, || {
            let mut b = self.stream.launch_builder(&f);
            b.arg(&d_x).arg(&d_w).arg(&mut d_y).arg(&d_b);
            // SAFETY: `conv`, `conv_wgmma` and `conv_direct` take (x, w, y, bias) as generated for `kernel`;
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
