//! Any bytes, fed in any chunking, under a strict, lenient or tight configuration: the
//! resumable decoder agrees with the one-shot decoder, the span agrees with both, nothing
//! panics, and a strictly decoded frame re-encodes to exactly the bytes it came from (strict
//! decoding accepts only the canonical form). A whole frame is read by the fast path and a
//! cut one by the scanner, so this compares the two.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use redis_resp::{Config, Decoder, Limits, Span, Status, encode};

fuzz_target!(|input: &[u8]| {
    // The first byte picks the read size; the rest is the stream.
    let Some((&seed, wire)) = input.split_first() else {
        return;
    };
    let read = usize::from(seed % 64) + 1;
    let config = match seed / 64 {
        0 | 1 => Config::default(),
        2 => Config {
            lenient: true,
            ..Config::default()
        },
        _ => Config {
            limits: Limits {
                max_depth: 3,
                max_elements: 4,
                max_bulk_len: 8,
                max_inline_len: 16,
                max_frame_len: 64,
            },
            ..Config::default()
        },
    };
    let mut decoder = Decoder::with_config(config);
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
            if !config.lenient {
                let mut out = Vec::new();
                encode(frame, &mut out);
                assert_eq!(&out[..], &wire[..*used]);
            }
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
