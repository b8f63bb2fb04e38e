//! The seed document's GEMM listing, parsed verbatim from the seed file's own text, gives the
//! seed's own printed numbers (with the 15-entry `_attr_`: the seed predates VIRTUAL_THREAD,
//! so its one-hot has 10 entries; ours has one more trailing 0).
//!
//! The seed labels its rows `y, x, k` while its listing names the outer loop `x`: the numbers
//! came from TVM's unit test (`lambda y, x`), the listing from another spelling (spec 8.2). Rows
//! are in loop order, so row 1 is the outer loop either way; we compare by position.

mod common;

use layoutkit_loopir::features::{extract, Options};
use layoutkit_loopir::parse;

const SEED: &str = include_str!("../../../tests/data/seeds/004_fa7fd8790c3af9f6.txt");

/// The lines from `produce C {` to its closing brace.
fn listing() -> String {
    let start = SEED.find("produce C {").expect("listing in the seed");
    let mut depth = 0i32;
    let mut out = String::new();
    for line in SEED[start..].lines() {
        out.push_str(line);
        out.push('\n');
        depth += line.matches('{').count() as i32 - line.matches('}').count() as i32;
        if depth == 0 {
            break;
        }
    }
    out
}

/// The seed's printed rows: (attr, arith, [(key, values)]).
type SeedRow = (Vec<i64>, Vec<i64>, Vec<(String, Vec<i64>)>);

fn seed_rows() -> Vec<SeedRow> {
    let out = &SEED[SEED.find("The output is").expect("printed output")..];
    let nums = |s: &str| -> Vec<i64> {
        let inner = &s[s.find('[').unwrap() + 1..s.rfind(']').unwrap()];
        inner
            .split(',')
            .map(|x| x.trim().parse().unwrap())
            .collect()
    };
    let mut rows: Vec<SeedRow> = Vec::new();
    for line in out.lines() {
        let line = line.trim();
        if line.starts_with("_itervar_") {
            rows.push((Vec::new(), Vec::new(), Vec::new()));
        } else if line.starts_with("_attr_") {
            rows.last_mut().unwrap().0 = nums(line);
        } else if line.starts_with("_arith_") {
            rows.last_mut().unwrap().1 = nums(line);
        } else if let Some((key, _)) = line.split_once(" [") {
            if let Some(row) = rows.last_mut() {
                row.2.push((key.to_string(), nums(line)));
            }
        } else if line.starts_with("feature.flatten") {
            break;
        }
    }
    rows
}

#[test]
fn seed_listing_gives_the_seed_numbers() {
    let text = listing();
    assert!(text.starts_with("produce C {\nfor (x, 0, 128) {"));
    assert!(text.contains("# C_1 C_2 A_0 B_0"));
    let program = parse(&text).unwrap();
    let f = extract(&program, &Options::default()).unwrap();
    let seed = seed_rows();
    assert_eq!(seed.len(), 3);
    assert_eq!(f.rows.len(), 3);
    let names: Vec<&str> = f.rows.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["x", "y", "k"]);
    for (row, (attr, arith, touch)) in f.rows.iter().zip(&seed) {
        assert_eq!(attr.len(), 14);
        let mut attr15 = attr.clone();
        attr15.push(0);
        assert_eq!(row.attr().to_vec(), attr15);
        assert_eq!(row.arith.to_vec(), *arith);
        let got: Vec<(String, Vec<i64>)> = row
            .touch
            .iter()
            .map(|(a, p)| (f.key(*a).to_string(), p.values().to_vec()))
            .collect();
        assert_eq!(&got, touch);
    }
}
