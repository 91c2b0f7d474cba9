//! Every row of the redirect decision table (semantics 1.3), with the server's error texts.

use redis_cluster_state::{ClusterNode, Config, Decision, EndpointType, Instant, Request};
use redis_hash_slot::key_slot;

const X: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const Y: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
const R: &str = "cccccccccccccccccccccccccccccccccccccccc";

/// X (me, 10.0.0.1:7000) owns 0-8191 minus what `extra` changes; Y (10.0.0.2:7001, host
/// `host-y`) owns 8192-16383; R is X's replica.
fn view(myself: &str, extra: &str, config: Config) -> ClusterNode {
    let (x_flags, r_flags) = if myself == X {
        ("myself,master", "slave")
    } else {
        ("master", "myself,slave")
    };
    let text = format!(
        "{X} 10.0.0.1:7000@17000 {x_flags} - 0 0 1 connected 0-8191{extra}\n\
         {Y} 10.0.0.2:7001@17001,host-y master - 0 0 2 connected 8192-16383\n\
         {R} 10.0.0.3:7002@17002 {r_flags} {X} 0 0 1 connected\n\
         vars currentEpoch 2 lastVoteEpoch 0\n"
    );
    ClusterNode::from_nodes_conf(config, &text, Instant::ZERO).expect("a valid view")
}

fn me() -> ClusterNode {
    view(X, "", Config::new("10.0.0.1", 7000))
}

/// A key in `slot`'s hash tag, so that several keys can share a slot.
fn key(slot_of: &str, n: u8) -> Vec<u8> {
    format!("{{{slot_of}}}{n}").into_bytes()
}

fn text(decision: Decision<'_>) -> String {
    decision.to_string()
}

// "bar" hashes to 5061 (X's), "foo" to 12182 (Y's).
#[test]
fn stable_slots_are_served_or_moved() {
    let node = me();
    assert_eq!(key_slot(b"bar").get(), 5061);
    assert!(node.route(&Request::new(&[b"bar"]), |_| true).is_served());
    assert_eq!(
        text(node.route(&Request::new(&[b"foo"]), |_| true)),
        "MOVED 12182 10.0.0.2:7001"
    );
    let keys = [key("bar", 1), key("foo", 2)];
    assert_eq!(
        text(node.route(&Request::new(&keys), |_| true)),
        "CROSSSLOT Keys in request don't hash to the same slot"
    );
    // No key: served whatever the state.
    let none: [&[u8]; 0] = [];
    assert!(node.route(&Request::new(&none), |_| false).is_served());
}

#[test]
fn the_endpoint_follows_the_preferred_type() {
    for (kind, expected) in [
        (EndpointType::Ip, "MOVED 12182 10.0.0.2:7001"),
        (EndpointType::Hostname, "MOVED 12182 host-y:7001"),
        (EndpointType::Unknown, "MOVED 12182 :7001"),
    ] {
        let mut config = Config::new("10.0.0.1", 7000);
        config.preferred_endpoint = kind;
        let node = view(X, "", config);
        assert_eq!(
            text(node.route(&Request::new(&[b"foo"]), |_| true)),
            expected
        );
    }
    // A node without a hostname shows `?` when hostnames are preferred.
    let mut config = Config::new("10.0.0.1", 7000);
    config.preferred_endpoint = EndpointType::Hostname;
    let node = view(R, "", config);
    assert_eq!(
        text(node.route(&Request::new(&[b"bar"]), |_| true)),
        "MOVED 5061 ?:7000"
    );
}

#[test]
fn unassigned_and_down() {
    // X gives up 0-8191 except 5061 and 5062: "bar" stays served, 100 is unassigned.
    let mut node = me();
    let lost: Vec<_> = (0..8192)
        .filter(|&n| n != 5061 && n != 5062)
        .filter_map(redis_hash_slot::Slot::new)
        .collect();
    node.del_slots(lost, Instant::ZERO).expect("assigned");
    assert!(!node.state_ok(), "full coverage lost");
    let unbound = (0u32..)
        .map(|n| format!("k{n}").into_bytes())
        .find(|k| key_slot(k).get() < 5000)
        .expect("a key");
    let request = [unbound.clone(), b"foo".to_vec()];
    assert_eq!(
        text(node.route(&Request::new(&request), |_| true)),
        "CLUSTERDOWN Hash slot not served",
        "the first key's slot is checked before anything"
    );
    let request = [b"foo".to_vec(), unbound];
    assert_eq!(
        text(node.route(&Request::new(&request), |_| true)),
        "CROSSSLOT Keys in request don't hash to the same slot"
    );
    // Down: even a slot owned elsewhere is not redirected.
    assert_eq!(
        text(node.route(&Request::new(&[b"foo"]), |_| true)),
        "CLUSTERDOWN The cluster is down"
    );

    let mut config = Config::new("10.0.0.1", 7000);
    config.allow_reads_when_down = true;
    let mut node = view(X, "", config);
    node.del_slots(
        [redis_hash_slot::Slot::new(0).expect("slot")],
        Instant::ZERO,
    )
    .expect("assigned");
    let mut write = Request::new(&[b"bar"]);
    write.write = true;
    assert_eq!(
        text(node.route(&write, |_| true)),
        "CLUSTERDOWN The cluster is down and only accepts read commands"
    );
    assert!(node.route(&Request::new(&[b"bar"]), |_| true).is_served());
    assert_eq!(
        text(node.route(&Request::new(&[b"foo"]), |_| true)),
        "MOVED 12182 10.0.0.2:7001",
        "reads continue to the rows below"
    );
}

