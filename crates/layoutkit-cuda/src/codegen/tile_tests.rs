//! Tests of the transposition kernel's tile shapes, write order and shared memory.

use super::*;

/// A loop of `extent` steps, `src_stride` and `dst_stride` elements apart in the two layouts.
fn l(extent: usize, src_stride: isize, dst_stride: isize) -> LoopDim {
    LoopDim {
        extent,
        src_stride,
        dst_stride,
    }
}

/// A padded destination row of 8-byte elements as wide as the tile allows still fits the
/// static shared memory.
#[test]
fn wide_padded_rows_fit_the_shared_memory() {
    use layoutkit_core::DType;
    let cast = CastSpec::identity(DType::F64);
    let job = TileJob {
        src_offset: 0,
        dst_offset: 0,
        axes: TileAxes {
            outer: vec![l(4, 200 * 1024, 1024 * 256)],
            a: vec![l(1024, 1, 256)],
            b: l(200, 1024, 1),
        },
        unit: 1,
        b_pad: 56,
        a_tail: 0,
        cast: &cast,
        small: true,
        tuning: Tuning::default(),
    };
    let source = tile_kernel(&job).source;
    let dims = source
        .split("sm[")
        .nth(1)
        .and_then(|r| r.split(';').next())
        .expect("a shared tile");
    let sizes: Vec<usize> = dims
        .trim_end_matches(']')
        .split("][")
        .map(|v| v.parse().unwrap())
        .collect();
    assert!(sizes[0] * sizes[1] * 8 <= SHARED_BYTES, "{dims}");
}

/// NHWC -> MACE's height-major image: compound source rows (channels, then columns) whose
/// destination rows are adjacent along the columns are written columns first, in tiles of
/// whole channel extents; a plain transposition keeps the source order.
#[test]
fn scattered_compound_rows_are_written_in_destination_order() {
    use layoutkit_core::DType;
    let cast = CastSpec::identity(DType::F16);
    let job = |a: Vec<LoopDim>, b: LoopDim| TileJob {
        src_offset: 0,
        dst_offset: 0,
        axes: TileAxes {
            outer: vec![l(16, 65536, 65536)],
            a,
            b,
        },
        unit: 1,
        b_pad: 0,
        a_tail: 0,
        cast: &cast,
        small: true,
        tuning: Tuning::default(),
    };
    // N=16, H=64, W=64, C=250: channels 64 * 4 apart in the image, columns 4 apart.
    let image = job(vec![l(64, 250, 4), l(250, 1, 256)], l(4, 16000, 1));
    let order = write_order(&[l(250, 1, 256), l(64, 250, 4)], 1024, 4, 4, &image);
    assert_eq!(
        order,
        Some(WriteOrder {
            rows: 1000,
            inner: 250,
            outer: 4
        })
    );
    // 24 channels: 42 columns of whole channel extents (1008 rows) per tile. (With 250, the
    // columns are steps of a tile of channels: `many_channels_take_columns_as_steps`.)
    let image = job(vec![l(64, 24, 4), l(24, 1, 256)], l(4, 1536, 1));
    let src = tile_kernel(&image).source;
    assert!(src.contains("la = (lw % 42u) * 24u + lw / 42u"), "{src}");
    assert!(src.contains("a0 = ta * 1008u"), "{src}");
    // 3 channels: 340 columns (1020 rows, a multiple of the 4-element read vector), not
    // 341 (1023 rows: single-element reads).
    let rgb = job(vec![l(1024, 3, 4), l(3, 1, 4096)], l(4, 3072, 1));
    let src = tile_kernel(&rgb).source;
    assert!(src.contains("la = (lw % 340u) * 3u + lw / 340u"), "{src}");
    assert!(src.contains("uint2 q"), "{src}");
    // NCHW -> NHWC (one source loop): rows in source order.
    let plain = job(vec![l(4096, 1, 256)], l(256, 4096, 1));
    assert!(!tile_kernel(&plain).source.contains("lw %"));
}

