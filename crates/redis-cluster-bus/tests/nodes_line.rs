//! Every `CLUSTER NODES` line and nodes.conf node line the four real servers wrote (the
//! captures in the workspace's `tests/vectors/cluster-text`) reads with `NodesLine`: known
//! flags, a valid id, its address and every slot token, and the fields written back give the
//! line again. Missing captures fail the test.

use std::path::Path;

use redis_cluster_bus::{NodesLine, NodesLineError, SlotToken};

const SERVERS: [&str; 4] = [
    "redis-7.0.15",
    "redis-8.2.3",
    "valkey-8.1.8",
    "valkey-9.1.2",
];

/// The line again from its parsed parts: the address as `NodeAddress` writes it and each slot
/// token as `SlotToken` writes it, between the plain fields.
fn write_back(line: &NodesLine<'_>) -> String {
    let mut out = format!(
        "{} {} {} {} {} {} {} {}",
        line.id,
        line.address,
        line.flags,
        line.master.unwrap_or("-"),
        line.ping_sent,
        line.pong_received,
        line.config_epoch,
        line.link_state
    );
    for token in line.slots() {
        let token: SlotToken<'_> = token.expect("a slot token");
        out.push_str(&format!(" {token}"));
    }
    out
}

#[test]
fn every_captured_line_reads_and_writes_back() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/vectors/cluster-text");
    let mut lines = 0;
    for server in SERVERS {
        for dir in [root.join(server), root.join(server).join("after-failovers")] {
            for file in ["cluster-nodes.txt", "nodes.conf"] {
                let path = dir.join(file);
                let text = std::fs::read_to_string(&path)
                    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                for raw in text
                    .lines()
                    .filter(|l| !l.is_empty() && !l.starts_with("vars "))
                {
                    let line = NodesLine::parse(raw).unwrap_or_else(|e| panic!("{raw}: {e}"));
                    assert!(line.node_id().is_some(), "{raw}");
                    assert!(line.node_flags().is_some(), "{raw}");
                    assert!(line.master_id().is_some(), "{raw}");
                    assert!(line.address.cport.is_some(), "{raw}");
                    assert_eq!(write_back(&line), raw, "{}", path.display());
                    assert_eq!(line.to_string(), raw, "{}", path.display());
                    lines += 1;
                }
            }
        }
    }
    assert!(lines >= 4 * 2 * 2 * 6, "only {lines} lines");
}

#[test]
fn broken_lines_say_what_is_wrong() {
    let id = "e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca";
    let parse = |rest: &str| NodesLine::parse(&format!("{id} {rest}")).map(|_| ());
    assert_eq!(
        parse("127.0.0.1:7000@17000 master - 0 0 1"),
        Err(NodesLineError::Fields)
    );
    assert_eq!(
        parse("127.0.0.1@17000 master - 0 0 1 connected"),
        Err(NodesLineError::Address)
    );
    let slots = |rest: &str| {
        let text = format!("{id} 127.0.0.1:7000@17000 master - 0 0 1 connected {rest}");
        let line = NodesLine::parse(&text).expect("a line");
        line.slots().collect::<Result<Vec<_>, _>>().map(|_| ())
    };
    assert_eq!(slots("0-16384"), Err(NodesLineError::Slot));
    assert_eq!(slots("5-3"), Err(NodesLineError::Slot));
    assert_eq!(slots("[5=>-x]"), Err(NodesLineError::OpenSlot));
    assert_eq!(slots("[5->-x"), Err(NodesLineError::OpenSlot));
    assert_eq!(slots("  0-5  7  "), Ok(()), "runs of spaces");
}
