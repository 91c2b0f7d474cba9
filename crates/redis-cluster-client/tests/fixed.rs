//! The engine over masters the caller names (fixed servers, Sentinel groups): a given slot
//! map, a switch of master, holds during a failover, a demoted master's READONLY.

mod harness;

use std::time::Duration;

use bytes::Bytes;
use harness::{BASE_PORT, Harness, argv, bulk};
use redis_cluster_route::{Endpoint, SlotMap};
use redis_hash_slot::SlotRange;
use redis_resp::Frame;

fn ok() -> Frame {
    Frame::SimpleString(Bytes::from_static(b"OK"))
}

fn node(n: usize) -> Endpoint {
    Endpoint {
        host: "127.0.0.1".into(),
        port: BASE_PORT + n as u16,
        ..Endpoint::default()
    }
}

/// Every slot to node `n`.
fn all_to(n: usize) -> SlotMap {
    let mut map = SlotMap::default();
    map.assign_range(SlotRange::ALL, node(n));
    map
}

/// An engine whose map is given: every slot on node 0, node 1 a spare the scripted cluster
/// also runs.
fn given() -> (Harness, redis_cluster_client::ClientId) {
    let mut h = Harness::new(2, |c| {
        c.seeds.clear();
        c.fixed_map = Some(all_to(0));
    });
    h.cluster.owner.fill(0);
    h.start();
    let client = h.engine.open_client();
    (h, client)
}

/// What the node behind `n`'s links ran, by command name.
fn ran(h: &Harness, n: usize) -> Vec<String> {
    h.cluster
        .links
        .values()
        .filter(|l| l.node == n)
        .flat_map(|l| &l.seen)
        .map(|a| String::from_utf8_lossy(&a.join(&b' ')).into_owned())
        .collect()
}

/// What node `n` ran of the commands whose text starts with `prefix`, in order.
fn ran_of(h: &Harness, n: usize, prefix: &str) -> Vec<String> {
    ran(h, n)
        .into_iter()
        .filter(|c| c.starts_with(prefix))
        .collect()
}

/// Lets `ms` pass in steps of 10 ms, every write delivered and answered, without jumping to
/// the next deadline as `Harness::settle` does.
fn wait(h: &mut Harness, ms: u64) {
    for _ in 0..ms / 10 {
        h.now += Duration::from_millis(10);
        h.engine.handle_timeout(h.now);
        h.take_writes();
        while h.deliver_one() {}
        h.answer_all();
    }
}

/// The node becomes its group's master: the scripted cluster serves every slot there.
fn promote(h: &mut Harness, n: usize) {
    h.cluster.owner.fill(n);
}

#[test]
fn a_given_map_is_used_as_is_and_nothing_asks_the_nodes_for_one() {
    let (mut h, client) = given();
    // The MGET below goes to node 0 whole: as a standalone server, it checks no slot.
    h.cluster.standalone = true;
    for k in ["a", "b", "c"] {
        h.engine
            .handle_request(h.now, client, argv(&format!("SET {k} 1")));
    }
    h.engine.handle_request(h.now, client, argv("MGET a b c"));
    h.settle(10);
    let one = Frame::BulkString(Bytes::from_static(b"1"));
    assert_eq!(
        h.replies_of(client),
        [
            ok(),
            ok(),
            ok(),
            Frame::Array(vec![one.clone(), one.clone(), one])
        ]
    );
    let asked = ran(&h, 0);
    assert!(asked.iter().all(|c| !c.starts_with("CLUSTER")), "{asked:?}");
    assert_eq!(asked.first().map(String::as_str), Some("INFO server"));
    assert!(ran(&h, 1).is_empty());
    assert_eq!(h.engine.poll_timeout(), None, "no reload is ever due");
}

