//! Padding written in the same pass as the data: a fill region that completes the innermost
//! destination run of a copy region (the five padding channels after the three data channels
//! of every `kHWC8` pixel, the two padding lanes after the last two channels of a MACE image
//! pixel) is merged into that copy as `pad` fill elements after each run. Each destination
//! line is then written once, instead of once by the copy and again by the fill.

use layoutkit_core::plan::{LoopDim, Region};

/// A copy region and the fill elements written after each of its innermost runs.
pub(crate) struct PaddedCopy<'p> {
    pub region: &'p Region,
    pub pad: usize,
}

/// Pairs each fill that completes a copy's innermost destination run with that copy.
/// Returns the copies (each with its pad, 0 for none) and the fills left over.
///
/// Contract: the padded copies plus the fills returned write exactly the destination elements
/// the inputs write, with the same values (a padded copy writes its pad elements with the
/// fill value, as the fill region it replaces did).
pub(crate) fn absorb_fills<'p>(
    copies: &'p [Region],
    fills: &'p [Region],
) -> (Vec<PaddedCopy<'p>>, Vec<&'p Region>) {
    let mut out: Vec<PaddedCopy> = copies
        .iter()
        .map(|region| PaddedCopy { region, pad: 0 })
        .collect();
    let mut rest = Vec::new();
    'fills: for f in fills {
        for c in out.iter_mut().filter(|c| c.pad == 0) {
            if let Some(pad) = completes(c.region, f) {
                c.pad = pad;
                continue 'fills;
            }
        }
        rest.push(f);
    }
    (out, rest)
}

/// The fill's run length if `fill` writes, right after every innermost run of `copy`, a run
/// of its own, and nothing else.
fn completes(copy: &Region, fill: &Region) -> Option<usize> {
    let (ci, fi) = (copy.dims.last()?, fill.dims.last()?);
    if ci.dst_stride != 1 || fi.dst_stride != 1 {
        return None;
    }
    if fill.dst_offset != copy.dst_offset + ci.extent {
        return None;
    }
    let outer = |r: &Region| dst_shape(&r.dims[..r.dims.len() - 1]);
    (outer(copy) == outer(fill)).then_some(fi.extent)
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
    use layoutkit_core::plan::{ConversionPlan, Strategy};
    use layoutkit_core::{parse_format, Dims};

    fn absorbed(from: &str, to: &str, dims: &str) -> (Vec<usize>, usize) {
        let dims = Dims::parse(dims).unwrap();
        let src = parse_format(from).unwrap().shaped(&dims).unwrap();
        let dst = parse_format(to).unwrap().shaped(&dims).unwrap();
        let plan = ConversionPlan::new(&src, &dst).unwrap();
        let Strategy::Regions { copies, fills } = plan.strategy() else {
            panic!("a linear plan")
        };
        let (c, f) = absorb_fills(copies, fills);
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
            let (c, f) = absorb_fills(&copies, &fills);
            assert_eq!((c[0].pad, f.len()), (0, 1));
        }
        let fills = [Region {
            src_offset: 0,
            dst_offset: 3,
            dims: vec![l(2, 16), l(2, 8), l(5, 1)],
        }];
        let copies = [copy];
        let (c, f) = absorb_fills(&copies, &fills);
        assert_eq!((c[0].pad, f.len()), (5, 0));
    }
}
