//! Winograd filter images: MACE's numeric transform `U = G g G^T` (`layoutkit_core::winograd`)
//! followed by an image layout over the transformed tensor (axes `T, O, I`), and back.

use layoutkit_core::plan::check_compatible;
use layoutkit_core::{
    parse_format, winograd, CastSpec, DType, Dims, Error as CoreError, Layout, ShapedLayout,
    Transform,
};

use crate::{convert, Error};

fn block_of(layout: &Layout) -> Result<u8, Error> {
    match layout.transform() {
        Some(Transform::WinogradFilter { block }) => Ok(block),
        None => Err(CoreError::Format {
            input: layout.to_string(),
            reason: "not a Winograd filter layout".into(),
        }
        .into()),
    }
}

/// The filter's layout as plain OIHW with the same dims, and its `(O, I)`.
fn oihw(filter: &ShapedLayout) -> Result<(ShapedLayout, usize, usize), Error> {
    let plain = parse_format("OIHW")?.shaped(&filter.dims())?;
    check_compatible(filter, &plain)?;
    let o = plain.extents()[0];
    let i = plain.extents()[1];
    if plain.extents()[2] != 3 || plain.extents()[3] != 3 {
        return Err(CoreError::DimsMismatch {
            format: filter.layout().to_string(),
            dims: filter.dims().to_string(),
            reason: "the Winograd filter transform takes 3x3 filters (H=3, W=3)".into(),
        }
        .into());
    }
    Ok((plain, o, i))
}

/// The transformed tensor `U[t][o][i]` as a plain `TOI` layout.
fn toi(block: u8, o: usize, i: usize) -> Result<ShapedLayout, Error> {
    let t = winograd::tile(block);
    let dims = Dims::parse(&format!("T={},O={o},I={i}", t * t))?;
    Ok(parse_format("TOI")?.shaped(&dims)?)
}

/// Transforms a 3x3 filter (any layout with axes O, I, H, W) into the Winograd image layout
/// `image` (from `mace:winograd_filter:2` or `:4`), elements of `dst_dtype`. Returns the image's
/// shaped layout and data. The transform runs in f64 and rounds once to `dst_dtype`.
pub fn winograd_filter_to_image(
    filter: &ShapedLayout,
    data: &[u8],
    src_dtype: DType,
    image: &Layout,
    dst_dtype: DType,
) -> Result<(ShapedLayout, Vec<u8>), Error> {
    let block = block_of(image)?;
    let (plain, o, i) = oihw(filter)?;
    let g_bytes = convert(
        filter,
        data,
        &plain,
        &CastSpec::new(src_dtype, DType::F64, None)?,
    )?;
    let g: Vec<f64> = g_bytes
        .chunks_exact(8)
        .map(|b| f64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
        .collect();
    let u = winograd::transform(block, o, i, &g);
    let u_bytes: Vec<u8> = u.iter().flat_map(|v| v.to_le_bytes()).collect();
    let src = toi(block, o, i)?;
    let dst = image.shaped(&src.dims())?;
    let out = convert(
        &src,
        &u_bytes,
        &dst,
        &CastSpec::new(DType::F64, dst_dtype, None)?,
    )?;
    Ok((dst, out))
}

/// The inverse: a Winograd image back to a 3x3 filter in layout `filter` (axes O, I, H, W).
/// Exact in exact arithmetic; in floating point the filter comes back to rounding.
pub fn winograd_image_to_filter(
    image: &ShapedLayout,
    data: &[u8],
    src_dtype: DType,
    filter: &ShapedLayout,
    dst_dtype: DType,
) -> Result<Vec<u8>, Error> {
    let block = block_of(image.layout())?;
    let (plain, o, i) = oihw(filter)?;
    let t = toi(block, o, i)?;
    let u_bytes = convert(
        image,
        data,
        &t,
        &CastSpec::new(src_dtype, DType::F64, None)?,
    )?;
    let u: Vec<f64> = u_bytes
        .chunks_exact(8)
        .map(|b| f64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
        .collect();
    let g = winograd::inverse(block, o, i, &u);
    let g_bytes: Vec<u8> = g.iter().flat_map(|v| v.to_le_bytes()).collect();
    convert(
        &plain,
        &g_bytes,
        filter,
        &CastSpec::new(DType::F64, dst_dtype, None)?,
    )
}
