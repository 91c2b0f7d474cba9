//! Decoding on the zero-copy paths allocates nothing per frame, counted by the global
//! allocator of `counting.rs` (its own test binary: a global allocator is process-wide).

mod counting;

use bytes::BytesMut;
use counting::{allocations_during, bytes_allocated_during};
use redis_resp::{Decoder, Frame, Status, encode_bulk, encode_command};

#[test]
fn zero_allocations_per_frame() {
    const N: usize = 1000;

    // Pipelined SET commands through the argv path.
    let mut wire = Vec::new();
    for i in 0..N {
        let key = format!("key:{i:012}");
        encode_command(&[&b"SET"[..], key.as_bytes(), &[b'v'; 64]], &mut wire);
    }
    let mut buf = BytesMut::from(&wire[..]);
    let mut decoder = Decoder::new();
    // The first split makes the buffer shared, once; the decoder's scratch space warms up.
    let first = decoder
        .decode_command(&mut buf)
        .expect("valid")
        .expect("complete");
    assert_eq!(first.len(), 3);
    let mut decoded = 0;
    let allocations = allocations_during(|| {
        while let Some(command) = decoder.decode_command(&mut buf).expect("valid") {
            assert_eq!(command.arg(0), Some(&b"SET"[..]));
            decoded += 1;
        }
    });
    assert_eq!(decoded, N - 1);
    assert_eq!(allocations, 0, "allocations for {decoded} commands");

    // The same commands borrowed from the slice.
    let mut decoded = 0;
    let allocations = allocations_during(|| {
        let mut input = &wire[..];
        while let Ok(Status::Complete((command, used))) = decoder.decode_command_slice(input) {
            assert_eq!(command.arg(0), Some(&b"SET"[..]));
            input = &input[used..];
            decoded += 1;
        }
    });
    assert_eq!(decoded, N);
    assert_eq!(
        allocations, 0,
        "allocations for {decoded} borrowed commands"
    );

    // Bulk-string replies through the frame path, and through the borrowed slice path.
    let mut wire = Vec::new();
    for _ in 0..N {
        encode_bulk(&[b'x'; 1024], &mut wire);
    }
    let mut buf = BytesMut::from(&wire[..]);
    let first = decoder.decode(&mut buf).expect("valid").expect("complete");
    assert!(matches!(first, Frame::BulkString(ref b) if b.len() == 1024));
    let mut decoded = 0;
    let allocations = allocations_during(|| {
        while let Some(frame) = decoder.decode(&mut buf).expect("valid") {
            assert!(matches!(frame, Frame::BulkString(ref b) if b.len() == 1024));
            decoded += 1;
        }
    });
    assert_eq!(decoded, N - 1);
    assert_eq!(allocations, 0, "allocations for {decoded} bulk replies");

    let mut decoded = 0;
    let allocations = allocations_during(|| {
        let mut input = &wire[..];
        while let Ok(Status::Complete((frame, used))) = decoder.decode_slice(input) {
            assert!(matches!(frame, Frame::BulkString(b) if b.len() == 1024));
            input = &input[used..];
            decoded += 1;
        }
    });
    assert_eq!(decoded, N);
    assert_eq!(
        allocations, 0,
        "allocations for {decoded} borrowed bulk replies"
    );

    // The counter does count: an array needs its Vec.
    let allocations = allocations_during(|| {
        let frame = decoder.decode_slice(b"*2\r\n:1\r\n:2\r\n").expect("valid");
        assert!(matches!(frame, Status::Complete((Frame::Array(_), 12))));
    });
    assert!(allocations >= 1);
}

/// Nested aggregates that each declare as many elements as the bytes at hand could hold: what
/// a decoder reserves stays within a small multiple of the input, all levels together (each
/// level reserving the bytes' worth anew took 100 times the input here).
#[test]
fn nested_declared_lengths_reserve_a_bounded_total() {
    let mut wire = Vec::new();
    for _ in 0..100 {
        wire.extend_from_slice(b"*100000\r\n");
    }
    for _ in 0..100_000 {
        wire.extend_from_slice(b"_\r\n");
    }
    // Counted as asked for, never subtracting what is freed: the fast path's placeholders
    // (a 32-byte frame per three bytes), then the scanner's reservation and the growth of the
    // array that really holds the values. Here 14.8 MB; reserving per level took 422 MB.
    let bound = wire.len() * 64;
    let mut decoder = Decoder::new();
    let bytes = bytes_allocated_during(|| {
        let status = decoder.decode_slice(&wire).expect("valid so far");
        assert!(matches!(status, Status::Incomplete { .. }), "{status:?}");
    });
    assert!(bytes <= bound, "{bytes} bytes for {} of input", wire.len());
    let mut buf = BytesMut::from(&wire[..]);
    let bytes = bytes_allocated_during(|| {
        assert_eq!(decoder.decode(&mut buf).expect("valid so far"), None);
    });
    assert!(bytes <= bound, "{bytes} bytes for {} of input", wire.len());
}
