//! Which kernel runs a convolution ([`ConvPath`], chosen by [`crate::Cuda::conv_path`]) and
//! how it is named in tables and errors.

use crate::conv::nchw_footprint::{
    footprint_plan, footprint_plan_with, footprint_unsupported_reason,
};
use crate::conv::nhwc_footprint::{nhwc_footprint_plan, nhwc_footprint_plan_with};
use crate::conv::{
    direct_unsupported_reason, hopper_unsupported_reason, nchw_plan, nchw_unsupported_reason,
    unsupported_reason, ConvKernel, HopperTile,
};
use crate::conv_env::{tile_from_env, with_env_splits};
use crate::conv_grouped_wgmma::supergroup_tile;
use crate::{Cuda, Error};

impl Cuda {
    /// The kernel [`Cuda::conv2d_timed`] runs `kernel` with on this GPU: on sm_90, a strided
    /// convolution of few channels through space to depth where
    /// [`crate::conv::space_to_depth::space_to_depth_preferred`] and the Hopper kernel
    /// takes the regrouped problem (its tile from [`crate::conv_plan::hopper_tile`]; wherever
    /// the problem can be regrouped with `LAYOUTKIT_CONV_SPACE_TO_DEPTH=1`, never with `=0`);
    /// for NCHW activations
    /// on sm_90, the footprint kernel where it takes the problem and
    /// [`crate::conv::nchw_footprint::footprint_preferred`] (wherever it takes it with
    /// `LAYOUTKIT_CONV_NCHW_FOOTPRINT=1`, never with `=0`; its tile from
    /// [`footprint_plan`], or `LAYOUTKIT_CONV_TILE`'s with its footprint, and
    /// `LAYOUTKIT_CONV_SPLITK`), else the Hopper kernel with its NCHW loader warpgroup where it takes the problem
    /// and [`crate::conv::nchw_loader::nchw_preferred`] (wherever it takes it with
    /// `LAYOUTKIT_CONV_NCHW_LOADER=1`, never with `=0`; its tile from [`nchw_plan`], or
    /// `LAYOUTKIT_CONV_TILE` and `LAYOUTKIT_CONV_SPLITK` as for that kernel); NHWC activations
    /// on sm_90 through the NHWC footprint kernel where
    /// [`crate::conv::nhwc_footprint::nhwc_footprint_preferred`] (wherever it takes them with
    /// `LAYOUTKIT_CONV_FOOTPRINT=1`, never with `=0`; its tile from [`nhwc_footprint_plan`],
    /// or `LAYOUTKIT_CONV_TILE`'s with its footprint, and `LAYOUTKIT_CONV_SPLITK`); grouped problems
    /// on sm_90 as super-groups on the Hopper kernel where
    /// [`crate::conv::grouped_wgmma::grouped_wgmma_preferred`] (wherever it takes them with
    /// `LAYOUTKIT_CONV_SUPERGROUPS=1`, never with `=0`; its tile from
    /// [`crate::conv::grouped_wgmma::grouped_wgmma_tile`] or `LAYOUTKIT_CONV_TILE`, loaded by TMA unless
    /// `LAYOUTKIT_CONV_TMA=0`; `LAYOUTKIT_CONV_SPLITK` and `LAYOUTKIT_CONV_PERSISTENT` do not
    /// apply); else the Hopper kernel on
    /// sm_90 when it takes the problem (unless `LAYOUTKIT_CONV_WGMMA=0`), with the tile of
    /// [`crate::conv_plan::hopper_tile`] (the rules and their overrides are listed there),
    /// else the `mma.sync` kernel, else the direct one.
    ///
    /// Contract: errors (naming the tensor-core kernel's reason) for problems no kernel takes,
    /// for GPUs older than sm_80, and for environment variables out of their range.
    pub fn conv_path(&self, kernel: &ConvKernel) -> Result<ConvPath, Error> {
        let (major, _) = self.conv_capability()?;
        let wgmma = std::env::var("LAYOUTKIT_CONV_WGMMA").as_deref() != Ok("0");
        let nchw_loader = match std::env::var("LAYOUTKIT_CONV_NCHW_LOADER").as_deref() {
            Ok("0") => false,
            Ok("1") => true,
            _ => crate::conv::nchw_loader::nchw_preferred(kernel),
        };
        // footprint_preferred holds only where the kernel takes the problem.
        let footprint = match std::env::var("LAYOUTKIT_CONV_NCHW_FOOTPRINT").as_deref() {
            Ok("0") => false,
            Ok("1") => footprint_unsupported_reason(kernel).is_none(),
            _ => crate::conv::nchw_footprint::footprint_preferred(kernel),
        };
        let regroup = match std::env::var("LAYOUTKIT_CONV_SPACE_TO_DEPTH").as_deref() {
            Ok("0") => false,
            Ok("1") => true,
            _ => crate::conv::space_to_depth::space_to_depth_preferred(kernel),
        };
        let regrouped = crate::conv::space_to_depth::space_to_depth_problem(kernel)
            .filter(|inner| hopper_unsupported_reason(inner).is_none());
        if let Some(inner) = regrouped.filter(|_| major == 9 && wgmma && regroup) {
            return Ok(ConvPath::SpaceToDepth(crate::conv_plan::hopper_tile(
                &inner,
            )?));
        }
        if major == 9 && wgmma && footprint {
            let steps = crate::conv::nchw_loader::nchw_steps(&kernel.shape);
            let tile =
                footprint_tile(kernel, steps, "NCHW", (footprint_plan, footprint_plan_with))?;
            return Ok(ConvPath::Hopper(tile));
        }
        if major == 9 && wgmma && nchw_loader && nchw_unsupported_reason(kernel).is_none() {
            let steps = crate::conv::nchw_loader::nchw_steps(&kernel.shape);
            let tile = match tile_from_env()? {
                Some(t) => Some(t.with_nchw_loader().ok_or_else(|| {
                    Error::Unsupported(format!("LAYOUTKIT_CONV_TILE: {t:?} has no NCHW loader"))
                })?),
                None => None,
            };
            let tile = with_env_splits(tile, &kernel.shape, steps, || Ok(nchw_plan(kernel)))?;
            return Ok(ConvPath::Hopper(tile));
        }
        if major == 9 && wgmma && crate::conv::nhwc_footprint::nhwc_footprint_planned(kernel) {
            let steps = crate::conv::nhwc_footprint::nhwc_footprint_steps(kernel);
            let tile = footprint_tile(
                kernel,
                steps,
                "NHWC",
                (nhwc_footprint_plan, nhwc_footprint_plan_with),
            )?;
            return Ok(ConvPath::Hopper(tile));
        }
        if let Some(tile) = supergroup_tile(kernel, major == 9 && wgmma)? {
            return Ok(ConvPath::Hopper(tile));
        }
        if major == 9 && wgmma && hopper_unsupported_reason(kernel).is_none() {
            return Ok(ConvPath::Hopper(crate::conv_plan::hopper_tile(kernel)?));
        }
        match unsupported_reason(kernel) {
            None => Ok(ConvPath::TensorCore),
            Some(why) => match direct_unsupported_reason(kernel) {
                None => Ok(ConvPath::Direct),
                Some(_) => Err(Error::Unsupported(why)),
            },
        }
    }
}

