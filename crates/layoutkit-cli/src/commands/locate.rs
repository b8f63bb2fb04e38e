use anyhow::{anyhow, Result};
use layoutkit_core::Dims;
use serde_json::{json, Value};

use super::{list, shaped};
use crate::args::LocateArgs;

pub fn run(a: &LocateArgs, json_out: bool) -> Result<()> {
    let s = shaped(&a.format, &a.dims)?;
    let (offset, coord) = match (&a.coord, a.offset, &a.pixel) {
        (Some(c), _, _) => {
            let coord = s.coord_from_dims(&Dims::parse(c)?)?;
            (s.forward(&coord)?, Some(coord))
        }
        (None, Some(o), _) => (o, s.inverse(o)?),
        (None, None, Some(p)) => {
            let parts: Vec<usize> = p
                .split(',')
                .map(|v| v.trim().parse::<usize>())
                .collect::<Result<_, _>>()
                .map_err(|_| anyhow!("--pixel `{p}` is not X,Y,LANE (three whole numbers)"))?;
            let [x, y, lane] = parts[..] else {
                return Err(anyhow!(
                    "--pixel `{p}` is not X,Y,LANE (three whole numbers)"
                ));
            };
            let o = s.offset_of_pixel(x, y, lane)?;
            (o, s.inverse(o)?)
        }
        (None, None, None) => anyhow::bail!("give --coord, --offset or --pixel"),
    };
    let index = s.physical_index(offset)?;
    let pixel = s.pixel_of(offset)?;
    let coord_dims = coord.as_ref().map(|c| {
        Dims::new(s.axes().iter().copied().zip(c.iter().copied()).collect()).unwrap_or_default()
    });
    if json_out {
        let mut doc = json!({
            "canonical": s.layout().to_string(),
            "dims": crate::json::dims(&s.dims()),
            "offset": offset,
            "physical_index": index,
            "padding": coord.is_none(),
            "coord": coord_dims.as_ref().map(crate::json::dims).unwrap_or(Value::Null),
        });
        if let Some((x, y, lane)) = pixel {
            doc["pixel"] = json!({"x": x, "y": y, "lane": lane});
        }
        crate::json::print(&doc);
        return Ok(());
    }
    let axes = super::token_names(s.layout()).join(" ");
    match coord_dims {
        Some(c) => outln!("coord {c}  <->  offset {offset}"),
        None => outln!(
            "offset {offset} is padding (holds the fill value {})",
            s.layout().fill()
        ),
    }
    if let Some((x, y, lane)) = pixel {
        let channel = "RGBA".chars().nth(lane).unwrap_or('?');
        outln!("pixel x={x}, y={y}, lane {lane} ({channel} of RGBA)");
    }
    outln!(
        "physical index {} over axes {axes} of shape {}",
        list(&index),
        list(&s.physical_shape())
    );
    Ok(())
}
