use layoutkit_core::Dims;
use serde_json::{Map, Value};

/// `{"N": 16, "C": 3, ...}` in the dims' order.
pub fn dims(d: &Dims) -> Value {
    let mut m = Map::new();
    for (a, e) in d.entries() {
        m.insert(a.letter().to_string(), Value::from(*e));
    }
    Value::Object(m)
}

/// A float as JSON: a number, or the strings "nan", "inf", "-inf".
pub fn float(x: f64) -> Value {
    if x.is_nan() {
        Value::from("nan")
    } else if x.is_infinite() {
        Value::from(if x > 0.0 { "inf" } else { "-inf" })
    } else {
        Value::from(x)
    }
}

/// Prints one JSON document on stdout.
pub fn print(v: &Value) {
    outln!(
        "{}",
        serde_json::to_string_pretty(v).unwrap_or_else(|_| "null".into())
    );
}

/// Prints one JSON document on stderr (when stdout carries an output file).
pub fn eprint(v: &Value) {
    eprintln!(
        "{}",
        serde_json::to_string_pretty(v).unwrap_or_else(|_| "null".into())
    );
}
