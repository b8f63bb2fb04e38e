//! The order in which a tile's destination rows are written where it is not the source's
//! ([`write_order`]).

use layoutkit_core::plan::LoopDim;

use super::TileJob;

/// The order in which a tile's destination rows are written when it is not the source's: the
/// tile of `rows` compound source cells is `outer` steps of the second source loop by `inner`
/// (the first loop's whole extent), and the rows are written second loop fastest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct WriteOrder {
    pub(super) rows: usize,
    pub(super) inner: usize,
    pub(super) outer: usize,
}

/// Where a tile's compound source rows (`group`, innermost first) lie far apart in the
/// destination along the first loop but one destination row apart along the second (NHWC ->
/// MACE's height-major image: the channels `W * 4` elements apart, the columns 4, each
/// destination row a pixel's 4 lanes of 2-4 bytes), writing the rows in source order scatters
/// each warp's stores over as many places as it writes rows; written second loop fastest they
/// form runs of `outer` rows. For that the tile (`ta` rows, at most) is cut to whole extents of
/// the first loop, where two or more fit, keeping its source rows (`rows * unit` elements) a
/// multiple of `keep` elements, the read vector (with 1023 rows of 3 channels the reads fell to
/// single elements: MACE height-major images of 3 channels ran 0.57-0.74 of the copy against
/// 0.93-1.0); None elsewhere (and with padding or a tail cell).
pub(super) fn write_order(
    group: &[LoopDim],
    ta: usize,
    drow: usize,
    keep: usize,
    job: &TileJob,
) -> Option<WriteOrder> {
    let (first, second) = (group.first()?, group.get(1)?);
    let inner = first.extent;
    let scattered = second.dst_stride == drow as isize && first.dst_stride != drow as isize;
    if job.b_pad > 0 || job.a_tail > 0 || inner == 0 || !scattered {
        return None;
    }
    let outer = (2..=(ta / inner).min(second.extent))
        .rev()
        .find(|o| (o * inner * job.unit).is_multiple_of(keep.max(1)))?;
    Some(WriteOrder {
        rows: outer * inner,
        inner,
        outer,
    })
}