#[test]
fn msetnx_goes_whole_to_the_one_server_of_its_keys_and_is_refused_over_two() {
    // One server for every slot: whole, all or nothing there, as a standalone server runs it
    // (a and b are in slots 15495 and 3300).
    let (mut h, client) = given();
    h.cluster.standalone = true;
    for line in ["MSETNX a 1 b 2", "MSETNX b 3 c 4", "MGET a b c"] {
        h.engine.handle_request(h.now, client, argv(line));
    }
    h.settle(10);
    let values = vec![bulk("1"), bulk("2"), Frame::NullBulkString];
    assert_eq!(
        h.replies_of(client),
        [Frame::Integer(1), Frame::Integer(0), Frame::Array(values)]
    );
    assert_eq!(
        ran_of(&h, 0, "MSETNX"),
        ["MSETNX a 1 b 2", "MSETNX b 3 c 4"]
    );

    // Two servers: whole on the one that holds every key (b, c and f are node 0's); over
    // both, only a split could run it, and a split is not all or nothing: refused.
    let (mut h, client) = two_halves(false);
    for line in ["MSETNX b 1 c 2 f 3", "MSETNX a 1 b 2"] {
        h.engine.handle_request(h.now, client, argv(line));
    }
    h.settle(10);
    let crossslot = Frame::SimpleError(Bytes::from_static(
        b"CROSSSLOT Keys in request don't hash to the same slot",
    ));
    assert_eq!(h.replies_of(client), [Frame::Integer(1), crossslot]);
    assert_eq!(ran_of(&h, 0, "MSETNX"), ["MSETNX b 1 c 2 f 3"]);
    assert!(ran_of(&h, 1, "MSETNX").is_empty());
}

#[test]
fn a_command_a_cluster_refuses_over_two_slots_runs_on_the_server_of_all_its_keys() {
    // RENAME has no `multi_shard` tip: over two slots a cluster answers CROSSSLOT. One server
    // for every slot runs it as a standalone server does (a 15495, b 3300).
    let (mut h, client) = given();
    h.cluster.standalone = true;
    for line in ["SET a 1", "RENAME a b", "GET b", "MSET a 1 b"] {
        h.engine.handle_request(h.now, client, argv(line));
    }
    h.settle(10);
    // Not whole key groups: the server's own answer.
    let arity = Frame::SimpleError(Bytes::from_static(
        b"ERR wrong number of arguments for 'mset' command",
    ));
    assert_eq!(h.replies_of(client), [ok(), ok(), bulk("1"), arity]);
    assert_eq!(ran_of(&h, 0, "RENAME"), ["RENAME a b"]);

    // Two servers: on node 0 when it holds both keys (b, c and f are node 0's, a node 1's);
    // refused when they are on both.
    let (mut h, client) = two_halves(false);
    for line in ["SET b 1", "RENAME b c", "RENAME c f", "RENAME f a", "GET f"] {
        h.engine.handle_request(h.now, client, argv(line));
    }
    h.settle(10);
    let crossslot = Frame::SimpleError(Bytes::from_static(
        b"CROSSSLOT Keys in request don't hash to the same slot",
    ));
    assert_eq!(
        h.replies_of(client),
        [ok(), ok(), ok(), crossslot, bulk("1")]
    );
    assert_eq!(ran_of(&h, 0, "RENAME"), ["RENAME b c", "RENAME c f"]);
    assert!(ran_of(&h, 1, "RENAME").is_empty());
}

#[test]
fn a_transaction_or_watch_over_several_slots_runs_on_the_server_of_all_its_keys() {
    // b, c and f are node 0's (slots 3300, 7365, 3168), a node 1's (15495).
    let (mut h, client) = two_halves(false);
    let lines = [
        "MULTI",
        "SET b 1",
        "SET c 2",
        "MGET b f",
        "EXEC", // one server: runs
        "MULTI",
        "SET a 1",
        "SET b 2",
        "EXEC", // two servers: refused
        "WATCH b c",
        "MULTI",
        "SET f 3",
        "EXEC", // WATCH and EXEC on node 0
        "WATCH b",
        "WATCH a", // a WATCH on node 0 cannot take node 1's key
    ];
    for line in lines {
        h.engine.handle_request(h.now, client, argv(line));
    }
    h.settle(20);
    let queued = || Frame::SimpleString(Bytes::from_static(b"QUEUED"));
    let crossslot = Frame::SimpleError(Bytes::from_static(
        b"CROSSSLOT Keys in request don't hash to the same slot",
    ));
    let mget = Frame::Array(vec![bulk("1"), Frame::NullBulkString]);
    assert_eq!(
        h.replies_of(client),
        [
            ok(),
            queued(),
            queued(),
            queued(),
            Frame::Array(vec![ok(), ok(), mget]),
            ok(),
            queued(),
            queued(),
            crossslot.clone(),
            ok(),
            ok(),
            queued(),
            Frame::Array(vec![ok()]),
            ok(),
            crossslot,
        ]
    );
    // The WATCH's connection closed after its EXEC, and its link with it: the store tells.
    assert_eq!(ran_of(&h, 0, "SET"), ["SET b 1", "SET c 2"]);
    assert_eq!(h.cluster.store.get(&b"f"[..]), Some(&b"3".to_vec()));
    assert!(ran_of(&h, 1, "SET").is_empty());
}

