//! What a gossip entry does (semantics 3, the server's `clusterProcessGossipSection`): about
//! a node we already know, failure reports aside, it may give us a newer pong time, and for
//! a node we see failing, a new address; about one we do not, it adds it by name when the
//! sender is known (and the cron pings it), and nothing when it is not.

use redis_cluster_bus::{Message, MessageType, NodeFlags, OwnedGossip, OwnedMessage, OwnedPing};
use redis_cluster_state::{ClusterNode, Config, Duration, Instant, Output};
mod support;

use redis_hash_slot::SlotSet;
use support::id;

const ME: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const B: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
const C: &str = "cccccccccccccccccccccccccccccccccccccccc";
const D: &str = "dddddddddddddddddddddddddddddddddddddddd";

/// Node timeout of the fixture (ms).
const TIMEOUT: u64 = 15_000;

/// Me, and masters B (the gossip's sender), C and D, every link up and its first PING
/// answered at 2 ms; D flagged `d_flags`.
fn fixture(d_flags: &str) -> ClusterNode {
    let text = format!(
        "{ME} 127.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-99\n\
         {B} 127.0.0.1:7001@17001 master - 0 0 2 connected 100-199\n\
         {C} 127.0.0.1:7002@17002 master - 0 0 3 connected 200-299\n\
         {D} 127.0.0.1:7003@17003 {d_flags} - 0 0 4 connected 300-399\n\
         vars currentEpoch 4 lastVoteEpoch 0\n"
    );
    let mut config = Config::new("127.0.0.1", 7000);
    config.node_timeout = Duration::from_millis(TIMEOUT);
    let mut node = ClusterNode::from_nodes_conf(config, &text, Instant::ZERO).expect("loads");
    support::connect(&mut node, Instant::from_millis(1));
    // Link-up PINGs are in flight now: their PONGs settle them, as on a real link (a PONG
    // would clear a PFAIL flag: a failing D gets none).
    let failing = d_flags.contains("fail");
    for peer in [B, C, D].into_iter().filter(|p| *p != D || !failing) {
        let pong = message(peer, MessageType::PONG, vec![]);
        let link = support::link_to(&node, &id(peer));
        node.handle_message(link, "127.0.0.1", &decode(&pong), Instant::from_millis(2));
    }
    while node.poll_output(&mut Vec::new()).is_some() {}
    node
}

fn port_of(peer: &str) -> u16 {
    match peer {
        B => 7001,
        C => 7002,
        _ => 7003,
    }
}

/// A message of `kind` from master `sender` (its slots and epoch as in the fixture) carrying
/// `gossip`.
fn message(sender: &str, kind: MessageType, gossip: Vec<OwnedGossip>) -> Vec<u8> {
    let port = port_of(sender);
    let mut myslots = SlotSet::new();
    let first = (port - 7000) * 100;
    for s in first..first + 100 {
        myslots.insert(redis_hash_slot::Slot::new(s).expect("a slot"));
    }
    let header = support::master_header(id(sender), port, 4, u64::from(port - 6999), myslots);
    let mut wire = Vec::new();
    OwnedMessage::new(kind, header, OwnedPing::default().with_gossip(gossip)).encode(&mut wire);
    wire
}

fn decode(wire: &[u8]) -> Message<'_> {
    Message::decode(wire).expect("a message")
}

/// An entry about `about` at 127.0.0.1:`port`, its last PONG at `pong` seconds.
fn entry(about: &str, port: u16, pong: u32, flags: NodeFlags) -> OwnedGossip {
    OwnedGossip::new(id(about))
        .with_pong_received(pong)
        .with_ip(b"127.0.0.1")
        .with_port(port)
        .with_cport(port + 10000)
        .with_flags(flags)
}

/// B's PING at `now` with one entry.
fn gossip(node: &mut ClusterNode, entry: OwnedGossip, now: u64) -> Vec<Output> {
    let wire = message(B, MessageType::PING, vec![entry]);
    let link = node.handle_accepted(Instant::from_millis(now));
    node.handle_message(link, "127.0.0.1", &decode(&wire), Instant::from_millis(now));
    std::iter::from_fn(|| node.poll_output(&mut Vec::new())).collect()
}

