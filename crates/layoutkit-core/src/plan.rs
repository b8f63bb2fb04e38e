//! Conversion plans: how to move every element of a source layout to a destination layout,
//! expressed as data that any backend executes.
//!
//! A plan splits each logical axis into *pieces*: the finest split on which both layouts'
//! blocks fall (their block weights form one divisibility chain, e.g. `C` in `NCHW8c` and
//! `NCHW32c` splits into `C/32, 4, 8`). On pieces both layouts are linear, so the whole
//! conversion is a set of strided boxes ([`Region`]s): *copies* for logical elements and
//! *fills* for the destination's padding. Within a region, loops are ordered by destination
//! stride (writes are sequential) and loops that are contiguous in both layouts are merged, so
//! long runs become single copies.
//!
//! When the blocks of an axis do not nest (e.g. `NCHW3c` -> `NCHW4c`), no linear split exists
//! and the plan is [`Strategy::PerElement`]: map each destination offset through the inverse
//! and forward maps.
//!
//! Contract (property-tested): the copies and fills of a plan are disjoint, cover every
//! destination offset exactly once, every copy reads the source offset of the same logical
//! coordinate, and every fill covers padding only.
//!
//! ```
//! use layoutkit_core::{parse_format, Dims, plan::{ConversionPlan, Strategy}};
//! let dims = Dims::parse("N=2,C=64,H=8,W=8").unwrap();
//! let src = parse_format("NCHW").unwrap().shaped(&dims).unwrap();
//! let dst = parse_format("NCHW16c").unwrap().shaped(&dims).unwrap();
//! let plan = ConversionPlan::new(&src, &dst).unwrap();
//! let Strategy::Regions { copies, fills } = plan.strategy() else { panic!() };
//! assert_eq!(copies.len(), 1);
//! assert!(fills.is_empty());
//! ```

use crate::{Error, Result, ShapedLayout};

/// One loop of a region: `extent` steps of `src_stride` / `dst_stride` elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoopDim {
    pub extent: usize,
    pub src_stride: isize,
    pub dst_stride: isize,
}

/// A box of elements. Loops are outermost first; the last loop is the innermost run.
/// For fill regions `src_offset` is 0 and every `src_stride` is 0.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Region {
    pub src_offset: usize,
    pub dst_offset: usize,
    pub dims: Vec<LoopDim>,
}

impl Region {
    /// Number of elements in the box.
    pub fn elements(&self) -> usize {
        self.dims.iter().map(|d| d.extent).product()
    }

    /// The loops, or one single-element loop for a zero-dimensional box (for kernels that
    /// need at least one loop).
    pub fn loops(&self) -> Vec<LoopDim> {
        if self.dims.is_empty() {
            vec![self.inner()]
        } else {
            self.dims.clone()
        }
    }

    /// The innermost loop, or a single-element loop for a zero-dimensional box.
    pub fn inner(&self) -> LoopDim {
        self.dims.last().copied().unwrap_or(LoopDim {
            extent: 1,
            src_stride: 1,
            dst_stride: 1,
        })
    }

    /// Calls `f(src_offset, dst_offset)` at the start of every innermost run, in order.
    pub fn for_each_run(&self, mut f: impl FnMut(usize, usize)) {
        let outer = &self.dims[..self.dims.len().saturating_sub(1)];
        let mut idx = vec![0usize; outer.len()];
        let (mut s, mut d) = (self.src_offset as isize, self.dst_offset as isize);
        loop {
            f(s as usize, d as usize);
            // Odometer increment over the outer loops.
            let mut k = outer.len();
            loop {
                if k == 0 {
                    return;
                }
                k -= 1;
                idx[k] += 1;
                s += outer[k].src_stride;
                d += outer[k].dst_stride;
                if idx[k] < outer[k].extent {
                    break;
                }
                s -= outer[k].src_stride * outer[k].extent as isize;
                d -= outer[k].dst_stride * outer[k].extent as isize;
                idx[k] = 0;
            }
        }
    }
}

/// How a plan moves the elements.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Strategy {
    /// Strided boxes: copies of logical elements and fills of destination padding.
    Regions {
        copies: Vec<Region>,
        fills: Vec<Region>,
    },
    /// No linear split exists: map each destination offset through inverse and forward maps.
    PerElement,
}

/// A plan to convert `src` to `dst` (same axes, same extents). `src` may be a strided view
/// ([`ShapedLayout::with_strides`]); `dst` is a row-major physical array.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConversionPlan {
    src: ShapedLayout,
    dst: ShapedLayout,
    strategy: Strategy,
}

/// A piece of one logical axis: logical weight and the stride of one step in each layout.
#[derive(Clone, Copy, Debug)]
struct Piece {
    src_stride: isize,
    dst_stride: isize,
}

/// One box of one axis: `(start, count)` per piece, innermost piece first.
type AxisBox = Vec<(usize, usize)>;

