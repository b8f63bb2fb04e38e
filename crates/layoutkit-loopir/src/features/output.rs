//! Serialisations of the features (spec section 5).

use super::Features;

/// TVM's transform: `log2(x + 1)` for `x >= 0`, `-log2(1 - x)` for `x < 0`, computed in double
/// as `ln(v) / ln(2)` (not `log2`), which is what makes it bit-exact.
///
/// ```
/// use layoutkit_loopir::features::take_log;
/// assert_eq!(take_log(0), 0.0);
/// assert_eq!(take_log(-1), -1.0);
/// assert_eq!(take_log(128), 7.011227255423254);
/// ```
pub fn take_log(x: i64) -> f64 {
    let x = x as f64;
    if x < 0.0 {
        -(-x + 1.0).ln() / 2f64.ln()
    } else {
        (x + 1.0).ln() / 2f64.ln()
    }
}

/// The values of every row, in TVM's flat order, as `(value, transformable)` pairs: nest level
/// and the one-hot are never transformed.
fn for_each_value(f: &Features, mut emit: impl FnMut(i64, bool)) {
    for row in &f.rows {
        let attr = row.attr();
        for (i, &v) in attr.iter().enumerate() {
            emit(v, i != 1 && i < 4);
        }
        for &v in &row.arith {
            emit(v, true);
        }
        for (_, p) in &row.touch {
            for v in p.values() {
                emit(v, true);
            }
        }
    }
}

/// `GetItervarFeatureFlatten` (C++): every value as float32 (doubles rounded to f32, integers
/// converted directly). Length: sum over rows of 18 + 6 x accesses.
pub fn flatten_f32(f: &Features, log: bool) -> Vec<f32> {
    let mut out = Vec::with_capacity(flat_len(f));
    for_each_value(f, |v, t| {
        out.push(if log && t {
            take_log(v) as f32
        } else {
            v as f32
        });
    });
    out
}

/// `flatten_itervar_feature` (Python): the same layout as [`flatten_f32`], as float64 values.
pub fn flatten_f64(f: &Features, log: bool) -> Vec<f64> {
    let mut out = Vec::with_capacity(flat_len(f));
    for_each_value(f, |v, t| {
        out.push(if log && t { take_log(v) } else { v as f64 })
    });
    out
}

fn flat_len(f: &Features) -> usize {
    f.rows.iter().map(|r| 18 + 6 * r.touch.len()).sum()
}

const ATTR_NAMES: [&str; 4] = ["length", "nest_level", "topdown", "bottomup"];
const ARITH_NAMES: [&str; 3] = ["add", "mul", "div"];
const TOUCH_NAMES: [&str; 6] = ["stride", "mod", "count", "reuse", "T_count", "T_reuse"];

/// `get_flatten_name` (Python, TVM 0.16): `f{i}.{var}.{key}.{field}`, one per flat value. The
/// variable name is sanitised (characters other than `[A-Za-z0-9_]` become `_`), keys are not.
pub fn flatten_names(f: &Features) -> Vec<String> {
    let mut out = Vec::with_capacity(flat_len(f));
    for row in &f.rows {
        let var: String = row
            .name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let mut push = |key: &str, field: &str| {
            let i = out.len();
            out.push(format!("f{i}.{var}.{key}.{field}"));
        };
        for n in ATTR_NAMES {
            push("_attr_", n);
        }
        for k in 0..super::ANNOTATION_COUNT {
            push("_attr_", &format!("ann_{k}"));
        }
        for n in ARITH_NAMES {
            push("_arith_", n);
        }
        for &(access, _) in &row.touch {
            let key = f.key(access);
            for n in TOUCH_NAMES {
                push(key, n);
            }
        }
    }
    out
}

/// One value of a row as printed: the integer itself, or its `take_log` when asked for and
/// the value is transformable (nest level and the one-hot never are).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value {
    Int(i64),
    Log(f64),
}

impl Value {
    fn of(x: i64, log: bool) -> Value {
        if log {
            Value::Log(take_log(x))
        } else {
            Value::Int(x)
        }
    }
}

/// One row of `GetItervarFeature` as the command line's JSON and the Python package show it.
#[derive(Clone, Debug, PartialEq)]
pub struct RowValues {
    pub itervar: String,
    pub attr: Vec<Value>,
    pub arith: Vec<Value>,
    /// Per buffer access: its key and its six values.
    pub touch: Vec<(String, Vec<Value>)>,
}

/// Every row's values, logged where `log` asks and the value is transformable: the single
/// source of the rows the command line prints and the Python package returns.
pub fn row_values(f: &Features, log: bool) -> Vec<RowValues> {
    f.rows
        .iter()
        .map(|r| RowValues {
            itervar: r.name.clone(),
            attr: r
                .attr()
                .iter()
                .enumerate()
                .map(|(i, &v)| Value::of(v, log && i != 1 && i < 4))
                .collect(),
            arith: r.arith.iter().map(|&v| Value::of(v, log)).collect(),
            touch: r
                .touch
                .iter()
                .map(|(acc, p)| {
                    let vals = p.values().iter().map(|&v| Value::of(v, log)).collect();
                    (f.key(*acc).to_string(), vals)
                })
                .collect(),
        })
        .collect()
}
