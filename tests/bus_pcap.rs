//! Every message of the real captures (`capture.pcap.gz`: the whole bus traffic of 6-node
//! Redis 7.0.15, Redis 8.2.3, Valkey 8.1.8 and Valkey 9.1.2 clusters) comes out of the framer,
//! decodes, with the per-type totals of the manifest's `capture_summary`, and re-encodes to
//! its own bytes (Redis 8's `internal_secret` and Valkey's `client_ipv4` share type 4: each
//! is read in its sender's dialect): real TCP segmentation, not just whole messages one per
//! file.

// The tool's pcap reader, so that what the test proves is what `bus-dump` runs.
#[path = "../crates/redis-cluster-tools/src/bin/bus-dump/pcap.rs"]
mod pcap;
mod support;

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use redis_cluster_proto::bus::{Framed, Framer, Message};
use serde_json::Value;

#[test]
fn every_captured_message_frames_and_decodes_with_the_manifest_totals() {
    let framer = Framer::default();
    for server in [
        "redis-7.0.15",
        "redis-8.2.3",
        "valkey-8.1.8",
        "valkey-9.1.2",
    ] {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/vectors/clusterbus")
            .join(server);
        let mut pcap = Vec::new();
        flate2::read::GzDecoder::new(
            std::fs::File::open(dir.join("capture.pcap.gz")).expect("open the capture"),
        )
        .read_to_end(&mut pcap)
        .expect("gunzip the capture");
        let manifest: Value =
            serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).expect("manifest"))
                .expect("JSON");
        let summary = &manifest["capture_summary"];

        let mut by_type: BTreeMap<String, u64> = BTreeMap::new();
        let mut total = 0;
        let mut streams = pcap::Streams::default();
        let mut last = (0, 0);
        for segment in pcap::segments(&pcap).expect("a pcap file") {
            // One interface's capture: its timestamps never go back.
            assert!(segment.time >= last, "{server}: time {:?}", segment.time);
            last = segment.time;
            let stream = streams.push(&segment);
            assert!(!stream.gap, "{server}: a hole in {:?}", segment.flow);
            // Messages come out whole however the segments cut them, as soon as their last
            // byte is in.
            let mut used = 0;
            while let Ok(Framed::Message(len)) = framer.frame(&stream.bytes[used..]) {
                let bytes = &stream.bytes[used..used + len];
                let message = Message::decode(bytes)
                    .unwrap_or_else(|e| panic!("{server}: a captured message: {e}"));
                let mut again = Vec::with_capacity(len);
                message.to_owned_message().encode(&mut again);
                assert!(
                    again == bytes,
                    "{server}: message {total} ({:?}) re-encodes differently",
                    message.kind()
                );
                let name = message.kind().name().expect("a known type").to_owned();
                *by_type.entry(name).or_default() += 1;
                total += 1;
                used += len;
            }
            stream.bytes.drain(..used);
        }
        assert_eq!(
            total,
            summary["messages_total"].as_u64().expect("total"),
            "{server}"
        );
        let expected: BTreeMap<String, u64> = summary["by_type"]
            .as_object()
            .expect("by_type")
            .iter()
            .map(|(k, v)| (k.clone(), v.as_u64().expect("count")))
            .collect();
        assert_eq!(by_type, expected, "{server}");
    }
}

/// `bus-dump` reads ping extension 4 in the sender's dialect unless `--dialect` says
/// otherwise: a Redis 8.2.3 replica's PING (no light-header flag) carries its
/// `internal_secret` there, which `--dialect valkey` reads as a `client_ipv4` instead.
#[test]
fn bus_dump_reads_extensions_in_the_dialect_it_is_told() {
    let binary = support::tool_binary("bus-dump");
    let file = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/vectors/clusterbus/redis-8.2.3/PING-000.bin");
    let names = |args: &[&str]| -> (Vec<String>, String) {
        let out = std::process::Command::new(&binary)
            .args(args)
            .arg(&file)
            .output()
            .expect("bus-dump runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let message: Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
        let names = message["extensions"]
            .as_array()
            .expect("extensions")
            .iter()
            .map(|e| e["type_name"].as_str().unwrap_or("?").to_string())
            .collect();
        (
            names,
            message["dialect"].as_str().unwrap_or("?").to_string(),
        )
    };
    let (auto, said) = names(&[]);
    assert_eq!(said, "redis");
    assert!(auto.iter().any(|n| n == "internal_secret"), "{auto:?}");
    assert_eq!(names(&["--dialect", "redis"]).0, auto);
    let (valkey, said) = names(&["--dialect", "valkey"]);
    assert_eq!(said, "valkey");
    assert!(valkey.iter().any(|n| n == "client_ipv4"), "{valkey:?}");
    assert!(!valkey.iter().any(|n| n == "internal_secret"), "{valkey:?}");
    let bad = std::process::Command::new(&binary)
        .args(["--dialect", "redsi"])
        .arg(&file)
        .output()
        .expect("bus-dump runs");
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("not auto, redis or valkey"));
}

