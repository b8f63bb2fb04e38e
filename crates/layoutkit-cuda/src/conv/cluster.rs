//! Thread-block clusters for the TMA kernel ([`super::tma`]): two blocks side by side along
//! the pixels (consecutive in x, the same channel tile and K range) share their filter tile.
//! Each block's producer loads its own activation tile and half of the filter tile's rows,
//! multicast into the shared memory of both blocks, so the filter is read from L2 once per
//! cluster instead of once per block; with that, more and smaller tiles (64 x 112 on a
//! 2048->512 1x1 layer at batch 32: 125 tiles for 132 SMs) cost no more L2 traffic than
//! fewer larger ones.
//!
//! The barriers, per stage (a K step in flight):
//!
//! * `full`: each block's producer announces all of the stage's bytes (its activation rows
//!   and the whole filter tile, both halves) on its own barrier; its own copies and the
//!   peer's multicast half complete it. A peer's copy may land before the announcement (the
//!   transaction count goes below zero for a while; the phase cannot complete before the
//!   producer's arrival).
//! * `empty`: every consumer warp of both blocks arrives on it (on its own block's barrier and,
//!   through `mapa`, on the peer's), so a producer refills a stage, in both blocks, only once
//!   both have read it.
//! * The blocks meet at a cluster barrier after initialising their barriers (a peer's copies
//!   must not reach a barrier not yet set up), and each producer waits, after its last copy,
//!   for both blocks to release its last stages: a block's shared memory stays alive until
//!   the peer's last arrivals on it have landed.
//!
//! A grid of an odd count of pixel tiles gets one block more, past the pixels: it loads its
//! half of the filter tile for its peer, reads zeros for its activations and writes nothing
//! (the epilogue's bounds). The launch sets the cluster's dimension
//! (`cuLaunchKernelEx`, [`crate::Cuda::conv2d_on_stream`]).
//!
//! Correct (checked against the reference on an H200) but slow: 0.31-0.47x the same layers
//! without clusters, about 1 us per K step whatever the tile, so it is taken only where
//! `LAYOUTKIT_CONV_CLUSTER` asks for it ([`cluster_from_env`]). The arrivals on the peer's
//! barriers use release semantics at cluster scope and the producer's waits acquire at
//! cluster scope, a fence per K step per warp that the CTA-scope forms may avoid (not
//! measured yet).

use std::fmt::Write;

use super::HopperTile;

/// Blocks per cluster where the tile runs in clusters.
pub const CLUSTER_BLOCKS: usize = 2;

impl HopperTile {
    /// This tile run in clusters of `blocks` blocks (1: none, or [`CLUSTER_BLOCKS`]) sharing
    /// the filter tile; None where the tile does not load by TMA from NHWC activations in
    /// stages of its own (NCHW, footprints, super-groups) or is persistent, and where half
    /// of its columns is not a multiple of 8 rows (the swizzle's period, so that each half
    /// lands where the whole tile's swizzle puts it).
    pub fn with_cluster(self, blocks: usize) -> Option<HopperTile> {
        if blocks == 1 {
            return Some(HopperTile { cluster: 1, ..self });
        }
        let ok = blocks == CLUSTER_BLOCKS
            && self.tma
            && !self.nchw
            && !self.persistent
            && self.footprint_rows == 0
            && self.group_channels == 0
            && (self.bn / blocks).is_multiple_of(8);
        ok.then_some(HopperTile {
            cluster: blocks,
            ..self
        })
    }

    /// Rows of the filter tile each block of a cluster loads (all of them without one): the
    /// box of the filter's tensor map.
    pub fn filter_box_rows(&self) -> usize {
        self.bn / self.cluster
    }
}

/// The fewest K steps for which [`cluster_plan`] trades a one-wave tile for narrower ones in
/// clusters: each block then reads its filter tile once per step, the traffic the clusters
/// halve (ResNet-50's `l4 1x1 2048->512 @7`: 32 steps).
pub const CLUSTER_MIN_STEPS: usize = 16;

/// The share of the SMs under which a one-wave tile's blocks leave enough idle for
/// [`cluster_plan`] to look for narrower tiles.
pub const CLUSTER_MAX_SM_SHARE: f64 = 0.85;

