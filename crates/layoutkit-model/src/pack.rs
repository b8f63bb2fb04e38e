//! Packing: plans every tensor of a model file, then writes the packed safetensors file(s).

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use layoutkit_core::DType;

use crate::exec::{self, Engine};
use crate::plan::{plan_tensor, TensorPlan};
use crate::roles::{assign, Role};
use crate::safetensors::{header, storage_order, HeaderEntry};
use crate::sharded::Index;
use crate::source::Source;
use crate::{meta, ElementType, Error, Profile, Result, Rule};
use layoutkit_files::Output;

/// Where a pack stands, passed to [`PackOptions::progress`] after each tensor.
#[derive(Clone, Copy, Debug)]
pub struct Progress {
    pub tensors_done: usize,
    pub tensors_total: usize,
    /// Source bytes of the tensors done.
    pub bytes_done: u64,
    pub bytes_total: u64,
}

/// A progress callback (called from worker threads).
pub type ProgressFn = Arc<dyn Fn(Progress) + Send + Sync>;

/// How to pack.
#[derive(Clone)]
pub struct PackOptions {
    pub profile: Profile,
    /// Element type of the packed filters and weights (`None`: the profile's default, else the
    /// source's). A float type casts every float tensor; `i8` quantises filters and dense
    /// weights per output channel (symmetric) and leaves other tensors in their type.
    pub dtype: Option<DType>,
    /// Winograd block (2 or 4) for eligible 3x3 convolutions (`mace-gpu` only).
    pub winograd: Option<u8>,
    /// Per-tensor overrides; the first match applies.
    pub rules: Vec<Rule>,
    /// Threads (0: all cores).
    pub threads: usize,
    /// The converter (the reference one only for checking: it is slow).
    pub engine: Engine,
    /// Sync each output to disk before renaming it into place.
    pub sync: bool,
    /// Plan and report only; write nothing.
    pub dry_run: bool,
    pub progress: Option<ProgressFn>,
}

impl PackOptions {
    /// Defaults for `profile`: source element types, no Winograd, no rules, all cores, the fast
    /// engine, synced outputs.
    pub fn new(profile: Profile) -> PackOptions {
        PackOptions {
            profile,
            dtype: None,
            winograd: None,
            rules: Vec::new(),
            threads: 0,
            engine: Engine::Fast,
            sync: true,
            dry_run: false,
            progress: None,
        }
    }

    pub(crate) fn thread_count(&self) -> usize {
        match self.threads {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            n => n,
        }
    }

    fn check(&self) -> Result<()> {
        if let Some(b) = self.winograd {
            if b != 2 && b != 4 {
                return Err(Error::Options(format!(
                    "--winograd {b}: the block is 2 or 4"
                )));
            }
            if self.profile != Profile::MaceGpu {
                return Err(Error::Options(format!(
                    "--winograd applies to the mace-gpu profile, not {}",
                    self.profile
                )));
            }
        }
        if let Some(t) = self.dtype {
            if !matches!(t, DType::F32 | DType::F16 | DType::BF16 | DType::I8) {
                return Err(Error::Options(format!(
                    "--dtype {t}: expected f32, f16, bf16 or i8"
                )));
            }
        }
        Ok(())
    }
}

/// One tensor of a pack, as the dry-run table and the JSON report show it.
#[derive(Clone, Debug)]
pub struct TensorRow {
    pub name: String,
    pub role: String,
    /// Where the role came from: the graph's nodes, the shape, or a rule.
    pub origin: String,
    pub source_layout: String,
    /// As named by the profile or rule (`mace:conv2d_filter`).
    pub target_layout: String,
    /// Canonical form of the target (`OHW|I|4o`).
    pub canonical: String,
    /// Logical dims the target layout sees (`-` for kept tensors: see the shapes).
    pub dims: String,
    pub src_dtype: ElementType,
    pub dst_dtype: ElementType,
    pub src_shape: Vec<usize>,
    pub dst_shape: Vec<usize>,
    pub src_bytes: usize,
    pub dst_bytes: usize,
    /// The per-channel scale tensor of a quantised tensor.
    pub scale: Option<String>,
}

impl TensorRow {
    fn of(p: &TensorPlan) -> TensorRow {
        let (source_layout, target_layout, canonical) = if p.assignment.role == Role::Keep {
            // Kept tensors are read as one run of values: no layout to show.
            ("-".into(), "-".into(), "-".into())
        } else {
            p.layouts()
        };
        let dims = if p.assignment.role == Role::Keep {
            "-".into()
        } else {
            p.dims()
        };
        TensorRow {
            name: p.name.clone(),
            role: p.assignment.role.to_string(),
            origin: p.assignment.origin.clone(),
            source_layout,
            target_layout,
            canonical,
            dims,
            src_dtype: p.src_dtype,
            dst_dtype: p.dst_dtype,
            src_shape: p.src_shape.clone(),
            dst_shape: p.dst_shape.clone(),
            src_bytes: p.src_bytes(),
            dst_bytes: p.dst_bytes(),
            scale: p.scale_name(),
        }
    }
}

