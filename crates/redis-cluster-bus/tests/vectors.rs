//! Every real capture in the workspace's `tests/vectors/clusterbus` frames as one whole message, and every
//! header field read in place equals the manifest's decoding. Missing vectors fail the test.

use std::path::{Path, PathBuf};

use redis_cluster_bus::{
    BusError, Dialect, Framed, Framer, HEADER_LEN, Header, LIGHT_HEADER_LEN, Message, MessageType,
    NodeId,
};
use serde_json::Value;

/// The four servers whose captures are in `tests/vectors/clusterbus`.
const SERVERS: [&str; 4] = [
    "redis-7.0.15",
    "redis-8.2.3",
    "valkey-8.1.8",
    "valkey-9.1.2",
];

fn vectors_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/vectors/clusterbus")
}

fn field<'a>(entry: &'a Value, name: &str) -> &'a Value {
    entry
        .get(name)
        .unwrap_or_else(|| panic!("manifest entry without {name}: {entry}"))
}

fn uint(entry: &Value, name: &str) -> u64 {
    field(entry, name)
        .as_u64()
        .unwrap_or_else(|| panic!("{name} is not an unsigned integer"))
}

fn text<'a>(entry: &'a Value, name: &str) -> &'a str {
    field(entry, name)
        .as_str()
        .unwrap_or_else(|| panic!("{name} is not a string"))
}

fn node_id(text: &str) -> NodeId {
    NodeId(text.as_bytes().try_into().expect("a 40-byte node id"))
}