impl ConversionPlan {
    /// Plans the conversion. Errors if the axes or extents differ.
    pub fn new(src: &ShapedLayout, dst: &ShapedLayout) -> Result<ConversionPlan> {
        check_compatible(src, dst)?;
        if dst.is_strided() {
            return Err(Error::Strides {
                format: dst.layout().to_string(),
                strides: format!("{:?}", dst.strides()),
                reason: "a conversion writes a whole row-major destination".into(),
            });
        }
        let strategy = match split_axes(src, dst) {
            Some(axes) => regions(&axes, dst),
            None => Strategy::PerElement,
        };
        Ok(ConversionPlan {
            src: src.clone(),
            dst: dst.clone(),
            strategy,
        })
    }

    pub fn src(&self) -> &ShapedLayout {
        &self.src
    }

    pub fn dst(&self) -> &ShapedLayout {
        &self.dst
    }

    pub fn strategy(&self) -> &Strategy {
        &self.strategy
    }
}

/// Checks that a conversion between `src` and `dst` is defined.
pub fn check_compatible(src: &ShapedLayout, dst: &ShapedLayout) -> Result<()> {
    if !src.layout().same_axes(dst.layout()) {
        return Err(Error::AxesDiffer {
            src: src.layout().to_string(),
            src_axes: src.layout().axes_string(),
            dst: dst.layout().to_string(),
            dst_axes: dst.layout().axes_string(),
        });
    }
    if !src.same_dims(dst) {
        return Err(Error::DimsDiffer {
            src: src.dims().to_string(),
            dst: dst.dims().to_string(),
        });
    }
    Ok(())
}

/// Per destination axis: its pieces (innermost first), logical extent and padded extent.
struct AxisSplit {
    weights: Vec<usize>,
    pieces: Vec<Piece>,
    extent: usize,
    dst_padded: usize,
}

fn split_axes(src: &ShapedLayout, dst: &ShapedLayout) -> Option<Vec<AxisSplit>> {
    let perm = dst.axis_permutation_to(src);
    let mut out = Vec::with_capacity(dst.axes().len());
    for (di, &si) in perm.iter().enumerate() {
        let token_weights = |l: &ShapedLayout, ai: usize| -> Vec<(usize, isize)> {
            l.phys_dims()
                .iter()
                .filter(|d| d.axis == ai)
                .map(|d| (d.weight, d.stride))
                .collect()
        };
        let s = token_weights(src, si);
        let d = token_weights(dst, di);
        let mut weights: Vec<usize> = s.iter().chain(&d).map(|&(w, _)| w).collect();
        weights.sort_unstable();
        weights.dedup();
        if weights.windows(2).any(|w| w[1] % w[0] != 0) {
            return None;
        }
        // The token owning piece weight `w` is the one with the largest weight <= w.
        let stride_of = |tokens: &[(usize, isize)], w: usize| -> isize {
            let (tw, ts) = tokens
                .iter()
                .filter(|&&(tw, _)| tw <= w)
                .max_by_key(|&&(tw, _)| tw)
                .copied()
                .unwrap_or((1, 0));
            ts * (w / tw) as isize
        };
        let mut pieces: Vec<Piece> = weights
            .iter()
            .map(|&w| Piece {
                src_stride: stride_of(&s, w),
                dst_stride: stride_of(&d, w),
            })
            .collect();
        // Pieces that continue each other in both layouts (each stride the one below it times
        // the ratio of their weights) are one loop: the axis is then a plain range, not boxes
        // of whole blocks and partial ones (a MACE width-major image's W = 7 in blocks of 4
        // lanes, from NHWC, is one run of 7 pixels, not a run of 4 and one of 3).
        let plain = pieces.windows(2).zip(weights.windows(2)).all(|(p, w)| {
            let r = (w[1] / w[0]) as isize;
            p[1].src_stride == p[0].src_stride * r && p[1].dst_stride == p[0].dst_stride * r
        });
        if plain {
            weights.truncate(1);
            pieces.truncate(1);
        }
        out.push(AxisSplit {
            weights,
            pieces,
            extent: dst.extents()[di],
            dst_padded: dst.padded_extents()[di],
        });
    }
    Some(out)
}

