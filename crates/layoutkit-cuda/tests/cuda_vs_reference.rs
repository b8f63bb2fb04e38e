//! The CUDA backend against the CPU reference converter, bit for bit: random layout pairs with
//! tails and fill values (half of them read through strided source views), the benchmark conversions, and every cast it fuses. Skipped (with a
//! message) without a GPU unless LAYOUTKIT_REQUIRE_CUDA=1. The codegen test needs no GPU.

use layoutkit_core::plan::ConversionPlan;
use layoutkit_core::{parse_format, CastSpec, DType, Dims, Quantization};
use layoutkit_cpu::convert_reference;
use layoutkit_cuda::{codegen, Cuda};
use layoutkit_testkit::{arb_pair, arb_view, noise_bytes, view_strides};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

fn device() -> Option<Cuda> {
    match Cuda::new(0) {
        Ok(c) => {
            eprintln!("CUDA device: {}", c.name());
            Some(c)
        }
        Err(e) => {
            if std::env::var("LAYOUTKIT_REQUIRE_CUDA").as_deref() == Ok("1") {
                panic!("LAYOUTKIT_REQUIRE_CUDA=1 but {e}");
            }
            eprintln!("skipped: {e}");
            None
        }
    }
}

fn casts() -> Vec<CastSpec> {
    let q = |s, z| {
        Some(Quantization {
            scale: s,
            zero_point: z,
        })
    };
    vec![
        CastSpec::identity(DType::F32),
        CastSpec::identity(DType::F16),
        CastSpec::identity(DType::I8),
        CastSpec::identity(DType::F64),
        CastSpec::new(DType::F32, DType::F16, None).unwrap(),
        CastSpec::new(DType::F16, DType::F32, None).unwrap(),
        CastSpec::new(DType::F32, DType::BF16, None).unwrap(),
        CastSpec::new(DType::BF16, DType::F32, None).unwrap(),
        CastSpec::new(DType::F32, DType::I8, q(0.05, 3)).unwrap(),
        CastSpec::new(DType::F32, DType::U8, q(0.5, 128)).unwrap(),
        CastSpec::new(DType::I8, DType::F32, q(0.25, -4)).unwrap(),
    ]
}

fn first_difference(a: &[u8], b: &[u8]) -> Option<usize> {
    if a.len() != b.len() {
        return Some(usize::MAX);
    }
    a.iter().zip(b).position(|(x, y)| x != y)
}

