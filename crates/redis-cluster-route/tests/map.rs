//! The slot map from every real `CLUSTER SLOTS`, `CLUSTER SHARDS` and `CLUSTER NODES` reply in
//! `tests/vectors/cluster-text/`: each loads, covers all 16384 slots, and all six forms of one
//! capture agree on every slot's master and replicas. Then redirects.

use std::path::{Path, PathBuf};

use redis_cluster_route::{ClusterError, Endpoint, ReadFrom, Redirect, SlotMap};
use redis_hash_slot::{Slot, key_slot};
use redis_resp::{Frame, Status};

fn captures() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/vectors/cluster-text");
    [
        "redis-7.0.15",
        "redis-8.2.3",
        "valkey-8.1.8",
        "valkey-9.1.2",
    ]
    .iter()
    .flat_map(|server| [root.join(server), root.join(server).join("after-failovers")])
    .collect()
}

fn frame(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn decode(bytes: &[u8]) -> Frame<&[u8]> {
    match redis_resp::decode(bytes).expect("RESP") {
        Status::Complete((frame, used)) => {
            assert_eq!(used, bytes.len());
            frame
        }
        Status::Incomplete { .. } => panic!("a whole reply"),
    }
}

/// Every slot's master and sorted replicas, as host:port.
fn layout(map: &SlotMap) -> Vec<(String, Vec<String>)> {
    (0..16384)
        .map(|n| {
            let slot = Slot::new(n).expect("slot");
            let master = map
                .master(slot)
                .map(Endpoint::to_string)
                .unwrap_or_default();
            let mut replicas: Vec<String> =
                map.replicas(slot).iter().map(Endpoint::to_string).collect();
            replicas.sort();
            (master, replicas)
        })
        .collect()
}

#[test]
fn every_captured_reply_loads_and_all_forms_agree() {
    for dir in captures() {
        let what = dir.display().to_string();
        let mut maps = Vec::new();
        for name in ["cluster-slots.resp2", "cluster-slots.resp3"] {
            let bytes = frame(&dir.join(name));
            let map = SlotMap::from_cluster_slots(&decode(&bytes))
                .unwrap_or_else(|e| panic!("{what}/{name}: {e}"));
            maps.push((name, map));
        }
        for name in ["cluster-shards.resp2", "cluster-shards.resp3"] {
            let bytes = frame(&dir.join(name));
            let map = SlotMap::from_cluster_shards(&decode(&bytes))
                .unwrap_or_else(|e| panic!("{what}/{name}: {e}"));
            maps.push((name, map));
        }
        let text = String::from_utf8(frame(&dir.join("cluster-nodes.txt"))).expect("UTF-8");
        maps.push((
            "cluster-nodes.txt",
            SlotMap::from_cluster_nodes(&text).expect("nodes"),
        ));
        let bytes = frame(&dir.join("cluster-nodes.resp2"));
        let Frame::BulkString(text) = decode(&bytes) else {
            panic!("CLUSTER NODES is a bulk string")
        };
        let text = std::str::from_utf8(text).expect("UTF-8");
        maps.push((
            "cluster-nodes.resp2",
            SlotMap::from_cluster_nodes(text).expect("nodes"),
        ));

        let (_, first) = &maps[0];
        for (name, map) in &maps {
            assert_eq!(map.assigned(), 16384, "{what}/{name}");
            assert_eq!(map.shards().len(), 3, "{what}/{name}");
            assert!(
                map.shards().iter().all(|s| s.replicas.len() == 1),
                "{what}/{name}: one replica per master"
            );
            assert_eq!(
                layout(map),
                layout(first),
                "{what}/{name} against cluster-slots"
            );
        }
        // Ids and hostnames come through where the reply has them.
        let master = first.master(Slot::new(0).expect("slot")).expect("slot 0");
        assert_eq!(master.id.as_deref().map(str::len), Some(40), "{what}");
    }
}

#[test]
fn the_steady_state_layout_is_the_known_one() {
    let dir = &captures()[0];
    let bytes = frame(&dir.join("cluster-slots.resp3"));
    let map = SlotMap::from_cluster_slots(&decode(&bytes)).expect("map");
    let zero = Slot::new(0).expect("slot");
    let master = map.master(zero).expect("slot 0");
    assert_eq!((master.host.as_str(), master.port), ("127.0.0.1", 7000));
    assert_eq!(master.hostname.as_deref(), Some("host-a1"));
    assert_eq!(map.replicas(zero)[0].port, 7003);
    assert_eq!(map.master(key_slot(b"foo")).map(|m| m.port), Some(7002));
    // Read policies.
    let port = |policy, read, turn| map.node_for(zero, read, policy, turn).map(|n| n.port);
    assert_eq!(port(ReadFrom::Master, true, 0), Some(7000));
    assert_eq!(port(ReadFrom::PreferReplica, true, 5), Some(7003));
    assert_eq!(port(ReadFrom::PreferReplica, false, 5), Some(7000));
    assert_eq!(port(ReadFrom::RoundRobin, true, 0), Some(7000));
    assert_eq!(port(ReadFrom::RoundRobin, true, 1), Some(7003));
    assert_eq!(port(ReadFrom::RoundRobin, true, 2), Some(7000));
}

#[test]
fn moved_updates_the_map_and_ask_does_not() {
    let dir = &captures()[0];
    let text = String::from_utf8(frame(&dir.join("cluster-nodes.txt"))).expect("UTF-8");
    let mut map = SlotMap::from_cluster_nodes(&text).expect("map");
    let slot = Slot::new(3999).expect("slot");

    let ClusterError::Redirect(ask) = ClusterError::parse(b"ASK 3999 127.0.0.1:7001") else {
        panic!("ASK")
    };
    assert!(!map.apply(&ask));
    assert_eq!(map.master(slot).map(|m| m.port), Some(7000));

    let ClusterError::Redirect(moved) = ClusterError::parse(b"MOVED 3999 127.0.0.1:7001") else {
        panic!("MOVED")
    };
    assert!(map.apply(&moved));
    assert_eq!(map.master(slot).map(|m| m.port), Some(7001));
    // The known shard got the slot: its replica serves reads of it too.
    assert_eq!(map.replicas(slot).first().map(|r| r.port), Some(7004));
    assert_eq!(
        map.master(Slot::new(4000).expect("slot")).map(|m| m.port),
        Some(7000)
    );
    assert!(
        !map.apply(&moved),
        "a second identical MOVED changes nothing"
    );

    let ClusterError::Redirect(elsewhere) = ClusterError::parse(b"MOVED 0 10.0.0.9:7010") else {
        panic!("MOVED")
    };
    assert!(map.apply(&elsewhere));
    assert_eq!(
        map.shards().len(),
        4,
        "a node not seen before becomes a shard"
    );
}

#[test]
fn errors_are_sorted_as_a_cluster_client_needs() {
    let slot = |n| Slot::new(n).expect("slot");
    let cases: &[(&[u8], ClusterError<'_>)] = &[
        (
            b"MOVED 3999 127.0.0.1:6381",
            ClusterError::Redirect(Redirect::Moved {
                slot: slot(3999),
                host: b"127.0.0.1",
                port: 6381,
            }),
        ),
        (
            b"ASK 3999 127.0.0.1:6381",
            ClusterError::Redirect(Redirect::Ask {
                slot: slot(3999),
                host: b"127.0.0.1",
                port: 6381,
            }),
        ),
        (
            b"MOVED 16383 2001:db8::7:6379",
            ClusterError::Redirect(Redirect::Moved {
                slot: slot(16383),
                host: b"2001:db8::7",
                port: 6379,
            }),
        ),
        (
            b"MOVED 1 node-7005.cluster.test:7005",
            ClusterError::Redirect(Redirect::Moved {
                slot: slot(1),
                host: b"node-7005.cluster.test",
                port: 7005,
            }),
        ),
        (
            b"MOVED 3999 :6381",
            ClusterError::Redirect(Redirect::Moved {
                slot: slot(3999),
                host: b"",
                port: 6381,
            }),
        ),
        (
            b"ASK 7 ?:7001",
            ClusterError::Redirect(Redirect::Ask {
                slot: slot(7),
                host: b"",
                port: 7001,
            }),
        ),
        (b"MOVED 16384 127.0.0.1:6381", ClusterError::Other),
        (b"MOVED 1 127.0.0.1:65536", ClusterError::Other),
        (b"MOVED 1 127.0.0.1", ClusterError::Other),
        (b"MOVED", ClusterError::Other),
        (
            b"TRYAGAIN Multiple keys request during rehashing of slot",
            ClusterError::TryAgain,
        ),
        (
            b"CLUSTERDOWN Hash slot not served",
            ClusterError::ClusterDown(b"Hash slot not served"),
        ),
        (
            b"CLUSTERDOWN The cluster is down",
            ClusterError::ClusterDown(b"The cluster is down"),
        ),
        (
            b"CROSSSLOT Keys in request don't hash to the same slot",
            ClusterError::CrossSlot,
        ),
        (
            b"LOADING Redis is loading the dataset in memory",
            ClusterError::Loading,
        ),
        (
            b"READONLY You can't write against a read only replica.",
            ClusterError::ReadOnly,
        ),
        (
            b"MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.",
            ClusterError::MasterDown,
        ),
        (b"ERR unknown command 'foo'", ClusterError::Other),
        (b"", ClusterError::Other),
    ];
    for (text, expected) in cases {
        assert_eq!(
            ClusterError::parse(text),
            *expected,
            "{}",
            String::from_utf8_lossy(text)
        );
    }
}
