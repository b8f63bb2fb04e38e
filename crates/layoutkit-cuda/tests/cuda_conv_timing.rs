//! Timed convolutions: launches captured in a CUDA graph and launches queued from the host give
//! the output of a single untimed run, bit for bit, on every kernel path (the split-K reduction
//! and the TMA kernel's tensor maps included), and one time per repetition. Skipped without a
//! GPU unless LAYOUTKIT_REQUIRE_CUDA=1.

use layoutkit_core::DType;
use layoutkit_cuda::conv::{ConvLayout, HopperTile};
use layoutkit_cuda::{ConvPath, Launches};

mod common;
use common::{device, f16_noise, kernel_for};

#[test]
fn graph_and_host_timing_run_the_same_convolution() {
    let Some(cuda) = device() else { return };
    let kernel = kernel_for(
        (2, 128, 14, 14, 96, 3, 1, 1, 1, 1),
        ConvLayout::Nhwc,
        DType::F16,
        DType::F16,
        true,
    );
    let s = kernel.shape;
    let x = f16_noise(s.n * s.h * s.w * s.c, 5);
    let w = f16_noise(s.o * s.kh * s.kw * s.c, 6);
    let bias: Vec<f32> = (0..s.o).map(|i| i as f32 * 0.01).collect();
    let mut paths = vec![cuda.conv_path(&kernel).unwrap(), ConvPath::TensorCore];
    let hopper = matches!(paths[0], ConvPath::Hopper(_));
    if hopper {
        let tile = HopperTile::new(64, 64, 4).unwrap();
        for t in [
            tile.with_splits(3),
            tile.with_tma(true).and_then(|t| t.with_splits(3)),
        ] {
            paths.push(ConvPath::Hopper(t.unwrap()));
        }
    }
    for path in paths {
        let run = |repeats, launches| {
            cuda.conv2d_timed_with(
                &kernel,
                path,
                &x,
                &w,
                (Some(&bias), None),
                repeats,
                launches,
            )
            .unwrap()
        };
        let (once, none) = run(0, Launches::Host(1));
        assert!(none.seconds.is_empty(), "{path}: no repetitions, no times");
        for launches in [Launches::Graph(4), Launches::Host(4)] {
            let (y, timing) = run(3, launches);
            assert_eq!(y, once, "{path} timed with {launches:?}");
            assert_eq!(timing.seconds.len(), 3, "{path} {launches:?}");
            assert!(timing.seconds.iter().all(|&t| t > 0.0 && t.is_finite()));
        }
    }
}
