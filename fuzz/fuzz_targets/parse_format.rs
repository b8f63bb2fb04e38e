//! Any string given as a format name (and dims) must parse or fail cleanly; whatever parses must
//! print back to a name that parses to the same layout, and shaping it must never panic.
#![no_main]

use layoutkit_core::{is_reserved_name, parse_format, Dims};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    // A name, optionally followed by a newline and dims.
    let (name, dims) = text.split_once('\n').unwrap_or((text, "N=2,C=3,H=4,W=5"));
    if let Ok(layout) = parse_format(name) {
        let printed = layout.to_string();
        if is_reserved_name(&printed) {
            return; // e.g. the 8-axis layout ARGUMENT prints as MACE's ARGUMENT
        }
        let again = parse_format(&printed).expect("canonical form parses");
        assert_eq!(again, layout);
        if let Ok(dims) = Dims::parse(dims) {
            if let Ok(shaped) = layout.shaped(&dims) {
                let _ = shaped.physical_shape();
                if shaped.elements() > 0 && shaped.elements() < 1 << 16 {
                    let last = shaped.elements() - 1;
                    if let Ok(Some(coord)) = shaped.inverse(last) {
                        assert_eq!(shaped.forward(&coord).unwrap(), last);
                    }
                }
            }
        }
    }
});
