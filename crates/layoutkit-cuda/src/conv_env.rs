//! The environment variables that override the convolution's tile rules on Hopper GPUs
//! (`LAYOUTKIT_CONV_TILE`, `LAYOUTKIT_CONV_SPLITK`, `LAYOUTKIT_CONV_WIDE_SPLIT_STEPS`), read by
//! [`crate::Cuda::conv_path`] for A/B runs.

use crate::conv::HopperTile;
use crate::Error;

/// The tile a Hopper path runs: `forced` (from `LAYOUTKIT_CONV_TILE`) with the splits of K
/// [`crate::conv::splitk::splits_for`] gives it over `steps`, else `plan()`'s; then
/// `LAYOUTKIT_CONV_SPLITK`'s splits where set.
pub(crate) fn with_env_splits(
    forced: Option<HopperTile>,
    shape: &crate::conv::ConvShape,
    steps: usize,
    plan: impl FnOnce() -> Result<HopperTile, Error>,
) -> Result<HopperTile, Error> {
    let tile = match forced {
        Some(t) => t
            .with_splits(crate::conv::splitk::splits_for(&t, shape, steps))
            .expect("splits_for stays in range"),
        None => plan()?,
    };
    Ok(match splits_from_env()? {
        Some(splits) => tile
            .with_splits(splits)
            .expect("checked by splits_from_env"),
        None => tile,
    })
}

/// The Hopper tile `LAYOUTKIT_CONV_TILE` asks for (`BMxBNxSTAGES`, e.g. `128x128x4`, or
/// `BMxBNxSTAGESx0` for no multiplies in flight across steps), if set.
pub(crate) fn tile_from_env() -> Result<Option<HopperTile>, Error> {
    let v = std::env::var("LAYOUTKIT_CONV_TILE").unwrap_or_default();
    if v.is_empty() {
        return Ok(None);
    }
    let parts: Vec<usize> = v.split('x').filter_map(|p| p.parse().ok()).collect();
    let tile = match parts[..] {
        [bm, bn, st] => HopperTile::new(bm, bn, st),
        [bm, bn, st, f] => HopperTile::new(bm, bn, st).and_then(|t| t.with_in_flight(f)),
        _ => {
            return Err(Error::Unsupported(format!(
                "LAYOUTKIT_CONV_TILE={v}: expected BMxBNxSTAGES[x0], e.g. 128x128x4"
            )))
        }
    };
    tile.map(Some).ok_or_else(|| {
        Error::Unsupported(format!(
            "LAYOUTKIT_CONV_TILE={v}: the Hopper tiles are 64, 128 or 256 rows by 32 to 256 \
             columns (a multiple of 32, or of 16 for the TMA kernel) with 2-8 stages that fit in 227 KiB, and 1 (default \
             with 3 stages or more) or 0 groups of multiplies in flight"
        ))
    })
}

/// The splits of K `LAYOUTKIT_CONV_SPLITK` asks for (1 to 32), if set.
pub(crate) fn splits_from_env() -> Result<Option<usize>, Error> {
    let v = std::env::var("LAYOUTKIT_CONV_SPLITK").unwrap_or_default();
    if v.is_empty() {
        return Ok(None);
    }
    match v.parse::<usize>() {
        Ok(n) if (1..=crate::conv::splitk::MAX_SPLITS).contains(&n) => Ok(Some(n)),
        _ => Err(Error::Unsupported(format!(
            "LAYOUTKIT_CONV_SPLITK={v}: expected a number of splits from 1 to {}",
            crate::conv::splitk::MAX_SPLITS
        ))),
    }
}

/// The fewest K steps per split of a wide tile `LAYOUTKIT_CONV_WIDE_SPLIT_STEPS` asks for
/// (1 or more), if set.
pub(crate) fn wide_split_steps_from_env() -> Result<Option<usize>, Error> {
    let v = std::env::var("LAYOUTKIT_CONV_WIDE_SPLIT_STEPS").unwrap_or_default();
    if v.is_empty() {
        return Ok(None);
    }
    match v.parse::<usize>() {
        Ok(n) if n >= 1 => Ok(Some(n)),
        _ => Err(Error::Unsupported(format!(
            "LAYOUTKIT_CONV_WIDE_SPLIT_STEPS={v}: expected a number of K steps, 1 or more"
        ))),
    }
}