/// The result of packing one file.
#[derive(Clone, Debug)]
pub struct ShardReport {
    pub input: PathBuf,
    /// `None` on a dry run.
    pub output: Option<PathBuf>,
    pub tensors: Vec<TensorRow>,
    /// Bytes of the tensors read.
    pub bytes_read: u64,
    /// Bytes of the output file (header included; 0 on a dry run).
    pub bytes_written: u64,
}

/// The result of a pack.
#[derive(Clone, Debug)]
pub struct PackReport {
    pub model: PathBuf,
    pub profile: Profile,
    pub shards: Vec<ShardReport>,
    /// The index written for a sharded checkpoint.
    pub index: Option<PathBuf>,
    pub seconds: f64,
}

/// Plans every tensor of `source` (roles, layouts, types).
pub fn plan_source(source: &Source, opts: &PackOptions) -> Result<Vec<TensorPlan>> {
    opts.check()?;
    source
        .tensors
        .iter()
        .map(|t| {
            let a = assign(
                &source.path,
                &t.name,
                &t.shape,
                t.dtype,
                source.graph_roles.as_ref(),
                &opts.rules,
            )?;
            plan_tensor(&source.path, t, a, opts)
        })
        .collect()
}

/// Shared progress counters.
struct Counter {
    done: AtomicUsize,
    bytes: AtomicU64,
    total: usize,
    total_bytes: u64,
    callback: Option<ProgressFn>,
}

impl Counter {
    fn advance(&self, bytes: usize) {
        let done = self.done.fetch_add(1, Ordering::Relaxed) + 1;
        let b = self.bytes.fetch_add(bytes as u64, Ordering::Relaxed) + bytes as u64;
        if let Some(cb) = &self.callback {
            cb(Progress {
                tensors_done: done,
                tensors_total: self.total,
                bytes_done: b,
                bytes_total: self.total_bytes,
            });
        }
    }
}

/// Packs one source into `output` with `threads` threads.
fn pack_source(
    source: &Source,
    output: Option<&Path>,
    opts: &PackOptions,
    threads: usize,
    counter: &Counter,
) -> Result<ShardReport> {
    let plans = plan_source(source, opts)?;
    let rows: Vec<TensorRow> = plans.iter().map(TensorRow::of).collect();
    let bytes_read = plans.iter().map(|p| p.src_bytes() as u64).sum();
    let Some(output) = output else {
        return Ok(ShardReport {
            input: source.path.clone(),
            output: None,
            tensors: rows,
            bytes_read,
            bytes_written: 0,
        });
    };
    // Entries: each tensor, then its scales; entry k of plan i is at index `slots[i]`.
    let mut entries = Vec::new();
    let mut slots = Vec::with_capacity(plans.len());
    let mut names = HashSet::new();
    for p in &plans {
        slots.push(entries.len());
        entries.push(HeaderEntry {
            name: p.name.clone(),
            dtype: p.dst_dtype,
            shape: p.dst_shape.clone(),
        });
        names.insert(p.name.clone());
        if let Some(s) = p.scale_name() {
            entries.push(HeaderEntry {
                name: s,
                dtype: ElementType::F32,
                shape: vec![p.channels()],
            });
        }
    }
    for p in &plans {
        if let Some(s) = p.scale_name() {
            if names.contains(&s) {
                return Err(Error::Tensor {
                    path: source.path.clone(),
                    tensor: p.name.clone(),
                    reason: format!(
                        "its scale tensor would be named `{s}`, which the model already has"
                    ),
                });
            }
        }
    }
    let order = storage_order(&entries);
    let ordered: Vec<HeaderEntry> = order.iter().map(|&i| entries[i].clone()).collect();
    let mut metadata: Vec<(String, String)> = source
        .metadata
        .iter()
        .filter(|(k, _)| k != meta::KEY)
        .cloned()
        .collect();
    metadata.push((
        meta::KEY.to_string(),
        meta::document(opts.profile.name(), &plans),
    ));
    let (head, ordered_offsets) = header(&metadata, &ordered);
    let mut offsets = vec![0usize; entries.len()];
    for (k, &i) in order.iter().enumerate() {
        offsets[i] = ordered_offsets[k];
    }
    let total = head.len() + entries.iter().map(HeaderEntry::bytes).sum::<usize>();
    let mut file = Output::create(output, total)?;
    let out = file.writer();
    out.write_at(0, &head)?;
    let jobs: Vec<usize> = (0..plans.len()).collect();
    crate::jobs::run(
        &jobs,
        |&i| plans[i].src_bytes().max(plans[i].dst_bytes()),
        threads,
        |&i, t, scratch| {
            let p = &plans[i];
            let tensor = &source.tensors[i];
            let data = source.data(tensor);
            let buf = scratch.out.get(p.dst_bytes());
            let cerr = |e| Error::Convert {
                path: source.path.clone(),
                tensor: p.name.clone(),
                source: Box::new(e),
            };
            let scales = match (p.src_dtype.core(), p.dst_dtype.core()) {
                (Some(s), Some(d)) => {
                    exec::pack(&p.op, opts.engine, t, s, d, data, buf, &mut scratch.tmp)
                        .map_err(cerr)?
                }
                _ => {
                    buf.copy_from_slice(data);
                    None
                }
            };
            out.write_at(offsets[slots[i]], buf)?;
            if let Some(scales) = scales {
                let bytes: Vec<u8> = scales.iter().flat_map(|s| s.to_le_bytes()).collect();
                out.write_at(offsets[slots[i] + 1], &bytes)?;
            }
            source.release(tensor);
            counter.advance(p.src_bytes());
            Ok(())
        },
    )?;
    drop(out);
    file.commit_with(opts.sync)?;
    Ok(ShardReport {
        input: source.path.clone(),
        output: Some(output.to_path_buf()),
        tensors: rows,
        bytes_read,
        bytes_written: total as u64,
    })
}