#[test]
fn shard_channels_of_several_slots_are_subscribed_on_the_server_of_them_all() {
    // b and c are node 0's (slots 3300, 7365), a node 1's (15495).
    let (mut h, sub) = two_halves(false);
    let publisher = h.engine.open_client();
    h.engine.handle_request(h.now, sub, argv("SSUBSCRIBE b c"));
    h.engine
        .handle_request(h.now, publisher, argv("SSUBSCRIBE b a"));
    h.settle(10);
    h.engine
        .handle_request(h.now, publisher, argv("SPUBLISH c news"));
    h.settle(10);
    let crossslot = Frame::SimpleError(Bytes::from_static(
        b"CROSSSLOT Keys in request don't hash to the same slot",
    ));
    assert_eq!(h.replies_of(publisher), [crossslot, Frame::Integer(1)]);
    let pushes: Vec<Frame> = h
        .pushes
        .iter()
        .filter(|p| p.0 == sub)
        .map(|p| p.1.clone())
        .collect();
    let frame = |parts: &[&str], n: Option<i64>| {
        let mut items: Vec<Frame> = parts.iter().map(|p| bulk(p)).collect();
        items.extend(n.map(Frame::Integer));
        Frame::Array(items)
    };
    assert_eq!(
        pushes,
        [
            frame(&["ssubscribe", "b"], Some(1)),
            frame(&["ssubscribe", "c"], Some(2)),
            frame(&["smessage", "c", "news"], None),
        ]
    );
}

/// Two standalone servers, half the slots each (nodes that check no slot), replies handed
/// on as bytes with `raw`; a started engine and its client.
fn two_halves(raw: bool) -> (Harness, redis_cluster_client::ClientId) {
    let mut map = SlotMap::default();
    map.assign_range("0-8191".parse().expect("range"), node(0));
    map.assign_range("8192-16383".parse().expect("range"), node(1));
    let mut h = Harness::new(2, |c| {
        c.seeds.clear();
        c.fixed_map = Some(map);
        c.raw_replies = raw;
    });
    h.cluster.standalone = true;
    h.start();
    let client = h.engine.open_client();
    (h, client)
}

#[test]
fn keys_one_master_serves_go_to_it_as_one_command() {
    let (mut h, client) = two_halves(false);
    // Slots: a 15495, b 3300, c 7365, d 11298, e 15363, f 3168: three keys on each server,
    // each in a slot of its own.
    let keys = ["a", "b", "c", "d", "e", "f"];
    let slots: Vec<u16> = keys
        .iter()
        .map(|k| u16::from(redis_hash_slot::key_slot(k.as_bytes())))
        .collect();
    assert_eq!(slots, [15495, 3300, 7365, 11298, 15363, 3168]);
    h.engine
        .handle_request(h.now, client, argv("MSET a 1 b 2 c 3 d 4 e 5 f 6"));
    h.engine
        .handle_request(h.now, client, argv("MGET a b c d e f"));
    h.settle(10);
    let values: Vec<Frame> = (1..=6).map(|n| bulk(&n.to_string())).collect();
    assert_eq!(h.replies_of(client), [ok(), Frame::Array(values)]);
    assert_eq!(ran_of(&h, 0, "M"), ["MSET b 2 c 3 f 6", "MGET b c f"]);
    assert_eq!(ran_of(&h, 1, "M"), ["MSET a 1 d 4 e 5", "MGET a d e"]);
}

#[test]
fn a_switch_sends_later_commands_to_the_new_master_and_lets_earlier_ones_finish() {
    let (mut h, client) = given();
    h.engine.handle_request(h.now, client, argv("SET k1 1"));
    h.take_writes();
    // The old master has the write; its reply is still on the way when the switch comes.
    while h.deliver_one() {}
    promote(&mut h, 1);
    h.engine.set_slot_map(h.now, all_to(1));
    h.engine.handle_request(h.now, client, argv("SET k2 2"));
    h.settle(10);
    assert_eq!(h.replies_of(client), [ok(), ok()]);
    assert!(ran(&h, 0).contains(&"SET k1 1".to_string()));
    assert!(ran(&h, 1).contains(&"SET k2 2".to_string()));
    assert!(!ran(&h, 1).contains(&"SET k1 1".to_string()));
    assert_eq!(
        h.engine
            .slot_map()
            .and_then(|m| m.master(redis_hash_slot::key_slot(b"k1"))),
        Some(&node(1))
    );
}

