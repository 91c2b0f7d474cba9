//! A role learned from another node's header is written to nodes.conf, as the server writes
//! it (`clusterDoBeforeSleep(CLUSTER_TODO_SAVE_CONFIG)` when a master turns replica, when a
//! replica changes master, and when a replica turns master).

use redis_cluster_bus::NodeFlags;
use redis_cluster_state::{ClusterNode, Output};
use redis_hash_slot::{Slot, SlotSet};
mod support;

use support::id;

const ME: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const B: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
const C: &str = "cccccccccccccccccccccccccccccccccccccccc";
const D: &str = "dddddddddddddddddddddddddddddddddddddddd";

/// Me, B owning 0-99, C owning 100-199, D a replica of C; every link up.
fn fixture() -> ClusterNode {
    support::linked(&format!(
        "{ME} 127.0.0.1:7000@17000 myself,master - 0 0 1 connected\n\
         {B} 127.0.0.1:7001@17001 master - 0 0 5 connected 0-99\n\
         {C} 127.0.0.1:7002@17002 master - 0 0 3 connected 100-199\n\
         {D} 127.0.0.1:7003@17003 slave {C} 0 0 3 connected\n\
         vars currentEpoch 5 lastVoteEpoch 0\n"
    ))
}

/// A PING from `sender`, a replica of `master` or (None) a master claiming `slots`; whether
/// the node asked for its configuration to be saved.
fn ping(
    node: &mut ClusterNode,
    sender: &str,
    port: u16,
    master: Option<&str>,
    slots: &[u16],
) -> bool {
    let mut myslots = SlotSet::new();
    for &s in slots {
        myslots.insert(Slot::new(s).expect("a slot"));
    }
    let mut header = support::master_header(id(sender), port, 5, 5, myslots);
    if let Some(master) = master {
        header.replicaof = id(master);
        header.flags = NodeFlags(NodeFlags::REPLICA.0 | NodeFlags::MYSELF.0);
    }
    support::ping_from(node, header);
    let mut saved = false;
    while let Some(output) = node.poll_output() {
        saved |= matches!(output, Output::SaveConfig);
    }
    saved
}

fn line_of(node: &ClusterNode, who: &str) -> String {
    let conf = node.nodes_conf();
    conf.lines()
        .find(|line| line.starts_with(who))
        .unwrap_or_else(|| panic!("{who} in\n{conf}"))
        .to_string()
}

#[test]
fn roles_learned_from_headers_are_saved() {
    let mut node = fixture();
    // Nothing new: nothing to save.
    assert!(
        !ping(&mut node, D, 7003, Some(C), &[]),
        "D's role did not change"
    );

    // A master turned replica.
    assert!(ping(&mut node, B, 7001, Some(C), &[]));
    assert!(
        line_of(&node, B).contains(&format!(" slave {C} ")),
        "{}",
        line_of(&node, B)
    );
    assert!(
        !ping(&mut node, B, 7001, Some(C), &[]),
        "the same role again"
    );

    // A replica with a new master.
    assert!(ping(&mut node, D, 7003, Some(B), &[]));
    assert!(
        line_of(&node, D).contains(&format!(" slave {B} ")),
        "{}",
        line_of(&node, D)
    );

    // A replica turned master.
    assert!(ping(&mut node, D, 7003, None, &[]));
    assert!(
        line_of(&node, D).contains(" master - "),
        "{}",
        line_of(&node, D)
    );
}

/// A replica serves its master's slots for sharded pub/sub, and stops when a slot moves to
/// another shard (the server's `removeChannelsInSlot` on the replica too).
#[test]
fn a_replica_serves_its_masters_slots_until_they_move() {
    let mut node = support::linked(&format!(
        "{ME} 127.0.0.1:7000@17000 myself,slave {C} 0 0 3 connected\n\
         {B} 127.0.0.1:7001@17001 master - 0 0 2 connected 0-99\n\
         {C} 127.0.0.1:7002@17002 master - 0 0 3 connected 100-199\n\
         vars currentEpoch 3 lastVoteEpoch 0\n"
    ));
    let slot = |n| Slot::new(n).expect("a slot");
    assert!(node.serves_slot(slot(150)));
    assert!(!node.serves_slot(slot(50)));
    assert!(!node.serves_slot(slot(500)), "a slot nobody owns");
    // B, at a higher epoch, claims 100-199: they leave C's shard.
    ping(&mut node, B, 7001, None, &[0, 1, 100, 150, 199]);
    assert_eq!(node.owner(slot(150)).map(|n| n.id), Some(id(B)));
    assert!(!node.serves_slot(slot(150)));
}
