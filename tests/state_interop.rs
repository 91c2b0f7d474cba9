//! `redis-cluster-state` against a real `redis-server` 7.0: the nodes.conf we write is the
//! file a real server starts from (its identity, its slots, its epochs, the other node it
//! knows), and the server's own answers then match what our table says.

mod support;

use redis_cluster_proto::bus::NodeId;
use redis_cluster_proto::hash_slot::{Slot, SlotRange};
use redis_cluster_proto::resp::Frame;
use redis_cluster_proto::state::{ClusterNode, Config};
use support::RedisServer;

const OTHER: &str = "0123456789abcdef0123456789abcdef01234567";

fn ours(port: u16, bus_port: u16) -> ClusterNode {
    let mut config = Config::new("127.0.0.1", port);
    config.cport = bus_port;
    config.seed = 99;
    let other = format!(
        "{OTHER} 127.0.0.1:1@2 master - 0 0 7 disconnected 8192-16383\n\
         vars currentEpoch 9 lastVoteEpoch 3\n"
    );
    // Our node: slots 0-8191, config epoch 5, knowing a master that holds the rest.
    let mut node = ClusterNode::new(config.clone());
    node.add_slots(SlotRange::new(Slot::new(0).unwrap(), Slot::new(8191).unwrap()).unwrap())
        .expect("free");
    node.set_config_epoch(5).expect("alone");
    let text = format!(
        "{}{other}",
        node.nodes_conf()
            .replace("vars currentEpoch 5 lastVoteEpoch 0\n", "")
    );
    ClusterNode::from_nodes_conf(config, &text, 0).expect("our own text loads")
}

fn text(frame: Frame) -> String {
    match frame {
        Frame::BulkString(b) | Frame::SimpleString(b) => String::from_utf8_lossy(&b).into_owned(),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_real_server_starts_from_our_nodes_conf() {
    let server = RedisServer::start_cluster_with_conf(|port, bus| ours(port, bus).nodes_conf());
    let node = ours(server.port(), server.bus_port());
    let mut client = server.client();
    let myid = text(client.command(&[b"CLUSTER", b"MYID"]));
    assert_eq!(myid, node.myself().id.to_string());
    let info = text(client.command(&[b"CLUSTER", b"INFO"]));
    assert!(info.contains("cluster_slots_assigned:16384\r\n"), "{info}");
    assert!(info.contains("cluster_known_nodes:2\r\n"), "{info}");
    assert!(info.contains("cluster_current_epoch:9\r\n"), "{info}");
    assert!(info.contains("cluster_my_epoch:5\r\n"), "{info}");
    let nodes = text(client.command(&[b"CLUSTER", b"NODES"]));
    let other_id = NodeId(OTHER.as_bytes().try_into().unwrap());
    assert!(node.node(&other_id).is_some());
    let mine = nodes
        .lines()
        .find(|l| l.contains("myself"))
        .expect("myself line");
    assert!(mine.starts_with(&myid), "{nodes}");
    assert!(mine.ends_with(" 5 connected 0-8191"), "{nodes}");
    let theirs = nodes
        .lines()
        .find(|l| l.starts_with(OTHER))
        .expect("the other node");
    assert!(theirs.ends_with(" 7 disconnected 8192-16383"), "{nodes}");
    // And the server's own nodes.conf loads back into ours, the same table.
    assert_eq!(text(client.command(&[b"CLUSTER", b"SAVECONFIG"])), "OK");
    let saved = std::fs::read_to_string(server.dir().join("nodes.conf")).expect("nodes.conf");
    let config = node.config().clone();
    let back = ClusterNode::from_nodes_conf(config, &saved, 0).expect("the server's file loads");
    assert_eq!(back.myself().id, node.myself().id);
    assert_eq!(back.myself().slots, node.myself().slots);
    assert_eq!(back.current_epoch(), 9);
    assert_eq!(back.last_vote_epoch(), 3);
    assert_eq!(back.node(&other_id).map(|n| n.config_epoch), Some(7));
}
