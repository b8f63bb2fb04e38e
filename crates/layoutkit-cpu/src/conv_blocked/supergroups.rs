//! Grouped convolutions whose groups' output channels are not whole vectors (ResNeXt-50
//! 32x4d's 4 per group against 16 lanes, RegNet's 24): the blocked tiles take 16 (or 8) output
//! channels of one group at a time, so such groups are joined into *super-groups* of `s`
//! groups whose outputs fill whole vectors and whose filter is block-diagonal (each output
//! channel's weights on its own group's input channels, zeros on the others'): the same
//! convolution with `groups / s` groups, computed with `s` times the multiply-adds in whole
//! vectors.

use layoutkit_core::{parse_format, ShapedLayout};

use super::runtime::filter_f32;
use crate::{Error, TensorRef};

/// Groups a super-group joins for `groups` groups of `og` output channels and vectors of
/// `lanes` (1: none): the fewest whose outputs fill whole vectors, `lanes / gcd(og, lanes)`
/// (`lanes / og` where `og` divides `lanes`; 2 for RegNet's groups of 24 against 16 lanes),
/// where `og` is not a multiple of `lanes` and that many groups divide `groups`. Not capped:
/// even 16 groups of 3 or 5 outputs (16x the multiply-adds) ran 1.2-3.5x faster than the
/// implicit GEMM they would fall to (Zen 5, one thread, `bench/results/conv-cpu.md`).
pub fn blocked_supergroup(groups: usize, og: usize, lanes: usize) -> usize {
    if groups <= 1 || og == 0 || lanes == 0 || og.is_multiple_of(lanes) {
        return 1;
    }
    let s = lanes / gcd(og, lanes);
    if groups.is_multiple_of(s) {
        s
    } else {
        1
    }
}

/// The greatest common divisor of `a` and `b`.
fn gcd(mut a: usize, mut b: usize) -> usize {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// The block-diagonal filter of super-groups of `s` groups for `w` (axes O, I, H, W with
/// I = C / `groups`; any layout and type): f32 OIHW with I = `s` x C / `groups`, output
/// channel `o`'s weights at its group's place inside its super-group, zeros elsewhere.
pub fn expand_groups(
    w: TensorRef<'_>,
    groups: usize,
    s: usize,
) -> Result<(ShapedLayout, Vec<u8>), Error> {
    let oihw = parse_format("OIHW")?.shaped(&w.layout.dims())?;
    let [o, cg, kh, kw] = [0, 1, 2, 3].map(|i| oihw.extents()[i]);
    if groups == 0 || !o.is_multiple_of(groups) || !groups.is_multiple_of(s.max(1)) {
        return Err(Error::Unsupported(format!(
            "{groups} groups of O = {o} cannot be joined {s} at a time"
        )));
    }
    let og = o / groups;
    let (_, wv) = filter_f32(&w, "OIHW")?;
    let taps = kh * kw;
    let wide = s * cg;
    let mut out = vec![0f32; o * wide * taps];
    for oc in 0..o {
        // The group's place in its super-group.
        let place = (oc / og) % s;
        for i in 0..cg {
            for t in 0..taps {
                out[(oc * wide + place * cg + i) * taps + t] = wv[(oc * cg + i) * taps + t];
            }
        }
    }
    let layout = parse_format("OIHW")?.shaped(&layoutkit_core::Dims::parse(&format!(
        "O={o},I={wide},H={kh},W={kw}"
    ))?)?;
    Ok((layout, out.iter().flat_map(|v| v.to_le_bytes()).collect()))
}
