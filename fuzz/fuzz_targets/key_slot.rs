//! Any key: `key_slot` is CRC16/XMODEM (computed here bit by bit) of a part of the key that the
//! hash-tag rule picks, and below 16384.
#![no_main]

use libfuzzer_sys::fuzz_target;
use redis_hash_slot::{hash_tag, key_slot};

fn reference_crc16(bytes: &[u8]) -> u16 {
    let mut crc = 0u16;
    for &b in bytes {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

fuzz_target!(|key: &[u8]| {
    let tag = hash_tag(key);
    let slot = key_slot(key);
    assert!(slot.get() < 16384);
    assert_eq!(slot.get(), reference_crc16(tag) % 16384);
    if tag.len() != key.len() {
        // A real tag: the bytes between the first `{` and the first `}` after it.
        let open = key
            .iter()
            .position(|&b| b == b'{')
            .expect("a tag needs a `{`");
        assert!(!tag.is_empty());
        assert_eq!(&key[open + 1..open + 1 + tag.len()], tag);
        assert_eq!(key[open + 1 + tag.len()], b'}');
        assert!(!tag.contains(&b'}'));
    }
});
