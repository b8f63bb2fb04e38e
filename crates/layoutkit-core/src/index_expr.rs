//! The per-element maps of a conversion as C expressions, for backends that generate C-like
//! kernels (CUDA C, OpenCL C): from a destination physical offset to the logical coordinate,
//! the padding test, and the source physical offset. Integer literals carry a suffix (`u`,
//! `ull` or none) so the expressions stay in the kernel's index type.

use crate::ShapedLayout;

/// C expressions for one destination element whose physical offset is in the variable `o`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GatherExprs {
    /// `(axis, term)`: the coordinate variable `<prefix><axis>` is the sum of its terms
    /// (`dst`'s axis order; an axis split into blocks has one term per token).
    pub coord_terms: Vec<(usize, String)>,
    /// Conditions, all true exactly for non-padding elements (empty: no padding).
    pub valid: Vec<String>,
    /// The source physical offset of the same coordinate (meaningful only when valid).
    pub src_offset: String,
}

/// The expressions for converting `src` into `dst` one destination element at a time.
/// Coordinates are named `<prefix>0, <prefix>1, ...` in `dst`'s axis order; `o` is the
/// destination offset variable; `suffix` is appended to every integer literal.
///
/// Contract: for every offset `o` of `dst`, the coordinate terms sum to `dst.inverse(o)`'s
/// coordinate (or to the padded position), `valid` holds iff that is not padding, and
/// `src_offset` is `src.forward` of the coordinate (axes matched by name).
pub fn gather_exprs(
    src: &ShapedLayout,
    dst: &ShapedLayout,
    o: &str,
    prefix: &str,
    suffix: &str,
) -> GatherExprs {
    let u = suffix;
    let total = dst.elements();
    let coord_terms = dst
        .phys_dims()
        .iter()
        .map(|d| {
            let s = d.stride as usize;
            let mut t = if s == 1 {
                o.to_string()
            } else {
                format!("({o} / {s}{u})")
            };
            // The outermost token needs no modulo: o / stride < extent already.
            if s * d.extent != total {
                t = format!("({t} % {}{u})", d.extent);
            }
            if d.weight != 1 {
                t = format!("{t} * {}{u}", d.weight);
            }
            (d.axis, t)
        })
        .collect();
    let valid = dst
        .extents()
        .iter()
        .zip(dst.padded_extents())
        .enumerate()
        .filter(|(_, (e, p))| e != p)
        .map(|(ai, (e, _))| format!("{prefix}{ai} < {e}{u}"))
        .collect();
    let perm = src.axis_permutation_to(dst);
    let terms: Vec<String> = src
        .phys_dims()
        .iter()
        .map(|d| {
            let c = format!("{prefix}{}", perm[d.axis]);
            let mut t = if d.weight == 1 {
                c
            } else {
                format!("({c} / {}{u})", d.weight)
            };
            // The outermost token of an axis needs no modulo: c / weight < extent already.
            if d.weight * d.extent != src.padded_extents()[d.axis] {
                t = format!("({t} % {}{u})", d.extent);
            }
            if d.stride != 1 {
                t = format!("{t} * {}{u}", d.stride);
            }
            t
        })
        .collect();
    let src_offset = if terms.is_empty() {
        "0".to_string()
    } else {
        terms.join(" + ")
    };
    GatherExprs {
        coord_terms,
        valid,
        src_offset,
    }
}