fn pong_of(node: &ClusterNode, who: &str) -> u64 {
    node.node(&id(who)).expect("known").pong_received
}

#[test]
fn a_healthy_entry_gives_a_newer_pong_time_in_whole_seconds() {
    let mut node = fixture("master");
    // Our own PONG from C arrived at 2 ms; B saw one at 150 s, which is newer.
    let now = 150_700;
    gossip(&mut node, entry(C, 7002, 150, NodeFlags::MASTER), now);
    assert_eq!(pong_of(&node, C), 150_000);
    // An older figure never moves it back.
    gossip(&mut node, entry(C, 7002, 120, NodeFlags::MASTER), now + 10);
    assert_eq!(pong_of(&node, C), 150_000);
    // Our own entry too: the reason `myself` shows a round pong time.
    gossip(&mut node, entry(ME, 7000, 150, NodeFlags::MASTER), now + 20);
    assert_eq!(pong_of(&node, ME), 150_000);
}

#[test]
fn no_pong_time_from_the_future_or_from_a_failing_entry() {
    let mut node = fixture("master");
    let before = pong_of(&node, C);
    // 151 s is more than 500 ms ahead of 150.4 s.
    gossip(&mut node, entry(C, 7002, 151, NodeFlags::MASTER), 150_400);
    assert_eq!(pong_of(&node, C), before);
    // Exactly 500 ms ahead is still accepted.
    gossip(&mut node, entry(C, 7002, 151, NodeFlags::MASTER), 150_500);
    assert_eq!(pong_of(&node, C), 151_000);
    // An entry that says PFAIL or FAIL gives nothing.
    for flag in [NodeFlags::PFAIL, NodeFlags::FAIL] {
        let flags = NodeFlags::MASTER | flag;
        gossip(&mut node, entry(C, 7002, 160, flags), 170_000);
        assert_eq!(pong_of(&node, C), 151_000);
    }
}

#[test]
fn no_pong_time_while_a_ping_is_in_flight_or_a_report_is_valid() {
    let mut node = fixture("master");
    // The cron pings every node whose PONG is older than half the timeout: C among them.
    node.handle_timeout(Instant::from_millis(TIMEOUT));
    let in_flight = node.node(&id(C)).expect("known").ping_sent;
    assert_ne!(in_flight, 0, "the cron pinged C");
    let before = pong_of(&node, C);
    gossip(&mut node, entry(C, 7002, 120, NodeFlags::MASTER), 120_000);
    assert_eq!(pong_of(&node, C), before, "a ping is in flight");

    // D: B (a master) reports it PFAIL at 200 s; the report holds for 2 × the timeout.
    let mut node = fixture("master");
    let pfail = NodeFlags::MASTER | NodeFlags::PFAIL;
    gossip(&mut node, entry(D, 7003, 190, pfail), 200_000);
    assert_eq!(
        node.failure_reports(&id(D), Instant::from_millis(200_000)),
        1
    );
    let before = pong_of(&node, D);
    // C (another master) gossips D healthy: not B's report, so it stays and counts.
    let wire = message(
        C,
        MessageType::PING,
        vec![entry(D, 7003, 205, NodeFlags::MASTER)],
    );
    let from_c = node.handle_accepted(Instant::from_millis(210_000));
    node.handle_message(
        from_c,
        "127.0.0.1",
        &decode(&wire),
        Instant::from_millis(210_000),
    );
    assert_eq!(pong_of(&node, D), before, "a valid report blocks it");
    // Once the report is older than 2 × the timeout, the same news is taken.
    let later = 200_000 + 2 * TIMEOUT + 1;
    let wire = message(
        C,
        MessageType::PING,
        vec![entry(D, 7003, 230, NodeFlags::MASTER)],
    );
    node.handle_message(
        from_c,
        "127.0.0.1",
        &decode(&wire),
        Instant::from_millis(later),
    );
    assert_eq!(pong_of(&node, D), 230_000);
}

