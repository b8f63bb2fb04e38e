//! Unpacking: a packed file back to the source tensors (names, shapes, element types and
//! layouts of the model the pack read).

use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::exec;
use crate::meta;
use crate::pack::is_index;
use crate::plan::Op;
use crate::safetensors::{header, storage_order, HeaderEntry};
use crate::sharded::Index;
use crate::source::Source;
use crate::{Error, Result};
use layoutkit_files::Output;

/// How to unpack.
#[derive(Clone, Debug)]
pub struct UnpackOptions {
    /// Threads (0: all cores).
    pub threads: usize,
    /// Sync each output to disk before renaming it into place.
    pub sync: bool,
}

impl Default for UnpackOptions {
    fn default() -> Self {
        UnpackOptions {
            threads: 0,
            sync: true,
        }
    }
}

/// The result of an unpack.
#[derive(Clone, Debug)]
pub struct UnpackReport {
    /// `(packed file, restored file, tensors)` per shard.
    pub files: Vec<(PathBuf, PathBuf, usize)>,
    pub index: Option<PathBuf>,
    pub seconds: f64,
}

impl UnpackReport {
    /// The report as JSON (what `layoutkit --json unpack` prints): `files` (`input`,
    /// `output`, `tensors` each), `index` (null unless a sharded checkpoint), `seconds`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "files": self.files.iter().map(|(i, o, n)| serde_json::json!({
                "input": i.display().to_string(),
                "output": o.display().to_string(),
                "tensors": n,
            })).collect::<Vec<_>>(),
            "index": self.index.as_ref().map(|p| p.display().to_string()),
            "seconds": self.seconds,
        })
    }
}

fn not_packed(path: &Path, reason: String) -> Error {
    Error::NotPacked {
        path: path.to_path_buf(),
        reason,
    }
}

/// Restores one packed safetensors file into `output` (a safetensors file of the source
/// tensors). Bit-exact where the pack applied no cast, quantisation or Winograd transform;
/// otherwise within their rounding (a cast back widens exactly; int8 comes back as `q * scale`).
pub fn unpack_file(input: &Path, output: &Path, opts: &UnpackOptions) -> Result<usize> {
    let source = Source::open(input)?;
    let doc = source
        .metadata
        .iter()
        .find(|(k, _)| k == meta::KEY)
        .map(|(_, v)| v.as_str())
        .ok_or_else(|| {
            not_packed(
                input,
                "no layoutkit metadata: not a file `layoutkit pack` wrote".into(),
            )
        })?;
    let packed = meta::read(doc).map_err(|r| not_packed(input, r))?;
    let find = |name: &str| {
        source
            .tensors
            .iter()
            .position(|t| t.name == name)
            .ok_or_else(|| {
                not_packed(
                    input,
                    format!("the metadata names `{name}` but the file has no such tensor"),
                )
            })
    };
    let mut jobs = Vec::with_capacity(packed.len());
    for p in &packed {
        let i = find(&p.name)?;
        let t = &source.tensors[i];
        if t.dtype != p.dst_dtype || t.shape != p.dst_shape {
            return Err(not_packed(
                input,
                format!(
                    "`{}` is {} {:?} but its metadata says {} {:?}",
                    p.name, t.dtype, t.shape, p.dst_dtype, p.dst_shape
                ),
            ));
        }
        let scales = match &p.scale {
            Some(s) => {
                let st = &source.tensors[find(s)?];
                let bytes = source.data(st);
                Some(
                    bytes
                        .chunks_exact(4)
                        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                        .collect::<Vec<f32>>(),
                )
            }
            None => None,
        };
        jobs.push((p, i, scales));
    }
    let entries: Vec<HeaderEntry> = packed
        .iter()
        .map(|p| HeaderEntry {
            name: p.source_name.clone(),
            dtype: p.src_dtype,
            shape: p.src_shape.clone(),
        })
        .collect();
    let order = storage_order(&entries);
    let ordered: Vec<HeaderEntry> = order.iter().map(|&i| entries[i].clone()).collect();
    let metadata: Vec<(String, String)> = source
        .metadata
        .iter()
        .filter(|(k, _)| k != meta::KEY)
        .cloned()
        .collect();
    let (head, ordered_offsets) = header(&metadata, &ordered);
    let mut offsets = vec![0usize; entries.len()];
    for (k, &i) in order.iter().enumerate() {
        offsets[i] = ordered_offsets[k];
    }
    let total = head.len() + entries.iter().map(HeaderEntry::bytes).sum::<usize>();
    let mut file = Output::create(output, total)?;
    let out = file.writer();
    out.write_at(0, &head)?;
    let threads = match opts.threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    };
    let indices: Vec<usize> = (0..jobs.len()).collect();
    crate::jobs::run(
        &indices,
        |&k| entries[k].bytes(),
        threads,
        |&k, t, scratch| {
            let (p, i, scales) = &jobs[k];
            let tensor = &source.tensors[*i];
            let data = source.data(tensor);
            let buf = scratch.out.get(entries[k].bytes());
            let cerr = |e| Error::Convert {
                path: input.to_path_buf(),
                tensor: p.name.clone(),
                source: Box::new(e),
            };
            let op = with_channels(&p.op, scales.as_deref().map_or(0, <[f32]>::len));
            if let Op::Convert {
                quant: Some((q, n)),
                ..
            } = &op
            {
                if (*n == 0 && q.elements() > 0) || (*n > 0 && q.elements() % n != 0) {
                    return Err(not_packed(
                        input,
                        format!("`{}` has {n} scales for {} elements", p.name, q.elements()),
                    ));
                }
            }
            match (p.src_dtype.core(), p.dst_dtype.core()) {
                (Some(s), Some(d)) => {
                    exec::unpack(&op, t, s, d, data, scales.as_deref(), buf, &mut scratch.tmp)
                        .map_err(cerr)?
                }
                _ => buf.copy_from_slice(data),
            }
            out.write_at(offsets[k], buf)?;
            source.release(tensor);
            Ok(())
        },
    )?;
    drop(out);
    file.commit_with(opts.sync)?;
    Ok(packed.len())
}

