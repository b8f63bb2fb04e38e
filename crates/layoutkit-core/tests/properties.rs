//! Property tests of the layout model's contracts.

use layoutkit_core::plan::{ConversionPlan, Strategy as PlanStrategy};
use layoutkit_core::{parse_format, ShapedLayout};
use layoutkit_testkit::{arb_axes, arb_dims, arb_layout, arb_pair, onednn_name};
use proptest::prelude::*;

const MAX_ELEMENTS: usize = 40_000;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn parse_print_round_trip(layout in arb_axes(1..=8).prop_flat_map(arb_layout)) {
        let text = layout.to_string();
        prop_assert_eq!(parse_format(&text).unwrap(), layout.clone());
        let dnnl = onednn_name(&layout);
        prop_assert_eq!(parse_format(&dnnl).unwrap(), layout);
    }

    #[test]
    fn inverse_of_forward_is_identity(
        (layout, dims) in arb_axes(1..=4).prop_flat_map(|a| (arb_layout(a.clone()), arb_dims(a, 7)))
    ) {
        let s = layout.shaped(&dims).unwrap();
        prop_assume!(s.elements() <= MAX_ELEMENTS);
        let mut hit = vec![false; s.elements()];
        let mut coord = vec![0usize; s.extents().len()];
        let mut logical = 0usize;
        // Every coordinate: forward is in range, injective, and inverse gives it back.
        'outer: while s.logical_elements() > 0 {
            let off = s.forward(&coord).unwrap();
            prop_assert!(!hit[off]);
            hit[off] = true;
            prop_assert_eq!(s.inverse(off).unwrap(), Some(coord.clone()));
            logical += 1;
            for k in (0..coord.len()).rev() {
                coord[k] += 1;
                if coord[k] < s.extents()[k] { continue 'outer; }
                coord[k] = 0;
            }
            break;
        }
        prop_assert_eq!(logical, s.logical_elements());
        // Every offset forward does not reach is padding.
        for (off, &h) in hit.iter().enumerate() {
            prop_assert_eq!(s.inverse(off).unwrap().is_some(), h);
        }
        // Strides are row-major over the physical shape.
        let shape = s.physical_shape();
        let strides = s.strides();
        for k in 0..shape.len() {
            let want: usize = shape[k + 1..].iter().product();
            prop_assert_eq!(strides[k] as usize, want);
        }
    }

    #[test]
    fn plan_regions_cover_every_destination_offset_once((a, b, dims) in arb_pair(7)) {
        let src = a.shaped(&dims).unwrap();
        let dst = b.shaped(&dims).unwrap();
        prop_assume!(dst.elements() <= MAX_ELEMENTS && src.elements() <= MAX_ELEMENTS);
        let plan = ConversionPlan::new(&src, &dst).unwrap();
        if let PlanStrategy::Regions { copies, fills } = plan.strategy() {
            let mut seen = vec![0u8; dst.elements()];
            let perm = dst.axis_permutation_to(&src);
            for (region, is_fill) in copies.iter().map(|r| (r, false)).chain(fills.iter().map(|r| (r, true))) {
                let inner = region.inner();
                let mut runs = Vec::new();
                region.for_each_run(|s, d| runs.push((s, d)));
                for (s0, d0) in runs {
                    for k in 0..inner.extent {
                        let d = (d0 as isize + k as isize * inner.dst_stride) as usize;
                        seen[d] += 1;
                        let coord = dst.inverse(d).unwrap();
                        if is_fill {
                            prop_assert!(coord.is_none());
                        } else {
                            let coord = coord.expect("copies write logical elements");
                            let mut sc = vec![0; coord.len()];
                            for (i, &c) in coord.iter().enumerate() { sc[perm[i]] = c; }
                            let s = (s0 as isize + k as isize * inner.src_stride) as usize;
                            prop_assert_eq!(s, src.forward(&sc).unwrap());
                        }
                    }
                }
            }
            prop_assert!(seen.iter().all(|&n| n == 1));
        }
    }

    #[test]
    fn physical_shape_infers_back_to_the_dims_when_unpadded(
        (layout, dims) in arb_axes(1..=4).prop_flat_map(|a| (arb_layout(a.clone()), arb_dims(a, 7)))
    ) {
        let s = layout.shaped(&dims).unwrap();
        let inferred = ShapedLayout::infer_dims(&layout, &s.physical_shape()).unwrap();
        let again = layout.shaped(&inferred).unwrap();
        prop_assert_eq!(again.physical_shape(), s.physical_shape());
        if !s.has_padding() {
            prop_assert!(again.same_dims(&s));
        }
    }
}

#[test]
fn non_nesting_blocks_plan_per_element() {
    let dims = layoutkit_core::Dims::parse("N=1,C=7,H=2,W=2").unwrap();
    let a = parse_format("NCHW3c").unwrap().shaped(&dims).unwrap();
    let b = parse_format("NCHW4c").unwrap().shaped(&dims).unwrap();
    let plan = ConversionPlan::new(&a, &b).unwrap();
    assert_eq!(plan.strategy(), &PlanStrategy::PerElement);
}

#[test]
fn plans_need_the_same_axes_and_dims() {
    let d4 = layoutkit_core::Dims::parse("N=1,C=2,H=3,W=4").unwrap();
    let a = parse_format("NCHW").unwrap().shaped(&d4).unwrap();
    let b = parse_format("OIHW")
        .unwrap()
        .shaped(&layoutkit_core::Dims::parse("O=1,I=2,H=3,W=4").unwrap())
        .unwrap();
    let err = ConversionPlan::new(&a, &b).unwrap_err().to_string();
    assert!(err.contains("NCHW") && err.contains("OIHW"), "{err}");
    let c = parse_format("NHWC")
        .unwrap()
        .shaped(&layoutkit_core::Dims::parse("N=1,C=3,H=3,W=4").unwrap())
        .unwrap();
    assert!(ConversionPlan::new(&a, &c).is_err());
}
