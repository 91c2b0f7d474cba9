//! The engine against a scripted cluster, no sockets: redirects, retries, lost nodes, splits,
//! HELLO (SCAN is `scan.rs`), and a proptest that any mix of commands through any
//! interleaving of reshards, refreshes and faults gives each request the reply one
//! standalone server gives.

mod harness;

use std::collections::HashMap;
use std::time::Duration;

use bytes::Bytes;
use harness::{Harness, argv, bulk, err, exec};
use proptest::prelude::*;
use redis_cluster_client::{ConnId, Event};
use redis_hash_slot::key_slot;
use redis_resp::{Frame, encoded_len, errors};

fn ok() -> Frame {
    Frame::SimpleString(Bytes::from_static(b"OK"))
}

fn slot(key: &str) -> u16 {
    u16::from(key_slot(key.as_bytes()))
}

/// A started engine over `nodes` masters, with one client.
fn started(nodes: usize) -> (Harness, redis_cluster_client::ClientId) {
    let mut h = Harness::new(nodes, |_| {});
    h.start();
    let client = h.engine.open_client();
    (h, client)
}

#[test]
fn the_map_is_loaded_with_cluster_slots_when_shards_is_refused_and_the_table_follows_info() {
    let (h, _) = started(3);
    let map = h.engine.slot_map().expect("a map");
    assert_eq!(map.assigned(), 16384);
    assert_eq!(map.master(key_slot(b"foo")).map(|m| m.port), Some(7002));
    assert!(
        h.events
            .iter()
            .any(|e| matches!(e, Event::ServerIdentified { name, .. } if name == "redis"))
    );
    // SHARDS first, then SLOTS on the same link.
    let link = h
        .cluster
        .links
        .values()
        .find(|l| l.node == 0)
        .expect("a link to the seed");
    let asked: Vec<String> = link
        .seen
        .iter()
        .map(|a| String::from_utf8_lossy(&a.concat()).into_owned())
        .collect();
    assert_eq!(
        asked,
        ["INFOserver", "CLUSTERINFO", "CLUSTERSHARDS", "CLUSTERSLOTS"]
    );
}

#[test]
fn a_node_behind_on_epochs_is_not_believed() {
    let (mut h, client) = started(3);
    h.cluster.epochs = vec![7, 7, 7];
    // A failover: node 2's slots go to node 1 at epoch 8. Node 0 missed it: it still
    // believes the old owners and says epoch 7.
    let old = h.cluster.owner.clone();
    h.cluster.views.insert(0, old);
    for owner in h.cluster.owner.iter_mut().filter(|o| **o == 2) {
        *owner = 1;
    }
    h.cluster.epochs = vec![7, 8, 8];
    let moved = (0..100)
        .map(|i| format!("k{i}"))
        .find(|k| h.cluster.node_of(k) == 1 && h.cluster.views[&0][usize::from(slot(k))] == 2)
        .expect("a key of the failed-over slots");
    // MOVED makes the engine reload the map; then it reloads every 2 s, asking the nodes in
    // turn, node 0 among them. Once the new owner is known, no reload takes it back.
    h.engine
        .handle_request(h.now, client, argv(&format!("SET {moved} 1")));
    h.settle(10);
    let master = |h: &Harness| {
        h.engine
            .slot_map()
            .and_then(|m| m.master(key_slot(moved.as_bytes())))
            .map(|m| m.port)
    };
    for round in 0..8 {
        h.advance(2100);
        assert_eq!(
            master(&h),
            Some(7001),
            "round {round}: the lagging node's map was taken"
        );
    }
    let asked_node_0 = h
        .cluster
        .links
        .values()
        .filter(|l| l.node == 0)
        .flat_map(|l| &l.seen)
        .filter(|a| a.len() > 1 && &a[1][..] == b"SLOTS")
        .count();
    assert!(asked_node_0 >= 2, "node 0 was asked again: {asked_node_0}");
    let map = h.engine.slot_map().expect("a map");
    assert_eq!(
        map.master(key_slot(moved.as_bytes())).map(|m| m.port),
        Some(7001),
        "the lagging node's map was not taken"
    );
    assert!(h.replies_of(client).iter().all(|r| *r == ok()));
}

#[test]
fn a_moved_in_the_middle_of_a_pipeline_keeps_the_order_and_updates_the_map() {
    let (mut h, client) = started(3);
    let key = "foo";
    let from = h.cluster.node_of(key);
    // The slot moved before the engine knew: every command of the pipeline meets MOVED.
    let to = (from + 1) % 3;
    h.cluster.owner[usize::from(slot(key))] = to;
    for line in ["SET foo 1", "INCR foo", "GET foo", "INCR foo"] {
        h.engine.handle_request(h.now, client, argv(line));
    }
    h.settle(10);
    assert_eq!(
        h.replies_of(client),
        [ok(), Frame::Integer(2), bulk("2"), Frame::Integer(3)]
    );
    let map = h.engine.slot_map().expect("a map");
    assert_eq!(
        map.master(key_slot(b"foo")).map(|m| m.port),
        Some(7000 + to as u16)
    );
}