#[test]
fn a_readonly_replica_serves_reads_of_its_masters_slots() {
    let node = view(R, "", Config::new("10.0.0.3", 7002));
    let mut read = Request::new(&[b"bar"]);
    assert_eq!(
        text(node.route(&read, |_| true)),
        "MOVED 5061 10.0.0.1:7000"
    );
    read.readonly = true;
    assert!(node.route(&read, |_| true).is_served());
    let mut write = read;
    write.write = true;
    assert_eq!(
        text(node.route(&write, |_| true)),
        "MOVED 5061 10.0.0.1:7000"
    );
    let foreign = Request {
        readonly: true,
        ..Request::new(&[b"foo"])
    };
    assert_eq!(
        text(node.route(&foreign, |_| true)),
        "MOVED 12182 10.0.0.2:7001"
    );
}

#[test]
fn a_migrating_slot_asks_for_missing_keys() {
    let node = view(X, &format!(" [5061->-{Y}]"), Config::new("10.0.0.1", 7000));
    let keys = [key("bar", 1), key("bar", 2)];
    let request = Request::new(&keys);
    assert!(node.route(&request, |_| true).is_served());
    assert_eq!(
        text(node.route(&request, |_| false)),
        "ASK 5061 10.0.0.2:7001"
    );
    assert_eq!(
        text(node.route(&request, |k| k == keys[0].as_slice())),
        "TRYAGAIN Multiple keys request during rehashing of slot"
    );
    // Writes that would create keys are asked too.
    let write = Request {
        write: true,
        ..Request::new(&[b"bar"])
    };
    assert_eq!(
        text(node.route(&write, |_| false)),
        "ASK 5061 10.0.0.2:7001"
    );
    // MIGRATE itself runs here.
    let migrate = Request {
        migrate: true,
        ..request
    };
    assert!(node.route(&migrate, |_| false).is_served());
}

#[test]
fn an_importing_slot_serves_only_after_asking() {
    // X imports 12182 ("foo") from Y.
    let node = view(X, &format!(" [12182-<-{Y}]"), Config::new("10.0.0.1", 7000));
    let keys = [key("foo", 1), key("foo", 2)];
    let request = Request::new(&keys);
    assert_eq!(
        text(node.route(&request, |_| true)),
        "MOVED 12182 10.0.0.2:7001"
    );
    let asking = Request {
        asking: true,
        ..request
    };
    assert!(node.route(&asking, |_| true).is_served());
    assert_eq!(
        text(node.route(&asking, |k| k == keys[0].as_slice())),
        "TRYAGAIN Multiple keys request during rehashing of slot"
    );
    assert_eq!(
        text(node.route(&asking, |_| false)),
        "TRYAGAIN Multiple keys request during rehashing of slot",
        "MSET of new keys too"
    );
    let single = Request {
        asking: true,
        ..Request::new(&[b"foo"])
    };
    assert!(node.route(&single, |_| false).is_served());
    // The same key twice is not multi-key.
    let twice = [b"foo".to_vec(), b"foo".to_vec()];
    let twice = Request {
        asking: true,
        ..Request::new(&twice)
    };
    assert!(node.route(&twice, |_| false).is_served());
}

/// Semantics of the server's `clusterRedirectBlockedClientIfNeeded`: a blocked client stays
/// while its slot is this node's (migrating or not) or being imported, and is redirected once
/// it is another's, or unassigned, or the cluster is down.
#[test]
fn a_blocked_client_moves_only_when_its_slot_has_left() {
    let blocked = |node: &ClusterNode, key: &[u8]| text(node.route_blocked(&Request::new(&[key])));
    let node = me();
    assert_eq!(blocked(&node, b"bar"), "");
    assert_eq!(blocked(&node, b"foo"), "MOVED 12182 10.0.0.2:7001");
    // Migrating away: still this node's, no ASK.
    let migrating = view(X, &format!(" [5061->-{Y}]"), Config::new("10.0.0.1", 7000));
    assert_eq!(blocked(&migrating, b"bar"), "");
    // Importing: stays.
    let importing = view(X, &format!(" [12182-<-{Y}]"), Config::new("10.0.0.1", 7000));
    assert_eq!(blocked(&importing, b"foo"), "");
    // A READONLY replica keeps the reads of its master's slots, not the writes.
    let replica = view(R, "", Config::new("10.0.0.3", 7002));
    let read = Request {
        readonly: true,
        ..Request::new(&[b"bar"])
    };
    assert!(replica.route_blocked(&read).is_served());
    let write = Request {
        write: true,
        ..read
    };
    assert_eq!(
        text(replica.route_blocked(&write)),
        "MOVED 5061 10.0.0.1:7000"
    );
    // The cluster down: CLUSTERDOWN before anything.
    let mut down = me();
    down.del_slots(
        [redis_hash_slot::Slot::new(16383).expect("a slot")],
        Instant::ZERO,
    )
    .expect("a slot of Y's");
    down.update_state(Instant::ZERO);
    assert!(!down.state_ok());
    assert_eq!(blocked(&down, b"bar"), "CLUSTERDOWN The cluster is down");
}
