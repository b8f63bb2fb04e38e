//! ONNX models: the weights (graph initializers and Constant nodes' tensors) and the nodes
//! that consume them, decoded from the protobuf by hand (`wire`).
//!
//! Weights are read from `raw_data` in place (a range of the mapped file), from the typed
//! fields (`float_data`, `double_data`, `int32_data` holding fp16/bf16 bit patterns and small
//! integers, `int64_data`, `uint64_data`), or from external data files next to the model
//! (`data_location = EXTERNAL`, mapped too). Strings, segments and sparse initializers are
//! refused with an error; subgraphs (If/Loop bodies) are not searched for weights.

mod wire;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use wire::{push_ints, string, Reader, Value};

use crate::source::{Data, Mapped, Source, SourceKind, SourceTensor};
use crate::{ElementType, Error, Result};

/// A node of the graph, with the attributes the role finder reads.
#[derive(Debug, Default)]
pub(crate) struct Node {
    pub name: String,
    pub op: String,
    pub inputs: Vec<String>,
    pub outputs: Vec<String>,
    pub ints: HashMap<String, i64>,
    pub int_lists: HashMap<String, Vec<i64>>,
}

impl Node {
    /// `Conv 'conv1'` (or `Conv #3` for an unnamed node).
    pub fn describe(&self, index: usize) -> String {
        if self.name.is_empty() {
            format!("{} node #{index}", self.op)
        } else {
            format!("{} node '{}'", self.op, self.name)
        }
    }
}

/// A TensorProto before its data is located.
#[derive(Default)]
struct TensorMsg {
    name: String,
    data_type: i64,
    dims: Vec<i64>,
    raw: Option<(usize, usize)>,
    float_chunks: Vec<(usize, usize)>,
    floats: Vec<u8>,
    doubles: Vec<u8>,
    double_chunks: Vec<(usize, usize)>,
    int32: Vec<i64>,
    int64: Vec<i64>,
    uint64: Vec<i64>,
    strings: usize,
    segment: bool,
    external: Vec<(String, String)>,
    location: i64,
}

