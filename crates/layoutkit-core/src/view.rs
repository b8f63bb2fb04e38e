//! Arrays a caller already holds (a numpy array, a framework tensor: a shape and strides over
//! memory) read in place as a layout's physical array.
//!
//! The rule: **a layout describes the order of the elements in memory.** The array's
//! dimensions are read in *memory order*, sorted by decreasing stride; for a row-major array
//! (gaps allowed: a slice of a batch or of the channels) that is its index order, so its
//! element `[i0, i1, ...]` is the physical array's `[i0, i1, ...]`. A transposed view or a
//! PyTorch `channels_last` tensor is read as its memory lies: a `channels_last` tensor of
//! shape `(N, C, H, W)` is the physical array of `NHWC`, and `x.transpose(0, 2, 3, 1)` of a
//! row-major `NCHW` array is the physical array of `NCHW`, whatever its shape says.
//!
//! Dimensions with one index are never stepped along, so they are matched to the layout's
//! one-index dimensions wherever those stand. When the dims are not given they are inferred
//! from the array's shape; where a one-index dimension's stride places it elsewhere than its
//! index (PyTorch gives a `channels_last` tensor with one channel the strides of both NCHW and
//! NHWC) and the two readings infer different dims, the dims must be given.

use crate::{Dims, Error, Layout, Result, ShapedLayout};

/// The array's dimensions in memory order: sorted by decreasing stride; ties put dimensions
/// with more than one index first, then keep index order. A one-index dimension with stride 0
/// (numpy's `None` index) is placed as a row-major array would place it. Returns the order's
/// `(shape, strides)`.
pub fn memory_order(shape: &[usize], strides: &[isize]) -> (Vec<usize>, Vec<isize>) {
    let mut effective = strides.to_vec();
    let mut inner: isize = 1;
    for k in (0..shape.len()).rev() {
        if shape[k] <= 1 && strides[k] == 0 {
            effective[k] = inner;
        }
        inner = effective[k].saturating_mul(shape[k].max(1) as isize);
    }
    let mut order: Vec<usize> = (0..shape.len()).collect();
    order.sort_by_key(|&k| (std::cmp::Reverse(effective[k]), shape[k] <= 1, k));
    (
        order.iter().map(|&k| shape[k]).collect(),
        order.iter().map(|&k| strides[k]).collect(),
    )
}

/// The extents of the dimensions with more than one index, in order.
fn big(shape: &[usize]) -> Vec<usize> {
    shape.iter().copied().filter(|&n| n > 1).collect()
}

/// `layout` with `dims` (or, when `None`, the dims the array's shape implies) read in place
/// through an array of `shape` and `strides` (in elements), following the module's rule.
///
/// Contract: the array's dimensions with more than one index, in memory order, have the
/// extents of the result's [`ShapedLayout::array_shape`]'s, and `forward` gives the offset,
/// from the array's first element, of the element holding each logical coordinate. Errors
/// name the array's shape and strides and the shape expected.
///
/// ```
/// use layoutkit_core::{parse_format, view::shaped_view};
/// // A PyTorch channels_last tensor: shape (N, C, H, W) = (2, 3, 4, 5), memory N, H, W, C.
/// let nhwc = parse_format("NHWC").unwrap();
/// let s = shaped_view(&nhwc, None, &[2, 3, 4, 5], &[60, 1, 15, 3]).unwrap();
/// assert_eq!(s.dims().to_string(), "N=2,H=4,W=5,C=3");
/// assert!(!s.is_strided()); // its memory is exactly a row-major NHWC array
/// ```
pub fn shaped_view(
    layout: &Layout,
    dims: Option<&Dims>,
    shape: &[usize],
    strides: &[isize],
) -> Result<ShapedLayout> {
    let refuse = |reason: String| Error::View {
        format: layout.to_string(),
        view: format!("shape {shape:?} and strides {strides:?}"),
        reason,
    };
    if shape.len() != strides.len() {
        return Err(refuse("the shape and the strides differ in length".into()));
    }
    let (order_shape, order_strides) = memory_order(shape, strides);
    let permuted = big(&order_shape) != big(shape);
    let note = if permuted {
        format!("read in memory order (shape {order_shape:?}), ")
    } else {
        String::new()
    };
    let shaped = match dims {
        Some(d) => layout.shaped(d)?,
        None if layout.image().is_some() => {
            return Err(refuse(
                "an image's shape does not determine its dims; give the dims".into(),
            ))
        }
        None => {
            let by_memory = ShapedLayout::infer_dims(layout, &order_shape);
            let by_index = ShapedLayout::infer_dims(layout, shape);
            let inferred = match (permuted, by_index, by_memory) {
                (false, Ok(a), Ok(b)) if a != b => {
                    return Err(refuse(format!(
                        "its one-index dimensions' strides allow dims {a} or {b}; give the dims"
                    )))
                }
                (false, Ok(a), _) => a,
                (_, _, Ok(b)) => b,
                (_, _, Err(e)) => return Err(refuse(format!("{note}{e}"))),
            };
            layout.shaped(&inferred)?
        }
    };
    let expected = shaped.array_shape();
    let Some(view_strides) = match_in_memory_order(&order_shape, &order_strides, &expected) else {
        return Err(refuse(format!(
            "{note}with dims {} its physical array has shape {expected:?}",
            shaped.dims()
        )));
    };
    shaped.with_strides(&view_strides)
}

