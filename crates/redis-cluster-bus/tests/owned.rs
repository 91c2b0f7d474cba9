//! Any owned message encodes to bytes that decode back to the same message.

use proptest::prelude::*;
use redis_cluster_bus::{
    Dialect, ExtensionType, Framed, Framer, Message, MessageType, NodeFlags, NodeId, OwnedBody,
    OwnedExtension, OwnedFail, OwnedGossip, OwnedHeader, OwnedMessage, OwnedModule, OwnedPing,
    OwnedPublish, OwnedUpdate,
};
use redis_hash_slot::SlotSet;

fn node_id() -> impl Strategy<Value = NodeId> {
    prop_oneof![
        Just(NodeId::NONE),
        "[0-9a-f]{40}".prop_map(|s| NodeId(s.as_bytes().try_into().expect("40 bytes"))),
    ]
}

/// Text without NUL bytes, at most 45 bytes: what fits in a 46-byte C-string field.
fn c_string() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(1u8..=255, 0..=45)
}

fn slots() -> impl Strategy<Value = SlotSet> {
    proptest::collection::vec(0u16..16384, 0..20).prop_map(|slots| {
        slots
            .into_iter()
            .filter_map(redis_hash_slot::Slot::new)
            .collect()
    })
}

fn extension() -> impl Strategy<Value = OwnedExtension> {
    prop_oneof![
        (
            prop_oneof![Just(0u16), Just(1), Just(4), Just(5)],
            c_string()
        )
            .prop_map(|(k, text)| {
                OwnedExtension {
                    kind: ExtensionType(k),
                    payload: text,
                    raw: false,
                }
            }),
        (node_id(), any::<u64>()).prop_map(|(id, ttl)| OwnedExtension {
            kind: ExtensionType::FORGOTTEN_NODE,
            payload: [&id.0[..], &ttl.to_be_bytes()].concat(),
            raw: false,
        }),
        node_id().prop_map(|id| OwnedExtension {
            kind: ExtensionType::SHARD_ID,
            payload: id.0.to_vec(),
            raw: false,
        }),
        (6u16..1000, proptest::collection::vec(any::<u8>(), 0..4)).prop_map(|(k, words)| {
            OwnedExtension {
                kind: ExtensionType(k),
                payload: words.iter().flat_map(|w| [*w; 8]).collect(),
                raw: false,
            }
        }),
    ]
}

fn gossip() -> impl Strategy<Value = OwnedGossip> {
    (
        node_id(),
        any::<(u32, u32, u16, u16, u16, u16)>(),
        c_string(),
    )
        .prop_map(
            |(node, (ping_sent, pong_received, port, cport, flags, pport), ip)| {
                OwnedGossip::new(node)
                    .with_ping_sent(ping_sent)
                    .with_pong_received(pong_received)
                    .with_ip(&ip)
                    .with_port(port)
                    .with_cport(cport)
                    .with_flags(NodeFlags::from_bits_retain(flags))
                    .with_pport(pport)
            },
        )
}

fn header() -> impl Strategy<Value = OwnedHeader> {
    (
        any::<(u16, u64, u64, u64, u16, u16, u16, u8)>(),
        node_id(),
        node_id(),
        slots(),
        c_string(),
        any::<[u8; 3]>(),
    )
        .prop_map(
            |(
                (port, current_epoch, config_epoch, offset, pport, cport, flags, state),
                sender,
                replicaof,
                myslots,
                myip,
                mflags,
            )| OwnedHeader {
                port,
                current_epoch,
                config_epoch,
                offset,
                sender,
                myslots,
                replicaof,
                myip,
                pport,
                cport,
                flags: NodeFlags::from_bits_retain(flags),
                state,
                mflags,
            },
        )
}

