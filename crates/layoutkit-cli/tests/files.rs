//! Files as a Unix tool writes them (the README's "Files" rules), checked on the binary:
//! regular files replaced atomically with the umask's or the old file's mode, links written
//! through, FIFOs, devices and standard output written in order, standard input read, write
//! failures reported with exit status 1, a crash before the rename leaving the old file, and
//! outputs larger than the process's data limit.

use std::io::{Read, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use layoutkit_core::{npy, DType};

const BIN: &str = env!("CARGO_BIN_EXE_layoutkit");
/// The conversion every test runs: NCHW -> NHWC.
const CONVERT: [&str; 4] = ["--from", "NCHW", "--to", "NHWC"];

mod cli_common;
use cli_common::layoutkit;

/// Runs the binary under `sh -c PRELUDE; exec layoutkit ARGS` (umask, ulimit, trap).
fn layoutkit_sh(prelude: &str, args: &[&str]) -> Output {
    Command::new("sh")
        .arg("-c")
        .arg(format!("{prelude}; exec \"$0\" \"$@\""))
        .arg(BIN)
        .args(args)
        .output()
        .expect("runs sh")
}

fn convert_args<'a>(input: &'a str, output: &'a str) -> Vec<&'a str> {
    let mut v = vec!["convert", input, output];
    v.extend(CONVERT);
    v
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A folder with `x.npy` (f32, N=2,C=3,H=4,W=5) and `expected.npy`, its NHWC conversion
/// written to a new regular file.
struct Setup {
    dir: tempfile::TempDir,
}

impl Setup {
    fn new() -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let data: Vec<u8> = (0..120u32).flat_map(|v| (v as f32).to_le_bytes()).collect();
        let x = dir.path().join("x.npy");
        std::fs::write(&x, npy::encode(DType::F32, &[2, 3, 4, 5], &data).unwrap()).unwrap();
        let setup = Setup { dir };
        let e = setup.path("expected.npy");
        assert_success(&layoutkit(&convert_args(s(&x), s(&e))));
        setup
    }
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
    fn x(&self) -> String {
        s(&self.path("x.npy")).to_string()
    }
    fn expected(&self) -> Vec<u8> {
        std::fs::read(self.path("expected.npy")).unwrap()
    }
    /// The `.layoutkit-*.tmp` files left in the folder.
    fn temporaries(&self, dir: &Path) -> Vec<PathBuf> {
        std::fs::read_dir(dir)
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().starts_with(".layoutkit-"))
            .map(|e| e.path())
            .collect()
    }
}

fn assert_success(out: &Output) {
    assert!(
        out.status.success(),
        "{:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Asserts exit status `code` and exactly one stderr line, `error: ...` containing `needle`.
fn assert_error(out: &Output, code: i32, needle: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(lines[0].starts_with("error: "), "{stderr}");
    assert!(lines[0].contains(needle), "{stderr} lacks {needle}");
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().mode() & 0o7777
}

#[test]
fn new_files_get_the_umask_mode() {
    let t = Setup::new();
    for (umask, want) in [("022", 0o644), ("077", 0o600), ("002", 0o664)] {
        let y = t.path(&format!("y{umask}.npy"));
        let out = layoutkit_sh(&format!("umask {umask}"), &convert_args(&t.x(), s(&y)));
        assert_success(&out);
        assert_eq!(mode(&y), want, "umask {umask}");
        assert_eq!(std::fs::read(&y).unwrap(), t.expected());
    }
}

#[test]
fn a_replaced_file_keeps_its_mode() {
    let t = Setup::new();
    for keep in [0o640, 0o444, 0o755] {
        let y = t.path("y.npy");
        std::fs::write(&y, b"old").unwrap();
        std::fs::set_permissions(&y, std::fs::Permissions::from_mode(keep)).unwrap();
        let out = layoutkit_sh("umask 077", &convert_args(&t.x(), s(&y)));
        assert_success(&out);
        assert_eq!(mode(&y), keep);
        assert_eq!(std::fs::read(&y).unwrap(), t.expected());
        std::fs::remove_file(&y).unwrap();
    }
    assert!(t.temporaries(t.dir.path()).is_empty());
}

#[test]
fn a_symlink_is_written_through_and_stays_a_link() {
    let t = Setup::new();
    let store = t.path("store");
    std::fs::create_dir(&store).unwrap();
    let target = store.join("model.npy");
    std::fs::write(&target, b"old").unwrap();
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o640)).unwrap();
    // link -> hop -> store/model.npy, both relative to their folders.
    let hop = t.path("hop.npy");
    std::os::unix::fs::symlink("store/model.npy", &hop).unwrap();
    let link = t.path("link.npy");
    std::os::unix::fs::symlink("hop.npy", &link).unwrap();
    assert_success(&layoutkit(&convert_args(&t.x(), s(&link))));
    for l in [&link, &hop] {
        assert!(std::fs::symlink_metadata(l)
            .unwrap()
            .file_type()
            .is_symlink());
    }
    assert_eq!(std::fs::read(&target).unwrap(), t.expected());
    assert_eq!(mode(&target), 0o640);
    assert!(t.temporaries(&store).is_empty() && t.temporaries(t.dir.path()).is_empty());

    // A dangling link creates its target.
    let dangling = t.path("dangling.npy");
    std::os::unix::fs::symlink("store/new.npy", &dangling).unwrap();
    assert_success(&layoutkit(&convert_args(&t.x(), s(&dangling))));
    assert!(std::fs::symlink_metadata(&dangling)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(std::fs::read(store.join("new.npy")).unwrap(), t.expected());
}

#[test]
fn a_fifo_is_written_in_order_and_stays_a_fifo() {
    let t = Setup::new();
    let fifo = t.path("pipe");
    let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(made.success());
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            std::fs::File::open(&fifo)
                .unwrap()
                .read_to_end(&mut bytes)
                .unwrap();
            bytes
        })
    };
    assert_success(&layoutkit(&convert_args(&t.x(), s(&fifo))));
    assert_eq!(reader.join().unwrap(), t.expected());
    assert!(std::fs::symlink_metadata(&fifo)
        .unwrap()
        .file_type()
        .is_fifo());
    assert!(t.temporaries(t.dir.path()).is_empty());
}

