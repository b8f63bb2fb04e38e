//! Stream-K (`layoutkit_cuda::conv::stream_k`) against the CPU reference convolution, and
//! a prepared convolution run twice on one workspace with different inputs. Skipped without a
//! Hopper GPU unless LAYOUTKIT_REQUIRE_CUDA=1 (which then also requires sm_90).

use cudarc::driver::{CudaContext, DevicePtr, DevicePtrMut};
use layoutkit_core::DType;
use layoutkit_cuda::conv::{channel_params, tma_applies, ConvKernel, ConvLayout, HopperTile};
use layoutkit_cuda::{ConvPath, Launches};

mod common;
use common::{check, device, f16_noise, kernel_for, Problem};

/// Whether this GPU runs the TMA kernel (panics under LAYOUTKIT_REQUIRE_CUDA=1 if not).
fn hopper(cuda: &layoutkit_cuda::Cuda) -> bool {
    let k = kernel_for(
        (1, 64, 16, 16, 64, 3, 1, 1, 1, 1),
        ConvLayout::Nhwc,
        DType::F16,
        DType::F16,
        false,
    );
    let on = matches!(cuda.conv_path(&k), Ok(ConvPath::Hopper(t)) if t.tma);
    if !on && std::env::var("LAYOUTKIT_REQUIRE_CUDA").as_deref() == Ok("1") {
        panic!("LAYOUTKIT_REQUIRE_CUDA=1: the TMA kernel needs an sm_90 GPU");
    }
    on
}

/// The kernel of `problem` reading NHWC activations and writing `out_layout`.
fn nhwc_input(
    problem: Problem,
    input: DType,
    out: DType,
    relu: bool,
    out_layout: ConvLayout,
) -> ConvKernel {
    ConvKernel {
        out_layout,
        ..kernel_for(problem, ConvLayout::Nhwc, input, out, relu)
    }
}

/// Stream-K (`conv::stream_k`): blocks sharing the K steps of all tiles, so tiles split among
/// blocks (a tile's later steps in the blocks after it, added by the head): few tiles of many
/// steps (down to one step per block), 1x1 and 3x3, O past a tile, many tiles of one step
/// (whole tiles only), f16, bf16 and int8 (i32 sums and requantised i8), NHWC and NCHW
/// outputs, tiles of one, two (128 and 256 rows) and three warpgroups.
#[test]
fn stream_k_matches_the_reference() {
    let Some(cuda) = device() else { return };
    if !hopper(&cuda) {
        return;
    }
    use ConvLayout::*;
    let problems: [(Problem, DType, DType, ConvLayout); 8] = [
        (
            (8, 512, 7, 7, 256, 1, 1, 0, 1, 1),
            DType::F16,
            DType::F16,
            Nhwc,
        ),
        (
            (16, 1024, 7, 7, 256, 1, 1, 0, 1, 1),
            DType::F16,
            DType::F32,
            Nhwc,
        ),
        (
            (4, 128, 14, 14, 200, 3, 1, 1, 1, 1),
            DType::BF16,
            DType::BF16,
            Nhwc,
        ),
        (
            (8, 256, 14, 14, 256, 3, 1, 1, 1, 1),
            DType::I8,
            DType::I32,
            Nhwc,
        ),
        (
            (8, 256, 7, 7, 256, 1, 1, 0, 1, 1),
            DType::I8,
            DType::I8,
            Nhwc,
        ),
        (
            (8, 512, 7, 7, 128, 1, 1, 0, 1, 1),
            DType::F16,
            DType::F16,
            Nchw,
        ),
        (
            (6, 64, 56, 56, 256, 1, 1, 0, 1, 1),
            DType::F16,
            DType::F16,
            Nhwc,
        ),
        (
            (8, 256, 14, 14, 512, 3, 2, 1, 1, 1),
            DType::F16,
            DType::F16,
            Nhwc,
        ),
    ];
    let tiles = [(128, 128, 4), (64, 64, 4), (256, 128, 4), (192, 128, 4)];
    let mut checked = 0;
    for (i, (problem, input, out, out_layout)) in problems.into_iter().enumerate() {
        let kernel = nhwc_input(problem, input, out, i % 2 == 0, out_layout);
        assert!(tma_applies(&kernel), "{problem:?}");
        let mut paths = Vec::new();
        for (bm, bn, stages) in tiles {
            if bn > kernel.shape.o.max(64) {
                continue;
            }
            let Some(t) = HopperTile::new(bm, bn, stages)
                .and_then(|t| t.with_tma(true))
                .and_then(|t| t.with_stream_k(&kernel))
            else {
                continue;
            };
            paths.push(ConvPath::Hopper(t));
        }
        assert!(!paths.is_empty(), "{problem:?}");
        checked += check(&cuda, &kernel, 40 + i as u64, &paths, "stream-K");
    }
    eprintln!("{checked} stream-K convolutions checked");
}

