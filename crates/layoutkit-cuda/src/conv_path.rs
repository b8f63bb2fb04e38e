//! Which kernel runs a convolution ([`ConvPath`], chosen by [`crate::Cuda::conv_path`]) and
//! how it is named in tables and errors.

use crate::conv::HopperTile;

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
