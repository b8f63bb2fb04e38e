//! `GetCurveSampleFeatureFlatten` (spec section 7): sampled reuse/count/top-down curves of the
//! innermost access of each buffer.

use std::collections::BTreeSet;

use super::stdhash::libstdcxx_iteration_order;
use super::Features;
use crate::Error;

/// The curve-sample feature: `n_innermost x 4 x sample_n x 2` float32 values.
///
/// The innermost access of each raw buffer name is chosen, as TVM does, in the iteration order
/// of a libstdc++ `unordered_map` (emulated exactly); curves are sorted independently and
/// sampled as in TVM. NaN values (from negative counts of symbolic extents) sort last; TVM's
/// `std::sort` leaves their place unspecified.
pub fn curve_sample(f: &Features, sample_n: usize) -> Result<Vec<f32>, Error> {
    let max_depth = f.rows.iter().map(|r| r.nest_level).max().unwrap_or(0);
    let mut seen_raw: Vec<String> = Vec::new();
    let mut innermost: BTreeSet<String> = BTreeSet::new();
    for row in f.rows.iter().rev() {
        if row.nest_level != max_depth {
            continue;
        }
        // A row's keys were inserted in access order (an itervar's accesses are numbered
        // consecutively while it is open).
        let mut ids: Vec<u32> = row.touch.iter().map(|&(a, _)| a).collect();
        ids.sort_unstable();
        let inserted: Vec<&str> = ids.iter().map(|&a| f.key(a)).collect();
        let order = libstdcxx_iteration_order(&inserted).ok_or_else(|| {
            Error::Invalid(format!(
                "itervar `{}` touches {} accesses; the curve feature supports at most 20753",
                row.name,
                inserted.len()
            ))
        })?;
        for i in order {
            let key = inserted[i];
            let raw = raw_name(key);
            if !seen_raw.iter().any(|r| r == raw) {
                seen_raw.push(raw.to_string());
                innermost.insert(key.to_string());
            }
        }
    }
    let log2 = |v: i64| (v as f64).ln() / 2f64.ln();
    let mut out = Vec::with_capacity(innermost.len() * 8 * sample_n);
    for key in &innermost {
        let (mut reuse, mut count, mut topdown) = (vec![0.0], vec![0.0], vec![0.0]);
        for row in &f.rows {
            if let Some((_, p)) = row.touch.iter().find(|(a, _)| f.key(*a) == key) {
                reuse.push(log2(p.reuse));
                count.push(log2(p.count));
                topdown.push(log2(row.topdown));
            }
        }
        for c in [&mut count, &mut reuse, &mut topdown] {
            c.sort_by(|a, b| a.total_cmp(b).then(std::cmp::Ordering::Equal));
            // total_cmp puts negative NaN first; move every NaN to the end.
            c.sort_by_key(|a| a.is_nan());
        }
        sample(&count, &reuse, sample_n, &mut out);
        sample(&reuse, &count, sample_n, &mut out);
        sample(&count, &topdown, sample_n, &mut out);
        sample(&topdown, &count, sample_n, &mut out);
    }
    Ok(out)
}

/// `A_0` -> `A`, `A.shared_3` -> `A`, `data_vec_0` -> `data_vec`.
fn raw_name(key: &str) -> &str {
    let base = key.rfind('_').map_or(key, |i| &key[..i]);
    base.split('.').next().unwrap_or(base)
}

fn sample(x: &[f64], y: &[f64], sample_n: usize, out: &mut Vec<f32>) {
    for i in 0..sample_n {
        let xx = i as f64;
        for j in (0..x.len()).rev() {
            if xx > x[j] - 1e-6 {
                out.push(y[j] as f32);
                out.push((xx - x[j]) as f32);
                break;
            }
        }
    }
}