#[test]
fn an_ask_sends_asking_once_and_leaves_the_map() {
    let (mut h, client) = started(2);
    let key = "foo";
    let from = h.cluster.node_of(key);
    let to = 1 - from;
    h.cluster.migrating.insert(slot(key), to);
    h.engine.handle_request(h.now, client, argv("SET foo bar"));
    h.settle(5);
    h.engine.handle_request(h.now, client, argv("GET foo"));
    h.settle(5);
    assert_eq!(h.replies_of(client), [ok(), bulk("bar")]);
    let map = h.engine.slot_map().expect("a map");
    assert_eq!(
        map.master(key_slot(b"foo")).map(|m| m.port),
        Some(7000 + from as u16)
    );
    let target = h
        .cluster
        .links
        .values()
        .find(|l| l.node == to)
        .expect("a link to the target");
    let seen: Vec<&[u8]> = target
        .seen
        .iter()
        .map(|a| &a[0][..])
        .filter(|name| !matches!(*name, b"CLUSTER" | b"INFO"))
        .collect();
    assert_eq!(seen, [&b"ASKING"[..], b"SET", b"ASKING", b"GET"]);
}

#[test]
fn tryagain_is_retried_after_the_pause_not_before() {
    let (mut h, client) = started(2);
    // Two keys of one slot; one already moved to the target: TRYAGAIN until the slot is done.
    let (a, b) = ("{t}a", "{t}b");
    let from = h.cluster.node_of(a);
    let to = 1 - from;
    h.cluster.store.insert(a.into(), b"1".to_vec());
    h.cluster.store.insert(b.into(), b"2".to_vec());
    h.cluster.migrating.insert(slot(a), to);
    h.cluster.moved.insert(b.as_bytes().to_vec());
    h.engine
        .handle_request(h.now, client, argv("MGET {t}a {t}b"));
    h.take_writes();
    while h.deliver_one() {}
    h.answer_all();
    let started = h.now;
    let due = h.engine.poll_timeout().expect("a retry deadline");
    assert_eq!(due - started, Duration::from_millis(5));
    // Early timeouts do nothing.
    h.engine.handle_timeout(started + Duration::from_millis(4));
    h.take_writes();
    assert!(h.wire.is_empty(), "nothing is sent before the deadline");
    // The migration ends; the retry meets MOVED and follows it.
    h.cluster.owner[usize::from(slot(a))] = to;
    h.cluster.migrating.clear();
    h.settle(10);
    assert_eq!(
        h.replies_of(client),
        [Frame::Array(vec![bulk("1"), bulk("2")])]
    );
}

#[test]
fn a_node_lost_in_the_middle_of_a_pipeline_is_retried_and_the_order_kept() {
    let (mut h, client) = started(3);
    let keys = ["a", "b", "c", "d", "e", "f"];
    for k in keys {
        h.engine
            .handle_request(h.now, client, argv(&format!("SET {k} {k}")));
    }
    h.take_writes();
    // The connection to the node of "a" dies before the node reads anything.
    let victim = h.cluster.node_of("a");
    let conn = h.link_of(victim).expect("a link");
    h.wire.retain(|(c, _)| *c != conn);
    h.cluster.links.remove(&conn);
    h.engine
        .handle_closed(h.now, conn, "Connection reset by peer");
    h.settle(20);
    assert_eq!(h.replies_of(client), vec![ok(); 6]);
    for k in keys {
        assert_eq!(
            h.cluster.store.get(k.as_bytes()),
            Some(&k.as_bytes().to_vec())
        );
    }
    assert!(
        h.events
            .iter()
            .any(|e| matches!(e, Event::ConnectionLost { reason, .. } if reason.contains("reset")))
    );
}

#[test]
fn clusterdown_during_a_failover_is_retried_until_the_node_serves_again() {
    let (mut h, client) = started(2);
    let node = h.cluster.node_of("foo");
    h.cluster.down[node] = true;
    h.engine.handle_request(h.now, client, argv("SET foo 1"));
    h.settle(3);
    assert!(h.replies.is_empty(), "no reply while the cluster is down");
    h.cluster.down[node] = false;
    h.settle(20);
    assert_eq!(h.replies_of(client), [ok()]);
}

#[test]
fn attempts_are_bounded_and_the_last_error_is_the_clients() {
    let mut h = Harness::new(2, |c| c.max_attempts = 4);
    h.start();
    let client = h.engine.open_client();
    let node = h.cluster.node_of("foo");
    h.cluster.down[node] = true;
    h.engine.handle_request(h.now, client, argv("GET foo"));
    h.settle(50);
    assert_eq!(h.replies_of(client), [err(errors::CLUSTERDOWN)]);
    let link = h.link_of(node).expect("a link");
    let gets = h.cluster.links[&link]
        .seen
        .iter()
        .filter(|a| &a[0][..] == b"GET")
        .count();
    assert_eq!(gets, 4);
}

#[test]
fn a_split_goes_per_slot_one_write_per_node_and_merges_by_key() {
    let (mut h, client) = started(2);
    let keys = ["a", "b", "c", "d", "e", "f", "g", "h"];
    for k in keys {
        h.cluster
            .store
            .insert(k.into(), k.to_uppercase().into_bytes());
    }
    h.take_writes();
    while h.deliver_one() {}
    h.answer_all();
    h.engine
        .handle_request(h.now, client, argv(&format!("MGET {}", keys.join(" "))));
    h.take_writes();
    // One write per node, whatever the number of slots it serves here.
    let mut per_conn: HashMap<_, usize> = HashMap::new();
    for (conn, _) in &h.wire {
        *per_conn.entry(*conn).or_default() += 1;
    }
    assert!(per_conn.values().all(|&n| n == 1), "{per_conn:?}");
    h.settle(5);
    let expected: Vec<Frame> = keys.iter().map(|k| bulk(&k.to_uppercase())).collect();
    assert_eq!(h.replies_of(client), [Frame::Array(expected)]);
    // Each part holds one slot's keys: no node saw CROSSSLOT.
    for link in h.cluster.links.values() {
        for part in link.seen.iter().filter(|a| &a[0][..] == b"MGET") {
            let slots: std::collections::HashSet<_> =
                part[1..].iter().map(|k| key_slot(k)).collect();
            assert_eq!(slots.len(), 1);
        }
    }
}

