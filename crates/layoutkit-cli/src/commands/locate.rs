use anyhow::Result;
use layoutkit_core::Dims;
use serde_json::{json, Value};

use super::{list, shaped};
use crate::args::LocateArgs;

pub fn run(a: &LocateArgs, json_out: bool) -> Result<()> {
    let s = shaped(&a.format, &a.dims)?;
    let (offset, coord) = match (&a.coord, a.offset) {
        (Some(c), _) => {
            let coord = s.coord_from_dims(&Dims::parse(c)?)?;
            (s.forward(&coord)?, Some(coord))
        }
        (None, Some(o)) => (o, s.inverse(o)?),
        (None, None) => anyhow::bail!("give --coord or --offset"),
    };
    let index = s.physical_index(offset)?;
    let coord_dims = coord.as_ref().map(|c| {
        Dims::new(s.axes().iter().copied().zip(c.iter().copied()).collect()).unwrap_or_default()
    });
    if json_out {
        crate::json::print(&json!({
            "canonical": s.layout().to_string(),
            "dims": crate::json::dims(&s.dims()),
            "offset": offset,
            "physical_index": index,
            "padding": coord.is_none(),
            "coord": coord_dims.as_ref().map(crate::json::dims).unwrap_or(Value::Null),
        }));
        return Ok(());
    }
    let axes = super::token_names(s.layout()).join(" ");
    match coord_dims {
        Some(c) => println!("coord {c}  <->  offset {offset}"),
        None => println!(
            "offset {offset} is padding (holds the fill value {})",
            s.layout().fill()
        ),
    }
    println!(
        "physical index {} over axes {axes} of shape {}",
        list(&index),
        list(&s.physical_shape())
    );
    Ok(())
}
