//! The command-line contract of `layoutkit conv` and `conv bench`: results against the
//! reference, bad problems, layers given on the command line.

use std::path::Path;

use layoutkit_core::{npy, DType};

mod cli_common;
use cli_common::{assert_bad_input, json, save};

#[test]
fn conv_writes_the_reference_result_and_rejects_bad_problems() {
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n).to_str().unwrap().to_string();
    // x = 1..9 as 1x1x3x3, w = ones 1x1x2x2: y = [12, 16, 24, 28] (see the reference's tests).
    let x: Vec<u8> = (1..=9).flat_map(|v| (v as f32).to_le_bytes()).collect();
    let w: Vec<u8> = (0..4).flat_map(|_| 1f32.to_le_bytes()).collect();
    save(Path::new(&p("x.npy")), DType::F32, &[1, 1, 3, 3], &x);
    save(Path::new(&p("w.npy")), DType::F32, &[1, 1, 2, 2], &w);
    let doc = json(&[
        "conv",
        &p("x.npy"),
        &p("w.npy"),
        &p("y.npy"),
        "--output-format",
        "NHWC",
        "--json",
    ]);
    assert_eq!(doc["output_dims"]["H"], 2);
    assert_eq!(doc["macs"], 16);
    let y_file = std::fs::read(p("y.npy")).unwrap();
    let y = npy::decode(&y_file).unwrap();
    assert_eq!(y.header.shape, vec![1, 2, 2, 1]);
    let got: Vec<f32> = y
        .data
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    assert_eq!(got, vec![12.0, 16.0, 24.0, 28.0]);
    let base = [p("x.npy"), p("w.npy"), p("bad.npy")];
    let w_path = p("w.npy");
    let with = |extra: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = vec!["conv".into()];
        v.extend(base.iter().cloned());
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    for (args, needle) in [
        (with(&["--groups", "2"]), "multiples of groups"),
        (with(&["--stride", "0"]), "at least 1"),
        (with(&["--stride", "2,x"]), "not a count"),
        (with(&["--dilation", "3"]), "more than the padded input"),
        (with(&["--input-format", "NCHW8c"]), "pass its dims"),
        (with(&["--bias", &w_path]), "one value per output channel"),
    ] {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        assert_bad_input(&a, needle);
        assert!(!Path::new(&p("bad.npy")).exists());
    }
}

#[test]
fn conv_bench_rejects_types_and_layouts_it_cannot_run() {
    // Checked before any device is opened, so these hold with or without a GPU.
    assert_bad_input(
        &["conv", "bench", "--types", "i8", "--filter", "3x3"],
        "--types is for --device cuda",
    );
    assert_bad_input(
        &["conv", "bench", "--device", "cuda", "--types", "f64"],
        "--types takes f16, bf16, i8 and i8q",
    );
    assert_bad_input(
        &["conv", "bench", "--device", "cuda", "--layouts", "NCHW8c"],
        "reads NHWC, NCHW or NC/32HW32",
    );
}

/// `conv bench --layer` times layers of the caller's own shapes in place of a network's: the
/// list names them after their shapes, a CPU run times each in the layouts asked for, and a
/// bad spec says what is wrong.
#[test]
fn conv_bench_times_layers_given_on_the_command_line() {
    let list = json(&[
        "conv",
        "bench",
        "--list",
        "--json",
        "--layer",
        "C=24,HW=9,O=40,K=3",
        "--layer",
        "C=16,HW=8,O=16,K=3,S=2,G=16",
    ]);
    let layers = list["layers"].as_array().unwrap();
    assert_eq!(layers.len(), 2);
    assert_eq!(layers[0]["name"], "custom 3x3 24->40 @9");
    assert_eq!(
        (layers[1]["stride"].as_u64(), layers[1]["groups"].as_u64()),
        (Some(2), Some(16))
    );
    let run = json(&[
        "conv",
        "bench",
        "--json",
        "--layer",
        "C=24,HW=9,O=40,K=3",
        "--batch",
        "1",
        "--repeats",
        "1",
        "--threads",
        "1",
        "--layouts",
        "NCHW,NHWC",
    ]);
    let rows = run["results"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{run}");
    for r in rows {
        assert_eq!(r["layer"], "custom 3x3 24->40 @9");
        assert!(r["median_s"].as_f64().unwrap() > 0.0, "{r}");
    }
    assert_bad_input(
        &["conv", "bench", "--layer", "C=24,HW=9,O=40"],
        "K is missing",
    );
}