#[test]
fn real_messages_frame_and_their_headers_read_as_the_manifest_says() {
    let framer = Framer::default();
    let mut checked = 0;
    for server in SERVERS {
        let dir = vectors_dir().join(server);
        let manifest: Value = serde_json::from_slice(
            &std::fs::read(dir.join("manifest.json"))
                .unwrap_or_else(|e| panic!("{}: {e}", dir.display())),
        )
        .expect("manifest.json is JSON");
        let files = field(&manifest, "files").as_array().expect("files array");
        assert!(files.len() >= 30, "{server}: {} files", files.len());
        for entry in files {
            let name = text(entry, "file");
            let bytes = std::fs::read(dir.join(name)).expect("read vector");
            let what = format!("{server}/{name}");
            assert_eq!(bytes.len() as u64, uint(entry, "size"), "{what}");

            // The framer finds exactly this message, and waits while any of it is missing.
            assert_eq!(
                framer.frame(&bytes),
                Ok(Framed::Message(bytes.len())),
                "{what}"
            );
            for cut in [0, 1, 4, 13, 14, bytes.len() - 1] {
                assert!(
                    matches!(framer.frame(&bytes[..cut]), Ok(Framed::Incomplete(n)) if n > 0),
                    "{what} cut at {cut}"
                );
            }

            let message = Message::decode(&bytes).unwrap_or_else(|e| panic!("{what}: {e}"));
            check_body(&message, entry, &what);
            assert_eq!(
                message.kind().name(),
                Some(text(entry, "type_name")),
                "{what}"
            );
            // Owned, then encoded: the same bytes.
            let owned = message.to_owned_message();
            assert_eq!(owned.encoded_len(), bytes.len(), "{what}");
            let mut again = Vec::new();
            owned.encode(&mut again);
            assert!(again == bytes, "{what}: re-encoding differs");

            let kind = MessageType(u16::from_be_bytes([bytes[12], bytes[13]]));
            assert_eq!(u64::from(kind.0), uint(entry, "raw_type_field"), "{what}");
            assert_eq!(u64::from(kind.base().0), uint(entry, "type"), "{what}");
            assert_eq!(kind.name(), Some(text(entry, "type_name")), "{what}");
            assert_eq!(
                kind.is_light(),
                field(entry, "light_header").as_bool() == Some(true)
            );
            if kind.is_light() {
                assert!(bytes.len() >= LIGHT_HEADER_LEN);
                checked += 1;
                continue;
            }

            let header = Header::new(bytes[..HEADER_LEN].try_into().expect("2256 bytes"));
            assert_eq!(u64::from(header.totlen()), uint(entry, "totlen"), "{what}");
            assert_eq!(
                u64::from(header.version()),
                uint(entry, "version"),
                "{what}"
            );
            assert_eq!(u64::from(header.port()), uint(entry, "port"), "{what}");
            assert_eq!(u64::from(header.pport()), uint(entry, "pport"), "{what}");
            assert_eq!(u64::from(header.cport()), uint(entry, "cport"), "{what}");
            assert_eq!(u64::from(header.count()), uint(entry, "count"), "{what}");
            assert_eq!(
                header.current_epoch(),
                uint(entry, "current_epoch"),
                "{what}"
            );
            assert_eq!(header.config_epoch(), uint(entry, "config_epoch"), "{what}");
            assert_eq!(header.offset(), uint(entry, "offset"), "{what}");
            assert_eq!(header.sender(), node_id(text(entry, "sender")), "{what}");
            assert_eq!(header.myip(), text(entry, "sender_ip").as_bytes(), "{what}");
            assert_eq!(
                u64::from(header.flags().bits()),
                uint(entry, "flags"),
                "{what}"
            );
            assert_eq!(u64::from(header.state()), uint(entry, "state"), "{what}");
            let mflags: Vec<u64> = field(entry, "mflags")
                .as_array()
                .expect("mflags array")
                .iter()
                .filter_map(Value::as_u64)
                .collect();
            let ours: Vec<u64> = header.mflags().iter().map(|&b| u64::from(b)).collect();
            assert_eq!(ours, mflags, "{what}");
            assert_eq!(
                u64::from(header.extensions()),
                uint(entry, "extensions_field"),
                "{what}"
            );
            assert_eq!(
                header.myslots().len() as u64,
                uint(entry, "myslots_count"),
                "{what}"
            );
            let ranges: Vec<(u64, u64)> = header
                .myslots()
                .ranges()
                .map(|r| (u64::from(r.start().get()), u64::from(r.end().get())))
                .collect();
            let expected: Vec<(u64, u64)> = field(entry, "myslots_ranges")
                .as_array()
                .expect("ranges array")
                .iter()
                .map(|r| (r[0].as_u64().expect("start"), r[1].as_u64().expect("end")))
                .collect();
            assert_eq!(ranges, expected, "{what}");
            let replicaof = field(entry, "replicaof").as_str().map(node_id);
            assert_eq!(header.replicaof(), replicaof, "{what}");
            checked += 1;
        }
    }
    assert!(checked >= 70, "checked {checked} vectors");
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn ranges_of(value: &Value) -> Vec<(u64, u64)> {
    value
        .as_array()
        .expect("ranges array")
        .iter()
        .map(|r| (r[0].as_u64().expect("start"), r[1].as_u64().expect("end")))
        .collect()
}

/// The body fields against the manifest's decoding.
fn check_body(message: &Message<'_>, entry: &Value, what: &str) {
    match message {
        Message::Ping(ping) => {
            let gossip = ping.gossip();
            let expected = field(entry, "gossip").as_array().expect("gossip array");
            assert_eq!(gossip.len(), expected.len(), "{what}");
            for (ours, theirs) in gossip.zip(expected) {
                assert_eq!(ours.node(), node_id(text(theirs, "node_id")), "{what}");
                assert_eq!(ours.ip(), text(theirs, "ip").as_bytes(), "{what}");
                assert_eq!(u64::from(ours.port()), uint(theirs, "port"), "{what}");
                assert_eq!(u64::from(ours.cport()), uint(theirs, "cport"), "{what}");
                assert_eq!(u64::from(ours.pport()), uint(theirs, "pport"), "{what}");
                assert_eq!(
                    u64::from(ours.flags().bits()),
                    uint(theirs, "flags"),
                    "{what}"
                );
                assert_eq!(u64::from(ours.ping_sent()), uint(theirs, "ping_sent"));
                assert_eq!(
                    u64::from(ours.pong_received()),
                    uint(theirs, "pong_received")
                );
            }
            let expected = field(entry, "extensions").as_array().expect("extensions");
            let ours: Vec<_> = ping.extensions().collect();
            assert_eq!(ours.len(), expected.len(), "{what}");
            // Types 4 and 5 read as the sender's fork numbers them.
            let dialect = Dialect::of_sender(message.header().expect("a header").flags());
            for (ext, theirs) in ours.iter().zip(expected) {
                assert_eq!(u64::from(ext.kind().0), uint(theirs, "type"), "{what}");
                assert_eq!(ext.len() as u64, uint(theirs, "length"), "{what}");
                let name = ext.kind().name_in(dialect).expect("a known type");
                assert_eq!(name, text(theirs, "type_name"), "{what}");
                if let Some(value) = ext.text_in(dialect) {
                    assert_eq!(value, text(theirs, "value").as_bytes(), "{what}");
                }
                if let Some(secret) = ext.internal_secret(dialect) {
                    assert_eq!(
                        &secret[..],
                        text(theirs, "internal_secret").as_bytes(),
                        "{what}"
                    );
                }
                if let Some((node, ttl)) = ext.forgotten_node() {
                    assert_eq!(node, node_id(text(theirs, "node_id")), "{what}");
                    assert_eq!(ttl, uint(theirs, "ttl_seconds"), "{what}");
                }
                if let Some(shard) = ext.shard_id() {
                    assert_eq!(shard, node_id(text(theirs, "shard_id")), "{what}");
                }
            }
        }
        Message::Fail(fail) => {
            let expected = field(entry, "fail");
            assert_eq!(fail.node(), node_id(text(expected, "node_id")), "{what}");
        }
        Message::Publish(body) => {
            let (channel, message) = (body.channel(), body.message());
            let publish = field(entry, "publish");
            assert_eq!(channel.len() as u64, uint(publish, "channel_len"), "{what}");
            assert_eq!(message.len() as u64, uint(publish, "message_len"), "{what}");
            if let Some(text) = field(publish, "channel")
                .get("text")
                .and_then(Value::as_str)
            {
                assert_eq!(channel, text.as_bytes(), "{what}");
            }
        }
        Message::Update(body) => {
            let slots = body.slots();
            let update = field(entry, "update");
            assert_eq!(body.config_epoch(), uint(update, "config_epoch"), "{what}");
            assert_eq!(body.node(), node_id(text(update, "node_id")), "{what}");
            assert_eq!(slots.len() as u64, uint(update, "slots_count"), "{what}");
            let ours: Vec<(u64, u64)> = slots
                .ranges()
                .map(|r| (u64::from(r.start().get()), u64::from(r.end().get())))
                .collect();
            assert_eq!(ours, ranges_of(field(update, "slot_ranges")), "{what}");
        }
        Message::Module(body) => {
            let module = field(entry, "module");
            let id = hex(&body.module_id());
            assert_eq!(id, text(module, "module_id_raw_hex"), "{what}");
            assert_eq!(
                u64::from(body.kind()),
                uint(module, "module_type"),
                "{what}"
            );
            let len = body.payload().len() as u64;
            assert_eq!(len, uint(module, "payload_len"), "{what}");
        }
        Message::Failover(_) => {}
        Message::Unknown(_) => panic!("{what}: a known type decoded as unknown"),
    }
}

#[test]
fn truncated_and_corrupted_vectors_never_panic() {
    let framer = Framer::default();
    for server in SERVERS {
        let dir = vectors_dir().join(server);
        for name in ["PING-002.bin", "PONG-005.bin", "UPDATE-000.bin"] {
            let bytes = std::fs::read(dir.join(name)).expect("read vector");
            for cut in 0..bytes.len() {
                assert!(
                    Message::decode(&bytes[..cut]).is_err(),
                    "{server}/{name} cut {cut}"
                );
                assert!(matches!(
                    framer.frame(&bytes[..cut]),
                    Ok(Framed::Incomplete(_))
                ));
            }
            let mut corrupt = bytes.clone();
            for at in 0..bytes.len() {
                for flip in [0x01, 0x80, 0xff] {
                    corrupt[at] ^= flip;
                    let _ = Message::decode(&corrupt);
                    let _ = framer.frame(&corrupt);
                    corrupt[at] ^= flip;
                }
            }
        }
    }
}

#[test]
fn the_framer_rejects_what_the_servers_reject() {
    let framer = Framer::default();
    let mut ping = vec![0u8; HEADER_LEN];
    ping[..4].copy_from_slice(b"RCmb");
    ping[4..8].copy_from_slice(&(HEADER_LEN as u32).to_be_bytes());
    assert_eq!(framer.frame(&ping), Ok(Framed::Message(HEADER_LEN)));

    assert_eq!(framer.frame(b"RCmX"), Err(BusError::BadSignature(*b"RCmX")));
    assert_eq!(framer.frame(b"G"), Err(BusError::BadSignature(*b"G\0\0\0")));
    let mut short = ping.clone();
    short[4..8].copy_from_slice(&2255u32.to_be_bytes());
    assert_eq!(
        framer.frame(&short),
        Err(BusError::TooShort {
            totlen: 2255,
            min: 2256
        })
    );
    let mut huge = ping.clone();
    huge[4..8].copy_from_slice(&u32::MAX.to_be_bytes());
    assert_eq!(
        framer.frame(&huge[..14]),
        Err(BusError::TooLong {
            totlen: u32::MAX,
            max: Framer::DEFAULT_MAX_TOTLEN
        })
    );
    let mut light_ping = ping[..16].to_vec();
    light_ping[4..8].copy_from_slice(&16u32.to_be_bytes());
    light_ping[12..14].copy_from_slice(&0x8000u16.to_be_bytes());
    assert_eq!(
        framer.frame(&light_ping),
        Err(BusError::BadLightType(0x8000))
    );
    assert_eq!(
        BusError::BadSignature(*b"RCmX").action(),
        redis_cluster_bus::Action::CloseLink
    );
    assert_eq!(
        BusError::BadLightType(0x8000).action(),
        redis_cluster_bus::Action::DropMessage
    );
}
