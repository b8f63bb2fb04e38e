//! How a plan's regions are executed as transposition tiles, as data shared by the backends:
//!
//! * [`tile_axes`]: which loops of a region form a tile. The tile's rows run along `a`, the
//!   loops contiguous in the source (one loop, or several whose flattened index is contiguous,
//!   like `(i, h, w)` in `OIHW -> OIHW16i16o`); its columns along `b`, the loop contiguous in
//!   the destination. Both coalesce (GPU) or stream (CPU) on their own side.
//! * [`absorb_fills`]: padding written in the same pass as the data. A fill region that
//!   completes each innermost destination run of a copy (the five padding channels after the
//!   three data channels of every `kHWC8` pixel, the two padding lanes after the last two
//!   channels of a MACE image pixel) is merged into the copy as `pad` fill elements after each
//!   run, so each destination line is written once.
//!
//! ```
//! use layoutkit_core::{parse_format, Dims, plan::{ConversionPlan, Strategy}, tiling};
//! let dims = Dims::parse("O=32,I=32,H=3,W=3").unwrap();
//! let src = parse_format("OIHW").unwrap().shaped(&dims).unwrap();
//! let dst = parse_format("OIHW16i16o").unwrap().shaped(&dims).unwrap();
//! let plan = ConversionPlan::new(&src, &dst).unwrap();
//! let Strategy::Regions { copies, .. } = plan.strategy() else { panic!() };
//! let t = tiling::tile_axes(&copies[0].dims, 1).unwrap();
//! // Rows over (I/16, i, h, w) flattened: 2 * 16 * 9 = 288 source-contiguous elements.
//! assert_eq!(t.a.iter().map(|l| l.extent).product::<usize>(), 288);
//! assert_eq!((t.b.extent, t.b.dst_stride), (16, 1));
//! ```

use crate::plan::{LoopDim, Region};

/// A region's loops arranged as a tile (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TileAxes {
    /// The other loops, in the region's order (outermost first).
    pub outer: Vec<LoopDim>,
    /// The source-contiguous loops, outermost first: the innermost has source stride `unit`,
    /// each other one the span of the loops inside it.
    pub a: Vec<LoopDim>,
    /// The destination-contiguous loop (destination stride `unit`).
    pub b: LoopDim,
}

/// The tile of a region with loops `dims` (outermost first) whose innermost loop is contiguous
/// in the destination, moving `unit` elements per step (1, or a short run contiguous in both
/// layouts that moves whole); `None` when the innermost loop is not destination-contiguous,
/// is also source-contiguous (a plain run), or no other loop is source-contiguous.
///
/// Contract (tested): `outer`, `a` and `b` hold the region's loops exactly once each.
pub fn tile_axes(dims: &[LoopDim], unit: usize) -> Option<TileAxes> {
    let u = unit as isize;
    let (&b, rest) = dims.split_last()?;
    if b.dst_stride != u || b.src_stride == u {
        return None;
    }
    let mut outer = rest.to_vec();
    let first = outer.iter().rposition(|d| d.src_stride == u)?;
    let mut a = vec![outer.remove(first)];
    let mut span = a[0].extent as isize * u;
    // Loops that continue the run in the source join it (outermost last found, first placed).
    while let Some(j) = outer
        .iter()
        .position(|d| d.src_stride == span && d.extent > 1)
    {
        let d = outer.remove(j);
        span *= d.extent as isize;
        a.insert(0, d);
    }
    Some(TileAxes { outer, a, b })
}

/// A region's loops with a short innermost run that is contiguous in both layouts split off as
/// the unit the other loops move (the four lanes of a MACE image pixel): `(unit, other loops)`.
/// The run becomes the unit when it is at most `max_unit` elements and other loops remain;
/// otherwise the unit is 1 and the loops are returned whole.
///
/// Contract (tested): the loops returned, with a loop of `unit` elements and strides 1 appended
/// when `unit > 1`, are the loops given.
pub fn split_unit(dims: &[LoopDim], max_unit: usize) -> (usize, Vec<LoopDim>) {
    match dims.split_last() {
        Some((inner, rest))
            if !rest.is_empty()
                && inner.src_stride == 1
                && inner.dst_stride == 1
                && inner.extent <= max_unit =>
        {
            (inner.extent, rest.to_vec())
        }
        _ => (1, dims.to_vec()),
    }
}