#[test]
fn codegen_tiles_transpositions_and_loops_elsewhere() {
    let dims = Dims::parse("N=2,C=64,H=8,W=8").unwrap();
    let nchw = parse_format("NCHW").unwrap().shaped(&dims).unwrap();
    let nhwc = parse_format("NHWC").unwrap().shaped(&dims).unwrap();
    let k8 = parse_format("kHWC8").unwrap().shaped(&dims).unwrap();
    let id = CastSpec::identity(DType::F32);
    let t = codegen::generate(&ConversionPlan::new(&nchw, &nhwc).unwrap(), &id).unwrap();
    assert_eq!(t.len(), 1);
    assert!(t[0].source.contains("__shared__"), "{}", t[0].source);
    let c = codegen::generate(&ConversionPlan::new(&nchw, &nchw).unwrap(), &id).unwrap();
    assert!(!c[0].source.contains("__shared__"));
    let mut dims3 = Dims::parse("N=1,C=3,H=4,W=4").unwrap();
    let padded = codegen::generate(
        &ConversionPlan::new(
            &parse_format("NCHW").unwrap().shaped(&dims3).unwrap(),
            &parse_format("kHWC8").unwrap().shaped(&dims3).unwrap(),
        )
        .unwrap(),
        &id,
    )
    .unwrap();
    // The padding channels of each kHWC8 pixel are written by the tile, after its data.
    assert_eq!(padded.len(), 1);
    assert_eq!(padded[0].name, "tile", "{}", padded[0].source);
    dims3 = dims;
    let _ = (k8, dims3);
    // 2-byte elements are read in 8-byte vectors when extents are multiples of 4, and written
    // in pairs (4-byte vectors) when they are even (the widths measured best on the H200).
    let h = CastSpec::identity(DType::F16);
    let dims128 = Dims::parse("N=2,C=128,H=8,W=8").unwrap();
    let p = codegen::generate(
        &ConversionPlan::new(
            &parse_format("NCHW").unwrap().shaped(&dims128).unwrap(),
            &parse_format("NHWC").unwrap().shaped(&dims128).unwrap(),
        )
        .unwrap(),
        &h,
    )
    .unwrap();
    assert!(p[0].source.contains("uint2 q; } r;"), "{}", p[0].source);
    // Bytes are transposed in registers a word at a time (word tiles), also from floats and
    // into padded rows (f32 -> i8 NCHW -> NCHW32c with 16 channels); rows of an odd length
    // (7 x 7 planes) keep the element tile.
    let blocked = |dims: &str, cast: &CastSpec| {
        let d = Dims::parse(dims).unwrap();
        let plan = ConversionPlan::new(
            &parse_format("NCHW").unwrap().shaped(&d).unwrap(),
            &parse_format("NCHW32c").unwrap().shaped(&d).unwrap(),
        )
        .unwrap();
        codegen::generate(&plan, cast).unwrap()
    };
    let b = CastSpec::identity(DType::I8);
    let to_i8 = CastSpec::new(DType::F32, DType::I8, None).unwrap();
    assert!(blocked("N=2,C=64,H=8,W=8", &b)[0].source.contains("smw["));
    let padded = blocked("N=2,C=16,H=8,W=8", &to_i8);
    assert_eq!((padded.len(), padded[0].name), (1, "tile"));
    assert!(padded[0].source.contains("smw["), "{}", padded[0].source);
    assert!(!blocked("N=2,C=64,H=7,W=7", &b)[0].source.contains("smw["));
    let dims66 = Dims::parse("N=2,C=130,H=8,W=8").unwrap();
    let p = codegen::generate(
        &ConversionPlan::new(
            &parse_format("NCHW").unwrap().shaped(&dims66).unwrap(),
            &parse_format("NHWC").unwrap().shaped(&dims66).unwrap(),
        )
        .unwrap(),
        &h,
    )
    .unwrap();
    assert!(
        p[0].source.contains("unsigned int q; } w;"),
        "{}",
        p[0].source
    );
    // MACE images: one tile of 4-channel units (whole pixels), which also writes the partial
    // last pixel of each row (the channels left after the last full block, then fill).
    let dims250 = Dims::parse("N=2,H=7,W=37,C=250").unwrap();
    let plan250 = ConversionPlan::new(
        &parse_format("NHWC").unwrap().shaped(&dims250).unwrap(),
        &parse_format("mace:in_out_channel")
            .unwrap()
            .shaped(&dims250)
            .unwrap(),
    )
    .unwrap();
    let m = codegen::generate(&plan250, &id).unwrap();
    assert_eq!(m.len(), 1);
    assert_eq!(m[0].name, "tile");
    assert!(m[0].source.contains("? p[e] : fill"), "{}", m[0].source);
    // Without merging, the partial pixels get a runs kernel of their own.
    let apart = codegen::Tuning {
        merge_tails: false,
        ..codegen::Tuning::default()
    };
    let m = codegen::generate_tuned(&plan250, &id, &apart).unwrap();
    let names: Vec<&str> = m.iter().map(|l| l.name).collect();
    assert_eq!(names, ["convert", "runs"]);
    // A large region of tiny transpositions (a MACE filter image of 3 inputs and 1x1 taps:
    // 12 elements per four output channels, one thread block each as tiles) goes to the
    // kernels that write short runs; the image of a small filter keeps its tile.
    let filter = |dims: &str| {
        let d = Dims::parse(dims).unwrap();
        let plan = ConversionPlan::new(
            &parse_format("OIHW").unwrap().shaped(&d).unwrap(),
            &parse_format("mace:conv2d_filter")
                .unwrap()
                .shaped(&d)
                .unwrap(),
        )
        .unwrap();
        let names: Vec<&str> = codegen::generate(&plan, &id)
            .unwrap()
            .iter()
            .map(|l| l.name)
            .collect();
        names
    };
    let large = filter("O=400000,I=3,H=1,W=1");
    assert!(
        large.iter().all(|n| *n == "gather" || *n == "runs"),
        "{large:?}"
    );
    assert!(filter("O=64,I=3,H=1,W=1").contains(&"convert"));
    // Planned for one multiprocessor: a MACE width-major image of 3 channels (192 elements
    // per outer step) takes several steps per tile; NHWC -> the height-major image of 256
    // channels takes its columns as steps; NCHW -> NHWC of 64 channels on 8 x 8 planes keeps
    // one step.
    let steps = |from: &str, to: &str, dims: &str, cast: &CastSpec| {
        let d = Dims::parse(dims).unwrap();
        let plan = ConversionPlan::new(
            &parse_format(from).unwrap().shaped(&d).unwrap(),
            &parse_format(to).unwrap().shaped(&d).unwrap(),
        )
        .unwrap();
        let one = codegen::Tuning {
            multiprocessors: 1,
            ..codegen::Tuning::default()
        };
        codegen::generate_tuned(&plan, cast, &one)
            .unwrap()
            .iter()
            .any(|l| l.source.contains(", ts = (blk"))
    };
    let f16 = CastSpec::identity(DType::F16);
    assert!(steps(
        "NHWC",
        "mace:in_out_width",
        "N=7,H=13,W=64,C=3",
        &f16
    ));
    assert!(steps(
        "NHWC",
        "mace:in_out_height",
        "N=2,H=8,W=64,C=256",
        &f16
    ));
    assert!(!steps("NCHW", "NHWC", "N=2,C=64,H=8,W=8", &f16));
    // Casts the backend does not fuse are refused, not miscomputed.
    let bad = CastSpec::new(DType::I32, DType::F16, None).unwrap();
    assert!(codegen::generate(&ConversionPlan::new(&nchw, &nhwc).unwrap(), &bad).is_err());
}