#[test]
fn character_devices_are_written_not_replaced() {
    let t = Setup::new();
    if !Path::new("/dev/full").exists() {
        eprintln!("SKIPPED: no /dev/full");
        return;
    }
    let out = layoutkit(&convert_args(&t.x(), "/dev/full"));
    assert_error(&out, 1, "cannot write /dev/full: No space left on device");
    assert!(out.stdout.is_empty());
    assert_success(&layoutkit(&convert_args(&t.x(), "/dev/null")));
    for dev in ["/dev/full", "/dev/null"] {
        let m = std::fs::symlink_metadata(dev).unwrap();
        assert!(
            m.file_type().is_char_device(),
            "{dev} is no longer a device"
        );
    }
    assert!(t.temporaries(Path::new("/dev")).is_empty());
}

#[test]
fn directories_and_block_devices_are_refused() {
    let t = Setup::new();
    let d = t.path("folder");
    std::fs::create_dir(&d).unwrap();
    assert_error(
        &layoutkit(&convert_args(&t.x(), s(&d))),
        2,
        "it is a directory",
    );
    assert!(d.is_dir());
    // A block device node of our own (loop0's numbers); creating one needs root.
    let blk = t.path("blk");
    let made = Command::new("mknod")
        .arg(&blk)
        .args(["b", "7", "0"])
        .stderr(Stdio::null())
        .status();
    if made.is_ok_and(|s| s.success()) {
        assert_error(
            &layoutkit(&convert_args(&t.x(), s(&blk))),
            2,
            "it is a block device",
        );
        let m = std::fs::symlink_metadata(&blk).unwrap();
        assert!(m.file_type().is_block_device());
    } else {
        eprintln!("SKIPPED the block device case: mknod needs root");
    }
    assert!(t.temporaries(t.dir.path()).is_empty());
}

