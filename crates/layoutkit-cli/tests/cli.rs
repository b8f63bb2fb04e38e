//! The command-line contract: outputs, `--json`, exit statuses, one-line errors, no partial
//! output files.

use std::path::Path;

use layoutkit_core::{npy, DType};

mod cli_common;
use cli_common::{assert_bad_input, json, layoutkit, save};

#[test]
fn describe_reports_the_contract_keys() {
    let d = json(&[
        "describe",
        "kHWC8",
        "--dims",
        "N=16,C=3,H=224,W=224",
        "--dtype",
        "f16",
        "--json",
    ]);
    assert_eq!(d["canonical"], "NHWC8c");
    assert_eq!(d["elements"], 6_422_528);
    assert_eq!(d["bytes"], 12_845_056);
    assert_eq!(d["dims"]["C"], 3);
    let d = json(&[
        "describe",
        "NC/32HW32",
        "--dims",
        "N=16,C=3,H=224,W=224",
        "--json",
    ]);
    assert_eq!(
        d["physical_shape"],
        serde_json::json!([16, 1, 224, 224, 32])
    );
    assert_eq!(
        d["strides"],
        serde_json::json!([1_605_632, 1_605_632, 7168, 32, 1])
    );
}

#[test]
fn locate_goes_both_ways() {
    let d = json(&[
        "locate",
        "NCHW8c",
        "--dims",
        "N=1,C=10,H=4,W=4",
        "--coord",
        "N=0,C=9,H=1,W=2",
        "--json",
    ]);
    // C=9 is block 1, lane 1: ((0*2+1)*4+1)*4+2 = 22 pixels of 8 lanes, + 1.
    assert_eq!(d["offset"], 22 * 8 + 1);
    assert_eq!(d["padding"], false);
    let back = json(&[
        "locate",
        "NCHW8c",
        "--dims",
        "N=1,C=10,H=4,W=4",
        "--offset",
        "177",
        "--json",
    ]);
    assert_eq!(back["coord"]["C"], 9);
    assert_eq!(back["coord"]["W"], 2);
    let pad = json(&[
        "locate",
        "NCHW8c",
        "--dims",
        "N=1,C=10,H=4,W=4",
        "--offset",
        "178",
        "--json",
    ]);
    assert_eq!(pad["padding"], true);
    assert!(pad["coord"].is_null());
}

#[test]
fn formats_lists_every_family() {
    let d = json(&["formats", "--json"]);
    let list = d["formats"].as_array().unwrap();
    for family in ["canonical", "cudnn", "tensorrt", "onednn", "pytorch"] {
        assert!(list.iter().any(|e| e["family"] == family), "{family}");
    }
    assert!(list
        .iter()
        .any(|e| e["name"] == "kHWC8" && e["canonical"] == "NHWC8c"));
}

#[test]
fn no_arguments_runs_the_tour() {
    let out = layoutkit(&[]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("NHWC8c") && text.contains("Self-check"),
        "{text}"
    );
}

#[test]
fn convert_infers_dims_and_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let (x, y, z) = (
        dir.path().join("x.npy"),
        dir.path().join("y.npy"),
        dir.path().join("z.npy"),
    );
    let data: Vec<u8> = (0..2 * 3 * 2 * 2).map(|v| v as u8).collect();
    save(&x, DType::U8, &[2, 3, 2, 2], &data);
    let d = json(&[
        "convert",
        x.to_str().unwrap(),
        y.to_str().unwrap(),
        "--from",
        "NCHW",
        "--to",
        "NC/4HW4",
        "--json",
    ]);
    assert_eq!(d["dst_shape"], serde_json::json!([2, 1, 2, 2, 4]));
    let out = layoutkit(&[
        "convert",
        y.to_str().unwrap(),
        z.to_str().unwrap(),
        "--from",
        "NC/4HW4",
        "--to",
        "NCHW",
        "--dims",
        "N=2,C=3,H=2,W=2",
    ]);
    assert!(out.status.success());
    assert_eq!(std::fs::read(&z).unwrap(), std::fs::read(&x).unwrap());
}