/// The tile in clusters of two for `kernel` in place of `tile`, or None to keep it: where
/// `tile` is a one-tile TMA block, unsplit, of f16 or bf16 inputs, over at least
/// [`CLUSTER_MIN_STEPS`] K steps, whose blocks fill less than [`CLUSTER_MAX_SM_SHARE`] of the
/// SMs in one wave, the tile of the same rows and the fewest columns (multiples of 16, down
/// to half of `tile`'s) whose blocks in clusters (the pixel tiles rounded up to whole
/// clusters) still fit one block per SM, where that fills more SMs.
///
/// ResNet-50's `l4 1x1 2048->512 @7`: 100 blocks of 64 x 128 (batch 32) or 128 x 128 (64) on
/// 132 SMs become 130 of 64 x 112 or 128 x 112 in clusters (cuDNN's 64 x 112 runs in clusters
/// too). Taken only with `LAYOUTKIT_CONV_CLUSTER=plan` ([`cluster_from_env`]): measured
/// 0.31x and 0.40x the tiles it replaces there.
pub fn cluster_plan(
    kernel: &super::ConvKernel,
    tile: &HopperTile,
    steps: usize,
) -> Option<HopperTile> {
    use layoutkit_core::DType;
    let s = &kernel.shape;
    let eligible = tile.tma
        && tile.cluster == 1
        && tile.splits == 1
        && matches!(kernel.input, DType::F16 | DType::BF16)
        && steps >= CLUSTER_MIN_STEPS
        && tile.with_cluster(CLUSTER_BLOCKS).is_some();
    if !eligible {
        return None;
    }
    let sms = super::SMS;
    let blocks = |t: &HopperTile| {
        let (x, y, z) = t.grid(s);
        (x * y * z) as usize
    };
    let now = blocks(tile);
    if now > sms || now as f64 >= CLUSTER_MAX_SM_SHARE * sms as f64 {
        return None;
    }
    (tile.bn / 2..tile.bn)
        .rev()
        .filter(|bn| bn.is_multiple_of(16))
        .filter_map(|bn| {
            HopperTile::new(tile.bm, bn, tile.stages)
                .and_then(|t| t.with_tma(true))
                .and_then(|t| t.with_k_bytes(tile.k_bytes))
                .and_then(|t| t.with_cluster(CLUSTER_BLOCKS))
        })
        .find(|t| blocks(t) <= sms)
        .filter(|t| blocks(t) > now)
}

/// What `LAYOUTKIT_CONV_CLUSTER` asks for ([`cluster_from_env`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClusterChoice {
    /// The chosen tile in clusters of this many blocks (1: none) wherever
    /// [`HopperTile::with_cluster`] takes it.
    Blocks(usize),
    /// [`cluster_plan`]'s tile where it gives one.
    Plan,
}

/// The clusters `LAYOUTKIT_CONV_CLUSTER` asks for (for A/B runs): `1` none, `2` clusters of two
/// on the chosen tile, `plan` [`cluster_plan`]'s tile; None (unset or anything else) for the
/// default, no clusters. Not the default: on an H200 the cluster kernel ran 0.31-0.47x the
/// same layers without clusters (`bench/results/raw/2026-12-03-h200-conv-clusters/`).
pub fn cluster_from_env() -> Option<ClusterChoice> {
    match std::env::var("LAYOUTKIT_CONV_CLUSTER").as_deref() {
        Ok("1") => Some(ClusterChoice::Blocks(1)),
        Ok("2") => Some(ClusterChoice::Blocks(CLUSTER_BLOCKS)),
        Ok("plan") => Some(ClusterChoice::Plan),
        _ => None,
    }
}

