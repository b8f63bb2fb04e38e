//! Prints the CUDA launches (grid, block, source) that a conversion compiles to; no GPU needed.
//!
//! `cargo run --example print_kernels -p layoutkit-cuda -- NCHW NCHW32c N=2,C=64,H=7,W=7 i8 [i8]`

use layoutkit_core::plan::ConversionPlan;
use layoutkit_core::{parse_format, CastSpec, DType, Dims};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [from, to, dims, st, rest @ ..] = &args[..] else {
        return Err("usage: print_kernels FROM TO DIMS SRC_TYPE [DST_TYPE]".into());
    };
    let dims = Dims::parse(dims)?;
    let src = parse_format(from)?.shaped(&dims)?;
    let dst = parse_format(to)?.shaped(&dims)?;
    let st: DType = st.parse()?;
    let dt: DType = match rest.first() {
        Some(t) => t.parse()?,
        None => st,
    };
    let plan = ConversionPlan::new(&src, &dst)?;
    let cast = CastSpec::new(st, dt, None)?;
    for l in layoutkit_cuda::codegen::generate(&plan, &cast)? {
        println!(
            "// {}: grid {:?}, block {:?}\n{}",
            l.name, l.grid, l.block, l.source
        );
    }
    Ok(())
}
