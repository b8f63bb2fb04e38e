//! Helpers shared by the feature tests: run the extractor and render rows in the notation of
//! the spec's section 8 (`var: len nest top bot ANN arith=[a,m,d]  KEY[s,m,c,r,tc,tr] ...`).

#![allow(dead_code)]

use layoutkit_loopir::features::{extract, Annotation, Features, Options};
use layoutkit_loopir::ir::DataType;
use layoutkit_loopir::{parse, Program};

pub fn ann_name(a: Annotation) -> &'static str {
    match a {
        Annotation::BlockX => "BX",
        Annotation::BlockY => "BY",
        Annotation::BlockZ => "BZ",
        Annotation::ThreadX => "TX",
        Annotation::ThreadY => "TY",
        Annotation::ThreadZ => "TZ",
        Annotation::Unrolled => "UNROLL",
        Annotation::Vectorized => "VEC",
        Annotation::Parallel => "PAR",
        Annotation::Serial => "SERIAL",
        Annotation::VirtualThread => "VTHREAD",
    }
}

pub fn render(f: &Features) -> Vec<String> {
    f.rows
        .iter()
        .map(|r| {
            let mut s = format!(
                "{}: {} {} {} {} {} arith=[{},{},{}]",
                r.name,
                r.length,
                r.nest_level,
                r.topdown,
                r.bottomup,
                ann_name(r.ann),
                r.arith[0],
                r.arith[1],
                r.arith[2]
            );
            for (a, p) in &r.touch {
                let v = p.values();
                s.push_str(&format!(
                    " {}[{},{},{},{},{},{}]",
                    f.key(*a),
                    v[0],
                    v[1],
                    v[2],
                    v[3],
                    v[4],
                    v[5]
                ));
            }
            s
        })
        .collect()
}

pub fn features_of(text: &str) -> Features {
    features_with(text, &[])
}

pub fn features_with(text: &str, dtypes: &[(&str, DataType)]) -> Features {
    let program = parse(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    features_of_program(&program, dtypes)
}

pub fn features_of_program(program: &Program, dtypes: &[(&str, DataType)]) -> Features {
    let mut options = Options::default();
    for (name, t) in dtypes {
        options.buffer_types.insert(name.to_string(), *t);
    }
    extract(program, &options).unwrap()
}

/// Compares rendered rows with expected lines (whitespace-insensitive).
pub fn assert_rows(f: &Features, expected: &[&str]) {
    let got = render(f);
    let norm = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let want: Vec<String> = expected.iter().map(|s| norm(s)).collect();
    let got: Vec<String> = got.iter().map(|s| norm(s)).collect();
    assert_eq!(
        got,
        want,
        "\ngot:\n{}\nwant:\n{}",
        got.join("\n"),
        want.join("\n")
    );
}
