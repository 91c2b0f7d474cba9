//! nodes.conf and CLUSTER NODES against the real files of the workspace's `tests/vectors/cluster-text/`:
//! every nodes.conf loads, and what we write back is the same text (node order aside, and
//! with the ping / pong times a load sets to "now"), as is our CLUSTER NODES against the real
//! CLUSTER NODES of the same node.

mod support;

use redis_cluster_bus::NodeId;
use redis_cluster_state::{ClusterNode, Config, Instant};
use redis_hash_slot::Slot;
use support::{NOW, dirs, load, load_conf, read};

/// Lines sorted, with each non-zero ping / pong time replaced by a marker: what a load keeps.
fn normal(text: &str) -> Vec<String> {
    let mut lines: Vec<String> = text
        .lines()
        .map(|line| {
            let mut fields: Vec<&str> = line.split(' ').collect();
            if fields[0] != "vars" {
                for at in [4, 5] {
                    if fields[at] != "0" {
                        fields[at] = "T";
                    }
                }
            }
            fields.join(" ")
        })
        .collect();
    lines.sort();
    lines
}

#[test]
fn real_nodes_conf_files_load_and_write_back_the_same() {
    for (dir, port) in dirs() {
        let node = load(&dir, port);
        let what = dir.display().to_string();
        // Right after the load, before any link: the same table.
        let loaded = load_conf(&dir, port);
        assert_eq!(loaded.nodes().count(), 6, "{what}");
        let myid = read(&dir.join("cluster-myid.txt"));
        assert_eq!(node.myself().id.to_string(), myid.trim(), "{what}");
        assert_eq!(node.nodes().count(), 6, "{what}");
        let assigned = (0..16384)
            .filter(|&n| node.owner(Slot::new(n).expect("slot")).is_some())
            .count();
        assert_eq!(assigned, 16384, "{what}");
        assert!(node.state_ok(), "{what}");
        let file = read(&dir.join("nodes.conf"));
        assert_eq!(normal(&node.nodes_conf()), normal(&file), "{what}");
        // Replicas' config epochs are 0 once loaded; their lines show their masters'.
        for n in node.nodes().filter(|n| n.is_replica()) {
            assert_eq!(n.config_epoch, 0, "{what}");
        }
        assert!(
            node.nodes_conf()
                .lines()
                .last()
                .expect("vars")
                .starts_with("vars currentEpoch ")
        );
    }
}

#[test]
fn cluster_nodes_matches_the_real_reply() {
    for (dir, port) in dirs() {
        let node = load(&dir, port);
        let real = read(&dir.join("cluster-nodes.txt"));
        assert!(node.cluster_nodes().ends_with('\n'));
        assert_eq!(
            normal(&node.cluster_nodes()),
            normal(&real),
            "{}",
            dir.display()
        );
    }
}

#[test]
fn open_slots_and_flags_round_trip() {
    let other = "b".repeat(40);
    let me = "a".repeat(40);
    let text = format!(
        "{me} 10.0.0.1:7000@17000 myself,master - 0 0 3 connected 0-99 101 [100->-{other}] [200-<-{other}]\n\
         {other} 10.0.0.2:7001@17001 master,fail? - 1700000000000 1700000000000 4 disconnected 100 102-16383\n\
         {} ::1:7002 slave,nofailover {me} 0 0 3 connected\n\
         vars currentEpoch 9 lastVoteEpoch 4\n",
        "c".repeat(40)
    );
    let node = ClusterNode::from_nodes_conf(
        Config::new("10.0.0.1", 7000),
        &text,
        Instant::from_millis(NOW),
    )
    .expect("loads");
    let other_id = NodeId(other.as_bytes().try_into().expect("40"));
    assert_eq!(
        node.migrating_to(Slot::new(100).expect("slot")),
        Some(&other_id)
    );
    assert_eq!(
        node.importing_from(Slot::new(200).expect("slot")),
        Some(&other_id)
    );
    assert_eq!(node.current_epoch(), 9);
    assert_eq!(node.last_vote_epoch(), 4);
    let written = node.nodes_conf();
    assert!(
        written.contains(&format!(" 0-99 101 [100->-{other}] [200-<-{other}]\n")),
        "{written}"
    );
    assert!(
        written.contains(" ::1:7002@17002 slave,nofailover "),
        "{written}"
    );
    assert!(written.contains(&format!(
        " master,fail? - {NOW} {NOW} 4 disconnected 100 102-16383\n"
    )));
    assert!(!node.state_ok() || node.nodes().any(|n| n.is_pfailed()));
}

#[test]
fn corrupt_files_are_refused_with_the_line() {
    let me = "a".repeat(40);
    let cases = [
        (
            format!("{me} 1.2.3.4:1@2 myself,master - 0 0 0\n"),
            1,
            "fewer than 8 fields",
        ),
        (
            format!("{me} 1.2.3.4:1@2 myself,wizard - 0 0 0 connected\n"),
            1,
            "unknown flag",
        ),
        (
            "xyz 1.2.3.4:1@2 myself,master - 0 0 0 connected\n".to_owned(),
            1,
            "bad node id",
        ),
        (
            format!("{me} 1.2.3.4@2 myself,master - 0 0 0 connected\n"),
            1,
            "bad address",
        ),
        (
            format!("{me} 1.2.3.4:1@2 master - 0 0 0 connected\n"),
            0,
            "no myself line",
        ),
        (
            format!("{me} 1.2.3.4:1@2 myself,master - 0 0 0 connected 5-16384\n"),
            1,
            "bad slot",
        ),
    ];
    for (text, line, what) in cases {
        let err = ClusterNode::from_nodes_conf(
            Config::new("1.2.3.4", 1),
            &text,
            Instant::from_millis(NOW),
        )
        .expect_err("corrupt");
        assert_eq!((err.line, err.what), (line, what), "{text}");
    }
}

