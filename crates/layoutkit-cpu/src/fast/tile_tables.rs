//! The row tables of tiles (destination offsets of compound rows, the periodic table a thread
//! keeps between an item's steps) and the line arithmetic the tile shapes use.

use layoutkit_core::plan::LoopDim;

/// The number of `unit_bytes` units from `addr` to the next 64-byte boundary, where rows
/// `row_bytes` apart all share that offset, the units fit it exactly and fewer than `ea`
/// of them are needed; else 0 (no head tile).
pub(super) fn aligned_head(addr: usize, row_bytes: usize, unit_bytes: usize, ea: usize) -> usize {
    let gap = addr.wrapping_neg() % 64;
    if !row_bytes.is_multiple_of(64) || !gap.is_multiple_of(unit_bytes) {
        return 0;
    }
    let head = gap / unit_bytes;
    if head < ea {
        head
    } else {
        0
    }
}

/// The greatest common divisor.
pub(super) fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

pub(super) fn nb_total(tb: usize, pad: usize) -> usize {
    tb + pad
}

/// What a [`PeriodicRows`] table was built from (a thread keeps its last table).
pub(in crate::fast) struct PeriodicKey {
    pub(super) loops: Vec<LoopDim>,
    /// Tile rows, units per row, unit, element bytes, phase.
    pub(super) shape: [usize; 5],
}

/// The destination row offsets of tiles over several source-contiguous loops, which repeat
/// every `period` rows.
pub(in crate::fast) struct PeriodicRows {
    pub(super) period: usize,
    /// The tiles start at rows `phase + k * period` (after a head tile of `phase` rows,
    /// which goes through the general path).
    pub(super) phase: usize,
    /// Byte offsets of rows `0..ta`, from the tile's start.
    pub(super) bytes: Vec<usize>,
    /// The largest offset.
    pub(super) max: usize,
    /// Whether a whole tile's destination is one contiguous range starting at offset 0 (then
    /// it can be written through a scratch tile and streamed out).
    pub(super) contiguous: bool,
    /// Whether every offset is a multiple of 64 bytes.
    pub(super) on_lines: bool,
}

impl PeriodicRows {
    pub(super) fn new(
        period: usize,
        phase: usize,
        rel: &[isize],
        elem: usize,
        row_units: usize,
        unit: usize,
    ) -> Self {
        let bytes: Vec<usize> = rel.iter().map(|&o| o as usize * elem).collect();
        let max = bytes.iter().copied().max().unwrap_or(0);
        let min = bytes.iter().copied().min().unwrap_or(0);
        let row = row_units * unit * elem;
        let contiguous = min == 0 && max + row == bytes.len() * row;
        let on_lines = bytes.iter().all(|o| o % 64 == 0);
        PeriodicRows {
            period,
            phase,
            bytes,
            max,
            contiguous,
            on_lines,
        }
    }
}

/// Destination offsets (elements, relative) of flattened indices `a0 .. a0 + n` of `loops`
/// (outermost first), into `out`.
pub(super) fn dst_offsets(loops: &[LoopDim], a0: usize, n: usize, out: &mut Vec<isize>) {
    out.clear();
    out.reserve(n);
    if let [l] = loops {
        out.extend((a0..a0 + n).map(|a| a as isize * l.dst_stride));
        return;
    }
    // Odometer from a0's digits (on the stack for up to 8 loops: this runs per tile, and a
    // heap index per call was a fifth of small MACE filter conversions' instructions).
    let mut small = [0usize; 8];
    let mut heap = Vec::new();
    let idx: &mut [usize] = if loops.len() <= small.len() {
        &mut small[..loops.len()]
    } else {
        heap.resize(loops.len(), 0);
        &mut heap
    };
    let mut rest = a0;
    let mut off = 0isize;
    for (j, l) in loops.iter().enumerate().rev() {
        idx[j] = rest % l.extent;
        rest /= l.extent;
        off += idx[j] as isize * l.dst_stride;
    }
    for _ in 0..n {
        out.push(off);
        let mut j = loops.len();
        while j > 0 {
            j -= 1;
            idx[j] += 1;
            off += loops[j].dst_stride;
            if idx[j] < loops[j].extent {
                break;
            }
            off -= loops[j].dst_stride * loops[j].extent as isize;
            idx[j] = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::aligned_head;

    /// The head tile's contract: where rows share their offset from a line and the units fit
    /// the gap, the tiles after the head start on a 64-byte boundary; otherwise no head.
    #[test]
    fn the_head_tile_ends_on_a_line() {
        for addr in (0..256).map(|k| 4096 + k * 4) {
            for unit in [1, 2, 4, 8, 16] {
                for row in [64, 128, 36_864, 1000] {
                    for ea in [1, 3, 16, 10_000] {
                        let head = aligned_head(addr, row, unit, ea);
                        let gap = addr.wrapping_neg() % 64;
                        if head > 0 {
                            assert_eq!((addr + head * unit) % 64, 0);
                            assert!(head < ea && row % 64 == 0);
                        } else {
                            assert!(
                                gap == 0 || row % 64 != 0 || gap % unit != 0 || gap / unit >= ea
                            );
                        }
                    }
                }
            }
        }
    }
}