#[test]
fn random_layouts_and_casts_match_the_cpu_reference() {
    let Some(cuda) = device() else { return };
    // Half the cases planned for one multiprocessor (see the benchmark conversions' test).
    let mut few = Cuda::new(0).unwrap();
    few.set_multiprocessors(1);
    let all = casts();
    let mut runner = TestRunner::new(Config {
        cases: 200,
        ..Config::default()
    });
    runner
        .run(
            &(
                arb_pair(9),
                any::<u64>(),
                0..all.len(),
                prop_oneof![Just(0.0f64), Just(-1.5), Just(7.0)],
                (any::<bool>(), arb_view(layoutkit_core::MAX_TOKENS)),
            ),
            |((a, b, dims), seed, ci, fill, (strided, (order, gaps)))| {
                let cast = all[ci];
                let mut src = a.shaped(&dims).unwrap();
                if strided {
                    // Half the cases read a strided view (another memory order, gaps).
                    let rank = src.physical_shape().len();
                    let order: Vec<usize> = order.into_iter().filter(|&k| k < rank).collect();
                    let strides = view_strides(&src.physical_shape(), &order, &gaps[..rank]);
                    src = src.with_strides(&strides).unwrap();
                }
                let dst = b.with_fill(fill).shaped(&dims).unwrap();
                prop_assume!(src.elements() <= 40_000 && dst.elements() <= 40_000);
                prop_assume!(ConversionPlan::new(&src, &dst)
                    .map(|p| matches!(p.strategy(), layoutkit_core::plan::Strategy::Regions { .. }))
                    .unwrap_or(false));
                let data = noise_bytes(src.bytes(cast.src).unwrap(), seed);
                let mut want = vec![0u8; dst.bytes(cast.dst).unwrap()];
                convert_reference(&src, &data, &dst, &mut want, &cast).unwrap();
                let dev = if seed % 2 == 0 { &cuda } else { &few };
                let got = dev.convert(&src, &data, &dst, &cast).unwrap();
                prop_assert!(
                    first_difference(&got, &want).is_none(),
                    "{} -> {} {} {:?}: first difference at {:?}",
                    src.layout(),
                    dst.layout(),
                    dims,
                    cast,
                    first_difference(&got, &want)
                );
                Ok(())
            },
        )
        .unwrap();
}

