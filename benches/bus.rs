//! Cluster-bus PINGs: decode-and-validate a view and encode, beside a plain copy of the same
//! bytes as the physical reference.
//!
//! Run with `cargo bench --bench bus`. A PING with 3, 12 and 100 gossip entries and two
//! extensions (hostname, shard id), built from a real capture's header; every iteration checks
//! what it decoded or wrote.

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use redis_cluster_proto::bus::{
    ExtensionType, Message, MessageType, NodeFlags, NodeId, OwnedBody, OwnedExtension, OwnedGossip,
    OwnedHeader, OwnedMessage, OwnedPing,
};
use redis_cluster_proto::hash_slot::{SlotRange, SlotSet};

fn ping(entries: usize) -> OwnedMessage {
    let id = |n: usize| NodeId(format!("{n:040x}").as_bytes().try_into().expect("40 bytes"));
    OwnedMessage {
        kind: MessageType::PING,
        header: Some(OwnedHeader {
            port: 7000,
            current_epoch: 8,
            config_epoch: 7,
            offset: 123_456,
            sender: id(1),
            myslots: SlotSet::from(
                SlotRange::new(
                    redis_cluster_proto::hash_slot::Slot::MIN,
                    redis_cluster_proto::hash_slot::Slot::new(5460).expect("slot"),
                )
                .expect("range"),
            ),
            replicaof: NodeId::NONE,
            myip: Vec::new(),
            pport: 0,
            cport: 17000,
            flags: NodeFlags::MASTER | NodeFlags::MYSELF | NodeFlags::MIGRATE_TO,
            state: 0,
            mflags: [0; 3],
        }),
        body: OwnedBody::Ping(
            OwnedPing::default()
                .with_gossip((0..entries).map(|n| {
                    OwnedGossip::new(id(n + 2))
                        .with_pong_received(1_796_029_366)
                        .with_ip(b"127.0.0.1")
                        .with_port(7001)
                        .with_cport(17001)
                        .with_flags(NodeFlags::REPLICA)
                }))
                .with_extensions([
                    OwnedExtension {
                        kind: ExtensionType::HOSTNAME,
                        payload: b"host-a1".to_vec(),
                        raw: false,
                    },
                    OwnedExtension {
                        kind: ExtensionType::SHARD_ID,
                        payload: id(99).0.to_vec(),
                        raw: false,
                    },
                ]),
        ),
    }
}

fn groups(c: &mut Criterion) {
    for entries in [3, 12, 100] {
        let message = ping(entries);
        let mut wire = Vec::new();
        message.encode(&mut wire);
        let mut group = c.benchmark_group(format!("ping_{entries}_gossip"));
        group.throughput(Throughput::Bytes(wire.len() as u64));
        let mut copy = vec![0u8; wire.len()];
        group.bench_function(BenchmarkId::from_parameter("copy (reference)"), |b| {
            b.iter(|| {
                copy.copy_from_slice(black_box(&wire));
                assert_eq!(copy[0], b'R');
            })
        });
        group.bench_function(BenchmarkId::from_parameter("decode view"), |b| {
            b.iter(|| {
                let Ok(Message::Ping(ping)) = Message::decode(black_box(&wire)) else {
                    panic!("a PING");
                };
                assert_eq!(ping.gossip().len(), entries);
                assert_eq!(ping.extensions().count(), 2);
            })
        });
        let mut out = Vec::with_capacity(wire.len());
        group.bench_function(BenchmarkId::from_parameter("encode"), |b| {
            b.iter(|| {
                out.clear();
                black_box(&message).encode(&mut out);
                assert_eq!(out.len(), wire.len());
            })
        });
        group.finish();
    }
}

criterion_group!(benches, groups);
criterion_main!(benches);