/// The padded copy that continues every source row of a tile of units by a partial cell: the
/// last channels of an NHWC pixel that fill half of a MACE image pixel, right after the last
/// whole cell along the tile's single source-contiguous loop. Returns its index in `copies`
/// and its run; copies marked in `taken` are skipped. A tile kernel that reads whole
/// source rows writes this cell in the same pass (`run` elements, then `unit - run` fill).
///
/// It matches when the copy has the tile's outer and destination-contiguous loops, a run of
/// fewer than `unit` elements contiguous in both layouts whose padding completes the cell, and
/// starts one cell past the tile's last one in both layouts.
pub fn tail_cell(
    main: &Region,
    axes: &TileAxes,
    unit: usize,
    copies: &[PaddedCopy],
    taken: &[bool],
) -> Option<(usize, usize)> {
    let [a] = axes.a.as_slice() else {
        return None;
    };
    let want: Vec<LoopDim> = axes.outer.iter().chain([&axes.b]).copied().collect();
    let shape =
        |l: &[LoopDim]| -> Vec<LoopDim> { l.iter().filter(|d| d.extent > 1).copied().collect() };
    copies.iter().enumerate().find_map(|(j, t)| {
        let r = t.region;
        let (inner, rest) = r.dims.split_last()?;
        let run = inner.extent;
        let next = a.extent as isize;
        let fits = !taken.get(j).copied().unwrap_or(false)
            && run < unit
            && run + t.pad == unit
            && inner.src_stride == 1
            && inner.dst_stride == 1
            && r.src_offset as isize == main.src_offset as isize + next * a.src_stride
            && r.dst_offset as isize == main.dst_offset as isize + next * a.dst_stride
            && shape(rest) == shape(&want);
        fits.then_some((j, run))
    })
}

/// A copy region and the fill elements written after each of its innermost runs.
#[derive(Clone, Copy, Debug)]
pub struct PaddedCopy<'p> {
    pub region: &'p Region,
    pub pad: usize,
}

/// Which fills [`absorb_fills`] merges into the copies they complete.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FillRuns {
    /// Fills whose innermost loop is a destination run (two or more elements after each run).
    Runs,
    /// Those and fills of one element after each run, which a plan writes without a loop of
    /// extent 1 (the eighth lane of a MACE width-major image of W = 7). The CPU engine's
    /// padded tiles take them (that image, f32, one thread: 32% -> 115% of the copy); the CUDA
    /// engine's padded tail tiles measured slower than its separate fill (a height-major
    /// image of H = 7 on an H100: about 1.0 -> 0.4 of the device copy), so it keeps
    /// [`Self::Runs`].
    Singles,
}

/// Pairs each fill that completes a copy's innermost destination run with that copy (fills of
/// single elements too with [`FillRuns::Singles`]). Returns the copies (each with its pad, 0
/// for none) and the fills left over.
///
/// Contract (tested): the padded copies plus the fills returned write exactly the destination
/// elements the inputs write, with the same values (a padded copy writes its pad elements with
/// the fill value, as the fill region it replaces did).
pub fn absorb_fills<'p>(
    copies: &'p [Region],
    fills: &'p [Region],
    runs: FillRuns,
) -> (Vec<PaddedCopy<'p>>, Vec<&'p Region>) {
    let mut out: Vec<PaddedCopy> = copies
        .iter()
        .map(|region| PaddedCopy { region, pad: 0 })
        .collect();
    let mut rest = Vec::new();
    'fills: for f in fills {
        for c in out.iter_mut().filter(|c| c.pad == 0) {
            if let Some(pad) = completes(c.region, f, runs) {
                c.pad = pad;
                continue 'fills;
            }
        }
        rest.push(f);
    }
    (out, rest)
}

/// The fill region after each innermost run of `copy` (`pad` elements each): what a padded
/// copy writes besides its data, for backends that write it apart.
pub fn fill_after(copy: &Region, pad: usize) -> Region {
    let mut dims: Vec<LoopDim> = copy
        .dims
        .iter()
        .map(|d| LoopDim {
            src_stride: 0,
            ..*d
        })
        .collect();
    let run = match dims.last_mut() {
        Some(last) => std::mem::replace(&mut last.extent, pad),
        None => 1,
    };
    Region {
        src_offset: 0,
        dst_offset: copy.dst_offset + run,
        dims,
    }
}

/// The fill's run length if `fill` writes, right after every innermost run of `copy`, a run
/// of its own, and nothing else. A fill whose innermost loop is not contiguous writes runs
/// of one element (the last lane of a MACE width-major image of W = 7: its plan has no
/// loop of extent 1), taken with [`FillRuns::Singles`] only.
fn completes(copy: &Region, fill: &Region, runs: FillRuns) -> Option<usize> {
    let ci = copy.dims.last()?;
    if ci.dst_stride != 1 || fill.dst_offset != copy.dst_offset + ci.extent {
        return None;
    }
    let (fill_outer, run) = match fill.dims.split_last() {
        Some((fi, outer)) if fi.dst_stride == 1 => (outer, fi.extent),
        _ if runs == FillRuns::Singles => (&fill.dims[..], 1),
        _ => return None,
    };
    (dst_shape(&copy.dims[..copy.dims.len() - 1]) == dst_shape(fill_outer)).then_some(run)
}