fn counter_for(sources: &[Source], opts: &PackOptions) -> Counter {
    Counter {
        done: AtomicUsize::new(0),
        bytes: AtomicU64::new(0),
        total: sources.iter().map(|s| s.tensors.len()).sum(),
        total_bytes: sources
            .iter()
            .flat_map(|s| s.tensors.iter())
            .map(|t| t.bytes() as u64)
            .sum(),
        callback: opts.progress.clone(),
    }
}

/// Packs one model file (`.onnx` or `.safetensors`, or one shard of a checkpoint) into the
/// safetensors file `output`. The unit of work a distributed engine runs per task.
///
/// ```no_run
/// use layoutkit_model::{pack_shard, PackOptions, Profile};
/// let opts = PackOptions::new(Profile::OnednnAvx512);
/// let report = pack_shard("model-00001-of-00004.safetensors".as_ref(), "out/model-00001-of-00004.safetensors".as_ref(), &opts)?;
/// println!("{} tensors", report.tensors.len());
/// # Ok::<(), layoutkit_model::Error>(())
/// ```
pub fn pack_shard(input: &Path, output: &Path, opts: &PackOptions) -> Result<ShardReport> {
    let source = Source::open(input)?;
    let counter = counter_for(std::slice::from_ref(&source), opts);
    let out = (!opts.dry_run).then_some(output);
    pack_source(&source, out, opts, opts.thread_count(), &counter)
}

/// Whether `path` names a sharded checkpoint's index (`*.safetensors.index.json`, or any
/// `*.index.json`).
pub fn is_index(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.ends_with(".index.json"))
}

