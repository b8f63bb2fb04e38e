//! MACE image layouts against the closed forms of `mace-image-layouts.md` section 1, written
//! out here independently of the layout model: every pixel lane holds the element the spec
//! names (or zero), image -> buffer returns the buffer exactly, and other buffer layouts reach
//! the same image.

use std::collections::HashMap;

use layoutkit_core::{parse_format, CastSpec, DType, Dims, ShapedLayout};
use layoutkit_cpu::convert;

fn div4(v: usize) -> usize {
    v.div_ceil(4)
}

/// Element value of a logical coordinate: its row-major index in `axes` order, plus 1 so that
/// zero means padding.
fn value_of(axes: &str, dims: &HashMap<char, usize>, coord: &HashMap<char, usize>) -> f64 {
    let mut v = 0usize;
    for a in axes.chars() {
        v = v * dims[&a] + coord[&a];
    }
    (v + 1) as f64
}

fn shaped(name: &str, dims: &str) -> ShapedLayout {
    parse_format(name)
        .unwrap()
        .shaped(&Dims::parse(dims).unwrap())
        .unwrap()
}

/// A buffer of `layout` whose logical element `c` holds `value_of(axes, c)`.
fn buffer(layout: &ShapedLayout, axes: &str, dims: &HashMap<char, usize>, dtype: DType) -> Vec<u8> {
    let mut out = vec![0u8; layout.bytes(dtype).unwrap()];
    let size = dtype.size_bytes();
    for off in 0..layout.elements() {
        if let Some(c) = layout.inverse(off).unwrap() {
            let coord: HashMap<char, usize> =
                layout.axes().iter().map(|a| a.letter()).zip(c).collect();
            let v = value_of(axes, dims, &coord);
            layoutkit_core::cast::Scalar::from_f64(dtype, v).write(&mut out[off * size..]);
        }
    }
    out
}

type ClosedForm<'a> = dyn Fn(usize, usize, usize) -> Option<HashMap<char, usize>> + 'a;

/// Checks one image type on one shape: size, every lane, the round trip, and alternative
/// buffer layouts.
fn check(
    image: &str,
    buffers: &[&str],
    dims_text: &str,
    size: (usize, usize),
    closed: &ClosedForm<'_>,
) {
    let dims: HashMap<char, usize> = Dims::parse(dims_text)
        .unwrap()
        .entries()
        .iter()
        .map(|(a, e)| (a.letter(), *e))
        .collect();
    let axes = buffers[0];
    for dtype in [DType::F32, DType::F16] {
        let img = shaped(image, dims_text);
        assert_eq!(img.image_size(), Some(size), "{image} {dims_text}");
        let src = shaped(buffers[0], dims_text);
        let data = buffer(&src, axes, &dims, dtype);
        let id = CastSpec::identity(dtype);
        let out = convert(&src, &data, &img, &id).unwrap();
        let s = dtype.size_bytes();
        let (w, h) = size;
        for y in 0..h {
            for x in 0..w {
                for k in 0..4 {
                    let off = (y * w + x) * 4 + k;
                    let got = layoutkit_core::cast::Scalar::read(dtype, &out[off * s..]);
                    let want = match closed(x, y, k) {
                        Some(c) => value_of(axes, &dims, &c),
                        None => 0.0,
                    };
                    assert_eq!(
                        got,
                        layoutkit_core::cast::Scalar::from_f64(dtype, want),
                        "{image} {dims_text} {dtype}: pixel ({x},{y}) lane {k}"
                    );
                }
            }
        }
        // image -> buffer returns the buffer exactly.
        assert_eq!(
            convert(&img, &out, &src, &id).unwrap(),
            data,
            "{image} back"
        );
        // Other buffer layouts reach the same image.
        for other in &buffers[1..] {
            let o = shaped(other, dims_text);
            let od = buffer(&o, axes, &dims, dtype);
            assert_eq!(
                convert(&o, &od, &img, &id).unwrap(),
                out,
                "{image} from {other}"
            );
        }
    }
}

fn m(pairs: &[(char, usize)]) -> HashMap<char, usize> {
    pairs.iter().copied().collect()
}

const ACT_SHAPES: &[(usize, usize, usize, usize)] = &[
    (2, 5, 3, 6),
    (1, 1, 1, 1),
    (3, 4, 7, 5),
    (2, 6, 9, 8),
    (1, 3, 2, 3),
];

#[test]
fn in_out_channel() {
    for &(n, h, w, c) in ACT_SHAPES {
        let dims = format!("N={n},H={h},W={w},C={c}");
        check(
            "mace:in_out_channel",
            &["NHWC", "NCHW", "NCHW4c", "channels_last"],
            &dims,
            (div4(c) * w, n * h),
            &|x, y, k| {
                let cc = (x / w) * 4 + k;
                (cc < c).then(|| m(&[('N', y / h), ('H', y % h), ('W', x % w), ('C', cc)]))
            },
        );
    }
}