/// The destination offsets a loop nest visits, in a canonical form: extent-1 loops dropped
/// and loops that continue each other in the destination merged, as `(extent, dst_stride)`.
fn dst_shape(loops: &[LoopDim]) -> Vec<(usize, isize)> {
    let mut out: Vec<(usize, isize)> = Vec::new();
    for l in loops.iter().filter(|l| l.extent > 1) {
        match out.last_mut() {
            Some(last) if last.1 == l.dst_stride * l.extent as isize => {
                *last = (last.0 * l.extent, l.dst_stride);
            }
            _ => out.push((l.extent, l.dst_stride)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{ConversionPlan, Strategy};
    use crate::{parse_format, Dims};

    fn absorbed(from: &str, to: &str, dims: &str) -> (Vec<usize>, usize) {
        absorbed_with(from, to, dims, FillRuns::Singles)
    }

    fn absorbed_with(from: &str, to: &str, dims: &str, runs: FillRuns) -> (Vec<usize>, usize) {
        let dims = Dims::parse(dims).unwrap();
        let src = parse_format(from).unwrap().shaped(&dims).unwrap();
        let dst = parse_format(to).unwrap().shaped(&dims).unwrap();
        let plan = ConversionPlan::new(&src, &dst).unwrap();
        let Strategy::Regions { copies, fills } = plan.strategy() else {
            panic!("a linear plan")
        };
        let (c, f) = absorb_fills(copies, fills, runs);
        (c.iter().map(|c| c.pad).collect(), f.len())
    }

    #[test]
    fn khwc8_pads_each_pixel_in_the_copy() {
        assert_eq!(absorbed("NCHW", "kHWC8", "N=2,C=3,H=5,W=7"), (vec![5], 0));
    }

    #[test]
    fn the_last_image_pixel_is_completed_by_its_fill() {
        // 10 channels: two whole 4-lane blocks and a tail of 2 lanes + 2 padding lanes.
        let (pads, left) = absorbed("NHWC", "mace:in_out_channel", "N=2,H=3,W=5,C=10");
        assert_eq!(left, 0);
        assert_eq!(pads.iter().filter(|&&p| p == 2).count(), 1);
    }

    #[test]
    fn a_partial_channel_block_is_completed() {
        // NCHW32c with 40 channels: the second block's 8 channels, then 24 of padding.
        let (pads, left) = absorbed("NCHW", "NCHW32c", "N=1,C=40,H=3,W=3");
        assert_eq!((pads.iter().filter(|&&p| p == 24).count(), left), (1, 0));
    }

    #[test]
    fn a_width_major_image_row_is_one_run_and_its_last_lane_one_fill() {
        // W = 7 in blocks of 4 lanes, from NHWC: the blocks continue each other in both
        // layouts, so the plan has one copy (runs of 7 pixels), and the eighth lane of each
        // run, a fill of one element, is written by it.
        assert_eq!(
            absorbed("NHWC", "mace:in_out_width", "N=2,C=5,H=3,W=7"),
            (vec![1], 0)
        );
        assert_eq!(
            absorbed("NHWC", "mace:in_out_width", "N=2,C=5,H=3,W=6"),
            (vec![2], 0)
        );
        // With runs only (the CUDA engine), the single lane stays a fill of its own.
        let runs = absorbed_with(
            "NHWC",
            "mace:in_out_width",
            "N=2,C=5,H=3,W=7",
            FillRuns::Runs,
        );
        assert_eq!(runs, (vec![0], 1));
    }

    #[test]
    fn fills_that_complete_nothing_stay() {
        let l = |extent, dst_stride| LoopDim {
            extent,
            src_stride: 1,
            dst_stride,
        };
        let copy = Region {
            src_offset: 0,
            dst_offset: 0,
            dims: vec![l(4, 8), l(3, 1)],
        };
        // A gap of one element after each run, or a different number of runs: no merge.
        for fill in [
            Region {
                src_offset: 0,
                dst_offset: 4,
                dims: vec![l(4, 8), l(4, 1)],
            },
            Region {
                src_offset: 0,
                dst_offset: 3,
                dims: vec![l(3, 8), l(5, 1)],
            },
        ] {
            let copies = [copy.clone()];
            let fills = [fill];
            let (c, f) = absorb_fills(&copies, &fills, FillRuns::Singles);
            assert_eq!((c[0].pad, f.len()), (0, 1));
        }
        let fills = [Region {
            src_offset: 0,
            dst_offset: 3,
            dims: vec![l(2, 16), l(2, 8), l(5, 1)],
        }];
        let copies = [copy];
        let (c, f) = absorb_fills(&copies, &fills, FillRuns::Singles);
        assert_eq!((c[0].pad, f.len()), (5, 0));
    }

    #[test]
    fn split_unit_takes_short_runs_contiguous_in_both() {
        let l = |extent, src_stride, dst_stride| LoopDim {
            extent,
            src_stride,
            dst_stride,
        };
        let pixel = [l(62, 4, 224), l(56, 250, 4), l(4, 1, 1)];
        assert_eq!(split_unit(&pixel, 16), (4, pixel[..2].to_vec()));
        assert_eq!(split_unit(&pixel, 3), (1, pixel.to_vec()));
        let transpose = [l(56, 1, 256), l(256, 56, 1)];
        assert_eq!(split_unit(&transpose, 16), (1, transpose.to_vec()));
        assert_eq!(split_unit(&pixel[2..], 16), (1, pixel[2..].to_vec()));
    }

    /// The MACE image's partial last pixel is found as the tail cell of the pixel tile, and
    /// nothing is found where every pixel is whole.
    #[test]
    fn the_partial_last_pixel_is_the_tail_cell() {
        for (c, want) in [(250usize, Some(2usize)), (10, Some(2)), (68, None)] {
            let dims = Dims::parse(&format!("N=2,H=3,W=7,C={c}")).unwrap();
            let src = parse_format("NHWC").unwrap().shaped(&dims).unwrap();
            let dst = parse_format("mace:in_out_channel")
                .unwrap()
                .shaped(&dims)
                .unwrap();
            let plan = ConversionPlan::new(&src, &dst).unwrap();
            let Strategy::Regions { copies, fills } = plan.strategy() else {
                panic!("a linear plan")
            };
            let (padded, _) = absorb_fills(copies, fills, FillRuns::Singles);
            let main = padded
                .iter()
                .find(|p| p.region.inner().extent == 4)
                .expect("the whole pixels");
            let (unit, loops) = split_unit(&main.region.dims, 16);
            let axes = tile_axes(&loops, unit).expect("a tile of pixels");
            let found = tail_cell(main.region, &axes, unit, &padded, &[]);
            assert_eq!(found.map(|(_, run)| run), want, "C = {c}");
            if let Some((j, _)) = found {
                assert_eq!(padded[j].pad, 2);
            }
        }
    }

    /// `outer`, `a` and `b` hold every loop of the region once, `a` is contiguous in the
    /// source, and `b` in the destination, for every copy region of a set of plans.
    #[test]
    fn tile_axes_partition_the_loops() {
        for (from, to, dims) in [
            ("NCHW", "NHWC", "N=2,C=5,H=3,W=7"),
            ("NHWC", "NCHW", "N=2,C=5,H=3,W=7"),
            ("OIHW", "OIHW16i16o", "O=32,I=48,H=3,W=5"),
            ("OIHW", "OIHW4i16o4i", "O=32,I=48,H=3,W=5"),
            ("NCHW", "NCHW32c", "N=2,C=64,H=3,W=7"),
        ] {
            let dims = Dims::parse(dims).unwrap();
            let src = parse_format(from).unwrap().shaped(&dims).unwrap();
            let dst = parse_format(to).unwrap().shaped(&dims).unwrap();
            let plan = ConversionPlan::new(&src, &dst).unwrap();
            let Strategy::Regions { copies, .. } = plan.strategy() else {
                panic!("a linear plan")
            };
            for r in copies {
                let t = tile_axes(&r.dims, 1).expect("a transposition");
                let mut all: Vec<LoopDim> = t.outer.clone();
                all.extend(&t.a);
                all.push(t.b);
                let key = |l: &LoopDim| (l.extent, l.src_stride, l.dst_stride);
                let mut want: Vec<_> = r.dims.iter().map(key).collect();
                let mut got: Vec<_> = all.iter().map(key).collect();
                want.sort();
                got.sort();
                assert_eq!(got, want, "{from} -> {to}");
                let mut span = 1;
                for l in t.a.iter().rev() {
                    assert_eq!(l.src_stride, span);
                    span *= l.extent as isize;
                }
                assert_eq!(t.b.dst_stride, 1);
            }
        }
    }
}
