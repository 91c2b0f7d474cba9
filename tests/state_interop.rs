//! `redis-cluster-state` against a real `redis-server` 7.0: the nodes.conf we write is the
//! file a real server starts from (its identity, its slots, its epochs, the other node it
//! knows), and the server's own answers then match what our table says.

mod support;

use redis_cluster_proto::bus::{
    Message, MessageType, NodeFlags, NodeId, OwnedHeader, OwnedMessage, OwnedPing,
};
use redis_cluster_proto::hash_slot::{Slot, SlotRange};
use redis_cluster_proto::resp::Frame;
use redis_cluster_proto::state::{ClusterNode, Config, Instant, LinkStats, Output, Protocol};
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
    node.add_slots(
        SlotRange::new(Slot::new(0).unwrap(), Slot::new(8191).unwrap()).unwrap(),
        Instant::ZERO,
    )
    .expect("free");
    node.set_config_epoch(5, Instant::ZERO).expect("alone");
    let text = format!(
        "{}{other}",
        node.nodes_conf()
            .replace("vars currentEpoch 5 lastVoteEpoch 0\n", "")
    );
    ClusterNode::from_nodes_conf(config, &text, Instant::ZERO).expect("our own text loads")
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
    let back = ClusterNode::from_nodes_conf(config, &saved, Instant::ZERO)
        .expect("the server's file loads");
    assert_eq!(back.myself().id, node.myself().id);
    assert_eq!(back.myself().slots, node.myself().slots);
    assert_eq!(back.current_epoch(), 9);
    assert_eq!(back.last_vote_epoch(), 3);
    assert_eq!(back.node(&other_id).map(|n| n.config_epoch), Some(7));
}

/// The figures of one link in a real `CLUSTER LINKS` reply (RESP2 flat pairs or RESP3 map).
fn link_figures(entry: &Frame) -> (String, String, LinkStats) {
    let pairs: Vec<(Frame, Frame)> = match entry {
        Frame::Array(items) => items
            .chunks(2)
            .map(|p| (p[0].clone(), p[1].clone()))
            .collect(),
        Frame::Map(pairs) => pairs.clone(),
        other => panic!("{other:?}"),
    };
    let get = |name: &str| {
        pairs
            .iter()
            .find(|(k, _)| *k == Frame::BulkString(name.as_bytes().to_vec().into()))
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| panic!("no {name} in {entry:?}"))
    };
    let int = |name: &str| match get(name) {
        Frame::Integer(n) => u64::try_from(n).unwrap(),
        other => panic!("{other:?}"),
    };
    let stats = LinkStats {
        create_time: int("create-time"),
        events: text(get("events")),
        send_buffer_allocated: int("send-buffer-allocated"),
        send_buffer_used: int("send-buffer-used"),
    };
    (text(get("direction")), text(get("node")), stats)
}

/// CLUSTER LINKS of a real node with one peer, both links up, equals ours for the same
/// links and figures, byte for byte, in RESP2 and RESP3.
#[test]
fn cluster_links_match_a_real_server() {
    let a = RedisServer::start_cluster(&[]);
    let b = RedisServer::start_cluster(&[]);
    let mut client = a.client();
    let (port, bus) = (b.port().to_string(), b.bus_port().to_string());
    let meet: [&[u8]; 5] = [
        b"CLUSTER",
        b"MEET",
        b"127.0.0.1",
        port.as_bytes(),
        bus.as_bytes(),
    ];
    let reply = client.command(&meet);
    assert_eq!(reply, Frame::SimpleString("OK".into()));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let links = loop {
        let reply = client.command(&[b"CLUSTER", b"LINKS"]);
        let Frame::Array(links) = &reply else {
            panic!("{reply:?}")
        };
        if links.len() == 2 {
            break reply;
        }
        assert!(std::time::Instant::now() < deadline, "links: {reply:?}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    let mut resp3 = a.client();
    resp3.command(&[b"HELLO", b"3"]);
    let links3 = resp3.command(&[b"CLUSTER", b"LINKS"]);

    // Our node: A's own table, the link to B up, and a message from B on an inbound one.
    let nodes = text(client.command(&[b"CLUSTER", b"NODES"]));
    let mut config = Config::new("127.0.0.1", a.port());
    config.cport = a.bus_port();
    let mut ours = ClusterNode::from_nodes_conf(config, &nodes, Instant::from_millis(1))
        .expect("CLUSTER NODES loads");
    let b_id = text(b.client().command(&[b"CLUSTER", b"MYID"]));
    let b_id = NodeId(b_id.as_bytes().try_into().unwrap());
    // The cron asks for links to every node it knows (B only: A is itself).
    ours.handle_timeout(Instant::from_millis(2));
    let to_b = std::iter::from_fn(|| ours.poll_output(&mut Vec::new()))
        .find_map(|o| match o {
            Output::Connect { link, node, .. } if node == b_id => Some(link),
            _ => None,
        })
        .expect("a link to B asked for");
    ours.handle_connected(to_b, Instant::from_millis(2));
    let peer = ours.node(&b_id).expect("B is known").clone();
    let header = OwnedHeader {
        port: peer.port,
        current_epoch: ours.current_epoch(),
        config_epoch: peer.config_epoch,
        offset: 0,
        sender: b_id,
        myslots: (*peer.slots).clone(),
        replicaof: NodeId::NONE,
        myip: b"127.0.0.1".to_vec(),
        pport: 0,
        cport: peer.cport,
        flags: NodeFlags::MASTER | NodeFlags::MYSELF,
        state: 0,
        mflags: [0; 3],
    };
    let mut wire = Vec::new();
    OwnedMessage::new(MessageType::PING, header, OwnedPing::default()).encode(&mut wire);
    let message = Message::decode(&wire).expect("a PING");
    let from_b = ours.handle_accepted(Instant::from_millis(3));
    ours.handle_message(from_b, "127.0.0.1", &message, Instant::from_millis(3));

    for (protocol, real) in [(Protocol::Resp2, &links), (Protocol::Resp3, &links3)] {
        let Frame::Array(entries) = real else {
            panic!("{real:?}")
        };
        let figures: Vec<(String, String, LinkStats)> = entries.iter().map(link_figures).collect();
        for (_, node, _) in &figures {
            assert_eq!(*node, b_id.to_string());
        }
        let stats = |link| {
            let direction = if link == to_b { "to" } else { "from" };
            let found = figures.iter().find(|(d, _, _)| d == direction);
            found.map(|(_, _, s)| s.clone()).expect("both directions")
        };
        let mine = ours.cluster_links(protocol, stats);
        let (mut want, mut got) = (Vec::new(), Vec::new());
        redis_cluster_proto::resp::encode(real, &mut want);
        redis_cluster_proto::resp::encode(&mine, &mut got);
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(&want),
            "{protocol:?}"
        );
    }
}
