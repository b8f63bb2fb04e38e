//! The fast engine against the reference converter on the shapes the few-channel kernels
//! (`fast/interleave.rs`) and the work split along image planes serve: 1 to 5 channels
//! interleaved into pixels and back, single images and small batches, odd extents, every
//! element size, casts, every thread count 1..=4 and sources at any byte offset. Run a second
//! time with `LAYOUTKIT_CPU_KERNELS=avx2` on AVX-512 machines for the AVX2 builds.

use layoutkit_core::plan::ConversionPlan;
use layoutkit_core::{parse_format, CastSpec, DType, Dims, Quantization};
use layoutkit_cpu::{convert_fast, convert_reference};
use layoutkit_testkit::noise_bytes;
use proptest::prelude::*;

/// Conversions whose tiles have a few rows on one side (channels as rows or as pixels).
const PAIRS: &[(&str, &str)] = &[
    ("NCHW", "NHWC"),
    ("NHWC", "NCHW"),
    ("NCHW", "NWHC"),
    ("NHWC", "NCWH"),
    ("NCHW", "kHWC8"),
    ("kHWC8", "NCHW"),
    ("NCHW", "NCHW8c"),
    ("NCHW8c", "NCHW"),
    ("NCHW", "NC/32HW32"),
    ("NC/32HW32", "NCHW"),
    ("NHWC", "mace:in_out_channel"),
    ("mace:in_out_channel", "NHWC"),
];

/// Runs `plan` in the fast engine for each `(threads, offset)` of `runs`, the source `data`
/// copied `offset` bytes into an aligned buffer (a misaligned source), and returns the first
/// `(threads, byte)` at which its output differs from `want`.
fn first_fast_difference(
    plan: &ConversionPlan,
    data: &[u8],
    want: &[u8],
    cast: &CastSpec,
    runs: &[(usize, usize)],
) -> Option<(usize, usize)> {
    runs.iter().find_map(|&(threads, offset)| {
        let mut buf = layoutkit_cpu::AlignedBuf::zeroed(data.len() + offset);
        buf[offset..].copy_from_slice(data);
        let mut got = vec![0xA5u8; want.len()];
        convert_fast(plan, &buf[offset..], &mut got, cast, threads).unwrap();
        let byte = got.iter().zip(want).position(|(a, b)| a != b)?;
        Some((threads, byte))
    })
}

/// Every element size (1, 2, 4 and 8 bytes) as an identity cast, and f32 -> f16.
fn sizes_and_a_cast() -> [CastSpec; 5] {
    [
        CastSpec::identity(DType::F16),
        CastSpec::identity(DType::F32),
        CastSpec::identity(DType::U8),
        CastSpec::identity(DType::F64),
        CastSpec::new(DType::F32, DType::F16, None).unwrap(),
    ]
}

/// Asserts that the fast engine writes the reference's bytes for `from -> to` with `dims`,
/// every cast of [`sizes_and_a_cast`], 1-4 threads, sources 0-6 bytes off alignment (noise
/// from `seed`).
fn assert_fast_equals_reference(from: &str, to: &str, dims: &Dims, seed: u64) {
    let src = parse_format(from).unwrap().shaped(dims).unwrap();
    let dst = parse_format(to).unwrap().shaped(dims).unwrap();
    let plan = ConversionPlan::new(&src, &dst).unwrap();
    for cast in sizes_and_a_cast() {
        let data = noise_bytes(src.bytes(cast.src).unwrap(), seed);
        let mut want = vec![0u8; dst.bytes(cast.dst).unwrap()];
        convert_reference(&src, &data, &dst, &mut want, &cast).unwrap();
        let runs = [(1, 0), (2, 3), (3, 1), (4, 6)];
        let diff = first_fast_difference(&plan, &data, &want, &cast, &runs);
        assert!(
            diff.is_none(),
            "{from} -> {to} {dims:?} {cast:?}: (threads, byte) {diff:?}"
        );
    }
}

