//! Every RESP capture in the workspace's `tests/vectors` (replies of real Redis 7.0.15 and Valkey 8.1.8)
//! decodes whole and re-encodes to the same bytes. Missing vectors fail the test.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use bytes::BytesMut;
use redis_resp::{Decoder, Frame, Status, encode};

fn vectors_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/vectors")
}

fn resp_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            resp_files(&path, out);
        } else if path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| e.starts_with("resp"))
        {
            out.push(path);
        }
    }
}

/// Every type byte in `frame`, nested ones included.
fn kinds(frame: &Frame, out: &mut BTreeSet<u8>) {
    out.insert(frame.kind().0);
    match frame {
        Frame::Array(items) | Frame::Set(items) | Frame::Push(items) => {
            items.iter().for_each(|f| kinds(f, out));
        }
        Frame::Map(pairs) => pairs.iter().for_each(|(k, v)| {
            kinds(k, out);
            kinds(v, out);
        }),
        _ => {}
    }
}

#[test]
fn real_replies_round_trip_byte_for_byte() {
    let mut files = Vec::new();
    resp_files(&vectors_dir(), &mut files);
    files.sort();
    assert!(
        files.len() >= 50,
        "expected the 50 RESP captures, found {}",
        files.len()
    );
    let mut decoder = Decoder::new();
    let mut seen = BTreeSet::new();
    for path in &files {
        let wire = std::fs::read(path).expect("read vector");
        // One shot.
        let Ok(Status::Complete((frame, used))) = decoder.decode_slice(&wire) else {
            panic!(
                "{}: {:?}",
                path.display(),
                decoder.decode_slice(&wire).map(|_| ())
            );
        };
        assert_eq!(used, wire.len(), "{}: one reply per file", path.display());
        // In 4 KiB reads, as from a socket.
        let mut buf = BytesMut::new();
        let mut decoded = None;
        for chunk in wire.chunks(4096) {
            buf.extend_from_slice(chunk);
            if let Some(f) = decoder.decode(&mut buf).expect("valid") {
                decoded = Some(f);
            }
        }
        let decoded = decoded.unwrap_or_else(|| panic!("{}: incomplete", path.display()));
        assert_eq!(decoded, frame.to_owned_frame());
        kinds(&decoded, &mut seen);
        let mut out = Vec::new();
        encode(&decoded, &mut out);
        assert!(out == wire, "{}: re-encoding differs", path.display());
    }
    // The captures hold these types, so the test really decoded each of them.
    let expected: BTreeSet<u8> = b"+:$*%~=".iter().copied().collect();
    assert!(
        seen.is_superset(&expected),
        "saw {:?}",
        String::from_utf8_lossy(&seen.iter().copied().collect::<Vec<_>>())
    );
}
