//! The planned converter against the reference converter, on random layouts, shapes, element
//! types, casts and fill values; round trips; padding.

use layoutkit_core::cast::Scalar;
use layoutkit_core::plan::ConversionPlan;
use layoutkit_core::{CastSpec, DType, Quantization};
use layoutkit_cpu::{convert, convert_fast, convert_planned, convert_reference, FastConversion};
use layoutkit_testkit::{arb_dtype, arb_pair, arb_view, noise_bytes, view_strides};
use proptest::prelude::*;

const MAX_ELEMENTS: usize = 30_000;

/// The first byte where two buffers differ (and the lengths), for short failure messages.
fn first_difference(a: &[u8], b: &[u8]) -> Option<(usize, usize, usize)> {
    if a.len() != b.len() {
        return Some((usize::MAX, a.len(), b.len()));
    }
    a.iter()
        .zip(b)
        .position(|(x, y)| x != y)
        .map(|i| (i, a[i] as usize, b[i] as usize))
}

/// `data` copied to start `offset` bytes past a 64-byte boundary (the engine aligns its tiles
/// to the source's lines where it can), and the buffer that holds it.
fn at_offset(data: &[u8], offset: usize) -> (layoutkit_cpu::AlignedBuf, std::ops::Range<usize>) {
    let mut buf = layoutkit_cpu::AlignedBuf::zeroed(data.len() + offset);
    buf[offset..].copy_from_slice(data);
    (buf, offset..offset + data.len())
}

/// The fast engine on `threads` threads writes what the reference writes, every byte (the
/// output starts as garbage), for random source bytes from `seed` starting `offset` bytes
/// past a 64-byte boundary.
fn fast_equals_reference(
    src: &layoutkit_core::ShapedLayout,
    dst: &layoutkit_core::ShapedLayout,
    cast: &CastSpec,
    threads: usize,
    (seed, offset): (u64, usize),
) -> Result<(), TestCaseError> {
    let (buf, at) = at_offset(&noise_bytes(src.bytes(cast.src).unwrap(), seed), offset);
    let data = &buf[at];
    let mut want = vec![0u8; dst.bytes(cast.dst).unwrap()];
    convert_reference(src, data, dst, &mut want, cast).unwrap();
    let plan = ConversionPlan::new(src, dst).unwrap();
    let mut got = vec![0x5Au8; want.len()];
    convert_fast(&plan, data, &mut got, cast, threads).unwrap();
    prop_assert!(
        first_difference(&got, &want).is_none(),
        "{} -> {} {} {:?}: first difference at byte {:?}",
        src.layout(),
        dst.layout(),
        src.dims(),
        cast,
        first_difference(&got, &want)
    );
    Ok(())
}

