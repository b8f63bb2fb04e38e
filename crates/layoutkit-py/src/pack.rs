//! Model packing from Python: `layoutkit.pack`, `pack_shard`, `write_packed_index`, `unpack`
//! and `checkpoint_shards`, thin calls into `layoutkit-model` that return its JSON reports
//! (the same documents `layoutkit --json pack` / `unpack` print).

use std::path::PathBuf;
use std::sync::Arc;

use layoutkit_core::DType;
use layoutkit_model::{
    pack_model, pack_shard as pack_one_shard, unpack_model, Index, PackOptions, Profile, Rule,
    UnpackOptions,
};
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;

/// A model error as Python sees it: the system failing to write is `OSError`, everything else
/// (bad files, bad options, ambiguous roles) `ValueError`; the message is the CLI's.
fn model_error(e: layoutkit_model::Error) -> PyErr {
    match &e {
        layoutkit_model::Error::Read { .. } | layoutkit_model::Error::Write { .. } => {
            PyOSError::new_err(e.to_string())
        }
        _ if e.is_write_failure() => PyOSError::new_err(e.to_string()),
        _ => PyValueError::new_err(e.to_string()),
    }
}

/// The options of a pack, from the Python keyword arguments (checked in `layoutkit-model`).
#[allow(clippy::too_many_arguments)]
fn options(
    target: &str,
    dtype: Option<&str>,
    winograd: Option<u8>,
    rules: Vec<String>,
    threads: usize,
    sync: bool,
    dry_run: bool,
    progress: Option<Py<PyAny>>,
) -> PyResult<PackOptions> {
    let profile: Profile = target.parse().map_err(model_error)?;
    let mut opts = PackOptions::new(profile);
    opts.dtype = dtype
        .map(str::parse::<DType>)
        .transpose()
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    opts.winograd = winograd;
    opts.rules = rules
        .iter()
        .map(|r| Rule::parse(r))
        .collect::<Result<_, _>>()
        .map_err(model_error)?;
    opts.threads = threads;
    opts.sync = sync;
    opts.dry_run = dry_run;
    if let Some(callback) = progress {
        opts.progress = Some(Arc::new(move |p: layoutkit_model::Progress| {
            // Called from worker threads while the caller's thread has let the GIL go; an
            // exception in the callback is printed and ignored (the pack goes on).
            Python::attach(|py| {
                let args = (p.tensors_done, p.tensors_total, p.bytes_done, p.bytes_total);
                if let Err(e) = callback.call1(py, args) {
                    e.print(py);
                }
            });
        }));
    }
    Ok(opts)
}

/// Packs a model file (`.onnx`, `.safetensors`) into the file `output`, or a sharded
/// checkpoint (`*.safetensors.index.json`) into the folder `output`; returns the JSON report.
#[pyfunction]
#[pyo3(signature = (model, output, target, dtype=None, winograd=None, rules=Vec::new(), threads=0, sync=true, dry_run=false, progress=None))]
#[allow(clippy::too_many_arguments)]
pub fn pack(
    py: Python<'_>,
    model: PathBuf,
    output: PathBuf,
    target: &str,
    dtype: Option<&str>,
    winograd: Option<u8>,
    rules: Vec<String>,
    threads: usize,
    sync: bool,
    dry_run: bool,
    progress: Option<Py<PyAny>>,
) -> PyResult<String> {
    let opts = options(
        target, dtype, winograd, rules, threads, sync, dry_run, progress,
    )?;
    let report = py
        .detach(|| pack_model(&model, &output, &opts))
        .map_err(model_error)?;
    Ok(report.to_json(dry_run).to_string())
}

/// Packs one model file or one shard of a checkpoint into the file `output`; returns the
/// shard's JSON report.
#[pyfunction]
#[pyo3(signature = (shard, output, target, dtype=None, winograd=None, rules=Vec::new(), threads=0, sync=true, dry_run=false, progress=None))]
#[allow(clippy::too_many_arguments)]
pub fn pack_shard(
    py: Python<'_>,
    shard: PathBuf,
    output: PathBuf,
    target: &str,
    dtype: Option<&str>,
    winograd: Option<u8>,
    rules: Vec<String>,
    threads: usize,
    sync: bool,
    dry_run: bool,
    progress: Option<Py<PyAny>>,
) -> PyResult<String> {
    let opts = options(
        target, dtype, winograd, rules, threads, sync, dry_run, progress,
    )?;
    let report = py
        .detach(|| pack_one_shard(&shard, &output, &opts))
        .map_err(model_error)?;
    Ok(report.to_json().to_string())
}

/// Writes the index of a checkpoint packed shard by shard into `out_dir`; returns its path.
#[pyfunction]
#[pyo3(signature = (index, out_dir, sync=true))]
pub fn write_packed_index(
    py: Python<'_>,
    index: PathBuf,
    out_dir: PathBuf,
    sync: bool,
) -> PyResult<String> {
    let path = py
        .detach(|| layoutkit_model::write_packed_index(&index, &out_dir, sync))
        .map_err(model_error)?;
    Ok(path.display().to_string())
}

/// The shard files of a sharded checkpoint, in the index's order.
#[pyfunction]
pub fn checkpoint_shards(index: PathBuf) -> PyResult<Vec<String>> {
    let index = Index::read(&index).map_err(model_error)?;
    Ok(index
        .shard_paths()
        .iter()
        .map(|p| p.display().to_string())
        .collect())
}

/// Restores the source tensors of a packed file (or packed checkpoint folder or index) into
/// `output`; returns the JSON report.
#[pyfunction]
#[pyo3(signature = (packed, output, threads=0, sync=true))]
pub fn unpack(
    py: Python<'_>,
    packed: PathBuf,
    output: PathBuf,
    threads: usize,
    sync: bool,
) -> PyResult<String> {
    let opts = UnpackOptions { threads, sync };
    let report = py
        .detach(|| unpack_model(&packed, &output, &opts))
        .map_err(model_error)?;
    Ok(report.to_json().to_string())
}
