//! Every message of the real captures (`capture.pcap.gz`: the whole bus traffic of 6-node
//! Redis 7.0.15, Redis 8.2.3, Valkey 8.1.8 and Valkey 9.1.2 clusters) comes out of the framer,
//! decodes, with the per-type totals of the manifest's `capture_summary`, and re-encodes to
//! its own bytes (Redis 8's `internal_secret` and Valkey's `client_ipv4` share type 4: each
//! is read in its sender's dialect): real TCP segmentation, not just whole messages one per
//! file.

// The example's pcap reader, so that what the test proves is what `bus-dump` runs.
#[path = "../examples/bus-dump/pcap.rs"]
mod pcap;

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use redis_cluster_proto::bus::{Framed, Framer, Message};
use serde_json::Value;

#[test]
fn every_captured_message_frames_and_decodes_with_the_manifest_totals() {
    let framer = Framer::default();
    for server in ["redis-7.0.15", "valkey-8.1.8"] {
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
