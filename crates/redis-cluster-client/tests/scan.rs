//! SCAN over a scripted cluster, no sockets: every key once while slots migrate between and
//! inside the engine's reads, MATCH, TYPE, COUNT, and the bounds.

mod harness;

use std::collections::BTreeMap;

use harness::{Harness, UNSERVED, argv, err};
use proptest::prelude::*;
use redis_cluster_client::ClientId;
use redis_hash_slot::key_slot;
use redis_resp::Frame;

fn slot(key: &[u8]) -> u16 {
    u16::from(key_slot(key))
}

/// A started engine over `nodes` masters holding `keys`, with one client.
fn cluster(
    nodes: usize,
    keys: &[String],
    tune: impl FnOnce(&mut redis_cluster_client::Config),
) -> (Harness, ClientId) {
    let mut h = Harness::new(nodes, tune);
    h.start();
    for k in keys {
        h.cluster
            .store
            .insert(k.clone().into_bytes(), b"v".to_vec());
    }
    let client = h.engine.open_client();
    (h, client)
}

/// One SCAN call's reply as (next cursor, keys), or the error text.
fn page(reply: Frame) -> Result<(String, Vec<String>), String> {
    let Frame::Array(parts) = reply else {
        return Err(String::from_utf8_lossy(reply.as_bytes().unwrap_or_default()).into_owned());
    };
    let [Frame::BulkString(next), Frame::Array(keys)] = &parts[..] else {
        return Err(format!("not [cursor, keys]: {parts:?}"));
    };
    let keys = keys
        .iter()
        .map(|k| String::from_utf8_lossy(k.as_bytes().unwrap_or_default()).into_owned())
        .collect();
    Ok((String::from_utf8_lossy(next).into_owned(), keys))
}

/// A whole scan with `options`, settled between calls: the keys of each call.
fn scan_all(h: &mut Harness, client: ClientId, options: &str) -> Vec<Vec<String>> {
    let mut cursor = "0".to_string();
    let mut calls = Vec::new();
    for _ in 0..20_000 {
        h.engine
            .handle_request(h.now, client, argv(&format!("SCAN {cursor}{options}")));
        h.settle(50);
        let (_, _, reply) = h.replies.pop().expect("a reply");
        let (next, keys) = page(reply).expect("a page");
        calls.push(keys);
        cursor = next;
        if cursor == "0" {
            return calls;
        }
    }
    panic!("the scan did not end");
}

fn sorted(calls: &[Vec<String>]) -> Vec<String> {
    let mut all: Vec<String> = calls.iter().flatten().cloned().collect();
    all.sort();
    all
}

#[test]
fn a_slot_being_migrated_is_read_on_both_nodes_and_each_key_given_once() {
    let keys: Vec<String> = (0..200).map(|i| format!("{{tag}}:{i}")).collect();
    let (mut h, client) = cluster(3, &keys, |_| {});
    let s = slot(b"tag");
    let from = h.cluster.owner[usize::from(s)];
    let to = (from + 1) % 3;
    // Half the slot's keys are on the target already.
    h.cluster.migrating.insert(s, to);
    for k in keys.iter().step_by(2) {
        h.cluster.moved.insert(k.clone().into_bytes());
    }
    let calls = scan_all(&mut h, client, " COUNT 1000");
    let mut expected = keys.clone();
    expected.sort();
    assert_eq!(sorted(&calls), expected);
    // The target was read after ASKING.
    let seen: Vec<String> = h
        .cluster
        .links
        .values()
        .filter(|l| l.node == to)
        .flat_map(|l| &l.seen)
        .map(|a| String::from_utf8_lossy(&a.join(&b' ')).into_owned())
        .collect();
    let read = format!("CLUSTER GETKEYSINSLOT {s} 100000");
    let at = seen
        .iter()
        .position(|c| *c == read)
        .expect("the target was read");
    assert_eq!(seen.get(at + 1).map(String::as_str), Some("ASKING"));
    assert!(seen[at + 2].starts_with("EXISTS "), "{:?}", &seen[at..]);
}

#[test]
fn a_slot_that_moved_away_is_read_where_it_went_and_the_map_follows() {
    let keys: Vec<String> = (0..100).map(|i| format!("key:{i}")).collect();
    let (mut h, client) = cluster(3, &keys, |_| {});
    // Every slot of node 0 goes to node 2 before the engine hears of it.
    for owner in h.cluster.owner.iter_mut().filter(|o| **o == 0) {
        *owner = 2;
    }
    let calls = scan_all(&mut h, client, " COUNT 100");
    let mut expected = keys.clone();
    expected.sort();
    assert_eq!(sorted(&calls), expected);
    let map = h.engine.slot_map().expect("a map");
    assert_eq!(map.master(key_slot(b"key:0")).map(|m| m.port), Some(7002));
}