#[test]
fn a_failing_node_seen_healthy_elsewhere_moves_to_the_address_gossiped() {
    let mut node = fixture("master,fail?");
    let old = support::link_to(&node, &id(D));
    let outputs = gossip(&mut node, entry(D, 7013, 150, NodeFlags::MASTER), 150_700);
    let d = node.node(&id(D)).expect("known");
    assert_eq!((d.ip.as_str(), d.port, d.cport), ("127.0.0.1", 7013, 17013));
    assert!(!d.link, "the old link is dropped");
    assert!(
        outputs
            .iter()
            .any(|o| matches!(o, Output::Close(link) if *link == old)),
        "{outputs:?}"
    );
    // The next cron connects to the new address.
    node.handle_timeout(Instant::from_millis(150_800));
    let connect = std::iter::from_fn(|| node.poll_output(&mut Vec::new())).find_map(|o| match o {
        Output::Connect {
            node: n, ip, cport, ..
        } if n == id(D) => Some((ip, cport)),
        _ => None,
    });
    assert_eq!(connect, Some((String::from("127.0.0.1"), 17013)));
}

#[test]
fn a_healthy_node_keeps_its_address_and_a_failing_entry_moves_nothing() {
    // Healthy from our side: a different address in gossip changes nothing.
    let mut node = fixture("master");
    let outputs = gossip(&mut node, entry(D, 7013, 150, NodeFlags::MASTER), 150_700);
    assert_eq!(node.node(&id(D)).expect("known").port, 7003);
    assert!(!outputs.iter().any(|o| matches!(o, Output::Close(_))));
    // Failing from our side, but the entry says failing too.
    let mut node = fixture("master,fail?");
    let pfail = NodeFlags::MASTER | NodeFlags::PFAIL;
    gossip(&mut node, entry(D, 7013, 150, pfail), 150_700);
    assert_eq!(node.node(&id(D)).expect("known").port, 7003);
}

const E: &str = "eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee";

#[test]
fn an_unknown_node_from_a_known_sender_is_added_under_its_id_and_pinged_not_met() {
    let mut node = fixture("master");
    gossip(&mut node, entry(E, 7004, 0, NodeFlags::REPLICA), 5);
    let e = node
        .node(&id(E))
        .expect("added under the id the entry gives");
    assert!(!e.in_handshake(), "no handshake: the node is known by name");
    assert!(e.is_replica(), "with the role the entry gives");
    assert_eq!((e.port, e.cport), (7004, 17004));
    // The cron connects to it; the first message on the link is a PING, not a MEET.
    support::connect(&mut node, Instant::from_millis(101));
    let mut wire = Vec::new();
    let first = std::iter::from_fn(|| node.poll_output(&mut wire).map(|o| (o, wire.clone())))
        .find_map(|(o, wire)| match o {
            Output::Transmit { .. } => Message::decode(&wire).ok().map(|m| m.kind()),
            _ => None,
        });
    assert_eq!(first, Some(MessageType::PING));
}

#[test]
fn a_meet_from_an_unknown_node_adds_none_of_the_nodes_it_gossips() {
    let mut node = fixture("master");
    let mut myslots = SlotSet::new();
    myslots.insert(redis_hash_slot::Slot::new(9000).expect("a slot"));
    let header = support::master_header(id(E), 7004, 4, 1, myslots);
    let mut wire = Vec::new();
    let stranger = "ffffffffffffffffffffffffffffffffffffffff";
    let gossip = vec![entry(stranger, 7005, 0, NodeFlags::MASTER)];
    OwnedMessage::new(
        MessageType::MEET,
        header,
        OwnedPing::default().with_gossip(gossip),
    )
    .encode(&mut wire);
    let link = node.handle_accepted(Instant::from_millis(5));
    node.handle_message(link, "127.0.0.1", &decode(&wire), Instant::from_millis(5));
    assert!(node.node(&id(stranger)).is_none());
    // The MEET's sender itself is met back (a handshake node), as the server does.
    assert!(node.nodes().any(|n| n.in_handshake() && n.port == 7004));
}