/// Device functions of the cluster kernel: the block's rank in its cluster, the cluster
/// barrier, an arrival on the peer's copy of a barrier, a producer's wait with cluster
/// scope, and the filter copy multicast to the blocks of `mask`.
pub(super) fn cluster_helpers(k: &mut String) {
    k.push_str(
        "__device__ __forceinline__ unsigned cluster_rank() {\n\
  unsigned r; asm volatile(\"mov.u32 %0, %%cluster_ctarank;\" : \"=r\"(r)); return r;\n}\n\
__device__ __forceinline__ void cluster_sync() {\n\
  asm volatile(\"barrier.cluster.arrive.release.aligned;\\n\\tbarrier.cluster.wait.acquire.aligned;\" ::: \"memory\");\n}\n\
__device__ __forceinline__ void mbar_arrive_peer(unsigned long long* b, unsigned rank) {\n\
  asm volatile(\"{ .reg .b32 ra; mapa.shared::cluster.u32 ra, %0, %1; mbarrier.arrive.release.cluster.shared::cluster.b64 _, [ra]; }\" :: \"r\"(saddr(b)), \"r\"(rank) : \"memory\");\n}\n\
__device__ __forceinline__ void mbar_wait_cluster(unsigned long long* b, unsigned parity) {\n\
  const unsigned a = saddr(b); unsigned done;\n\
  do {\n\
    asm volatile(\"{ .reg .pred p; mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }\" : \"=r\"(done) : \"r\"(a), \"r\"(parity) : \"memory\");\n\
  } while (!done);\n}\n\
__device__ __forceinline__ void tma_tile_multicast(void* dst, const TMap* m, int c, int x, int y, int z, unsigned long long* b, unsigned short mask) {\n\
  asm volatile(\"cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, {%2, %3, %4, %5}], [%6], %7;\"\n\
    :: \"r\"(saddr(dst)), \"l\"((unsigned long long)m), \"r\"(c), \"r\"(x), \"r\"(y), \"r\"(z), \"r\"(saddr(b)), \"h\"(mask) : \"memory\");\n}\n",
    );
}

/// The producer's copy of the filter for a stage at `sb` (the filter tile's place in the
/// stage): the whole tile from the block, or in a cluster this block's half, multicast.
pub(super) fn filter_copy(tile: &HopperTile, sb: &str, kc: &str) -> String {
    if tile.cluster == 1 {
        return format!("tma_tile({sb}, &tw, {kc}, sx, r, n0, full + st)");
    }
    let rows = tile.filter_box_rows();
    let mask = (1u32 << tile.cluster) - 1;
    format!(
        "tma_tile_multicast({sb} + crank * {}, &tw, {kc}, sx, r, n0 + crank * {rows}, full + st, (unsigned short){mask})",
        rows * tile.k_bytes
    )
}

/// A consumer warp's release of stage `st` (lane 0): on its block's barrier, and in a
/// cluster on the peer's too.
pub(super) fn release(tile: &HopperTile, st: &str) -> String {
    if tile.cluster == 1 {
        return format!("mbar_arrive(empty + {st});");
    }
    format!("{{ mbar_arrive(empty + {st}); mbar_arrive_peer(empty + {st}, crank ^ 1); }}")
}

/// The producer's last statements in a cluster: wait until both blocks have released its
/// last stages (the peer's last arrivals on this block's barriers have landed, and the
/// peer has its last multicast copies), so this block's shared memory outlives them.
pub(super) fn producer_tail(k: &mut String, tile: &HopperTile) {
    if tile.cluster == 1 {
        return;
    }
    let stages = tile.stages;
    let _ = writeln!(
        k,
        "      for (int u = nsteps > {stages} ? nsteps - {stages} : 0; u < nsteps; ++u) mbar_wait_cluster(empty + u % {stages}, (u / {stages}) & 1);"
    );
}