#[test]
fn match_type_and_count_are_applied_and_bad_arguments_refused() {
    let mut keys: Vec<String> = (0..50).map(|i| format!("user:{i}")).collect();
    keys.extend((0..50).map(|i| format!("item:{i}")));
    let (mut h, client) = cluster(3, &keys, |_| {});
    let users = sorted(&scan_all(&mut h, client, " MATCH user:*"));
    let mut expected: Vec<String> = keys[..50].to_vec();
    expected.sort();
    assert_eq!(users, expected);
    // TYPE asks each key found where it lives: the scripted nodes hold strings only.
    assert_eq!(sorted(&scan_all(&mut h, client, " TYPE string")).len(), 100);
    assert!(sorted(&scan_all(&mut h, client, " MATCH item:1* TYPE hash")).is_empty());
    // COUNT: a call walks at least that many slots and stops once it has that many keys;
    // a scan of an almost empty cluster takes 16384 / 256 calls, not 16384 / COUNT.
    let big = scan_all(&mut h, client, " COUNT 5000");
    assert!(big.len() <= 4, "{} calls", big.len());
    let small = scan_all(&mut h, client, "");
    assert!(small.iter().all(|c| c.len() < 10 + 10), "{small:?}");
    h.cluster.store.clear();
    assert_eq!(scan_all(&mut h, client, "").len(), 64);
    for (line, error) in [
        ("SCAN 16384", "ERR invalid cursor"),
        ("SCAN nope", "ERR invalid cursor"),
        ("SCAN 0 COUNT 0", "ERR syntax error"),
        ("SCAN 0 MATCH", "ERR syntax error"),
    ] {
        h.engine.handle_request(h.now, client, argv(line));
        h.settle(5);
        assert_eq!(h.replies.pop().map(|r| r.2), Some(err(error)), "{line}");
    }
}

#[test]
fn a_slot_with_more_keys_than_a_step_reads_is_an_error_not_a_part() {
    let keys: Vec<String> = (0..10).map(|i| format!("{{one}}:{i}")).collect();
    let (mut h, client) = cluster(2, &keys, |c| c.scan_slot_keys = 10);
    let s = slot(b"one");
    h.engine
        .handle_request(h.now, client, argv(&format!("SCAN {s}")));
    h.settle(5);
    let reply = h.replies.pop().map(|r| r.2).expect("a reply");
    let text = page(reply).expect_err("an error");
    assert!(
        text.starts_with(&format!("ERR slot {s} holds 10 keys or more")),
        "{text}"
    );
    // The cursor is a slot: the same call again, with room, goes on from there.
    let (mut h, client) = cluster(2, &keys, |c| c.scan_slot_keys = 11);
    h.engine
        .handle_request(h.now, client, argv(&format!("SCAN {s}")));
    h.settle(5);
    let (next, got) = page(h.replies.pop().expect("a reply").2).expect("a page");
    assert_eq!(got.len(), 10);
    // The first batch is COUNT (10) slots: it found 10 keys, so the call ends there.
    assert_eq!(next, (u32::from(s) + 10).to_string());
}

#[test]
fn a_read_on_a_node_that_took_the_slot_during_the_read_is_made_again() {
    // The engine believes node `to` serves the slot; in truth `from` does and is migrating
    // it to `to`, half of its keys there already.
    let keys: Vec<String> = (0..40).map(|i| format!("{{late}}:{i}")).collect();
    let (mut h, client) = cluster(3, &keys, |_| {});
    let s = slot(b"late");
    let to = h.cluster.owner[usize::from(s)];
    let from = (to + 1) % 3;
    h.cluster.owner[usize::from(s)] = from;
    h.cluster.migrating.insert(s, to);
    for k in keys.iter().step_by(2) {
        h.cluster.moved.insert(k.clone().into_bytes());
    }
    h.engine
        .handle_request(h.now, client, argv(&format!("SCAN {s} COUNT 1")));
    h.take_writes();
    let (conn, _) = h.wire.front().expect("a write");
    let link = *conn;
    assert_eq!(h.cluster.links[&link].node, to);
    let before = h.cluster.links[&link].seen.len();
    // `to` runs the probe (MOVED: it does not own the slot yet) and the read (half the
    // keys); then the migration ends, and `to` answers the second probe as the owner.
    while h.cluster.links[&link].seen.len() < before + 2 {
        assert!(h.deliver_some(1), "the read was not written");
    }
    let read = h.cluster.links[&link].seen[before + 1].concat();
    let read = String::from_utf8_lossy(&read);
    assert!(read.starts_with("CLUSTERGETKEYSINSLOT"), "{read}");
    h.cluster.finish(s);
    h.settle(20);
    let (next, mut got) = page(h.replies.pop().expect("a reply").2).expect("a page");
    assert_eq!(next, (u32::from(s) + 1).to_string());
    got.sort();
    let mut expected = keys.clone();
    expected.sort();
    assert_eq!(
        got, expected,
        "a read made while the node was importing was taken as whole"
    );
}

