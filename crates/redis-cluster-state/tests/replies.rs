//! CLUSTER SLOTS, SHARDS and INFO from a loaded node against the real replies of the same node
//! in the workspace's `tests/vectors/cluster-text/`: SLOTS byte for byte in both protocols, SHARDS shard by
//! shard (the server lists them in its hash table's order), INFO up to the message counters.

mod support;

use redis_cluster_bus::MessageType;
use redis_cluster_state::{ClusterNode, Protocol};
use redis_resp::{Frame, Status};
use support::dirs;

/// The captured node with its links up and each node's replication offset (an input: gossip
/// headers and the replication layer give it) as that capture's SHARDS reply shows it.
fn load(dir: &std::path::Path, port: u16) -> ClusterNode {
    let mut node = support::load(dir, port);
    let shards = std::fs::read(dir.join("cluster-shards.resp2")).expect("vector");
    let Frame::Array(shards) = decode(&shards) else {
        panic!("an array")
    };
    for shard in &shards {
        let Frame::Array(fields) = shard else {
            panic!("a flat map")
        };
        let Frame::Array(nodes) = &fields[3] else {
            panic!("nodes")
        };
        for entry in nodes {
            let Frame::Array(entry) = entry else {
                panic!("a flat map")
            };
            let value = |name: &[u8]| {
                let at = entry
                    .iter()
                    .position(|f| *f == Frame::BulkString(name))
                    .expect("field");
                entry[at + 1].clone()
            };
            let (Frame::BulkString(id), Frame::Integer(offset)) =
                (value(b"id"), value(b"replication-offset"))
            else {
                panic!("id and offset")
            };
            let id = redis_cluster_bus::NodeId(id.try_into().expect("40 bytes"));
            assert!(node.set_replication_offset(
                &id,
                offset as u64,
                redis_cluster_state::Instant::ZERO
            ));
        }
    }
    node
}

fn encode(frame: &Frame<Vec<u8>>) -> Vec<u8> {
    let mut out = Vec::new();
    redis_resp::encode(frame, &mut out);
    out
}

fn decode(bytes: &[u8]) -> Frame<&[u8]> {
    match redis_resp::decode(bytes).expect("RESP") {
        Status::Complete((frame, _)) => frame,
        Status::Incomplete { .. } => panic!("whole"),
    }
}

#[test]
fn cluster_slots_is_byte_exact() {
    for (dir, port) in dirs() {
        let node = load(&dir, port);
        for (protocol, file) in [
            (Protocol::Resp2, "cluster-slots.resp2"),
            (Protocol::Resp3, "cluster-slots.resp3"),
        ] {
            let real = std::fs::read(dir.join(file)).expect("vector");
            let ours = encode(&node.cluster_slots(protocol));
            assert!(
                ours == real,
                "{}/{file}:\nours {}\nreal {}",
                dir.display(),
                String::from_utf8_lossy(&ours),
                String::from_utf8_lossy(&real)
            );
        }
    }
}

/// Each shard's encoding; with `any_node_order`, each shard's nodes sorted first (Valkey lists a
/// shard's nodes in its own list order, Redis 7.0 the master first).
fn shards<B: AsRef<[u8]> + Clone>(reply: &Frame<B>, any_node_order: bool) -> Vec<String> {
    let Frame::Array(shards) = reply else {
        panic!("an array")
    };
    let mut out: Vec<String> = shards
        .iter()
        .map(|shard| {
            let mut shard = shard.clone();
            if any_node_order {
                let nodes = match &mut shard {
                    Frame::Array(flat) => &mut flat[3],
                    Frame::Map(pairs) => &mut pairs[1].1,
                    _ => panic!("a shard"),
                };
                if let Frame::Array(nodes) = nodes {
                    nodes.sort_by_key(|node| {
                        let mut bytes = Vec::new();
                        redis_resp::encode(node, &mut bytes);
                        bytes
                    });
                }
            }
            let mut bytes = Vec::new();
            redis_resp::encode(&shard, &mut bytes);
            String::from_utf8_lossy(&bytes).into_owned()
        })
        .collect();
    // The server lists shards in its hash table's order.
    out.sort();
    out
}

#[test]
fn cluster_shards_has_the_real_shards() {
    for (dir, port) in dirs() {
        let node = load(&dir, port);
        let valkey = dir.display().to_string().contains("valkey");
        for (protocol, file) in [
            (Protocol::Resp2, "cluster-shards.resp2"),
            (Protocol::Resp3, "cluster-shards.resp3"),
        ] {
            let real = std::fs::read(dir.join(file)).expect("vector");
            assert_eq!(
                shards(&node.cluster_shards(protocol), valkey),
                shards(&decode(&real), valkey),
                "{}/{file}",
                dir.display()
            );
        }
    }
}

#[test]
fn cluster_info_matches_up_to_the_counters() {
    for (dir, port) in dirs() {
        let node = load(&dir, port);
        let real = std::fs::read_to_string(dir.join("cluster-info.txt")).expect("vector");
        let head = |text: &str| -> Vec<String> {
            text.split("\r\n")
                .take_while(|l| !l.starts_with("cluster_stats"))
                .map(String::from)
                .collect()
        };
        let ours = node.cluster_info();
        assert_eq!(head(&ours), head(&real), "{}", dir.display());
        // Five links came up: five PINGs sent, five PONGs received.
        assert!(ours.ends_with(
            "cluster_stats_messages_ping_sent:5\r\ncluster_stats_messages_sent:5\r\n\
             cluster_stats_messages_pong_received:5\r\ncluster_stats_messages_received:5\r\n\
             total_cluster_links_buffer_limit_exceeded:0\r\n"
        ));
    }
    let mut node = load(&dirs()[0].0, 7000);
    node.count_message(MessageType::PING, true);
    node.count_message(MessageType::MEET, false);
    let info = node.cluster_info();
    assert!(info.contains(
        "cluster_stats_messages_ping_sent:6\r\ncluster_stats_messages_sent:6\r\n\
         cluster_stats_messages_pong_received:5\r\ncluster_stats_messages_meet_received:1\r\n\
         cluster_stats_messages_received:6\r\n"
    ));
    // Links the driver freed over cluster-link-sendbuf-limit, and whose each link is.
    node.count_link_over_limit();
    node.count_link_over_limit();
    assert!(
        node.cluster_info()
            .ends_with("\r\ntotal_cluster_links_buffer_limit_exceeded:2\r\n")
    );
    let me = node.myself().id;
    let links: Vec<_> = node
        .nodes()
        .filter(|n| n.id != me)
        .map(|n| (n.id, n.outbound_link.expect("a link to every node")))
        .collect();
    assert_eq!(links.len(), 5);
    for (id, link) in links {
        assert_eq!(node.link_peer(link), Some(("to", id)));
        node.handle_link_down(
            link,
            redis_cluster_state::Instant::from_millis(support::NOW),
        );
        assert_eq!(node.link_peer(link), None);
    }
}