/// Launches `function` on `stream` with the grid, block and shared memory of `config`, in clusters
/// of `blocks` blocks along x (`cuLaunchKernelEx` with the cluster dimension attribute).
///
/// # Safety
/// `params` point at the kernel's parameters, in order, valid through the call; the
/// function is a kernel written for clusters of `blocks` along x, whose grid's x is a
/// multiple of `blocks`; `stream` is a live stream of the current context.
pub(crate) unsafe fn launch_in_clusters(
    function: &cudarc::driver::CudaFunction,
    config: cudarc::driver::LaunchConfig,
    blocks: usize,
    stream: cudarc::driver::sys::CUstream,
    params: &mut [*mut std::ffi::c_void],
) -> Result<(), crate::Error> {
    use cudarc::driver::sys;
    let mut value: sys::CUlaunchAttributeValue = unsafe { std::mem::zeroed() };
    value.clusterDim = sys::CUlaunchAttributeValue_union__bindgen_ty_1 {
        x: blocks as u32,
        y: 1,
        z: 1,
    };
    let mut attr = sys::CUlaunchAttribute {
        id: sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION,
        pad: [0; 4],
        value,
    };
    let c = config;
    let cfg = sys::CUlaunchConfig {
        gridDimX: c.grid_dim.0,
        gridDimY: c.grid_dim.1,
        gridDimZ: c.grid_dim.2,
        blockDimX: c.block_dim.0,
        blockDimY: c.block_dim.1,
        blockDimZ: c.block_dim.2,
        sharedMemBytes: c.shared_mem_bytes,
        hStream: stream,
        attrs: &mut attr,
        numAttrs: 1,
    };
    // SAFETY: `cfg` and `attr` live through the call; the rest is the caller's contract.
    let r = unsafe {
        sys::cuLaunchKernelEx(
            &cfg,
            function.cu_function(),
            params.as_mut_ptr(),
            std::ptr::null_mut(),
        )
    };
    if r == sys::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(crate::Error::driver("cuLaunchKernelEx", r))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tma(bm: usize, bn: usize) -> HopperTile {
        HopperTile::new(bm, bn, 4)
            .and_then(|t| t.with_tma(true))
            .unwrap()
    }

    #[test]
    fn clusters_take_tma_tiles_whose_half_is_whole_swizzle_periods() {
        // Every TMA tile's columns are a multiple of 16: halves of whole periods.
        for bn in [48, 80, 112, 128, 176, 256] {
            let t = tma(64, bn).with_cluster(2).unwrap();
            assert_eq!((t.cluster, t.filter_box_rows()), (2, bn / 2));
        }
        // Not loaded by TMA, or persistent.
        let plain = HopperTile::new(64, 128, 4).unwrap();
        assert_eq!(plain.with_cluster(2), None);
        assert_eq!(plain.with_cluster(1), Some(plain));
        assert_eq!(tma(64, 128).with_cluster(3), None);
    }

    #[test]
    fn the_cluster_kernel_multicasts_half_the_filter_and_counts_both_blocks_releases() {
        let k = crate::conv::test_kernel(32, 2048, 7, 512, 1, layoutkit_core::DType::F16);
        let single = tma(64, 112);
        let pair = single.with_cluster(2).unwrap();
        let one = super::super::tma::tma_source(&k, &single);
        let two = super::super::tma::tma_source(&k, &pair);
        for s in ["cluster_sync()", "tma_tile_multicast(", "mbar_arrive_peer("] {
            assert!(!one.contains(s) && two.contains(s), "{s}");
        }
        // Four consumer warps in each of the two blocks release every stage; each block
        // loads 56 of the 112 filter rows (7168 bytes) at its rank's place.
        assert!(one.contains("mbar_init(empty + i, 4)"));
        assert!(two.contains("mbar_init(empty + i, 8)"));
        assert!(two.contains("crank * 7168") && two.contains("n0 + crank * 56"));
        // Every block's full barrier still expects the whole stage: 64 + 112 rows.
        assert!(two.contains(&format!("mbar_expect(full + st, {})", 176 * 128)));
    }

    #[test]
    fn one_wave_layers_of_many_steps_take_narrower_tiles_in_clusters() {
        use crate::conv::test_kernel;
        use layoutkit_core::DType::F16;
        // l4 1x1 2048->512 @7 (32 steps): 64 x 128 at batch 32, 128 x 128 at 64 -> 112
        // columns in clusters, 130 blocks.
        for (n, bm) in [(32, 64), (64, 128)] {
            let k = test_kernel(n, 2048, 7, 512, 1, F16);
            let t = cluster_plan(&k, &tma(bm, 128), 32).unwrap();
            assert_eq!((t.bm, t.bn, t.cluster, t.stages), (bm, 112, 2, 4));
            assert_eq!(t.grid(&k.shape), (26, 5, 1));
        }
        let k = test_kernel(32, 2048, 7, 512, 1, F16);
        // Few steps, a split, or blocks that fill the SMs: unchanged.
        assert_eq!(cluster_plan(&k, &tma(64, 128), 8), None);
        assert_eq!(
            cluster_plan(&k, &tma(64, 128).with_splits(2).unwrap(), 32),
            None
        );
        let full = test_kernel(64, 2048, 7, 512, 1, F16);
        assert_eq!(cluster_plan(&full, &tma(64, 128), 32), None);
    }

    #[test]
    fn a_cluster_grid_rounds_the_pixel_tiles_up_to_whole_clusters() {
        // 1568 pixels (batch 32 at 7 x 7) in tiles of 64: 25, one cluster of two past them.
        let k = crate::conv::test_kernel(32, 2048, 7, 512, 1, layoutkit_core::DType::F16);
        let t = tma(64, 112);
        assert_eq!(t.grid(&k.shape), (25, 5, 1));
        assert_eq!(t.with_cluster(2).unwrap().grid(&k.shape), (26, 5, 1));
    }
}
