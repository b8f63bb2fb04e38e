//! Running grouped convolutions as super-groups on the Hopper kernel
//! ([`crate::conv::grouped_wgmma`]): the pass that writes the super-groups' block-diagonal
//! filter into scratch memory the [`crate::DeviceConv`] keeps, on the same stream just before
//! the kernel reads it.

use crate::conv::grouped_wgmma::{
    expand_grid, expand_source, expanded_filter_elements, grouped_tile_reason,
    grouped_wgmma_preferred, grouped_wgmma_tile, grouped_wgmma_unsupported_reason,
    supergroup_channels, EXPAND_THREADS,
};
use crate::conv::{ConvKernel, HopperTile};
use crate::conv_env::tile_from_env;
use crate::conv_space_to_depth::PrePass;
use crate::{Cuda, Error};

/// The super-group tile [`Cuda::conv_path`] runs `kernel` with, or None where it does not run
/// as super-groups: `hopper` (an sm_90 GPU with the Hopper kernel allowed), the kernel takes
/// it, and [`grouped_wgmma_preferred`] (`LAYOUTKIT_CONV_SUPERGROUPS=1`: wherever it takes it,
/// `=0`: never). The tile is [`grouped_wgmma_tile`]'s, or `LAYOUTKIT_CONV_TILE`'s (loaded by
/// TMA unless `LAYOUTKIT_CONV_TMA=0`, where the TMA kernel takes it).
///
/// Errors: a `LAYOUTKIT_CONV_TILE` out of range or whose columns do not divide a super-group's
/// outputs.
pub(crate) fn supergroup_tile(
    kernel: &ConvKernel,
    hopper: bool,
) -> Result<Option<HopperTile>, Error> {
    if !hopper || grouped_wgmma_unsupported_reason(kernel).is_some() {
        return Ok(None);
    }
    let wanted = match std::env::var("LAYOUTKIT_CONV_SUPERGROUPS").as_deref() {
        Ok("0") => false,
        Ok("1") => true,
        _ => grouped_wgmma_preferred(kernel),
    };
    if !wanted {
        return Ok(None);
    }
    let tma = std::env::var("LAYOUTKIT_CONV_TMA").as_deref() != Ok("0");
    let tile = match tile_from_env()? {
        Some(t) => t
            .with_group_channels(supergroup_channels(kernel))
            .map(|t| {
                t.with_tma(tma)
                    .filter(|t| grouped_tile_reason(kernel, t).is_none())
                    .unwrap_or(t)
            })
            .filter(|t| grouped_tile_reason(kernel, t).is_none())
            .ok_or_else(|| {
                Error::Unsupported(format!(
                    "LAYOUTKIT_CONV_TILE: {t:?} does not fit this problem's super-groups"
                ))
            })?,
        None => grouped_wgmma_tile(kernel),
    };
    Ok(Some(tile))
}

impl Cuda {
    /// Compiles (or finds in the caches) the filter pass of grouped `kernel` and allocates
    /// the filter it writes. Contract: `kernel`'s groups have fewer than 64 channels
    /// ([`crate::conv::grouped_wgmma::needs_expansion`]).
    pub(crate) fn prepare_expand_groups(&self, kernel: &ConvKernel) -> Result<PrePass, Error> {
        // One thread per element of the filter it writes.
        self.prepare_pass(
            (&expand_source(kernel), "conv_expand_groups"),
            ((expand_grid(kernel), 1, 1), EXPAND_THREADS),
            (
                0,
                expanded_filter_elements(kernel) * kernel.input.size_bytes(),
            ),
            true,
        )
    }
}