/// Packs a model: an ONNX file or a `.safetensors` file into the file `output`, or a sharded
/// checkpoint (its `*.safetensors.index.json`) into the folder `output` (one output shard per
/// input shard, under the same names, and an index of the same name). Shards run side by side
/// on the machine's cores.
///
/// ```no_run
/// use layoutkit_model::{pack_model, PackOptions, Profile};
/// let mut opts = PackOptions::new(Profile::MaceGpu);
/// opts.dtype = Some(layoutkit_core::DType::F16);
/// opts.winograd = Some(2);
/// let report = pack_model("mobilenet.onnx".as_ref(), "mobilenet.mace.safetensors".as_ref(), &opts)?;
/// # Ok::<(), layoutkit_model::Error>(())
/// ```
pub fn pack_model(model: &Path, output: &Path, opts: &PackOptions) -> Result<PackReport> {
    let start = Instant::now();
    opts.check()?;
    let threads = opts.thread_count();
    if !is_index(model) {
        let source = Source::open(model)?;
        let counter = counter_for(std::slice::from_ref(&source), opts);
        let out = (!opts.dry_run).then_some(output);
        let shard = pack_source(&source, out, opts, threads, &counter)?;
        return Ok(PackReport {
            model: model.to_path_buf(),
            profile: opts.profile,
            shards: vec![shard],
            index: None,
            seconds: start.elapsed().as_secs_f64(),
        });
    }
    if output.as_os_str() == "-" && !opts.dry_run {
        return Err(Error::Options(
            "a sharded checkpoint packs into a folder (one file per shard and an index); \
             `-` (standard output) cannot hold it"
                .into(),
        ));
    }
    let index = Index::read(model)?;
    let sources = index
        .shards
        .iter()
        .map(|s| Source::open(&index.dir.join(s)))
        .collect::<Result<Vec<Source>>>()?;
    index.check(&sources)?;
    // Plan everything first, so a bad tensor in the last shard fails before anything is written.
    for s in &sources {
        plan_source(s, opts)?;
    }
    let counter = counter_for(&sources, opts);
    if !opts.dry_run {
        std::fs::create_dir_all(output).map_err(|source| Error::Write {
            path: output.to_path_buf(),
            source,
        })?;
    }
    let workers = threads.min(sources.len()).max(1);
    let per = (threads / workers).max(1);
    let next = AtomicUsize::new(0);
    let results: Vec<std::sync::Mutex<Option<Result<ShardReport>>>> = sources
        .iter()
        .map(|_| std::sync::Mutex::new(None))
        .collect();
    let work = || loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        let Some(s) = sources.get(i) else { break };
        let out = output.join(&index.shards[i]);
        let r = pack_source(
            s,
            (!opts.dry_run).then_some(out.as_path()),
            opts,
            per,
            &counter,
        );
        let failed = r.is_err();
        *results[i].lock().unwrap_or_else(|p| p.into_inner()) = Some(r);
        if failed {
            next.store(sources.len(), Ordering::Relaxed);
        }
    };
    std::thread::scope(|scope| {
        for _ in 1..workers {
            let _ = std::thread::Builder::new().spawn_scoped(scope, work);
        }
        work();
    });
    let mut shards = Vec::new();
    let mut first_error = None;
    for r in results {
        match r.into_inner().unwrap_or_else(|p| p.into_inner()) {
            Some(Ok(s)) => shards.push(s),
            Some(Err(e)) => {
                first_error.get_or_insert(e);
            }
            None => {}
        }
    }
    if let Some(e) = first_error {
        // Shards already written are removed: a failed pack leaves no partial checkpoint.
        for s in &shards {
            if let Some(o) = &s.output {
                let _ = std::fs::remove_file(o);
            }
        }
        return Err(e);
    }
    let index_path = if opts.dry_run {
        None
    } else {
        Some(index.write_packed(output, opts.sync)?)
    };
    Ok(PackReport {
        model: model.to_path_buf(),
        profile: opts.profile,
        shards,
        index: index_path,
        seconds: start.elapsed().as_secs_f64(),
    })
}

impl TensorRow {
    /// The row as JSON (the `tensors` entries of `layoutkit --json pack` and of the Python
    /// package's reports).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "name": self.name,
            "role": self.role,
            "origin": self.origin,
            "source_layout": self.source_layout,
            "target_layout": self.target_layout,
            "canonical": self.canonical,
            "dims": self.dims,
            "src_dtype": self.src_dtype.name(),
            "dst_dtype": self.dst_dtype.name(),
            "src_shape": self.src_shape,
            "dst_shape": self.dst_shape,
            "src_bytes": self.src_bytes,
            "dst_bytes": self.dst_bytes,
            "scale": self.scale,
        })
    }
}

impl ShardReport {
    /// The shard as JSON: `input`, `output` (null on a dry run), `bytes_read`,
    /// `bytes_written`, `tensors` (see [`TensorRow::to_json`]).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "input": self.input.display().to_string(),
            "output": self.output.as_ref().map(|p| p.display().to_string()),
            "bytes_read": self.bytes_read,
            "bytes_written": self.bytes_written,
            "tensors": self.tensors.iter().map(TensorRow::to_json).collect::<Vec<_>>(),
        })
    }
}

impl PackReport {
    /// The report as JSON (what `layoutkit --json pack` prints): `model`, `profile`,
    /// `dry_run`, `seconds`, `index` (null unless a sharded checkpoint), `shards`.
    pub fn to_json(&self, dry_run: bool) -> serde_json::Value {
        serde_json::json!({
            "model": self.model.display().to_string(),
            "profile": self.profile.name(),
            "dry_run": dry_run,
            "seconds": self.seconds,
            "index": self.index.as_ref().map(|p| p.display().to_string()),
            "shards": self.shards.iter().map(ShardReport::to_json).collect::<Vec<_>>(),
        })
    }
}