/// Commands handed as the decoder reads them (`handle_command`: arguments in a vector a
/// finished request left, an array's bytes passed on) get the replies the same commands get
/// as new argument vectors, through enough rounds that most vectors are recycled ones, with
/// argument counts on both sides of what a kept vector may hold.
#[test]
fn decoded_commands_answer_as_argument_vectors_do() {
    let keys = |i: usize, n: usize| -> Vec<String> {
        (0..n).map(|j| format!("{{t{}}}{j}", i % 3)).collect()
    };
    let lines: Vec<String> = (0..300)
        .map(|i| match i % 6 {
            0 => format!("SET k{i} v{i}"),
            1 => format!("GET k{}", i - 1),
            2 => {
                let pairs: Vec<String> = keys(i, i % 13 + 1)
                    .into_iter()
                    .map(|k| format!("{k} {i}"))
                    .collect();
                format!("MSET {}", pairs.join(" "))
            }
            3 => format!("MGET {}", keys(i, i % 23 + 1).join(" ")),
            4 => format!("MGET k{} k{}", i - 4, i - 3),
            _ => "PING".to_string(),
        })
        .collect();
    let run = |decoded: bool| {
        let (mut h, client) = started(2);
        for (n, line) in lines.iter().enumerate() {
            if decoded {
                // Arrays and inline commands, as a client may mix them.
                let wire = if n % 2 == 0 {
                    let mut bytes = Vec::new();
                    redis_resp::encode_command(&argv(line), &mut bytes);
                    bytes
                } else {
                    format!("{line}\r\n").into_bytes()
                };
                let mut input = bytes::BytesMut::from(&wire[..]);
                let command = redis_resp::Decoder::new()
                    .decode_command(&mut input)
                    .expect("a command")
                    .expect("a whole one");
                assert!(input.is_empty());
                h.engine.handle_command(h.now, client, command);
            } else {
                h.engine.handle_request(h.now, client, argv(line));
            }
            // Requests finish now and then: their entries and vectors are taken again.
            if n % 25 == 24 {
                h.settle(10);
            }
        }
        h.settle(10);
        h.replies_of(client)
    };
    let decoded = run(true);
    assert_eq!(decoded.len(), lines.len());
    assert!(
        !decoded.iter().any(|f| matches!(f, Frame::SimpleError(_))),
        "{decoded:?}"
    );
    assert_eq!(decoded, run(false));
}

#[test]
fn a_packed_command_goes_as_the_client_sent_it_where_it_goes_whole() {
    let (mut h, client) = started(2);
    // The client's bytes name the command in lower case, `argv` in upper case: which of the
    // two a node reads tells whether the engine wrote the client's bytes or encoded argv.
    let send = |h: &mut Harness, line: &str| {
        let lower: Vec<Bytes> = argv(&line.to_lowercase());
        let mut packed = Vec::new();
        redis_resp::encode_command(&lower, &mut packed);
        h.engine
            .handle_packed_request(h.now, client, argv(line), Bytes::from(packed));
    };
    // "foo" moved before the engine knew: the MOVED makes it send the command again.
    let from = h.cluster.node_of("foo");
    h.cluster.owner[usize::from(slot("foo"))] = 1 - from;
    send(&mut h, "SET foo 1");
    h.settle(10);
    // One key per node: an MGET split in two is encoded from argv.
    let (a, b) = (
        (0..)
            .map(|i| format!("k{i}"))
            .find(|k| h.cluster.node_of(k) == 0),
        (0..)
            .map(|i| format!("k{i}"))
            .find(|k| h.cluster.node_of(k) == 1),
    );
    let (a, b) = (a.expect("a key of node 0"), b.expect("a key of node 1"));
    send(&mut h, &format!("MGET {a} {b}"));
    // PING goes to every master: each gets a copy encoded from argv.
    send(&mut h, "PING");
    h.settle(10);
    assert_eq!(
        h.replies_of(client),
        [
            ok(),
            Frame::Array(vec![Frame::NullBulkString, Frame::NullBulkString]),
            Frame::SimpleString(Bytes::from_static(b"PONG")),
        ]
    );
    let mut names: Vec<String> = h
        .cluster
        .links
        .values()
        .flat_map(|l| l.seen.iter())
        .map(|a| String::from_utf8_lossy(&a[0]).into_owned())
        .filter(|n| !matches!(n.as_str(), "CLUSTER" | "INFO"))
        .collect();
    names.sort();
    assert_eq!(names, ["MGET", "MGET", "PING", "PING", "set", "set"]);
}

#[test]
fn msetnx_across_slots_is_refused_and_del_sums() {
    let (mut h, client) = started(3);
    h.engine
        .handle_request(h.now, client, argv("MSETNX a 1 b 2"));
    h.engine
        .handle_request(h.now, client, argv("MSET a 1 b 2 c 3"));
    h.engine.handle_request(h.now, client, argv("DEL a b c d"));
    h.engine.handle_request(h.now, client, argv("DBSIZE"));
    h.settle(5);
    assert_eq!(
        h.replies_of(client),
        [
            err(errors::CROSSSLOT),
            ok(),
            Frame::Integer(3),
            Frame::Integer(0)
        ]
    );
}