/// The write order's contract over many shapes: whole extents of the first loop, at least
/// two steps of the second and no more than it has, no more rows than the tile allowed,
/// the read vector kept; and its row map a permutation of the tile's rows.
#[test]
fn write_orders_cover_the_tile_once() {
    use layoutkit_core::DType;
    let cast = CastSpec::identity(DType::F32);
    for inner in [1, 3, 9, 16, 24, 250, 256, 1000] {
        for second in [1, 2, 7, 14, 64] {
            for (ta, keep) in [(256, 2), (1024, 4), (1024, 1), (4096, 4)] {
                let group = [
                    l(inner, 1, 4 * second as isize),
                    l(second, inner as isize, 4),
                ];
                let job = TileJob {
                    src_offset: 0,
                    dst_offset: 0,
                    axes: TileAxes {
                        outer: vec![],
                        a: vec![group[1], group[0]],
                        b: l(4, (inner * second) as isize, 1),
                    },
                    unit: 1,
                    b_pad: 0,
                    a_tail: 0,
                    cast: &cast,
                    small: true,
                    tuning: Tuning::default(),
                };
                let Some(o) = write_order(&group, ta, 4, keep, &job) else {
                    continue;
                };
                assert_eq!(o.inner, inner);
                assert!(o.outer >= 2 && o.outer <= second, "{o:?}");
                assert!(o.rows == o.outer * inner && o.rows <= ta, "{o:?}");
                assert_eq!(o.rows % keep, 0, "{o:?}");
                let mut seen = vec![false; o.rows];
                for lw in 0..o.rows {
                    let la = (lw % o.outer) * o.inner + lw / o.outer;
                    assert!(!seen[la], "{o:?}: row {la} twice");
                    seen[la] = true;
                }
            }
        }
    }
}

#[test]
fn shared_rows_hold_an_odd_number_of_cells() {
    for ta in 1..70 {
        let pad = row_padding(ta);
        assert_eq!((ta + pad) % 2, 1);
        assert!((1..=2).contains(&pad));
    }
}