/// One prepared stream-K convolution run on inputs A then B (its workspace's flags lowered by
/// the first run's heads as they read them) gives B's output of a fresh preparation, bit for
/// bit (the partial sums are added in block order).
#[test]
fn a_prepared_stream_k_convolution_runs_again_on_new_inputs() {
    let Some(cuda) = device() else { return };
    if !hopper(&cuda) {
        return;
    }
    // 8 tiles of 128 x 128 and 8 steps: one step per block, tiles split among 8 blocks.
    let kernel = kernel_for(
        (8, 512, 7, 7, 256, 1, 1, 0, 1, 1),
        ConvLayout::Nhwc,
        DType::F16,
        DType::F16,
        true,
    );
    let tile = HopperTile::new(128, 128, 4)
        .and_then(|t| t.with_tma(true))
        .and_then(|t| t.with_stream_k(&kernel))
        .unwrap();
    let path = ConvPath::Hopper(tile);
    let s = &kernel.shape;
    let w = f16_noise(s.o * s.c, 7);
    let bias: Vec<f32> = (0..s.o).map(|i| i as f32 * 0.01).collect();
    let inputs = [
        f16_noise(s.n * s.h * s.w * s.c, 1),
        f16_noise(s.n * s.h * s.w * s.c, 2),
    ];
    let fresh: Vec<Vec<u8>> = inputs
        .iter()
        .map(|x| {
            cuda.conv2d_timed_with(
                &kernel,
                path,
                x,
                &w,
                (Some(&bias), None),
                0,
                Launches::Host(1),
            )
            .unwrap()
            .0
        })
        .collect();
    assert_ne!(fresh[0], fresh[1]);
    let conv = cuda.prepare_conv_with(&kernel, path).unwrap();
    let (xb, wb, yb) = conv.bytes();
    let ctx = CudaContext::new(0).unwrap();
    let stream = ctx.default_stream();
    let d_w = stream.clone_htod(&w).unwrap();
    let d_b = stream
        .clone_htod(&channel_params(&kernel, Some(&bias), None))
        .unwrap();
    let mut d_y = stream.alloc_zeros::<u8>(yb).unwrap();
    for (x, want) in inputs.iter().zip(&fresh) {
        let d_x = stream.clone_htod(x).unwrap();
        {
            let (xp, _x) = d_x.device_ptr(&stream);
            let (wp, _w) = d_w.device_ptr(&stream);
            let (bp, _b) = d_b.device_ptr(&stream);
            let (yp, _y) = d_y.device_ptr_mut(&stream);
            // SAFETY: buffers of the sizes `conv` names, allocated in device 0's primary
            // context (the one `cuda` runs in), alive until the stream synchronises below;
            // the runs are queued on one stream, so they do not overlap.
            unsafe {
                cuda.conv2d_on_stream(&conv, (xp, xb), (wp, wb), bp, (yp, yb), stream.cu_stream())
                    .unwrap();
            }
        }
        stream.synchronize().unwrap();
        let got = stream.clone_dtoh(&d_y).unwrap();
        assert!(
            &got == want,
            "a second run on the workspace differs from a fresh one"
        );
    }
    eprintln!(
        "stream-K: two runs on one workspace match fresh ones on {}",
        cuda.name()
    );
}
