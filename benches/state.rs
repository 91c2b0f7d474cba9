//! The state machine's two hot paths, with `redis-cluster-state`.
//!
//! Run with `cargo bench --bench state`. Groups:
//! - `route`: the redirect decision for one key (served here, or MOVED), beside the lookup a
//!   proxy does with `redis-cluster-route`'s `SlotMap` (key → slot → master) as the reference;
//! - `ping_100_gossip`: one PING with 100 gossip entries from a known master, decoded and
//!   processed by a node that knows 100 nodes, beside decoding alone.
//!
//! Every result is checked inside the measured loop.

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use redis_cluster_proto::bus::{
    Message, MessageType, NodeFlags, NodeId, OwnedGossip, OwnedHeader, OwnedMessage, OwnedPing,
};
use redis_cluster_proto::hash_slot::{Slot, key_slot};
use redis_cluster_proto::route::{ReadFrom, SlotMap};
use redis_cluster_proto::state::{ClusterNode, Config, Instant, Request};

fn id(i: usize) -> String {
    format!(
        "{:016x}{:024x}",
        (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15),
        i
    )
}

/// `nodes` masters (slots split evenly) as a nodes.conf with node 0 as myself.
fn layout(nodes: usize) -> String {
    let mut text = String::new();
    for i in 0..nodes {
        let (start, end) = (i * 16384 / nodes, (i + 1) * 16384 / nodes - 1);
        let flags = if i == 0 { "myself,master" } else { "master" };
        text.push_str(&format!(
            "{} 127.0.0.1:{}@{} {flags} - 0 0 {} connected {start}-{end}\n",
            id(i),
            7000 + i,
            17000 + i,
            i + 1
        ));
    }
    text.push_str(&format!("vars currentEpoch {nodes} lastVoteEpoch 0\n"));
    text
}

fn route(c: &mut Criterion) {
    let text = layout(3);
    let node = ClusterNode::from_nodes_conf(Config::new("127.0.0.1", 7000), &text, Instant::ZERO)
        .expect("layout");
    let map = SlotMap::from_cluster_nodes(&text).expect("layout");
    let mut group = c.benchmark_group("route");
    for (name, key) in [("served", &b"bar"[..]), ("moved", &b"foo"[..])] {
        let keys = [key];
        let expected = node.route(&Request::new(&keys), |_| true).to_string();
        group.bench_function(BenchmarkId::new("ClusterNode::route", name), |b| {
            b.iter(|| {
                let decision = node.route(black_box(&Request::new(&keys)), |_| true);
                assert_eq!(decision.is_served(), expected.is_empty());
            })
        });
        let port = map.master(key_slot(key)).map(|m| m.port);
        group.bench_function(BenchmarkId::new("SlotMap lookup (reference)", name), |b| {
            b.iter(|| {
                let master = map.node_for(key_slot(black_box(key)), false, ReadFrom::Master, 0);
                assert_eq!(master.map(|m| m.port), port);
            })
        });
    }
    group.finish();
}

fn ping(c: &mut Criterion) {
    let text = layout(101);
    let base = ClusterNode::from_nodes_conf(Config::new("127.0.0.1", 7000), &text, Instant::ZERO)
        .expect("layout");
    // A PING from node 1 with every other node as a gossip entry.
    let sender = base
        .node(&NodeId(id(1).as_bytes().try_into().expect("40")))
        .expect("known")
        .clone();
    let header = OwnedHeader {
        port: sender.port,
        current_epoch: 101,
        config_epoch: sender.config_epoch,
        offset: 0,
        sender: sender.id,
        myslots: (*sender.slots).clone(),
        replicaof: NodeId::NONE,
        myip: b"127.0.0.1".to_vec(),
        pport: 0,
        cport: sender.cport,
        flags: NodeFlags::MASTER | NodeFlags::MYSELF,
        state: 0,
        mflags: [0; 3],
    };
    let gossip = (2..102).map(|i| {
        let n = base
            .node(&NodeId(id(i % 101).as_bytes().try_into().expect("40")))
            .expect("known");
        OwnedGossip::new(n.id)
            .with_ip(b"127.0.0.1")
            .with_port(n.port)
            .with_cport(n.cport)
            .with_flags(NodeFlags::MASTER)
    });
    let mut wire = Vec::new();
    OwnedMessage::new(
        MessageType::PING,
        header,
        OwnedPing::default().with_gossip(gossip),
    )
    .encode(&mut wire);
    let mut group = c.benchmark_group("ping_100_gossip");
    group.bench_function(BenchmarkId::from_parameter("decode (reference)"), |b| {
        b.iter(|| {
            let Ok(Message::Ping(ping)) = Message::decode(black_box(&wire)) else {
                panic!("a PING")
            };
            assert_eq!(ping.gossip().len(), 100);
        })
    });
    let mut node = base.clone();
    // Loading the layout queued a state change event: drained, so that each PING below
    // leaves exactly its PONG.
    while node.poll_output(&mut Vec::new()).is_some() {}
    let link = node.handle_accepted(Instant::from_millis(1_000));
    // The PONG is written into one buffer, reused, as a driver does.
    let mut pong = Vec::new();
    group.bench_function(
        BenchmarkId::from_parameter("decode + handle_message + encode the PONG"),
        |b| {
            b.iter(|| {
                let message = Message::decode(black_box(&wire)).expect("a PING");
                node.handle_message(link, "127.0.0.1", &message, Instant::from_millis(1_000));
                let reply = node.poll_output(&mut pong).expect("a PONG");
                black_box((&reply, &pong));
                assert!(node.poll_output(&mut pong).is_none());
            })
        },
    );
    group.finish();
    assert_eq!(u16::from(key_slot(b"foo")), 12182);
    let _ = Slot::new(0);
}

criterion_group!(benches, route, ping);
criterion_main!(benches);
