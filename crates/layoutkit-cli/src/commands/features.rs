use std::io::Read;

use anyhow::{anyhow, bail, Context, Result};
use layoutkit_loopir::features::{
    curve_sample, extract, flatten_f32, flatten_names, row_values, Features, Options,
    Value as FeatureValue,
};
use layoutkit_loopir::ir::DataType;
use serde_json::{json, Map, Value};

use crate::args::FeaturesArgs;

pub fn run(a: &FeaturesArgs, json_out: bool) -> Result<()> {
    let text = if a.file.as_os_str() == "-" {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .context("cannot read standard input")?;
        s
    } else {
        std::fs::read_to_string(&a.file)
            .with_context(|| format!("cannot read {}", a.file.display()))?
    };
    let mut options = Options::default();
    for d in &a.dtypes {
        let (name, t) = d
            .split_once('=')
            .ok_or_else(|| anyhow!("--dtype `{d}` is not NAME=TYPE (e.g. A=float16)"))?;
        let dtype = DataType::parse(t.trim()).ok_or_else(|| {
            anyhow!("--dtype {d}: `{t}` is not an element type (float32, float16, int8, ...)")
        })?;
        options.buffer_types.insert(name.trim().to_string(), dtype);
    }
    // Parse errors read `LINE:COL: what was expected`.
    let program = layoutkit_loopir::parse(&text)?;
    let f = extract(&program, &options)?;

    let mut outputs: Vec<(&str, Value, String)> = Vec::new();
    if a.flatten {
        let v = flatten_f32(&f, a.take_log);
        let text = join_floats(v.iter().map(|&x| x as f64));
        outputs.push(("flatten", floats_json(v.iter().map(|&x| x as f64)), text));
    }
    if a.names {
        let names = flatten_names(&f);
        let text = names.join("\n");
        outputs.push(("names", json!(names), text));
    }
    if a.curve {
        if a.sample_n == 0 {
            bail!("--sample-n must be at least 1");
        }
        let v = curve_sample(&f, a.sample_n)?;
        let text = join_floats(v.iter().map(|&x| x as f64));
        outputs.push(("curve", floats_json(v.iter().map(|&x| x as f64)), text));
    }
    if outputs.is_empty() {
        if json_out {
            crate::json::print(&rows_json(&f, a.take_log));
        } else {
            out!("{}", rows_text(&f, a.take_log));
        }
        return Ok(());
    }
    if json_out {
        if outputs.len() == 1 {
            crate::json::print(&outputs.remove(0).1);
        } else {
            let mut m = Map::new();
            for (k, v, _) in outputs {
                m.insert(k.to_string(), v);
            }
            crate::json::print(&Value::Object(m));
        }
    } else if a.flatten && a.names && !a.curve {
        // Side by side: name and value.
        let v = flatten_f32(&f, a.take_log);
        for (n, x) in flatten_names(&f).iter().zip(v) {
            outln!("{n} {}", fmt_float(x as f64));
        }
    } else {
        for (k, _, text) in outputs {
            if a.flatten as u8 + a.names as u8 + a.curve as u8 > 1 {
                outln!("# {k}");
            }
            outln!("{text}");
        }
    }
    Ok(())
}

fn fmt_float(x: f64) -> String {
    if x.is_nan() {
        "nan".into()
    } else if x.is_infinite() {
        if x > 0.0 {
            "inf".into()
        } else {
            "-inf".into()
        }
    } else if x == x.trunc() && x.abs() < 1e15 {
        format!("{}", x as i64)
    } else {
        format!("{x}")
    }
}

fn join_floats(v: impl Iterator<Item = f64>) -> String {
    v.map(fmt_float).collect::<Vec<_>>().join(" ")
}

fn floats_json(v: impl Iterator<Item = f64>) -> Value {
    Value::Array(v.map(crate::json::float).collect())
}

/// A row value as JSON and as text.
fn value(v: FeatureValue) -> (Value, String) {
    match v {
        FeatureValue::Int(x) => (json!(x), x.to_string()),
        FeatureValue::Log(t) => (crate::json::float(t), fmt_log(t)),
    }
}

fn fmt_log(t: f64) -> String {
    if t == t.trunc() && t.is_finite() {
        format!("{t:.1}")
    } else {
        format!("{t}")
    }
}

fn rows_json(f: &Features, log: bool) -> Value {
    let list = |v: &[FeatureValue]| -> Vec<Value> { v.iter().map(|&x| value(x).0).collect() };
    let rows: Vec<Value> = row_values(f, log)
        .iter()
        .map(|r| {
            let touch: Vec<Value> = r
                .touch
                .iter()
                .map(|(key, vals)| json!([key, list(vals)]))
                .collect();
            json!({"itervar": r.itervar, "attr": list(&r.attr), "arith": list(&r.arith), "touch": touch})
        })
        .collect();
    Value::Array(rows)
}

fn rows_text(f: &Features, log: bool) -> String {
    let list = |v: &[FeatureValue]| -> String {
        v.iter().map(|&x| value(x).1).collect::<Vec<_>>().join(", ")
    };
    let mut out = String::new();
    for r in row_values(f, log) {
        out.push_str("---------------------------\n");
        out.push_str(&format!("{:<10} [{}]\n", "_itervar_", r.itervar));
        out.push_str(&format!("{:<10} [{}]\n", "_attr_", list(&r.attr)));
        out.push_str(&format!("{:<10} [{}]\n", "_arith_", list(&r.arith)));
        for (key, vals) in &r.touch {
            out.push_str(&format!("{:<10} [{}]\n", key, list(vals)));
        }
    }
    out
}
