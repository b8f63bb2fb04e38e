//! f32 -> f16 tiles cast before they are transposed (`fast/half_tiles.rs`: whole NCHW planes
//! of few channels into pixel-major layouts, written through the scratch tile) against the
//! reference converter: 2-40 channels, planes of 1-20 x 1-20 pixels, 1-4 threads, sources
//! off alignment, values that round both ways (noise bytes: NaN, infinities, subnormals).
//!
//! The engine writes through the scratch tile only where the destination streams (larger
//! than the L2 caches): [`large_planes_of_few_channels_equal_the_reference`] is; the random
//! shapes reach it with `LAYOUTKIT_CPU_STREAM=always` (as the test command runs this file
//! again), and the other paths without it.

use layoutkit_core::plan::ConversionPlan;
use layoutkit_core::{parse_format, CastSpec, DType, Dims};
use layoutkit_cpu::{convert_fast, convert_reference, AlignedBuf};
use layoutkit_testkit::noise_bytes;
use proptest::prelude::*;

/// The pixel-major destinations of an NCHW source whose tiles are whole planes.
const TARGETS: [&str; 4] = ["NHWC", "NWHC", "kHWC8", "mace:in_out_channel"];

/// The first `(threads, byte)` at which the fast engine's f32 -> f16 conversion `NCHW ->
/// to` of `dims` differs from the reference's, the source `offset` bytes off alignment.
fn difference(to: &str, dims: &str, seed: u64, threads: usize, offset: usize) -> Option<String> {
    let dims = Dims::parse(dims).unwrap();
    let src = parse_format("NCHW").unwrap().shaped(&dims).unwrap();
    let dst = parse_format(to).unwrap().shaped(&dims).unwrap();
    let plan = ConversionPlan::new(&src, &dst).unwrap();
    let cast = CastSpec::new(DType::F32, DType::F16, None).unwrap();
    let data = noise_bytes(src.bytes(DType::F32).unwrap(), seed);
    let mut want = vec![0u8; dst.bytes(DType::F16).unwrap()];
    convert_reference(&src, &data, &dst, &mut want, &cast).unwrap();
    let mut buf = AlignedBuf::zeroed(data.len() + offset);
    buf[offset..].copy_from_slice(&data);
    let mut got = vec![0xA5u8; want.len()];
    convert_fast(&plan, &buf[offset..], &mut got, &cast, threads).unwrap();
    let byte = got.iter().zip(&want).position(|(a, b)| a != b)?;
    Some(format!(
        "NCHW -> {to} {dims:?} threads {threads} offset {offset}: byte {byte}"
    ))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn planes_of_few_channels_equal_the_reference(
        to in 0..TARGETS.len(),
        n in 1usize..5,
        c in 2usize..41,
        h in 1usize..21,
        w in 1usize..21,
        threads in 1usize..5,
        offset in 0usize..8,
        seed in any::<u64>(),
    ) {
        let failed = difference(TARGETS[to], &format!("N={n},C={c},H={h},W={w}"), seed, threads, offset);
        prop_assert!(failed.is_none(), "{}", failed.unwrap_or_default());
    }
}

/// Destinations of several MiB, which the engine streams whatever the environment.
#[test]
fn large_planes_of_few_channels_equal_the_reference() {
    for (dims, threads, offset) in [
        ("N=400,C=16,H=14,W=14", 1, 0),
        ("N=300,C=24,H=14,W=14", 2, 4),
        ("N=700,C=17,H=9,W=9", 3, 2),
    ] {
        let failed = difference("NHWC", dims, 11, threads, offset);
        assert!(failed.is_none(), "{}", failed.unwrap_or_default());
    }
}
