//! Contiguous runs of small records: `count` records of `data` bytes back to back in the
//! source, each written as a record of `data` bytes plus fill up to `out` bytes back to back in
//! the destination (one channel into kHWC8's or NCHW32c's padded records, 1-3 channels into a
//! MACE image's 4 lanes). The strided kernel moved these one record at a time with a prefetch
//! and two short copies each (f16 NCHW -> kHWC8 with C = 1: 6% of the copy); here each record
//! is one whole-record store of a template (fill) with the data over it, sizes fixed at compile
//! time for the usual records so the compiler emits vector moves.

use layoutkit_core::plan::{LoopDim, Region};

/// Whether `fill` writes, right after each element of `copy`, the rest of a record that the
/// next element starts after: `copy`'s loops of more than one element are one loop in the
/// destination (each loop's stride the extent of the next inside it: OIHW -> a MACE filter
/// image with one output channel, whose copy steps over the inputs inside the kernel's 3 x 3
/// positions), its stride the record, and `fill` that loop outside a run of `stride - 1`
/// elements starting one element after each copied one.
pub(super) fn fills_records(copy: &Region, fill: &Region) -> bool {
    let long = |d: &&LoopDim| d.extent > 1;
    let c: Vec<&LoopDim> = copy.dims.iter().filter(long).collect();
    let Some((run, outer)) = fill.dims.split_last() else {
        return false;
    };
    let f: Vec<&LoopDim> = outer.iter().filter(long).collect();
    let [f] = f[..] else { return false };
    let Some((&inner, around)) = c.split_last() else {
        return false;
    };
    let (mut extent, mut next) = (inner.extent, inner.dst_stride * inner.extent as isize);
    for l in around.iter().rev() {
        if l.dst_stride != next {
            return false;
        }
        extent *= l.extent;
        next = l.dst_stride * l.extent as isize;
    }
    run.dst_stride == 1
        && run.extent >= 1
        && inner.dst_stride == 1 + run.extent as isize
        && f.extent == extent
        && f.dst_stride == inner.dst_stride
        && fill.dst_offset == copy.dst_offset + 1
}

/// Writes `count` records: `dst[r*out .. r*out + data] = src[r*data ..]`, the rest of each
/// output record from `fill` (`out - data` bytes of the fill value). Returns false (nothing
/// written) when no kernel has these sizes.
///
/// Contract: `src` holds `count * data` bytes, `dst` `count * out`, `fill` `out - data`.
pub(super) fn expand(
    src: &[u8],
    dst: &mut [u8],
    count: usize,
    data: usize,
    out: usize,
    fill: &[u8],
) -> bool {
    macro_rules! sizes {
        ($(($d:literal, $o:literal)),*) => {
            match (data, out) {
                $(($d, $o) => expand_const::<$d, $o>(src, dst, count, fill),)*
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
        (3, 4),
        (2, 16),
        (2, 32),
        (2, 64),
        (4, 8),
        (4, 16),
        (4, 32),
        (4, 64),
        (4, 128),
        (6, 8),
        (8, 16),
        (12, 16),
        (8, 32),
        (16, 32),
        (24, 32),
        (12, 32)
    );
    true
}

/// [`expand`] of all records of `src` (`data` bytes each) into `dst` (`out` bytes each), a
/// scratch-sized piece at a time through `buf`, each piece then streamed to the destination
/// past the cache when `stream` (the destination is several times the source, and ordinary
/// stores read each of its lines before writing it); without `stream`, straight into the
/// destination. Returns false (nothing written) when no kernel has these sizes.
pub(super) fn expand_streamed(
    src: &[u8],
    dst: &mut [u8],
    (data, out): (usize, usize),
    fill: &[u8],
    (buf, stream): (&mut [u8], bool),
) -> bool {
    let count = src.len() / data;
    if !stream {
        // Plain stores straight into the destination (no piece to stage).
        return expand(src, dst, count, data, out, fill);
    }
    if let Some(known) = expand_streaming(src, dst, count, (data, out), fill) {
        return known;
    }
    let per = (buf.len() / out).max(1);
    let mut r = 0;
    while r < count {
        let m = per.min(count - r);
        let piece = &mut buf[..m * out];
        if !expand(&src[r * data..(r + m) * data], piece, m, data, out, fill) {
            // Sizes without a kernel fail on the first piece, before anything is written.
            debug_assert_eq!(r, 0);
            return false;
        }
        super::transpose::stream_copy(&mut dst[r * out..(r + m) * out], piece);
        r += m;
    }
    true
}

/// The vector bytes of the streamed records kernels this CPU runs (64 with AVX-512, 32 with
/// AVX2), or None.
#[cfg(target_arch = "x86_64")]
fn streaming_vector() -> Option<usize> {
    use super::transpose::{avx2_builds, avx512_builds};
    match () {
        _ if avx512_builds() => Some(64),
        _ if avx2_builds() => Some(32),
        _ => None,
    }
}

/// Whether [`expand_streamed_records`] writes records of `data` bytes into records of `out`
/// bytes starting at address `dst`: a streamed kernel takes the sizes on this CPU, the
/// records before the first vector boundary are whole, and [`expand`] knows the sizes (for
/// those and the last records).
pub(super) fn expand_streaming_takes(dst: usize, data: usize, out: usize) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        let Some(vector) = streaming_vector() else {
            return false;
        };
        const MOST_FILL: usize = 512;
        data < out
            && out - data <= MOST_FILL
            && super::records_stream::takes(data, out, vector)
            && (dst.wrapping_neg() % vector).is_multiple_of(out)
            && expand(&[], &mut [], 0, data, out, &[0; MOST_FILL][..out - data])
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (dst, data, out);
        false
    }
}