#[test]
fn hello_switches_a_client_to_resp3_and_is_checked_as_the_server_checks_it() {
    let (mut h, client) = started(1);
    for line in ["HELLO 4", "HELLO x", "HELLO 3 SETNAME", "HELLO 3"] {
        h.engine.handle_request(h.now, client, argv(line));
    }
    h.settle(2);
    let replies = h.replies_of(client);
    assert_eq!(replies[0], err("NOPROTO unsupported protocol version"));
    assert_eq!(
        replies[1],
        err("ERR Protocol version is not an integer or out of range")
    );
    assert_eq!(
        replies[2],
        err("ERR Syntax error in HELLO option 'SETNAME'")
    );
    let Frame::Map(pairs) = &replies[3] else {
        panic!("{:?}", replies[3])
    };
    assert_eq!(pairs[2], (bulk("proto"), Frame::Integer(3)));
    assert_eq!(h.engine.protocol(client), Some(3));
    // Its commands now go on RESP3 connections: HELLO 3 was sent on a new one.
    h.engine.handle_request(h.now, client, argv("SET k v"));
    h.settle(2);
    assert_eq!(h.replies_of(client)[4], ok());
    let hellos = h
        .cluster
        .links
        .values()
        .filter(|l| {
            l.seen
                .first()
                .is_some_and(|a| &a[0][..] == b"HELLO" && &a[1][..] == b"3")
        })
        .count();
    assert_eq!(hellos, 1);
}

#[test]
fn a_client_owed_more_than_its_output_limit_is_paused_until_half_is_written() {
    let mut h = Harness::new(2, |c| c.client_output_limit = Some(100));
    h.start();
    let client = h.engine.open_client();
    let other = h.engine.open_client();
    h.cluster.store.insert(b"big".to_vec(), vec![b'x'; 60]);
    for _ in 0..3 {
        h.engine.handle_request(h.now, client, argv("GET big"));
    }
    h.engine.handle_request(h.now, other, argv("GET big"));
    h.settle(5);
    assert_eq!(h.replies_of(client).len(), 3);
    // `$60` CRLF, 60 bytes, CRLF: 67 bytes a reply. The second passes 100: one pause, and
    // only for the client that does not take its replies (the other took one, 67 bytes).
    assert_eq!(h.pauses, [(client, true)]);
    h.engine.handle_written(client, 2 * 67);
    h.outputs();
    assert_eq!(
        h.pauses,
        [(client, true)],
        "67 bytes left: more than half the limit"
    );
    h.engine.handle_written(client, 67);
    h.outputs();
    assert_eq!(h.pauses, [(client, true), (client, false)]);
}

/// With `raw_replies`, a reply that is a request's whole reply comes as the node's bytes,
/// also when it arrives a byte at a time, behind a redirect, or ahead of an earlier
/// request's reply; errors and merges stay frames; the output limit counts the bytes.
#[test]
fn raw_replies_are_the_nodes_bytes_in_the_clients_order() {
    let expected = [
        bulk("1"),
        ok(),
        Frame::Array(vec![bulk("1"), bulk("2")]),
        Frame::Integer(2),
        err("ERR unknown command 'HGET'"),
        bulk("2"),
        Frame::SimpleString(Bytes::from_static(b"PONG")),
    ];
    // Paused after the last reply only if the bytes handed on count.
    let total: usize = expected.iter().map(encoded_len).sum();
    let mut h = Harness::new(3, |c| {
        c.raw_replies = true;
        c.client_output_limit = Some(total - 1);
    });
    h.start();
    let client = h.engine.open_client();
    h.cluster.store.insert(b"a".to_vec(), b"1".to_vec());
    // "foo" moved before the engine knew: its GET meets MOVED, then is read again.
    let from = h.cluster.node_of("foo");
    h.cluster.owner[usize::from(slot("foo"))] = (from + 1) % 3;
    let lines = [
        "GET a",
        "SET foo 2",
        "MGET a foo",
        "INCR a",
        "HGET a x",
        "GET foo",
        "PING",
    ];
    for line in lines {
        h.engine.handle_request(h.now, client, argv(line));
    }
    // Every reply a byte at a time, the links in reverse order of opening (so that a later
    // request's reply can come before an earlier one's), until nothing moves.
    for _ in 0..20 {
        h.take_writes();
        while h.deliver_one() {}
        let mut links: Vec<ConnId> = h.cluster.links.keys().copied().collect();
        links.sort();
        for conn in links.into_iter().rev() {
            let bytes = std::mem::take(&mut h.cluster.links.get_mut(&conn).expect("a link").outbox);
            for byte in bytes.chunks(1) {
                h.engine.handle_data(h.now, conn, byte);
            }
            h.outputs();
        }
    }
    assert_eq!(h.replies_of(client), expected);
    // GET a, SET foo (after its MOVED), the MGET (merged from its two parts' bytes), INCR
    // a, GET foo. The HGET is an error, and PING goes to every master
    // (`request_policy:all_shards`): merged as frames.
    assert_eq!(h.raw, 5);
    assert_eq!(h.pauses, [(client, true)]);
    h.engine.handle_written(client, total);
    h.outputs();
    assert_eq!(h.pauses, [(client, true), (client, false)]);
}

#[test]
fn without_an_output_limit_nothing_is_counted_or_paused() {
    let (mut h, client) = started(1);
    h.cluster.store.insert(b"big".to_vec(), vec![b'x'; 100_000]);
    for _ in 0..50 {
        h.engine.handle_request(h.now, client, argv("GET big"));
    }
    h.settle(5);
    assert_eq!(h.replies_of(client).len(), 50);
    assert!(h.pauses.is_empty());
}