#[test]
fn slots_nobody_serves_are_passed_over() {
    // `cluster-require-full-coverage no`: slots 0-999 have no master; the others are served.
    let keys: Vec<String> = (0..300)
        .map(|i| format!("key:{i}"))
        .filter(|k| slot(k.as_bytes()) >= 1000)
        .collect();
    let mut h = Harness::new(3, |_| {});
    for owner in &mut h.cluster.owner[..1000] {
        *owner = UNSERVED;
    }
    h.start();
    for k in &keys {
        h.cluster
            .store
            .insert(k.clone().into_bytes(), b"v".to_vec());
    }
    let client = h.engine.open_client();
    let mut expected = keys.clone();
    expected.sort();
    assert_eq!(sorted(&scan_all(&mut h, client, " COUNT 100")), expected);
}

/// A step of a reshard, done between two deliveries of the engine's bytes.
#[derive(Clone, Debug)]
enum Step {
    /// The slot of key `n` (of the scanned keys) starts migrating to node `to`.
    Start(usize, usize),
    /// One more key of the `n`-th migrating slot reaches its target.
    Move(usize),
    /// The `n`-th migrating slot ends: the rest of its keys move, the target owns it.
    Finish(usize),
    Nothing,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0usize..1000, 0usize..3).prop_map(|(n, to)| Step::Start(n, to)),
        (0usize..8).prop_map(Step::Move),
        (0usize..8).prop_map(Step::Finish),
        Just(Step::Nothing),
    ]
}

fn apply(h: &mut Harness, keys: &[String], step: &Step) {
    let migrating: Vec<u16> = {
        let mut slots: Vec<u16> = h.cluster.migrating.keys().copied().collect();
        slots.sort_unstable();
        slots
    };
    match *step {
        Step::Start(n, to) => {
            let s = slot(keys[n % keys.len()].as_bytes());
            if h.cluster.owner[usize::from(s)] != to && !h.cluster.migrating.contains_key(&s) {
                h.cluster.migrating.insert(s, to);
            }
        }
        Step::Move(n) if !migrating.is_empty() => {
            let s = migrating[n % migrating.len()];
            let next = keys
                .iter()
                .map(|k| k.as_bytes().to_vec())
                .find(|k| slot(k) == s && !h.cluster.moved.contains(k));
            if let Some(k) = next {
                h.cluster.moved.insert(k);
            }
        }
        Step::Finish(n) if !migrating.is_empty() => {
            h.cluster.finish(migrating[n % migrating.len()]);
        }
        _ => {}
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// Slots migrate, and migrations end, between any two pieces of the engine's writes
    /// (inside one slot read too): a whole scan still gives each key exactly once.
    #[test]
    fn a_scan_during_a_reshard_gives_every_key_exactly_once(
        count in 1u32..64,
        steps in prop::collection::vec((step(), 1usize..400), 1..400),
    ) {
        // Keys gathered in few slots, so that the reshard meets them.
        let keys: Vec<String> = (0..240).map(|i| format!("{{t{}}}:{i}", i % 12)).collect();
        let (mut h, client) = cluster(3, &keys, |_| {});
        let mut steps = steps.into_iter();
        let mut cursor = "0".to_string();
        let mut seen: BTreeMap<String, usize> = BTreeMap::new();
        let mut calls = 0;
        while calls < 5000 {
            calls += 1;
            h.engine.handle_request(
                h.now,
                client,
                argv(&format!("SCAN {cursor} COUNT {count}")),
            );
            let reply = loop {
                h.take_writes();
                if let Some((step, bytes)) = steps.next() {
                    if h.deliver_some(bytes) {
                        apply(&mut h, &keys, &step);
                        h.answer_all();
                        continue;
                    }
                }
                while h.deliver_one() {}
                let pending = h.cluster.links.values().any(|l| !l.outbox.is_empty());
                h.answer_all();
                if let Some((_, _, reply)) = h.replies.pop() {
                    break reply;
                }
                if !pending && h.wire.is_empty() {
                    let at = h.engine.poll_timeout().expect("a deadline while waiting");
                    h.now = h.now.max(at);
                    h.engine.handle_timeout(h.now);
                }
            };
            let (next, got) = page(reply).map_err(TestCaseError::fail)?;
            for k in got {
                *seen.entry(k).or_default() += 1;
            }
            cursor = next;
            if cursor == "0" {
                break;
            }
        }
        prop_assert_eq!(cursor, "0");
        let twice: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).collect();
        prop_assert!(twice.is_empty(), "given more than once: {:?}", twice);
        let missing: Vec<_> = keys.iter().filter(|k| !seen.contains_key(*k)).collect();
        prop_assert!(missing.is_empty(), "never given: {:?}", missing);
    }
}
