use anyhow::Result;
use layoutkit_core::formats::{catalogue, GRAMMAR};
use serde_json::json;

pub fn run(json_out: bool) -> Result<()> {
    let entries = catalogue()?;
    if json_out {
        let list: Vec<_> = entries
            .iter()
            .map(|e| {
                json!({
                    "name": e.name,
                    "family": e.family,
                    "canonical": e.canonical,
                    "description": e.description,
                })
            })
            .collect();
        crate::json::print(&json!({ "formats": list, "grammar": GRAMMAR }));
        return Ok(());
    }
    let width = entries
        .iter()
        .map(|e| e.name.len())
        .max()
        .unwrap_or(4)
        .max(4);
    let cwidth = entries
        .iter()
        .map(|e| e.canonical.len())
        .max()
        .unwrap_or(9)
        .max(9);
    let mut family = "";
    for e in &entries {
        if e.family != family {
            family = e.family;
            outln!("\n{family}:");
            outln!("  {:width$}  {:cwidth$}  meaning", "name", "canonical");
        }
        outln!(
            "  {:width$}  {:cwidth$}  {}",
            e.name,
            e.canonical,
            e.description
        );
    }
    outln!("\nmace: mace:in_out_channel and the other MACE image layouts come in a later version.");
    outln!("\n{GRAMMAR}");
    Ok(())
}
