//! Hostile bus input: any bytes, framed as a bus stream, fed to a node that is part of a
//! three-node cluster, on an inbound link or on its links to the others, with its cron in
//! between. Nothing panics, and the node's tables stay consistent: every slot's owner is a
//! known node whose slot set holds the slot, and nodes.conf has one line a node.
//!
//! The node is built once per process and cloned for each input (loading its nodes.conf
//! binds 16 384 slots one by one, most of an input's time when it was built each time).
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use redis_cluster_bus::{Framed, Framer, Message, NodeId};
use redis_cluster_state::{ClusterNode, Config, Instant, LinkId, Node, Output};
use redis_hash_slot::Slot;

const A: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const B: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
const C: &str = "cccccccccccccccccccccccccccccccccccccccc";

/// The node, its links to B and C up (its first cron asked for them), and one inbound link.
fn node() -> (ClusterNode, [LinkId; 3]) {
    let text = format!(
        "{A} 10.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-5460\n\
         {B} 10.0.0.2:7001@17001 master - 0 0 2 connected 5461-16383\n\
         {C} 10.0.0.3:7002@17002 slave {B} 0 0 2 connected\n\
         vars currentEpoch 2 lastVoteEpoch 0\n"
    );
    let mut node =
        ClusterNode::from_nodes_conf(Config::new("10.0.0.1", 7000), &text, Instant::ZERO)
            .expect("a valid view");
    node.handle_timeout(Instant::ZERO);
    let mut to = Vec::new();
    while let Some(output) = node.poll_output(&mut Vec::new()) {
        if let Output::Connect { link, node: id, .. } = output {
            to.push((id, link));
        }
    }
    to.sort();
    for &(_, link) in &to {
        node.handle_connected(link, Instant::ZERO);
    }
    let link = |id: &str| {
        let id = NodeId(id.as_bytes().try_into().expect("40"));
        to.iter()
            .find(|(n, _)| *n == id)
            .map(|&(_, l)| l)
            .expect("a link")
    };
    let inbound = node.handle_accepted(Instant::ZERO);
    let links = [inbound, link(B), link(C)];
    (node, links)
}

fuzz_target!(|input: &[u8]| {
    static PROTOTYPE: OnceLock<(ClusterNode, [LinkId; 3])> = OnceLock::new();
    let (mut node, links) = PROTOTYPE.get_or_init(node).clone();
    let framer = Framer::default();
    let mut rest = input;
    let mut now = 0u64;
    let mut handled = 0usize;
    let mut out = Vec::new();
    while let Some((&control, stream)) = rest.split_first() {
        now += u64::from(control) * 10;
        node.handle_timeout(Instant::from_millis(now));
        let Ok(Framed::Message(len)) = framer.frame(stream) else {
            break;
        };
        let (bytes, after) = stream.split_at(len);
        rest = after;
        let Ok(message) = Message::decode(bytes) else {
            continue;
        };
        let link = links[usize::from(control % 3)];
        node.handle_message(link, "10.0.0.9", &message, Instant::from_millis(now));
        handled += 1;
        // Every message the node writes is one it can read back.
        while let Some(output) = node.poll_output(&mut out) {
            if matches!(output, Output::Transmit { .. }) {
                assert!(
                    Message::decode(&out).is_ok(),
                    "an unreadable message: {out:?}"
                );
            }
        }
    }
    // Only a message rebinds slots (this master's cron alone does not): an input without one
    // leaves the prototype's checked table as it was.
    if handled == 0 {
        return;
    }
    // Owners come in runs of slots: each run is checked once, against its owner's slot set's
    // ranges, and its owner looked up among the known nodes once (a run ends where the
    // owner's table entry, compared by address, changes).
    let mut run: Option<(&Node, u16)> = None;
    for n in 0..=16384u16 {
        let owner = Slot::new(n).and_then(|slot| node.owner(slot));
        let same = match (run, owner) {
            (Some((a, _)), Some(b)) => std::ptr::eq(a, b),
            (None, None) => true,
            _ => false,
        };
        if same {
            continue;
        }
        if let Some((owner, first)) = run {
            let (first, last) = (
                Slot::new(first).expect("slot"),
                Slot::new(n - 1).expect("slot"),
            );
            assert!(
                owner
                    .slots
                    .ranges()
                    .any(|r| r.contains(first) && r.contains(last)),
                "slots {first}-{last}: owner and slot set disagree"
            );
            assert!(
                node.node(&owner.id).is_some(),
                "slot {first}: an unknown owner"
            );
        }
        run = owner.map(|owner| (owner, n));
    }
    // One line a known node (those still in a handshake are not written) and the vars
    // line: nothing a peer sent breaks a line (a hostname or node name with a line break
    // once did).
    let conf = node.nodes_conf();
    let written = node.nodes().filter(|n| !n.in_handshake()).count();
    assert_eq!(conf.lines().count(), written + 1, "nodes.conf:\n{conf}");
    let _ = node.cluster_info();
});
