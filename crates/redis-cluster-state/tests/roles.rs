//! A role learned from another node's header is written to nodes.conf, as the server writes
//! it (`clusterDoBeforeSleep(CLUSTER_TODO_SAVE_CONFIG)` when a master turns replica, when a
//! replica changes master, and when a replica turns master).

use redis_cluster_bus::NodeFlags;
use redis_cluster_state::{ClusterNode, Instant, Output};
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
        header.flags = NodeFlags::REPLICA | NodeFlags::MYSELF;
    }
    support::ping_from(node, header);
    let mut saved = false;
    while let Some(output) = node.poll_output(&mut Vec::new()) {
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

    // A new other port (pport: TLS or plaintext) in B's header is its new address, as the
    // server's `nodeUpdateAddressIfNeeded` compares it too.
    let mut header = support::master_header(id(B), 7001, 5, 5, SlotSet::new());
    header.replicaof = id(C);
    header.flags = NodeFlags::REPLICA | NodeFlags::MYSELF;
    header.pport = 8001;
    support::ping_from(&mut node, header);
    assert_eq!(node.node(&id(B)).map(|b| b.pport), Some(8001));

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

/// Hands `node` a PING made of `header` and `ping` on a new inbound link at `now`; whether a
/// save was asked for.
fn deliver(
    node: &mut ClusterNode,
    header: redis_cluster_bus::OwnedHeader,
    ping: redis_cluster_bus::OwnedPing,
    now: u64,
) -> bool {
    use redis_cluster_bus::{Message, MessageType, OwnedMessage};
    let mut wire = Vec::new();
    OwnedMessage::new(MessageType::PING, header, ping).encode(&mut wire);
    let message = Message::decode(&wire).expect("a PING");
    let link = node.handle_accepted(Instant::from_millis(now));
    node.handle_message(link, "127.0.0.1", &message, Instant::from_millis(now));
    let mut saved = false;
    while let Some(output) = node.poll_output(&mut Vec::new()) {
        saved |= matches!(output, Output::SaveConfig);
    }
    saved
}

/// A PING from B at `now`, carrying a FORGOTTEN_NODE extension for each of `forget` (as a
/// Redis 7.2+ / Valkey node sends while a `CLUSTER FORGET` keeps a node out) and a gossip
/// entry about each of `gossip` (id, port); whether a save was asked for.
fn ping_from_b(node: &mut ClusterNode, forget: &[&str], gossip: &[(&str, u16)], now: u64) -> bool {
    use redis_cluster_bus::{ExtensionType, OwnedExtension, OwnedGossip, OwnedPing};
    let mut slots = SlotSet::new();
    for s in 0..100 {
        slots.insert(Slot::new(s).expect("a slot"));
    }
    let header = support::master_header(id(B), 7001, 5, 5, slots);
    let entries = gossip.iter().map(|&(who, port)| {
        OwnedGossip::new(id(who))
            .with_ip(b"127.0.0.1")
            .with_port(port)
            .with_cport(port + 10000)
            .with_pport(port + 1000)
            .with_flags(NodeFlags::MASTER)
    });
    let mut ping = OwnedPing::default().with_gossip(entries);
    for who in forget {
        let mut payload = id(who).0.to_vec();
        payload.extend_from_slice(&30u64.to_be_bytes());
        ping.extensions.push(OwnedExtension {
            kind: ExtensionType::FORGOTTEN_NODE,
            payload,
            raw: false,
        });
    }
    deliver(node, header, ping, now)
}

/// As Redis 7.2 and Valkey do, a node told by a peer to forget another removes it and keeps
/// it out for the TTL (30 s here: gossip does not bring it back before), but never forgets
/// itself, its own master, or the sender.
#[test]
fn a_forgotten_node_extension_removes_the_node_for_its_ttl() {
    let mut node = fixture();
    assert!(ping_from_b(&mut node, &[D, ME, B], &[], 1_000));
    assert!(node.node(&id(D)).is_none(), "{}", node.nodes_conf());
    assert!(node.node(&id(ME)).is_some() && node.node(&id(B)).is_some());
    // Gossip names D again within the TTL: it stays out, and nothing is saved.
    assert!(!ping_from_b(&mut node, &[], &[(D, 7003)], 20_000));
    assert!(node.node(&id(D)).is_none());
    // After it, gossip brings it back.
    ping_from_b(&mut node, &[], &[(D, 7003)], 32_000);
    let back = node.node(&id(D));
    assert!(back.is_some(), "{}", node.nodes_conf());
    // With the whole address the entry gives, its TLS port (pport) included, as the
    // server's `clusterProcessGossipSection` takes it.
    assert_eq!(
        back.map(|d| (d.port, d.pport, d.cport)),
        Some((7003, 8003, 17003))
    );

    // A replica does not forget its master.
    let mut replica = support::linked(&format!(
        "{ME} 127.0.0.1:7000@17000 myself,slave {C} 0 0 3 connected\n\
         {B} 127.0.0.1:7001@17001 master - 0 0 5 connected 0-99\n\
         {C} 127.0.0.1:7002@17002 master - 0 0 3 connected 100-199\n\
         vars currentEpoch 5 lastVoteEpoch 0\n"
    ));
    assert!(!ping_from_b(&mut replica, &[C], &[], 1_000));
    assert!(replica.node(&id(C)).is_some());
}

/// A PING from `sender` (a master claiming nothing, or a replica of `master`) with the
/// human-nodename and shard-id extensions a Redis 7.2+ / Valkey node sends about itself;
/// whether a save was asked for.
fn ping_announcing(
    node: &mut ClusterNode,
    sender: &str,
    port: u16,
    master: Option<&str>,
    nodename: Option<&str>,
    shard: Option<&str>,
) -> bool {
    use redis_cluster_bus::{ExtensionType, OwnedExtension, OwnedPing};
    let mut header = support::master_header(id(sender), port, 5, 5, SlotSet::new());
    if let Some(master) = master {
        header.replicaof = id(master);
        header.flags = NodeFlags::REPLICA | NodeFlags::MYSELF;
    }
    let mut ping = OwnedPing::default();
    if let Some(name) = nodename {
        ping.extensions.push(OwnedExtension {
            kind: ExtensionType::HUMAN_NODENAME,
            payload: name.as_bytes().to_vec(),
            raw: false,
        });
    }
    if let Some(shard) = shard {
        ping.extensions.push(OwnedExtension {
            kind: ExtensionType::SHARD_ID,
            payload: id(shard).0.to_vec(),
            raw: true,
        });
    }
    deliver(node, header, ping, 1_000)
}

/// As Redis 7.2+ and Valkey take them (`clusterProcessPingExt`): a sender's human node name
/// and shard id are recorded and saved as nodes.conf aux fields in the servers' order; a
/// replica that sends no shard id (a 7.0 node) is put in its master's shard; a node whose
/// master announces a shard id takes it as its own (CLUSTER MYSHARDID); a name no longer
/// announced is dropped.
#[test]
fn human_nodenames_and_shard_ids_are_taken_as_newer_servers_take_them() {
    const SHARD: &str = "5555555555555555555555555555555555555555";
    let mut node = support::linked(&format!(
        "{ME} 127.0.0.1:7000@17000 myself,slave {C} 0 0 3 connected\n\
         {B} 127.0.0.1:7001@17001 master - 0 0 5 connected 0-99\n\
         {C} 127.0.0.1:7002@17002 master - 0 0 3 connected 100-199\n\
         {D} 127.0.0.1:7003@17003,,tls-port=0 slave {C} 0 0 3 connected\n\
         vars currentEpoch 5 lastVoteEpoch 0\n"
    ));
    let before = node.shard_id();
    assert_eq!(before, C, "a 7.0 replica's shard is named by its master");

    assert!(ping_announcing(
        &mut node,
        C,
        7002,
        None,
        Some("cache-c"),
        Some(SHARD)
    ));
    let c = node.node(&id(C)).expect("C");
    assert_eq!(c.human_nodename(), Some("cache-c"));
    assert_eq!(c.shard_id(), Some(id(SHARD)));
    assert!(
        line_of(&node, C).starts_with(&format!(
            "{C} 127.0.0.1:7002@17002,,nodename=cache-c,shard-id={SHARD} master"
        )),
        "{}",
        line_of(&node, C)
    );
    // CLUSTER NODES leaves the aux fields out, as the servers do.
    assert!(
        node.cluster_nodes()
            .lines()
            .any(|l| l.starts_with(&format!("{C} 127.0.0.1:7002@17002 master"))),
        "{}",
        node.cluster_nodes()
    );
    // Its replica (this node) joins its shard.
    assert_eq!(node.shard_id(), SHARD);
    assert!(line_of(&node, ME).contains(&format!(",,shard-id={SHARD} myself,slave")));
    // The same again: nothing new to save.
    assert!(!ping_announcing(
        &mut node,
        C,
        7002,
        None,
        Some("cache-c"),
        Some(SHARD)
    ));

    // A replica without extensions is put in its master's shard; its aux field before the
    // new ones stays first.
    assert!(ping_announcing(&mut node, D, 7003, Some(C), None, None));
    assert!(
        line_of(&node, D).contains(&format!(",,tls-port=0,shard-id={SHARD} slave")),
        "{}",
        line_of(&node, D)
    );
    // A name no longer announced is dropped; the shard id stays.
    assert!(ping_announcing(&mut node, C, 7002, None, None, None));
    let c = node.node(&id(C)).expect("C");
    assert_eq!((c.human_nodename(), c.shard_id()), (None, Some(id(SHARD))));
    // A master of a 7.0 cluster, which sends neither, gets nothing invented.
    assert!(!ping_announcing(&mut node, B, 7001, None, None, None));
    assert_eq!(node.node(&id(B)).and_then(|b| b.shard_id()), None);
    // What was saved loads back the same.
    let conf = node.nodes_conf();
    let loaded = support::linked(&conf);
    assert_eq!(loaded.nodes_conf(), conf);
    assert_eq!(loaded.shard_id(), SHARD);
}

/// A peer's hostname or human node name that would break the line it is written into
/// (blanks, commas, line breaks) is not taken: nodes.conf stays one line a node, and the
/// names a server can announce still are.
#[test]
fn hostile_names_from_a_peer_do_not_reach_nodes_conf() {
    use redis_cluster_bus::{ExtensionType, OwnedExtension, OwnedPing};
    let mut node = fixture();
    let announce = |node: &mut ClusterNode, texts: &[(ExtensionType, &str)]| {
        let mut slots = SlotSet::new();
        for s in 100..200 {
            slots.insert(Slot::new(s).expect("a slot"));
        }
        let header = support::master_header(id(C), 7002, 5, 3, slots);
        let mut ping = OwnedPing::default();
        for &(kind, text) in texts {
            ping.extensions.push(OwnedExtension {
                kind,
                payload: text.as_bytes().to_vec(),
                raw: false,
            });
        }
        deliver(node, header, ping, 1_000);
    };
    let hostile = [
        "evil\nffffffffffffffffffffffffffffffffffffffff 127.0.0.1:1@2 master - 0 0 9 connected 0-16383",
        "two words",
        "a,b",
        "tab\there",
    ];
    for text in hostile {
        announce(
            &mut node,
            &[
                (ExtensionType::HOSTNAME, text),
                (ExtensionType::HUMAN_NODENAME, text),
            ],
        );
        let c = node.node(&id(C)).expect("C");
        assert_eq!(
            (c.hostname.as_deref(), c.human_nodename()),
            (None, None),
            "{text:?}"
        );
        let conf = node.nodes_conf();
        assert_eq!(conf.lines().count(), 5, "{text:?}:\n{conf}");
        assert!(
            line_of(&node, C).starts_with(&format!("{C} 127.0.0.1:7002@17002 master - ")),
            "{text:?}: {}",
            line_of(&node, C)
        );
    }
    announce(
        &mut node,
        &[
            (ExtensionType::HOSTNAME, "node-c.example"),
            (ExtensionType::HUMAN_NODENAME, "cache_c:1"),
        ],
    );
    let c = node.node(&id(C)).expect("C");
    assert_eq!(
        (c.hostname.as_deref(), c.human_nodename()),
        (Some("node-c.example"), Some("cache_c:1"))
    );
}
