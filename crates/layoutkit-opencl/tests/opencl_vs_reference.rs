//! The OpenCL backend against the CPU reference converter: every MACE image type in f32 and
//! f16 images, buffers of both types, random buffer layout pairs; the device's image size limit;
//! reads outside an image. Skipped (with a message) when no OpenCL device exists, unless
//! LAYOUTKIT_REQUIRE_OPENCL=1 (CI sets it, since it installs PoCL).

use layoutkit_core::cast::Scalar;
use layoutkit_core::{parse_format, CastSpec, DType, Dims, ShapedLayout};
use layoutkit_cpu::convert_reference;
use layoutkit_opencl::{Error, OpenCl};
use layoutkit_testkit::{arb_pair, noise_bytes};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

/// PoCL 3.1 crashes when several threads create contexts and build programs at once, so the
/// tests take turns (each holds this lock for its whole body).
static DEVICE_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn lock() -> std::sync::MutexGuard<'static, ()> {
    DEVICE_LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn device() -> Option<OpenCl> {
    match OpenCl::new(None) {
        Ok(cl) => {
            eprintln!("OpenCL device: {} ({})", cl.info().name, cl.info().platform);
            Some(cl)
        }
        Err(e) => {
            if std::env::var("LAYOUTKIT_REQUIRE_OPENCL").as_deref() == Ok("1") {
                panic!("LAYOUTKIT_REQUIRE_OPENCL=1 but {e}");
            }
            eprintln!("skipped: {e}");
            None
        }
    }
}

fn shaped(name: &str, dims: &str) -> ShapedLayout {
    parse_format(name)
        .unwrap()
        .shaped(&Dims::parse(dims).unwrap())
        .unwrap()
}

/// Logical elements hold distinct values exactly representable in f16; padding holds zeros.
fn data(l: &ShapedLayout, t: DType) -> Vec<u8> {
    let mut out = vec![0u8; l.bytes(t).unwrap()];
    let s = t.size_bytes();
    for off in 0..l.elements() {
        if l.inverse(off).unwrap().is_some() {
            let v = ((off * 7919) % 2000) as f64 - 1000.0;
            Scalar::from_f64(t, v / 4.0).write(&mut out[off * s..]);
        }
    }
    out
}

fn reference(src: &ShapedLayout, d: &[u8], st: DType, dst: &ShapedLayout, dt: DType) -> Vec<u8> {
    let mut out = vec![0u8; dst.bytes(dt).unwrap()];
    convert_reference(src, d, dst, &mut out, &CastSpec::new(st, dt, None).unwrap()).unwrap();
    out
}

const CASES: &[(&str, &[&str], &[&str])] = &[
    (
        "mace:in_out_channel",
        &["NHWC", "NCHW"],
        &["N=2,H=5,W=3,C=6", "N=1,H=1,W=1,C=1", "N=3,H=4,W=7,C=9"],
    ),
    (
        "mace:in_out_height",
        &["NHWC", "NCHW"],
        &["N=2,H=5,W=3,C=6", "N=1,H=7,W=2,C=3"],
    ),
    (
        "mace:in_out_width",
        &["NHWC"],
        &["N=2,H=5,W=3,C=6", "N=2,H=2,W=9,C=5"],
    ),
    (
        "mace:conv2d_filter",
        &["OIHW", "HWOI"],
        &[
            "O=6,I=3,H=2,W=2",
            "O=5,I=7,H=3,W=3",
            "O=9,I=5,H=1,W=1",
            "O=3,I=2,H=3,W=1",
        ],
    ),
    ("mace:conv2d_filter:v0.6", &["HWOI"], &["O=5,I=7,H=3,W=3"]),
    (
        "mace:dw_conv2d_filter",
        &["MIHW"],
        &["M=1,I=6,H=3,W=3", "M=2,I=5,H=3,W=2"],
    ),
    ("mace:argument", &["W"], &["W=6", "W=1", "W=13"]),
    (
        "mace:weight_height",
        &["OIHW"],
        &["O=6,I=3,H=2,W=2", "O=5,I=7,H=3,W=3"],
    ),
    (
        "mace:weight_width",
        &["OIHW"],
        &["O=6,I=3,H=2,W=2", "O=5,I=7,H=3,W=3"],
    ),
];

