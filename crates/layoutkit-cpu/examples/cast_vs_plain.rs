//! Times a conversion from f32 to several destination types in one process, alternating them
//! round by round on the same buffers: unlike separate `layoutkit bench` runs, every type sees
//! the same physical pages and the same machine state, so their time ratios are steadier on a
//! shared machine (bench/results/cpu.md, casting section).
//!
//! Usage: cargo run --release -p layoutkit-cpu --example cast_vs_plain -- FROM TO DIMS THREADS
//!        ROUNDS TYPE... (e.g. `NCHW NHWC N=16,C=256,H=96,W=96 1 8 f32 f16 i8`)
//!
//! Each round times each type six times and keeps the median of the last five; the report is
//! the median over the rounds, its GB/s (bytes read + written) and the first type's time over
//! each type's time (the speed ratio in elements per second).

use std::time::Instant;

use layoutkit_core::plan::ConversionPlan;
use layoutkit_core::{parse_format, CastSpec, DType, Dims};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [from, to, dims, threads, rounds, types @ ..] = &args[..] else {
        return Err("usage: cast_vs_plain FROM TO DIMS THREADS ROUNDS TYPE...".into());
    };
    let (threads, rounds): (usize, usize) = (threads.parse()?, rounds.parse()?);
    let types: Vec<DType> = types.iter().map(|t| t.parse()).collect::<Result<_, _>>()?;
    if types.is_empty() || rounds == 0 {
        return Err("give at least one TYPE and one round".into());
    }
    let dims = Dims::parse(dims)?;
    let (src, dst) = (
        parse_format(from)?.shaped(&dims)?,
        parse_format(to)?.shaped(&dims)?,
    );
    let plan = ConversionPlan::new(&src, &dst)?;
    let src_bytes = src.bytes(DType::F32)?;
    let mut data = layoutkit_cpu::AlignedBuf::zeroed(src_bytes);
    for (i, v) in data.iter_mut().enumerate() {
        *v = (i.wrapping_mul(2654435761) >> 13) as u8 & 0x3f;
    }
    let mut outs = Vec::new();
    for t in &types {
        outs.push(layoutkit_cpu::AlignedBuf::zeroed(dst.bytes(*t)?));
    }
    let mut times = vec![Vec::new(); types.len()];
    for _ in 0..rounds {
        for (k, t) in types.iter().enumerate() {
            let cast = CastSpec::new(DType::F32, *t, None)?;
            let mut reps = Vec::new();
            for _ in 0..6 {
                let t0 = Instant::now();
                layoutkit_cpu::convert_fast(&plan, &data, &mut outs[k], &cast, threads)?;
                reps.push(t0.elapsed().as_secs_f64());
            }
            times[k].push(median(reps[1..].to_vec()));
        }
    }
    let medians: Vec<f64> = times.into_iter().map(median).collect();
    for (k, t) in types.iter().enumerate() {
        let bytes = (src_bytes + dst.bytes(*t)?) as f64;
        println!(
            "{from}->{to} f32>{t} threads {threads}: {:.3} ms, {:.2} GB/s, speed {:.0}% of f32>{}",
            medians[k] * 1e3,
            bytes / medians[k] / 1e9,
            medians[0] / medians[k] * 100.0,
            types[0],
        );
    }
    Ok(())
}