fn message() -> impl Strategy<Value = OwnedMessage> {
    let bytes = || proptest::collection::vec(any::<u8>(), 0..64);
    let with_header = |kind: u16, body: OwnedBody| (header(), Just(kind), Just(body));
    prop_oneof![
        (
            header(),
            0u16..3,
            proptest::collection::vec(gossip(), 0..5),
            proptest::collection::vec(extension(), 0..5),
        )
            .prop_map(|(mut header, kind, gossip, extensions)| {
                // EXT_DATA travels with the extensions: set when there are some.
                if !extensions.is_empty() {
                    header.mflags[0] |= 0x04;
                }
                OwnedMessage {
                    kind: MessageType(kind),
                    header: Some(header),
                    body: OwnedBody::Ping(
                        OwnedPing::default()
                            .with_gossip(gossip)
                            .with_extensions(extensions),
                    ),
                }
            }),
        (header(), node_id()).prop_map(|(h, node)| OwnedMessage {
            kind: MessageType::FAIL,
            header: Some(h),
            body: OwnedBody::Fail(OwnedFail { node }),
        }),
        (
            prop::option::of(header()),
            prop_oneof![Just(4u16), Just(10)],
            bytes(),
            bytes()
        )
            .prop_map(|(header, kind, channel, message)| OwnedMessage {
                kind: MessageType(kind),
                header,
                body: OwnedBody::Publish(OwnedPublish { channel, message }),
            }),
        (header(), any::<u64>(), node_id(), slots()).prop_map(|(h, config_epoch, node, slots)| {
            OwnedMessage {
                kind: MessageType::UPDATE,
                header: Some(h),
                body: OwnedBody::Update(OwnedUpdate {
                    config_epoch,
                    node,
                    slots,
                }),
            }
        }),
        (
            prop::option::of(header()),
            any::<[u8; 8]>(),
            any::<u8>(),
            bytes()
        )
            .prop_map(|(header, module_id, kind, payload)| OwnedMessage {
                kind: MessageType::MODULE,
                header,
                body: OwnedBody::Module(OwnedModule {
                    module_id,
                    kind,
                    payload,
                }),
            }),
        prop_oneof![
            with_header(5, OwnedBody::Failover),
            with_header(6, OwnedBody::Failover),
            with_header(8, OwnedBody::Failover)
        ]
        .prop_map(|(h, kind, body)| OwnedMessage {
            kind: MessageType(kind),
            header: Some(h),
            body,
        }),
        (header(), 11u16..0x8000, bytes()).prop_map(|(h, kind, body)| OwnedMessage {
            kind: MessageType(kind),
            header: Some(h),
            body: OwnedBody::Unknown(body),
        }),
    ]
}

proptest! {
    #[test]
    fn owned_messages_round_trip(message in message()) {
        let mut wire = Vec::new();
        message.encode(&mut wire);
        prop_assert_eq!(wire.len(), message.encoded_len());
        prop_assert_eq!(Framer::default().frame(&wire), Ok(Framed::Message(wire.len())));
        let decoded = Message::decode(&wire).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let owned = decoded.to_owned_message();
        // The same bytes again, whichever dialect the sender's flags name.
        let mut again = Vec::new();
        owned.encode(&mut again);
        prop_assert!(again == wire, "re-encoding differs");
        // The same value when the flags name Valkey, whose numbering the generated text
        // extensions 4 and 5 follow (under Redis's they are kept raw).
        let valkey = message
            .header
            .as_ref()
            .is_some_and(|h| Dialect::of_sender(h.flags) == Dialect::Valkey);
        let forked = matches!(
            &message.body,
            OwnedBody::Ping(ping) if ping.extensions.iter().any(|e| matches!(e.kind.0, 4 | 5))
        );
        if valkey || !forked {
            prop_assert_eq!(owned, message);
        }
    }
}

proptest! {
    /// `NodeId` compares by words; the answers must be the bytes' own, including ids that
    /// share a long prefix and differ in the last byte.
    #[test]
    fn node_id_order_is_byte_order(
        a in proptest::array::uniform32(any::<u8>()),
        tail_a in proptest::array::uniform8(any::<u8>()),
        b in proptest::array::uniform32(any::<u8>()),
        tail_b in proptest::array::uniform8(any::<u8>()),
        share in 0usize..=40,
    ) {
        let mut x = [0u8; 40];
        x[..32].copy_from_slice(&a);
        x[32..].copy_from_slice(&tail_a);
        let mut y = [0u8; 40];
        y[..32].copy_from_slice(&b);
        y[32..].copy_from_slice(&tail_b);
        y[..share].copy_from_slice(&x[..share]);
        prop_assert_eq!(NodeId(x).cmp(&NodeId(y)), x.cmp(&y));
        prop_assert_eq!(NodeId(x) == NodeId(y), x == y);
        prop_assert_eq!(NodeId(x).partial_cmp(&NodeId(y)), x.partial_cmp(&y));
    }
}
