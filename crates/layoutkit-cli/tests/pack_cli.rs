//! `layoutkit pack` / `unpack` on the command line: the help, the JSON report, the dry-run
//! table, round trips and one-line errors with no file left behind.

use std::path::Path;
use std::process::Command;

use layoutkit_model::safetensors::{header, HeaderEntry};
use layoutkit_model::ElementType;

mod cli_common;
use cli_common::layoutkit;

/// conv.weight [8, 3, 3, 3], dw.weight [8, 1, 3, 3], fc.weight [4, 8], fc.bias [4], f32.
fn model(path: &Path) {
    let tensors = [
        ("conv.weight", vec![8, 3, 3, 3]),
        ("dw.weight", vec![8, 1, 3, 3]),
        ("fc.weight", vec![4, 8]),
        ("fc.bias", vec![4]),
    ];
    let entries: Vec<HeaderEntry> = tensors
        .iter()
        .map(|(n, s)| HeaderEntry {
            name: n.to_string(),
            dtype: ElementType::F32,
            shape: s.clone(),
        })
        .collect();
    let (mut bytes, _) = header(&[], &entries);
    let n: usize = entries.iter().map(HeaderEntry::bytes).sum::<usize>() / 4;
    bytes.extend((0..n).flat_map(|i| (i as f32 * 0.25 - 3.0).to_le_bytes()));
    std::fs::write(path, bytes).unwrap();
}

fn left_behind(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".layoutkit-") || n.starts_with("out"))
        .collect()
}