/// All of `src`'s records (of `data` bytes) written as records of `out` bytes into `dst` by
/// the streamed kernels, the fill after each from `fill` (`out - data` bytes); false, with
/// nothing written, unless [`expand_streaming_takes`]`(dst, data, out)`.
pub(super) fn expand_streamed_records(
    src: &[u8],
    dst: &mut [u8],
    (data, out): (usize, usize),
    fill: &[u8],
) -> bool {
    expand_streaming(src, dst, src.len() / data, (data, out), fill) == Some(true)
}

/// [`expand`] with the records built in vectors stored past the cache (see
/// [`super::records_stream`]): the records before the destination's first vector boundary
/// and after the last whole vector with ordinary stores. `None` (nothing written) where the
/// CPU, the sizes or the destination's alignment leave no streaming kernel; else whether
/// [`expand`] knows the sizes (false: nothing written).
#[allow(unused_variables)] // no streaming kernels outside x86-64
fn expand_streaming(
    src: &[u8],
    dst: &mut [u8],
    count: usize,
    (data, out): (usize, usize),
    fill: &[u8],
) -> Option<bool> {
    #[cfg(target_arch = "x86_64")]
    {
        use super::records_stream::{expand_avx2, expand_avx512, takes};
        let vector = streaming_vector()?;
        let head_bytes = dst.as_ptr().addr().wrapping_neg() % vector;
        if !takes(data, out, vector) || !head_bytes.is_multiple_of(out) {
            return None;
        }
        let head = (head_bytes / out).min(count);
        if !expand(
            &src[..head * data],
            &mut dst[..head * out],
            head,
            data,
            out,
            fill,
        ) {
            return Some(false);
        }
        let (s, d) = (
            &src[head * data..count * data],
            &mut dst[head * out..count * out],
        );
        let sizes = (data, out);
        // SAFETY: the features are present (checked), the sizes taken, `d` starts on a
        // vector boundary (the head records end on one), `s`, `d` and `fill` as `expand`'s
        // contract says for `count - head` records.
        let done = head
            + match count - head {
                0 => 0,
                n if vector == 64 => unsafe { expand_avx512(s, d, n, sizes, fill) },
                n => unsafe { expand_avx2(s, d, n, sizes, fill) },
            };
        let rest = count - done;
        let known = expand(
            &src[done * data..count * data],
            &mut dst[done * out..count * out],
            rest,
            data,
            out,
            fill,
        );
        debug_assert!(known, "sizes known for the head are known for the rest");
        Some(known)
    }
    #[cfg(not(target_arch = "x86_64"))]
    None
}

#[inline(always)]
fn expand_const<const D: usize, const O: usize>(
    src: &[u8],
    dst: &mut [u8],
    count: usize,
    fill: &[u8],
) {
    let mut template = [0u8; O];
    template[D..].copy_from_slice(&fill[..O - D]);
    let src = &src[..count * D];
    let dst = &mut dst[..count * O];
    let done = expand_vectors(src, dst, count, (D, O), &fill[..O - D]);
    // The records left: the whole template, then the data over it. (A record assembled on
    // the stack and stored whole compiled well only where this loop was inlined into one
    // caller; elsewhere each record was reloaded whole right after its data was written, a
    // failed store forward per record: f32 `NCHW -> kHWC8` of one channel 3.5x slower in
    // cache, `NCHW -> NCHW32c` into 128-byte records 1.6x.)
    let (src, dst) = (&src[done * D..], &mut dst[done * O..]);
    for (o, s) in dst.chunks_exact_mut(O).zip(src.chunks_exact(D)) {
        o.copy_from_slice(&template);
        o[..D].copy_from_slice(s);
    }
}