#[test]
fn dash_reads_standard_input_and_writes_standard_output() {
    let t = Setup::new();
    let x = std::fs::read(t.x()).unwrap();
    let run = |args: &[&str], stdin: &[u8]| -> Output {
        let mut child = Command::new(BIN)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut input = child.stdin.take().unwrap();
        let stdin = stdin.to_vec();
        let feeder = std::thread::spawn(move || {
            // The process may refuse its input before reading it all.
            let _ = input.write_all(&stdin);
        });
        let out = child.wait_with_output().unwrap();
        feeder.join().unwrap();
        out
    };
    // - in, - out: stdout holds the .npy file alone, the summary goes to stderr.
    let out = run(&convert_args("-", "-"), &x);
    assert_success(&out);
    assert_eq!(out.stdout, t.expected());
    assert!(String::from_utf8_lossy(&out.stderr).contains("standard input NCHW"));
    // --json with stdout taken: the document goes to stderr.
    let xp = t.x();
    let mut args = convert_args(&xp, "-");
    args.push("--json");
    let out = run(&args, b"");
    assert_success(&out);
    assert_eq!(out.stdout, t.expected());
    let doc: serde_json::Value = serde_json::from_slice(&out.stderr).unwrap();
    assert_eq!(doc["output"], "-");
    // - in, a file out.
    let y = t.path("y.npy");
    assert_success(&run(&convert_args("-", s(&y)), &x));
    assert_eq!(std::fs::read(&y).unwrap(), t.expected());
    // Not a .npy, empty, truncated.
    assert_error(
        &run(&convert_args("-", s(&y)), b"a,b,c\n1,2,3\n"),
        2,
        "standard input is not a .npy file",
    );
    assert_error(
        &run(&convert_args("-", s(&y)), b""),
        2,
        "standard input is empty",
    );
    assert_error(
        &run(&convert_args("-", s(&y)), &x[..x.len() - 4]),
        2,
        "standard input: ",
    );
    // One standard input only.
    let w: Vec<u8> = (0..4).flat_map(|_| 1f32.to_le_bytes()).collect();
    let wp = t.path("w.npy");
    std::fs::write(
        &wp,
        npy::encode(DType::F32, &[1, 3, 1, 1], &w[..12]).unwrap(),
    )
    .unwrap();
    assert_error(
        &run(&["conv", "-", "-", s(&y), "--input-format", "NCHW"], &x),
        2,
        "standard input can be read once",
    );
    // conv writes standard output too.
    let out = run(&["conv", "-", s(&wp), "-", "--input-format", "NCHW"], &x);
    assert_success(&out);
    let y = npy::decode(&out.stdout).unwrap();
    assert_eq!(y.header.shape, vec![2, 1, 4, 5]);
}