fn arb_cast() -> impl Strategy<Value = CastSpec> {
    (arb_dtype(), arb_dtype(), 0.05f32..4.0, -5i32..5).prop_map(|(s, d, scale, zp)| {
        let quant = (s.is_float() != d.is_float()).then_some(Quantization {
            scale,
            zero_point: if d == DType::U8 || s == DType::U8 {
                zp.abs()
            } else {
                zp
            },
        });
        CastSpec::new(s, d, quant).expect("valid cast")
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn planned_equals_reference(
        (a, b, dims) in arb_pair(7),
        cast in arb_cast(),
        fill in prop_oneof![Just(0.0f64), Just(-1.5), Just(f64::NEG_INFINITY), -300.0f64..300.0],
        seed in any::<u64>(),
    ) {
        let src = a.shaped(&dims).unwrap();
        let dst = b.with_fill(fill).shaped(&dims).unwrap();
        prop_assume!(src.elements() <= MAX_ELEMENTS && dst.elements() <= MAX_ELEMENTS);
        let data = noise_bytes(src.bytes(cast.src).unwrap(), seed);
        let mut want = vec![0u8; dst.bytes(cast.dst).unwrap()];
        convert_reference(&src, &data, &dst, &mut want, &cast).unwrap();
        let plan = ConversionPlan::new(&src, &dst).unwrap();
        // Start from different garbage to show every byte is written.
        let mut got = vec![0xA5u8; want.len()];
        convert_planned(&plan, &data, &mut got, &cast).unwrap();
        prop_assert_eq!(got, want);
    }

    #[test]
    fn fast_engine_equals_reference_for_any_thread_count(
        (a, b, dims) in arb_pair(9),
        cast in arb_cast(),
        fill in prop_oneof![Just(0.0f64), Just(-1.5), -300.0f64..300.0],
        threads in 1usize..5,
        seed in any::<u64>(),
        offset in 0usize..64,
    ) {
        let src = a.shaped(&dims).unwrap();
        let dst = b.with_fill(fill).shaped(&dims).unwrap();
        prop_assume!(src.elements() <= MAX_ELEMENTS && dst.elements() <= MAX_ELEMENTS);
        fast_equals_reference(&src, &dst, &cast, threads, (seed, offset))?;
    }

    /// A conversion prepared once converts every tensor it is run on as the reference does,
    /// whatever the destination held before, and refuses buffers of other sizes.
    #[test]
    fn a_prepared_conversion_equals_the_reference_on_every_run(
        (a, b, dims) in arb_pair(9),
        cast in arb_cast(),
        fill in prop_oneof![Just(0.0f64), Just(-1.5), -300.0f64..300.0],
        threads in 1usize..5,
        seeds in any::<[u64; 3]>(),
    ) {
        let src = a.shaped(&dims).unwrap();
        let dst = b.with_fill(fill).shaped(&dims).unwrap();
        prop_assume!(src.elements() <= MAX_ELEMENTS && dst.elements() <= MAX_ELEMENTS);
        let plan = ConversionPlan::new(&src, &dst).unwrap();
        let conversion = FastConversion::new(&plan, &cast, threads).unwrap();
        let (src_bytes, dst_bytes) = (src.bytes(cast.src).unwrap(), dst.bytes(cast.dst).unwrap());
        let mut got = vec![0u8; dst_bytes];
        for (run, seed) in seeds.into_iter().enumerate() {
            let data = noise_bytes(src_bytes, seed);
            let mut want = vec![0u8; dst_bytes];
            convert_reference(&src, &data, &dst, &mut want, &cast).unwrap();
            got.fill(0x5A ^ run as u8);
            conversion.run(&data, &mut got).unwrap();
            prop_assert!(
                first_difference(&got, &want).is_none(),
                "run {}: {} -> {} {} {:?}: first difference at byte {:?}",
                run,
                src.layout(),
                dst.layout(),
                src.dims(),
                cast,
                first_difference(&got, &want)
            );
        }
        let data = vec![0u8; src_bytes + 1];
        prop_assert!(conversion.run(&data, &mut got).is_err());
        prop_assert!(conversion.run(&data[..src_bytes], &mut got[..dst_bytes.saturating_sub(1)]).is_err() || dst_bytes == 0);
    }

    #[test]
    fn fast_engine_reads_strided_views_as_the_reference_does(
        (a, b, dims) in arb_pair(7),
        cast in arb_cast(),
        threads in 1usize..4,
        seed in any::<u64>(),
        offset in 0usize..64,
        (order, gaps) in arb_view(layoutkit_core::MAX_TOKENS),
    ) {
        let dense = a.shaped(&dims).unwrap();
        let rank = dense.physical_shape().len();
        // The first `rank` entries of a permutation of 0..MAX_TOKENS, renumbered.
        let mut order: Vec<usize> = order.into_iter().filter(|&k| k < rank).collect();
        order.truncate(rank);
        let strides = view_strides(&dense.physical_shape(), &order, &gaps[..rank]);
        let src = dense.with_strides(&strides).unwrap();
        let dst = b.shaped(&dims).unwrap();
        prop_assume!(src.elements() <= 2 * MAX_ELEMENTS && dst.elements() <= MAX_ELEMENTS);
        fast_equals_reference(&src, &dst, &cast, threads, (seed, offset))?;
    }

    #[test]
    fn there_and_back_is_the_identity((a, b, dims) in arb_pair(7), t in arb_dtype(), seed in any::<u64>()) {
        let src = a.shaped(&dims).unwrap();
        let dst = b.shaped(&dims).unwrap();
        prop_assume!(src.elements() <= MAX_ELEMENTS && dst.elements() <= MAX_ELEMENTS);
        let id = CastSpec::identity(t);
        // Source padding is not data: zero it so the comparison is about logical elements.
        let zero = vec![0u8; src.bytes(t).unwrap()];
        let mut data = noise_bytes(zero.len(), seed);
        let mut clean = zero.clone();
        convert_reference(&src, &data, &src, &mut clean, &id).unwrap();
        data = clean;
        let there = convert(&src, &data, &dst, &id).unwrap();
        let back = convert(&dst, &there, &src, &id).unwrap();
        prop_assert_eq!(back, data);
    }

    #[test]
    fn padding_holds_the_fill_value(
        (a, b, dims) in arb_pair(7),
        t in arb_dtype(),
        fill in prop_oneof![Just(0.0f64), Just(7.0), Just(-2.5), Just(f64::NAN)],
    ) {
        let src = a.shaped(&dims).unwrap();
        let dst = b.with_fill(fill).shaped(&dims).unwrap();
        prop_assume!(src.elements() <= MAX_ELEMENTS && dst.elements() <= MAX_ELEMENTS);
        let data = noise_bytes(src.bytes(t).unwrap(), 1);
        let out = convert(&src, &data, &dst, &CastSpec::identity(t)).unwrap();
        let size = t.size_bytes();
        let mut want = [0u8; 8];
        Scalar::from_f64(t, fill).write(&mut want);
        for off in 0..dst.elements() {
            if dst.inverse(off).unwrap().is_none() {
                prop_assert_eq!(&out[off * size..(off + 1) * size], &want[..size]);
            }
        }
    }
}

#[test]
fn buffers_of_the_wrong_size_are_errors() {
    let dims = layoutkit_core::Dims::parse("N=1,C=3,H=2,W=2").unwrap();
    let a = layoutkit_core::parse_format("NCHW")
        .unwrap()
        .shaped(&dims)
        .unwrap();
    let b = layoutkit_core::parse_format("NHWC8c")
        .unwrap()
        .shaped(&dims)
        .unwrap();
    let id = CastSpec::identity(DType::F32);
    let err = convert(&a, &[0u8; 47], &b, &id).unwrap_err().to_string();
    assert!(err.contains("47") && err.contains("48"), "{err}");
    let mut out = vec![0u8; 3];
    assert!(convert_reference(&a, &[0u8; 48], &b, &mut out, &id).is_err());
}

#[test]
fn long_runs_become_single_copies() {
    // NCHW -> NCHW16c with C a multiple of 16 is one region; NCHW -> NCHW is one run.
    let dims = layoutkit_core::Dims::parse("N=2,C=32,H=4,W=4").unwrap();
    let a = layoutkit_core::parse_format("NCHW")
        .unwrap()
        .shaped(&dims)
        .unwrap();
    let plan = ConversionPlan::new(&a, &a).unwrap();
    match plan.strategy() {
        layoutkit_core::plan::Strategy::Regions { copies, fills } => {
            assert_eq!(copies.len(), 1);
            assert_eq!(copies[0].dims.len(), 1);
            assert_eq!(copies[0].dims[0].extent, 2 * 32 * 16);
            assert!(fills.is_empty());
        }
        other => panic!("{other:?}"),
    }
}

/// Large tiles and long runs (beyond what the random shapes reach): every kernel size with
/// tails, against the reference.
#[test]
fn fast_engine_on_larger_transposes_and_casts() {
    let cases = [
        ("NCHW", "NHWC", "N=2,C=67,H=9,W=37"),
        ("NHWC", "NCHW", "N=1,C=130,H=5,W=41"),
        ("NCHW", "NCHW32c", "N=2,C=45,H=7,W=9"),
        ("NCHW", "kHWC8", "N=2,C=3,H=33,W=35"),
        ("OIHW", "OIHW16i16o", "O=33,I=18,H=3,W=3"),
        ("NHWC", "mace:in_out_channel", "N=2,H=9,W=17,C=10"),
        ("NCHW", "NCHW", "N=3,C=5,H=64,W=65"),
        // Larger than one work item (2^16 elements), and (in the wider types) than the
        // smallest conversion run on several threads (2 MiB read and written), so regions
        // are split across threads; the last one in every type, bytes too.
        ("NCHW", "NHWC", "N=2,C=67,H=41,W=43"),
        ("NCHW", "NHWC", "N=3,C=67,H=83,W=87"),
        ("NCHW", "kHWC8", "N=4,C=3,H=130,W=131"),
        ("NHWC", "mace:in_out_channel", "N=8,H=41,W=45,C=10"),
        ("NCHW", "NCHW", "N=1,C=1,H=450,W=301"),
        ("OIHW", "OIHW4i16o4i", "O=140,I=66,H=3,W=5"),
        // Rows of whole cache lines, so the streaming kernels of every element size run.
        ("NCHW", "NHWC", "N=2,C=128,H=16,W=40"),
        ("NHWC", "NCHW", "N=2,C=96,H=8,W=128"),
        ("NCHW", "NCHW32c", "N=2,C=64,H=8,W=128"),
        ("OIHW", "OIHW16i16o", "O=64,I=64,H=3,W=3"),
        ("NHWC", "mace:in_out_channel", "N=2,H=8,W=64,C=64"),
        // Padding written with the data: tails of channel blocks after compound and plain
        // tile rows, and the last pixel of an image.
        ("OIHW", "OIHW16i16o", "O=40,I=32,H=3,W=3"),
        ("NCHW", "NCHW32c", "N=2,C=40,H=8,W=64"),
        ("NHWC", "mace:in_out_channel", "N=2,H=8,W=64,C=62"),
        // Compound tile rows whose last tile is shorter than the others.
        ("OIHW", "OIHW16i16o", "O=16,I=96,H=1,W=3"),
        // Planes a page or more apart (the 8-bit casts read them a quarter of a line group
        // at a time), and many channels of small planes (tiles of one destination line of
        // bytes by whole planes), with groups of 64 channels and a partial one.
        ("NCHW", "NHWC", "N=1,C=200,H=32,W=36"),
        ("NCHW", "NHWC", "N=2,C=200,H=7,W=7"),
        ("NHWC", "NCHW", "N=2,C=1000,H=5,W=5"),
        // Tiles wider than the fused cast kernels' 16 or 32 columns but not a multiple of
        // them: the strips left over are gathered, cast in one run and copied out.
        ("NHWC", "NCHW", "N=3,C=256,H=7,W=7"),
        ("NCHW", "NHWC", "N=2,C=24,H=20,W=22"),
        // Tiles of a few elements repeated along an outer loop, moved by table (MACE's filter
        // image with three input channels: 4 x 3 and 4 x 27 blocks; the last group of four
        // output channels partial), on several threads.
        ("OIHW", "mace:conv2d_filter", "O=45001,I=3,H=1,W=1"),
        ("mace:conv2d_filter", "OIHW", "O=45001,I=3,H=1,W=1"),
        ("OIHW", "mace:conv2d_filter", "O=1001,I=3,H=3,W=3"),
        ("OIHW", "OIHW16i16o", "O=4001,I=3,H=1,W=1"),
        // Casts into channel blocks they do not fill (16 of 32, 40 = 32 + 8, 21 = 16 + 5, 10
        // input channels of a 16 x 16 filter block): the fused cast tiles write each padded
        // record whole, their fill rows cast from source values.
        ("NCHW", "NCHW32c", "N=2,C=16,H=9,W=11"),
        ("NCHW", "NCHW32c", "N=2,C=40,H=7,W=9"),
        ("NCHW", "NCHW16c", "N=3,C=21,H=5,W=13"),
        ("OIHW", "OIHW16i16o", "O=40,I=10,H=3,W=3"),
        // One channel in blocks longer than the engine's fill line (287 fill elements after
        // each element): the fill apart from the records.
        ("NCHW", "NCHW288c", "N=3,C=1,H=2,W=5"),
        ("NCHW", "NCHW300c", "N=2,C=7,H=3,W=3"),
    ];
    let casts = [
        CastSpec::identity(DType::F32),
        CastSpec::identity(DType::F16),
        CastSpec::identity(DType::U8),
        CastSpec::identity(DType::F64),
        CastSpec::new(DType::F32, DType::F16, None).unwrap(),
        CastSpec::new(DType::F16, DType::F32, None).unwrap(),
        CastSpec::new(DType::F32, DType::BF16, None).unwrap(),
        CastSpec::new(DType::BF16, DType::F32, None).unwrap(),
        CastSpec::new(
            DType::F32,
            DType::I8,
            Some(Quantization {
                scale: 0.01,
                zero_point: 3,
            }),
        )
        .unwrap(),
        CastSpec::new(
            DType::U8,
            DType::F32,
            Some(Quantization {
                scale: 0.5,
                zero_point: 128,
            }),
        )
        .unwrap(),
    ];
    for (from, to, dims) in cases {
        let dims = layoutkit_core::Dims::parse(dims).unwrap();
        let src = layoutkit_core::parse_format(from)
            .unwrap()
            .shaped(&dims)
            .unwrap();
        let dst = layoutkit_core::parse_format(to)
            .unwrap()
            .shaped(&dims)
            .unwrap();
        let plan = ConversionPlan::new(&src, &dst).unwrap();
        for cast in &casts {
            let data = noise_bytes(src.bytes(cast.src).unwrap(), 11);
            let mut want = vec![0u8; dst.bytes(cast.dst).unwrap()];
            convert_reference(&src, &data, &dst, &mut want, cast).unwrap();
            // Sources on a 64-byte boundary and past one (the first tiles then stop at the
            // boundary where the rows share it).
            for (threads, offset) in [(1, 0), (2, 16), (3, 20), (1, 48)] {
                let (buf, at) = at_offset(&data, offset);
                // 64-byte aligned, so the streaming-store kernels run too.
                let mut got = layoutkit_cpu::AlignedBuf::zeroed(want.len());
                convert_fast(&plan, &buf[at], &mut got, cast, threads).unwrap();
                assert!(
                    first_difference(&got, &want).is_none(),
                    "{from} -> {to} {cast:?} threads {threads}, source {offset} bytes past a \
                     line: first difference at byte {:?}",
                    first_difference(&got, &want)
                );
            }
        }
    }
}

proptest! {
    /// MACE images are not among the random layout pairs: the fast engine on them (whole and
    /// partial last pixels, the partial one written by the pixel tile) against the reference,
    /// from and to NHWC and NCHW, with casts and any thread count.
    #[test]
    fn fast_engine_on_mace_images(
        n in 1usize..3, h in 1usize..6, w in 1usize..40, c in 1usize..70,
        image in prop_oneof![Just("mace:in_out_channel"), Just("mace:in_out_height"), Just("mace:in_out_width")],
        from in prop_oneof![Just("NHWC"), Just("NCHW")],
        to_image in any::<bool>(),
        cast in arb_cast(),
        threads in 1usize..4,
        seed in any::<u64>(),
        offset in 0usize..64,
    ) {
        let dims = layoutkit_core::Dims::parse(&format!("N={n},H={h},W={w},C={c}")).unwrap();
        let plain = layoutkit_core::parse_format(from).unwrap().shaped(&dims).unwrap();
        let img = layoutkit_core::parse_format(image).unwrap().shaped(&dims).unwrap();
        let (src, dst) = if to_image { (plain, img) } else { (img, plain) };
        fast_equals_reference(&src, &dst, &cast, threads, (seed, offset))?;
    }
}

/// A MACE height-major image of 2-4 channels from NHWC and back (H a multiple of 4: each block of four
/// rows reversed with its channels, `[k][w][c] -> [c][w][k]`, through the scratch tile for 1-
/// and 2-byte elements, the tiles for the others), widths around the scratch tile's passes, one to three threads, sources off
/// line boundaries, against the reference.
#[test]
fn few_channel_height_major_images_equal_the_reference() {
    for c in 2..=4 {
        for (h, w) in [(4, 1), (8, 5), (4, 64), (12, 300), (4, 3000)] {
            for t in [DType::U8, DType::F16, DType::F32, DType::F64] {
                let dims = layoutkit_core::Dims::parse(&format!("N=2,H={h},W={w},C={c}")).unwrap();
                let shaped = |f: &str| layoutkit_core::parse_format(f).unwrap().shaped(&dims);
                let (plain, image) = (
                    shaped("NHWC").unwrap(),
                    shaped("mace:in_out_height").unwrap(),
                );
                let cast = CastSpec::identity(t);
                for (src, dst) in [(&plain, &image), (&image, &plain)] {
                    for (threads, offset) in [(1, 0), (2, 4), (3, 16)] {
                        fast_equals_reference(src, dst, &cast, threads, (c as u64, offset))
                            .unwrap_or_else(|e| {
                                panic!("C={c} H={h} W={w} {t} threads {threads}: {e}")
                            });
                    }
                }
            }
        }
    }
}

proptest! {
    /// Casts into blocked layouts whose last channel block is partly padding (the fused cast
    /// tiles' fill rows are source values that cast to the fill, where a padded row is whole
    /// lines: 32 and 64 channels of f16, 64 of i8; shorter ones apart): every byte equal to the
    /// reference's, for fill values that round-trip and one that does not (NaN, written
    /// apart), f32 -> f16 and f32 -> i8, any thread count, sources on and off a line.
    #[test]
    fn casts_into_padded_blocks_equal_the_reference(
        c in 1usize..70,
        block in prop_oneof![Just(8usize), Just(16), Just(32), Just(64)],
        (h, w) in (1usize..12, 1usize..40),
        n in 1usize..3,
        fill in prop_oneof![Just(0.0f64), Just(1.5), Just(-2.0), Just(f64::NAN)],
        quantised in any::<bool>(),
        threads in 1usize..4,
        offset in prop_oneof![Just(0usize), Just(16), Just(20)],
        seed in any::<u64>(),
        filter in any::<bool>(),
    ) {
        // Activations into NCHW<block>c, or filters (O = n * 7 output channels) into
        // OIHW<block>i<block>o, whose tiles run over compound rows.
        let (from, to, dims) = if filter {
            let (h, w) = (h.min(3), w.min(3));
            let to = format!("OIHW{block}i{block}o");
            ("OIHW", to, format!("O={},I={c},H={h},W={w}", n * 7))
        } else {
            ("NCHW", format!("NCHW{block}c"), format!("N={n},C={c},H={h},W={w}"))
        };
        let dims = layoutkit_core::Dims::parse(&dims).unwrap();
        let src = layoutkit_core::parse_format(from).unwrap().shaped(&dims).unwrap();
        let dst = layoutkit_core::parse_format(&to)
            .unwrap()
            .with_fill(fill)
            .shaped(&dims)
            .unwrap();
        let cast = if quantised {
            let q = Quantization { scale: 0.02, zero_point: -3 };
            CastSpec::new(DType::F32, DType::I8, Some(q)).unwrap()
        } else {
            CastSpec::new(DType::F32, DType::F16, None).unwrap()
        };
        fast_equals_reference(&src, &dst, &cast, threads, (seed, offset))?;
    }
}