#[test]
fn convert_casts_with_scale_and_zero_point() {
    let dir = tempfile::tempdir().unwrap();
    let (x, y) = (dir.path().join("x.npy"), dir.path().join("y.npy"));
    let vals: [f32; 4] = [0.25, -1.0, 100.0, f32::NAN];
    let bytes: Vec<u8> = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
    save(&x, DType::F32, &[4], &bytes);
    let out = layoutkit(&[
        "convert",
        x.to_str().unwrap(),
        y.to_str().unwrap(),
        "--from",
        "W",
        "--to",
        "W",
        "--to-dtype",
        "i8",
        "--scale",
        "0.5",
        "--zero-point",
        "-3",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let file = std::fs::read(&y).unwrap();
    let a = npy::decode(&file).unwrap();
    assert_eq!(a.header.dtype, DType::I8);
    // 0.5 -> 0 (half to even) - 3; -2 - 3; 200 - 3 saturates; NaN -> zero point.
    assert_eq!(&*a.data, &[(-3i8) as u8, (-5i8) as u8, 127, (-3i8) as u8]);
}

#[test]
fn bad_input_is_one_error_line_and_no_output() {
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n).to_str().unwrap().to_string();
    save(
        Path::new(&p("x.npy")),
        DType::F32,
        &[1, 3, 2, 2],
        &[0u8; 48],
    );
    let full = std::fs::read(p("x.npy")).unwrap();
    std::fs::write(p("trunc.npy"), &full[..full.len() - 5]).unwrap();
    std::fs::write(p("junk.npy"), b"not a numpy file at all").unwrap();
    let mut corrupt = full.clone();
    corrupt[20] = b'#';
    std::fs::write(p("corrupt.npy"), &corrupt).unwrap();
    let out = p("out.npy");
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec!["--from", "NCHX", "--to", "NHWC"]
                .into_iter()
                .map(String::from)
                .collect(),
            "NCHX",
        ),
        (
            vec!["--from", "NCHW", "--to", "bogus!"]
                .into_iter()
                .map(String::from)
                .collect(),
            "bogus!",
        ),
        (
            vec!["--from", "NCHW", "--to", "OIHW"]
                .into_iter()
                .map(String::from)
                .collect(),
            "OIHW",
        ),
        (
            vec!["--from", "NCHW", "--to", "NHWC", "--dims", "N=1,C=3,H=2"]
                .into_iter()
                .map(String::from)
                .collect(),
            "axis W",
        ),
        (
            vec![
                "--from",
                "NCHW",
                "--to",
                "NHWC",
                "--dims",
                "N=1,C=4,H=2,W=2",
            ]
            .into_iter()
            .map(String::from)
            .collect(),
            "shape",
        ),
        (
            vec![
                "--from",
                "NCHW",
                "--to",
                "NHWC",
                "--dims",
                "N=99999999999,C=99999999999,H=99999999999,W=2",
            ]
            .into_iter()
            .map(String::from)
            .collect(),
            "overflow",
        ),
        (
            vec!["--from", "NCHW", "--to", "NHWC", "--to-dtype", "f17"]
                .into_iter()
                .map(String::from)
                .collect(),
            "f17",
        ),
        (
            vec!["--from", "NCHW", "--to", "NHWC", "--scale", "2"]
                .into_iter()
                .map(String::from)
                .collect(),
            "scale",
        ),
        (
            vec!["--from", "NCHW", "--to", "NHWC", "--device", "cuda"]
                .into_iter()
                .map(String::from)
                .collect(),
            "cuda",
        ),
    ];
    for (extra, needle) in cases {
        let mut args = vec!["convert".to_string(), p("x.npy"), out.clone()];
        args.extend(extra);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        assert_bad_input(&args, needle);
        assert!(!Path::new(&out).exists());
    }
    for (file, needle) in [
        ("trunc.npy", "truncated"),
        ("junk.npy", "not a .npy"),
        ("corrupt.npy", "header"),
        ("missing.npy", "cannot read"),
    ] {
        assert_bad_input(
            &["convert", &p(file), &out, "--from", "NCHW", "--to", "NHWC"],
            needle,
        );
        assert!(!Path::new(&out).exists());
    }
    // No temporary files left behind either.
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with(".layoutkit-"))
        .collect();
    assert!(leftovers.is_empty());
    assert_bad_input(&["describe", "NCHW"], "--dims");
    assert_bad_input(&["describe", "NCHW", "--dims", "N=1,C=2"], "axis H");
    assert_bad_input(
        &[
            "locate",
            "NCHW",
            "--dims",
            "N=1,C=1,H=1,W=1",
            "--offset",
            "1",
        ],
        "outside",
    );
    assert_bad_input(&["frobnicate"], "frobnicate");
}

