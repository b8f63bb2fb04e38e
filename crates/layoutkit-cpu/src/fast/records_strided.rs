//! Records of a strided source written as padded records back to back: `count` records of
//! `data` bytes, `stride` bytes apart in the source, each written as the record plus fill up
//! to `out` bytes (one output channel of OIHW into a MACE filter image's 4 lanes or an
//! OIHW16i16o block, the inputs 9 elements apart). The strided kernel moved these a record at
//! a time with a prefetch and two short copies of run-time lengths, and the fill was a second
//! pass over the records (f32 OIHW -> mace:conv2d_filter with O = 1: 3% of the copy on a Zen
//! 4); here the sizes are fixed at compile time for the usual records, each written as one
//! template of fill with its data over it.

use super::records::{far_records_prefetched, prefetch_far_record};

/// Writes `count` records: `dst[r*out .. r*out + data] = src[r*stride ..]`, the rest of each
/// output record from `fill`. Returns false (nothing written) when no kernel has these sizes.
///
/// Contract: `src` holds `(count - 1) * stride + data` bytes (or nothing when `count == 0`),
/// `dst` `count * out`, `fill` `out - data`.
pub(super) fn expand_strided(
    src: &[u8],
    stride: usize,
    dst: &mut [u8],
    count: usize,
    (data, out): (usize, usize),
    fill: &[u8],
) -> bool {
    macro_rules! sizes {
        ($(($d:literal, $o:literal)),*) => {
            match (data, out) {
                $(($d, $o) => expand_strided_const::<$d, $o>(src, stride, dst, count, fill),)*
                _ => return false,
            }
        };
    }
    sizes!(
        (1, 4),
        (1, 8),
        (1, 16),
        (1, 32),
        (2, 4),
        (2, 8),
        (2, 16),
        (2, 32),
        (2, 64),
        (4, 8),
        (4, 16),
        (4, 32),
        (4, 64),
        (4, 128),
        (8, 16),
        (8, 32),
        (8, 64),
        (8, 128)
    );
    true
}

#[inline(always)]
fn expand_strided_const<const D: usize, const O: usize>(
    src: &[u8],
    stride: usize,
    dst: &mut [u8],
    count: usize,
    fill: &[u8],
) {
    if count == 0 {
        return;
    }
    let src = &src[..(count - 1) * stride + D];
    let mut rec = [0u8; O];
    rec[D..].copy_from_slice(&fill[..O - D]);
    let far = far_records_prefetched(stride);
    if O == 8 && D <= 4 && !far {
        // Records of one word: the template and the data joined in a register (the record
        // kept in an array took a 2-byte load merged into a 64-bit register, about 3 cycles a
        // record for f16 into 8-byte records).
        let mut t = [0u8; 8];
        t.copy_from_slice(&rec[..8]);
        let template = u64::from_le_bytes(t);
        for (r, o) in dst[..count * O].chunks_exact_mut(8).enumerate() {
            let mut v = [0u8; 8];
            v[..D].copy_from_slice(&src[r * stride..r * stride + D]);
            o.copy_from_slice(&(template | u64::from_le_bytes(v)).to_le_bytes());
        }
        return;
    }
    for (r, o) in dst[..count * O].chunks_exact_mut(O).enumerate() {
        if far {
            prefetch_far_record(src.as_ptr(), r, stride);
        }
        rec[..D].copy_from_slice(&src[r * stride..r * stride + D]);
        o.copy_from_slice(&rec);
    }
}

/// Moves `count` units of `data` bytes from `src`, `src_stride` bytes apart, to `dst`,
/// `dst_stride` bytes apart (a MACE filter image's one used lane of each record back to OIHW,
/// 9 elements apart), asking for the source line 8 units ahead of each (as the strided
/// kernel's loop of run-time lengths did). Returns false (nothing written) for other sizes.
///
/// Contract: with `count > 0`, `src` holds `(count - 1) * src_stride + data` bytes and `dst`
/// `(count - 1) * dst_stride + data`.
pub(super) fn move_strided(
    (src, src_stride): (&[u8], usize),
    (dst, dst_stride): (&mut [u8], usize),
    count: usize,
    data: usize,
) -> bool {
    let strides = (src_stride, dst_stride);
    match data {
        1 => move_strided_const::<1>(src, dst, strides, count),
        2 => move_strided_const::<2>(src, dst, strides, count),
        4 => move_strided_const::<4>(src, dst, strides, count),
        8 => move_strided_const::<8>(src, dst, strides, count),
        16 => move_strided_const::<16>(src, dst, strides, count),
        _ => return false,
    }
    true
}