/// A restarted node draws the same id from its seed as at its first start: loading its own
/// nodes.conf must not confuse that id with the temporary one `new` starts with, even when a
/// replica's line names it as master after its own line (found by the fault-schedule
/// proptest of the simulator).
#[test]
fn a_node_reloads_its_own_file_whatever_the_line_order() {
    let config = Config::new("10.0.0.1", 7000);
    let me = ClusterNode::new(config.clone()).myself().id;
    let replica = "d".repeat(40);
    let text = format!(
        "{me} 10.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-16383\n\
         {replica} 10.0.0.2:7001@17001 slave {me} 0 0 1 connected\n\
         vars currentEpoch 1 lastVoteEpoch 0\n"
    );
    let node =
        ClusterNode::from_nodes_conf(config, &text, Instant::from_millis(NOW)).expect("loads");
    assert_eq!(node.myself().id, me);
    assert!(node.myself().is_master());
    assert_eq!(node.myself().slots.len(), 16384);
    let id = NodeId(replica.as_bytes().try_into().expect("40"));
    assert_eq!(node.node(&id).and_then(|n| n.master), Some(me));
    assert!(node.nodes_conf().contains(" myself,master "));
}

/// A file that lists one id twice (found by the `nodes_text` fuzz target in CI). Redis 7.0.15
/// and 8.2.3 and Valkey 8.1.8 and 9.1.2, started on this file, all keep the same table: the
/// flags of both lines (so the id stays `myself`), the slots of a range only where no earlier
/// line claimed them, the config epoch of the last line, the master of the line that named
/// one. The table saves as a file that loads again to the same text.
#[test]
fn a_node_listed_twice_keeps_both_lines_as_the_servers_do() {
    let (me, other, replica) = ("a".repeat(40), "b".repeat(40), "c".repeat(40));
    let text = format!(
        "{other} 10.0.0.2:7001@17001 slave {me} 0 0 2 connected 0-99\n\
         {me} 10.0.0.1:7000@17000,host-a myself,master - 0 0 1 connected 0-5460\n\
         {replica} 10.0.0.3:7002@17002 slave {me} 0 0 1 connected\n\
         {me} 10.0.0.9:7009@17009 master - 0 0 3 connected 10923-16383\n\
         vars currentEpoch 3 lastVoteEpoch 0\n"
    );
    let config = || Config::new("10.0.0.1", 7000);
    let now = Instant::from_millis(NOW);
    let node = ClusterNode::from_nodes_conf(config(), &text, now).expect("loads");
    let me_id = NodeId(me.as_bytes().try_into().expect("40"));
    let other_id = NodeId(other.as_bytes().try_into().expect("40"));
    assert_eq!(node.myself().id, me_id);
    assert!(node.myself().is_master());
    assert_eq!(node.myself().config_epoch, 3);
    let owner = |n: u16| node.owner(Slot::new(n).expect("slot")).map(|o| o.id);
    assert_eq!(owner(0), Some(other_id));
    assert_eq!(owner(99), Some(other_id));
    assert_eq!(owner(100), Some(me_id));
    assert_eq!(owner(5460), Some(me_id));
    assert_eq!(owner(5461), None);
    assert_eq!(owner(16383), Some(me_id));
    assert_eq!(node.nodes().count(), 3);
    let saved = node.nodes_conf();
    assert!(
        saved.contains(" myself,master - 0 0 3 connected 100-5460 10923-16383\n"),
        "{saved}"
    );
    let again = ClusterNode::from_nodes_conf(config(), &saved, now).expect("reloads");
    assert_eq!(again.nodes_conf(), saved);

    // A second line that names a master keeps it; `-` on a later line does not drop it.
    let text = format!(
        "{me} 10.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-16383\n\
         {replica} 10.0.0.3:7002@17002 slave {me} 0 0 1 connected\n\
         {replica} 10.0.0.3:7002@17002 slave - 0 0 1 connected\n"
    );
    let node = ClusterNode::from_nodes_conf(config(), &text, now).expect("loads");
    let replica_id = NodeId(replica.as_bytes().try_into().expect("40"));
    assert_eq!(node.node(&replica_id).and_then(|n| n.master), Some(me_id));

    // `myself` twice, even on the same id, is refused: the servers stop on an assertion.
    let text = format!(
        "{me} 10.0.0.1:7000@17000 myself,master - 0 0 1 connected\n\
         {me} 10.0.0.1:7000@17000 myself,master - 0 0 1 connected\n"
    );
    let err = ClusterNode::from_nodes_conf(config(), &text, now).expect_err("two myself");
    assert_eq!((err.line, err.what), (2, "two myself lines"));

    // The servers load a `myself,handshake` line, save a file without it and then refuse to
    // start from that file ("corrupted cluster config file", checked on 7.0.15 and 9.1.2).
    for text in [
        format!("{me} 10.0.0.1:7000@17000 myself,master,handshake - 0 0 1 connected\n"),
        format!(
            "{me} 10.0.0.1:7000@17000 myself,master - 0 0 1 connected\n\
             {me} 10.0.0.1:7000@17000 handshake - 0 0 1 connected\n"
        ),
    ] {
        let err = ClusterNode::from_nodes_conf(config(), &text, now).expect_err("handshake");
        assert_eq!(err.what, "myself in handshake", "{text}");
    }
}
