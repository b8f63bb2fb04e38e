//! Strided convolutions of few channels through space to depth
//! (`layoutkit_cuda::conv::space_to_depth`) against the CPU reference convolution: the 7x7/2
//! stem, 3x3/2, 5x5/2 over one channel, a stride of 2 on one axis only, 4x4/4 and 16x16/16
//! patches, odd planes; f16, bf16 and int8 (i32 sums and requantised i8); NHWC and NCHW
//! activations and outputs; the rule's tile and forced tiles in both Hopper kernels.
//! Skipped without a Hopper GPU unless LAYOUTKIT_REQUIRE_CUDA=1 (which then also requires
//! sm_90).

use layoutkit_core::DType;
use layoutkit_cuda::conv::space_to_depth::space_to_depth_problem;
use layoutkit_cuda::conv::{tma_applies, ConvKernel, ConvLayout, HopperTile};
use layoutkit_cuda::conv_plan::hopper_tile;
use layoutkit_cuda::ConvPath;

mod common;
use common::{check, device, kernel_for};

/// The problem's kernel with the output in `out_layout` and the stride `stride` ([H, W]).
fn with(mut k: ConvKernel, out_layout: ConvLayout, stride: [usize; 2]) -> ConvKernel {
    let s = &mut k.shape;
    s.conv.stride = stride;
    let out = |x: usize, k: usize, st: usize, p: usize| (x + 2 * p - k) / st + 1;
    s.oh = out(s.h, s.kh, stride[0], s.conv.padding[0]);
    s.ow = out(s.w, s.kw, stride[1], s.conv.padding[1]);
    k.out_layout = out_layout;
    k
}

#[test]
fn strided_convolutions_of_few_channels_through_space_to_depth_match_the_reference() {
    let Some(cuda) = device() else { return };
    // The rule regroups the stem at batch 1 (118 M multiply-adds), not a small one.
    let stem = |n, hw| {
        kernel_for(
            (n, 3, hw, hw, 64, 7, 2, 3, 1, 1),
            ConvLayout::Nhwc,
            DType::F16,
            DType::F16,
            true,
        )
    };
    if !matches!(cuda.conv_path(&stem(1, 224)), Ok(ConvPath::SpaceToDepth(_))) {
        if std::env::var("LAYOUTKIT_REQUIRE_CUDA").as_deref() == Ok("1") {
            panic!("LAYOUTKIT_REQUIRE_CUDA=1: space to depth needs an sm_90 GPU");
        }
        eprintln!("skipped: space to depth runs on sm_90 GPUs");
        return;
    }
    assert!(matches!(
        cuda.conv_path(&stem(1, 64)),
        Ok(ConvPath::Hopper(_))
    ));
    use ConvLayout::{Nchw, Nhwc};
    use DType::{BF16, F16, F32, I32, I8};
    // (problem, layout, input, output type, output layout, stride [H, W]).
    let cases = [
        (
            (2, 3, 38, 38, 64, 7, 2, 3, 1, 1),
            Nhwc,
            F16,
            F16,
            Nhwc,
            [2, 2],
        ),
        (
            (2, 3, 38, 38, 64, 7, 2, 3, 1, 1),
            Nhwc,
            F16,
            F16,
            Nchw,
            [2, 2],
        ),
        (
            (2, 3, 37, 29, 64, 7, 2, 3, 1, 1),
            Nchw,
            F16,
            F16,
            Nchw,
            [2, 2],
        ),
        (
            (3, 3, 33, 33, 32, 3, 2, 1, 1, 1),
            Nhwc,
            BF16,
            F32,
            Nhwc,
            [2, 2],
        ),
        (
            (2, 1, 27, 31, 16, 5, 2, 2, 1, 1),
            Nhwc,
            F16,
            F32,
            Nhwc,
            [2, 2],
        ),
        (
            (2, 4, 20, 23, 24, 3, 2, 1, 1, 1),
            Nhwc,
            F16,
            F16,
            Nhwc,
            [2, 1],
        ),
        (
            (2, 3, 32, 36, 96, 4, 4, 0, 1, 1),
            Nchw,
            BF16,
            BF16,
            Nchw,
            [4, 4],
        ),
        (
            (1, 3, 64, 48, 72, 16, 16, 0, 1, 1),
            Nhwc,
            F16,
            F16,
            Nhwc,
            [16, 16],
        ),
        (
            (2, 3, 38, 38, 64, 7, 2, 3, 1, 1),
            Nhwc,
            I8,
            I32,
            Nhwc,
            [2, 2],
        ),
        (
            (2, 3, 35, 35, 64, 7, 2, 3, 1, 1),
            Nhwc,
            I8,
            I8,
            Nhwc,
            [2, 2],
        ),
        (
            (2, 8, 30, 30, 48, 3, 2, 1, 1, 1),
            Nhwc,
            I8,
            I8,
            Nhwc,
            [2, 2],
        ),
    ];
    let mut runs = 0;
    for (i, (p, layout, input, out, out_layout, stride)) in cases.into_iter().enumerate() {
        let k = with(kernel_for(p, layout, input, out, true), out_layout, stride);
        let inner = space_to_depth_problem(&k).expect("regrouped");
        // The rule's tile for the regrouped problem, and forced tiles in the cp.async kernel
        // and (where it takes the regrouped problem) the TMA kernel.
        let mut paths = vec![ConvPath::SpaceToDepth(hopper_tile(&inner).unwrap())];
        for (bm, bn, st) in [(128, 64, 3), (64, 128, 4)] {
            let t = HopperTile::new(bm, bn, st).expect("a valid tile");
            paths.push(ConvPath::SpaceToDepth(t));
            if tma_applies(&inner) {
                paths.push(ConvPath::SpaceToDepth(t.with_tma(true).expect("TMA tile")));
            }
        }
        paths.dedup();
        runs += check(
            &cuda,
            &k,
            40 + i as u64,
            &paths,
            &format!("space to depth {i}"),
        );
    }
    eprintln!("{runs} convolutions through space to depth checked");
}
