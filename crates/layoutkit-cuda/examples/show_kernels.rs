//! Prints the CUDA kernels generated for a conversion (no GPU needed):
//! `cargo run -p layoutkit-cuda --example show_kernels -- FROM TO DIMS [DTYPE | SRC>DST]`.

use layoutkit_core::plan::ConversionPlan;
use layoutkit_core::{parse_format, CastSpec, DType, Dims};

fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    if a.len() < 3 {
        eprintln!("usage: show_kernels FROM TO DIMS [DTYPE]");
        std::process::exit(2);
    }
    let dims = Dims::parse(&a[2]).expect("dims");
    // DTYPE is one type (a copy) or SRC>DST (a cast, without scale).
    let types: Vec<DType> = a
        .get(3)
        .map_or("f32", |s| s.as_str())
        .split('>')
        .map(|s| s.parse().expect("dtype"))
        .collect();
    let cast = CastSpec::new(types[0], *types.last().unwrap(), None).expect("cast");
    let src = parse_format(&a[0])
        .expect("format")
        .shaped(&dims)
        .expect("shape");
    let dst = parse_format(&a[1])
        .expect("format")
        .shaped(&dims)
        .expect("shape");
    let plan = ConversionPlan::new(&src, &dst).expect("plan");
    for l in layoutkit_cuda::codegen::generate(&plan, &cast).expect("kernels") {
        println!("// grid {:?} block {:?}\n{}", l.grid, l.block, l.source);
    }
}
