//! `layoutkit pack` and `layoutkit unpack`: the `layoutkit-model` library with a table, a
//! progress bar on a terminal and a JSON report.

use std::io::IsTerminal;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::Result;
use layoutkit_core::DType;
use layoutkit_model::{
    pack_model, unpack_model, Engine, PackOptions, PackReport, Profile, Progress, Rule,
    UnpackOptions,
};

use super::list;
use crate::args::{PackArgs, PackEngine, UnpackArgs};

pub fn run(a: &PackArgs, json_out: bool) -> Result<()> {
    let profile: Profile = a.target.parse()?;
    let mut opts = PackOptions::new(profile);
    opts.dtype = a.dtype.as_deref().map(str::parse::<DType>).transpose()?;
    opts.winograd = a.winograd;
    opts.rules = a
        .rules
        .iter()
        .map(|r| Rule::parse(r))
        .collect::<Result<_, _>>()?;
    opts.threads = a.threads.unwrap_or(0);
    opts.engine = match a.engine {
        PackEngine::Fast => Engine::Fast,
        PackEngine::Reference => Engine::Reference,
    };
    opts.sync = !a.no_sync;
    opts.dry_run = a.dry_run;
    let bar = (!json_out && !a.dry_run && std::io::stderr().is_terminal()).then(ProgressBar::new);
    if let Some(bar) = &bar {
        let bar = Arc::clone(bar);
        opts.progress = Some(Arc::new(move |p| bar.show(p)));
    }
    let output = a.output.clone().unwrap_or_default();
    let report = pack_model(&a.model, &output, &opts);
    if let Some(bar) = &bar {
        bar.finish();
    }
    let report = report?;
    // With `-o -` the packed file is standard output: the report goes to standard error.
    let to_stdout = !a.dry_run && crate::files::is_stdio(&output);
    if json_out {
        let doc = report.to_json(a.dry_run);
        if to_stdout {
            crate::json::eprint(&doc);
        } else {
            crate::json::print(&doc);
        }
        return Ok(());
    }
    if a.dry_run {
        print_table(&report);
        return Ok(());
    }
    let say = |line: String| {
        if to_stdout {
            eprintln!("{line}");
        } else {
            outln!("{line}");
        }
    };
    for s in &report.shards {
        let out = s
            .output
            .as_ref()
            .map(|p| crate::files::output_name(p))
            .unwrap_or_default();
        say(format!(
            "{} -> {}: {} tensors, {} -> {} bytes",
            s.input.display(),
            out,
            s.tensors.len(),
            s.bytes_read,
            s.bytes_written
        ));
    }
    if let Some(index) = &report.index {
        say(format!("index {}", index.display()));
    }
    let read: u64 = report.shards.iter().map(|s| s.bytes_read).sum();
    say(format!(
        "packed for {} in {:.3} s ({:.0} MiB/s read)",
        report.profile,
        report.seconds,
        read as f64 / (1 << 20) as f64 / report.seconds.max(1e-9)
    ));
    Ok(())
}

fn print_table(r: &PackReport) {
    let header = [
        "tensor", "role", "source", "target", "dims", "dtype", "bytes",
    ];
    let mut rows: Vec<[String; 7]> = Vec::new();
    for s in &r.shards {
        for t in &s.tensors {
            let dtype = if t.src_dtype == t.dst_dtype {
                t.src_dtype.to_string()
            } else {
                format!("{}->{}", t.src_dtype, t.dst_dtype)
            };
            let dims = if t.dims == "-" {
                list(&t.src_shape)
            } else {
                t.dims.clone()
            };
            rows.push([
                t.name.clone(),
                t.role.clone(),
                t.source_layout.clone(),
                t.target_layout.clone(),
                dims,
                dtype,
                format!("{}->{}", t.src_bytes, t.dst_bytes),
            ]);
        }
    }
    let mut widths = header.map(str::len);
    for row in &rows {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.len());
        }
    }
    let line = |cells: &[String]| {
        let parts: Vec<String> = cells
            .iter()
            .zip(widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        parts.join("  ").trim_end().to_string()
    };
    outln!("{}", line(&header.map(String::from)));
    for row in &rows {
        outln!("{}", line(row));
    }
    let (src, dst): (usize, usize) = rows_total(r);
    outln!(
        "{} tensors, {} -> {} bytes ({}; dry run, nothing written)",
        rows.len(),
        src,
        dst,
        r.profile
    );
}

fn rows_total(r: &PackReport) -> (usize, usize) {
    r.shards
        .iter()
        .flat_map(|s| s.tensors.iter())
        .fold((0, 0), |(a, b), t| (a + t.src_bytes, b + t.dst_bytes))
}

/// A one-line progress bar on stderr, redrawn at most ten times a second.
struct ProgressBar {
    last: Mutex<Option<Instant>>,
}

impl ProgressBar {
    fn new() -> Arc<ProgressBar> {
        Arc::new(ProgressBar {
            last: Mutex::new(None),
        })
    }

    fn show(&self, p: Progress) {
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        let done = p.tensors_done == p.tensors_total;
        if !done && last.is_some_and(|t| t.elapsed().as_millis() < 100) {
            return;
        }
        *last = Some(Instant::now());
        let frac = if p.bytes_total == 0 {
            1.0
        } else {
            p.bytes_done as f64 / p.bytes_total as f64
        };
        let width = 30;
        let filled = ((frac * width as f64) as usize).min(width);
        eprint!(
            "\r[{}{}] {:3.0}%  {}/{} tensors  {}/{} MiB ",
            "#".repeat(filled),
            ".".repeat(width - filled),
            frac * 100.0,
            p.tensors_done,
            p.tensors_total,
            p.bytes_done >> 20,
            p.bytes_total >> 20
        );
    }

    fn finish(&self) {
        if self.last.lock().map(|l| l.is_some()).unwrap_or(false) {
            eprintln!();
        }
    }
}

pub fn run_unpack(a: &UnpackArgs, json_out: bool) -> Result<()> {
    let opts = UnpackOptions {
        threads: a.threads.unwrap_or(0),
        sync: !a.no_sync,
    };
    let report = unpack_model(&a.packed, &a.output, &opts)?;
    // With `-o -` the restored file is standard output: the report goes to standard error.
    let to_stdout = crate::files::is_stdio(&a.output);
    if json_out {
        if to_stdout {
            crate::json::eprint(&report.to_json());
        } else {
            crate::json::print(&report.to_json());
        }
        return Ok(());
    }
    for (i, o, n) in &report.files {
        let line = format!(
            "{} -> {}: {n} tensors restored",
            i.display(),
            crate::files::output_name(o)
        );
        if to_stdout {
            eprintln!("{line}");
        } else {
            outln!("{line}");
        }
    }
    if let Some(index) = &report.index {
        outln!("index {}", index.display());
    }
    Ok(())
}
