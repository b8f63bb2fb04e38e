use layoutkit_core::cast::Scalar;
use layoutkit_core::plan::{ConversionPlan, LoopDim, Region, Strategy};
use layoutkit_core::CastSpec;

use crate::{check_buffers, Error};

/// Runs `plan` on the CPU (one thread).
///
/// Contract: as [`crate::convert_reference`], with the same result bit for bit.
pub fn convert_planned(
    plan: &ConversionPlan,
    src_data: &[u8],
    dst_data: &mut [u8],
    cast: &CastSpec,
) -> Result<(), Error> {
    check_buffers(plan.src(), src_data, plan.dst(), dst_data, cast)?;
    let fill = Scalar::from_f64(cast.dst, plan.dst().layout().fill());
    let mut fill_bytes = [0u8; 8];
    fill.write(&mut fill_bytes);
    let fill_bytes = &fill_bytes[..cast.dst.size_bytes()];
    match plan.strategy() {
        Strategy::Regions { copies, fills } => {
            for region in copies {
                copy_region(region, src_data, dst_data, cast);
            }
            for region in fills {
                fill_region(region, dst_data, fill_bytes);
            }
        }
        Strategy::PerElement => per_element(plan, src_data, dst_data, cast, fill_bytes),
    }
    Ok(())
}

fn copy_region(region: &Region, src: &[u8], dst: &mut [u8], cast: &CastSpec) {
    let inner = region.inner();
    region.for_each_run(|s, d| {
        if cast.is_identity() {
            copy_run(src, s, dst, d, inner, cast.src.size_bytes());
        } else {
            cast_run(src, s, dst, d, inner, cast);
        }
    });
}

fn copy_run(src: &[u8], s: usize, dst: &mut [u8], d: usize, inner: LoopDim, size: usize) {
    if inner.src_stride == 1 && inner.dst_stride == 1 {
        let n = inner.extent * size;
        dst[d * size..d * size + n].copy_from_slice(&src[s * size..s * size + n]);
        return;
    }
    match size {
        1 => strided::<1>(src, s, dst, d, inner),
        2 => strided::<2>(src, s, dst, d, inner),
        4 => strided::<4>(src, s, dst, d, inner),
        _ => strided::<8>(src, s, dst, d, inner),
    }
}

fn strided<const N: usize>(src: &[u8], s: usize, dst: &mut [u8], d: usize, inner: LoopDim) {
    let (mut s, mut d) = (s as isize, d as isize);
    for _ in 0..inner.extent {
        let (su, du) = (s as usize * N, d as usize * N);
        dst[du..du + N].copy_from_slice(&src[su..su + N]);
        s += inner.src_stride;
        d += inner.dst_stride;
    }
}

fn cast_run(src: &[u8], s: usize, dst: &mut [u8], d: usize, inner: LoopDim, cast: &CastSpec) {
    let (ss, ds) = (
        cast.src.size_bytes() as isize,
        cast.dst.size_bytes() as isize,
    );
    let (mut s, mut d) = (s as isize, d as isize);
    for _ in 0..inner.extent {
        let v = Scalar::read(cast.src, &src[(s * ss) as usize..]);
        cast.apply(v).write(&mut dst[(d * ds) as usize..]);
        s += inner.src_stride;
        d += inner.dst_stride;
    }
}

fn fill_region(region: &Region, dst: &mut [u8], fill: &[u8]) {
    let inner = region.inner();
    let size = fill.len() as isize;
    region.for_each_run(|_, d| {
        let mut d = d as isize;
        for _ in 0..inner.extent {
            let at = (d * size) as usize;
            dst[at..at + fill.len()].copy_from_slice(fill);
            d += inner.dst_stride;
        }
    });
}

/// For layouts whose blocks do not nest: walk the destination's physical index like an
/// odometer, keeping each axis's logical index up to date incrementally.
fn per_element(
    plan: &ConversionPlan,
    src_data: &[u8],
    dst_data: &mut [u8],
    cast: &CastSpec,
    fill: &[u8],
) {
    let (src, dst) = (plan.src(), plan.dst());
    let phys = dst.phys_dims();
    let perm = dst.axis_permutation_to(src);
    let mut idx = vec![0usize; phys.len()];
    let mut logical = vec![0usize; dst.axes().len()];
    let mut src_coord = vec![0usize; src.axes().len()];
    let (ss, ds) = (cast.src.size_bytes(), cast.dst.size_bytes());
    for offset in 0..dst.elements() {
        let out = &mut dst_data[offset * ds..(offset + 1) * ds];
        if logical.iter().zip(dst.extents()).all(|(l, e)| l < e) {
            for (i, &l) in logical.iter().enumerate() {
                src_coord[perm[i]] = l;
            }
            let so = src.forward_unchecked(&src_coord);
            cast.apply(Scalar::read(cast.src, &src_data[so * ss..]))
                .write(out);
        } else {
            out.copy_from_slice(fill);
        }
        for k in (0..phys.len()).rev() {
            idx[k] += 1;
            logical[phys[k].axis] += phys[k].weight;
            if idx[k] < phys[k].extent {
                break;
            }
            logical[phys[k].axis] -= phys[k].weight * phys[k].extent;
            idx[k] = 0;
        }
    }
}