fn example(name: &str) -> String {
    format!("{}/../../examples/ir/{name}", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn features_rows_json_and_flat_outputs() {
    let rows = json(&["features", &example("seed_gemm.ir"), "--json"]);
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 3);
    assert_eq!(rows[0]["itervar"], "x");
    assert_eq!(
        rows[0]["attr"],
        serde_json::json!([128, 1, 128, 2097152, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0])
    );
    assert_eq!(rows[2]["arith"], serde_json::json!([1, 1, 0]));
    assert_eq!(
        rows[0]["touch"][2],
        serde_json::json!(["C_0", [128, -1, 16384, 1, 0, 0]])
    );

    let logged = json(&["features", &example("seed_gemm.ir"), "--json", "--take-log"]);
    assert_eq!(logged[0]["attr"][0], 7.011227255423254);
    assert_eq!(logged[0]["attr"][1], 1);

    let flat = json(&[
        "features",
        &example("cpu_schedule.ir"),
        "--flatten",
        "--take-log",
        "--json",
    ]);
    assert_eq!(flat.as_array().unwrap().len(), 210);
    let both = json(&[
        "features",
        &example("cpu_schedule.ir"),
        "--flatten",
        "--names",
        "--json",
    ]);
    assert_eq!(both["names"][0], "f0.y_outer._attr_.length");
    assert_eq!(both["flatten"][0], 8.0);
    let curve = json(&[
        "features",
        &example("seed_gemm.ir"),
        "--curve",
        "--sample-n",
        "5",
        "--json",
    ]);
    assert_eq!(curve.as_array().unwrap().len(), 120);
}

#[test]
fn features_errors_are_line_col_and_status_2() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.ir");
    std::fs::write(&bad, "for (x, 0, 8) {\n  C[x] = A[x\n}\n").unwrap();
    assert_bad_input(&["features", bad.to_str().unwrap()], "2:13: expected `]`");
    let threads = dir.path().join("t.ir");
    std::fs::write(
        &threads,
        "// attr [iter_var(tx, range(min=0, ext=4), tx)] thread_extent = 4\nC[tx] = 1f\n",
    )
    .unwrap();
    assert_bad_input(
        &["features", threads.to_str().unwrap()],
        "1:49: invalid thread itervar `tx`",
    );
    assert_bad_input(&["features", "/nonexistent.ir"], "cannot read");
    assert_bad_input(
        &["features", &example("seed_gemm.ir"), "--dtype", "A=float12"],
        "float12",
    );
}

#[test]
fn gpu_devices_convert_or_say_why_not() {
    let dir = tempfile::tempdir().unwrap();
    let (x, y) = (dir.path().join("x.npy"), dir.path().join("y.npy"));
    let data: Vec<u8> = (0..2 * 3 * 4 * 5).map(|v| v as u8).collect();
    save(&x, DType::U8, &[2, 3, 4, 5], &data);
    for device in ["cuda", "opencl"] {
        let out = layoutkit(&[
            "convert",
            x.to_str().unwrap(),
            y.to_str().unwrap(),
            "--from",
            "NCHW",
            "--to",
            "NHWC",
            "--device",
            device,
        ]);
        if out.status.success() {
            // A real device: the result equals the CPU's.
            let cpu = dir.path().join("cpu.npy");
            let o = layoutkit(&[
                "convert",
                x.to_str().unwrap(),
                cpu.to_str().unwrap(),
                "--from",
                "NCHW",
                "--to",
                "NHWC",
            ]);
            assert!(o.status.success());
            assert_eq!(
                std::fs::read(&y).unwrap(),
                std::fs::read(&cpu).unwrap(),
                "{device}"
            );
        } else {
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{device}: {err}");
            assert!(
                err.starts_with("error: no ") && err.lines().count() == 1,
                "{device}: {err}"
            );
        }
    }
}

/// `bench --sweep --list` prints the rows a filter keeps and times nothing; a one-row sweep
/// with `--json` has its row, the size class summary and the per-call overhead (the figures
/// themselves are not checked: they depend on the machine).
#[test]
fn bench_sweep_lists_filters_and_reports_json() {
    let out = layoutkit(&[
        "bench",
        "--sweep",
        "--list",
        "--sweep-filter",
        "NCHW->NHWC f16 C=3,",
    ]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert!(!lines.is_empty());
    assert!(lines
        .iter()
        .all(|l| l.starts_with("NCHW->NHWC ") && (l.contains(" f16 ") || l.contains(">f16 "))));
    assert!(lines.iter().all(|l| l.contains("C=3,")));
    let v = json(&[
        "bench",
        "--sweep",
        "--json",
        "--repeats",
        "1",
        "--sweep-filter",
        "NCHW->NHWC f32>f16 N=2,C=3,H=64,W=64",
    ]);
    let rows = v["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["size_class"], "<1MiB");
    assert!(rows[0]["ratio_to_copy"].as_f64().unwrap() > 0.0);
    assert_eq!(v["classes"][0]["size_class"], "<1MiB");
    assert!(v["call_overhead_s"].as_f64().unwrap() > 0.0);
    assert_bad_input(&["bench", "--sweep", "--from", "NCHW"], "");
}
