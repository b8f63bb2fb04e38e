//! Parsing plus extraction, and extraction alone, on the 5-loop schedule of the spec's section
//! 8.4 and on a tiled GPU conv2d (23 itervars, 27 buffer accesses). Throughput is reported in
//! itervar rows per second (criterion's "elements").

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use layoutkit_loopir::features::{extract, flatten_f32, Options};
use layoutkit_loopir::parse;

const CASES: [(&str, &str); 2] = [
    (
        "gemm_5loop_s8.4",
        include_str!("../../../examples/ir/cpu_schedule.ir"),
    ),
    (
        "conv2d_gpu_tiled",
        include_str!("../../../examples/ir/conv2d_gpu.ir"),
    ),
];

fn bench(c: &mut Criterion) {
    let options = Options::default();
    for (name, text) in CASES {
        let program = parse(text).expect("example parses");
        let rows = extract(&program, &options).expect("extracts").rows.len() as u64;
        let mut g = c.benchmark_group(name);
        g.throughput(Throughput::Elements(rows));
        g.bench_function("extract", |b| {
            b.iter(|| extract(black_box(&program), &options).map(|f| f.rows.len()))
        });
        g.bench_function("extract+flatten(take_log)", |b| {
            b.iter(|| extract(black_box(&program), &options).map(|f| flatten_f32(&f, true).len()))
        });
        g.bench_function("parse+extract", |b| {
            b.iter(|| {
                let p = parse(black_box(text)).expect("parses");
                extract(&p, &options).map(|f| f.rows.len())
            })
        });
        g.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
