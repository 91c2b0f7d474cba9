//! The toy node's DUMP payload and RDB file readers (RESTORE, MIGRATE's and a replica's
//! input, read from real servers too) against any bytes (issue 27): nothing panics or
//! allocates beyond what the input can justify, and what they read they write back as bytes
//! that read again to the same thing.
//!
//! Input: the first byte picks the reader; the rest is a DUMP payload's body (sealed here
//! with the version and checksum, which random bytes would never get right), a FUNCTION
//! DUMP payload's body, or a whole RDB file. Seeds: payloads and an RDB file that a real
//! Redis 7.0.15 wrote.
#![no_main]

#[allow(dead_code)]
#[path = "../../examples/toy-node/db.rs"]
mod db;
#[allow(dead_code)]
#[path = "../../examples/toy-node/dump.rs"]
mod dump;
#[allow(dead_code)]
#[path = "../../examples/toy-node/float.rs"]
mod float;
#[allow(dead_code)]
#[path = "../../examples/toy-node/stream.rs"]
mod stream;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| {
    let Some((&reader, body)) = input.split_first() else {
        return;
    };
    match reader % 3 {
        0 => {
            let Ok(value) = dump::restore(&dump::seal(body.to_vec())) else {
                return;
            };
            let written = dump::dump(&value);
            let again = dump::restore(&written)
                .unwrap_or_else(|e| panic!("a payload it wrote does not read: {e:?}"));
            assert_eq!(
                dump::dump(&again),
                written,
                "a payload reads back differently"
            );
        }
        1 => {
            let Ok(codes) = dump::functions_of(&dump::seal(body.to_vec())) else {
                return;
            };
            let written = dump::functions_payload(codes.iter().map(Vec::as_slice));
            assert_eq!(dump::functions_of(&written).ok(), Some(codes));
        }
        _ => {
            let Ok(snapshot) = dump::read_rdb(body) else {
                return;
            };
            let written = dump::rdb_file(&snapshot);
            let again = dump::read_rdb(&written)
                .unwrap_or_else(|e| panic!("an RDB file it wrote does not read: {e:?}"));
            assert_eq!(
                dump::rdb_file(&again),
                written,
                "an RDB file reads back differently"
            );
        }
    }
});