fn arb_cast() -> impl Strategy<Value = CastSpec> {
    prop_oneof![
        Just((DType::F32, DType::F32)),
        Just((DType::F16, DType::F16)),
        Just((DType::U8, DType::U8)),
        Just((DType::F64, DType::F64)),
        Just((DType::F32, DType::F16)),
        Just((DType::F16, DType::F32)),
        Just((DType::F32, DType::I8)),
        Just((DType::F32, DType::U8)),
        Just((DType::F32, DType::BF16)),
        Just((DType::U8, DType::F32)),
    ]
    .prop_map(|(s, d)| {
        let quant = (s.is_float() != d.is_float()).then_some(Quantization {
            scale: 0.37,
            zero_point: if d == DType::U8 || s == DType::U8 {
                3
            } else {
                -2
            },
        });
        CastSpec::new(s, d, quant).expect("valid cast")
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn few_channel_conversions_equal_the_reference(
        pair in 0..PAIRS.len(),
        n in 1usize..4,
        c in 1usize..6,
        h in 1usize..40,
        w in prop_oneof![1usize..40, 250usize..300],
        cast in arb_cast(),
        threads in 1usize..5,
        seed in any::<u64>(),
        offset in 0usize..64,
    ) {
        let (from, to) = PAIRS[pair];
        let dims = Dims::parse(&format!("N={n},C={c},H={h},W={w}")).unwrap();
        let src = parse_format(from).unwrap().shaped(&dims).unwrap();
        let dst = parse_format(to).unwrap().shaped(&dims).unwrap();
        let data = noise_bytes(src.bytes(cast.src).unwrap(), seed);
        let mut buf = layoutkit_cpu::AlignedBuf::zeroed(data.len() + offset);
        buf[offset..].copy_from_slice(&data);
        let data = &buf[offset..];
        let mut want = vec![0u8; dst.bytes(cast.dst).unwrap()];
        convert_reference(&src, data, &dst, &mut want, &cast).unwrap();
        let plan = ConversionPlan::new(&src, &dst).unwrap();
        let mut got = vec![0x5Au8; want.len()];
        convert_fast(&plan, data, &mut got, &cast, threads).unwrap();
        let diff = got.iter().zip(&want).position(|(a, b)| a != b);
        prop_assert!(diff.is_none(), "{from} -> {to} {dims:?} {cast:?} threads {threads}: byte {diff:?}");
    }
}

/// Whole images large enough to be split into several work items along their planes, on
/// every thread count: the same bytes as the reference.
#[test]
fn single_images_split_along_planes_equal_the_reference() {
    for (from, to) in [("NCHW", "NHWC"), ("NHWC", "NCHW")] {
        for (c, t) in [
            (3, DType::F32),
            (3, DType::U8),
            (4, DType::F16),
            (2, DType::F32),
        ] {
            let dims = Dims::parse(&format!("N=1,C={c},H=301,W=517")).unwrap();
            let src = parse_format(from).unwrap().shaped(&dims).unwrap();
            let dst = parse_format(to).unwrap().shaped(&dims).unwrap();
            let cast = CastSpec::identity(t);
            let data = noise_bytes(src.bytes(t).unwrap(), 7);
            let mut want = vec![0u8; dst.bytes(t).unwrap()];
            convert_reference(&src, &data, &dst, &mut want, &cast).unwrap();
            let plan = ConversionPlan::new(&src, &dst).unwrap();
            for threads in 1..=4 {
                let mut got = vec![0xA5u8; want.len()];
                convert_fast(&plan, &data[..], &mut got, &cast, threads).unwrap();
                assert!(got == want, "{from} -> {to} C={c} {t} threads {threads}");
            }
        }
    }
}

/// Pixels of many channels whose rows are not whole lines (NHWC with C = 250 f32: 1000 bytes;
/// C = 24 f32: 96 bytes; and rows of 1-8 KiB, which Intel CPUs also move as whole rows: C =
/// 1000 f32, 1500 f16, 3000 u8),
/// which tiles of whole rows move through the scratch tile: the same bytes as the reference,
/// for sources at odd offsets and every thread count.
#[test]
fn whole_row_tiles_equal_the_reference() {
    for (c, t) in [
        (250, DType::F32),
        (250, DType::F16),
        (70, DType::F32),
        (300, DType::U8),
        (1000, DType::F32),
        (1500, DType::F16),
        (3000, DType::U8),
    ] {
        for (from, to) in [("NCHW", "NHWC"), ("NCHW", "NWHC")] {
            let dims = Dims::parse(&format!("N=2,C={c},H=9,W=37")).unwrap();
            let src = parse_format(from).unwrap().shaped(&dims).unwrap();
            let dst = parse_format(to).unwrap().shaped(&dims).unwrap();
            let cast = CastSpec::identity(t);
            let data = noise_bytes(src.bytes(t).unwrap(), 11);
            let mut want = vec![0u8; dst.bytes(t).unwrap()];
            convert_reference(&src, &data, &dst, &mut want, &cast).unwrap();
            let plan = ConversionPlan::new(&src, &dst).unwrap();
            let runs = [(1, 0), (2, 4), (3, 1), (4, 16)];
            let diff = first_fast_difference(&plan, &data, &want, &cast, &runs);
            assert!(
                diff.is_none(),
                "{from} -> {to} C={c} {t}: (threads, byte) {diff:?}"
            );
        }
    }
}

/// One channel into padded records and back with a cast (f32 -> i8 into NC/32HW32: one data
/// byte per 32-byte record), planes longer than one scratch piece of the cast-then-expand and
/// gather-then-cast paths (more than 16384 units): the same bytes as the reference, for
/// sources at odd offsets and every thread count.
#[test]
fn cast_records_longer_than_a_piece_equal_the_reference() {
    let quant = Some(Quantization {
        scale: 0.37,
        zero_point: -2,
    });
    let casts = [
        CastSpec::new(DType::F32, DType::I8, quant).unwrap(),
        CastSpec::new(DType::F32, DType::F16, None).unwrap(),
        CastSpec::new(DType::I8, DType::F32, quant).unwrap(),
        CastSpec::new(DType::F16, DType::F32, None).unwrap(),
    ];
    for (from, to) in [
        ("NCHW", "NC/32HW32"),
        ("NC/32HW32", "NCHW"),
        ("NCHW", "kHWC8"),
        ("kHWC8", "NCHW"),
        ("NCHW", "NCHW4c"),
        ("NCHW4c", "NCHW"),
    ] {
        for cast in &casts {
            let dims = Dims::parse("N=2,C=1,H=151,W=131").unwrap();
            let src = parse_format(from).unwrap().shaped(&dims).unwrap();
            let dst = parse_format(to).unwrap().shaped(&dims).unwrap();
            let data = noise_bytes(src.bytes(cast.src).unwrap(), 5);
            let mut want = vec![0u8; dst.bytes(cast.dst).unwrap()];
            convert_reference(&src, &data, &dst, &mut want, cast).unwrap();
            let plan = ConversionPlan::new(&src, &dst).unwrap();
            let runs = [(1, 0), (2, 3), (3, 16)];
            let diff = first_fast_difference(&plan, &data, &want, cast, &runs);
            assert!(
                diff.is_none(),
                "{from} -> {to} {cast:?}: (threads, byte) {diff:?}"
            );
        }
    }
}

/// Destinations that are mostly padding and 1 MiB or more: f16 OIHW16i16o of 1-3 input
/// channels (written with the fill first, then the copies: `fast/destination.rs`), and the
/// same with f32 and other types, NCHW32c and kHWC8 of 1 channel, a MACE image of 1 channel
/// and C = 8 into NCHW32c (written interleaved: rows of a whole line, or data on most lines),
/// with casts, fill values 0, 1.5 and NaN, sources at odd offsets and 1-4 threads: the
/// reference's bytes.
#[test]
fn mostly_padded_destinations_equal_the_reference() {
    let cases = [
        ("OIHW", "OIHW16i16o", "O=4100,I=1,H=3,W=3"),
        ("OIHW", "OIHW16i16o", "O=4200,I=3,H=3,W=3"),
        ("NCHW", "NCHW32c", "N=2,C=1,H=100,W=97"),
        ("NCHW", "NCHW32c", "N=1,C=8,H=100,W=97"),
        ("NCHW", "kHWC8", "N=3,C=1,H=150,W=151"),
        ("NHWC", "mace:in_out_channel", "N=2,H=130,W=257,C=1"),
    ];
    let casts = [
        CastSpec::identity(DType::F32),
        CastSpec::identity(DType::F16),
        CastSpec::identity(DType::U8),
        CastSpec::new(DType::F32, DType::F16, None).unwrap(),
        CastSpec::new(
            DType::F32,
            DType::I8,
            Some(Quantization {
                scale: 0.37,
                zero_point: -2,
            }),
        )
        .unwrap(),
    ];
    for (from, to, dims) in cases {
        let dims = Dims::parse(dims).unwrap();
        for fill in [0.0, 1.5, f64::NAN] {
            let src = parse_format(from).unwrap().shaped(&dims).unwrap();
            let dst = parse_format(to)
                .unwrap()
                .with_fill(fill)
                .shaped(&dims)
                .unwrap();
            let plan = ConversionPlan::new(&src, &dst).unwrap();
            for cast in casts {
                if fill.is_nan() && !cast.dst.is_float() {
                    continue;
                }
                let data = noise_bytes(src.bytes(cast.src).unwrap(), 21);
                let mut want = vec![0u8; dst.bytes(cast.dst).unwrap()];
                convert_reference(&src, &data, &dst, &mut want, &cast).unwrap();
                let runs = [(1, 0), (2, 3), (3, 1), (4, 8)];
                let diff = first_fast_difference(&plan, &data, &want, &cast, &runs);
                assert!(
                    diff.is_none(),
                    "{from} -> {to} {dims:?} fill {fill} {cast:?}: (threads, byte) {diff:?}"
                );
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Blocks of destination rows longer than a vector and shorter than a line, moved by table
    /// where a block's destination is one range (`fast/gather.rs`): MACE's filter image with a
    /// few input channels back to OIHW (12 rows of 9 taps for I = 3, 3x3), OIHW16i16o with one
    /// input channel back to OIHW, and their neighbours (other I, filter sizes, O not a
    /// multiple of the block), every element size, with casts, 1-4 threads, sources at odd
    /// offsets: the reference's bytes.
    #[test]
    fn blocks_of_rows_shorter_than_a_line_equal_the_reference(
        o in 1usize..700,
        i in 1usize..6,
        k in prop_oneof![Just(1usize), Just(3), Just(5), Just(7)],
        from in prop_oneof![Just("mace:conv2d_filter"), Just("OIHW16i16o")],
        cast in arb_cast(),
    ) {
        let dims = Dims::parse(&format!("O={o},I={i},H={k},W={k}")).unwrap();
        let src = parse_format(from).unwrap().shaped(&dims).unwrap();
        let dst = parse_format("OIHW").unwrap().shaped(&dims).unwrap();
        let plan = ConversionPlan::new(&src, &dst).unwrap();
        let data = noise_bytes(src.bytes(cast.src).unwrap(), (o * 31 + i) as u64);
        let mut want = vec![0u8; dst.bytes(cast.dst).unwrap()];
        convert_reference(&src, &data, &dst, &mut want, &cast).unwrap();
        let runs = [(1, 0), (2, 5), (3, 2), (4, 8)];
        let diff = first_fast_difference(&plan, &data, &want, &cast, &runs);
        prop_assert!(diff.is_none(), "{from} -> OIHW {dims:?} {cast:?}: (threads, byte) {diff:?}");
    }
}

/// A few destination rows of one to two lines moved by table (`fast/gather.rs`): NHWC into
/// MACE's channel image with 12-20 channels on short rows (4 rows of 14 four-channel f16
/// pixels, 112 bytes, per image row), every element size, casts, 1-4 threads, misaligned
/// sources: the reference's bytes.
#[test]
fn a_few_rows_of_one_to_two_lines_equal_the_reference() {
    for c in [12, 15, 16, 20] {
        for w in [7, 13, 14, 15, 18] {
            let dims = Dims::parse(&format!("N=3,H=5,W={w},C={c}")).unwrap();
            for (from, to) in [
                ("NHWC", "mace:in_out_channel"),
                ("mace:in_out_channel", "NHWC"),
            ] {
                assert_fast_equals_reference(from, to, &dims, (c * w) as u64);
            }
        }
    }
}

/// OIHW with one or two output channels into padded filter layouts (MACE's 3x3 filter image of
/// 4-lane records, OIHW16i16o's 16-row blocks) and back: the inputs lie `H * W` elements apart
/// in OIHW and each lands in a padded record (`fast/records_strided.rs`, the fill joined to the
/// copy by `records::fills_records`; back, the long loop of inputs inside the kernel
/// positions), every element size, casts, 1-4 threads, misaligned sources: the reference's
/// bytes.
#[test]
fn one_output_channel_into_padded_filter_records_equals_the_reference() {
    for (o, i, k) in [
        (1, 2048, 3),
        (1, 37, 3),
        (2, 250, 3),
        (1, 5, 7),
        (3, 64, 1),
        (1, 1, 3),
    ] {
        let dims = Dims::parse(&format!("O={o},I={i},H={k},W={k}")).unwrap();
        for (from, to) in [
            ("OIHW", "mace:conv2d_filter"),
            ("OIHW", "OIHW16i16o"),
            ("mace:conv2d_filter", "OIHW"),
            ("OIHW16i16o", "OIHW"),
        ] {
            assert_fast_equals_reference(from, to, &dims, (o * 7 + i) as u64);
        }
    }
}