/// Shapes stay inside the extents and the shared-memory budget, and unit and compound
/// tiles take a power of two of source cells.
#[test]
fn tile_shapes_fit() {
    for a in [1, 3, 9, 16, 62, 63, 100, 3136, 36864] {
        for b in [1, 3, 16, 32, 56, 250, 4096] {
            for unit in [1, 2, 4] {
                for compound in [false, true] {
                    for sizes in [(1, 1), (2, 2), (4, 4), (4, 1), (4, 2), (8, 8)] {
                        for n in [0, 2048, 4096] {
                            let (ta, tb) = tile_shape(a, b, unit, compound, sizes, n);
                            assert!(ta >= 1 && ta <= a && tb >= 1 && tb <= b);
                            assert!(ta * tb * unit * sizes.0 <= 32 * 1024);
                            if n > 0 && (unit > 1 || compound) && ta < a {
                                assert!(ta.is_power_of_two());
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Source rows back to back whose start or length leaves narrow vectors (a 7 x 7 plane's 49
/// bytes, an NHWC pixel's 3 channels) are read as one flat run in whole vectors into a flat
/// shared copy, which the write phase indexes by row; rows that allow whole vectors, tiles
/// that do not span `a`, and rows that are not back to back keep the padded rows.
#[test]
fn flat_reads_where_rows_are_back_to_back_and_narrow() {
    use layoutkit_core::DType;
    let thin_job = |cast: &CastSpec, a: LoopDim, b: LoopDim, outer: LoopDim, thin: bool| {
        let job = TileJob {
            src_offset: 0,
            dst_offset: 0,
            axes: TileAxes {
                outer: vec![outer],
                a: vec![a],
                b,
            },
            unit: 1,
            b_pad: 0,
            a_tail: 0,
            cast,
            small: true,
            tuning: Tuning {
                thin,
                ..Tuning::default()
            },
        };
        tile_kernel(&job).source
    };
    let job = |cast, a, b, outer| thin_job(cast, a, b, outer, true);
    let i8 = CastSpec::identity(DType::I8);
    let f32 = CastSpec::identity(DType::F32);
    // i8 NCHW -> NHWC, C = 250, 7 x 7: the tile is the whole image, 250 rows of 49 bytes.
    let plane = job(&i8, l(49, 1, 250), l(250, 49, 1), l(4, 12250, 12250));
    assert!(plane.contains("smf["), "{plane}");
    assert!(
        plane.contains("*(uint2*)&smf[shift + head + v * 8u]"),
        "{plane}"
    );
    assert!(
        plane.contains("smf[shift + jj / 1u * 49u + la * 1u + jj % 1u]"),
        "{plane}"
    );
    assert!(!plane.contains(" sm["), "{plane}");
    // i8 NHWC -> NCHW, C = 3: source rows of 3 bytes (with thin tiles off: `tile_thin.rs`
    // takes them).
    let rgb = thin_job(&i8, l(3, 1, 4096), l(4096, 3, 1), l(4, 12288, 12288), false);
    assert!(rgb.contains("smf["), "{rgb}");
    // f32 rows of 64 elements take the widest reads (8 bytes) already.
    let wide = job(&f32, l(64, 1, 256), l(256, 64, 1), l(4, 16384, 16384));
    assert!(!wide.contains("smf["), "{wide}");
    // Rows not back to back (a gap after each plane).
    let gaps = job(&i8, l(49, 1, 250), l(250, 64, 1), l(4, 16000, 12250));
    assert!(!gaps.contains("smf["), "{gaps}");
}

/// Plain transpositions whose source rows are back to back, a little longer than a tile and
/// read 1 or 2 bytes at a time take whole rows per tile (`whole_rows_shape`), read as one run:
/// i8 NHWC -> NCHW with 250 channels is 64 rows of 250 bytes per tile, f16 with 99 channels 32
/// rows; rows of whole words, rows more than twice a tile, rows with gaps and the knob off
/// keep the square tile.
#[test]
fn whole_source_rows_where_rows_are_a_little_longer_than_a_tile() {
    use layoutkit_core::DType;
    let i8 = CastSpec::identity(DType::I8);
    let f16 = CastSpec::identity(DType::F16);
    let source = |job: TileJob| tile_kernel(&job).source;
    let nhwc = |cast, c: usize, hw: usize| {
        transposition(
            cast,
            l(c, 1, hw as isize),
            l(hw, c as isize, 1),
            l(4, (c * hw) as isize, (c * hw) as isize),
            0,
        )
    };
    let bytes = source(nhwc(&i8, 250, 4096));
    assert!(bytes.contains("unsigned char smf[16008]"), "{bytes}");
    assert!(bytes.contains("a0 = ta * 250u, b0 = tb * 64u"), "{bytes}");
    assert!(
        bytes.contains("*(uint2*)&smf[shift + head + v * 8u]"),
        "{bytes}"
    );
    // 14 x 14 planes: the last tile of 196 rows is partial (bounded by the run's length).
    let small = source(nhwc(&i8, 250, 196));
    assert!(
        small.contains("196u - b0 < 64u ? 196u - b0 : 64u"),
        "{small}"
    );
    let halves = source(nhwc(&f16, 99, 4096));
    assert!(halves.contains("a0 = ta * 99u, b0 = tb * 32u"), "{halves}");
    // Rows of whole words (252 bytes), rows more than twice a tile (300 bytes), gaps.
    assert!(!source(nhwc(&i8, 252, 4096)).contains("smf["));
    assert!(!source(nhwc(&i8, 300, 4096)).contains("smf["));
    let gaps = transposition(
        &i8,
        l(250, 1, 4096),
        l(4096, 256, 1),
        l(4, 1 << 20, 1 << 20),
        0,
    );
    assert!(!source(gaps).contains("smf["));
    let mut off = nhwc(&i8, 250, 4096);
    off.tuning.whole_rows = false;
    assert!(!source(off).contains("smf["));
}

/// Destination rows back to back of an odd number of bytes or halves are written as one flat
/// run in 4-byte stores, each vector's first element found by one division and the rest by
/// the next column or the next row's first (`FlatWrite`); the steps of small tiles write one
/// run (run row `L` is row `L % rows` of step `L / rows`); rows shorter than a vector keep a
/// division per element; 4-byte elements keep their row stores.
#[test]
fn flat_writes_divide_once_per_vector() {
    use layoutkit_core::DType;
    let i8 = CastSpec::identity(DType::I8);
    let f16 = CastSpec::identity(DType::F16);
    let f32 = CastSpec::identity(DType::F32);
    let source = |job: TileJob| tile_kernel(&job).source;
    // NCHW32c -> NCHW, 7 x 7 planes: 32 rows of 49 elements per block, 21400 blocks.
    let blocks = |cast| transposition(cast, l(32, 1, 49), l(49, 32, 1), l(21400, 1568, 1568), 0);
    let bytes = source(blocks(&i8));
    assert!(
        bytes.contains("f0 = whead + v * 4u, l0 = f0 / 49u"),
        "{bytes}"
    );
    assert!(
        bytes.contains("*(unsigned int*)(dst + ds + whead"),
        "{bytes}"
    );
    // 1568-byte tiles take steps (10 of them: 16 KiB), written as one run.
    assert!(bytes.contains("sr0 = l0 / 32u * 49u"), "{bytes}");
    assert!(bytes.contains("ts * 15680u"), "{bytes}");
    let halves = source(blocks(&f16));
    assert!(
        halves.contains("f0 = whead + v * 2u, l0 = f0 / 49u"),
        "{halves}"
    );
    assert!(!halves.contains("sr0"), "{halves}");
    let floats = source(blocks(&f32));
    assert!(!floats.contains("whead"), "{floats}");
    // Steps off for flat writes: one block per tile.
    let mut no_steps = blocks(&i8);
    no_steps.tuning.flat_steps = false;
    let one = source(no_steps);
    assert!(
        one.contains("l0 = f0 / 49u") && !one.contains("ts *"),
        "{one}"
    );
    // NCHW -> NHWC of 3 channels (thin tiles off): rows of 3 bytes, shorter than a vector.
    let mut rgb = transposition(&i8, l(4096, 1, 3), l(3, 4096, 1), l(4, 12288, 12288), 0);
    rgb.tuning.thin = false;
    let rgb = source(rgb);
    assert!(rgb.contains("jj = f % 3u"), "{rgb}");
    assert!(!rgb.contains("l0 = f0"), "{rgb}");
}

/// The tile job of a plain transposition: source-contiguous `a`, destination-contiguous `b`,
/// `b_pad` fill elements after each destination row.
fn transposition(
    cast: &CastSpec,
    a: LoopDim,
    b: LoopDim,
    outer: LoopDim,
    b_pad: usize,
) -> TileJob<'_> {
    TileJob {
        src_offset: 0,
        dst_offset: 0,
        axes: TileAxes {
            outer: vec![outer],
            a: vec![a],
            b,
        },
        unit: 1,
        b_pad,
        a_tail: 0,
        cast,
        small: true,
        tuning: Tuning::default(),
    }
}

/// Transpositions into 1-byte elements whose source rows start on whole vectors of `m * 4`
/// elements and whose destination rows are whole 4-byte words are transposed in registers
/// (`WordTile`): the widest reads that fit 16 bytes and tile the warp, destination rows of up
/// to 128 bytes and an odd number of words, 32 lanes over 32 banks, padding in whole words;
/// rows of odd lengths, units, and 2- and 4-byte destinations keep the element tile.
#[test]
fn word_tiles_where_rows_are_whole_words() {
    use layoutkit_core::DType;
    let job = transposition;
    let word = |j: &TileJob| WordTile::of(j, &j.axes.a, &j.axes.b);
    let i8 = CastSpec::identity(DType::I8);
    let f16 = CastSpec::identity(DType::F16);
    let f32 = CastSpec::identity(DType::F32);
    let to_i8 = CastSpec::new(DType::F32, DType::I8, None).unwrap();
    let to_f16 = CastSpec::new(DType::F32, DType::F16, None).unwrap();
    // i8 NCHW -> NCHW32c, C = 256, 64 x 64: 8-byte reads of 4 rows, 32-byte rows.
    let blocked = job(
        &i8,
        l(4096, 1, 32),
        l(32, 4096, 1),
        l(256, 131072, 131072),
        0,
    );
    let w = word(&blocked).expect("a word tile");
    assert_eq!(
        w,
        WordTile {
            k: 4,
            cols: 8,
            ta: 512,
            tb: 32,
            pitch: 9
        }
    );
    let source = tile_kernel(&blocked).source;
    assert!(
        source.contains("__shared__ unsigned int smw[4608];"),
        "{source}"
    );
    assert!(source.contains("uint2 q; } x[4];"), "{source}");
    // Lanes (4 along a, 8 along b) store to 32 different banks: word (ca * 8 + e) * 9 + rb.
    let banks: std::collections::HashSet<usize> = (0..32)
        .map(|lane| ((lane % 4) * 8 * 9 + lane / 4) % 32)
        .collect();
    assert_eq!(banks.len(), 32);
    // i8 NCHW -> NHWC, C = 16, 224 x 224: 16-byte rows take one word per row (4 x 4 blocks).
    let narrow = job(
        &i8,
        l(50176, 1, 16),
        l(16, 50176, 1),
        l(2, 802816, 802816),
        0,
    );
    let w = word(&narrow).expect("a word tile");
    assert_eq!((w.cols, w.tb, w.pitch), (4, 16, 5));
    // 14 x 14 planes (196 bytes) allow 4-byte reads only; casts read 16 bytes of floats.
    let plane = job(
        &i8,
        l(196, 1, 2048),
        l(2048, 196, 1),
        l(4, 401408, 401408),
        0,
    );
    assert_eq!(word(&plane).map(|w| (w.cols, w.tb)), Some((4, 128)));
    let cast = job(
        &to_i8,
        l(4096, 1, 32),
        l(32, 4096, 1),
        l(8, 131072, 131072),
        0,
    );
    assert_eq!(word(&cast).map(|w| (w.k, w.cols)), Some((4, 4)));
    // Padded rows (16 channels of a 32-channel block) take whole words of fill.
    let padded = job(
        &to_i8,
        l(4096, 1, 32),
        l(16, 4096, 1),
        l(4, 65536, 131072),
        16,
    );
    assert_eq!(word(&padded).map(|w| (w.cols, w.tb)), Some((4, 16)));
    let source = tile_kernel(&padded).source;
    assert!(source.contains("void tile("), "{source}");
    assert!(
        source.contains("w * 4u < 16u ? smw[la * 5u + w] : ("),
        "{source}"
    );
    // Not: 7 x 7 planes (49-byte rows), 3 channels, padding of part of a word, 2- and
    // 4-byte destinations.
    let odd = job(&i8, l(49, 1, 256), l(256, 49, 1), l(4, 12544, 12544), 0);
    assert_eq!(word(&odd), None);
    let rgb = job(&i8, l(4096, 1, 3), l(3, 4096, 1), l(4, 12288, 12288), 0);
    assert_eq!(word(&rgb), None);
    let part = job(&i8, l(4096, 1, 32), l(16, 4096, 1), l(4, 65536, 131072), 2);
    assert_eq!(word(&part), None);
    let half = job(
        &to_f16,
        l(4096, 1, 256),
        l(256, 4096, 1),
        l(8, 1 << 20, 1 << 20),
        0,
    );
    assert_eq!(word(&half), None);
    let h = job(
        &f16,
        l(4096, 1, 256),
        l(256, 4096, 1),
        l(8, 1 << 20, 1 << 20),
        0,
    );
    assert_eq!(word(&h), None);
    let wide = job(
        &f32,
        l(4096, 1, 256),
        l(256, 4096, 1),
        l(4, 1 << 20, 1 << 20),
        0,
    );
    assert_eq!(word(&wide), None);
}
