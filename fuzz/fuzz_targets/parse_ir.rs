//! Any text given as loop-nest IR must parse or fail with a LINE:COL error; whatever parses must
//! extract (or be refused cleanly), print, and parse back to the same features.
#![no_main]

use layoutkit_loopir::features::{curve_sample, extract, flatten_f32, flatten_names, Options};
use layoutkit_loopir::{parse, print};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(program) = parse(text) else { return };
    let options = Options::default();
    let features = extract(&program, &options);
    let printed = print(&program);
    let again = parse(&printed).expect("printed IR parses");
    assert_eq!(extract(&again, &options), features);
    if let Ok(f) = features {
        let _ = flatten_f32(&f, true);
        let _ = flatten_names(&f);
        let _ = curve_sample(&f, 4);
    }
});