/// Splits the logical range `[lo, hi)` into boxes over mixed-radix digits with the given
/// weights (ascending, `weights[0] == 1`, each dividing the next).
fn decompose(lo: usize, hi: usize, weights: &[usize]) -> Vec<AxisBox> {
    fn rec(
        lo: usize,
        hi: usize,
        level: usize,
        weights: &[usize],
        fixed: &mut Vec<(usize, usize)>,
        out: &mut Vec<AxisBox>,
    ) {
        if lo >= hi {
            return;
        }
        let push = |fixed: &Vec<(usize, usize)>, here: (usize, usize), out: &mut Vec<AxisBox>| {
            // `fixed` holds the levels above `level` (top first); lower levels are full.
            let mut b: AxisBox = (0..level)
                .map(|j| (0, weights[j + 1] / weights[j]))
                .collect();
            b.push(here);
            b.extend(fixed.iter().rev());
            out.push(b);
        };
        let w = weights[level];
        if level == 0 {
            push(fixed, (lo, hi - lo), out);
            return;
        }
        let first_full = lo.div_ceil(w);
        let last_full = hi / w;
        if first_full > last_full {
            let digit = lo / w;
            fixed.push((digit, 1));
            rec(
                lo - digit * w,
                hi - digit * w,
                level - 1,
                weights,
                fixed,
                out,
            );
            fixed.pop();
            return;
        }
        if !lo.is_multiple_of(w) {
            let digit = lo / w;
            fixed.push((digit, 1));
            rec(lo - digit * w, w, level - 1, weights, fixed, out);
            fixed.pop();
        }
        if last_full > first_full {
            push(fixed, (first_full, last_full - first_full), out);
        }
        if !hi.is_multiple_of(w) {
            fixed.push((last_full, 1));
            rec(0, hi - last_full * w, level - 1, weights, fixed, out);
            fixed.pop();
        }
    }
    let mut out = Vec::new();
    rec(
        lo,
        hi,
        weights.len() - 1,
        weights,
        &mut Vec::new(),
        &mut out,
    );
    out
}

fn regions(axes: &[AxisSplit], dst: &ShapedLayout) -> Strategy {
    let valid: Vec<Vec<AxisBox>> = axes
        .iter()
        .map(|a| decompose(0, a.extent, &a.weights))
        .collect();
    let mut copies = Vec::new();
    let choices: Vec<&[AxisBox]> = valid.iter().map(|v| v.as_slice()).collect();
    product(axes, &choices, false, &mut copies);

    // Padding: the first axis (in order) whose index is out of range decides the region, so
    // regions are disjoint: axes before it valid, it invalid, axes after it anything.
    let mut fills = Vec::new();
    if dst.has_padding() {
        let invalid: Vec<Vec<AxisBox>> = axes
            .iter()
            .map(|a| decompose(a.extent, a.dst_padded, &a.weights))
            .collect();
        let full: Vec<Vec<AxisBox>> = axes
            .iter()
            .map(|a| decompose(0, a.dst_padded, &a.weights))
            .collect();
        for k in 0..axes.len() {
            if invalid[k].is_empty() {
                continue;
            }
            let choices: Vec<&[AxisBox]> = (0..axes.len())
                .map(|j| match j.cmp(&k) {
                    std::cmp::Ordering::Less => valid[j].as_slice(),
                    std::cmp::Ordering::Equal => invalid[j].as_slice(),
                    std::cmp::Ordering::Greater => full[j].as_slice(),
                })
                .collect();
            product(axes, &choices, true, &mut fills);
        }
    }
    Strategy::Regions { copies, fills }
}

/// Every combination of one box per axis, as a region.
fn product(axes: &[AxisSplit], choices: &[&[AxisBox]], fill: bool, out: &mut Vec<Region>) {
    if choices.iter().any(|c| c.is_empty()) {
        return;
    }
    let mut pick = vec![0usize; choices.len()];
    loop {
        let mut region = Region {
            src_offset: 0,
            dst_offset: 0,
            dims: Vec::new(),
        };
        let (mut s, mut d) = (0isize, 0isize);
        for (ai, axis) in axes.iter().enumerate() {
            for (piece, &(start, count)) in axis.pieces.iter().zip(&choices[ai][pick[ai]]) {
                let src_stride = if fill { 0 } else { piece.src_stride };
                s += start as isize * src_stride;
                d += start as isize * piece.dst_stride;
                if count > 1 {
                    region.dims.push(LoopDim {
                        extent: count,
                        src_stride,
                        dst_stride: piece.dst_stride,
                    });
                }
            }
        }
        region.src_offset = s as usize;
        region.dst_offset = d as usize;
        region.dims.sort_by_key(|l| std::cmp::Reverse(l.dst_stride));
        region.dims = merge_loops(&region.dims);
        out.push(region);
        // Next combination.
        let mut k = choices.len();
        loop {
            if k == 0 {
                return;
            }
            k -= 1;
            pick[k] += 1;
            if pick[k] < choices[k].len() {
                break;
            }
            pick[k] = 0;
        }
    }
}

/// Merges adjacent loops (outermost first) that are contiguous in both layouts.
fn merge_loops(dims: &[LoopDim]) -> Vec<LoopDim> {
    let mut out: Vec<LoopDim> = Vec::with_capacity(dims.len());
    for &outer in dims.iter().rev() {
        if let Some(inner) = out.last_mut() {
            let n = inner.extent as isize;
            if outer.src_stride == inner.src_stride * n && outer.dst_stride == inner.dst_stride * n
            {
                inner.extent *= outer.extent;
                continue;
            }
        }
        out.push(outer);
    }
    out.reverse();
    out
}
