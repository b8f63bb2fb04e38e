use anyhow::{bail, Result};
use layoutkit_core::describe::Description;
use layoutkit_core::{parse_format, DType, Dims, ShapedLayout};
use serde_json::{json, Value};

use super::{list, token_names};
use crate::args::DescribeArgs;

/// Pixels `--pixels` prints at most.
const MAX_PIXELS: usize = 4096;

pub fn run(a: &DescribeArgs, json_out: bool) -> Result<()> {
    let dtype: DType = a.dtype.parse()?;
    let d = Description::new(
        &a.format,
        &parse_format(&a.format)?,
        &Dims::parse(&a.dims)?,
        dtype,
    )?;
    let (s, user_dims, bytes, logical) = (&d.shaped, &d.dims, d.bytes, d.logical_elements);
    if a.pixels {
        return pixels(s, user_dims, json_out);
    }
    if json_out {
        let mut doc = json!({
            "name": d.name,
            "canonical": d.canonical,
            "dims": crate::json::dims(&d.dims),
            "physical_axes": d.physical_axes,
            "physical_shape": d.physical_shape,
            "strides": d.strides,
            "elements": d.elements,
            "logical_elements": d.logical_elements,
            "padding_elements": d.padding_elements,
            "dtype": d.dtype.name(),
            "bytes": d.bytes,
            "fill": crate::json::float(d.fill),
        });
        if let (Some((w, h)), Some(tokens)) = (d.image, &d.token_shape) {
            doc["image"] = json!({"width": w, "height": h});
            doc["token_shape"] = json!(tokens);
        }
        crate::json::print(&doc);
        return Ok(());
    }
    let padding = s.elements() - logical;
    outln!("format          {} (canonical {})", a.format, s.layout());
    outln!("dims            {user_dims}");
    if let Some((w, h)) = s.image_size() {
        outln!(
            "image           width {w} x height {h} RGBA pixels ({} rows | {} columns | {} lanes)",
            row_names(s, 0),
            row_names(s, 1),
            row_names(s, 2)
        );
        outln!(
            "physical shape  {}  (tokens {} of shape {})",
            list(&s.array_shape()),
            token_names(s.layout()).join(" "),
            list(&s.physical_shape())
        );
        outln!("strides         {} elements", list(&s.array_strides()));
    } else {
        outln!(
            "physical shape  {}  axes {}",
            list(&s.physical_shape()),
            token_names(s.layout()).join(" ")
        );
        outln!("strides         {} elements", list(&s.strides()));
    }
    outln!(
        "elements        {} physical = {} logical + {} padding{}",
        s.elements(),
        logical,
        padding,
        if padding > 0 {
            format!(" (fill {})", s.layout().fill())
        } else {
            String::new()
        }
    );
    outln!("bytes           {bytes} ({dtype})");
    Ok(())
}

/// The tokens of one image group (0 rows, 1 columns, 2 lanes), e.g. `N H`.
fn row_names(s: &ShapedLayout, group: usize) -> String {
    let rows = s.layout().image().map_or(0, |g| g.rows);
    let names = token_names(s.layout());
    let n = names.len();
    let part = match group {
        0 => &names[..rows],
        1 => &names[rows..n - 1],
        _ => &names[n - 1..],
    };
    if part.is_empty() {
        "no".into()
    } else {
        part.join(" ")
    }
}

/// Every pixel of an image with the elements its lanes hold (`0` for padding lanes).
fn pixels(s: &ShapedLayout, dims: &Dims, json_out: bool) -> Result<()> {
    let Some((w, h)) = s.image_size() else {
        bail!("--pixels needs an image layout (mace:..., or ROWS|COLUMNS|LANES)");
    };
    if w * h > MAX_PIXELS {
        bail!(
            "the image has {} pixels; --pixels prints at most {MAX_PIXELS} (use smaller dims)",
            w * h
        );
    }
    // Labels use the user's axis order: E + indices (digits when every extent is at most 10).
    let order: Vec<usize> = dims
        .entries()
        .iter()
        .filter_map(|(a, _)| s.axes().iter().position(|b| b == a))
        .collect();
    let compact = s.extents().iter().all(|&e| e <= 10);
    let prefix = if s.layout().transform().is_some() {
        "U"
    } else {
        "E"
    };
    let label = |c: &[usize]| -> String {
        let idx: Vec<String> = order.iter().map(|&i| c[i].to_string()).collect();
        if compact {
            format!("{prefix}{}", idx.concat())
        } else {
            format!("{prefix}[{}]", idx.join(","))
        }
    };
    let mut rows_json = Vec::new();
    for y in 0..h {
        let mut line = format!("y={y}:");
        let mut row_json = Vec::new();
        for x in 0..w {
            let mut lanes = Vec::new();
            let mut lanes_json = Vec::new();
            for k in 0..4 {
                let off = s.offset_of_pixel(x, y, k)?;
                match s.inverse(off)? {
                    Some(c) => {
                        lanes.push(label(&c));
                        let mut m = serde_json::Map::new();
                        for &i in &order {
                            m.insert(s.axes()[i].letter().to_string(), json!(c[i]));
                        }
                        lanes_json.push(Value::Object(m));
                    }
                    None => {
                        lanes.push("0".into());
                        lanes_json.push(Value::Null);
                    }
                }
            }
            line.push_str(&format!(" x{x}({})", lanes.join(",")));
            row_json.push(Value::Array(lanes_json));
        }
        if json_out {
            rows_json.push(Value::Array(row_json));
        } else {
            outln!("{line}");
        }
    }
    if json_out {
        crate::json::print(&json!({
            "canonical": s.layout().to_string(),
            "image": {"width": w, "height": h},
            "pixels": rows_json,
        }));
    }
    Ok(())
}
