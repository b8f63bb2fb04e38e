//! Any bytes given as a `.npy` file must decode or fail cleanly; whatever decodes must re-encode
//! to a file that decodes to the same array.
#![no_main]

use layoutkit_core::npy;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(array) = npy::decode(data) {
        let h = &array.header;
        let file = npy::encode(h.dtype, &h.shape, &array.data).expect("decoded arrays re-encode");
        let back = npy::decode(&file).expect("encoded files decode");
        assert_eq!(back.header.shape, h.shape);
        assert_eq!(&*back.data, &*array.data);
    }
});