#[test]
fn a_closed_pipe_is_a_write_error() {
    let t = Setup::new();
    // 1 MiB, more than a pipe holds: a copy of the read end that a child spawned at the same
    // time by another test holds until its exec cannot absorb the write.
    let x = t.path("big.npy");
    let data = vec![7u8; 1 << 20];
    std::fs::write(
        &x,
        npy::encode(DType::U8, &[1, 4, 512, 512], &data).unwrap(),
    )
    .unwrap();
    // The read end is closed before the process writes: its write gets EPIPE.
    let mut child = Command::new(BIN)
        .args(convert_args(s(&x), "-"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert_error(&out, 1, "cannot write standard output: Broken pipe");
}

#[test]
fn a_crash_before_the_rename_leaves_the_old_file() {
    let t = Setup::new();
    let y = t.path("y.npy");
    std::fs::write(&y, b"the old file").unwrap();
    let out = Command::new(BIN)
        .args(convert_args(&t.x(), s(&y)))
        .env("LAYOUTKIT_TEST_ABORT_BEFORE_RENAME", "1")
        .output()
        .unwrap();
    assert_eq!(out.status.signal(), Some(6), "{:?}", out.status); // SIGABRT
    assert_eq!(std::fs::read(&y).unwrap(), b"the old file");
    // What the crash left: the complete new file under its temporary name.
    let tmp = t.temporaries(t.dir.path());
    assert_eq!(tmp.len(), 1, "{tmp:?}");
    assert_eq!(std::fs::read(&tmp[0]).unwrap(), t.expected());
    // The next run replaces the old file.
    assert_success(&layoutkit(&convert_args(&t.x(), s(&y))));
    assert_eq!(std::fs::read(&y).unwrap(), t.expected());
}

#[test]
fn a_read_only_folder_is_an_error_and_leaves_the_old_file() {
    let t = Setup::new();
    let ro = t.path("ro");
    std::fs::create_dir(&ro).unwrap();
    let y = ro.join("y.npy");
    std::fs::write(&y, b"the old file").unwrap();
    std::fs::set_permissions(&y, std::fs::Permissions::from_mode(0o666)).unwrap();
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o555)).unwrap();
    // Root writes into read-only folders: under root the binary runs without the capabilities
    // that override permissions (setpriv), or else as nobody (who reaches the folder through
    // the test folder, opened to 0755).
    let root = std::fs::metadata("/proc/self").unwrap().uid() == 0;
    let setpriv = Command::new("setpriv")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    let mut cmd = if root && setpriv {
        let mut c = Command::new("setpriv");
        c.args(["--bounding-set=-dac_override,-dac_read_search", BIN]);
        c
    } else {
        Command::new(BIN)
    };
    cmd.args(convert_args(&t.x(), s(&y)));
    if root && !setpriv {
        std::fs::set_permissions(t.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(t.x(), std::fs::Permissions::from_mode(0o644)).unwrap();
        cmd.uid(65534).gid(65534);
    }
    let out = cmd.output().unwrap();
    assert_error(&out, 2, "cannot create a temporary file in");
    assert!(String::from_utf8_lossy(&out.stderr).contains("Permission denied"));
    assert_eq!(std::fs::read(&y).unwrap(), b"the old file");
    assert!(t.temporaries(&ro).is_empty());
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn an_output_that_cannot_be_sized_fails_before_any_work() {
    let t = Setup::new();
    let y = t.path("y.npy");
    std::fs::write(&y, b"the old file").unwrap();
    // A file-size limit of 512 bytes refuses the output's allocation (EFBIG, as ENOSPC
    // would on a full disk); SIGXFSZ is ignored so the error comes back as a status.
    let out = layoutkit_sh("trap '' XFSZ; ulimit -f 1", &convert_args(&t.x(), s(&y)));
    assert_error(&out, 1, "no room for 608 bytes");
    assert!(out.stdout.is_empty());
    assert_eq!(std::fs::read(&y).unwrap(), b"the old file");
    assert!(t.temporaries(t.dir.path()).is_empty());
}

/// The output (512 MiB) is larger than the process may allocate (a 128 MiB data limit, which
/// counts the heap and private writable maps but not shared file maps): the converter writes
/// into the map of the temporary file, never into a heap buffer of the tensor's size.
#[test]
fn an_output_larger_than_the_data_limit_converts() {
    let dir = tempfile::tempdir().unwrap();
    let (x, y) = (dir.path().join("x.npy"), dir.path().join("y.npy"));
    let (n, c, h, w) = (4usize, 8usize, 4096usize, 4096usize);
    let header = npy::header_bytes(DType::U8, &[n, c, h, w]);
    {
        // A sparse input: zeros but for a marker per channel.
        let mut f = std::fs::File::create(&x).unwrap();
        f.write_all(&header).unwrap();
        f.set_len((header.len() + n * c * h * w) as u64).unwrap();
        for ch in 0..c {
            use std::io::{Seek, SeekFrom};
            f.seek(SeekFrom::Start((header.len() + ch * h * w + 5) as u64))
                .unwrap();
            f.write_all(&[ch as u8 + 1]).unwrap();
        }
    }
    let dims = format!("N={n},C={c},H={h},W={w}");
    let args = |output: &'static str| -> Vec<String> {
        let output = if output.is_empty() { s(&y) } else { output };
        [
            s(&x),
            output,
            "--from",
            "NCHW",
            "--to",
            "NHWC",
            "--dims",
            &dims,
        ]
        .iter()
        .map(|a| a.to_string())
        .collect()
    };
    let run = |output: &'static str| {
        let a = args(output);
        let mut v = vec!["convert"];
        v.extend(a.iter().map(String::as_str));
        layoutkit_sh("ulimit -d 131072", &v)
    };
    // The limit bites: a stream is assembled in memory, and does not fit.
    assert_error(&run("/dev/null"), 1, "does not fit in memory");
    assert_success(&run(""));
    let mut file = std::fs::File::open(&y).unwrap();
    assert_eq!(
        file.metadata().unwrap().len() as usize,
        header.len() + n * c * h * w
    );
    let mut head = vec![0u8; 4096];
    file.read_exact(&mut head).unwrap();
    let got = npy::read_header(&head).unwrap();
    assert_eq!(got.shape, vec![n, h, w, c]);
    // Element (n=0, c, h=0, w=5) is at NHWC offset 5*C + c; everything else is zero.
    let data = &head[got.data_offset..];
    for ch in 0..c {
        assert_eq!(data[5 * c + ch], ch as u8 + 1);
    }
    let mut sum: usize = head.iter().skip(got.data_offset).map(|&b| b as usize).sum();
    let mut chunk = vec![0u8; 1 << 20];
    loop {
        let k = file.read(&mut chunk).unwrap();
        if k == 0 {
            break;
        }
        sum += chunk[..k].iter().map(|&b| b as usize).sum::<usize>();
    }
    assert_eq!(sum, 36);
}
