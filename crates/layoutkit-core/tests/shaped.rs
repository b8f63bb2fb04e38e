//! Shapes, strides, sizes and the forward/inverse maps on known examples (the seeds' own
//! formulas), plus checked arithmetic.

use layoutkit_core::{parse_format, DType, Dims, Error, ShapedLayout};

fn shaped(format: &str, dims: &str) -> ShapedLayout {
    parse_format(format)
        .unwrap()
        .shaped(&Dims::parse(dims).unwrap())
        .unwrap()
}

#[test]
fn khwc8_matches_the_tensorrt_example() {
    // TensorRT: [16,3,224,224] f16 in kHWC8 needs 16*8*224*224*sizeof(half) bytes.
    let s = shaped("kHWC8", "N=16,C=3,H=224,W=224");
    assert_eq!(s.elements(), 6_422_528);
    assert_eq!(s.bytes(DType::F16).unwrap(), 12_845_056);
    assert_eq!(s.physical_shape(), vec![16, 224, 224, 1, 8]);
    assert_eq!(s.strides(), vec![401_408, 1792, 8, 8, 1]);
    assert!(s.has_padding());
}

#[test]
fn nc32hw32_physical_shape() {
    let s = shaped("NC/32HW32", "N=16,C=3,H=224,W=224");
    assert_eq!(s.physical_shape(), vec![16, 1, 224, 224, 32]);
}

#[test]
fn chw32_forward_matches_the_seed_formula() {
    // Seed 003: dst = idx/voc*voc + (idx%area)*32 + (idx/area)%32, voc = 32*area, for NCHW idx.
    let (c, h, w) = (64usize, 3usize, 5usize);
    let s = shaped("NC/32HW32", &format!("N=2,C={c},H={h},W={w}"));
    let area = h * w;
    let voc = 32 * area;
    for n in 0..2 {
        for ci in 0..c {
            for hi in 0..h {
                for wi in 0..w {
                    let idx = ((n * c + ci) * h + hi) * w + wi;
                    let want = idx / voc * voc + (idx % area) * 32 + (idx / area) % 32;
                    assert_eq!(s.forward(&[n, ci, hi, wi]).unwrap(), want);
                }
            }
        }
    }
}

#[test]
fn hwc8_plane_matches_the_seed_formula() {
    // Seed 003, C = 256: dst = idx/voc*voc + (idx%voc/area)*256 + idx%voc%area... written for
    // NHWC with C=256 (a multiple of 8, so kHWC8 == NHWC).
    let (c, h, w) = (256usize, 2usize, 3usize);
    let s = shaped("kHWC8", &format!("N=2,C={c},H={h},W={w}"));
    let area = h * w;
    let voc = c * area;
    for idx in 0..2 * voc {
        let (n, ci, hw) = (idx / voc, idx % voc / area, idx % voc % area);
        // The seed's `C * col_idx + row_idx` is the NHWC offset inside one image.
        let want = n * voc + hw * c + ci;
        assert_eq!(s.forward(&[n, hw / w, hw % w, ci]).unwrap(), want);
    }
}

#[test]
fn double_blocking_decomposes_outer_to_inner() {
    // OIHW4i16o4i: i = (i_outer*4 + i_mid)*4 + i_inner.
    let s = shaped("OIHW4i16o4i", "O=16,I=32,H=1,W=1");
    assert_eq!(s.physical_shape(), vec![1, 2, 1, 1, 4, 16, 4]);
    let (i_outer, i_mid, i_inner) = (1, 2, 3);
    let i = (i_outer * 4 + i_mid) * 4 + i_inner;
    let o = 5;
    let off = s.forward(&[o, i, 0, 0]).unwrap();
    assert_eq!(s.physical_index(off).unwrap(), vec![0, 1, 0, 0, 2, 5, 3]);
}

#[test]
fn inverse_reports_padding() {
    let s = shaped("NCHW8c", "N=1,C=3,H=1,W=1");
    assert_eq!(s.elements(), 8);
    let valid = (0..8).filter(|&o| s.inverse(o).unwrap().is_some()).count();
    assert_eq!(valid, 3);
    assert!(matches!(s.inverse(8), Err(Error::OffsetOutOfRange { .. })));
    assert!(matches!(
        s.forward(&[0, 3, 0, 0]),
        Err(Error::CoordOutOfRange { .. })
    ));
}

#[test]
fn sizes_that_overflow_are_errors() {
    let huge = usize::MAX / 2;
    let l = parse_format("NCHW").unwrap();
    let err = l
        .shaped(&Dims::parse(&format!("N={huge},C=4,H=1,W=1")).unwrap())
        .unwrap_err();
    assert!(matches!(err, Error::Overflow { .. }), "{err}");
    let l = parse_format("NCHW16c").unwrap();
    let err = l
        .shaped(&Dims::parse(&format!("N=1,C={},H=1,W=1", usize::MAX - 1)).unwrap())
        .unwrap_err();
    assert!(matches!(err, Error::Overflow { .. }), "{err}");
    // Fits in elements, not in bytes.
    let s = shaped("W", &format!("W={}", isize::MAX as usize / 2));
    assert!(s.bytes(DType::F32).is_err());
    assert!(s.bytes(DType::U8).is_ok());
}

#[test]
fn dims_must_name_exactly_the_layout_axes() {
    let l = parse_format("NCHW").unwrap();
    let missing = l.shaped(&Dims::parse("N=1,C=2,H=3").unwrap()).unwrap_err();
    assert!(
        missing.to_string().contains("axis W has no extent"),
        "{missing}"
    );
    let extra = l
        .shaped(&Dims::parse("N=1,C=2,H=3,W=4,D=5").unwrap())
        .unwrap_err();
    assert!(
        extra.to_string().contains("axis D is not in the format"),
        "{extra}"
    );
    assert!(Dims::parse("N=1,N=2").is_err());
    assert!(Dims::parse("N=x").is_err());
    assert!(Dims::parse("NC=1").is_err());
    assert!(Dims::parse("N=-1").is_err());
}

#[test]
fn infer_dims_from_an_unpadded_array() {
    let l = parse_format("NCHW8c").unwrap();
    let d = ShapedLayout::infer_dims(&l, &[2, 3, 4, 5, 8]).unwrap();
    assert_eq!(d.to_string(), "N=2,C=24,H=4,W=5");
    assert!(ShapedLayout::infer_dims(&l, &[2, 3, 4, 5, 4]).is_err());
    assert!(ShapedLayout::infer_dims(&l, &[2, 3, 4, 5]).is_err());
}
