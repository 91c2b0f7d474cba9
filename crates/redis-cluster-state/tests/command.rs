//! CLUSTER subcommands served from the tables: replies and the server's error texts.

use redis_cluster_state::{ClusterNode, Config, Instant, Protocol};
use redis_hash_slot::Slot;
use redis_resp::Frame;

const X: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const Y: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
const R: &str = "cccccccccccccccccccccccccccccccccccccccc";

fn pair() -> ClusterNode {
    let text = format!(
        "{X} 10.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-99\n\
         {Y} 10.0.0.2:7001@17001 master - 0 0 2 connected 100-199\n\
         {R} 10.0.0.3:7002@17002 slave {Y} 0 0 2 connected\n\
         vars currentEpoch 2 lastVoteEpoch 0\n"
    );
    ClusterNode::from_nodes_conf(Config::new("10.0.0.1", 7000), &text, Instant::ZERO).expect("view")
}

/// Runs `line`, with `keys` keys in every slot, and shows the reply as the server's line.
fn run(node: &mut ClusterNode, line: &str, keys: u64) -> String {
    let args: Vec<&str> = line.split(' ').collect();
    match node.cluster_command(&args, Protocol::Resp2, Instant::ZERO, |_| keys) {
        Some(Frame::SimpleString(s)) => format!("+{}", String::from_utf8_lossy(&s)),
        Some(Frame::SimpleError(s)) => format!("-{}", String::from_utf8_lossy(&s)),
        Some(Frame::Integer(n)) => format!(":{n}"),
        Some(Frame::BulkString(s)) => String::from_utf8_lossy(&s).into_owned(),
        Some(Frame::Array(items)) => format!("*{}", items.len()),
        Some(other) => format!("{other:?}"),
        None => "(not handled)".to_owned(),
    }
}

#[test]
fn slots_are_added_and_removed_all_or_nothing() {
    let mut node = pair();
    assert_eq!(run(&mut node, "ADDSLOTS 200 201", 0), "+OK");
    assert_eq!(
        run(&mut node, "ADDSLOTS 202 150", 0),
        "-ERR Slot 150 is already busy"
    );
    assert!(
        node.owner(Slot::new(202).expect("slot")).is_none(),
        "nothing added"
    );
    assert_eq!(
        run(&mut node, "ADDSLOTS 300 300", 0),
        "-ERR Slot 300 specified multiple times"
    );
    assert_eq!(
        run(&mut node, "ADDSLOTS 16384", 0),
        "-ERR Invalid or out of range slot"
    );
    assert_eq!(
        run(&mut node, "ADDSLOTS x", 0),
        "-ERR Invalid or out of range slot"
    );
    assert_eq!(
        run(&mut node, "DELSLOTS 5000", 0),
        "-ERR Slot 5000 is already unassigned"
    );
    assert_eq!(run(&mut node, "ADDSLOTSRANGE 300 310 320 330", 0), "+OK");
    assert_eq!(
        run(&mut node, "ADDSLOTSRANGE 400 390", 0),
        "-ERR start slot number 400 is greater than end slot number 390"
    );
    assert_eq!(run(&mut node, "DELSLOTSRANGE 300 305", 0), "+OK");
    assert_eq!(node.myself().slots.len(), 100 + 2 + 5 + 11);
    assert_eq!(
        run(&mut node, "ADDSLOTSRANGE 1 2 3", 0),
        "-ERR wrong number of arguments for 'cluster|addslotsrange' command"
    );
}

#[test]
fn small_commands() {
    let mut node = pair();
    assert_eq!(run(&mut node, "MYID", 0), X);
    assert_eq!(run(&mut node, "KEYSLOT {user1000}.following", 0), ":3443");
    // An empty hash tag: the whole key.
    let whole = redis_hash_slot::key_slot(b"foo{}").get();
    assert_ne!(whole, redis_hash_slot::key_slot(b"foo").get());
    assert_eq!(run(&mut node, "keyslot foo{}", 0), format!(":{whole}"));
    assert_eq!(
        run(
            &mut node,
            "REPLICAS bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
            0
        ),
        "*1"
    );
    assert_eq!(
        run(&mut node, &format!("REPLICAS {R}"), 0),
        "-ERR The specified node is not a master"
    );
    assert_eq!(run(&mut node, "SLAVES nope", 0), "-ERR Unknown node nope");
    assert_eq!(
        run(&mut node, &format!("COUNT-FAILURE-REPORTS {Y}"), 0),
        ":0"
    );
    assert!(run(&mut node, "INFO", 0).starts_with("cluster_state:"));
    assert!(run(&mut node, "NODES", 0).ends_with('\n'));
    assert_eq!(run(&mut node, "LINKS", 0), "(not handled)");
    assert_eq!(
        run(&mut node, "KEYSLOT", 0),
        "-ERR wrong number of arguments for 'cluster|keyslot' command"
    );
}