/// A gzipped file of the repository, unpacked.
fn gunzip(path: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&path).expect("open the capture"))
        .read_to_end(&mut out)
        .unwrap_or_else(|e| panic!("gunzip {}: {e}", path.display()));
    out
}

/// A segment as plain values, to compare two readings of one capture.
type Seen<'a> = ((u32, u32), pcap::Flow, u32, bool, &'a [u8]);

fn seen<'a>(segments: &[pcap::Segment<'a>]) -> Vec<Seen<'a>> {
    segments
        .iter()
        .map(|s| (s.time, s.flow, s.seq, s.syn, s.payload))
        .collect()
}

/// The pcapng files Wireshark's editcap wrote from two of the real captures (one with
/// nanosecond timestamps) give every segment of the classic file, the same times included.
#[test]
fn pcapng_written_by_editcap_reads_as_the_capture_it_was_made_from() {
    for (pcapng, classic) in [
        ("tests/pcapng/valkey-9.1.2.pcapng.gz", "valkey-9.1.2"),
        ("tests/pcapng/redis-8.2.3-ns.pcapng.gz", "redis-8.2.3"),
    ] {
        let next = gunzip(pcapng);
        let old = gunzip(&format!(
            "tests/vectors/clusterbus/{classic}/capture.pcap.gz"
        ));
        assert_eq!(next[..4], pcap::PCAPNG_MAGIC, "{pcapng}");
        let next = pcap::segments(&next).expect("a pcapng file");
        let old = pcap::segments(&old).expect("a pcap file");
        assert!(old.len() > 1000, "{classic}: {} segments", old.len());
        assert!(seen(&next) == seen(&old), "{pcapng} reads differently");
    }
}

