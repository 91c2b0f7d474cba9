//! Any bytes as a bus stream: the framer agrees under any read size, nothing panics, and a
//! message that decodes re-encodes to bytes that decode to the same message (decode → encode
//! → decode is stable).
#![no_main]

use libfuzzer_sys::fuzz_target;
use redis_cluster_bus::{Framed, Framer, Message};

fuzz_target!(|input: &[u8]| {
    let Some((&seed, stream)) = input.split_first() else {
        return;
    };
    let framer = Framer::default();
    let whole = framer.frame(stream);
    // The same verdict however much of the stream has arrived, once the first 14 bytes are in.
    let read = (usize::from(seed) + 14).min(stream.len());
    match (framer.frame(&stream[..read]), whole) {
        (Ok(Framed::Incomplete(_)), Ok(_)) | (Ok(Framed::Message(_)), Ok(Framed::Message(_))) => {}
        (Err(a), Err(b)) => assert_eq!(a, b),
        (partial, whole) => {
            assert!(read < 14, "partial {partial:?}, whole {whole:?}");
        }
    }
    let Ok(Framed::Message(len)) = whole else {
        return;
    };
    let Ok(message) = Message::decode(&stream[..len]) else {
        return;
    };
    let owned = message.to_owned_message();
    let mut wire = Vec::new();
    owned.encode(&mut wire);
    let again = Message::decode(&wire).expect("an encoded message decodes");
    assert_eq!(again.to_owned_message(), owned);
});