#[test]
fn in_out_height() {
    for &(n, h, w, c) in ACT_SHAPES {
        let hb = div4(h);
        check(
            "IN_OUT_HEIGHT",
            &["NHWC", "NCHW"],
            &format!("N={n},H={h},W={w},C={c}"),
            (w * c, n * hb),
            &|x, y, k| {
                let hh = (y % hb) * 4 + k;
                (hh < h).then(|| m(&[('N', y / hb), ('H', hh), ('W', x % w), ('C', x / w)]))
            },
        );
    }
}

#[test]
fn in_out_width() {
    for &(n, h, w, c) in ACT_SHAPES {
        let wb = div4(w);
        check(
            "mace:in_out_width",
            &["NHWC", "NCHW"],
            &format!("N={n},H={h},W={w},C={c}"),
            (wb * c, n * h),
            &|x, y, k| {
                let ww = (x % wb) * 4 + k;
                (ww < w).then(|| m(&[('N', y / h), ('H', y % h), ('W', ww), ('C', x / wb)]))
            },
        );
    }
}

const FILTER_SHAPES: &[(usize, usize, usize, usize)] = &[
    (6, 3, 2, 2),
    (5, 7, 3, 3),
    (1, 1, 1, 1),
    (9, 6, 1, 3),
    (4, 8, 3, 1),
    (13, 5, 2, 5),
];

#[test]
fn conv2d_filter() {
    for &(o, i, kh, kw) in FILTER_SHAPES {
        let hw = kh * kw;
        check(
            "mace:conv2d_filter",
            &["OIHW", "HWOI", "HWIO", "OIHW16i16o"],
            &format!("O={o},I={i},H={kh},W={kw}"),
            (i, div4(o) * hw),
            &|x, y, k| {
                let (ob, t) = (y / hw, y % hw);
                let oo = ob * 4 + k;
                (oo < o).then(|| m(&[('O', oo), ('I', x), ('H', t / kw), ('W', t % kw)]))
            },
        );
    }
}

#[test]
fn conv2d_filter_v0_6_rounds_the_width_up_to_4() {
    for &(o, i, kh, kw) in FILTER_SHAPES {
        let hw = kh * kw;
        check(
            "mace:conv2d_filter:v0.6",
            &["HWOI", "OIHW"],
            &format!("O={o},I={i},H={kh},W={kw}"),
            (div4(i) * 4, div4(o) * hw),
            &|x, y, k| {
                let (ob, t) = (y / hw, y % hw);
                let oo = ob * 4 + k;
                (oo < o && x < i).then(|| m(&[('O', oo), ('I', x), ('H', t / kw), ('W', t % kw)]))
            },
        );
    }
}

#[test]
fn dw_conv2d_filter_including_multiplier_above_one() {
    for &(mm, i, kh, kw) in &[
        (1, 6, 3, 3),
        (1, 1, 1, 1),
        (1, 5, 2, 3),
        (2, 6, 3, 3),
        (3, 5, 1, 2),
    ] {
        let hw = kh * kw;
        check(
            "DW_CONV2D_FILTER",
            &["MIHW", "HWIM"],
            &format!("M={mm},I={i},H={kh},W={kw}"),
            (mm * hw, div4(i)),
            &|x, y, k| {
                let ii = 4 * y + k;
                let (mi, t) = (x / hw, x % hw);
                (ii < i).then(|| m(&[('M', mi), ('I', ii), ('H', t / kw), ('W', t % kw)]))
            },
        );
    }
}

#[test]
fn argument() {
    for l in [1, 3, 4, 6, 13] {
        check(
            "mace:argument",
            &["W"],
            &format!("W={l}"),
            (div4(l), 1),
            &|x, _y, k| {
                let w = 4 * x + k;
                (w < l).then(|| m(&[('W', w)]))
            },
        );
    }
}

#[test]
fn weight_height_and_width() {
    for &(o, i, kh, kw) in FILTER_SHAPES {
        let dims = format!("O={o},I={i},H={kh},W={kw}");
        check(
            "mace:weight_height",
            &["OIHW", "HWIO"],
            &dims,
            (i * kh * kw, div4(o)),
            &|x, y, k| {
                let oo = 4 * y + k;
                let (hw, ii) = (x / i, x % i);
                (oo < o).then(|| m(&[('O', oo), ('I', ii), ('H', hw / kw), ('W', hw % kw)]))
            },
        );
        let ib = div4(i);
        check(
            "WEIGHT_WIDTH",
            &["OIHW", "OHWI"],
            &dims,
            (ib * kh * kw, o),
            &|x, y, k| {
                let (hw, ii) = (x / ib, (x % ib) * 4 + k);
                (ii < i).then(|| m(&[('O', y), ('I', ii), ('H', hw / kw), ('W', hw % kw)]))
            },
        );
    }
}