/// Strides for each dimension of `expected` when the array's dimensions with more than one
/// index, in memory order, have exactly the extents of `expected`'s (one-index dimensions
/// get stride 0: they are never stepped along).
fn match_in_memory_order(
    shape: &[usize],
    strides: &[isize],
    expected: &[usize],
) -> Option<Vec<isize>> {
    let mut big = shape
        .iter()
        .zip(strides)
        .filter(|(&n, _)| n > 1)
        .map(|(&n, &s)| (n, s));
    if expected.contains(&0) {
        // An empty physical array: matched by any empty array.
        return shape.contains(&0).then(|| vec![0; expected.len()]);
    }
    let mut out = Vec::with_capacity(expected.len());
    for &e in expected {
        if e == 1 {
            out.push(0);
            continue;
        }
        match big.next() {
            Some((n, s)) if n == e => out.push(s),
            _ => return None,
        }
    }
    big.next().is_none().then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse_format;

    fn view(
        format: &str,
        dims: Option<&str>,
        shape: &[usize],
        strides: &[isize],
    ) -> Result<ShapedLayout> {
        let d = dims.map(|d| Dims::parse(d).unwrap());
        shaped_view(&parse_format(format).unwrap(), d.as_ref(), shape, strides)
    }

    #[test]
    fn contiguous_arrays_are_dense() {
        let s = view("NCHW", None, &[2, 3, 4, 5], &[60, 20, 5, 1]).unwrap();
        assert!(!s.is_strided());
        assert_eq!(s.dims().to_string(), "N=2,C=3,H=4,W=5");
    }

    #[test]
    fn a_channel_slice_is_read_through_its_strides() {
        // x[:, :3] of an N=2, C=8, H=4, W=5 array.
        let s = view("NCHW", None, &[2, 3, 4, 5], &[160, 20, 5, 1]).unwrap();
        assert!(s.is_strided());
        assert_eq!(s.forward(&[1, 2, 3, 4]).unwrap(), 160 + 40 + 15 + 4);
    }

    #[test]
    fn channels_last_with_one_channel_matches_nhwc() {
        // torch: shape (N, 1, H, W) channels_last has strides (H*W, 1, W, 1).
        let e = view("NHWC", None, &[2, 1, 4, 5], &[20, 1, 5, 1]).unwrap_err();
        assert!(e.to_string().contains("N=2,H=4,W=5,C=1"), "{e}");
        let s = view(
            "NHWC",
            Some("N=2,H=4,W=5,C=1"),
            &[2, 1, 4, 5],
            &[20, 1, 5, 1],
        )
        .unwrap();
        assert!(!s.is_strided());
    }

    #[test]
    fn one_channel_channels_last_needs_dims() {
        let e = view("NCHW", None, &[2, 1, 4, 5], &[20, 1, 5, 1]).unwrap_err();
        assert!(e.to_string().contains("give the dims"), "{e}");
        let s = view(
            "NCHW",
            Some("N=2,C=1,H=4,W=5"),
            &[2, 1, 4, 5],
            &[20, 1, 5, 1],
        )
        .unwrap();
        assert!(!s.is_strided());
        // numpy's None index (stride 0) stays where it is.
        let s = view("NCHW", None, &[2, 1, 3, 4], &[12, 0, 4, 1]).unwrap();
        assert_eq!(s.dims().to_string(), "N=2,C=1,H=3,W=4");
    }

    #[test]
    fn a_transposed_view_is_read_in_memory_order() {
        // x.transpose(0, 2, 3, 1) of a row-major (2, 3, 4, 5) NCHW array: memory is NCHW.
        let s = view("NCHW", None, &[2, 4, 5, 3], &[60, 5, 1, 20]).unwrap();
        assert_eq!(s.dims().to_string(), "N=2,C=3,H=4,W=5");
        let err = view(
            "NHWC",
            Some("N=2,H=4,W=5,C=3"),
            &[2, 4, 5, 3],
            &[60, 5, 1, 20],
        )
        .unwrap_err();
        assert!(err.to_string().contains("memory order"), "{err}");
    }

    #[test]
    fn refusals_name_the_array() {
        let e = view(
            "NCHW",
            Some("N=2,C=3,H=4,W=5"),
            &[2, 3, 4, 6],
            &[72, 24, 6, 1],
        )
        .unwrap_err();
        assert!(e.to_string().contains("[2, 3, 4, 5]"), "{e}");
        let e = view("NCHW", None, &[2, 3, 4, 5], &[60, 20, -5, 1]).unwrap_err();
        assert!(e.to_string().contains("stride -5"), "{e}");
        let e = view("NCHW", None, &[2, 3, 4, 5], &[0, 20, 5, 1]).unwrap_err();
        assert!(e.to_string().contains("stride 0"), "{e}");
    }
}
