//! Work items: each region of a plan (after padding is merged into its copies) split into
//! boxes of about [`ITEMS_PER_THREAD`] per thread, classified by the kernel that runs them.

use layoutkit_core::plan::{LoopDim, Region};
use layoutkit_core::{tiling, CastSpec};

use super::lane_blocks::LaneBlock;

/// A unit of work: a box of one region (loops outermost first, offsets in elements). The last
/// one (run, strided, fill) or two (tile) loops are the kernel's; the item iterates the others.
pub(super) struct Item {
    pub(super) src_offset: usize,
    pub(super) dst_offset: usize,
    pub(super) dims: Vec<LoopDim>,
    pub(super) kind: Kind,
    /// Elements moved together: a short innermost run contiguous in both layouts (e.g. the 4
    /// lanes of an image pixel) is handled as one unit by the tile and strided kernels.
    pub(super) unit: usize,
    /// For tiles: how many loops before the last form the tile's source-contiguous index
    /// (one, or several whose flattened index is contiguous in the source, like `(i, h, w)`
    /// of `OIHW`); the last loop is the destination-contiguous one.
    pub(super) a_loops: usize,
    /// Fill elements written after each run: after each unit (strided items) or after the
    /// destination-contiguous loop (tiles). See [`tiling::absorb_fills`].
    pub(super) pad: usize,
    /// Tiles of units: elements (1..unit) of one more, partial cell after the last along the
    /// source-contiguous loop, completed with fill ([`tiling::tail_cell`]); 0 for none.
    pub(super) tail: usize,
    /// For tiles: the destination-contiguous loops at the end, 1, or 2 for a compound
    /// destination row (see [`compound_b`]).
    pub(super) b_loops: usize,
    /// For lane items: the block their last three loops are.
    pub(super) lanes: Option<LaneBlock>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// The innermost loop is contiguous in both layouts.
    Run,
    /// The last two loops are a tile: `dims[n-2]` is contiguous in the source, `dims[n-1]` in
    /// the destination.
    Tile,
    /// Anything else: element by element along the innermost loop.
    Strided,
    /// Padding: the fill value along the innermost loop.
    Fill,
    /// The last three loops are a block of lane records turned inside out
    /// ([`super::lane_blocks::LaneBlock`]).
    Lanes,
}

impl Item {
    /// The loops at the end of `dims` that the kernel runs (the item iterates the others).
    pub(super) fn kernel_loops(&self) -> usize {
        match self.kind {
            Kind::Tile => self.a_loops + self.b_loops,
            Kind::Fill => 2,
            Kind::Lanes => 3,
            _ => 1,
        }
    }
}

/// A tile's destination rows shorter than this many bytes are lengthened by a compound row
/// where they can be ([`compound_b`]).
const SHORT_DST_ROW_BYTES: usize = 64;

/// For a tile of two source-contiguous loops `a = [outer, inner]` and the destination-
/// contiguous `b` (followed by `pad` fill elements), of elements (units) of `size` bytes:
/// whether `outer` continues `b` in the destination (its destination stride is `b`'s padded
/// run) while `b`'s rows are short. Then the tile is better cut the other way: `a = [inner]`
/// and a compound destination row `(outer, b)`, one contiguous run per `inner` index, its
/// source rows from a table. A MACE height-major image from NHWC is such a tile: `a = (w,
/// c)`, `b` = the 4 lanes (rows `h`), whose 8-byte f16 destination rows lay 56 bytes apart for
/// W = 7 (each line written in seven passes, 17-20% of the copy); cut the other way each
/// channel's `W x 4` lanes are one destination run. With padding (the last block of lanes
/// where H is not a multiple of 4), only identity conversions of single elements whose
/// compound rows are back to back (`inner`'s destination stride is one compound row): the
/// fill rows then sit inside the compound row, which the scratch-tile kernel allows. The
/// compound rows must be few enough bytes for a tile of 16 (a whole block of the kernels) in
/// the scratch tile, and `inner` at least 16 long: a MACE filter image read back into OIHW
/// has `b` = the taps (36 bytes for 3x3 f32) continued by its input channels, but its `a` is
/// the 4 lanes, and a compound row of 2048 channels x 9 taps would not fit.
pub(super) fn compound_b(
    a: &[LoopDim],
    b: LoopDim,
    (unit, pad): (usize, usize),
    size: usize,
    identity: bool,
) -> bool {
    let [outer, inner] = a else { return false };
    let run = (b.extent + pad) * unit;
    let packed = inner.dst_stride > 0 && inner.dst_stride as usize == outer.extent * run;
    outer.extent > 1
        && inner.extent >= 16
        && outer.dst_stride > 0
        && outer.dst_stride as usize == run
        && run * size < SHORT_DST_ROW_BYTES
        && 16 * outer.extent * run * size <= super::SCRATCH_BYTES
        && (pad == 0 || (identity && unit == 1 && packed))
}

