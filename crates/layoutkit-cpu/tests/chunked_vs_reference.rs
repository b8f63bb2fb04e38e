//! Conversions whose regions interleave in memory (run chunk by chunk, `fast/chunked.rs`)
//! against the reference converter: blocked filters and activations whose channels end inside
//! a block, from and to the plain layouts, every element size and the casts, 1-3 threads,
//! sources and destinations off a cache line, prepared once and run twice.
//!
//! The engine chunks only destinations larger than the L2 caches (streamed ones): the shapes
//! of [`interleaved_regions_beyond_the_caches_equal_the_reference`] are, the others reach the
//! chunks with `LAYOUTKIT_CPU_STREAM=always` (as the test command runs this file again).

use layoutkit_core::plan::ConversionPlan;
use layoutkit_core::{CastSpec, DType, Dims, Quantization};
use layoutkit_cpu::{convert_reference, AlignedBuf, FastConversion};
use layoutkit_testkit::noise_bytes;
use proptest::prelude::*;

/// The layout pairs (either way round) and the dimension whose extent ends inside a block.
const PAIRS: [(&str, &str, &str); 6] = [
    ("OIHW", "OIHW16i16o", "filter"),
    ("OIHW", "OIHW4i16o4i", "filter"),
    ("OIHW", "OIHW8i8o", "filter"),
    ("NHWC", "NCHW32c", "image"),
    ("NHWC", "kHWC8", "image"),
    ("NHWC", "mace:in_out_channel", "image"),
];

fn casts() -> Vec<CastSpec> {
    vec![
        CastSpec::identity(DType::F32),
        CastSpec::identity(DType::F16),
        CastSpec::identity(DType::U8),
        CastSpec::identity(DType::F64),
        CastSpec::new(DType::F32, DType::F16, None).unwrap(),
        CastSpec::new(DType::F16, DType::F32, None).unwrap(),
        CastSpec::new(
            DType::F32,
            DType::I8,
            Some(Quantization {
                scale: 0.02,
                zero_point: -3,
            }),
        )
        .unwrap(),
    ]
}

/// `data` copied `offset` bytes past a 64-byte boundary, and the buffer holding it.
fn at_offset(data: &[u8], offset: usize) -> (AlignedBuf, std::ops::Range<usize>) {
    let mut buf = AlignedBuf::zeroed(data.len() + offset);
    buf[offset..].copy_from_slice(data);
    (buf, offset..offset + data.len())
}

/// The fast engine (prepared for each of `runs`' thread counts, run twice over a garbage
/// destination) writes what the reference writes, the source and the destination the given
/// bytes past a line.
fn check(from: &str, to: &str, text: &str, cast: &CastSpec, runs: &[(usize, (usize, usize))]) {
    let dims = Dims::parse(text).unwrap();
    let src = layoutkit_core::parse_format(from)
        .unwrap()
        .shaped(&dims)
        .unwrap();
    let dst = layoutkit_core::parse_format(to)
        .unwrap()
        .shaped(&dims)
        .unwrap();
    let data = noise_bytes(src.bytes(cast.src).unwrap(), text.len() as u64);
    let mut want = vec![0u8; dst.bytes(cast.dst).unwrap()];
    convert_reference(&src, &data, &dst, &mut want, cast).unwrap();
    let plan = ConversionPlan::new(&src, &dst).unwrap();
    for &(threads, offsets) in runs {
        let conversion = FastConversion::new(&plan, cast, threads).unwrap();
        let (sbuf, s) = at_offset(&data, offsets.0);
        let (mut dbuf, d) = at_offset(&vec![0xA5u8; want.len()], offsets.1);
        for pass in 0..2 {
            conversion
                .run(&sbuf[s.clone()], &mut dbuf[d.clone()])
                .unwrap();
            let got = &dbuf[d.clone()];
            let diff = got.iter().zip(&want).position(|(a, b)| a != b);
            assert!(
                diff.is_none(),
                "{from} -> {to} {text} {cast:?} threads {threads} offsets {offsets:?} pass \
                 {pass}: first difference at byte {diff:?}"
            );
        }
    }
}

/// Dimensions of a pair's kind: output channels, then input channels (or the channels of an
/// image), and the spatial extents.
fn dims_of(kind: &str, (a, b): (usize, usize), (h, w): (usize, usize)) -> String {
    match kind {
        "filter" => format!("O={a},I={b},H={h},W={w}"),
        _ => format!("N={a},C={b},H={h},W={w}"),
    }
}

/// Shapes large enough for many chunks, a shorter last chunk and (with output channels that
/// end inside a block) regions outside the common loop, on several threads. (Not under
/// qemu's aarch64: the test command runs it there without `LAYOUTKIT_CPU_STREAM=always`, so
/// these shapes would not chunk, and emulated it takes minutes.)
#[test]
#[cfg_attr(
    target_arch = "aarch64",
    ignore = "chunks only with LAYOUTKIT_CPU_STREAM=always"
)]
fn interleaved_regions_on_larger_shapes_equal_the_reference() {
    let shapes = [
        ("filter", (203, 24), (3, 3)),
        ("filter", (35, 250), (3, 3)),
        ("filter", (40, 1000), (1, 1)),
        ("filter", (77, 19), (5, 5)),
        ("image", (9, 250), (7, 7)),
        ("image", (2, 37), (13, 11)),
    ];
    for (from, to, kind) in PAIRS {
        for &(k, channels, spatial) in &shapes {
            if k != kind {
                continue;
            }
            let dims = dims_of(kind, channels, spatial);
            let runs = [(1, (48, 2)), (3, (20, 36))];
            for cast in casts() {
                check(from, to, &dims, &cast, &runs);
                check(to, from, &dims, &cast, &runs);
            }
        }
    }
}

/// Destinations of several MiB, chunked whatever `LAYOUTKIT_CPU_STREAM` says: f32, one and
/// two threads, buffers on and off a line.
#[test]
fn interleaved_regions_beyond_the_caches_equal_the_reference() {
    let cases = [
        ("OIHW16i16o", "OIHW", "O=8003,I=24,H=3,W=3"),
        ("mace:in_out_channel", "NHWC", "N=130,C=250,H=7,W=7"),
    ];
    for (from, to, dims) in cases {
        check(
            from,
            to,
            dims,
            &CastSpec::identity(DType::F32),
            &[(1, (0, 0)), (2, (20, 6))],
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(120))]

    /// Random shapes of the same pairs, either way round, any cast, 1-3 threads, buffers off
    /// a line.
    #[test]
    fn interleaved_regions_equal_the_reference(
        pair in 0usize..PAIRS.len(),
        back in any::<bool>(),
        a in 1usize..80,
        b in 1usize..70,
        h in 1usize..6,
        w in 1usize..6,
        cast in 0usize..7,
        threads in 1usize..4,
        src_off in 0usize..64,
        dst_off in 0usize..64,
    ) {
        let (from, to, kind) = PAIRS[pair];
        let (from, to) = if back { (to, from) } else { (from, to) };
        let dims = dims_of(kind, (a, b), (h, w));
        check(from, to, &dims, &casts()[cast], &[(threads, (src_off, dst_off))]);
    }
}
