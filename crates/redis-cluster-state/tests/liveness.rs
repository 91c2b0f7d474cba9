//! The PFAIL rule of the server's cron: a node is PFAIL when our PING to it has waited longer
//! than the node timeout *and* nothing else came from it for as long
//! (`min(ping_delay, data_delay) > cluster-node-timeout`). A node that drops our PINGs but
//! keeps sending its own (`DEBUG DROP-CLUSTER-PACKET-FILTER 0`, a PONG stuck behind Pub/Sub
//! traffic) is alive; Redis's 27-endpoints suite relies on it, where a master that filters
//! PINGs for a few seconds must not be failed over. And a link whose PING waits half the
//! timeout with nothing else heard is reset (closed and opened again, a new PING on it).

use redis_cluster_bus::{Message, MessageType, OwnedMessage, OwnedPing};
use redis_cluster_state::{ClusterNode, Config, Duration, Instant, LinkId, Output};
use redis_hash_slot::{Slot, SlotSet};
mod support;

use support::id;

/// The type of the message a node wrote into `wire`, if it wrote one.
fn kind_of(wire: &[u8]) -> Option<MessageType> {
    Message::decode(wire).ok().map(|m| m.kind())
}

const ME: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const B: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
const C: &str = "cccccccccccccccccccccccccccccccccccccccc";

/// Node timeout (ms).
const TIMEOUT: u64 = 2_000;

/// Me (7000), and masters B (7001) and C (7002), links up at 1 ms.
fn cluster() -> ClusterNode {
    let text = format!(
        "{ME} 127.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-99\n\
         {B} 127.0.0.1:7001@17001 master - 0 0 2 connected 100-199\n\
         {C} 127.0.0.1:7002@17002 master - 0 0 3 connected 200-299\n\
         vars currentEpoch 3 lastVoteEpoch 0\n"
    );
    let mut config = Config::new("127.0.0.1", 7000);
    config.node_timeout = Duration::from_millis(TIMEOUT);
    let mut node = ClusterNode::from_nodes_conf(config, &text, Instant::ZERO).expect("loads");
    support::connect(&mut node, Instant::from_millis(1));
    node
}

/// A PING or PONG of master `sender` at 127.0.0.1:`port`, its slots as in [`cluster`].
fn message(sender: &str, port: u16, kind: MessageType) -> Vec<u8> {
    let first = (port - 7000) * 100;
    let mut slots = SlotSet::new();
    for s in first..first + 100 {
        slots.insert(Slot::new(s).expect("a slot"));
    }
    let header = support::master_header(id(sender), port, 3, u64::from(port - 6999), slots);
    let mut wire = Vec::new();
    OwnedMessage::new(kind, header, OwnedPing::default()).encode(&mut wire);
    wire
}

fn deliver(node: &mut ClusterNode, link: LinkId, wire: &[u8], now: u64) {
    let message = Message::decode(wire).expect("a message");
    node.handle_message(link, "127.0.0.1", &message, Instant::from_millis(now));
}

/// Runs the cron every 100 ms from `from` to `to`: C answers each of our PINGs with a PONG;
/// B answers none, and sends a PING of its own every second while `b_talks`. Returns
/// whether B was ever PFAIL, and whether our link to it was reset.
fn run(node: &mut ClusterNode, from: u64, to: u64, b_talks: bool) -> (bool, bool) {
    let mut b_pfail = false;
    let mut b_reset = false;
    let (b_link, c_link) = (
        support::link_to(node, &id(B)),
        support::link_to(node, &id(C)),
    );
    let from_b = node.handle_accepted(Instant::from_millis(from));
    let mut now = from;
    while now <= to {
        node.handle_timeout(Instant::from_millis(now));
        if b_talks && now % 1000 == 0 {
            deliver(node, from_b, &message(B, 7001, MessageType::PING), now);
        }
        let mut wire = Vec::new();
        let outputs: Vec<(Output, Option<MessageType>)> =
            std::iter::from_fn(|| node.poll_output(&mut wire).map(|o| (o, kind_of(&wire))))
                .collect();
        for (output, kind) in outputs {
            b_reset |= output == Output::Close(b_link);
            if let Output::Transmit { links } = output {
                if links.contains(&c_link) && kind == Some(MessageType::PING) {
                    deliver(node, c_link, &message(C, 7002, MessageType::PONG), now);
                }
            }
        }
        b_pfail |= node.node(&id(B)).expect("known").is_pfailed();
        now += 100;
    }
    (b_pfail, b_reset)
}

