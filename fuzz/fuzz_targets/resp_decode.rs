//! Any bytes, fed in any chunking: the resumable decoder agrees with the one-shot decoder,
//! the span agrees with both, nothing panics, and a decoded frame re-encodes to exactly the
//! bytes it came from (strict decoding accepts only the canonical form).
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use redis_resp::{Decoder, Span, Status, encode};

fuzz_target!(|input: &[u8]| {
    // The first byte picks the read size; the rest is the stream.
    let Some((&seed, wire)) = input.split_first() else {
        return;
    };
    let read = usize::from(seed % 64) + 1;
    let mut decoder = Decoder::new();
    let one_shot = decoder.decode_slice(wire);

    let mut buf = BytesMut::new();
    let mut resumed = None;
    for chunk in wire.chunks(read) {
        buf.extend_from_slice(chunk);
        match decoder.decode(&mut buf) {
            Ok(None) => {}
            Ok(Some(frame)) => {
                resumed = Some(Ok(frame));
                break;
            }
            Err(e) => {
                resumed = Some(Err(e));
                break;
            }
        }
    }
    match (&one_shot, resumed) {
        (Ok(Status::Complete((frame, used))), Some(Ok(owned))) => {
            assert_eq!(frame.to_owned_frame(), owned);
            let mut out = Vec::new();
            encode(frame, &mut out);
            assert_eq!(&out[..], &wire[..*used]);
            let span = decoder.decode_span(wire);
            assert_eq!(
                span,
                Ok(Status::Complete(Span {
                    len: *used,
                    kind: frame.kind()
                }))
            );
        }
        (Ok(Status::Incomplete { .. }), None) => {}
        (Err(e), Some(Err(f))) => assert_eq!(*e, f),
        (one_shot, resumed) => panic!("one shot {one_shot:?}, resumed {resumed:?}"),
    }
});
