//! Writes a conversion's launches, a noise source and the reference converter's output to a
//! folder, for running the generated kernels outside CUDA (the CPU emulation in
//! `bench/results/raw/2026-12-02-h200-cuda-sweep/emulate.py`).
//!
//! `cargo run --example dump_conversion -p layoutkit-cuda -- FROM TO DIMS SRC_TYPE DST_TYPE DIR
//! [MULTIPROCESSORS]` (the kernels planned for that many multiprocessors; 132 by default)

use layoutkit_core::plan::ConversionPlan;
use layoutkit_core::{parse_format, CastSpec, DType, Dims};
use std::fmt::Write;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [from, to, dims, st, dt, dir, rest @ ..] = &args[..] else {
        return Err("usage: dump_conversion FROM TO DIMS SRC_TYPE DST_TYPE DIR [SMS]".into());
    };
    let mut tuning = layoutkit_cuda::codegen::Tuning::default();
    if let Some(n) = rest.first() {
        tuning.multiprocessors = n.parse()?;
    }
    let dims = Dims::parse(dims)?;
    let src = parse_format(from)?.shaped(&dims)?;
    let dst = parse_format(to)?.shaped(&dims)?;
    let (st, dt): (DType, DType) = (st.parse()?, dt.parse()?);
    let plan = ConversionPlan::new(&src, &dst)?;
    let cast = CastSpec::new(st, dt, None)?;
    let data = layoutkit_testkit::noise_bytes(src.bytes(st)?, 7);
    let mut want = vec![0u8; dst.bytes(dt)?];
    layoutkit_cpu::convert_reference(&src, &data, &dst, &mut want, &cast)?;
    std::fs::create_dir_all(dir)?;
    let mut list = String::new();
    for (i, l) in layoutkit_cuda::codegen::generate_tuned(&plan, &cast, &tuning)?
        .iter()
        .enumerate()
    {
        std::fs::write(format!("{dir}/k{i}.cu"), &l.source)?;
        let _ = writeln!(list, "{} {} {} {}", l.name, l.grid.0, l.block.0, i);
    }
    std::fs::write(format!("{dir}/launches.txt"), list)?;
    std::fs::write(format!("{dir}/src.bin"), &data)?;
    std::fs::write(format!("{dir}/want.bin"), &want)?;
    let fill = layoutkit_cuda::codegen::fill_bits(&plan, dt);
    std::fs::write(
        format!("{dir}/meta.txt"),
        format!("{fill} {} {}\n", st.size_bytes(), dt.size_bytes()),
    )?;
    Ok(())
}
