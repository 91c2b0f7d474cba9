//! Semantics 2.2 and 2.3 around an owner that stops claiming a slot (`owner_not_claiming_slot`
//! in the server): the binding stays, any claimant may take the slot, and it is no evidence
//! for an UPDATE.

use redis_cluster_bus::{Message, MessageType, NodeId};
use redis_cluster_state::{ClusterNode, LinkId, Output};
use redis_hash_slot::{Slot, SlotSet};
use support::id;

mod support;

const ME: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const B: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
const C: &str = "cccccccccccccccccccccccccccccccccccccccc";
const D: &str = "dddddddddddddddddddddddddddddddddddddddd";

fn slot(n: u16) -> Slot {
    Slot::new(n).expect("a slot")
}

/// Me (no slots), B owning 0-99 at config epoch 5, C and D slotless masters at epochs 3 and 2;
/// every link up.
fn fixture() -> ClusterNode {
    support::linked(&format!(
        "{ME} 127.0.0.1:7000@17000 myself,master - 0 0 1 connected\n\
         {B} 127.0.0.1:7001@17001 master - 0 0 5 connected 0-99\n\
         {C} 127.0.0.1:7002@17002 master - 0 0 3 connected\n\
         {D} 127.0.0.1:7003@17003 master - 0 0 2 connected\n\
         vars currentEpoch 5 lastVoteEpoch 0\n"
    ))
}

/// A PING from master `sender` at `epoch` claiming `slots`.
fn ping(node: &mut ClusterNode, sender: &str, port: u16, epoch: u64, slots: &[u16]) {
    let mut myslots = SlotSet::new();
    for &s in slots {
        myslots.insert(slot(s));
    }
    support::ping_from(
        node,
        support::master_header(id(sender), port, 5, epoch, myslots),
    );
}

/// The UPDATE messages among the outputs, as (to, about, slots described).
fn updates(node: &mut ClusterNode) -> Vec<(LinkId, NodeId, Vec<u16>)> {
    let mut out = Vec::new();
    let mut wire = Vec::new();
    while let Some(output) = node.poll_output(&mut wire) {
        if let Output::Transmit { links } = output {
            let message = Message::decode(&wire).expect("a message");
            if message.kind() == MessageType::UPDATE {
                let Message::Update(update) = message else {
                    panic!("an UPDATE")
                };
                let slots: Vec<u16> = SlotSet::from(update.slots())
                    .iter()
                    .map(u16::from)
                    .collect();
                for link in links {
                    out.push((link, update.node(), slots.clone()));
                }
            }
        }
    }
    out
}

fn owner(node: &ClusterNode, n: u16) -> Option<NodeId> {
    node.owner(slot(n)).map(|o| o.id)
}

#[test]
fn a_lower_epoch_claim_is_refused_while_the_owner_claims_the_slot() {
    let mut node = fixture();
    ping(&mut node, B, 7001, 5, &(0..100).collect::<Vec<_>>());
    ping(&mut node, C, 7002, 3, &[42]);
    assert_eq!(owner(&node, 42), Some(id(B)));
    // C's stale claim earns it an UPDATE about B, with all of B's slots.
    let sent = updates(&mut node);
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0].1, id(B));
    assert_eq!(sent[0].2, (0..100).collect::<Vec<_>>());
}

#[test]
fn a_slot_its_owner_stops_claiming_stays_bound_until_anyone_claims_it() {
    let mut node = fixture();
    // B stops claiming 42 (it gave it away): the binding stays, the cluster stays up.
    let without_42: Vec<u16> = (0..100).filter(|&s| s != 42).collect();
    ping(&mut node, B, 7001, 5, &without_42);
    assert_eq!(owner(&node, 42), Some(id(B)));
    assert!(node.myself().slots.is_empty());

    // D claims another of B's slots at a lower epoch: refused, and the UPDATE about B leaves
    // 42 out of B's slots.
    ping(&mut node, D, 7003, 2, &[7]);
    assert_eq!(owner(&node, 7), Some(id(B)));
    let sent = updates(&mut node);
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0].2, without_42);

    // A claim of 42 alone is no stale claim (no UPDATE), and C takes it even with a lower
    // epoch than B's.
    ping(&mut node, C, 7002, 3, &[42]);
    assert_eq!(owner(&node, 42), Some(id(C)));
    assert!(updates(&mut node).is_empty());

    // Now 42 is C's, claimed: D's lower-epoch claim is refused again (C's epoch 3 > 2).
    ping(&mut node, D, 7003, 2, &[42]);
    assert_eq!(owner(&node, 42), Some(id(C)));
    let sent = updates(&mut node);
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!((sent[0].1, sent[0].2.clone()), (id(C), vec![42]));
}

/// The mark goes when the owner claims the slot again in a ping whose bitmap differs from
/// what we record (only then are claims looked at, as in the server). A ping identical to
/// the record, which still has the slot, leaves the mark: the server behaves so too.
#[test]
fn claiming_a_slot_again_clears_the_mark() {
    let all: Vec<u16> = (0..100).collect();
    let without_42: Vec<u16> = (0..100).filter(|&s| s != 42).collect();

    let mut node = fixture();
    ping(&mut node, B, 7001, 5, &without_42);
    ping(&mut node, B, 7001, 5, &all);
    ping(&mut node, C, 7002, 3, &[42]);
    assert_eq!(
        owner(&node, 42),
        Some(id(C)),
        "an identical bitmap keeps the mark"
    );

    let mut node = fixture();
    ping(&mut node, B, 7001, 5, &without_42);
    ping(&mut node, B, 7001, 5, &(0..=100).collect::<Vec<_>>());
    assert_eq!(owner(&node, 100), Some(id(B)));
    ping(&mut node, C, 7002, 3, &[42]);
    assert_eq!(owner(&node, 42), Some(id(B)));
    let sent = updates(&mut node);
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0].2, (0..=100).collect::<Vec<_>>());
}