#[test]
fn two_clients_get_their_own_replies_in_their_own_order() {
    let (mut h, first) = started(3);
    let second = h.engine.open_client();
    for i in 0..20 {
        h.engine
            .handle_request(h.now, first, argv(&format!("INCR one{}", i % 3)));
        h.engine
            .handle_request(h.now, second, argv(&format!("INCR two{}", i % 5)));
    }
    h.settle(10);
    let expect =
        |m: usize| -> Vec<Frame> { (0..20).map(|i| Frame::Integer(i / m as i64 + 1)).collect() };
    assert_eq!(h.replies_of(first), expect(3));
    assert_eq!(h.replies_of(second), expect(5));
}

#[test]
fn a_refused_seed_fails_waiting_requests_with_the_reason() {
    let mut h = Harness::new(1, |_| {});
    h.cluster.refuse.insert(0);
    let client = h.engine.open_client();
    h.engine.handle_request(h.now, client, argv("GET foo"));
    h.settle(1);
    let replies = h.replies_of(client);
    assert_eq!(replies.len(), 1);
    let Frame::SimpleError(text) = &replies[0] else {
        panic!("{replies:?}")
    };
    assert!(
        text.starts_with(
            b"CLUSTERDOWN no slot map: ERR connection to 127.0.0.1:7000 lost: Connection refused"
        ),
        "{text:?}"
    );
    // The seed comes back: the next request is served.
    h.cluster.refuse.clear();
    h.engine.handle_request(h.now, client, argv("GET foo"));
    h.settle(20);
    assert_eq!(h.replies_of(client)[1], Frame::NullBulkString);
}

fn queued() -> Frame {
    Frame::SimpleString(Bytes::from_static(b"QUEUED"))
}

#[test]
fn a_transaction_goes_in_one_write_to_its_slots_node_and_follows_a_moved() {
    let (mut h, client) = started(3);
    // The slot moved before the engine knew: the queued commands meet MOVED, EXEC aborts,
    // and the engine sends the whole transaction again to the new owner.
    let from = h.cluster.node_of("{t}a");
    let to = (from + 1) % 3;
    h.cluster.owner[usize::from(slot("{t}a"))] = to;
    for line in [
        "MULTI",
        "SET {t}a 1",
        "INCR {t}a",
        "MGET {t}a {t}b",
        "EXEC",
        "GET {t}a",
    ] {
        h.engine.handle_request(h.now, client, argv(line));
    }
    h.settle(10);
    assert_eq!(
        h.replies_of(client),
        [
            ok(),
            queued(),
            queued(),
            queued(),
            Frame::Array(vec![
                ok(),
                Frame::Integer(2),
                Frame::Array(vec![bulk("2"), Frame::NullBulkString])
            ]),
            bulk("2"),
        ]
    );
    let link = h.link_of(to).expect("a link to the new owner");
    let seen: Vec<&[u8]> = h.cluster.links[&link]
        .seen
        .iter()
        .map(|a| &a[0][..])
        .collect();
    let at = seen
        .iter()
        .position(|n| *n == b"MULTI")
        .expect("MULTI reached the owner");
    assert_eq!(
        &seen[at..at + 5],
        [&b"MULTI"[..], b"SET", b"INCR", b"MGET", b"EXEC"]
    );
}

#[test]
fn transaction_errors_are_the_servers() {
    let (mut h, client) = started(2);
    for line in [
        "EXEC", "DISCARD", "MULTI", "MULTI", "WATCH x", "NOSUCH a", "GET", "SET a 1", "EXEC",
        "MULTI", "SET a 1", "SET b 2", "EXEC", "MULTI", "SET a 2", "DISCARD", "GET a",
    ] {
        h.engine.handle_request(h.now, client, argv(line));
    }
    h.settle(10);
    assert_eq!(
        h.replies_of(client),
        [
            err("ERR EXEC without MULTI"),
            err("ERR DISCARD without MULTI"),
            ok(),
            err("ERR MULTI calls can not be nested"),
            err("ERR WATCH inside MULTI is not allowed"),
            err("ERR unknown command 'NOSUCH', with args beginning with: 'a' "),
            err("ERR wrong number of arguments for 'get' command"),
            queued(),
            err("EXECABORT Transaction discarded because of previous errors."),
            ok(),
            queued(),
            queued(),
            err(errors::CROSSSLOT),
            ok(),
            queued(),
            ok(),
            Frame::NullBulkString,
        ]
    );
}

#[test]
fn watch_pins_a_connection_and_a_touched_key_aborts_the_exec() {
    let (mut h, first) = started(2);
    let second = h.engine.open_client();
    for (client, line) in [
        (first, "WATCH {t}a"),
        (second, "SET {t}a other"),
        (first, "MULTI"),
        (first, "SET {t}a mine"),
        (first, "EXEC"),
        (first, "WATCH {t}a"),
        (first, "WATCH nope"),
        (first, "MULTI"),
        (first, "SET {t}b mine"),
        (first, "EXEC"),
        (first, "GET {t}b"),
    ] {
        h.engine.handle_request(h.now, client, argv(line));
        h.settle(5);
    }
    assert_eq!(
        h.replies_of(first),
        [
            ok(),
            ok(),
            queued(),
            Frame::NullArray,
            ok(),
            err(errors::CROSSSLOT),
            ok(),
            queued(),
            Frame::Array(vec![ok()]),
            bulk("mine"),
        ]
    );
    assert_eq!(h.cluster.store.get(&b"{t}a"[..]), Some(&b"other".to_vec()));
    // The WATCH connections were closed after their EXEC.
    let watching = h
        .cluster
        .links
        .values()
        .filter(|l| l.seen.iter().any(|a| &a[0][..] == b"WATCH"))
        .count();
    assert_eq!(watching, 0);
}

