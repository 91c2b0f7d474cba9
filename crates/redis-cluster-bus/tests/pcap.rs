//! Every message of the real captures (`capture.pcap.gz`: the whole bus traffic of a 6-node
//! Redis 7.0.15 and a 6-node Valkey 8.1.8 cluster) comes out of the framer and decodes, with the
//! per-type totals of the manifest's `capture_summary`: real TCP segmentation, not just whole
//! messages one per file.

use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::path::Path;

use redis_cluster_bus::{Framed, Framer, Message};
use serde_json::Value;

/// One direction of a TCP connection: (source address and port, destination address and port).
type Flow = ([u8; 6], [u8; 6]);

/// The TCP payloads of an Ethernet/IPv4 pcap, reassembled per direction in sequence order.
fn tcp_streams(pcap: &[u8]) -> HashMap<Flow, Vec<u8>> {
    let magic = u32::from_le_bytes(pcap[..4].try_into().expect("pcap magic"));
    assert!(
        magic == 0xa1b2_c3d4 || magic == 0xa1b2_3c4d,
        "little-endian pcap, magic {magic:#x}"
    );
    let mut streams: HashMap<Flow, (u32, Vec<u8>)> = HashMap::new();
    let mut at = 24;
    while at + 16 <= pcap.len() {
        let caplen = u32::from_le_bytes(pcap[at + 8..at + 12].try_into().expect("u32")) as usize;
        let frame = &pcap[at + 16..at + 16 + caplen];
        at += 16 + caplen;
        if frame.len() < 14 || frame[12..14] != [0x08, 0x00] {
            continue; // not IPv4
        }
        let ip = &frame[14..];
        let ihl = usize::from(ip[0] & 0x0f) * 4;
        let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
        if ip[9] != 6 {
            continue; // not TCP
        }
        let tcp = &ip[ihl..total.min(ip.len())];
        let data_offset = usize::from(tcp[12] >> 4) * 4;
        let payload = &tcp[data_offset..];
        let seq = u32::from_be_bytes(tcp[4..8].try_into().expect("u32"));
        let syn = tcp[13] & 0x02 != 0;
        let mut src = [0u8; 6];
        src[..4].copy_from_slice(&ip[12..16]);
        src[4..].copy_from_slice(&tcp[0..2]);
        let mut dst = [0u8; 6];
        dst[..4].copy_from_slice(&ip[16..20]);
        dst[4..].copy_from_slice(&tcp[2..4]);
        let (next, bytes) = streams
            .entry((src, dst))
            .or_insert_with(|| (seq.wrapping_add(u32::from(syn)), Vec::new()));
        if syn {
            *next = seq.wrapping_add(1);
            continue;
        }
        // In order on loopback; a retransmission (already seen) is skipped.
        let offset = seq.wrapping_sub(*next);
        if payload.is_empty() || offset > u32::MAX / 2 {
            continue;
        }
        assert_eq!(offset, 0, "a gap in the capture");
        bytes.extend_from_slice(payload);
        *next = next.wrapping_add(payload.len() as u32);
    }
    streams
        .into_iter()
        .map(|(flow, (_, bytes))| (flow, bytes))
        .collect()
}

#[test]
fn every_captured_message_frames_and_decodes_with_the_manifest_totals() {
    let framer = Framer::default();
    for server in ["redis-7.0.15", "valkey-8.1.8"] {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../../shared/vectors/clusterbus")
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
        for (_, stream) in tcp_streams(&pcap) {
            let mut rest = &stream[..];
            // Messages come out whole however the segments cut them; a stream may end in the
            // middle of one when the capture stopped.
            while let Ok(Framed::Message(len)) = framer.frame(rest) {
                let message = Message::decode(&rest[..len])
                    .unwrap_or_else(|e| panic!("{server}: a captured message: {e}"));
                let name = message.kind().name().expect("a known type").to_owned();
                *by_type.entry(name).or_default() += 1;
                total += 1;
                rest = &rest[len..];
            }
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