#[test]
fn epochs() {
    let mut node = pair();
    // Not the largest config epoch (Y has 2): bumped to currentEpoch + 1.
    assert_eq!(run(&mut node, "BUMPEPOCH", 0), "+BUMPED 3");
    assert_eq!(run(&mut node, "BUMPEPOCH", 0), "+STILL 3");
    assert_eq!(
        run(&mut node, "SET-CONFIG-EPOCH 5", 0),
        "-ERR The user can assign a config epoch only when the node does not know any other node."
    );
    let mut alone = ClusterNode::new(Config::new("10.0.0.1", 7000));
    assert_eq!(
        run(&mut alone, "SET-CONFIG-EPOCH -1", 0),
        "-ERR Invalid config epoch specified: -1"
    );
    assert_eq!(run(&mut alone, "SET-CONFIG-EPOCH 4", 0), "+OK");
    assert_eq!(alone.current_epoch(), 4);
    assert_eq!(
        run(&mut alone, "SET-CONFIG-EPOCH 5", 0),
        "-ERR Node config epoch is already non-zero"
    );
}

#[test]
fn setslot_follows_the_migration_protocol() {
    let mut node = pair();
    assert_eq!(
        run(&mut node, &format!("SETSLOT 150 MIGRATING {Y}"), 0),
        "-ERR I'm not the owner of hash slot 150"
    );
    assert_eq!(
        run(&mut node, &format!("SETSLOT 50 IMPORTING {Y}"), 0),
        "-ERR I'm already the owner of hash slot 50"
    );
    assert_eq!(
        run(&mut node, &format!("SETSLOT 50 MIGRATING {R}"), 0),
        "-ERR Target node is not a master"
    );
    assert_eq!(
        run(
            &mut node,
            "SETSLOT 50 MIGRATING dddddddddddddddddddddddddddddddddddddddd",
            0
        ),
        "-ERR I don't know about node dddddddddddddddddddddddddddddddddddddddd"
    );
    assert_eq!(
        run(&mut node, "SETSLOT 50 SIDEWAYS", 0),
        "-ERR Invalid CLUSTER SETSLOT action or number of arguments. Try CLUSTER HELP"
    );
    assert_eq!(
        run(&mut node, &format!("SETSLOT 50 MIGRATING {Y}"), 0),
        "+OK"
    );
    assert_eq!(
        run(&mut node, &format!("SETSLOT 150 IMPORTING {Y}"), 0),
        "+OK"
    );
    let nodes = node.cluster_nodes();
    assert!(
        nodes.contains(&format!(" 0-99 [50->-{Y}] [150-<-{Y}]\n")),
        "{nodes}"
    );
    assert_eq!(
        run(&mut node, &format!("SETSLOT 50 NODE {Y}"), 3),
        "-ERR Can't assign hashslot 50 to a different node while I still hold keys for this hash slot."
    );
    assert_eq!(run(&mut node, &format!("SETSLOT 50 NODE {Y}"), 0), "+OK");
    assert_eq!(
        node.owner(Slot::new(50).expect("slot")).map(|n| n.port),
        Some(7001)
    );
    assert!(node.migrating_to(Slot::new(50).expect("slot")).is_none());
    // Closing the import on the new owner bumps its config epoch.
    assert_eq!(run(&mut node, &format!("SETSLOT 150 NODE {X}"), 0), "+OK");
    assert_eq!(node.myself().config_epoch, 3);
    assert!(node.importing_from(Slot::new(150).expect("slot")).is_none());
    assert_eq!(run(&mut node, "SETSLOT 150 STABLE", 0), "+OK");
}

#[test]
fn a_master_giving_away_its_last_slot_becomes_a_replica() {
    let mut node = pair();
    node.del_slots((1..100).filter_map(Slot::new), Instant::ZERO)
        .expect("assigned");
    assert_eq!(run(&mut node, &format!("SETSLOT 0 NODE {Y}"), 0), "+OK");
    assert!(node.myself().is_replica());
    assert_eq!(
        node.myself().master.map(|m| m.to_string()),
        Some(Y.to_owned())
    );
    assert_eq!(
        run(&mut node, &format!("SETSLOT 0 NODE {X}"), 0),
        "-ERR Please use SETSLOT only with masters."
    );
    // As the server, the role is checked before the arguments are read.
    assert_eq!(
        run(&mut node, "SETSLOT 99999 SIDEWAYS", 0),
        "-ERR Please use SETSLOT only with masters."
    );
}