fn message(kind: &str, channel: &str, text: &str) -> Frame {
    Frame::Array(vec![bulk(kind), bulk(channel), bulk(text)])
}

fn pushes_of(h: &Harness, client: redis_cluster_client::ClientId) -> Vec<Frame> {
    h.pushes
        .iter()
        .filter(|p| p.0 == client)
        .map(|p| p.1.clone())
        .collect()
}

#[test]
fn a_subscriber_gets_messages_and_is_subscribed_again_after_its_connection_is_lost() {
    let (mut h, sub) = started(3);
    let publisher = h.engine.open_client();
    h.engine.handle_request(h.now, sub, argv("SET before 1"));
    h.engine
        .handle_request(h.now, sub, argv("SUBSCRIBE news sport"));
    h.engine.handle_request(h.now, sub, argv("GET before"));
    h.settle(5);
    // No reply to SUBSCRIBE (its confirmations are pushes); GET refused in Pub/Sub mode.
    assert_eq!(
        h.replies_of(sub),
        [
            ok(),
            err(
                "ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context"
            ),
        ]
    );
    assert_eq!(
        pushes_of(&h, sub),
        [
            Frame::Array(vec![bulk("subscribe"), bulk("news"), Frame::Integer(1)]),
            Frame::Array(vec![bulk("subscribe"), bulk("sport"), Frame::Integer(2)]),
        ]
    );
    h.engine
        .handle_request(h.now, publisher, argv("PUBLISH news hello"));
    h.settle(5);
    assert_eq!(pushes_of(&h, sub)[2], message("message", "news", "hello"));
    // The subscriber's connection dies: the engine subscribes again, silently.
    let conn = h
        .cluster
        .links
        .iter()
        .find(|(_, l)| !l.channels.is_empty())
        .map(|(c, _)| *c)
        .expect("the subscriber's link");
    h.cluster.links.remove(&conn);
    h.engine.handle_closed(h.now, conn, "reset");
    h.settle(5);
    h.advance(10);
    h.engine
        .handle_request(h.now, publisher, argv("PUBLISH sport goal"));
    h.settle(5);
    let pushes = pushes_of(&h, sub);
    assert_eq!(pushes.len(), 4, "{pushes:?}");
    assert_eq!(pushes[3], message("message", "sport", "goal"));
    h.engine.handle_request(h.now, sub, argv("PING"));
    h.engine.handle_request(h.now, sub, argv("UNSUBSCRIBE"));
    h.settle(5);
    let pushes = pushes_of(&h, sub);
    assert_eq!(pushes[4], Frame::Array(vec![bulk("pong"), bulk("")]));
    assert_eq!(pushes.len(), 7);
}

#[test]
fn a_shard_subscriber_follows_its_slot_to_the_new_owner() {
    let (mut h, sub) = started(2);
    let publisher = h.engine.open_client();
    h.engine
        .handle_request(h.now, sub, argv("SSUBSCRIBE {s}ch"));
    h.settle(5);
    let from = h.cluster.node_of("{s}ch");
    let to = 1 - from;
    h.cluster.migrating.insert(slot("{s}ch"), to);
    h.cluster.finish(slot("{s}ch"));
    // The old owner says sunsubscribe; the engine drops it and subscribes on the new owner.
    h.settle(20);
    h.advance(200);
    h.engine
        .handle_request(h.now, publisher, argv("SPUBLISH {s}ch moved"));
    h.settle(20);
    assert_eq!(h.replies_of(publisher), [Frame::Integer(1)]);
    assert_eq!(
        pushes_of(&h, sub),
        [
            Frame::Array(vec![bulk("ssubscribe"), bulk("{s}ch"), Frame::Integer(1)]),
            message("smessage", "{s}ch", "moved"),
        ]
    );
}

#[test]
fn unsubscribing_from_nothing_answers_as_the_server() {
    let (mut h, client) = started(1);
    h.engine.handle_request(h.now, client, argv("UNSUBSCRIBE"));
    h.engine
        .handle_request(h.now, client, argv("SUNSUBSCRIBE a b"));
    h.settle(2);
    assert_eq!(
        pushes_of(&h, client),
        [
            Frame::Array(vec![
                bulk("unsubscribe"),
                Frame::NullBulkString,
                Frame::Integer(0)
            ]),
            Frame::Array(vec![bulk("sunsubscribe"), bulk("a"), Frame::Integer(0)]),
            Frame::Array(vec![bulk("sunsubscribe"), bulk("b"), Frame::Integer(0)]),
        ]
    );
}

#[test]
fn a_closed_client_leaves_nothing_behind() {
    let mut h = Harness::new(2, |_| {});
    let early = h.engine.open_client();
    // A request waiting for the first map, then the client goes.
    h.engine.handle_request(h.now, early, argv("GET foo"));
    h.engine.close_client(h.now, early);
    h.start();
    assert_eq!(h.engine.requests_pending(), 0);
    // A client blocked in BLPOP 0 goes: its connection of its own is closed.
    let blocked = h.engine.open_client();
    h.engine
        .handle_request(h.now, blocked, argv("BLPOP list 0"));
    h.take_writes();
    while h.deliver_one() {}
    let links = h.cluster.links.len();
    h.engine.close_client(h.now, blocked);
    h.outputs();
    assert_eq!(
        h.cluster.links.len(),
        links - 1,
        "the BLPOP connection closed"
    );
    assert_eq!(h.engine.requests_pending(), 0);
    assert!(h.replies.is_empty());
}

