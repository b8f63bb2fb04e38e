//! Times the int8 convolution against the f32 register-blocked one on ResNet-50's 3x3 layers
//! (stride 1, padding 1), batch 1, NHWC activations and outputs (i32 out for int8, f32 for
//! f32), whole calls on both sides (each packs its filter and prepares its input per call),
//! alternating int8 and f32 runs; prints the median time of each as JSON lines with GOPS
//! (2 * MACs / s) and the int8/f32 speed ratio.
//!
//! `cargo run --release -p layoutkit-cpu --example conv_int8_vs_f32 -- [threads] [rounds]`

use std::time::Instant;

use layoutkit_core::conv::Conv2d;
use layoutkit_core::{parse_format, DType, Dims};
use layoutkit_cpu::{
    conv2d_blocked, conv2d_int8, conv2d_int8_build, ConvKernels, Epilogue, TensorRef,
};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() -> anyhow::Result<()> {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let threads = args.first().copied().unwrap_or(1);
    let rounds = args.get(1).copied().unwrap_or(15);
    let conv = Conv2d {
        padding: [1, 1],
        ..Conv2d::default()
    };
    let ep = Epilogue::default();
    for (c, hw) in [(64usize, 56usize), (128, 28), (256, 14), (512, 7)] {
        let xd = Dims::parse(&format!("N=1,C={c},H={hw},W={hw}"))?;
        let wd = Dims::parse(&format!("O={c},I={c},H=3,W=3"))?;
        let yd = conv.output_dims(&xd, &wd)?;
        let xs = parse_format("NHWC")?.shaped(&xd)?;
        let ws = parse_format("OIHW")?.shaped(&wd)?;
        let ys = parse_format("NHWC")?.shaped(&yd)?;
        let x8: Vec<u8> = (0..xs.elements()).map(|i| (i * 7 % 251) as u8).collect();
        let w8: Vec<u8> = (0..ws.elements()).map(|i| (i * 13 % 253) as u8).collect();
        let xf: Vec<u8> = x8
            .iter()
            .flat_map(|&b| (b as i8 as f32 / 128.0).to_le_bytes())
            .collect();
        let wf: Vec<u8> = w8
            .iter()
            .flat_map(|&b| (b as i8 as f32 / 128.0).to_le_bytes())
            .collect();
        let t = |l, d, data| TensorRef {
            layout: l,
            dtype: d,
            data,
        };
        let macs = (c * c * 9 * hw * hw) as f64;
        let (mut ti, mut tf) = (Vec::new(), Vec::new());
        for _ in 0..rounds {
            let s = Instant::now();
            let a = conv2d_int8(
                &conv,
                t(&xs, DType::I8, &x8),
                t(&ws, DType::I8, &w8),
                &ep,
                &ys,
                DType::I32,
                threads,
                ConvKernels::Auto,
            )?;
            ti.push(s.elapsed().as_secs_f64());
            let s = Instant::now();
            let b = conv2d_blocked(
                &conv,
                t(&xs, DType::F32, &xf),
                t(&ws, DType::F32, &wf),
                &ep,
                &ys,
                DType::F32,
                threads,
                ConvKernels::Auto,
            )?;
            tf.push(s.elapsed().as_secs_f64());
            std::hint::black_box((a, b));
        }
        let (mi, mf) = (median(ti.clone()), median(tf.clone()));
        println!(
            "{}",
            serde_json_line(
                c,
                hw,
                threads,
                conv2d_int8_build(ConvKernels::Auto)?,
                mi,
                mf,
                macs,
                &ti,
                &tf
            )
        );
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn serde_json_line(
    c: usize,
    hw: usize,
    threads: usize,
    build: &str,
    mi: f64,
    mf: f64,
    macs: f64,
    ti: &[f64],
    tf: &[f64],
) -> String {
    let us = |v: &[f64]| {
        v.iter()
            .map(|s| format!("{:.1}", s * 1e6))
            .collect::<Vec<_>>()
            .join(",")
    };
    format!(
        "{{\"layer\":\"C={c},K={c},{hw}x{hw},3x3\",\"threads\":{threads},\"int8_build\":\"{build}\",\
         \"int8_median_us\":{:.1},\"f32_median_us\":{:.1},\"int8_gops\":{:.2},\"f32_gops\":{:.2},\
         \"int8_over_f32_speed\":{:.3},\"int8_us\":[{}],\"f32_us\":[{}]}}",
        mi * 1e6,
        mf * 1e6,
        2.0 * macs / mi / 1e9,
        2.0 * macs / mf / 1e9,
        mf / mi,
        us(ti),
        us(tf)
    )
}