#[test]
fn every_mace_image_type_matches_the_cpu_reference() {
    let _turn = lock();
    let Some(cl) = device() else { return };
    let mut checked = 0;
    for (image, buffers, shapes) in CASES {
        for dims in *shapes {
            let img = shaped(image, dims);
            for buffer in *buffers {
                let buf = shaped(buffer, dims);
                for (bt, it) in [
                    (DType::F32, DType::F32),
                    (DType::F16, DType::F16),
                    (DType::F32, DType::F16),
                    (DType::F16, DType::F32),
                ] {
                    let d = data(&buf, bt);
                    let want = reference(&buf, &d, bt, &img, it);
                    let got = cl.convert(&buf, &d, bt, &img, it).unwrap();
                    assert_eq!(got, want, "{buffer} {bt} -> {image} {it} {dims}");
                    // And back: image -> buffer returns the input exactly.
                    let back = cl.convert(&img, &got, it, &buf, bt).unwrap();
                    assert_eq!(
                        back,
                        reference(&img, &got, it, &buf, bt),
                        "{image} {it} -> {buffer} {bt} {dims}"
                    );
                    if bt == it {
                        assert_eq!(back, d, "round trip {buffer} {bt} via {image} {dims}");
                    }
                    checked += 1;
                }
            }
        }
    }
    eprintln!("checked {checked} image conversions on {}", cl.info().name);
}

#[test]
fn random_buffer_layouts_match_the_cpu_reference() {
    let _turn = lock();
    let Some(cl) = device() else { return };
    let mut runner = TestRunner::new(Config {
        cases: 24,
        ..Config::default()
    });
    runner
        .run(
            &(arb_pair(6), any::<u64>(), 0usize..4),
            |((a, b, dims), seed, t)| {
                let (st, dt) = [
                    (DType::F32, DType::F32),
                    (DType::F16, DType::F16),
                    (DType::U8, DType::U8),
                    (DType::F32, DType::F16),
                ][t];
                let src = a.shaped(&dims).unwrap();
                let dst = b.with_fill(1.5).shaped(&dims).unwrap();
                prop_assume!(src.elements() <= 20_000 && dst.elements() <= 20_000);
                let mut d = noise_bytes(src.bytes(st).unwrap(), seed);
                if st != dt {
                    // Casts compare values, so avoid NaN bit patterns.
                    d = data(&src, st);
                }
                let want = reference(&src, &d, st, &dst, dt);
                let got = cl.convert(&src, &d, st, &dst, dt).unwrap();
                prop_assert_eq!(got, want, "{} -> {} {}", src.layout(), dst.layout(), dims);
                Ok(())
            },
        )
        .unwrap();
}

#[test]
fn images_larger_than_the_device_allows_are_refused_up_front() {
    let _turn = lock();
    let Some(cl) = device() else { return };
    let (mw, mh) = cl.info().image2d_max;
    let wide = shaped("mace:argument", &format!("W={}", 4 * (mw + 1)));
    let buf = shaped("W", &format!("W={}", 4 * (mw + 1)));
    let d = vec![0u8; buf.bytes(DType::F32).unwrap()];
    match cl.convert(&buf, &d, DType::F32, &wide, DType::F32) {
        Err(e @ Error::ImageTooLarge { .. }) => {
            let text = e.to_string();
            assert!(text.contains(&format!("{}x1", mw + 1)), "{text}");
            assert!(text.contains(&format!("{mw}x{mh}")), "{text}");
        }
        other => panic!("expected ImageTooLarge, got {other:?}"),
    }
}

#[test]
fn reads_outside_an_image_give_zero() {
    let _turn = lock();
    let Some(cl) = device() else { return };
    let img = shaped("mace:in_out_channel", "N=1,H=2,W=3,C=4");
    let (w, h) = img.image_size().unwrap();
    let d = data(&img, DType::F32);
    let px = cl
        .read_pixels(
            &img,
            &d,
            DType::F32,
            &[(0, 0), (-1, 0), (w as i32, 0), (0, h as i32), (0, -1)],
        )
        .unwrap();
    let first: Vec<f32> = d[..16]
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(px[0].to_vec(), first);
    for p in &px[1..] {
        assert_eq!(*p, [0.0; 4]);
    }
}

#[test]
fn unsupported_casts_are_clear_errors() {
    let _turn = lock();
    let Some(cl) = device() else { return };
    let a = shaped("NCHW", "N=1,C=2,H=2,W=2");
    let b = shaped("NHWC", "N=1,C=2,H=2,W=2");
    let err = cl
        .convert(&a, &[0u8; 32], DType::F32, &b, DType::I8)
        .unwrap_err();
    assert!(err.to_string().contains("f32 and f16"), "{err}");
}
