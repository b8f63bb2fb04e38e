use layoutkit_core::cast::Scalar;
use layoutkit_core::plan::check_compatible;
use layoutkit_core::{CastSpec, ShapedLayout};

use crate::{check_buffers, Error};

/// The reference converter: for every destination offset, the inverse map of `dst` gives a
/// logical coordinate (or padding, which gets the fill value), the forward map of `src` gives
/// the source offset, and the element is cast with `cast`.
///
/// Contract: `src_data` is the physical array of `src` with elements of `cast.src`, `dst_data`
/// the physical array of `dst` with elements of `cast.dst` (errors otherwise); afterwards every
/// destination element holds `cast(source element of the same coordinate)` or, for padding,
/// `dst`'s fill value in `cast.dst`.
pub fn convert_reference(
    src: &ShapedLayout,
    src_data: &[u8],
    dst: &ShapedLayout,
    dst_data: &mut [u8],
    cast: &CastSpec,
) -> Result<(), Error> {
    check_compatible(src, dst)?;
    check_buffers(src, src_data, dst, dst_data, cast)?;
    let perm = dst.axis_permutation_to(src);
    let (ss, ds) = (cast.src.size_bytes(), cast.dst.size_bytes());
    let fill = Scalar::from_f64(cast.dst, dst.layout().fill());
    let mut dst_coord = vec![0usize; dst.axes().len()];
    let mut src_coord = vec![0usize; src.axes().len()];
    for offset in 0..dst.elements() {
        let out = &mut dst_data[offset * ds..];
        if dst.inverse_into(offset, &mut dst_coord) {
            for (i, &c) in dst_coord.iter().enumerate() {
                src_coord[perm[i]] = c;
            }
            let src_offset = src.forward_unchecked(&src_coord);
            cast.apply(Scalar::read(cast.src, &src_data[src_offset * ss..]))
                .write(out);
        } else {
            fill.write(out);
        }
    }
    Ok(())
}