/// Runs up to this many bytes that are contiguous in both layouts become units.
const MAX_UNIT_BYTES: usize = 64;

/// For a copy `r` (without padding) that the tile kernel will move as units along one
/// source-contiguous loop, in an identity conversion: the copy among `copies` (not `taken`)
/// that ends each tile row with a partial cell, `(its index, its run)`.
pub(super) fn tile_tail(
    r: &Region,
    cast: &CastSpec,
    copies: &[tiling::PaddedCopy],
    taken: &[bool],
) -> Option<(usize, usize)> {
    if !cast.is_identity() {
        return None;
    }
    let size = cast.src.size_bytes();
    let (unit, dims) = tiling::split_unit(&r.dims, MAX_UNIT_BYTES / size);
    let inner = *dims.last()?;
    if unit == 1 || (inner.src_stride == unit as isize && inner.dst_stride == unit as isize) {
        return None;
    }
    let axes = tiling::tile_axes(&dims, unit)?;
    tiling::tail_cell(r, &axes, unit, copies, taken)
}

/// Work items per thread (about), so threads stay balanced when items take unequal times.
const ITEMS_PER_THREAD: usize = 8;

/// The most source-contiguous units in one tile.
pub(super) const MAX_TILE_A: usize = 256;

/// Elements per work item at least: enough to amortise an item.
const MIN_ITEM_ELEMENTS: usize = 1 << 16;