/// `bus-dump` prints the same lines for the pcapng file as for the pcap it was made from.
#[test]
fn bus_dump_reads_pcapng_as_it_reads_pcap() {
    let binary = support::tool_binary("bus-dump");
    let dump = |path: &str| {
        let out = std::process::Command::new(&binary)
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join(path))
            .output()
            .expect("bus-dump runs");
        assert!(
            out.status.success(),
            "{path}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    };
    let next = dump("tests/pcapng/redis-8.2.3-ns.pcapng.gz");
    let old = dump("tests/vectors/clusterbus/redis-8.2.3/capture.pcap.gz");
    assert!(next.iter().filter(|&&b| b == b'\n').count() > 2000);
    assert!(next == old, "bus-dump prints the pcapng file differently");
}

/// A pcapng block of `kind` around `body` (padded to 32 bits), in either byte order.
fn block(big: bool, kind: u32, body: &[u8]) -> Vec<u8> {
    let word = |n: u32| {
        if big {
            n.to_be_bytes()
        } else {
            n.to_le_bytes()
        }
    };
    let padded = body.len().next_multiple_of(4);
    let length = u32::try_from(12 + padded).expect("a small block");
    let mut out = Vec::new();
    out.extend_from_slice(&word(kind));
    out.extend_from_slice(&word(length));
    out.extend_from_slice(body);
    out.resize(8 + padded, 0);
    out.extend_from_slice(&word(length));
    out
}

/// A section header block (version 1.0, length unknown).
fn section(big: bool) -> Vec<u8> {
    let mut body = Vec::new();
    let magic: u32 = 0x1a2b_3c4d;
    body.extend_from_slice(&if big {
        magic.to_be_bytes()
    } else {
        magic.to_le_bytes()
    });
    body.extend_from_slice(&if big { [0, 1, 0, 0] } else { [1, 0, 0, 0] });
    body.extend_from_slice(&[0xff; 8]);
    block(big, 0x0a0d_0d0a, &body)
}

/// An interface description block: raw IP (link type 101), with the given options
/// (code, value) and an end-of-options.
fn interface(big: bool, options: &[(u16, &[u8])]) -> Vec<u8> {
    let half = |n: u16| {
        if big {
            n.to_be_bytes()
        } else {
            n.to_le_bytes()
        }
    };
    let mut body = Vec::new();
    body.extend_from_slice(&half(101));
    body.extend_from_slice(&[0, 0]);
    body.extend_from_slice(&[0; 4]); // no snap length
    for (code, value) in options {
        body.extend_from_slice(&half(*code));
        body.extend_from_slice(&half(u16::try_from(value.len()).expect("short")));
        body.extend_from_slice(value);
        body.resize(body.len().next_multiple_of(4), 0);
    }
    body.extend_from_slice(&[0; 4]);
    block(big, 1, &body)
}

/// An IPv4 TCP packet from 127.0.0.1:`port` to 127.0.0.1:16379 carrying `payload`.
fn ip_tcp(port: u16, seq: u32, payload: &[u8]) -> Vec<u8> {
    let total = u16::try_from(40 + payload.len()).expect("small");
    let mut out = vec![0x45, 0];
    out.extend_from_slice(&total.to_be_bytes());
    out.extend_from_slice(&[0, 0, 0, 0, 64, 6, 0, 0, 127, 0, 0, 1, 127, 0, 0, 1]);
    out.extend_from_slice(&port.to_be_bytes());
    out.extend_from_slice(&16379u16.to_be_bytes());
    out.extend_from_slice(&seq.to_be_bytes());
    out.extend_from_slice(&[0, 0, 0, 0, 0x50, 0x18, 0xff, 0xff, 0, 0, 0, 0]);
    out.extend_from_slice(payload);
    out
}

/// A packet block of `kind` 6 (enhanced) or 2 (obsolete) of interface `id` at `ticks`.
fn packet(big: bool, kind: u32, id: u32, ticks: u64, frame: &[u8]) -> Vec<u8> {
    let word = |n: u32| {
        if big {
            n.to_be_bytes()
        } else {
            n.to_le_bytes()
        }
    };
    let mut body = Vec::new();
    if kind == 6 {
        body.extend_from_slice(&word(id));
    } else {
        let id = u16::try_from(id).expect("16 bits");
        body.extend_from_slice(&if big {
            id.to_be_bytes()
        } else {
            id.to_le_bytes()
        });
        body.extend_from_slice(&[0, 0]); // drops
    }
    body.extend_from_slice(&word((ticks >> 32) as u32));
    body.extend_from_slice(&word(ticks as u32));
    let length = u32::try_from(frame.len()).expect("small");
    body.extend_from_slice(&word(length));
    body.extend_from_slice(&word(length));
    body.extend_from_slice(frame);
    block(big, kind, &body)
}

/// What the editcap files do not have: a big-endian section, a binary `if_tsresol`, simple
/// and obsolete packet blocks, a second section whose interfaces are numbered anew (one with
/// `if_tsoffset`), blocks of other types, a packet of an interface never described, and a
/// last block cut short. Each packet is found with its time, and nothing else is.
#[test]
fn pcapng_sections_interfaces_and_blocks_of_every_kind() {
    let mut file = section(true);
    file.extend(interface(true, &[(9, &[0x80 | 10])])); // 2^-10 s
    file.extend(block(true, 5, &[0; 16])); // interface statistics: skipped
    file.extend(packet(true, 6, 0, 3 * 1024 + 512, &ip_tcp(1000, 1, b"one")));
    let mut simple = 100u32.to_be_bytes().to_vec(); // original length beyond the data
    simple.extend(ip_tcp(1001, 2, b"two"));
    file.extend(block(true, 3, &simple));
    file.extend(section(false));
    let offset = 100i64.to_le_bytes();
    file.extend(interface(false, &[(9, &[3]), (14, &offset)])); // ms, +100 s
    file.extend(interface(false, &[]));
    file.extend(packet(false, 2, 1, 2_500_000, &ip_tcp(1002, 3, b"three")));
    file.extend(packet(false, 6, 0, 1500, &ip_tcp(1003, 4, b"four")));
    file.extend(packet(false, 6, 7, 1, &ip_tcp(1004, 5, b"not described")));
    file.extend(block(false, 0x0bad_1dea, b"custom"));
    let mut cut = packet(false, 6, 0, 1, &ip_tcp(1005, 6, b"cut"));
    cut.truncate(cut.len() - 4);
    file.extend(cut);

    let segments = pcap::segments(&file).expect("a pcapng file");
    let got: Vec<((u32, u32), u16, &[u8])> = segments
        .iter()
        .map(|s| (s.time, s.flow.src.port(), s.payload))
        .collect();
    assert_eq!(
        got,
        [
            ((3, 500_000_000), 1000, &b"one"[..]),
            ((0, 0), 1001, b"two"),
            ((2, 500_000_000), 1002, b"three"),
            ((101, 500_000_000), 1003, b"four"),
        ]
    );
    // A file of blocks without its section header's byte-order magic is refused by name.
    let mut bad = section(false);
    bad[8] = 0;
    assert!(pcap::segments(&bad).is_err_and(|e| e.contains("byte-order magic")));
}

proptest::proptest! {
    /// Any bytes after a section header read without a panic, and every segment found
    /// lies inside the file.
    #[test]
    fn pcapng_of_any_blocks_never_panics(
        blocks in proptest::collection::vec(
            (0u32..8, proptest::collection::vec(proptest::prelude::any::<u8>(), 0..80)),
            0..12,
        ),
        junk in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..40),
    ) {
        let mut file = section(false);
        file.extend(interface(false, &[]));
        for (kind, body) in &blocks {
            file.extend(block(false, *kind, body));
        }
        file.extend(&junk);
        let range = file.as_ptr_range();
        if let Ok(segments) = pcap::segments(&file) {
            for segment in segments {
                proptest::prop_assert!(range.contains(&segment.payload.as_ptr())
                    || segment.payload.is_empty());
            }
        }
    }
}
