//! The fast engine against the reference converter on blocks of lane records turned inside
//! out (`fast/lane_blocks.rs`): MACE height-major images and NHWC both ways (heights that
//! leave the last block of lanes partial, one to many channels, pixel rows of a few to
//! hundreds of pixels), MACE filter images and OIHW, blocked filters (`OIHW16i16o`) and
//! OIHW, every element size, 1-4 threads, sources
//! at any byte offset, and blocks larger than the lane scratch (cut into chunks of channels
//! or of pixels). Run a second time with `LAYOUTKIT_CPU_KERNELS=avx2` on AVX-512 machines for
//! the AVX2 builds, and with `LAYOUTKIT_CPU_STREAM=always` for streamed stores.

use layoutkit_core::plan::ConversionPlan;
use layoutkit_core::{parse_format, CastSpec, DType, Dims, ShapedLayout};
use layoutkit_cpu::{convert_fast, convert_reference, AlignedBuf};
use layoutkit_testkit::noise_bytes;
use proptest::prelude::*;

const ACTIVATIONS: &[(&str, &str)] = &[
    ("mace:in_out_height", "NHWC"),
    ("NHWC", "mace:in_out_height"),
];

const FILTERS: &[(&str, &str)] = &[
    ("mace:conv2d_filter", "OIHW"),
    ("OIHW", "mace:conv2d_filter"),
];

/// Blocked filters, whose blocks of output and input channels are lane blocks with the
/// plain filter's rows of records apart (`OIHW16i16o -> OIHW` after its loop over blocks of
/// input channels is moved out).
const BLOCKED: &[(&str, &str)] = &[
    ("OIHW16i16o", "OIHW"),
    ("OIHW", "OIHW16i16o"),
    ("OIHW8i8o", "OIHW"),
    ("OIHW", "OIHW8i8o"),
    ("OIHW4i16o4i", "OIHW"),
];

const TYPES: &[DType] = &[DType::F32, DType::F16, DType::U8, DType::F64];

/// The fast engine's output for `src -> dst` on `threads`, the source `offset` bytes past an
/// aligned start, against the reference's: the first differing byte, if any.
fn difference(
    src: &ShapedLayout,
    dst: &ShapedLayout,
    t: DType,
    seed: u64,
    threads: usize,
    offset: usize,
) -> Option<usize> {
    let cast = CastSpec::identity(t);
    let data = noise_bytes(src.bytes(t).unwrap(), seed);
    let mut buf = AlignedBuf::zeroed(data.len() + offset);
    buf[offset..].copy_from_slice(&data);
    let data = &buf[offset..];
    let mut want = vec![0u8; dst.bytes(t).unwrap()];
    convert_reference(src, data, dst, &mut want, &cast).unwrap();
    let plan = ConversionPlan::new(src, dst).unwrap();
    let mut got = vec![0x5Au8; want.len()];
    convert_fast(&plan, data, &mut got, &cast, threads).unwrap();
    got.iter().zip(&want).position(|(a, b)| a != b)
}

/// [`difference`] for the conversion `from -> to` of `dims`, as a failure message.
fn mismatch(
    (from, to): (&str, &str),
    dims: &str,
    t: DType,
    seed: u64,
    threads: usize,
    offset: usize,
) -> Option<String> {
    let diff = difference(
        &shaped(from, dims),
        &shaped(to, dims),
        t,
        seed,
        threads,
        offset,
    )?;
    Some(format!(
        "{from} -> {to} {dims} {t:?} threads {threads} offset {offset}: byte {diff}"
    ))
}