/// Reads an ONNX model's weights and the roles its graph gives them.
pub fn read(path: &Path) -> Result<Source> {
    let model = Mapped::open(path)?;
    let bad = |reason: String| Error::Malformed {
        path: path.to_path_buf(),
        reason,
    };
    let bytes = model.bytes();
    let mut graph = None;
    let mut r = Reader::new(bytes, 0);
    while let Some((field, value)) = r.next_field().map_err(&bad)? {
        if let (7, Value::Bytes { data, offset }) = (field, value) {
            graph = Some((data, offset));
        }
    }
    let (graph, graph_offset) = graph.ok_or_else(|| {
        bad(if bytes.is_empty() {
            "the file is empty".into()
        } else {
            "no graph in the model (not an ONNX model file?)".into()
        })
    })?;
    let mut msgs = Vec::new();
    let mut nodes = Vec::new();
    let mut r = Reader::of(graph, graph_offset);
    while let Some((field, value)) = r.next_field().map_err(&bad)? {
        match (field, value) {
            (1, Value::Bytes { data, offset }) => {
                let (node, constant) = read_node(data, offset).map_err(&bad)?;
                if let Some(mut t) = constant {
                    t.name = node.outputs.first().cloned().unwrap_or_default();
                    msgs.push(t);
                }
                nodes.push(node);
            }
            (5, Value::Bytes { data, offset }) => {
                msgs.push(read_tensor(data, offset).map_err(&bad)?)
            }
            (15, Value::Bytes { .. }) => {
                return Err(bad(
                    "the graph has sparse initializers, which this reader does not take".into(),
                ))
            }
            _ => {}
        }
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut files = vec![model];
    let mut externals: HashMap<String, usize> = HashMap::new();
    let mut tensors = Vec::with_capacity(msgs.len());
    for msg in msgs {
        tensors.push(locate(path, dir, msg, &mut files, &mut externals)?);
    }
    let mut seen = HashMap::new();
    for t in &tensors {
        if seen.insert(t.name.clone(), ()).is_some() {
            return Err(Error::Tensor {
                path: path.to_path_buf(),
                tensor: t.name.clone(),
                reason: "two initializers (or Constant nodes) have this name".into(),
            });
        }
    }
    let shapes: HashMap<&str, &[usize]> = tensors
        .iter()
        .map(|t| (t.name.as_str(), t.shape.as_slice()))
        .collect();
    let roles = crate::roles::from_graph(&nodes, &shapes);
    Ok(Source {
        path: path.to_path_buf(),
        kind: SourceKind::Onnx,
        tensors,
        metadata: Vec::new(),
        graph_roles: Some(roles),
        files,
    })
}

fn read_node(data: &[u8], offset: usize) -> Result<(Node, Option<TensorMsg>), String> {
    let mut node = Node::default();
    let mut constant = None;
    let mut r = Reader::of(data, offset);
    let mut attrs = Vec::new();
    while let Some((field, value)) = r.next_field()? {
        match field {
            1 => node.inputs.push(string(value)?),
            2 => node.outputs.push(string(value)?),
            3 => node.name = string(value)?,
            4 => node.op = string(value)?,
            5 => {
                if let Value::Bytes { data, offset } = value {
                    attrs.push((data, offset));
                }
            }
            _ => {}
        }
    }
    for (data, offset) in attrs {
        let mut name = String::new();
        let mut i = None;
        let mut f = None;
        let mut ints = Vec::new();
        let mut floats = Vec::new();
        let mut tensor = None;
        let mut r = Reader::of(data, offset);
        while let Some((field, value)) = r.next_field()? {
            match (field, value) {
                (1, v) => name = string(v)?,
                (2, Value::Fixed32(bits)) => f = Some(bits),
                (3, Value::Varint(v)) => i = Some(v as i64),
                (5, Value::Bytes { data, offset }) => tensor = Some(read_tensor(data, offset)?),
                (7, Value::Fixed32(bits)) => floats.extend_from_slice(&bits.to_le_bytes()),
                (7, Value::Bytes { data, .. }) => floats.extend_from_slice(data),
                (8, v) => push_ints(v, &mut ints)?,
                _ => {}
            }
        }
        if node.op == "Constant" {
            // A Constant node holds a weight in `value`; small ones use the typed attributes.
            let scalar = |dtype: i64, bytes: Vec<u8>, dims: Vec<i64>| TensorMsg {
                data_type: dtype,
                dims,
                floats: if dtype == 1 {
                    bytes.clone()
                } else {
                    Vec::new()
                },
                int64: if dtype == 7 {
                    bytes
                        .chunks_exact(8)
                        .map(|c| i64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
                        .collect()
                } else {
                    Vec::new()
                },
                ..TensorMsg::default()
            };
            constant = match name.as_str() {
                "value" => tensor,
                "value_float" => f.map(|b| scalar(1, b.to_le_bytes().to_vec(), vec![])),
                "value_floats" => Some(scalar(1, floats.clone(), vec![(floats.len() / 4) as i64])),
                "value_int" => i.map(|v| scalar(7, v.to_le_bytes().to_vec(), vec![])),
                "value_ints" => Some(scalar(
                    7,
                    ints.iter().flat_map(|v| v.to_le_bytes()).collect(),
                    vec![ints.len() as i64],
                )),
                _ => constant,
            };
            continue;
        }
        if let Some(v) = i {
            node.ints.insert(name.clone(), v);
        }
        if !ints.is_empty() {
            node.int_lists.insert(name, ints);
        }
    }
    Ok((node, constant))
}

fn read_tensor(data: &[u8], offset: usize) -> Result<TensorMsg, String> {
    let mut t = TensorMsg::default();
    let mut r = Reader::of(data, offset);
    while let Some((field, value)) = r.next_field()? {
        match (field, value) {
            (1, v) => push_ints(v, &mut t.dims)?,
            (2, Value::Varint(v)) => t.data_type = v as i64,
            (3, _) => t.segment = true,
            (4, Value::Bytes { data, offset }) => t.float_chunks.push((offset, data.len())),
            (4, Value::Fixed32(bits)) => t.floats.extend_from_slice(&bits.to_le_bytes()),
            (5, v) => push_ints(v, &mut t.int32)?,
            (6, _) => t.strings += 1,
            (7, v) => push_ints(v, &mut t.int64)?,
            (8, v) => t.name = string(v)?,
            (9, Value::Bytes { data, offset }) => t.raw = Some((offset, data.len())),
            (10, Value::Bytes { data, offset }) => t.double_chunks.push((offset, data.len())),
            (10, Value::Fixed64(bits)) => t.doubles.extend_from_slice(&bits.to_le_bytes()),
            (11, v) => push_ints(v, &mut t.uint64)?,
            (13, Value::Bytes { data, offset }) => {
                let mut key = String::new();
                let mut val = String::new();
                let mut e = Reader::of(data, offset);
                while let Some((f, v)) = e.next_field()? {
                    match f {
                        1 => key = string(v)?,
                        2 => val = string(v)?,
                        _ => {}
                    }
                }
                t.external.push((key, val));
            }
            (14, Value::Varint(v)) => t.location = v as i64,
            _ => {}
        }
    }
    Ok(t)
}

/// Finds where a tensor's bytes are and checks their count against its shape.
fn locate(
    path: &Path,
    dir: &Path,
    msg: TensorMsg,
    files: &mut Vec<Mapped>,
    externals: &mut HashMap<String, usize>,
) -> Result<SourceTensor> {
    let err = |reason: String| Error::Tensor {
        path: path.to_path_buf(),
        tensor: msg.name.clone(),
        reason,
    };
    if msg.segment {
        return Err(err("segmented tensors are not supported".into()));
    }
    if msg.data_type == 8 || msg.strings > 0 {
        return Err(err(
            "string tensors cannot be stored in safetensors; remove them from the model".into(),
        ));
    }
    let dtype = ElementType::from_onnx(msg.data_type)
        .ok_or_else(|| err(format!("ONNX data type {} is not supported", msg.data_type)))?;
    let shape = msg
        .dims
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| err(format!("negative dim {d}"))))
        .collect::<Result<Vec<usize>>>()?;
    let elements = shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or_else(|| err("its size overflows".into()))?;
    let size = dtype.size_bytes();
    let expected = elements * size;
    let check = |len: usize, what: &str| {
        if len == expected {
            Ok(())
        } else {
            Err(err(format!(
                "{what} holds {len} bytes but shape {shape:?} of {dtype} needs {expected}"
            )))
        }
    };
    let data = if msg.location == 1 || !msg.external.is_empty() {
        let get = |k: &str| {
            msg.external
                .iter()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v.as_str())
        };
        let location =
            get("location").ok_or_else(|| err("external data without a location".into()))?;
        let num = |k: &str| -> Result<Option<usize>> {
            get(k)
                .map(|v| {
                    v.parse::<usize>()
                        .map_err(|_| err(format!("external data {k} `{v}` is not a count")))
                })
                .transpose()
        };
        let start = num("offset")?.unwrap_or(0);
        let len = num("length")?.unwrap_or(expected);
        check(len, "its external data")?;
        let file = match externals.get(location) {
            Some(&f) => f,
            None => {
                let ext: PathBuf = dir.join(location);
                files.push(Mapped::open(&ext)?);
                externals.insert(location.to_string(), files.len() - 1);
                files.len() - 1
            }
        };
        let file_len = files[file].bytes().len();
        if start + len > file_len {
            return Err(err(format!(
                "its external data {location} bytes {start}..{} run past the end of that file ({file_len} bytes): truncated",
                start + len
            )));
        }
        Data::Mapped {
            file,
            range: start..start + len,
        }
    } else if let Some((offset, len)) = msg.raw {
        check(len, "raw_data")?;
        Data::Mapped {
            file: 0,
            range: offset..offset + len,
        }
    } else {
        let model = files[0].bytes();
        let chunks = |list: &[(usize, usize)], loose: &[u8]| -> Vec<u8> {
            let mut v: Vec<u8> = Vec::new();
            for &(o, l) in list {
                v.extend_from_slice(&model[o..o + l]);
            }
            v.extend_from_slice(loose);
            v
        };
        let bytes: Vec<u8> = match dtype {
            ElementType::F32 => {
                // One packed run (what exporters write) is used in place.
                if msg.float_chunks.len() == 1 && msg.floats.is_empty() {
                    let (o, l) = msg.float_chunks[0];
                    check(l, "float_data")?;
                    return Ok(SourceTensor {
                        name: msg.name,
                        dtype,
                        shape,
                        data: Data::Mapped {
                            file: 0,
                            range: o..o + l,
                        },
                    });
                }
                chunks(&msg.float_chunks, &msg.floats)
            }
            ElementType::F64 => chunks(&msg.double_chunks, &msg.doubles),
            ElementType::I64 => msg.int64.iter().flat_map(|v| v.to_le_bytes()).collect(),
            ElementType::U64 => msg.uint64.iter().flat_map(|v| v.to_le_bytes()).collect(),
            ElementType::U32 => msg
                .uint64
                .iter()
                .flat_map(|&v| (v as u32).to_le_bytes())
                .collect(),
            // int32_data holds every type of 4 bytes or fewer, one value each (fp16 and bf16
            // as their bit patterns); the low bytes are the element.
            _ => msg
                .int32
                .iter()
                .flat_map(|&v| (v as i32).to_le_bytes()[..size.min(4)].to_vec())
                .collect(),
        };
        if bytes.is_empty() && expected > 0 {
            return Err(err("the tensor has no data".into()));
        }
        check(bytes.len(), "its typed data field")?;
        Data::Owned(bytes)
    };
    Ok(SourceTensor {
        name: msg.name,
        dtype,
        shape,
        data,
    })
}