#[test]
fn a_pipelined_watch_keeps_its_reply_when_the_exec_behind_it_fails() {
    // Found by the client_engine fuzz target: the failed EXEC closed the WATCH connection
    // while the WATCH still owed its OK, and the WATCH never got an answer.
    let (mut h, client) = started(2);
    for line in [
        "WATCH {t}k",
        "MULTI",
        "SET {t}k 1",
        "SET other 2",
        "EXEC",
        "GET {t}k",
    ] {
        h.engine.handle_request(h.now, client, argv(line));
    }
    h.settle(10);
    assert_eq!(
        h.replies_of(client),
        [
            ok(),
            ok(),
            queued(),
            queued(),
            err(errors::CROSSSLOT),
            Frame::NullBulkString
        ]
    );
    assert_eq!(h.engine.requests_pending(), 0);
}

#[test]
fn a_watch_sent_after_an_unwatch_retired_its_connection_still_gets_its_reply() {
    // Found by the client_engine fuzz target: the second WATCH waits behind the first; the
    // UNWATCH retires the connection, which is to close after its last reply; the first
    // WATCH's reply sends the second on it, and the connection closed without its reply.
    let (mut h, client) = started(2);
    for line in ["WATCH k", "WATCH k", "UNWATCH", "GET k"] {
        h.engine.handle_request(h.now, client, argv(line));
    }
    h.settle(10);
    assert_eq!(
        h.replies_of(client),
        [ok(), ok(), ok(), Frame::NullBulkString]
    );
    assert_eq!(h.engine.requests_pending(), 0);
}

// ------------------------------------------------------------------------- the proptest

#[derive(Clone, Debug)]
enum Step {
    /// A client's command (client, command index, key indexes).
    Request(usize, usize, Vec<usize>),
    /// Take the engine's writes onto the wire.
    Take,
    /// Deliver the oldest write.
    Deliver,
    /// Give the engine one node's answers.
    Answer(usize),
    /// Time passes to the next deadline.
    Tick,
    /// A slot starts migrating to a node.
    Migrate(usize, usize),
    /// The migrating slot of a key finishes (MOVED from now on).
    Finish(usize),
    /// A node goes down or comes back (only while nothing of it is in flight).
    Down(usize),
    Up(usize),
    /// A link whose node owes nothing drops.
    Drop(usize),
}

const NODES: usize = 3;
const CLIENTS: usize = 2;
const KEYS: usize = 6;

/// Key `k` of client `c`: plain keys spread over slots, and three of one hash tag.
fn key(c: usize, k: usize) -> String {
    if k < 3 {
        format!("c{c}k{k}")
    } else {
        format!("{{c{c}t}}{k}")
    }
}

/// The requests of one step: one command, or a transaction on one hash tag.
fn commands(c: usize, which: usize, keys: &[usize]) -> Vec<Vec<Bytes>> {
    if which == 7 {
        let t = |i: usize| key(c, 3 + keys[i % keys.len()] % 3);
        let lines = [
            "MULTI".to_string(),
            format!("INCR {}", t(0)),
            format!("MGET {} {}", t(1), t(2)),
            "EXEC".into(),
        ];
        return lines.iter().map(|l| argv(l)).collect();
    }
    vec![command(c, which, keys)]
}

/// One standalone server: a keyspace and MULTI.
#[derive(Default)]
struct Standalone {
    store: HashMap<Vec<u8>, Vec<u8>>,
    multi: Option<Vec<Vec<Bytes>>>,
}

impl Standalone {
    fn run(&mut self, args: &[Bytes]) -> Frame {
        match (&args[0][..], self.multi.as_mut()) {
            (b"MULTI", _) => {
                self.multi = Some(Vec::new());
                ok()
            }
            (b"EXEC", Some(_)) => {
                let queued = self.multi.take().unwrap_or_default();
                Frame::Array(queued.iter().map(|c| exec(&mut self.store, c)).collect())
            }
            (_, Some(queued)) => {
                queued.push(args.to_vec());
                Frame::SimpleString(Bytes::from_static(b"QUEUED"))
            }
            _ => exec(&mut self.store, args),
        }
    }
}

fn command(c: usize, which: usize, keys: &[usize]) -> Vec<Bytes> {
    let k = |i: usize| key(c, keys[i % keys.len()]);
    let line = match which % 7 {
        0 => format!("GET {}", k(0)),
        1 => format!("SET {} v{}", k(0), keys.len()),
        2 => format!("INCR {}", k(0)),
        3 => format!("MGET {} {} {}", k(0), k(1), k(2)),
        4 => format!("MSET {} x {} y", k(0), k(1)),
        5 => format!("DEL {} {}", k(0), k(1)),
        _ => format!("EXISTS {} {}", k(0), k(1)),
    };
    argv(&line)
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (0..CLIENTS, 0..8usize, prop::collection::vec(0..KEYS, 3)).prop_map(|(c, w, k)| Step::Request(c, w, k)),
        4 => Just(Step::Take),
        6 => Just(Step::Deliver),
        5 => (0..NODES).prop_map(Step::Answer),
        2 => Just(Step::Tick),
        1 => (0..KEYS * CLIENTS, 0..NODES).prop_map(|(k, n)| Step::Migrate(k, n)),
        1 => (0..KEYS * CLIENTS).prop_map(Step::Finish),
        1 => (0..NODES).prop_map(Step::Down),
        2 => (0..NODES).prop_map(Step::Up),
        1 => (0..NODES).prop_map(Step::Drop),
    ]
}

