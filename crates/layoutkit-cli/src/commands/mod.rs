//! One module per subcommand; shared argument parsing here.

pub mod bench;
pub mod bench_sweep;
pub mod conv;
pub mod conv_bench;
mod conv_bench_cpu;
pub mod conv_layers;
pub mod convert;
pub mod describe;
pub mod features;
pub mod formats;
pub mod locate;
pub mod pack;
pub mod tour;

use anyhow::Result;
use layoutkit_core::{parse_format, Dims, Layout, ShapedLayout};

/// Parses a format and a dims string into a shaped layout.
pub fn shaped(format: &str, dims: &str) -> Result<ShapedLayout> {
    let layout = parse_format(format)?;
    let dims = Dims::parse(dims)?;
    Ok(layout.shaped(&dims)?)
}

/// `NHWC8c` as its physical axis names: `N H W C 8c`.
pub fn token_names(layout: &Layout) -> Vec<String> {
    layout.tokens().iter().map(|t| t.to_string()).collect()
}

/// `[16, 224, 224, 1, 8]`.
pub fn list<T: std::fmt::Display>(items: &[T]) -> String {
    let inner: Vec<String> = items.iter().map(|x| x.to_string()).collect();
    format!("[{}]", inner.join(", "))
}