#[test]
fn a_held_range_sends_nothing_until_released_and_then_in_order_to_the_new_master() {
    let (mut h, client) = given();
    h.engine.handle_request(h.now, client, argv("SET warm 0"));
    h.settle(5);
    let until = h.now + Duration::from_secs(5);
    h.engine.hold(h.now, SlotRange::ALL, until);
    h.engine.handle_request(h.now, client, argv("SET a 1"));
    h.engine.handle_request(h.now, client, argv("INCR a"));
    h.engine.handle_request(h.now, client, argv("GET a"));
    h.engine.handle_request(h.now, client, argv("DBSIZE"));
    wait(&mut h, 1000);
    assert_eq!(h.replies_of(client), [ok()], "nothing answered while held");
    assert_eq!(
        ran(&h, 0).len(),
        2,
        "INFO and the first SET only: {:?}",
        ran(&h, 0)
    );
    promote(&mut h, 1);
    h.engine.set_slot_map(h.now, all_to(1));
    h.engine.release(h.now, SlotRange::ALL);
    h.settle(10);
    assert_eq!(
        h.replies_of(client),
        [ok(), ok(), Frame::Integer(2), bulk("2"), Frame::Integer(2)]
    );
    let on_new: Vec<String> = ran(&h, 1)
        .into_iter()
        .filter(|c| !c.starts_with("INFO"))
        .collect();
    assert_eq!(on_new, ["SET a 1", "INCR a", "GET a", "DBSIZE"]);
    // The idle connection to the old master closed at the switch, and none was opened
    // again: nothing more reached it.
    assert_eq!(h.link_of(0), None);
    assert!(ran(&h, 0).is_empty());
}

#[test]
fn a_command_over_two_slots_of_one_server_waits_out_a_hold_and_runs_on_the_new_master() {
    // While held, commands route slot by slot; a RENAME over two slots (a 15495, b 3300)
    // still runs whole, on the server the map names once released.
    let (mut h, client) = given();
    h.cluster.standalone = true;
    h.engine.handle_request(h.now, client, argv("SET a 1"));
    h.settle(5);
    h.engine
        .hold(h.now, SlotRange::ALL, h.now + Duration::from_secs(5));
    h.engine.handle_request(h.now, client, argv("RENAME a b"));
    h.engine.handle_request(h.now, client, argv("GET b"));
    wait(&mut h, 1000);
    assert_eq!(h.replies_of(client), [ok()], "nothing answered while held");
    promote(&mut h, 1);
    h.engine.set_slot_map(h.now, all_to(1));
    h.engine.release(h.now, SlotRange::ALL);
    h.settle(10);
    assert_eq!(h.replies_of(client), [ok(), ok(), bulk("1")]);
    let on_new: Vec<String> = ran(&h, 1)
        .into_iter()
        .filter(|c| !c.starts_with("INFO"))
        .collect();
    assert_eq!(on_new, ["RENAME a b", "GET b"]);
}

#[test]
fn a_hold_that_ends_before_the_switch_answers_masterdown_and_later_commands_flow() {
    let (mut h, client) = given();
    h.engine
        .hold(h.now, SlotRange::ALL, h.now + Duration::from_millis(200));
    h.engine.handle_request(h.now, client, argv("GET a"));
    wait(&mut h, 100);
    assert!(h.replies_of(client).is_empty());
    wait(&mut h, 200);
    let replies = h.replies_of(client);
    assert_eq!(replies.len(), 1);
    let Frame::SimpleError(text) = &replies[0] else {
        panic!("an error: {replies:?}");
    };
    assert!(text.starts_with(b"MASTERDOWN "), "{text:?}");
    // The hold is over: the next command goes to the master the map names.
    h.engine.handle_request(h.now, client, argv("SET a 1"));
    h.settle(5);
    assert_eq!(h.replies_of(client)[1], ok());
}

