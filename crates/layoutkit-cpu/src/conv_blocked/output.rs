//! Where the tiles store their output vectors: straight into the output's layout where its
//! channels allow, and which of its padding slots no tile reaches.

use layoutkit_core::ShapedLayout;

use super::activation;
use crate::conv_fast::channel_block;

/// Output addressing: `n * sn + h * sh + w * sw + vec[group][vector]`.
pub(super) struct OutMap {
    pub sn: usize,
    pub sh: usize,
    pub sw: usize,
    pub vec: Vec<usize>,
    /// Real lanes of each group's last vector where it runs past the group's channels (else
    /// 0), and whether its other lanes are padding slots of a channel block (see
    /// `Shape::tail`).
    pub tail: usize,
    pub tail_pad: bool,
}

/// Where the tiles store: `y` itself when each vector of `lanes` output channels is
/// contiguous there, else None (an `NCHW<lanes>c` buffer then). Without groups, the last
/// vector may run past O (O = 24 on 16 lanes): its real lanes must be contiguous, and it
/// stores them alone or, where the rest of the vector is the padding of the same channel block
/// (`NCHW16c` with C = 24), with zeros there; before, such outputs went through the buffer
/// and a conversion (MobileNetV2's 24-channel layers 1.5x slower than 32 channels).
pub(super) fn out_map(y: &ShapedLayout, groups: usize, og: usize, lanes: usize) -> Option<OutMap> {
    let a = activation(y);
    let block = channel_block(y)?;
    let tail = og % lanes;
    if tail != 0 && groups != 1 {
        return None;
    }
    let vectors = og.div_ceil(lanes);
    let mut vec = Vec::with_capacity(groups * vectors);
    for g in 0..groups {
        for v in 0..vectors {
            let c0 = g * og + v * lanes;
            let real = lanes.min(og - v * lanes);
            if (1..real).any(|l| a.chan[c0 + l] != a.chan[c0] + l) {
                return None;
            }
            vec.push(a.chan[c0]);
        }
    }
    Some(OutMap {
        sn: a.sn,
        sh: a.sh,
        sw: a.sw,
        vec,
        tail,
        tail_pad: tail != 0 && (og - tail) % block + lanes <= block,
    })
}

/// The padding slots of the last channel block that no tile writes when the tiles store
/// straight into `y` (a block wider than the vectors that reach into it: `NCHW32c` with
/// C = 16 on 16 lanes, or the masked last vector of `NCHW24c` with C = 20): `(block, from)`,
/// slots `from..block` of every pixel's record in that block, or None. `c`: the output's
/// channels.
pub(super) fn unwritten_slots(
    y: &ShapedLayout,
    map: &OutMap,
    lanes: usize,
    c: usize,
) -> Option<(usize, usize)> {
    let block = channel_block(y)?;
    let last = c.checked_sub(1)? / block * block;
    let written = if map.tail_pad {
        c.next_multiple_of(lanes)
    } else {
        c
    };
    let from = (written - last).min(block);
    (from < block).then_some((block, from))
}
