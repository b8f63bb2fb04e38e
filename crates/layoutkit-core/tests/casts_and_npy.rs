//! Cast semantics and `.npy` round trips.

use half::{bf16, f16};
use layoutkit_core::cast::{f64_to_bf16_bits, f64_to_f16_bits, Scalar};
use layoutkit_core::{npy, CastSpec, DType, Quantization};
use layoutkit_testkit::noise_bytes;
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn f64_rounding_agrees_with_f32_rounding_on_f32_values(bits in any::<u32>()) {
        let x = f32::from_bits(bits);
        let want16 = f16::from_f32(x).to_bits();
        let want_b = bf16::from_f32(x).to_bits();
        prop_assert_eq!(f64_to_f16_bits(x as f64), want16, "{:e}", x);
        prop_assert_eq!(f64_to_bf16_bits(x as f64), want_b, "{:e}", x);
    }

    #[test]
    fn f64_to_f16_is_nearest(
        x in prop_oneof![-65504.0f64..65504.0, -1e-3f64..1e-3, -1e-7f64..1e-7]
    ) {
        let h = f16::from_bits(f64_to_f16_bits(x)).to_f64();
        // No f16 is closer than the chosen one (check both neighbours).
        let hb = f64_to_f16_bits(x);
        for nb in [hb.wrapping_add(1), hb.wrapping_sub(1)] {
            let n = f16::from_bits(nb).to_f64();
            if n.is_finite() {
                prop_assert!((n - x).abs() >= (h - x).abs(), "{x:e}: {h:e} vs {n:e}");
            }
        }
    }

    #[test]
    fn quantize_rounds_half_to_even_and_saturates(x in -300.0f32..300.0, scale in 0.01f32..4.0, zp in -20i32..20) {
        let spec = CastSpec::new(DType::F32, DType::I8, Some(Quantization { scale, zero_point: zp })).unwrap();
        let q = match spec.apply(Scalar::F32(x)) { Scalar::I8(v) => v as i64, other => panic!("{other:?}") };
        let want = ((x / scale).round_ties_even() as i64 + zp as i64).clamp(-128, 127);
        prop_assert_eq!(q, want);
    }

    #[test]
    fn npy_round_trip(shape in prop::collection::vec(0usize..5, 0..5), t in 0usize..7) {
        let dtype = DType::ALL[t];
        let n: usize = shape.iter().product();
        let data = noise_bytes(n * dtype.size_bytes(), 7);
        let file = npy::encode(dtype, &shape, &data).unwrap();
        prop_assert_eq!(file.len() % 64, (data.len()) % 64);
        let back = npy::decode(&file).unwrap();
        prop_assert_eq!(back.header.dtype, dtype);
        prop_assert_eq!(&back.header.shape, &shape);
        prop_assert_eq!(&*back.data, &data[..]);
        // Every truncation is an error, never a panic.
        for cut in [0, 5, 9, file.len().saturating_sub(1)] {
            if cut < file.len() { prop_assert!(npy::decode(&file[..cut]).is_err()); }
        }
    }

    #[test]
    fn npy_decode_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        let mut file = b"\x93NUMPY\x01\x00".to_vec();
        file.extend_from_slice(&bytes);
        let _ = npy::decode(&file);
        let _ = npy::decode(&bytes);
    }
}

#[test]
fn casts_refuse_what_is_undefined() {
    let q = Some(Quantization {
        scale: 0.5,
        zero_point: 0,
    });
    assert!(CastSpec::new(DType::F32, DType::F16, q).is_err());
    assert!(CastSpec::new(DType::I8, DType::U8, q).is_err());
    let zp = Some(Quantization {
        scale: 1.0,
        zero_point: 300,
    });
    assert!(CastSpec::new(DType::F32, DType::I8, zp).is_err());
    let bad_scale = Some(Quantization {
        scale: 0.0,
        zero_point: 0,
    });
    assert!(CastSpec::new(DType::F32, DType::U8, bad_scale).is_err());
}

#[test]
fn cast_examples() {
    let q = Quantization {
        scale: 0.1,
        zero_point: 128,
    };
    let to_u8 = CastSpec::new(DType::F32, DType::U8, Some(q)).unwrap();
    assert_eq!(to_u8.apply(Scalar::F32(f32::NAN)), Scalar::U8(128));
    assert_eq!(to_u8.apply(Scalar::F32(-1e30)), Scalar::U8(0));
    assert_eq!(to_u8.apply(Scalar::F32(0.25)), Scalar::U8(130)); // 2.5 -> 2
    let back = CastSpec::new(DType::U8, DType::F32, Some(q)).unwrap();
    assert_eq!(back.apply(Scalar::U8(130)), Scalar::F32(2.0 * 0.1));
    let sat = CastSpec::new(DType::I32, DType::I8, None).unwrap();
    assert_eq!(sat.apply(Scalar::I32(-1000)), Scalar::I8(-128));
    // f32 -> f16 ties to even: 1 + 2^-11 is halfway between 1 and 1 + 2^-10.
    let h = CastSpec::new(DType::F32, DType::F16, None).unwrap();
    assert_eq!(
        h.apply(Scalar::F32(1.0 + 2f32.powi(-11))),
        Scalar::F16(f16::from_f32(1.0))
    );
    assert_eq!(
        Scalar::from_f64(DType::F16, 65520.0),
        Scalar::F16(f16::INFINITY)
    );
    assert_eq!(Scalar::from_f64(DType::I8, 2.5), Scalar::I8(2));
}

#[test]
fn npy_rejects_what_it_does_not_read() {
    let make = |dict: &str| {
        let mut f = b"\x93NUMPY\x01\x00".to_vec();
        let mut h = dict.to_string();
        while !(10 + h.len() + 1).is_multiple_of(64) {
            h.push(' ');
        }
        h.push('\n');
        f.extend_from_slice(&(h.len() as u16).to_le_bytes());
        f.extend_from_slice(h.as_bytes());
        f
    };
    let fortran = make("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }");
    let mut with_data = fortran.clone();
    with_data.extend_from_slice(&[0u8; 24]);
    assert!(npy::decode(&with_data)
        .unwrap_err()
        .to_string()
        .contains("Fortran"));
    let object = make("{'descr': '|O', 'fortran_order': False, 'shape': (2,), }");
    assert!(npy::decode(&object)
        .unwrap_err()
        .to_string()
        .contains("object"));
    let int64 = make("{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }");
    assert!(npy::decode(&int64).unwrap_err().to_string().contains("<i8"));
    let record = make("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }");
    assert!(npy::decode(&record)
        .unwrap_err()
        .to_string()
        .contains("structured"));
    // Big-endian data is swapped to native order.
    let mut be = make("{'descr': '>i4', 'fortran_order': False, 'shape': (1,), }");
    be.extend_from_slice(&[0, 0, 1, 2]);
    assert_eq!(&*npy::decode(&be).unwrap().data, &[2, 1, 0, 0]);
    // Trailing bytes are reported.
    let mut long = make("{'descr': '|u1', 'fortran_order': False, 'shape': (1,), }");
    long.extend_from_slice(&[1, 2]);
    assert!(npy::decode(&long)
        .unwrap_err()
        .to_string()
        .contains("trailing"));
}
