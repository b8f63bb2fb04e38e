//! Helpers of the command-line tests: run the binary, parse its JSON, check a bad-input
//! failure, write an `.npy`.

#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output};

use layoutkit_core::{npy, DType};

pub fn layoutkit(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_layoutkit"))
        .args(args)
        .output()
        .expect("runs")
}

pub fn json(args: &[&str]) -> serde_json::Value {
    let out = layoutkit(args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("stdout is one JSON document")
}

/// Asserts a bad-input failure: status 2, one `error:` line on stderr, nothing on stdout.
pub fn assert_bad_input(args: &[&str], needle: &str) {
    let out = layoutkit(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert!(out.stdout.is_empty(), "{args:?}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{args:?}: {stderr}");
    assert!(lines[0].starts_with("error: "), "{stderr}");
    assert!(
        lines[0].contains(needle),
        "{args:?}: {stderr} lacks {needle}"
    );
}

pub fn save(path: &Path, dtype: DType, shape: &[usize], data: &[u8]) {
    std::fs::write(path, npy::encode(dtype, shape, data).unwrap()).unwrap();
}