/// Splits a region into about [`ITEMS_PER_THREAD`] items per thread (one on one thread) of at
/// least [`MIN_ITEM_ELEMENTS`] elements, by chunking its outer loops. Few large items keep the
/// tiles' source streams long, which the hardware prefetchers need.
///
/// With `pad > 0` (a copy whose runs are followed by `pad` fill elements), returns false and
/// adds nothing when no kernel writes that padding in the same pass; `cast_pads` says that the
/// job's fused cast tiles can (the job has source values that cast to the fill). `tail` (from
/// [`tile_tail`]) is the partial cell each tile row ends with.
pub(super) fn split(
    r: &Region,
    (pad, cast_pads): (usize, bool),
    tail: usize,
    fill: bool,
    cast: &CastSpec,
    threads: usize,
    items: &mut Vec<Item>,
) -> bool {
    // The kernels read padding from the job's fill line of MAX_TILE_A elements (a channel
    // padded to 288 has 287 fill elements: its fill is written apart).
    if pad > MAX_TILE_A {
        return false;
    }
    let mut dims = r.loops();
    let size = cast.src.size_bytes().max(cast.dst.size_bytes());
    // Blocks of lane records turned inside out: whole blocks per call, in items of the loops
    // outside them (one of extent 1 where there is none).
    let lane_block = (!fill && tail == 0 && cast.is_identity() && dims.len() >= 3)
        .then(|| lane_loops(&mut dims, pad, size))
        .flatten();
    let lanes = lane_block.is_some();
    if lanes && dims.len() == 3 {
        dims.insert(
            0,
            LoopDim {
                extent: 1,
                src_stride: 0,
                dst_stride: 0,
            },
        );
    }
    // A short innermost run contiguous in both layouts becomes the unit of the other loops.
    let mut unit = 1;
    if !fill && !lanes {
        (unit, dims) = tiling::split_unit(&dims, MAX_UNIT_BYTES / size);
    }
    let n = dims.len();
    let inner = dims[n - 1];
    let u = unit as isize;
    let (mut a_loops, mut b_loops) = (1, 1);
    let kind = if fill {
        Kind::Fill
    } else if lanes {
        Kind::Lanes
    } else if inner.src_stride == u && inner.dst_stride == u {
        Kind::Run
    } else if let Some(t) = tiling::tile_axes(&dims, unit) {
        // A tile: the loops outside it, then its source-contiguous loops, then the
        // destination-contiguous one(s).
        a_loops = t.a.len();
        // A cast tile takes padding as the few-rows tiles write it (records of a few
        // channels and their fill, one source-contiguous loop of pixels), or as the fused
        // cast kernels do, with fill rows of source values that cast to the fill, where a
        // padded destination row is whole lines (f32 -> f16 NCHW -> NCHW32c with C = 16:
        // each pixel's 16 channels and 16 fill values are one line, written once instead of
        // twice; one thread, two alternating runs: 62-75% of the copy -> 98-110% at 56 x 56
        // and 224 x 224). Not for shorter rows: f32 -> i8 into NCHW32c's 32-byte pixels ran
        // at 32-65% where the data and the fill apart ran at 62-83%.
        if pad > 0 && !cast.is_identity() {
            let records = t.a.len() == 1 && t.a[0].dst_stride == (t.b.extent + pad) as isize;
            let few = records && super::interleave::few_rows_pad(cast, t.b.extent, unit, pad);
            let row_bytes = (t.b.extent + pad) * cast.dst.size_bytes();
            if !(few || (cast_pads && unit == 1 && row_bytes.is_multiple_of(64))) {
                return false;
            }
        }
        dims = t.outer;
        if tail == 0 && compound_b(&t.a, t.b, (unit, pad), size, cast.is_identity()) {
            // ... or the inner source-contiguous loop, then the compound destination row.
            (a_loops, b_loops) = (1, 2);
            dims.extend([t.a[1], t.a[0], t.b]);
        } else {
            dims.extend(t.a);
            dims.push(t.b);
        }
        Kind::Tile
    } else {
        // A short inner loop (a MACE filter image's 9 kernel positions, 32 KiB apart in the
        // source, back to OIHW with one output channel: a kernel call per 9 units, 3-7% of the
        // copy) gives way to a long one around it, which then runs inside.
        if n >= 2 && dims[n - 1].extent < 16 && dims[n - 2].extent >= 64 {
            dims.swap(n - 1, n - 2);
        }
        Kind::Strided
    };
    // Padding after units (or single elements) is written by the strided kernel; after a tile's
    // destination-contiguous loop, by fill rows of a tile holding the whole padded run.
    let padded_tile = pad > 0 && unit == 1 && kind == Kind::Tile;
    if pad > 0
        && !matches!(kind, Kind::Strided | Kind::Lanes)
        && !(padded_tile && (inner.extent + pad) * size <= 512)
    {
        return false;
    }
    // A fill needs two loops for its kernel.
    if kind == Kind::Fill && n == 1 {
        dims.insert(
            0,
            LoopDim {
                extent: 1,
                src_stride: 0,
                dst_stride: 0,
            },
        );
    }
    let n = dims.len();
    let total: usize = dims.iter().map(|d| d.extent).product();
    let target = if threads <= 1 {
        1
    } else {
        (threads * ITEMS_PER_THREAD).min(total.div_ceil(MIN_ITEM_ELEMENTS))
    }
    .max(1);
    // Loops are chunked outermost first. A tile's destination-contiguous loop is chunked
    // before its source-contiguous ones (which stay whole, so tiles stay wide): it moves in
    // front of them here, and back to the end in each item.
    // A tile whose loops outside its source-contiguous one give too few items (one image of
    // a few channels: NCHW -> NHWC N=1,C=3 was one item, one thread busy) is chunked along
    // that loop instead, in whole lines of units where it is long enough.
    let outside = || -> usize { dims[..n - 1 - a_loops].iter().map(|d| d.extent).product() };
    let along_a = kind == Kind::Tile
        && b_loops == 1
        && !padded_tile
        && a_loops == 1
        && tail == 0
        && outside() * dims[n - 1].extent.div_ceil(16) < target
        && dims[n - 2].extent >= 2 * MIN_ITEM_ELEMENTS / dims[n - 1].extent.max(1);
    let reorder = kind == Kind::Tile && b_loops == 1 && !padded_tile && !along_a;
    let last = if kind == Kind::Lanes {
        // The block's three loops stay whole.
        n - 4
    } else if b_loops == 2 {
        // A compound destination row stays whole: chunks along the loops outside it.
        n - 3
    } else if reorder {
        let b = dims.pop().expect("a tile has two loops");
        dims.insert(n - 1 - a_loops, b);
        n - 1 - a_loops
    } else {
        n - 1
    };
    // Find the loop to chunk: loops before it give one item per index.
    let mut before = 1usize;
    let mut k = 0;
    while k < last && before * dims[k].extent < target {
        before *= dims[k].extent;
        k += 1;
    }
    let pieces_k = target.div_ceil(before).clamp(1, dims[k].extent);
    let mut chunk = dims[k].extent.div_ceil(pieces_k);
    if reorder && k == last {
        // Whole tile rows: a multiple of 16 destination-contiguous units.
        chunk = chunk.next_multiple_of(16).min(dims[k].extent);
    }
    if along_a && k == last {
        // Chunks of whole source lines.
        chunk = chunk.next_multiple_of(64).min(dims[k].extent);
    }
    let mut start = vec![0usize; k + 1];
    loop {
        let mut it = Item {
            src_offset: r.src_offset,
            dst_offset: r.dst_offset,
            dims: dims[k..].to_vec(),
            kind,
            unit,
            a_loops,
            pad,
            tail,
            b_loops,
            lanes: lane_block,
        };
        for (j, d) in dims[..=k].iter().enumerate() {
            it.src_offset = (it.src_offset as isize + start[j] as isize * d.src_stride) as usize;
            it.dst_offset = (it.dst_offset as isize + start[j] as isize * d.dst_stride) as usize;
        }
        it.dims[0].extent = chunk.min(dims[k].extent - start[k]);
        if reorder {
            let b = it.dims.remove(last - k);
            it.dims.push(b);
        }
        // A chunk inside a padded tile's source-contiguous loops keeps the inner ones.
        it.a_loops = a_loops.min(it.dims.len() - b_loops).max(1);
        // Keep the kernel's loop count: pad with unit loops if the chunked loop is inside it.
        while it.dims.len() < it.kernel_loops() {
            it.dims.insert(
                0,
                LoopDim {
                    extent: 1,
                    src_stride: 0,
                    dst_stride: 0,
                },
            );
        }
        items.push(it);
        // Next start: loop k by `chunk`, loops before it by one.
        let mut j = k + 1;
        loop {
            if j == 0 {
                return true;
            }
            j -= 1;
            start[j] += if j == k { chunk } else { 1 };
            if start[j] < dims[j].extent {
                break;
            }
            start[j] = 0;
        }
    }
}

