use anyhow::Result;
use layoutkit_core::DType;
use serde_json::json;

use super::{list, shaped, token_names};
use crate::args::DescribeArgs;

pub fn run(a: &DescribeArgs, json_out: bool) -> Result<()> {
    let s = shaped(&a.format, &a.dims)?;
    // Report dims in the order the user gave them.
    let user_dims = layoutkit_core::Dims::parse(&a.dims)?;
    let dtype: DType = a.dtype.parse()?;
    let bytes = s.bytes(dtype)?;
    let logical = s.logical_elements();
    if json_out {
        crate::json::print(&json!({
            "name": a.format,
            "canonical": s.layout().to_string(),
            "dims": crate::json::dims(&user_dims),
            "physical_axes": token_names(s.layout()),
            "physical_shape": s.physical_shape(),
            "strides": s.strides(),
            "elements": s.elements(),
            "logical_elements": logical,
            "padding_elements": s.elements() - logical,
            "dtype": dtype.name(),
            "bytes": bytes,
            "fill": crate::json::float(s.layout().fill()),
        }));
        return Ok(());
    }
    let padding = s.elements() - logical;
    println!("format          {} (canonical {})", a.format, s.layout());
    println!("dims            {user_dims}");
    println!(
        "physical shape  {}  axes {}",
        list(&s.physical_shape()),
        token_names(s.layout()).join(" ")
    );
    println!("strides         {} elements", list(&s.strides()));
    println!(
        "elements        {} physical = {} logical + {} padding{}",
        s.elements(),
        logical,
        padding,
        if padding > 0 {
            format!(" (fill {})", s.layout().fill())
        } else {
            String::new()
        }
    );
    println!("bytes           {bytes} ({dtype})");
    Ok(())
}