fn shaped(name: &str, dims: &str) -> ShapedLayout {
    parse_format(name)
        .unwrap()
        .shaped(&Dims::parse(dims).unwrap())
        .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn height_major_images_equal_the_reference(
        pair in 0..ACTIVATIONS.len(),
        n in 1usize..4,
        c in prop_oneof![1usize..40, 250usize..262],
        h in 1usize..14,
        w in prop_oneof![1usize..40, 60usize..70],
        t in 0..TYPES.len(),
        threads in 1usize..5,
        seed in any::<u64>(),
        offset in 0usize..64,
    ) {
        let failed = mismatch(ACTIVATIONS[pair], &format!("N={n},C={c},H={h},W={w}"), TYPES[t], seed, threads, offset);
        prop_assert!(failed.is_none(), "{}", failed.unwrap_or_default());
    }

    #[test]
    fn filter_images_equal_the_reference(
        pair in 0..FILTERS.len(),
        o in 1usize..12,
        i in prop_oneof![1usize..40, 250usize..262],
        k in 1usize..8,
        t in 0..TYPES.len(),
        threads in 1usize..5,
        seed in any::<u64>(),
        offset in 0usize..64,
    ) {
        let failed = mismatch(FILTERS[pair], &format!("O={o},I={i},H={k},W={k}"), TYPES[t], seed, threads, offset);
        prop_assert!(failed.is_none(), "{}", failed.unwrap_or_default());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn blocked_filters_equal_the_reference(
        pair in 0..BLOCKED.len(),
        o in prop_oneof![1usize..40, 60usize..70],
        i in prop_oneof![1usize..40, 250usize..262],
        k in 1usize..8,
        t in 0..TYPES.len(),
        threads in 1usize..5,
        seed in any::<u64>(),
        offset in 0usize..64,
    ) {
        let failed = mismatch(BLOCKED[pair], &format!("O={o},I={i},H={k},W={k}"), TYPES[t], seed, threads, offset);
        prop_assert!(failed.is_none(), "{}", failed.unwrap_or_default());
    }
}

/// Blocks larger than the lane scratch: cut into chunks of channels (pixel rows of 64 and
/// 14 pixels, 2048 channels) or of pixels (1024-pixel rows of 250 channels), and images large
/// enough to be streamed and split among threads; few channels on wide rows.
#[test]
fn large_blocks_in_chunks_equal_the_reference() {
    for (from, to) in ACTIVATIONS {
        for (dims, t) in [
            ("N=1,C=2048,H=6,W=64", DType::F32),
            ("N=2,C=2048,H=5,W=14", DType::F16),
            ("N=1,C=250,H=5,W=1024", DType::F32),
            ("N=1,C=256,H=8,W=64", DType::F32),
            ("N=2,C=3,H=7,W=3000", DType::F32),
            ("N=1,C=4,H=6,W=2000", DType::F16),
            ("N=40,C=16,H=14,W=14", DType::F16),
        ] {
            let (src, dst) = (shaped(from, dims), shaped(to, dims));
            for threads in [1, 3] {
                let diff = difference(&src, &dst, t, 11, threads, 4);
                assert!(
                    diff.is_none(),
                    "{from} -> {to} {dims} {t:?} threads {threads}: byte {diff:?}"
                );
            }
        }
    }
}

/// The same block read from a strided view whose records hold 6 lanes of which the view
/// uses `r` (its W): `[C][H][6]` with W < 6. The view's last record ends at its last used lane,
/// so the block's last records are not whole in the buffer and it goes element by element;
/// the others by the kernels.
#[test]
fn partial_last_records_of_a_strided_view_equal_the_reference() {
    for (c, h, r, t) in [
        (16, 20, 4, DType::F16),
        (5, 40, 3, DType::F32),
        (3, 9, 2, DType::U8),
    ] {
        let dims = format!("N=2,C={c},H={h},W={r}");
        let nchw = shaped("NCHW", &dims);
        let lanes = 6isize;
        let strides = [
            c as isize * h as isize * lanes,
            h as isize * lanes,
            lanes,
            1,
        ];
        let src = nchw.with_strides(&strides).unwrap();
        let dst = shaped("NWHC", &dims);
        for threads in [1, 2] {
            let diff = difference(&src, &dst, t, 5, threads, 0);
            assert!(
                diff.is_none(),
                "strided NCHW {dims} -> NWHC {t:?} threads {threads}: byte {diff:?}"
            );
        }
    }
}