/// The function that plans a footprint kernel's tile, and the one that fits a forced tile.
type FootprintPlans = (
    fn(&ConvKernel) -> HopperTile,
    fn(&ConvKernel, Option<HopperTile>) -> Option<HopperTile>,
);

/// A footprint kernel's tile for `kernel` (`layout` names the kernel in errors): `plan`'s,
/// or `LAYOUTKIT_CONV_TILE`'s with its footprint by `plan_with`, K split as
/// `LAYOUTKIT_CONV_SPLITK` says over `steps` K steps.
fn footprint_tile(
    kernel: &ConvKernel,
    steps: usize,
    layout: &str,
    (plan, plan_with): FootprintPlans,
) -> Result<HopperTile, Error> {
    with_env_splits(None, &kernel.shape, steps, || match tile_from_env()? {
        Some(t) => plan_with(kernel, Some(t)).ok_or_else(|| {
            Error::Unsupported(format!(
                "LAYOUTKIT_CONV_TILE: {t:?} has no {layout} footprint buffers that fit"
            ))
        }),
        None => Ok(plan(kernel)),
    })
}

/// The kernel that runs a convolution on a given GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConvPath {
    /// Warpgroup MMA (sm_90) with this tile.
    Hopper(HopperTile),
    /// `mma.sync` tensor cores (sm_80 and newer).
    TensorCore,
    /// One thread per output (groups, depthwise, other channel counts).
    Direct,
    /// The regrouping pass of [`crate::conv::space_to_depth`], then the Hopper kernel with
    /// this tile on the regrouped problem.
    SpaceToDepth(HopperTile),
}

/// The Hopper kernel's name and tile as [`ConvPath`]'s display writes them.
fn write_hopper(f: &mut std::fmt::Formatter<'_>, t: &HopperTile) -> std::fmt::Result {
    let name = match (t.nchw, t.tma) {
        (_, true) if t.group_channels > 0 => "wgmma-tma-supergroups",
        _ if t.group_channels > 0 => "wgmma-supergroups",
        (true, _) if t.footprint_rows > 0 => "wgmma-nchw-footprint",
        (true, _) => "wgmma-nchw",
        (false, true) if t.footprint_rows > 0 => "wgmma-tma-footprint",
        (false, true) => "wgmma-tma",
        _ => "wgmma",
    };
    write!(f, "{name} {}x{}x{}", t.bm, t.bn, t.stages)?;
    if t.in_flight == 0 && !t.tma {
        write!(f, "x0")?;
    }
    if t.k_bytes != 128 {
        write!(f, " k{}", t.k_bytes)?;
    }
    if t.splits > 1 {
        write!(f, " split-K {}", t.splits)?;
    }
    if t.persistent {
        write!(f, " persistent")?;
    }
    if t.cluster > 1 {
        write!(f, " cluster {}", t.cluster)?;
    }
    Ok(())
}

impl std::fmt::Display for ConvPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConvPath::Hopper(t) => write_hopper(f, t),
            ConvPath::SpaceToDepth(t) => {
                write!(f, "space-to-depth + ")?;
                write_hopper(f, t)
            }
            ConvPath::TensorCore => write!(f, "mma.sync"),
            ConvPath::Direct => write!(f, "direct"),
        }
    }
}

impl ConvPath {
    /// The kernel this path runs for `kernel`, as reports name it: the display, but on the
    /// direct path the depthwise and grouped kernels by their names.
    pub fn label(&self, kernel: &crate::conv::ConvKernel) -> String {
        match self {
            ConvPath::Direct if crate::conv::depthwise_applies(kernel) => "depthwise".into(),
            ConvPath::Direct if crate::conv::grouped_applies(kernel) => "grouped mma.sync".into(),
            p => p.to_string(),
        }
    }
}
