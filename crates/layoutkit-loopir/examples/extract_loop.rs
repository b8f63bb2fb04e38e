//! Runs the extractor in a loop on an IR file (for profilers): `cargo run --release -p
//! layoutkit-loopir --example extract_loop -- FILE [ITERATIONS]`.

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args.next().expect("usage: extract_loop FILE [ITERATIONS]");
    let n: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let text = std::fs::read_to_string(path).expect("readable file");
    let program = layoutkit_loopir::parse(&text).expect("valid IR");
    let options = Default::default();
    let mut rows = 0;
    let start = std::time::Instant::now();
    for _ in 0..n {
        rows += layoutkit_loopir::features::extract(std::hint::black_box(&program), &options)
            .map(|f| f.rows.len())
            .unwrap_or(0);
    }
    let s = start.elapsed().as_secs_f64();
    println!("{rows} rows in {s:.3} s: {:.0} rows/s", rows as f64 / s);
}
