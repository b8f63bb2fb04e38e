//! The metadata a packed safetensors file carries (one `__metadata__` key, `layoutkit`, holding
//! a JSON document), written from the plans and read back by `unpack`.
//!
//! ```json
//! {"version": 1, "profile": "onednn-avx512",
//!  "tensors": {"conv1.weight": {
//!     "role": "conv", "origin": "graph (Conv node 'conv1')",
//!     "layout": "OIhw16i16o", "canonical": "OIHW16i16o", "dims": {"O": 64, "I": 3, "H": 7, "W": 7},
//!     "dtype": "f32", "shape": [4, 1, 7, 7, 16, 16], "fill": 0.0,
//!     "scale": null, "zero_point": null, "scale_layout": null,
//!     "source": {"name": "conv1.weight", "layout": "OIHW", "dims": {"O": 64, "I": 3, "H": 7, "W": 7},
//!                "dtype": "f32", "shape": [64, 3, 7, 7]}}}}
//! ```
//!
//! A quantised tensor names its scale tensor (`NAME:scale`, f32, one per output channel in the
//! order of `scale_layout`'s outer axes); its zero point is 0. Tensors of types the converters
//! do not take have `layout: null` and are stored unchanged.

use serde_json::{json, Map, Value};

use layoutkit_core::{parse_format, Axis, Dims};

use crate::plan::{Op, TensorPlan, View};
use crate::ElementType;

/// The `__metadata__` key of a packed file.
pub const KEY: &str = "layoutkit";

fn dims_json(d: &Dims) -> Value {
    Value::Object(
        d.entries()
            .iter()
            .map(|(a, n)| (a.letter().to_string(), json!(n)))
            .collect(),
    )
}

fn dims_from(v: &Value) -> Option<Dims> {
    let m = v.as_object()?;
    let entries = m
        .iter()
        .map(|(k, n)| {
            let mut c = k.chars();
            let a = Axis::from_letter(c.next()?)?;
            Some((a, usize::try_from(n.as_u64()?).ok()?))
        })
        .collect::<Option<Vec<_>>>()?;
    Dims::new(entries).ok()
}

/// The metadata entry of one packed tensor.
pub fn entry(plan: &TensorPlan) -> Value {
    let (layout, canonical, dims, view, scale_layout) = match &plan.op {
        Op::Raw => (
            Value::Null,
            Value::Null,
            Value::Null,
            Value::Null,
            Value::Null,
        ),
        Op::Convert {
            view,
            target_name,
            target,
            quant,
            ..
        } => (
            json!(target_name),
            json!(target.layout().to_string()),
            dims_json(&view.dims),
            json!(view.layout.to_string()),
            quant
                .as_ref()
                .map_or(Value::Null, |(q, _)| json!(q.layout().to_string())),
        ),
    };
    let quantised = plan.scale_name().is_some();
    json!({
        "role": plan.assignment.role.to_string(),
        "origin": plan.assignment.origin,
        "layout": layout,
        "canonical": canonical,
        "dims": dims.clone(),
        "dtype": plan.dst_dtype.name(),
        "shape": plan.dst_shape,
        "fill": 0.0,
        "scale": plan.scale_name(),
        "zero_point": if quantised { json!(0) } else { Value::Null },
        "scale_layout": scale_layout,
        "source": {
            "name": plan.name,
            "layout": view,
            "dims": dims,
            "dtype": plan.src_dtype.name(),
            "shape": plan.src_shape,
        },
    })
}

/// The whole metadata document.
pub fn document(profile: &str, plans: &[TensorPlan]) -> String {
    let tensors: Map<String, Value> = plans.iter().map(|p| (p.name.clone(), entry(p))).collect();
    json!({"version": 1, "profile": profile, "tensors": tensors}).to_string()
}

/// A packed tensor as its metadata describes it.
pub struct Packed {
    /// The name in the packed file.
    pub name: String,
    pub source_name: String,
    pub src_dtype: ElementType,
    pub src_shape: Vec<usize>,
    pub dst_dtype: ElementType,
    pub dst_shape: Vec<usize>,
    pub scale: Option<String>,
    pub op: Op,
}

/// Reads the entries back; `Err` says what is wrong.
pub fn read(document: &str) -> Result<Vec<Packed>, String> {
    let doc: Value = serde_json::from_str(document)
        .map_err(|e| format!("layoutkit metadata is not JSON: {e}"))?;
    if doc.get("version").and_then(Value::as_u64) != Some(1) {
        return Err("layoutkit metadata version is not 1".into());
    }
    let tensors = doc
        .get("tensors")
        .and_then(Value::as_object)
        .ok_or("layoutkit metadata has no tensors")?;
    tensors
        .iter()
        .map(|(name, e)| one(name, e).map_err(|r| format!("metadata of `{name}`: {r}")))
        .collect()
}

fn one(name: &str, e: &Value) -> Result<Packed, String> {
    let src = e.get("source").ok_or("no source")?;
    let dtype = |v: Option<&Value>| {
        v.and_then(Value::as_str)
            .and_then(ElementType::from_name)
            .ok_or("bad dtype")
    };
    let shape = |v: Option<&Value>| -> Result<Vec<usize>, String> {
        v.and_then(Value::as_array)
            .ok_or("no shape")?
            .iter()
            .map(|d| {
                d.as_u64()
                    .map(|d| d as usize)
                    .ok_or_else(|| "bad shape".to_string())
            })
            .collect()
    };
    let src_dtype = dtype(src.get("dtype"))?;
    let dst_dtype = dtype(e.get("dtype"))?;
    let op = match e.get("layout").and_then(Value::as_str) {
        None => Op::Raw,
        Some(target_name) => {
            let layout = parse_format(target_name).map_err(|x| x.to_string())?;
            let view_layout = src
                .get("layout")
                .and_then(Value::as_str)
                .ok_or("no source layout")?;
            let dims = dims_from(e.get("dims").ok_or("no dims")?).ok_or("bad dims")?;
            let view = View {
                layout: parse_format(view_layout).map_err(|x| x.to_string())?,
                dims: dims.clone(),
                channels: Vec::new(),
            };
            let target = layout.shaped(&dims).map_err(|x| x.to_string())?;
            let quant = match e.get("scale_layout").and_then(Value::as_str) {
                None => None,
                Some(q) => {
                    let q = parse_format(q)
                        .and_then(|l| l.shaped(&dims))
                        .map_err(|x| x.to_string())?;
                    // The channel axes are the scale layout's outer axes whose extents
                    // multiply to the scale count; the count is checked against the scale
                    // tensor when it is read.
                    Some((q, 0))
                }
            };
            Op::Convert {
                winograd: layout.transform().is_some(),
                view,
                target_name: target_name.to_string(),
                target,
                quant,
            }
        }
    };
    Ok(Packed {
        name: name.to_string(),
        source_name: src
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or(name)
            .to_string(),
        src_dtype,
        src_shape: shape(src.get("shape"))?,
        dst_dtype,
        dst_shape: shape(e.get("shape"))?,
        scale: e.get("scale").and_then(Value::as_str).map(str::to_string),
        op,
    })
}
