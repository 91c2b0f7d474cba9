//! Shared by the tests that compare with the real files: a captured node's nodes.conf loaded,
//! then every bus link brought up and answered with a PONG made from that node's own line, as
//! the node was when the files were taken (links connected, no ping in flight).

#![allow(dead_code, unreachable_pub)]

use std::path::{Path, PathBuf};

use redis_cluster_bus::{
    ExtensionType, Message, MessageType, NodeFlags, NodeId, OwnedExtension, OwnedHeader,
    OwnedMessage, OwnedPing,
};
use redis_cluster_state::{ClusterNode, Config, Instant, LinkId, Output};
use redis_hash_slot::SlotSet;

pub const NOW: u64 = 1_800_000_000_123;

/// The four captures and their base node's port.
pub fn dirs() -> Vec<(PathBuf, u16)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/vectors/cluster-text");
    vec![
        (root.join("redis-7.0.15"), 7000),
        (root.join("redis-7.0.15/after-failovers"), 7000),
        (root.join("valkey-8.1.8"), 7100),
        (root.join("valkey-8.1.8/after-failovers"), 7100),
    ]
}

pub fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

pub fn load_conf(dir: &Path, port: u16) -> ClusterNode {
    let mut config = Config::new("127.0.0.1", port);
    config.hostname = Some("host-a1".into());
    ClusterNode::from_nodes_conf(
        config,
        &read(&dir.join("nodes.conf")),
        Instant::from_millis(NOW),
    )
    .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
}

/// The header of a master at 127.0.0.1:`port` (bus port + 10000) claiming `myslots`.
pub fn master_header(
    sender: NodeId,
    port: u16,
    current_epoch: u64,
    config_epoch: u64,
    myslots: SlotSet,
) -> OwnedHeader {
    OwnedHeader {
        port,
        current_epoch,
        config_epoch,
        offset: 0,
        sender,
        myslots,
        replicaof: NodeId::NONE,
        myip: b"127.0.0.1".to_vec(),
        pport: 0,
        cport: port + 10000,
        flags: NodeFlags::MASTER | NodeFlags::MYSELF,
        state: 0,
        mflags: [0; 3],
    }
}

/// A node id from its 40 hex characters.
pub fn id(text: &str) -> NodeId {
    NodeId(text.as_bytes().try_into().expect("40 bytes"))
}

/// Runs the node's cron at `now` and brings up every link it asks for, as a driver would at
/// once. The cron's own outputs are dropped; what the links' coming up sends (their MEET or
/// PING) is left queued.
#[allow(dead_code)] // not every test file links
pub fn connect(node: &mut ClusterNode, now: Instant) {
    node.handle_timeout(now);
    let links: Vec<LinkId> = std::iter::from_fn(|| node.poll_output(&mut Vec::new()))
        .filter_map(|output| match output {
            Output::Connect { link, .. } => Some(link),
            _ => None,
        })
        .collect();
    for link in links {
        node.handle_connected(link, now);
    }
}

/// The outbound link to `peer`.
#[allow(dead_code)] // not every test file links
pub fn link_to(node: &ClusterNode, peer: &NodeId) -> LinkId {
    node.node(peer)
        .and_then(|n| n.outbound_link)
        .expect("a link to the peer")
}

/// The node at 127.0.0.1:7000 that nodes.conf `text` describes, every link to the others up
/// (at 1 ms) and its outputs drained.
pub fn linked(text: &str) -> ClusterNode {
    let mut node =
        ClusterNode::from_nodes_conf(Config::new("127.0.0.1", 7000), text, Instant::ZERO)
            .expect("loads");
    connect(&mut node, Instant::from_millis(1));
    while node.poll_output(&mut Vec::new()).is_some() {}
    node
}

/// `header`'s PING, encoded and decoded as the bus carries it, arriving at 2 ms on a new
/// inbound link.
pub fn ping_from(node: &mut ClusterNode, header: OwnedHeader) {
    let mut wire = Vec::new();
    OwnedMessage::new(MessageType::PING, header, OwnedPing::default()).encode(&mut wire);
    let message = Message::decode(&wire).expect("a PING");
    let link = node.handle_accepted(Instant::from_millis(2));
    node.handle_message(link, "127.0.0.1", &message, Instant::from_millis(2));
}

/// The PONG `id` would send: its own view of itself, as the table records it.
fn pong_of(node: &ClusterNode, id: &NodeId) -> Vec<u8> {
    let peer = node.node(id).expect("known");
    let master = peer
        .master
        .and_then(|m| node.node(&m))
        .filter(|_| peer.is_replica());
    let header = OwnedHeader {
        port: peer.port,
        current_epoch: node.current_epoch(),
        config_epoch: master.map_or(peer.config_epoch, |m| m.config_epoch),
        offset: 14,
        sender: peer.id,
        myslots: master.map_or_else(|| (*peer.slots).clone(), |m| (*m.slots).clone()),
        replicaof: master.map_or(NodeId::NONE, |m| m.id),
        myip: peer.ip.as_bytes().to_vec(),
        pport: peer.pport,
        cport: peer.cport,
        flags: peer.flags | NodeFlags::MYSELF,
        state: 0,
        mflags: [0; 3],
    };
    // What the peer says of itself in extensions, as the server that wrote the file would.
    let mut ping = OwnedPing::default();
    let texts = [
        (ExtensionType::HOSTNAME, peer.hostname.as_deref()),
        (ExtensionType::HUMAN_NODENAME, peer.human_nodename()),
    ];
    for (kind, text) in texts {
        if let Some(text) = text {
            ping.extensions.push(OwnedExtension {
                kind,
                payload: text.as_bytes().to_vec(),
                raw: false,
            });
        }
    }
    if let Some(shard) = peer.shard_id() {
        ping.extensions.push(OwnedExtension {
            kind: ExtensionType::SHARD_ID,
            payload: shard.0.to_vec(),
            raw: true,
        });
    }
    let mut wire = Vec::new();
    OwnedMessage::new(MessageType::PONG, header, ping).encode(&mut wire);
    wire
}

/// [`load_conf`], then each link up and answered.
pub fn load(dir: &Path, port: u16) -> ClusterNode {
    let mut node = load_conf(dir, port);
    assert!(
        node.cluster_nodes().contains(" disconnected"),
        "no link right after a load"
    );
    let me = node.myself().id;
    let ids: Vec<NodeId> = node.nodes().map(|n| n.id).filter(|id| *id != me).collect();
    connect(&mut node, Instant::from_millis(NOW));
    for id in &ids {
        let wire = pong_of(&node, id);
        let message = Message::decode(&wire).expect("a PONG");
        let link = link_to(&node, id);
        node.handle_message(link, "127.0.0.1", &message, Instant::from_millis(NOW));
    }
    while node.poll_output(&mut Vec::new()).is_some() {}
    node
}