fn with_channels(op: &Op, n: usize) -> Op {
    let mut op = op.clone();
    if let Op::Convert {
        quant: Some((_, c)),
        ..
    } = &mut op
    {
        *c = n;
    }
    op
}

/// Restores a packed model: a packed safetensors file into the file `output`, or a packed
/// sharded checkpoint (its index, or the folder holding it) into the folder `output`.
pub fn unpack_model(packed: &Path, output: &Path, opts: &UnpackOptions) -> Result<UnpackReport> {
    let start = Instant::now();
    let index_path = if packed.is_dir() {
        let found: Vec<PathBuf> = std::fs::read_dir(packed)
            .map_err(|source| Error::Read {
                path: packed.to_path_buf(),
                source,
            })?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| is_index(p))
            .collect();
        match found.as_slice() {
            [one] => Some(one.clone()),
            [] => {
                return Err(not_packed(
                    packed,
                    "the folder holds no *.index.json".into(),
                ))
            }
            _ => {
                return Err(not_packed(
                    packed,
                    "the folder holds more than one *.index.json; name one".into(),
                ))
            }
        }
    } else if is_index(packed) {
        Some(packed.to_path_buf())
    } else {
        None
    };
    let Some(index_path) = index_path else {
        let n = unpack_file(packed, output, opts)?;
        return Ok(UnpackReport {
            files: vec![(packed.to_path_buf(), output.to_path_buf(), n)],
            index: None,
            seconds: start.elapsed().as_secs_f64(),
        });
    };
    if output.as_os_str() == "-" {
        return Err(Error::Options(
            "a packed checkpoint unpacks into a folder (one file per shard and an index); `-` \
             (standard output) cannot hold it"
                .into(),
        ));
    }
    let index = Index::read(&index_path)?;
    std::fs::create_dir_all(output).map_err(|source| Error::Write {
        path: output.to_path_buf(),
        source,
    })?;
    let mut files = Vec::new();
    let mut entries = Vec::new();
    let mut total = 0u64;
    for shard in &index.shards {
        let from = index.dir.join(shard);
        let to = output.join(shard);
        let n = unpack_file(&from, &to, opts)?;
        let restored = Source::open(&to)?;
        for t in &restored.tensors {
            entries.push((t.name.clone(), shard.clone()));
            total += t.bytes() as u64;
        }
        files.push((from, to, n));
    }
    let written = index.write_unpacked(output, entries, total, opts.sync)?;
    Ok(UnpackReport {
        files,
        index: Some(written),
        seconds: start.elapsed().as_secs_f64(),
    })
}
