//! Helpers the CUDA convolution tests share: the device (or a skip), deterministic data, the
//! kernel for a problem, element values for comparisons, and the check of a kernel's paths
//! against the reference convolution.
// Each test binary uses a part of these.
#![allow(dead_code)]

use layoutkit_core::conv::Conv2d;
use layoutkit_core::{parse_format, DType, Dims};
use layoutkit_cpu::{conv2d_reference, Epilogue, TensorRef};
use layoutkit_cuda::conv::{ConvKernel, ConvLayout, ConvShape};
use layoutkit_cuda::{ConvPath, Cuda, Launches};

/// The GPU, or None (the test is skipped) unless LAYOUTKIT_REQUIRE_CUDA=1 asks for one.
pub fn device() -> Option<Cuda> {
    match Cuda::new(0) {
        Ok(c) => Some(c),
        Err(e) => {
            if std::env::var("LAYOUTKIT_REQUIRE_CUDA").as_deref() == Ok("1") {
                panic!("LAYOUTKIT_REQUIRE_CUDA=1 but {e}");
            }
            eprintln!("skipped: {e}");
            None
        }
    }
}

/// A deterministic xorshift stream (the test problems' data).
pub fn xorshift(seed: u64) -> impl Iterator<Item = u64> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    std::iter::repeat_with(move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    })
}

/// int8 values in [-128, 127].
pub fn i8_noise(n: usize, seed: u64) -> Vec<u8> {
    xorshift(seed).take(n).map(|s| (s >> 56) as u8).collect()
}

/// bf16 bit patterns of values in [-1, 1).
pub fn bf16_noise(n: usize, seed: u64) -> Vec<u8> {
    f16_noise(n, seed)
        .chunks_exact(2)
        .flat_map(|c| {
            let v = half::f16::from_le_bytes([c[0], c[1]]).to_f32();
            half::bf16::from_f32(v).to_le_bytes()
        })
        .collect()
}

/// f16 bit patterns of values in [-1, 1) (multiples of 1/64: exact in f16).
pub fn f16_noise(n: usize, seed: u64) -> Vec<u8> {
    xorshift(seed)
        .take(n)
        .flat_map(|s| {
            let v = ((s >> 58) as f32 - 32.0) / 32.0 + ((s >> 20) % 64) as f32 / 2048.0;
            half::f16::from_f32(v).to_le_bytes()
        })
        .collect()
}

/// The elements of `b` (of type `t`) as f64, for comparisons with the reference.
pub fn values(b: &[u8], t: DType) -> Vec<f64> {
    match t {
        DType::F16 => b
            .chunks_exact(2)
            .map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f64())
            .collect(),
        DType::BF16 => b
            .chunks_exact(2)
            .map(|c| half::bf16::from_le_bytes([c[0], c[1]]).to_f64())
            .collect(),
        DType::I32 => b
            .chunks_exact(4)
            .map(|c| i32::from_le_bytes(c.try_into().unwrap()) as f64)
            .collect(),
        DType::I8 => b.iter().map(|&v| v as i8 as f64).collect(),
        _ => b
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()) as f64)
            .collect(),
    }
}

/// One problem: n, c, h, w, o, kernel size, stride, padding, dilation, groups.
pub type Problem = (
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
);

/// The kernel for `problem` in `layout` with `input` -> `out` (a bias for 16-bit inputs and
/// for int8 requantised to i8).
pub fn kernel_for(
    problem: Problem,
    layout: ConvLayout,
    input: DType,
    out: DType,
    relu: bool,
) -> ConvKernel {
    let (n, c, h, w, o, k, stride, pad, dil, groups) = problem;
    let conv = Conv2d {
        stride: [stride; 2],
        padding: [pad; 2],
        dilation: [dil; 2],
        groups,
    };
    let oh = |x: usize| (x + 2 * pad - dil * (k - 1) - 1) / stride + 1;
    ConvKernel {
        shape: ConvShape {
            n,
            h,
            w,
            c,
            o,
            kh: k,
            kw: k,
            oh: oh(h),
            ow: oh(w),
            conv,
        },
        layout,
        out_layout: layout,
        input,
        out,
        bias: input != DType::I8 || out == DType::I8,
        relu,
    }
}

