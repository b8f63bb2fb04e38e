//! Conversions of device buffers that start mid-vector (a framework's tensor view one element
//! into its storage) against the CPU reference converter, bit for bit: every kind of kernel
//! (tiles of elements, units, words, thin and flat tiles, steps, runs, the gather and fills)
//! with the source, the destination or both shifted from the 16-byte boundary, by one element
//! and by the most a 16-byte vector allows. Skipped without a GPU unless
//! LAYOUTKIT_REQUIRE_CUDA=1.

mod common;

use layoutkit_core::{parse_format, CastSpec, DType, Dims, Quantization};
use layoutkit_cpu::convert_reference;
use layoutkit_cuda::codegen::BufferShift;
use layoutkit_testkit::noise_bytes;

#[test]
fn buffers_that_start_mid_vector_match_the_cpu_reference() {
    let Some(cuda) = common::device() else { return };
    let cases = [
        ("NCHW", "NHWC", "N=2,C=67,H=33,W=35"),
        ("NCHW", "NHWC", "N=2,C=136,H=12,W=20"),
        ("NHWC", "NCHW", "N=2,C=200,H=10,W=12"),
        ("NCHW", "NHWC", "N=2,C=3,H=45,W=47"),
        ("NCHW", "NHWC", "N=2,C=200,H=14,W=14"),
        ("NCHW", "NCHW32c", "N=2,C=96,H=14,W=14"),
        ("NCHW", "NCHW32c", "N=2,C=250,H=7,W=7"),
        ("NCHW32c", "NCHW", "N=3,C=96,H=7,W=7"),
        ("NCHW32c", "NCHW", "N=5,C=1000,H=1,W=1"),
        ("NCHW", "kHWC8", "N=2,C=4,H=64,W=64"),
        ("OIHW", "OIHW16i16o", "O=37,I=3,H=7,W=7"),
        ("OIHW", "OIHW16i16o", "O=32,I=48,H=3,W=3"),
        ("NHWC", "mace:in_out_channel", "N=2,H=19,W=17,C=10"),
        ("NHWC", "mace:in_out_height", "N=2,H=14,W=14,C=250"),
        ("mace:in_out_height", "NHWC", "N=2,H=8,W=64,C=256"),
        ("NCHW", "NCHW32c", "N=3,C=1,H=5,W=5"),
        ("NCHW", "NHWC", "N=64,C=1,H=32,W=32"),
    ];
    let casts = [
        CastSpec::identity(DType::F32),
        CastSpec::identity(DType::F16),
        CastSpec::identity(DType::I8),
        CastSpec::new(DType::F32, DType::F16, None).unwrap(),
        CastSpec::new(
            DType::F32,
            DType::I8,
            Some(Quantization {
                scale: 0.05,
                zero_point: 3,
            }),
        )
        .unwrap(),
    ];
    let mut checked = 0;
    for (from, to, dims) in cases {
        let dims = Dims::parse(dims).unwrap();
        let src = parse_format(from).unwrap().shaped(&dims).unwrap();
        let dst = parse_format(to).unwrap().shaped(&dims).unwrap();
        for cast in &casts {
            let data = noise_bytes(src.bytes(cast.src).unwrap(), 7);
            let mut want = vec![0u8; dst.bytes(cast.dst).unwrap()];
            convert_reference(&src, &data, &dst, &mut want, cast).unwrap();
            let (most_s, most_d) = (
                16 / cast.src.size_bytes() - 1,
                16 / cast.dst.size_bytes() - 1,
            );
            for (s, d) in [(1, 0), (0, 1), (1, 1), (most_s, most_d)] {
                let shift = BufferShift { src: s, dst: d };
                let got = cuda
                    .convert_shifted(&src, &data, &dst, cast, shift)
                    .unwrap();
                let diff = got.iter().zip(&want).position(|(a, b)| a != b);
                assert!(
                    got.len() == want.len() && diff.is_none(),
                    "{from} -> {to} {dims} {cast:?} {shift:?}: first difference at {diff:?}"
                );
                checked += 1;
            }
        }
    }
    eprintln!("checked {checked} shifted conversions on {}", cuda.name());
}