#[test]
fn meet_replicate_forget_flushslots() {
    let mut node = pair();
    assert_eq!(
        run(&mut node, "MEET 10.0.0.300 7000", 0),
        "-ERR Invalid node address specified: 10.0.0.300:7000"
    );
    assert_eq!(
        run(&mut node, "MEET 10.0.0.9 99999", 0),
        "-ERR Invalid node address specified: 10.0.0.9:99999"
    );
    assert_eq!(run(&mut node, "MEET 10.0.0.9 7009", 0), "+OK");
    assert_eq!(
        run(&mut node, "MEET 10.0.0.9 7009", 0),
        "+OK",
        "again: still OK"
    );
    let handshakes = node.nodes().filter(|n| n.in_handshake()).count();
    assert_eq!(handshakes, 1, "one handshake per address");
    let line = node.cluster_nodes();
    assert!(line.contains(" 10.0.0.9:7009@17009 handshake - "), "{line}");
    assert!(!node.nodes_conf().contains("handshake"), "not saved");

    assert_eq!(
        run(&mut node, &format!("REPLICATE {Y}"), 0),
        "-ERR To set a master the node must be empty and without assigned slots."
    );
    assert_eq!(
        run(&mut node, &format!("REPLICATE {R}"), 0),
        "-ERR I can only replicate a master, not a replica."
    );
    assert_eq!(
        run(&mut node, &format!("REPLICATE {X}"), 0),
        "-ERR Can't replicate myself"
    );
    assert_eq!(
        run(&mut node, "REPLICATE nope", 0),
        "-ERR Unknown node nope"
    );

    assert_eq!(
        run(&mut node, &format!("FORGET {X}"), 0),
        "-ERR I tried hard but I can't forget myself..."
    );
    assert_eq!(run(&mut node, &format!("FORGET {R}"), 0), "+OK");
    assert_eq!(node.nodes().count(), 3, "myself, Y and the handshake");
    assert_eq!(
        run(&mut node, &format!("FORGET {R}"), 0),
        format!("-ERR Unknown node {R}")
    );

    assert_eq!(
        run(&mut node, "FLUSHSLOTS", 1),
        "-ERR DB must be empty to perform CLUSTER FLUSHSLOTS."
    );
    assert_eq!(run(&mut node, "FLUSHSLOTS", 0), "+OK");
    assert!(node.myself().slots.is_empty());
    assert_eq!(run(&mut node, &format!("REPLICATE {Y}"), 0), "+OK");
    assert!(node.myself().is_replica());
    assert_eq!(
        run(&mut node, &format!("FORGET {Y}"), 0),
        "-ERR Can't forget my master!"
    );
    assert_eq!(run(&mut node, "SAVECONFIG", 0), "+OK");
}

#[test]
fn reset_forgets_everything() {
    let mut node = pair();
    assert_eq!(
        run(&mut node, "RESET", 5),
        "-ERR CLUSTER RESET can't be called with master nodes containing keys"
    );
    assert_eq!(run(&mut node, "RESET SIDEWAYS", 0), "-ERR syntax error");
    assert_eq!(run(&mut node, "RESET SOFT", 0), "+OK");
    assert_eq!(node.nodes().count(), 1);
    assert!(node.myself().slots.is_empty());
    assert_eq!(node.myself().id.to_string(), X, "soft keeps the id");
    assert_eq!(node.current_epoch(), 2, "soft keeps the epochs");

    let mut node = pair();
    assert_eq!(run(&mut node, "RESET HARD", 0), "+OK");
    assert_ne!(node.myself().id.to_string(), X, "hard draws a new id");
    assert_eq!((node.current_epoch(), node.myself().config_epoch), (0, 0));
    assert!(node.cluster_nodes().contains("myself,master"));
}

/// Whether the outputs since the last call ask for nodes.conf to be saved, and how often.
fn saves(node: &mut ClusterNode) -> usize {
    let mut saves = 0;
    while let Some(output) = node.poll_output(&mut Vec::new()) {
        saves += usize::from(matches!(output, redis_cluster_state::Output::SaveConfig));
    }
    saves
}

#[test]
fn what_the_server_persists_before_replying_asks_for_one_save() {
    let mut node = pair();
    saves(&mut node);
    for line in [
        "ADDSLOTS 200 201",
        "DELSLOTS 200",
        "ADDSLOTSRANGE 300 399",
        "DELSLOTSRANGE 300 309",
        "SETSLOT 310 NODE bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
        "BUMPEPOCH",
        "SAVECONFIG",
    ] {
        assert!(run(&mut node, line, 0).starts_with('+'), "{line}");
        assert_eq!(saves(&mut node), 1, "{line}");
    }
    // Reads and refused changes save nothing.
    for line in [
        "NODES",
        "INFO",
        "ADDSLOTS 0",
        "DELSLOTS 16000",
        "SET-CONFIG-EPOCH 5",
    ] {
        run(&mut node, line, 0);
        assert_eq!(saves(&mut node), 0, "{line}");
    }
}