#[test]
fn help_teaches_roles_profiles_and_rules() {
    let out = layoutkit(&["pack", "--help"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for needle in [
        "depthwise",
        "mace-gpu",
        "onednn-avx512",
        "tensorrt-int8",
        "--rule",
        "--dry-run",
        "Examples:",
    ] {
        assert!(text.contains(needle), "pack --help lacks {needle}");
    }
    assert!(layoutkit(&["unpack", "--help"]).status.success());
}

#[test]
fn pack_json_dry_run_and_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let m = dir.path().join("m.safetensors");
    model(&m);
    let m = m.to_str().unwrap();
    let out = layoutkit(&[
        "--json",
        "pack",
        m,
        "--target",
        "onednn-avx2",
        "--dry-run",
        "--rule",
        "dw.*=depthwise",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let t = &doc["shards"][0]["tensors"];
    let find = |n: &str| {
        t.as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == n)
            .unwrap()
            .clone()
    };
    assert_eq!(find("conv.weight")["target_layout"], "OIhw8i8o");
    assert_eq!(find("dw.weight")["target_layout"], "Goihw8g");
    assert_eq!(find("dw.weight")["source_layout"], "GOIHW");
    assert_eq!(find("fc.weight")["canonical"], "OI8i8o");
    assert_eq!(find("fc.bias")["role"], "bias");
    assert_eq!(doc["dry_run"], true);
    assert!(left_behind(dir.path()).is_empty());

    let table = layoutkit(&[
        "pack",
        m,
        "--target",
        "mace-gpu",
        "--dry-run",
        "--rule",
        "dw.*=depthwise",
    ]);
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(text.starts_with("tensor"), "{text}");
    assert!(
        text.contains("mace:dw_conv2d_filter") && text.contains("nothing written"),
        "{text}"
    );

    let packed = dir.path().join("p.safetensors");
    let back = dir.path().join("b.safetensors");
    let p = packed.to_str().unwrap();
    let b = back.to_str().unwrap();
    let out = layoutkit(&[
        "pack",
        m,
        "-o",
        p,
        "--target",
        "cudnn-nhwc",
        "--rule",
        "dw.*=depthwise",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = layoutkit(&["--json", "unpack", p, "-o", b]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["files"][0]["tensors"], 4);
    // No cast: the restored file holds the source tensors bit for bit.
    let src = layoutkit_model::Source::open(Path::new(m)).unwrap();
    let dst = layoutkit_model::Source::open(&back).unwrap();
    for t in &src.tensors {
        let r = dst.tensors.iter().find(|r| r.name == t.name).unwrap();
        assert_eq!(r.shape, t.shape);
        assert!(src.data(t) == dst.data(r), "{}", t.name);
    }
}

#[test]
fn bad_inputs_are_one_line_exit_2_and_leave_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let m = dir.path().join("m.safetensors");
    model(&m);
    let m = m.to_str().unwrap();
    let out_path = dir.path().join("out.safetensors");
    let o = out_path.to_str().unwrap();
    for (args, needle) in [
        (
            vec!["pack", m, "-o", o, "--target", "nope"],
            "unknown profile `nope`",
        ),
        (
            vec!["pack", m, "-o", o, "--target", "cudnn-nhwc"],
            "role is ambiguous",
        ),
        (
            vec!["pack", m, "-o", o, "--target", "cudnn-nhwc", "--rule", "dw"],
            "bad rule `dw`",
        ),
        (
            vec![
                "pack",
                m,
                "-o",
                o,
                "--target",
                "onednn-avx2",
                "--winograd",
                "2",
                "--rule",
                "dw.*=depthwise",
            ],
            "mace-gpu",
        ),
        (vec!["pack", m, "--target", "cudnn-nhwc"], "--output"),
        (vec!["unpack", m, "-o", o], "no layoutkit metadata"),
        (
            vec!["pack", "missing.onnx", "-o", o, "--target", "cudnn-nhwc"],
            "cannot read missing.onnx",
        ),
    ] {
        let out = layoutkit(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        let lines: Vec<&str> = stderr.lines().collect();
        assert_eq!(lines.len(), 1, "{args:?}: {stderr}");
        assert!(
            lines[0].starts_with("error: ") && lines[0].contains(needle),
            "{args:?}: {stderr}"
        );
        assert!(left_behind(dir.path()).is_empty(), "{args:?}");
    }
}

/// Pack writes through the same output routine as `convert`: a symbolic link is followed and
/// stays a link, a FIFO is written in place (not renamed over), a full device is exit status 1.
#[test]
fn pack_outputs_follow_links_fill_fifos_and_report_full_disks() {
    let dir = tempfile::tempdir().unwrap();
    let m = dir.path().join("m.safetensors");
    model(&m);
    let m = m.to_str().unwrap();
    let plain = dir.path().join("plain.safetensors");
    let run = |to: &str| {
        layoutkit(&[
            "pack",
            m,
            "-o",
            to,
            "--target",
            "onednn-avx2",
            "--rule",
            "dw.weight=depthwise",
        ])
    };
    let out = run(plain.to_str().unwrap());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let expected = std::fs::read(&plain).unwrap();

    let target = dir.path().join("target.safetensors");
    let link = dir.path().join("link.safetensors");
    std::os::unix::fs::symlink("target.safetensors", &link).unwrap();
    let out = run(link.to_str().unwrap());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(std::fs::read(&target).unwrap(), expected);

    let fifo = dir.path().join("fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read(fifo).unwrap())
    };
    let out = run(fifo.to_str().unwrap());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(reader.join().unwrap(), expected);
    use std::os::unix::fs::FileTypeExt;
    assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());

    let out = run("/dev/full");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("error: cannot write /dev/full"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

/// `-o -` writes the packed (or restored) file to standard output and the report to standard
/// error; a sharded checkpoint cannot go to standard output.
#[test]
fn pack_and_unpack_to_standard_output() {
    let dir = tempfile::tempdir().unwrap();
    let m = dir.path().join("m.safetensors");
    model(&m);
    let m = m.to_str().unwrap();
    let file = dir.path().join("p.safetensors");
    let args = ["--target", "cudnn-nhwc", "--rule", "dw.weight=depthwise"];
    let out = layoutkit(&[&["pack", m, "-o", file.to_str().unwrap()][..], &args].concat());
    assert!(out.status.success());
    let piped = layoutkit(&[&["pack", m, "-o", "-"][..], &args].concat());
    assert!(
        piped.status.success(),
        "{}",
        String::from_utf8_lossy(&piped.stderr)
    );
    assert_eq!(piped.stdout, std::fs::read(&file).unwrap());
    let err = String::from_utf8_lossy(&piped.stderr);
    assert!(err.contains("-> standard output: 4 tensors"), "{err}");
    let json = layoutkit(&[&["--json", "pack", m, "-o", "-"][..], &args].concat());
    assert_eq!(json.stdout, std::fs::read(&file).unwrap());
    assert!(String::from_utf8_lossy(&json.stderr).contains("\"profile\""));
    let restored = layoutkit(&["unpack", file.to_str().unwrap(), "-o", "-"]);
    assert!(restored.status.success());
    assert_eq!(restored.stdout, std::fs::read(m).unwrap());
    let index = dir.path().join("m.safetensors.index.json");
    std::fs::write(
        &index,
        r#"{"metadata": {}, "weight_map": {"conv.weight": "m.safetensors"}}"#,
    )
    .unwrap();
    let sharded = layoutkit(&[&["pack", index.to_str().unwrap(), "-o", "-"][..], &args].concat());
    assert_eq!(sharded.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&sharded.stderr).contains("folder"));
}