/// The lane block ([`LaneBlock::of`]) three of the loops `dims` make, moved to the end of
/// `dims` (the others keep their order in front: a region's loops may run in any order). The
/// last three first; with padding (after the destination-contiguous last loop) only triples
/// ending with it. `OIHW16i16o -> OIHW` is such a block per 16 output channels and 16 input
/// channels, its loop over blocks of input channels between the block's output and input
/// channels.
fn lane_loops(dims: &mut Vec<LoopDim>, pad: usize, size: usize) -> Option<LaneBlock> {
    let n = dims.len();
    let last = n - 1;
    let triples = (0..n).flat_map(|a| (0..n).flat_map(move |b| (0..n).map(move |c| [a, b, c])));
    let found = std::iter::once([n - 3, n - 2, last])
        .chain(triples.filter(|t| t[0] != t[1] && t[1] != t[2] && t[0] != t[2]))
        .filter(|t| pad == 0 || t[2] == last)
        .find_map(|t| LaneBlock::of(&t.map(|i| dims[i]), pad, size).map(|b| (t, b)))?;
    let (t, block) = found;
    let mut moved: Vec<LoopDim> = (0..n).filter(|i| !t.contains(i)).map(|i| dims[i]).collect();
    moved.extend(t.map(|i| dims[i]));
    *dims = moved;
    Some(block)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::fast::loop_dim as l;

    #[test]
    fn short_destination_rows_continued_by_a_source_loop_become_compound() {
        // NHWC -> mace:in_out_height, C = 1000, W = 14: a = (w, c), b = the 4 lanes.
        let a = [l(14, 1000, 4), l(1000, 1, 56)];
        let lanes = l(4, 14000, 1);
        assert!(compound_b(&a, lanes, (1, 0), 2, true), "8-byte f16 rows");
        assert!(
            compound_b(&a, lanes, (1, 0), 4, false),
            "16-byte f32 rows, a cast too"
        );
        assert!(
            !compound_b(&a, lanes, (1, 0), 16, true),
            "64-byte rows are whole lines"
        );
        // The last block of lanes (H = 14: 2 lanes and 2 of padding): identity only.
        let two = l(2, 14000, 1);
        assert!(compound_b(&a, two, (1, 2), 2, true));
        assert!(!compound_b(&a, two, (1, 2), 2, false));
        // Not continued: the outer loop's destination stride is not the padded run.
        assert!(!compound_b(
            &[l(14, 1000, 8), l(1000, 1, 112)],
            lanes,
            (1, 0),
            2,
            true
        ));
        // One source-contiguous loop, or three: the tile as it is.
        assert!(!compound_b(&a[1..], lanes, (1, 0), 2, true));
        // mace:conv2d_filter -> OIHW, I = 2048, 3x3, f32: a = the 4 lanes, b = the taps,
        // continued by the input channels: 73 KiB compound rows, and an `a` of 4.
        let taps = l(9, 8192, 1);
        assert!(!compound_b(
            &[l(2048, 4, 9), l(4, 1, 18432)],
            taps,
            (1, 0),
            4,
            true
        ));
        assert!(!compound_b(
            &[l(2048, 4, 9), l(64, 1, 18432)],
            taps,
            (1, 0),
            4,
            true
        ));
        assert!(!compound_b(
            &[l(3, 4, 9), l(4, 1, 27)],
            taps,
            (1, 0),
            4,
            true
        ));
    }
}