/// The inverse: `count` records of `stride` bytes back to back in the source, the first `data`
/// bytes of each written back to back to the destination (kHWC8's or NCHW32c's records of one
/// channel, a MACE image's lanes, back to planes or pixels). Returns false (nothing written)
/// when no kernel has these sizes.
///
/// Contract: `src` holds `count * stride` bytes (the last record may end after its data:
/// `(count - 1) * stride + data`), `dst` `count * data`.
pub(super) fn compact(
    src: &[u8],
    dst: &mut [u8],
    count: usize,
    data: usize,
    stride: usize,
) -> bool {
    macro_rules! sizes {
        ($(($d:literal, $o:literal)),*) => {
            match (data, stride) {
                $(($d, $o) => compact_const::<$d, $o>(src, dst, count),)*
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
        (3, 4),
        (2, 16),
        (2, 32),
        (2, 64),
        (4, 8),
        (4, 16),
        (4, 32),
        (4, 64),
        (4, 128),
        (6, 8),
        (8, 16),
        (12, 16),
        (8, 32),
        (16, 32),
        (24, 32),
        (12, 32)
    );
    true
}

#[inline(always)]
fn compact_const<const D: usize, const S: usize>(src: &[u8], dst: &mut [u8], count: usize) {
    if count == 0 {
        return;
    }
    let src = &src[..(count - 1) * S + D];
    let dst = &mut dst[..count * D];
    let done = compact_vectors(src, dst, count, D, S);
    if done == count {
        return;
    }
    // The records left, in a loop of its own (see `expand_const`), asking for their lines
    // ahead where they are far apart.
    let (src, dst) = (&src[done * S..], &mut dst[done * D..]);
    if far_records_prefetched(S) {
        for (r, o) in dst.chunks_exact_mut(D).enumerate() {
            prefetch_far_record(src.as_ptr(), r, S);
            let mut rec = [0u8; D];
            rec.copy_from_slice(&src[r * S..r * S + D]);
            o.copy_from_slice(&rec);
        }
        return;
    }
    for (r, o) in dst.chunks_exact_mut(D).enumerate() {
        let mut rec = [0u8; D];
        rec.copy_from_slice(&src[r * S..r * S + D]);
        o.copy_from_slice(&rec);
    }
}

/// How far ahead of the record it moves a loop over records half a line or more apart asks
/// for source lines (bytes): every line is read for a byte or a few of data (NCHW32c's
/// pixels of 1-4 i8 or f16 channels, kHWC8's one-channel f32 ones), and the hardware
/// prefetchers alone left one core at 60-80% of its read rate there: a C probe of
/// [`compact`]'s record loop on a 1 GiB source on a Xeon (family 6 model 207), records of 32
/// bytes of which 1 is kept, 7.6 GB/s without a prefetch, 9.1 / 10.3 / 10.9 / 12.3 / 12.2
/// with prefetches 1, 2, 4, 8 and 16 KiB ahead; 64-byte records of 2 bytes 10.1 -> 12.2-12.8
/// (`bench/results/sweep.md`).
const FAR_RECORDS_AHEAD_BYTES: usize = 8 << 10;

/// Whether a loop over records `stride` bytes apart asks for their lines ahead
/// ([`prefetch_far_record`]): records half a line or more apart, in a job that prefetches.
pub(super) fn far_records_prefetched(stride: usize) -> bool {
    stride >= 32 && super::transpose::prefetches()
}

/// Asks for the line [`FAR_RECORDS_AHEAD_BYTES`] ahead of record `r` of records `stride`
/// bytes apart from `base`, about once per line: on the records that start within their
/// first `stride` bytes of a 64-byte step from `base` (every record where `stride >= 64`;
/// a mask, not a division by a stride the compiler does not know: that `div` per record
/// cost the strided deinterleave a third of its time).
#[inline(always)]
pub(super) fn prefetch_far_record(base: *const u8, r: usize, stride: usize) {
    if (r * stride) & 63 < stride {
        // A prefetch never faults, so its address may pass the source's end.
        super::transpose::prefetch(base.wrapping_add(r * stride + FAR_RECORDS_AHEAD_BYTES));
    }
}

/// The records [`expand`]'s vector kernels wrote (all of them, or the first ones, or none
/// where the CPU or the sizes have no kernel; `src` and `dst` cut to the records).
#[allow(unused_variables)] // no vector kernels outside x86-64
fn expand_vectors(
    src: &[u8],
    dst: &mut [u8],
    count: usize,
    sizes: (usize, usize),
    fill: &[u8],
) -> usize {
    #[cfg(target_arch = "x86_64")]
    {
        use super::records_x86::{avx2_expands, avx512_expands, expand_avx2, expand_avx512};
        let (data, out) = sizes;
        if super::transpose::avx512_builds() && avx512_expands(data, out) {
            // SAFETY: AVX-512F/BW/VBMI present (checked), sizes taken; `src`, `dst` and
            // `fill` as the contract says (cut by the caller).
            unsafe { expand_avx512(src, dst, count, sizes, fill) };
            return count;
        }
        if super::transpose::avx2_builds() && avx2_expands(data, out) {
            // SAFETY: AVX2 present (checked), sizes taken, as above.
            return unsafe { expand_avx2(src, dst, count, sizes, fill) };
        }
    }
    0
}

/// The records [`compact`]'s vector kernels wrote (all of them, or the first ones, or none
/// where the CPU or the sizes have no kernel; `src` and `dst` cut to the records).
#[allow(unused_variables)] // no vector kernels outside x86-64
fn compact_vectors(src: &[u8], dst: &mut [u8], count: usize, data: usize, stride: usize) -> usize {
    #[cfg(target_arch = "x86_64")]
    {
        use super::records_x86::{avx2_takes, avx512_takes, compact_avx2, compact_avx512};
        if super::transpose::avx512_builds() && avx512_takes(data, stride) {
            // SAFETY: AVX-512F/BW/VBMI present (checked), sizes taken; `src` and `dst` as
            // the contract says (cut by the caller).
            unsafe { compact_avx512(src, dst, count, data, stride) };
            return count;
        }
        // 4-byte records a line or more apart (NCHW32c's one-channel f32 pixels): one gather
        // per 16 records, the line of each record ahead prefetched, so the lines without
        // data are not read; the scalar loop moved one at a time (f32 `NCHW32c -> NCHW` of
        // one channel, 32 MiB, Zen 5, alternated: 85-91% -> 126-132% of the copy, the f32 ->
        // f16 / i8 casts the same; kHWC8's 32-byte records, whose lines all hold data, ran
        // 0.97-1.01x and keep the loop).
        use super::interleave::gather_split;
        if super::transpose::avx512_builds()
            && data == 4
            && stride >= 64
            && gather_split::applies(stride, 1)
        {
            // SAFETY: AVX-512F present (checked), `applies`; `src` holds `count` records of
            // `stride` bytes (the last `data` bytes long) and `dst` `count * 4` bytes (the
            // contract), one row.
            return unsafe {
                gather_split::split_gathered(src.as_ptr(), stride, dst.as_mut_ptr(), 0, count, 1)
            };
        }
        if super::transpose::avx2_builds() && avx2_takes(data, stride) {
            // SAFETY: AVX2 present (checked), sizes taken, as above.
            return unsafe { compact_avx2(src, dst, count, data, stride) };
        }
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every size pair `compact` and `expand` take (records of 4 to 128 bytes, each data
    /// size tried: the pairs taken are those their size tables list, the others return false
    /// and write nothing), on every kernel build of this CPU: counts around the vectors'
    /// record counts, sources cut right after the last record's data (as the engine passes
    /// them) at odd offsets, destinations inside a larger buffer whose bytes around them must
    /// stay as they were (the vector kernels store 16 to 64 bytes at a time).
    /// `out`'s bytes before `at` and after its `len` written ones still hold the guard value.
    fn guards_kept(out: &[u8], at: usize, len: usize, (d, s, count): (usize, usize, usize)) {
        assert!(
            out[..at].iter().all(|&b| b == GUARD),
            "({d}, {s}) {count}: before"
        );
        assert!(
            out[at + len..].iter().all(|&b| b == GUARD),
            "({d}, {s}) {count}: after"
        );
    }

    const GUARD: u8 = 0xA5;

    #[test]
    fn records_match_the_definition_on_every_build() {
        let pairs = [4, 8, 16, 32, 64, 128]
            .into_iter()
            .flat_map(|s| (1..s).map(move |d| (d, s)));
        let check = || {
            let mut taken = 0;
            for (d, s) in pairs.clone() {
                if !compact(&[0; 128], &mut [7; 128], 1, d, s) {
                    let mut out = [7u8; 128];
                    assert!(!expand(&[0; 128], &mut out, 1, d, s, &[0; 128]));
                    assert!(out.iter().all(|&b| b == 7), "({d}, {s}) wrote");
                    continue;
                }
                taken += 1;
                let counts = (0..=40).chain([63, 64, 65, 127, 128, 129, 1000, 1001]);
                for count in counts {
                    for skew in [0, 3] {
                        let len = if count == 0 { 0 } else { (count - 1) * s + d };
                        let all: Vec<u8> =
                            (0..len + skew + 64).map(|i| (i * 7 % 253) as u8).collect();
                        let src = &all[skew..skew + len];
                        let guard = 80;
                        let mut out = vec![GUARD; count * d + 2 * guard + skew];
                        let at = guard + skew;
                        assert!(compact(src, &mut out[at..at + count * d], count, d, s));
                        for r in 0..count {
                            let got = &out[at + r * d..at + r * d + d];
                            assert_eq!(
                                got,
                                &src[r * s..r * s + d],
                                "({d}, {s}) count {count} record {r}"
                            );
                        }
                        guards_kept(&out, at, count * d, (d, s, count));
                        // And back: the records' data from `src`'s first `count * d` bytes,
                        // the fill after each.
                        let packed = &all[skew..skew + count * d];
                        let fill: Vec<u8> = (0..s - d).map(|i| (100 + 3 * i) as u8).collect();
                        let mut out = vec![GUARD; count * s + 2 * guard + skew];
                        assert!(expand(
                            packed,
                            &mut out[at..at + count * s],
                            count,
                            d,
                            s,
                            &fill
                        ));
                        for r in 0..count {
                            let got = &out[at + r * s..at + (r + 1) * s];
                            assert_eq!(
                                &got[..d],
                                &packed[r * d..(r + 1) * d],
                                "({d}, {s}) {count} {r}"
                            );
                            assert_eq!(
                                &got[d..],
                                &fill[..],
                                "({d}, {s}) count {count} record {r} fill"
                            );
                        }
                        guards_kept(&out, at, count * s, (d, s, count));
                    }
                }
            }
            assert_eq!(taken, 22, "size pairs with kernels");
        };
        check();
        #[cfg(target_arch = "x86_64")]
        super::super::transpose::tests::with_avx2_builds(check);
    }

    /// `expand_streamed` into a streamed destination (the streaming kernels where the CPU,
    /// the sizes and the destination's alignment allow, else the scratch route) equals the
    /// definition on every build, for every size pair `expand` takes: destinations at every
    /// offset from a line (so heads of records before the first vector boundary, and
    /// alignments no kernel takes), record counts around the kernels' groups, the bytes
    /// around the destination untouched.
    #[test]
    fn streamed_records_match_the_definition_on_every_build() {
        let pairs: Vec<(usize, usize)> = [4, 8, 16, 32, 64, 128]
            .into_iter()
            .flat_map(|s| (1..s).map(move |d| (d, s)))
            .filter(|&(d, s)| expand(&[], &mut [], 0, d, s, &vec![0; s - d]))
            .collect();
        assert_eq!(pairs.len(), 22);
        let check = || {
            let mut buf = super::super::AlignedBuf::zeroed(super::super::SCRATCH_BYTES);
            for &(d, s) in &pairs {
                let fill: Vec<u8> = (0..s - d).map(|i| (100 + 3 * i) as u8).collect();
                for count in [0, 1, 2, 3, 15, 16, 17, 31, 33, 64, 65, 130, 1000, 3001] {
                    let packed: Vec<u8> = (0..count * d).map(|i| (i * 7 % 253) as u8).collect();
                    for at in [64, 65, 68, 72, 80, 96, 112, 127] {
                        let mut out = super::super::AlignedBuf::zeroed(count * s + at + 64);
                        out.fill(GUARD);
                        let dst = &mut out[at..at + count * s];
                        assert!(expand_streamed(
                            &packed,
                            dst,
                            (d, s),
                            &fill,
                            (&mut buf, true)
                        ));
                        super::super::transpose::store_fence();
                        for r in 0..count {
                            let got = &out[at + r * s..at + (r + 1) * s];
                            let what = format!("({d}, {s}) count {count} at {at} record {r}");
                            assert_eq!(&got[..d], &packed[r * d..(r + 1) * d], "{what}");
                            assert_eq!(&got[d..], &fill[..], "{what} fill");
                        }
                        guards_kept(&out, at, count * s, (d, s, count));
                    }
                }
            }
        };
        check();
        #[cfg(target_arch = "x86_64")]
        super::super::transpose::tests::with_avx2_builds(check);
    }
}
