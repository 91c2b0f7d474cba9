//! Any text: `SlotRange::from_ascii` never panics, and what it accepts prints back as itself
//! (`N-N` prints as `N`) and parses again to the same range.
#![no_main]

use libfuzzer_sys::fuzz_target;
use redis_hash_slot::SlotRange;

fuzz_target!(|text: &[u8]| {
    let Ok(range) = SlotRange::from_ascii(text) else {
        return;
    };
    let printed = range.to_string();
    assert_eq!(printed.parse::<SlotRange>(), Ok(range));
    let long_form = format!("{}-{}", range.start(), range.end());
    assert!(printed.as_bytes() == text || long_form.as_bytes() == text);
});
