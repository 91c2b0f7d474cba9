//! Any 2048-byte bitmap: the set's ranges are sorted and maximal, and bitmap → ranges → text →
//! ranges → bitmap is the identity.
#![no_main]

use libfuzzer_sys::fuzz_target;
use redis_hash_slot::{BITMAP_LEN, SlotRange, SlotSet};

fuzz_target!(|data: &[u8]| {
    let Some(bitmap) = data.first_chunk::<BITMAP_LEN>() else {
        return;
    };
    let set = SlotSet::from_bitmap(bitmap);
    let ranges: Vec<SlotRange> = set.ranges().collect();
    for pair in ranges.windows(2) {
        assert!(pair[0].end().get() + 1 < pair[1].start().get());
    }
    let text = set.to_string();
    let reparsed: SlotSet = text
        .split(' ')
        .filter(|t| !t.is_empty())
        .map(|t| t.parse::<SlotRange>().expect("printed ranges parse"))
        .collect();
    assert_eq!(reparsed.as_bitmap(), bitmap);
    assert_eq!(set.iter().count(), set.len());
});
