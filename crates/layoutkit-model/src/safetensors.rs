//! safetensors files: an 8-byte little-endian header length, a JSON header (tensor name ->
//! dtype, shape, data offsets; `__metadata__` -> string map), then the tensors' bytes back to
//! back. Read through a memory map; written by [`header`] plus the tensors at their offsets.

use std::path::Path;

use serde_json::{Map, Value};

use crate::source::{Data, Mapped, Source, SourceKind, SourceTensor};
use crate::{ElementType, Error, Result};

/// Reads a safetensors file's header and maps its data.
pub fn read(path: &Path) -> Result<Source> {
    let mapped = Mapped::open(path)?;
    let (tensors, metadata) = parse(path, mapped.bytes())?;
    Ok(Source {
        path: path.to_path_buf(),
        kind: SourceKind::SafeTensors,
        tensors,
        metadata,
        graph_roles: None,
        files: vec![mapped],
    })
}

/// A file's `__metadata__` pairs.
type Metadata = Vec<(String, String)>;

fn parse(path: &Path, bytes: &[u8]) -> Result<(Vec<SourceTensor>, Metadata)> {
    let bad = |reason: String| Error::Malformed {
        path: path.to_path_buf(),
        reason,
    };
    let len_bytes: [u8; 8] = bytes
        .get(..8)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| {
            bad(format!(
                "{} bytes is too short for a safetensors file (8-byte header length missing)",
                bytes.len()
            ))
        })?;
    let header_len = u64::from_le_bytes(len_bytes);
    let data_start = usize::try_from(header_len)
        .ok()
        .and_then(|n| n.checked_add(8))
        .filter(|&end| end <= bytes.len())
        .ok_or_else(|| {
            bad(format!(
                "the header length {header_len} runs past the end of the file ({} bytes): truncated, or not a safetensors file (ONNX models are read by their .onnx extension)",
                bytes.len()
            ))
        })?;
    let header: Value = serde_json::from_slice(&bytes[8..data_start])
        .map_err(|e| bad(format!("the header is not valid JSON: {e}")))?;
    let Value::Object(entries) = header else {
        return Err(bad("the header is not a JSON object".into()));
    };
    let mut tensors = Vec::new();
    let mut metadata = Vec::new();
    let data_len = bytes.len() - data_start;
    for (name, info) in entries {
        if name == "__metadata__" {
            let Value::Object(m) = info else {
                return Err(bad("__metadata__ is not an object".into()));
            };
            for (k, v) in m {
                let Value::String(v) = v else {
                    return Err(bad(format!("__metadata__ value of `{k}` is not a string")));
                };
                metadata.push((k, v));
            }
            continue;
        }
        let terr = |reason: String| Error::Tensor {
            path: path.to_path_buf(),
            tensor: name.clone(),
            reason,
        };
        let dtype_name = info
            .get("dtype")
            .and_then(Value::as_str)
            .ok_or_else(|| terr("no dtype in the header".into()))?;
        let dtype = ElementType::from_safetensors(dtype_name)
            .ok_or_else(|| terr(format!("unknown dtype `{dtype_name}`")))?;
        let shape = info
            .get("shape")
            .and_then(Value::as_array)
            .ok_or_else(|| terr("no shape in the header".into()))?
            .iter()
            .map(|d| d.as_u64().and_then(|d| usize::try_from(d).ok()))
            .collect::<Option<Vec<usize>>>()
            .ok_or_else(|| terr("the shape is not a list of counts".into()))?;
        let offsets = info
            .get("data_offsets")
            .and_then(Value::as_array)
            .filter(|o| o.len() == 2)
            .and_then(|o| {
                let b = usize::try_from(o[0].as_u64()?).ok()?;
                let e = usize::try_from(o[1].as_u64()?).ok()?;
                Some((b, e))
            })
            .ok_or_else(|| terr("data_offsets is not a pair of offsets".into()))?;
        let (begin, end) = offsets;
        let expected = shape
            .iter()
            .try_fold(dtype.size_bytes(), |acc, &d| acc.checked_mul(d))
            .ok_or_else(|| terr("the shape's size overflows".into()))?;
        if end < begin || end - begin != expected {
            return Err(terr(format!(
                "data_offsets [{begin}, {end}] hold {} bytes but shape {shape:?} of {dtype} needs {expected}",
                end.saturating_sub(begin)
            )));
        }
        if end > data_len {
            return Err(terr(format!(
                "its data (bytes {begin}..{end} after the header) runs past the end of the file's {data_len} data bytes: the file is truncated"
            )));
        }
        tensors.push(SourceTensor {
            name,
            dtype,
            shape,
            data: Data::Mapped {
                file: 0,
                range: data_start + begin..data_start + end,
            },
        });
    }
    // File order: a pack then reads the file front to back.
    tensors.sort_by_key(|t| match &t.data {
        Data::Mapped { range, .. } => range.start,
        Data::Owned(_) => 0,
    });
    Ok((tensors, metadata))
}

/// One tensor of an output header.
#[derive(Clone, Debug)]
pub struct HeaderEntry {
    pub name: String,
    pub dtype: ElementType,
    pub shape: Vec<usize>,
}

impl HeaderEntry {
    pub fn bytes(&self) -> usize {
        self.shape.iter().product::<usize>() * self.dtype.size_bytes()
    }
}

/// The header of a safetensors file holding `entries` back to back in the order given:
/// returns the header bytes (length prefix included, padded with spaces so the data starts on
/// an 8-byte boundary) and each entry's byte offset in the file.
pub fn header(metadata: &[(String, String)], entries: &[HeaderEntry]) -> (Vec<u8>, Vec<usize>) {
    let mut root = Map::new();
    if !metadata.is_empty() {
        let m: Map<String, Value> = metadata
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect();
        root.insert("__metadata__".into(), Value::Object(m));
    }
    let mut offset = 0usize;
    let mut rel = Vec::with_capacity(entries.len());
    for e in entries {
        let end = offset + e.bytes();
        let mut info = Map::new();
        info.insert("dtype".into(), e.dtype.safetensors_name().into());
        info.insert("shape".into(), e.shape.clone().into());
        info.insert("data_offsets".into(), vec![offset, end].into());
        root.insert(e.name.clone(), Value::Object(info));
        rel.push(offset);
        offset = end;
    }
    let mut json = Value::Object(root).to_string().into_bytes();
    while !json.len().is_multiple_of(8) {
        json.push(b' ');
    }
    let mut out = Vec::with_capacity(8 + json.len());
    out.extend_from_slice(&(json.len() as u64).to_le_bytes());
    out.extend_from_slice(&json);
    let start = out.len();
    (out, rel.into_iter().map(|r| r + start).collect())
}

/// Orders output tensors as safetensors' own writer does (larger elements first, so every
/// tensor starts aligned to its element size), keeping the given order within a size.
pub fn storage_order(entries: &[HeaderEntry]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..entries.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(entries[i].dtype.size_bytes()));
    order
}
