//! Decoding on the zero-copy paths allocates nothing per frame, counted by a global allocator.
//! (Its own test binary, because a global allocator is process-wide. The one `unsafe` of the
//! workspace outside libraries: implementing `GlobalAlloc` is the only way to count.)
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use bytes::BytesMut;
use redis_resp::{Decoder, Frame, Status, encode_bulk, encode_command};

struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: every call is forwarded to the system allocator unchanged; the counter is a
// thread-local `Cell` with a const initialiser, which never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|n| n.set(n.get() + 1));
        // SAFETY: the caller's contract for `alloc` is passed on as it is.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract for `dealloc` is passed on as it is.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.with(|n| n.set(n.get() + 1));
        // SAFETY: the caller's contract for `realloc` is passed on as it is.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations_during(f: impl FnOnce()) -> usize {
    let before = ALLOCATIONS.with(Cell::get);
    f();
    ALLOCATIONS.with(Cell::get) - before
}

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