#[test]
fn image_names_print_canonically_and_parse_back() {
    for (name, canonical) in [
        ("mace:in_out_channel", "NH|CW|4c"),
        ("IN_OUT_CHANNEL", "NH|CW|4c"),
        ("mace:IN_OUT_HEIGHT", "NH|CW|4h"),
        ("mace:conv2d_filter", "OHW|I|4o"),
        ("mace:conv2d_filter:v0.6", "OHW|I4i|4o"),
        ("mace:argument", "|W|4w"),
        ("mace:winograd_filter:4", "winograd4:TO|I|4i"),
        ("WINOGRAD_FILTER", "winograd2:TO|I|4i"),
        ("TOI||4i", "TOI||4i"),
        ("C||4c", "C||4c"),
    ] {
        let l = parse_format(name).unwrap();
        assert_eq!(l.to_string(), canonical, "{name}");
        assert_eq!(parse_format(canonical).unwrap(), l, "{canonical}");
    }
    assert!(parse_format("mace:in_out_depth").is_err());
    assert!(parse_format("NH|CW|8c").is_err());
    assert!(parse_format("NH|CW").is_err());
}

#[test]
fn winograd_filter_matches_g_g_gt_and_inverts() {
    // The spec's G matrices, written out again here.
    let g2: Vec<Vec<f64>> = vec![
        vec![1.0, 0.0, 0.0],
        vec![0.5, 0.5, 0.5],
        vec![0.5, -0.5, 0.5],
        vec![0.0, 0.0, 1.0],
    ];
    let s = 1.0 / 6.0;
    let g4: Vec<Vec<f64>> = vec![
        vec![0.25, 0.0, 0.0],
        vec![-s, -s, -s],
        vec![-s, s, -s],
        vec![1.0 / 24.0, 1.0 / 12.0, s],
        vec![1.0 / 24.0, -1.0 / 12.0, s],
        vec![0.0, 0.0, 1.0],
    ];
    for (block, gm) in [(2u8, g2), (4u8, g4)] {
        for &(o, i) in &[(5usize, 6usize), (1, 1), (4, 9), (3, 4)] {
            let t = gm.len();
            let dims = format!("O={o},I={i},H=3,W=3");
            let filter = shaped("OIHW", &dims);
            let vals: Vec<f32> = (0..o * i * 9)
                .map(|v| ((v * 37 % 101) as f32 - 50.0) / 8.0)
                .collect();
            let data: Vec<u8> = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
            let image = parse_format(&format!("mace:winograd_filter:{block}")).unwrap();
            let (img, out) = layoutkit_cpu::winograd_filter_to_image(
                &filter,
                &data,
                DType::F32,
                &image,
                DType::F32,
            )
            .unwrap();
            let (w, h) = img.image_size().unwrap();
            assert_eq!((w, h), (div4(i), t * t * o));
            for y in 0..h {
                for x in 0..w {
                    for k in 0..4 {
                        let off = (y * w + x) * 4 + k;
                        let got = f32::from_le_bytes(out[off * 4..off * 4 + 4].try_into().unwrap())
                            as f64;
                        let (tt, oc, ic) = (y / o, y % o, 4 * x + k);
                        if ic >= i {
                            assert_eq!(got, 0.0);
                            continue;
                        }
                        let (r, c) = (tt / t, tt % t);
                        let g = |kh: usize, kw: usize| vals[(oc * i + ic) * 9 + kh * 3 + kw] as f64;
                        let mut want = 0.0;
                        for a in 0..3 {
                            for b in 0..3 {
                                want += gm[r][a] * g(a, b) * gm[c][b];
                            }
                        }
                        assert!(
                            (got - want).abs() <= 1e-5 * (1.0 + want.abs()),
                            "b={block} ({x},{y},{k}): {got} vs {want}"
                        );
                    }
                }
            }
            // Back to the filter, to rounding.
            let back = layoutkit_cpu::winograd_image_to_filter(
                &img,
                &out,
                DType::F32,
                &filter,
                DType::F32,
            )
            .unwrap();
            for (k, v) in vals.iter().enumerate() {
                let b = f32::from_le_bytes(back[k * 4..k * 4 + 4].try_into().unwrap());
                assert!(
                    (b - v).abs() <= 1e-4 * (1.0 + v.abs()),
                    "b={block} element {k}: {b} vs {v}"
                );
            }
        }
    }
    // Only 3x3 filters.
    let filter = shaped("OIHW", "O=2,I=2,H=5,W=5");
    let image = parse_format("mace:winograd_filter:2").unwrap();
    assert!(layoutkit_cpu::winograd_filter_to_image(
        &filter,
        &[0u8; 200],
        DType::F32,
        &image,
        DType::F32
    )
    .is_err());
}