#[test]
fn a_node_that_answers_no_ping_but_keeps_talking_is_not_pfail() {
    let mut node = cluster();
    // Five node timeouts: B's PING from the link-up waits all along.
    let (pfail, reset) = run(&mut node, 1000, 5 * TIMEOUT, true);
    assert!(!pfail, "B talks: not PFAIL");
    assert!(!reset, "B talks: our link to it is not reset");
    assert!(
        node.node(&id(B)).expect("known").ping_sent != 0,
        "our PING is unanswered"
    );
    assert!(!node.node(&id(C)).expect("known").is_pfailed());
}

#[test]
fn a_node_that_falls_silent_is_pfail_one_timeout_after_its_last_message() {
    let mut node = cluster();
    assert!(!run(&mut node, 1000, 3 * TIMEOUT, true).0);
    let last = 3 * TIMEOUT / 1000 * 1000; // its last PING
    // Silent from then on: not PFAIL until one timeout has passed since its last message.
    assert!(!run(&mut node, 3 * TIMEOUT + 100, last + TIMEOUT, false).0);
    let (pfail, _) = run(&mut node, last + TIMEOUT + 100, last + TIMEOUT + 200, false);
    assert!(pfail);
    assert!(!node.node(&id(C)).expect("known").is_pfailed(), "C answers");
}

/// The outputs of the cron every 100 ms from `from` to `to`, B silent and C answering.
fn outputs(node: &mut ClusterNode, from: u64, to: u64) -> Vec<(u64, Output)> {
    let mut all = Vec::new();
    let c_link = support::link_to(node, &id(C));
    let mut now = from;
    while now <= to {
        node.handle_timeout(Instant::from_millis(now));
        let mut wire = Vec::new();
        while let Some(output) = node.poll_output(&mut wire) {
            if let Output::Transmit { links } = &output {
                if links.contains(&c_link) && kind_of(&wire) == Some(MessageType::PING) {
                    deliver(node, c_link, &message(C, 7002, MessageType::PONG), now);
                }
            }
            all.push((now, output));
        }
        now += 100;
    }
    all
}

#[test]
fn a_stuck_link_is_reset_once_a_timeout_and_the_new_one_pings_again() {
    let mut node = cluster();
    let ping_sent = node.node(&id(B)).expect("known").ping_sent;
    let (b_link, c_link) = (
        support::link_to(&node, &id(B)),
        support::link_to(&node, &id(C)),
    );
    let all = outputs(&mut node, 100, 2 * TIMEOUT);
    let closed: Vec<u64> = all
        .iter()
        .filter(|(_, o)| *o == Output::Close(b_link))
        .map(|(t, _)| *t)
        .collect();
    // Up at 1 ms with its PING in flight, silent: reset once the link is older than the
    // timeout (the later of that and half the timeout of waiting), and reconnected.
    assert_eq!(closed, vec![TIMEOUT + 100], "{all:?}");
    let connect = all
        .iter()
        .position(|(_, o)| matches!(o, Output::Connect { node: n, .. } if *n == id(B)));
    let close = all.iter().position(|(_, o)| *o == Output::Close(b_link));
    assert!(connect > close, "the reset link is opened again: {all:?}");
    let new_link = all
        .iter()
        .find_map(|(_, o)| match o {
            Output::Connect { link, node: n, .. } if *n == id(B) => Some(*link),
            _ => None,
        })
        .expect("a new link");
    assert_ne!(new_link, b_link, "a new handle");
    // The new link's PING keeps the first ping's time: PFAIL is not put off.
    node.handle_connected(new_link, Instant::from_millis(2 * TIMEOUT));
    assert_eq!(node.node(&id(B)).expect("known").ping_sent, ping_sent);
    let mut wire = Vec::new();
    let pinged = std::iter::from_fn(|| node.poll_output(&mut wire).map(|o| (o, kind_of(&wire))))
        .any(|(o, kind)| match o {
            Output::Transmit { links } => {
                links.contains(&new_link) && kind == Some(MessageType::PING)
            }
            _ => false,
        });
    assert!(pinged);
    assert!(node.node(&id(B)).expect("known").is_pfailed());
    // C answers: its link is never reset.
    assert!(!all.iter().any(|(_, o)| *o == Output::Close(c_link)));
}