#[test]
fn benchmark_conversions_with_tails_match_the_cpu_reference() {
    let Some(cuda) = device() else { return };
    let cases = [
        ("NCHW", "NHWC", "N=3,C=67,H=33,W=35"),
        ("NHWC", "NCHW", "N=2,C=130,H=17,W=19"),
        ("NCHW", "NCHW32c", "N=2,C=45,H=31,W=29"),
        ("NCHW", "kHWC8", "N=2,C=3,H=65,W=67"),
        ("OIHW", "OIHW16i16o", "O=33,I=18,H=3,W=3"),
        ("NHWC", "mace:in_out_channel", "N=2,H=19,W=17,C=10"),
        ("NCHW", "NC/32HW32", "N=2,C=70,H=9,W=9"),
        // Even extents: the paired 2-byte tiles.
        ("NCHW", "NHWC", "N=2,C=64,H=16,W=18"),
        ("NHWC", "NCHW", "N=2,C=66,H=8,W=10"),
        ("NCHW", "NCHW32c", "N=2,C=64,H=12,W=12"),
        // Extents that are multiples of 8 with partial tiles: the 16-byte vector tiles.
        ("NCHW", "NHWC", "N=2,C=136,H=12,W=20"),
        ("NHWC", "NCHW", "N=2,C=200,H=10,W=12"),
        // Whole 16-channel blocks: pairs and packed stores over a compound source index.
        ("OIHW", "OIHW16i16o", "O=32,I=48,H=3,W=3"),
        // MACE images with many channel blocks and padding, and without padding.
        ("NHWC", "mace:in_out_channel", "N=2,H=7,W=37,C=250"),
        ("NHWC", "mace:in_out_channel", "N=1,H=5,W=21,C=68"),
        // Even widths: whole 16-byte stores of image pixels.
        ("NHWC", "mace:in_out_channel", "N=2,H=3,W=56,C=250"),
        ("NHWC", "mace:in_out_channel", "N=1,H=2,W=64,C=64"),
        // Tiles read or written as one flat run where their rows lie back to back with odd
        // starts or lengths: 7 x 7 planes of 250 channels (whole images), 3 channels (rows
        // of 3 elements), both ways, with partial tiles and odd images.
        // Word tiles (bytes transposed in registers) with partial tiles along both axes,
        // one and two words per thread and row, 24 channels (a tile wider than its rows), the
        // blocked layouts both ways, and padded blocks of 16 and 24 channels.
        ("NCHW", "NHWC", "N=2,C=200,H=14,W=14"),
        ("NHWC", "NCHW", "N=2,C=200,H=14,W=14"),
        ("NCHW", "NHWC", "N=2,C=16,H=24,W=24"),
        ("NCHW", "NHWC", "N=3,C=24,H=12,W=12"),
        ("NCHW", "NCHW32c", "N=2,C=96,H=14,W=14"),
        ("NCHW32c", "NCHW", "N=2,C=64,H=16,W=16"),
        ("NCHW", "NCHW32c", "N=2,C=16,H=14,W=14"),
        ("NCHW", "NCHW32c", "N=3,C=24,H=12,W=12"),
        ("NCHW", "NHWC", "N=3,C=250,H=7,W=7"),
        ("NHWC", "NCHW", "N=3,C=250,H=7,W=7"),
        ("NCHW", "NHWC", "N=2,C=3,H=37,W=41"),
        ("NHWC", "NCHW", "N=2,C=3,H=37,W=41"),
        ("NCHW", "NHWC", "N=5,C=24,H=7,W=7"),
        ("NHWC", "NCHW", "N=3,C=1000,H=3,W=5"),
        // Regions of 2^20 elements and more whose transpositions are tiny (12-48 elements per
        // outer step): not tiled (see `codegen`), written as short runs.
        ("OIHW", "mace:conv2d_filter", "O=350003,I=3,H=1,W=1"),
        ("mace:conv2d_filter", "OIHW", "O=120001,I=1,H=3,W=3"),
        ("OIHW16i16o", "OIHW", "O=350003,I=3,H=1,W=1"),
        // Runs of whole 8- and 4-byte vectors only (1x1 planes: NCHW32c <-> NCHW are runs of
        // C elements, 32-channel blocks apart on the blocked side).
        ("NCHW32c", "NCHW", "N=5,C=1000,H=1,W=1"),
        ("NCHW", "NCHW32c", "N=5,C=1000,H=1,W=1"),
        ("NCHW32c", "NCHW", "N=7,C=12,H=1,W=1"),
        ("NCHW32c", "NCHW", "N=7,C=250,H=1,W=1"),
        // Compound source rows written in destination order (columns first), in tiles of
        // whole channel extents: MACE height-major images both ways, filter images and
        // 16i16o blocks.
        ("NHWC", "mace:in_out_height", "N=2,H=8,W=9,C=24"),
        ("NHWC", "mace:in_out_height", "N=3,H=4,W=64,C=16"),
        ("NHWC", "mace:in_out_height", "N=2,H=8,W=14,C=250"),
        ("mace:in_out_height", "NHWC", "N=2,H=8,W=9,C=24"),
        ("mace:in_out_height", "NHWC", "N=2,H=6,W=14,C=250"),
        ("mace:conv2d_filter", "OIHW", "O=8,I=16,H=3,W=3"),
        ("mace:conv2d_filter", "OIHW", "O=12,I=250,H=3,W=3"),
        ("OIHW", "mace:conv2d_filter", "O=12,I=24,H=3,W=3"),
        ("OIHW16i16o", "OIHW", "O=32,I=32,H=3,W=3"),
        ("OIHW16i16o", "OIHW", "O=40,I=3,H=7,W=7"),
        ("OIHW", "OIHW16i16o", "O=32,I=250,H=3,W=3"),
        // A short side of 2-4 cells moved in registers (thin tiles): 3, 4 and 2 channels
        // both ways and into padded 32- and 8-channel blocks, planes of a whole block of
        // pixels, of a partial one (45 x 47) and of two and a part (96 x 97).
        ("NCHW", "NHWC", "N=2,C=3,H=45,W=47"),
        ("NHWC", "NCHW", "N=2,C=3,H=45,W=47"),
        ("NCHW", "NCHW32c", "N=2,C=3,H=45,W=47"),
        ("NCHW", "NHWC", "N=2,C=4,H=64,W=64"),
        ("NHWC", "NCHW", "N=2,C=4,H=64,W=64"),
        ("NCHW", "NCHW32c", "N=2,C=4,H=64,W=64"),
        ("NCHW", "kHWC8", "N=2,C=4,H=64,W=64"),
        ("NCHW", "NHWC", "N=3,C=2,H=96,W=97"),
        ("NHWC", "NCHW", "N=3,C=2,H=96,W=97"),
        ("NCHW", "NCHW32c", "N=3,C=2,H=96,W=97"),
        // Padded rows with every cast in the element tile: 250 channels (a partial last
        // block of 26), 16 channels.
        ("NCHW", "NCHW32c", "N=2,C=250,H=7,W=7"),
        ("NCHW", "NCHW32c", "N=3,C=16,H=14,W=14"),
        // Flat writes (destination rows back to back, of an odd number of elements): one
        // division per vector, rows of 49, 25, 9 (shorter than a vector) and 17 elements, a
        // partial last block, kHWC8's 8-channel blocks.
        ("NCHW32c", "NCHW", "N=3,C=96,H=7,W=7"),
        ("NCHW32c", "NCHW", "N=2,C=80,H=5,W=5"),
        ("NCHW32c", "NCHW", "N=2,C=40,H=3,W=3"),
        ("NCHW32c", "NCHW", "N=2,C=64,H=1,W=17"),
        ("NHWC", "NCHW", "N=1,C=250,H=9,W=11"),
        ("kHWC8", "NCHW", "N=2,C=60,H=7,W=7"),
        // The gather (padding that completes no run: most of each block), its chunks decoded
        // once: 3 and 5 inputs into 16i16o blocks with a partial last block of outputs, one
        // channel into 32- and 8-channel blocks, 40 channels of 1 x 1 planes, MACE images of
        // 5 channels.
        ("OIHW", "OIHW16i16o", "O=37,I=3,H=7,W=7"),
        ("OIHW", "OIHW16i16o", "O=20,I=5,H=1,W=1"),
        ("NCHW", "NCHW32c", "N=3,C=1,H=5,W=5"),
        ("NCHW", "NCHW32c", "N=5,C=40,H=1,W=1"),
        ("NCHW", "kHWC8", "N=3,C=1,H=4,W=5"),
        ("NHWC", "mace:in_out_width", "N=2,H=3,W=3,C=5"),
        ("NHWC", "mace:in_out_height", "N=2,H=3,W=3,C=5"),
        ("OIHW", "mace:conv2d_filter", "O=5,I=3,H=3,W=3"),
    ];
    // Planned for one multiprocessor, so that these small tensors take the paths of large
    // ones (tiles of several steps keep 8 blocks per multiprocessor).
    let mut few = Cuda::new(0).unwrap();
    few.set_multiprocessors(1);
    let steps = [
        // Several steps of the outer loop per tile where one step's transposition is small:
        // MACE width-major images of 3, 4, 16 and 24 channels (step counts that divide the
        // outer loop and that do not), channel-major images of 16 and 24 channels on 14 x 14
        // planes and of 10 (a partial last pixel), height-major images of 1 and 3 channels,
        // filter images of 16 and 4 inputs, 16i16o blocks of 1 input, 7 x 7 planes of 250
        // and 1000 channels into and out of 32-channel blocks (a flat read of the steps).
        ("NHWC", "mace:in_out_width", "N=7,H=13,W=64,C=3"),
        ("mace:in_out_width", "NHWC", "N=7,H=13,W=64,C=3"),
        ("NHWC", "mace:in_out_width", "N=5,H=9,W=64,C=4"),
        ("mace:in_out_width", "NHWC", "N=9,H=14,W=14,C=16"),
        ("NHWC", "mace:in_out_width", "N=5,H=14,W=14,C=24"),
        ("NHWC", "mace:in_out_channel", "N=11,H=14,W=14,C=16"),
        ("mace:in_out_channel", "NHWC", "N=7,H=14,W=14,C=24"),
        ("NHWC", "mace:in_out_channel", "N=5,H=6,W=5,C=10"),
        ("NHWC", "mace:in_out_height", "N=13,H=64,W=64,C=1"),
        ("mace:in_out_height", "NHWC", "N=9,H=16,W=64,C=3"),
        ("OIHW", "mace:conv2d_filter", "O=40,I=16,H=3,W=3"),
        ("mace:conv2d_filter", "OIHW", "O=30,I=4,H=3,W=3"),
        ("OIHW16i16o", "OIHW", "O=100,I=1,H=3,W=3"),
        ("NCHW", "NCHW32c", "N=5,C=250,H=7,W=7"),
        ("NCHW32c", "NCHW", "N=3,C=1000,H=7,W=7"),
        // Tiles of whole source rows read as one run: pixels of 250 and 131 channels of
        // bytes (partial last tiles of 14 x 14 and 5 x 3 pixels), 99 channels of halves.
        ("NHWC", "NCHW", "N=2,C=250,H=14,W=14"),
        ("NHWC", "NCHW", "N=2,C=250,H=5,W=3"),
        ("NHWC", "NCHW", "N=3,C=131,H=9,W=11"),
        ("NHWC", "NCHW", "N=2,C=99,H=10,W=10"),
        // Tiles written out of source order (`WriteOrder`): height-major images of 16 and 24
        // channels, filter images of 3 and 24 inputs into OIHW, 16i16o blocks.
        ("NHWC", "mace:in_out_height", "N=3,H=14,W=14,C=16"),
        ("NHWC", "mace:in_out_height", "N=2,H=14,W=14,C=24"),
        ("mace:in_out_height", "NHWC", "N=3,H=14,W=14,C=16"),
        ("mace:conv2d_filter", "OIHW", "O=30,I=3,H=7,W=7"),
        ("mace:conv2d_filter", "OIHW", "O=37,I=24,H=3,W=3"),
        ("OIHW16i16o", "OIHW", "O=40,I=20,H=3,W=3"),
        // Height-major images of 130-2048 channels: the columns as steps of a tile of
        // channels (H = 14 and 6: lanes and padding; 37 columns: a partial last tile of
        // columns; 130 and 250 channels: a partial last tile of channels); the other way,
        // source rows of up to 64 cells by channels in multiples of 4.
        ("NHWC", "mace:in_out_height", "N=2,H=14,W=14,C=250"),
        ("NHWC", "mace:in_out_height", "N=2,H=8,W=64,C=256"),
        ("NHWC", "mace:in_out_height", "N=2,H=14,W=14,C=1000"),
        ("NHWC", "mace:in_out_height", "N=2,H=6,W=37,C=130"),
        ("mace:in_out_height", "NHWC", "N=2,H=8,W=64,C=256"),
        ("mace:in_out_height", "NHWC", "N=2,H=7,W=7,C=1000"),
        ("mace:in_out_height", "NHWC", "N=2,H=14,W=14,C=2048"),
        ("mace:in_out_height", "NHWC", "N=2,H=6,W=37,C=130"),
        // Flat writes over several steps (the steps' destination rows one run): 7 x 7, 5 x 5
        // and 3 x 3 planes out of 32-channel blocks (step counts that divide the blocks and
        // that do not), 7 x 7 planes out of 8-channel blocks.
        ("NCHW32c", "NCHW", "N=7,C=96,H=7,W=7"),
        ("NCHW32c", "NCHW", "N=6,C=96,H=7,W=7"),
        ("NCHW32c", "NCHW", "N=9,C=64,H=5,W=5"),
        ("NCHW32c", "NCHW", "N=40,C=32,H=3,W=3"),
        ("kHWC8", "NCHW", "N=30,C=64,H=7,W=7"),
    ];
    let runs = cases.iter().map(|c| (c, &cuda));
    let runs = runs.chain(steps.iter().map(|c| (c, &few)));
    let mut checked = 0;
    for (&(from, to, dims), cuda) in runs {
        let dims = Dims::parse(dims).unwrap();
        let src = parse_format(from).unwrap().shaped(&dims).unwrap();
        let dst = parse_format(to).unwrap().shaped(&dims).unwrap();
        for cast in casts() {
            let data = noise_bytes(src.bytes(cast.src).unwrap(), 5);
            let mut want = vec![0u8; dst.bytes(cast.dst).unwrap()];
            convert_reference(&src, &data, &dst, &mut want, &cast).unwrap();
            let got = cuda.convert(&src, &data, &dst, &cast).unwrap();
            assert!(
                first_difference(&got, &want).is_none(),
                "{from} -> {to} {dims} {cast:?}: first difference at {:?}",
                first_difference(&got, &want)
            );
            checked += 1;
        }
    }
    eprintln!("checked {checked} conversions on {}", cuda.name());
}