#[test]
fn a_demoted_master_is_retried_until_the_driver_names_the_new_one() {
    let (mut h, client) = given();
    h.cluster.demoted.insert(0);
    h.engine.handle_request(h.now, client, argv("SET a 1"));
    h.settle(3);
    assert!(
        h.replies_of(client).is_empty(),
        "READONLY is retried, not answered"
    );
    promote(&mut h, 1);
    h.engine.set_slot_map(h.now, all_to(1));
    h.settle(20);
    assert_eq!(h.replies_of(client), [ok()]);
    assert_eq!(h.cluster.store.get(&b"a"[..]), Some(&b"1".to_vec()));
}

#[test]
fn slots_a_given_map_leaves_out_answer_clusterdown_after_the_retries() {
    let mut h = Harness::new(1, |c| {
        c.seeds.clear();
        c.max_attempts = 3;
        c.fixed_map = Some(SlotMap::default());
    });
    h.start();
    let client = h.engine.open_client();
    h.engine.handle_request(h.now, client, argv("GET a"));
    h.settle(20);
    let replies = h.replies_of(client);
    assert!(
        matches!(&replies[..], [Frame::SimpleError(t)] if t.starts_with(b"CLUSTERDOWN")),
        "{replies:?}"
    );
}

#[test]
fn scan_walks_the_given_masters_one_after_the_other_with_their_own_cursors() {
    // Two standalone masters, half the slots each: they have no slots to read, so SCAN
    // uses each one's own SCAN (the scripted node's pages are of ten keys).
    let mut map = all_to(0);
    let slot = |n: u16| redis_hash_slot::Slot::new(n).expect("a slot");
    let high = SlotRange::new(slot(8192), slot(16383)).expect("a range");
    map.assign_range(high, node(1));
    let mut h = Harness::new(2, |c| {
        c.seeds.clear();
        c.fixed_map = Some(map);
    });
    h.start();
    let client = h.engine.open_client();
    let keys: Vec<String> = (0..45).map(|i| format!("key:{i}")).collect();
    for k in &keys {
        h.cluster
            .store
            .insert(k.clone().into_bytes(), b"v".to_vec());
    }
    let mut cursor = "0".to_string();
    let mut seen = Vec::new();
    for _ in 0..100 {
        h.engine
            .handle_request(h.now, client, argv(&format!("SCAN {cursor}")));
        h.settle(5);
        let reply = h.replies.pop().expect("a reply").2;
        let Frame::Array(parts) = reply else {
            panic!("{reply:?}")
        };
        let [Frame::BulkString(next), Frame::Array(page)] = &parts[..] else {
            panic!("{parts:?}")
        };
        seen.extend(
            page.iter()
                .filter_map(|k| k.as_bytes())
                .map(|k| String::from_utf8_lossy(k).into_owned()),
        );
        cursor = String::from_utf8_lossy(next).into_owned();
        if cursor == "0" {
            break;
        }
    }
    assert_eq!(cursor, "0");
    seen.sort();
    let mut expected = keys;
    expected.sort();
    assert_eq!(seen, expected);
    assert!(
        ran(&h, 0)
            .iter()
            .chain(&ran(&h, 1))
            .all(|c| !c.contains("GETKEYSINSLOT"))
    );
    assert!(
        ran(&h, 1).iter().any(|c| c.starts_with("SCAN ")),
        "node 1 was walked"
    );
}

/// With `raw_replies`, a multi-key command whose keys one server holds comes back as that
/// server's bytes (a split of one part: its merge is that reply as it is); an MGET over both
/// servers is merged from their bytes, the others as frames.
#[test]
fn raw_replies_pass_a_one_server_split_on_and_merge_the_others() {
    let (mut h, client) = two_halves(true);
    // b, c and f on node 0; a, d and e on node 1 (see the test above).
    for line in [
        "MSET a 1 b 2 c 3 d 4 e 5 f 6",
        "MGET b c f",
        "DEL b c",
        "MGET a b f",
        "EXISTS a d e",
    ] {
        h.engine.handle_request(h.now, client, argv(line));
    }
    h.settle(10);
    assert_eq!(
        h.replies_of(client),
        [
            ok(),
            Frame::Array(vec![bulk("2"), bulk("3"), bulk("6")]),
            Frame::Integer(2),
            Frame::Array(vec![bulk("1"), Frame::NullBulkString, bulk("6")]),
            Frame::Integer(3),
        ]
    );
    // MGET b c f, DEL b c, EXISTS a d e, and the second MGET from both servers' bytes;
    // the MSET went to both and is merged as frames.
    assert_eq!(h.raw, 4);
}
