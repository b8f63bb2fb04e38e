//! cuDNN names: `NC/xHWx` (and the 3-D `NC/xDHWx`), and `NCHW_VECT_C` with its vector width.

use crate::{Error, Layout, Result};

/// `Ok(None)` when `name` is not a cuDNN name.
pub(super) fn parse(name: &str) -> Result<Option<Layout>> {
    if let Some(rest) = name.strip_prefix("NC/") {
        return parse_nc_slash(name, rest).map(Some);
    }
    let upper = name.to_ascii_uppercase();
    if let Some(rest) = upper.strip_prefix("NCHW_VECT_C") {
        return parse_vect_c(name, rest).map(Some);
    }
    Ok(None)
}

fn parse_nc_slash(name: &str, rest: &str) -> Result<Layout> {
    let err = || Error::Format {
        input: name.to_string(),
        reason: "expected NC/xHWx or NC/xDHWx with the same block x twice, e.g. NC/32HW32".into(),
    };
    let digits_end = rest.find(|c: char| !c.is_ascii_digit()).ok_or_else(err)?;
    let (x, tail) = rest.split_at(digits_end);
    let spatial = tail.strip_suffix(x).ok_or_else(err)?;
    if x.is_empty() || !(spatial == "HW" || spatial == "DHW") {
        return Err(err());
    }
    let size: usize = x.parse().map_err(|_| err())?;
    if size == 0 {
        return Err(err());
    }
    super::letters::parse(&format!("NC{spatial}{size}c")).map_err(|e| match e {
        Error::Format { reason, .. } => Error::Format {
            input: name.to_string(),
            reason,
        },
        other => other,
    })
}

fn parse_vect_c(name: &str, rest: &str) -> Result<Layout> {
    let width = rest
        .trim_start_matches([':', '_', '(', '['])
        .trim_end_matches([')', ']']);
    let width = width.strip_prefix("INT8X").unwrap_or(width);
    match width {
        "4" => super::letters::parse("NCHW4c"),
        "32" => super::letters::parse("NCHW32c"),
        "" => Err(Error::Format {
            input: name.to_string(),
            reason: "NCHW_VECT_C needs its vector width: NCHW_VECT_C:int8x4 or NCHW_VECT_C:int8x32"
                .into(),
        }),
        other => Err(Error::Format {
            input: name.to_string(),
            reason: format!("cuDNN vectorises C by 4 (int8x4) or 32 (int8x32), not `{other}`"),
        }),
    }
}
