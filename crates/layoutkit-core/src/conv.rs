//! 2-D convolution geometry: the parameters every implementation shares and the dims they imply.
//!
//! Activations have axes `N, C, H, W` (any layout of them), filters `O, I, H, W` with
//! `I = C / groups`, and the output `N, C, H, W` with `C = O`. Output extents follow the usual
//! rule `(in + 2 * pad - dilation * (k - 1) - 1) / stride + 1`.
//!
//! ```
//! use layoutkit_core::conv::Conv2d;
//! use layoutkit_core::Dims;
//! let x = Dims::parse("N=1,C=64,H=56,W=56").unwrap();
//! let w = Dims::parse("O=128,I=64,H=3,W=3").unwrap();
//! let conv = Conv2d { stride: [2, 2], padding: [1, 1], ..Conv2d::default() };
//! assert_eq!(conv.output_dims(&x, &w).unwrap().to_string(), "N=1,C=128,H=28,W=28");
//! ```

use crate::{Axis, Dims, Error, Result};

/// Stride, zero padding and dilation per spatial axis (`[H, W]`), and the group count
/// (`groups = C = O` with `I = 1` is a depthwise convolution).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conv2d {
    pub stride: [usize; 2],
    pub padding: [usize; 2],
    pub dilation: [usize; 2],
    pub groups: usize,
}

impl Default for Conv2d {
    /// Stride 1, no padding, no dilation, one group.
    fn default() -> Conv2d {
        Conv2d {
            stride: [1, 1],
            padding: [0, 0],
            dilation: [1, 1],
            groups: 1,
        }
    }
}

/// The extents of `letters` in `dims`, which must hold exactly those axes.
fn extents_of(dims: &Dims, letters: &str) -> Option<Vec<usize>> {
    if dims.entries().len() != letters.len() {
        return None;
    }
    letters
        .chars()
        .map(|l| Axis::from_letter(l).and_then(|a| dims.get(a)))
        .collect()
}

impl Conv2d {
    /// The output dims `N, C = O, H, W` for input dims `x` (`N, C, H, W`) and filter dims `w`
    /// (`O, I, H, W`). Errors, naming the operands, when an axis is missing, a stride, dilation
    /// or group count is 0, `C` or `O` is not a multiple of `groups`, `I != C / groups`, or the
    /// dilated filter is larger than the padded input.
    pub fn output_dims(&self, x: &Dims, w: &Dims) -> Result<Dims> {
        let err = |reason: String| Error::Conv {
            input: x.to_string(),
            filter: w.to_string(),
            reason,
        };
        let xe = extents_of(x, "NCHW")
            .ok_or_else(|| err("the input needs exactly the axes N, C, H, W".into()))?;
        let we = extents_of(w, "OIHW")
            .ok_or_else(|| err("the filter needs exactly the axes O, I, H, W".into()))?;
        let (n, c, h, wd) = (xe[0], xe[1], xe[2], xe[3]);
        let (o, i, kh, kw) = (we[0], we[1], we[2], we[3]);
        if self.stride.contains(&0) || self.dilation.contains(&0) || self.groups == 0 {
            return Err(err(format!(
                "stride {:?}, dilation {:?} and groups {} must be at least 1",
                self.stride, self.dilation, self.groups
            )));
        }
        let g = self.groups;
        if c % g != 0 || o % g != 0 {
            return Err(err(format!(
                "C = {c} and O = {o} must be multiples of groups = {g}"
            )));
        }
        if i != c / g {
            return Err(err(format!(
                "the filter's I = {i} must be C / groups = {c} / {g} = {}",
                c / g
            )));
        }
        let out = |len: usize, k: usize, ax: usize| -> Result<usize> {
            let padded = len
                .checked_add(2 * self.padding[ax])
                .ok_or_else(|| err("padding overflows".into()))?;
            let span = (k.max(1) - 1)
                .checked_mul(self.dilation[ax])
                .and_then(|s| s.checked_add(1))
                .ok_or_else(|| err("dilation overflows".into()))?;
            if k == 0 || span > padded {
                return Err(err(format!(
                    "the filter spans {span} along {}, more than the padded input ({padded})",
                    ["H", "W"][ax]
                )));
            }
            Ok((padded - span) / self.stride[ax] + 1)
        };
        let (oh, ow) = (out(h, kh, 0)?, out(wd, kw, 1)?);
        Dims::parse(&format!("N={n},C={o},H={oh},W={ow}"))
    }

    /// Multiply-accumulates of one convolution: `N * O * OH * OW * (C / groups) * KH * KW`
    /// (twice this is the flop count that TFLOP/s figures use).
    pub fn macs(&self, x: &Dims, w: &Dims) -> Result<u64> {
        let y = self.output_dims(x, w)?;
        let ye = extents_of(&y, "NCHW").unwrap_or_default();
        let we = extents_of(w, "OIHW").unwrap_or_default();
        Ok(ye.iter().chain(&we[1..]).map(|&e| e as u64).product())
    }
}