/// The steps, replies as frames or, with `raw`, as bytes where they can be
/// ([`Config::raw_replies`](redis_cluster_client::Config)).
fn run(steps: Vec<Step>, raw: bool) -> Result<(), TestCaseError> {
    // Replies are never late here (a `Tick` moves at most 100 ms): a timed-out connection
    // may have run what it owed, and running it again is not what one server does.
    let mut h = Harness::new(NODES, |c| {
        c.max_attempts = 10_000;
        c.timeout = Duration::from_secs(3600);
        c.raw_replies = raw;
    });
    h.start();
    let clients: Vec<_> = (0..CLIENTS).map(|_| h.engine.open_client()).collect();
    let mut model: Vec<Standalone> = (0..CLIENTS).map(|_| Standalone::default()).collect();
    let mut expected: Vec<Vec<Frame>> = vec![Vec::new(); CLIENTS];
    let key_of = |i: usize| key(i / KEYS, i % KEYS);
    let mut owned: HashMap<u16, Vec<usize>> = HashMap::new();
    for step in steps {
        match step {
            Step::Request(c, which, keys) => {
                for args in commands(c, which, &keys) {
                    expected[c].push(model[c].run(&args));
                    h.engine.handle_request(h.now, clients[c], args);
                }
                h.outputs();
            }
            Step::Take => h.take_writes(),
            Step::Deliver => {
                h.deliver_one();
            }
            Step::Answer(node) => {
                if let Some(conn) = h.link_of(node) {
                    h.answer(conn);
                }
            }
            Step::Tick => {
                // To the next deadline, but never so far that an unanswered link times out.
                let cap = h.now + Duration::from_millis(100);
                if let Some(at) = h.engine.poll_timeout() {
                    h.now = h.now.max(at.min(cap));
                }
                h.engine.handle_timeout(h.now);
                h.outputs();
            }
            Step::Migrate(k, to) => {
                // A slot never comes back to a node that gave it away: a command pipelined
                // behind one that met MOVED there would run first (see the crate docs).
                let s = slot(&key_of(k));
                let owners = owned
                    .entry(s)
                    .or_insert_with(|| vec![h.cluster.owner[usize::from(s)]]);
                if !h.cluster.migrating.contains_key(&s) && !owners.contains(&to) {
                    owners.push(to);
                    h.cluster.migrating.insert(s, to);
                }
            }
            Step::Finish(k) => {
                let s = slot(&key_of(k));
                if let Some(to) = h.cluster.migrating.remove(&s) {
                    h.cluster.owner[usize::from(s)] = to;
                    h.cluster
                        .moved
                        .retain(|key| key_slot(key) != key_slot(key_of(k).as_bytes()));
                }
            }
            Step::Down(n) | Step::Up(n) => {
                // A node changes state only between commands of a client: a pipelined
                // command behind one that met CLUSTERDOWN would otherwise run first when
                // the node recovers between the two (see the crate docs).
                h.take_writes();
                let quiet = h.cluster.quiet(n)
                    && h.wire
                        .iter()
                        .all(|(c, _)| h.cluster.links.get(c).is_none_or(|l| l.node != n));
                if quiet {
                    h.cluster.down[n] = matches!(step, Step::Down(_));
                }
            }
            Step::Drop(n) => {
                // Only what the node never read is lost with the link, so no command runs
                // twice or not at all without the client knowing.
                if let Some(conn) = h.link_of(n) {
                    if h.cluster.links[&conn].outbox.is_empty() {
                        h.wire.retain(|(c, _)| *c != conn);
                        h.cluster.links.remove(&conn);
                        h.engine.handle_closed(h.now, conn, "dropped");
                        h.outputs();
                    }
                }
            }
        }
    }
    // Down nodes come back once nothing of theirs is in flight, as in the steps.
    loop {
        h.take_writes();
        let moved = !h.wire.is_empty() || h.cluster.links.values().any(|l| !l.outbox.is_empty());
        while h.deliver_one() {}
        h.answer_all();
        if !moved {
            break;
        }
    }
    h.cluster.down = vec![false; NODES];
    // Reshards end (a multi-key command over a half-moved slot meets TRYAGAIN until then).
    for (slot, to) in std::mem::take(&mut h.cluster.migrating) {
        h.cluster.owner[usize::from(slot)] = to;
    }
    h.cluster.moved.clear();
    h.settle(2_000);
    for (c, client) in clients.iter().enumerate() {
        prop_assert_eq!(h.replies_of(*client), expected[c].clone(), "client {}", c);
    }
    if !raw {
        prop_assert_eq!(h.raw, 0);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]
    #[test]
    fn any_mix_through_any_interleaving_answers_as_one_server(steps in prop::collection::vec(step(), 1..120)) {
        run(steps, false)?;
    }

    /// The same with replies handed on as the nodes' bytes: each checked to be one whole
    /// value and never an error (the harness), and the same replies in the same order.
    #[test]
    fn any_mix_with_raw_replies_answers_as_one_server(steps in prop::collection::vec(step(), 1..120)) {
        run(steps, true)?;
    }
}