/// Runs `kernel` on each of `paths` with deterministic data (`seed`) and compares its output
/// with the CPU reference convolution: exact for int8, relative error (2-norm) under 1e-2
/// for f16 and bf16 inputs (issue 7's bound). Returns the number of runs checked.
pub fn check(cuda: &Cuda, kernel: &ConvKernel, seed: u64, paths: &[ConvPath], what: &str) -> usize {
    let s = &kernel.shape;
    let (input, out) = (kernel.input, kernel.out);
    let xd = Dims::parse(&format!("N={},C={},H={},W={}", s.n, s.c, s.h, s.w)).unwrap();
    let wd = Dims::parse(&format!(
        "O={},I={},H={},W={}",
        s.o,
        s.c / s.conv.groups,
        s.kh,
        s.kw
    ))
    .unwrap();
    let yd = s.conv.output_dims(&xd, &wd).unwrap();
    let e = |i: usize| yd.entries()[i].1;
    assert_eq!((e(2), e(3)), (s.oh, s.ow), "{what}: output extents");
    let ws = parse_format("OHWI").unwrap().shaped(&wd).unwrap();
    let xs = parse_format(kernel.layout.format())
        .unwrap()
        .shaped(&xd)
        .unwrap();
    let ys = parse_format(kernel.out_layout.format())
        .unwrap()
        .shaped(&yd)
        .unwrap();
    let bias: Vec<f64> = (0..s.o).map(|i| (i % 7) as f64 * 0.5 - 1.5).collect();
    let bias32: Vec<f32> = bias.iter().map(|&v| v as f32).collect();
    // Requantisation scales (f32 values) that take the sums' spread (about 5500 x sqrt(K)
    // for int8 noise) to about 64, so that a few outputs saturate; every fourth negative.
    let terms = (s.c / s.conv.groups.max(1) * s.kh * s.kw) as f64;
    let scale32: Vec<f32> = (0..s.o)
        .map(|i| {
            let f = 64.0 / (5500.0 * terms.sqrt()) * (0.75 + (i % 7) as f64 * 0.1);
            (if i % 4 == 3 { -f } else { f }) as f32
        })
        .collect();
    let scale: Vec<f64> = scale32.iter().map(|&v| v as f64).collect();
    let requant = layoutkit_cuda::conv::requantised(kernel);
    let noise = |n: usize, seed: u64| match input {
        DType::I8 => i8_noise(n, seed),
        DType::BF16 => bf16_noise(n, seed),
        _ => f16_noise(n, seed),
    };
    let (xb, wb) = (noise(xs.elements(), seed), noise(ws.elements(), 100 + seed));
    let ep = Epilogue {
        bias: kernel.bias.then_some(&bias[..]),
        relu: kernel.relu,
        scale: requant.then_some(&scale[..]),
    };
    let tensor = |layout, data| TensorRef {
        layout,
        dtype: input,
        data,
    };
    let want = values(
        &conv2d_reference(&s.conv, tensor(&xs, &xb), tensor(&ws, &wb), &ep, &ys, out).unwrap(),
        out,
    );
    let b = kernel.bias.then_some(&bias32[..]);
    let f = requant.then_some(&scale32[..]);
    for &p in paths {
        let (got, _) = cuda
            .conv2d_timed_with(kernel, p, &xb, &wb, (b, f), 0, Launches::Host(1))
            .unwrap();
        let got = values(&got, out);
        assert_eq!(got.len(), want.len());
        let what = format!(
            "{what} {}->{} {input}->{out} ({p})",
            kernel.layout.format(),
            kernel.out_layout.format()
        );
        if input == DType::I8 {
            assert!(got == want, "{what}: not exact");
            eprintln!("{what}: exact");
        } else {
            let err: f64 = got
                .iter()
                .zip(&want)
                .map(|(a, b)| (a - b) * (a - b))
                .sum::<f64>()
                .sqrt();
            let norm: f64 = want.iter().map(|v| v * v).sum::<f64>().sqrt();
            let rel = err / norm.max(1e-30);
            assert!(rel < 1e-2, "{what}: relative error {rel}");
            eprintln!("{what}: relative error {rel:.2e}");
        }
    }
    paths.len()
}

/// The Hopper kernel with each of `tiles` forced (`(bm, bn, stages, in flight)`), and also with
/// K split among 3 blocks for the tiles at the indices `split` takes.
pub fn hopper_paths(
    tiles: &[(usize, usize, usize, usize)],
    split: impl Fn(usize) -> bool,
) -> Vec<ConvPath> {
    let mut paths = Vec::new();
    for (i, &(bm, bn, st, f)) in tiles.iter().enumerate() {
        let tile = layoutkit_cuda::conv::HopperTile::new(bm, bn, st)
            .and_then(|t| t.with_in_flight(f))
            .expect("a valid tile");
        paths.push(ConvPath::Hopper(tile));
        if split(i) {
            paths.push(ConvPath::Hopper(tile.with_splits(3).expect("3 splits")));
        }
    }
    paths
}

/// `paths` and, after them, the TMA variant of each of the first `limit` Hopper paths that
/// load with `cp.async`, where the TMA kernel takes `kernel` (those tiles are then checked in
/// both kernels; a limit keeps the longest test inside the GPU run's time).
pub fn with_tma_variants(
    kernel: &layoutkit_cuda::conv::ConvKernel,
    paths: Vec<ConvPath>,
    limit: usize,
) -> Vec<ConvPath> {
    let mut all = paths.clone();
    if layoutkit_cuda::conv::tma_applies(kernel) {
        let hopper = paths.into_iter().filter_map(|p| match p {
            ConvPath::Hopper(t) if !t.tma => t.with_tma(true),
            _ => None,
        });
        all.extend(hopper.take(limit).map(ConvPath::Hopper));
    }
    all
}
