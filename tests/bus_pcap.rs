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
