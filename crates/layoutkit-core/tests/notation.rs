//! Every name of layout-notation.md section 2 parses to its canonical form, and bad names fail
//! with a reason.

use layoutkit_core::{parse_format, Error};

fn canonical(name: &str) -> String {
    parse_format(name)
        .unwrap_or_else(|e| panic!("{name}: {e}"))
        .to_string()
}

#[test]
fn canonical_names_print_themselves() {
    for name in [
        "NCHW",
        "NHWC",
        "NCHW4c",
        "NCHW32c",
        "NHWC8c",
        "OIHW",
        "HWOI",
        "HWIO",
        "MIHW",
        "HWIM",
        "OIHW16i16o",
        "OIHW4i16o4i",
        "NCDHW",
        "NDHWC",
        "W",
        "GOIHW",
    ] {
        assert_eq!(canonical(name), name);
    }
}

#[test]
fn cudnn_names() {
    assert_eq!(canonical("NC/32HW32"), "NCHW32c");
    assert_eq!(canonical("NC/4HW4"), "NCHW4c");
    assert_eq!(canonical("NC/8HW8"), "NCHW8c");
    assert_eq!(canonical("NC/1HW1"), "NCHW");
    assert_eq!(canonical("NC/16DHW16"), "NCDHW16c");
    assert_eq!(canonical("NCHW_VECT_C:int8x4"), "NCHW4c");
    assert_eq!(canonical("NCHW_VECT_C:int8x32"), "NCHW32c");
    assert_eq!(canonical("NCHW_VECT_C:32"), "NCHW32c");
    assert!(parse_format("NCHW_VECT_C").is_err());
    assert!(parse_format("NCHW_VECT_C:int8x8").is_err());
    assert!(parse_format("NC/32HW16").is_err());
    assert!(parse_format("NC/0HW0").is_err());
}

#[test]
fn tensorrt_names() {
    for (name, want) in [
        ("kLINEAR", "NCHW"),
        ("kCHW2", "NCHW2c"),
        ("kHWC8", "NHWC8c"),
        ("kCHW4", "NCHW4c"),
        ("kCHW16", "NCHW16c"),
        ("kCHW32", "NCHW32c"),
        ("kDHWC8", "NDHWC8c"),
        ("kCDHW32", "NCDHW32c"),
        ("kHWC", "NHWC"),
        ("kHWC16", "NHWC16c"),
        ("kDHWC", "NDHWC"),
        ("TensorFormat::kHWC8", "NHWC8c"),
    ] {
        assert_eq!(canonical(name), want, "{name}");
    }
}

#[test]
fn onednn_tags() {
    for (name, want) in [
        ("nchw", "NCHW"),
        ("nhwc", "NHWC"),
        ("nChw8c", "NCHW8c"),
        ("nChw16c", "NCHW16c"),
        ("OIhw16i16o", "OIHW16i16o"),
        ("OIhw4i16o4i", "OIHW4i16o4i"),
        ("Ohwi16o", "OHWI16o"),
        ("goihw", "GOIHW"),
        ("ncdhw", "NCDHW"),
        ("x", "X"),
    ] {
        assert_eq!(canonical(name), want, "{name}");
    }
}

#[test]
fn pytorch_names() {
    assert_eq!(canonical("contiguous"), "NCHW");
    assert_eq!(canonical("channels_last"), "NHWC");
    assert_eq!(canonical("torch.channels_last"), "NHWC");
    assert_eq!(canonical("channels_last_3d"), "NDHWC");
}

#[test]
fn two_names_of_one_layout_print_the_same() {
    let groups: &[&[&str]] = &[
        &[
            "NCHW32c",
            "NC/32HW32",
            "kCHW32",
            "nChw32c",
            "NCHW_VECT_C:int8x32",
        ],
        &["NHWC", "kHWC", "channels_last", "nhwc", "NHWC1c"],
        &["NCHW", "contiguous", "kLINEAR", "nchw", "NC/1HW1"],
        &["OIHW16i16o", "OIhw16i16o"],
    ];
    for group in groups {
        let first = canonical(group[0]);
        for name in *group {
            assert_eq!(canonical(name), first, "{name}");
        }
    }
}

#[test]
fn bad_names_say_why() {
    let cases = [
        ("", "empty"),
        ("NCHW16C", "lower-case"),
        ("NCHW8", "no letter"),
        ("NCHC", "twice"),
        ("NCHW8x", "has no axis X"),
        ("kDHWC1w1o", "has no axis O"),
        ("NCHW0c", "zero"),
        ("NC-HW", "unexpected"),
        ("ABCDEFGHI", "at most 8"),
        ("NCHW99999999999999999999999c", "too large"),
        ("NCHW4294967296c4294967296c4294967296c", "overflow"),
    ];
    for (name, needle) in cases {
        let err = parse_format(name).expect_err(name).to_string();
        assert!(err.contains(needle), "{name}: {err}");
    }
}

#[test]
fn mace_names_parse_to_image_layouts() {
    for (name, canonical) in [
        ("mace:in_out_channel", "NH|CW|4c"),
        ("IN_OUT_CHANNEL", "NH|CW|4c"),
        ("mace:winograd_filter:2", "winograd2:TO|I|4i"),
        ("mace:dw_conv2d_filter", "I|MHW|4i"),
    ] {
        assert_eq!(canonical_of(name), canonical);
    }
    assert!(matches!(
        parse_format("mace:in_out_depth"),
        Err(Error::Format { .. })
    ));
}

fn canonical_of(name: &str) -> String {
    canonical(name)
}
