//! Sharded checkpoints: `*.safetensors.index.json` (`{"metadata": {...}, "weight_map":
//! {tensor: shard file}}`) and its shards in the same folder.

use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

use crate::source::Source;
use crate::{Error, Result};

/// A sharded checkpoint's index.
#[derive(Clone, Debug)]
pub struct Index {
    /// The index file.
    pub path: PathBuf,
    /// Its folder (where the shards are).
    pub dir: PathBuf,
    /// The index's `metadata` object.
    pub metadata: Map<String, Value>,
    /// `(tensor, shard file name)` in the index's order.
    pub weight_map: Vec<(String, String)>,
    /// Shard file names, each once, in order of first appearance.
    pub shards: Vec<String>,
}

impl Index {
    /// Reads an index. Shard names must be plain file names in the index's folder.
    pub fn read(path: &Path) -> Result<Index> {
        let bad = |reason: String| Error::Malformed {
            path: path.to_path_buf(),
            reason,
        };
        let text = std::fs::read(path).map_err(|source| Error::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let doc: Value =
            serde_json::from_slice(&text).map_err(|e| bad(format!("not valid JSON: {e}")))?;
        let weight_map = doc
            .get("weight_map")
            .and_then(Value::as_object)
            .ok_or_else(|| bad("no weight_map object (not a sharded checkpoint index?)".into()))?;
        let mut shards: Vec<String> = Vec::new();
        let mut map = Vec::with_capacity(weight_map.len());
        for (tensor, shard) in weight_map {
            let shard = shard
                .as_str()
                .ok_or_else(|| bad(format!("weight_map entry of `{tensor}` is not a file name")))?;
            let plain = Path::new(shard)
                .file_name()
                .is_some_and(|n| n == std::ffi::OsStr::new(shard));
            if !plain || shard == ".." || shard == "." {
                return Err(bad(format!(
                    "shard `{shard}` of `{tensor}` is not a plain file name in the index's folder"
                )));
            }
            if !shards.iter().any(|s| s == shard) {
                shards.push(shard.to_string());
            }
            map.push((tensor.clone(), shard.to_string()));
        }
        if shards.is_empty() {
            return Err(bad("the weight_map is empty".into()));
        }
        Ok(Index {
            path: path.to_path_buf(),
            dir: path.parent().unwrap_or(Path::new(".")).to_path_buf(),
            metadata: doc
                .get("metadata")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default(),
            weight_map: map,
            shards,
        })
    }

    /// The shard files' paths, in order.
    pub fn shard_paths(&self) -> Vec<PathBuf> {
        self.shards.iter().map(|s| self.dir.join(s)).collect()
    }

    /// Checks that every tensor the index names is in its shard (`sources` in shard order).
    pub fn check(&self, sources: &[Source]) -> Result<()> {
        for (tensor, shard) in &self.weight_map {
            let i = self.shards.iter().position(|s| s == shard).unwrap_or(0);
            if !sources[i].tensors.iter().any(|t| &t.name == tensor) {
                return Err(Error::Tensor {
                    path: self.path.clone(),
                    tensor: tensor.clone(),
                    reason: format!("the index puts it in {shard}, which has no such tensor"),
                });
            }
        }
        Ok(())
    }

    fn file_name(&self) -> String {
        self.path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "model.safetensors.index.json".into())
    }
    /// Writes the index of a packed checkpoint into `out_dir`, from the packed shards found
    /// there (one per input shard, under the same name): every tensor of every packed shard
    /// (scale tensors included) is mapped to its file, `total_size` is their bytes, and
    /// `layoutkit_profile` names the profile they were packed for.
    ///
    /// Errors: a packed shard missing or not packed by layoutkit, shards packed for different
    /// profiles, or a tensor of the source index missing from its packed shard.
    pub fn write_packed(&self, out_dir: &Path, sync: bool) -> Result<PathBuf> {
        let mut map = Map::new();
        let mut total = 0u64;
        let mut profile: Option<String> = None;
        for shard in &self.shards {
            let path = out_dir.join(shard);
            let packed = Source::open(&path)?;
            let not_packed = |reason: String| Error::NotPacked {
                path: path.clone(),
                reason,
            };
            let doc = packed
                .metadata
                .iter()
                .find(|(k, _)| k == crate::meta::KEY)
                .ok_or_else(|| {
                    not_packed("no layoutkit metadata: not packed by layoutkit".into())
                })?;
            let this = serde_json::from_str::<Value>(&doc.1)
                .ok()
                .and_then(|d| d.get("profile").and_then(Value::as_str).map(String::from))
                .ok_or_else(|| not_packed("its layoutkit metadata names no profile".into()))?;
            match &profile {
                Some(p) if *p != this => {
                    return Err(not_packed(format!(
                        "packed for {this}, other shards for {p}"
                    )))
                }
                _ => profile = Some(this),
            }
            for (tensor, s) in &self.weight_map {
                if s == shard && !packed.tensors.iter().any(|t| &t.name == tensor) {
                    return Err(not_packed(format!(
                        "has no tensor `{tensor}`, which the index puts in {shard}"
                    )));
                }
            }
            for t in &packed.tensors {
                map.insert(t.name.clone(), json!(shard));
                total += t.bytes() as u64;
            }
        }
        let mut metadata = self.metadata.clone();
        metadata.insert("total_size".into(), json!(total));
        metadata.insert(
            "layoutkit_profile".into(),
            json!(profile.unwrap_or_default()),
        );
        self.write(out_dir, metadata, map, sync)
    }

    /// Writes an index mapping each `(tensor, shard)` into `out_dir`; returns its path.
    pub(crate) fn write_unpacked(
        &self,
        out_dir: &Path,
        entries: Vec<(String, String)>,
        total: u64,
        sync: bool,
    ) -> Result<PathBuf> {
        let map: Map<String, Value> = entries.into_iter().map(|(t, s)| (t, json!(s))).collect();
        let mut metadata = self.metadata.clone();
        metadata.remove("layoutkit_profile");
        metadata.insert("total_size".into(), json!(total));
        self.write(out_dir, metadata, map, sync)
    }

    fn write(
        &self,
        out_dir: &Path,
        metadata: Map<String, Value>,
        map: Map<String, Value>,
        sync: bool,
    ) -> Result<PathBuf> {
        let doc = json!({"metadata": metadata, "weight_map": map});
        let path = out_dir.join(self.file_name());
        let mut text = serde_json::to_string_pretty(&doc).unwrap_or_default();
        text.push('\n');
        let mut out = layoutkit_files::Output::create(&path, text.len())?;
        out.bytes_mut().copy_from_slice(text.as_bytes());
        out.commit_with(sync)?;
        Ok(path)
    }
}

/// Writes the index of a checkpoint whose shards were packed one by one (by [`pack_shard`]
/// calls on other threads, processes or machines: the unit a distributed engine runs per
/// task) into `out_dir`, beside those shards; returns its path. `index` is the source
/// checkpoint's `*.safetensors.index.json`. See [`Index::write_packed`] for what is checked.
///
/// [`pack_shard`]: crate::pack_shard
pub fn write_packed_index(index: &Path, out_dir: &Path, sync: bool) -> Result<PathBuf> {
    Index::read(index)?.write_packed(out_dir, sync)
}