#[inline(always)]
fn move_strided_const<const D: usize>(
    src: &[u8],
    dst: &mut [u8],
    (ss, ds): (usize, usize),
    count: usize,
) {
    if count == 0 {
        return;
    }
    let src = &src[..(count - 1) * ss + D];
    let dst = &mut dst[..(count - 1) * ds + D];
    for r in 0..count {
        // A prefetch never faults: past the source's end it is ignored.
        super::transpose::prefetch(src.as_ptr().wrapping_add((r + 8) * ss));
        let mut v = [0u8; D];
        v.copy_from_slice(&src[r * ss..r * ss + D]);
        dst[r * ds..r * ds + D].copy_from_slice(&v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sizes the kernel knows (records of one word, joined in a register, among them), strides
    /// from back to back to far apart, counts from 0: equal to the record-at-a-time loop;
    /// unknown sizes write nothing and say so.
    #[test]
    fn strided_records_equal_the_record_loop() {
        let sizes = [
            (1, 4),
            (1, 8),
            (1, 16),
            (2, 8),
            (4, 8),
            (2, 64),
            (4, 16),
            (4, 64),
            (4, 128),
            (8, 16),
            (8, 128),
        ];
        for (data, out) in sizes {
            for stride in [data, data + 1, 9 * data, 36, 4096 + data] {
                for count in [0, 1, 2, 7, 130] {
                    let src: Vec<u8> = (0..count * stride + data)
                        .map(|i| (i * 7 + 3) as u8)
                        .collect();
                    let fill: Vec<u8> = (0..out - data).map(|i| 200 - i as u8).collect();
                    let mut want = vec![0xEEu8; count * out + 5];
                    for r in 0..count {
                        want[r * out..r * out + data]
                            .copy_from_slice(&src[r * stride..r * stride + data]);
                        want[r * out + data..(r + 1) * out].copy_from_slice(&fill);
                    }
                    let mut got = vec![0xEEu8; count * out + 5];
                    let src = if count == 0 {
                        &src[..0]
                    } else {
                        &src[..(count - 1) * stride + data]
                    };
                    assert!(expand_strided(
                        src,
                        stride,
                        &mut got,
                        count,
                        (data, out),
                        &fill
                    ));
                    assert_eq!(
                        got, want,
                        "data {data} out {out} stride {stride} count {count}"
                    );
                }
            }
        }
        let mut dst = vec![1u8; 40];
        assert!(!expand_strided(&[0; 30], 5, &mut dst, 2, (5, 20), &[0; 15]));
        assert!(dst.iter().all(|&b| b == 1));
    }

    /// Units apart on both sides, every size the kernel knows, strides from back to back to
    /// far apart: equal to the unit-at-a-time loop, the bytes between units untouched;
    /// unknown sizes write nothing and say so.
    #[test]
    fn strided_units_equal_the_unit_loop() {
        for data in [1, 2, 4, 8, 16] {
            for (ss, ds) in [
                (data, 9 * data),
                (4 * data, 9 * data),
                (36, data),
                (5000, 3 * data),
            ] {
                for count in [0, 1, 3, 130] {
                    let src: Vec<u8> = (0..count * ss + data).map(|i| (i * 13 + 1) as u8).collect();
                    let mut want = vec![0xEEu8; count * ds + data];
                    for r in 0..count {
                        want[r * ds..r * ds + data].copy_from_slice(&src[r * ss..r * ss + data]);
                    }
                    let mut got = vec![0xEEu8; count * ds + data];
                    assert!(move_strided((&src, ss), (&mut got, ds), count, data));
                    assert_eq!(got, want, "data {data} strides {ss} {ds} count {count}");
                }
            }
        }
        let mut dst = vec![1u8; 40];
        assert!(!move_strided((&[0; 30], 6), (&mut dst, 7), 2, 3));
        assert!(dst.iter().all(|&b| b == 1));
    }
}
