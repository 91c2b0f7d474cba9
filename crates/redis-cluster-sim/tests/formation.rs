//! Scenario 1 of the issue: six nodes driven as `redis-cli --cluster create
//! --cluster-replicas 1` drives real ones (ADDSLOTS, SET-CONFIG-EPOCH, MEET, REPLICATE)
//! converge: identical slot columns in every CLUSTER NODES, `cluster_state:ok` everywhere.
//! And scenario 8: the same seed gives the same trace.

use redis_cluster_sim::Sim;

/// redis-cli's consistency signature (semantics 7.1): for each line with plain slot tokens,
/// `id:tokens sorted as strings`, sorted and joined with `|`.
fn signature(nodes: &str) -> String {
    let mut entries: Vec<String> = nodes
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            let mut slots: Vec<&str> = fields[8..]
                .iter()
                .copied()
                .filter(|t| !t.starts_with('['))
                .collect();
            if slots.is_empty() {
                return None;
            }
            slots.sort();
            Some(format!("{}:{}", fields[0], slots.join(",")))
        })
        .collect();
    entries.sort();
    entries.join("|")
}

/// Creates the cluster as redis-cli does (`Sim::create`), then runs `ms` more.
fn create(seed: u64, ms: u64) -> Sim {
    let mut sim = Sim::create(3, 1, seed, |_, _| {});
    sim.run_for(ms);
    sim
}

#[test]
fn six_nodes_form_a_cluster_as_redis_cli_creates_it() {
    let sim = create(7, 10_000);
    let signatures: Vec<String> = sim
        .nodes()
        .iter()
        .map(|n| signature(&n.cluster_nodes()))
        .collect();
    assert!(
        signatures.iter().all(|s| *s == signatures[0]),
        "{signatures:#?}"
    );
    assert_eq!(
        signatures[0].matches('|').count(),
        2,
        "three masters with slots"
    );
    for (i, node) in sim.nodes().iter().enumerate() {
        assert_eq!(node.nodes().count(), 6, "node {i} knows everyone");
        assert!(node.state_ok(), "node {i}: {}", node.cluster_info());
        assert!(
            node.nodes().all(|n| !n.in_handshake()),
            "node {i}: no handshake left"
        );
        assert_eq!(node.myself().is_replica(), i >= 3, "node {i}'s role");
        // Everyone sees the replicas as replicas of the right masters.
        for (replica, master) in [(3, 0), (4, 1), (5, 2)] {
            let r = node.node(&sim.nodes()[replica].myself().id).expect("known");
            assert_eq!(r.master, Some(sim.nodes()[master].myself().id), "node {i}");
        }
    }
}

#[test]
fn the_same_seed_gives_the_same_trace() {
    let a = create(11, 3_000);
    let b = create(11, 3_000);
    assert!(!a.trace().is_empty());
    assert_eq!(a.trace(), b.trace());
    let c = create(12, 3_000);
    assert_ne!(a.trace(), c.trace(), "another seed, other random choices");
}

#[test]
fn formation_converges_for_many_seeds() {
    for seed in 100..120 {
        let sim = create(seed, 10_000);
        let first = signature(&sim.nodes()[0].cluster_nodes());
        for (i, node) in sim.nodes().iter().enumerate() {
            assert_eq!(
                signature(&node.cluster_nodes()),
                first,
                "seed {seed}, node {i}"
            );
            assert!(node.state_ok(), "seed {seed}, node {i}");
            assert_eq!(node.nodes().count(), 6, "seed {seed}, node {i}");
        }
    }
}

/// CLUSTER LINKS of a formed cluster: every node has both links with each of the five
/// others, an outbound one (`to`) and the one the peer opened (`from`); a crashed peer's
/// inbound link is gone once its connection drops.
#[test]
fn cluster_links_list_both_directions_with_every_peer() {
    use redis_cluster_state::{LinkStats, Protocol};
    let mut sim = create(11, 5_000);
    let links = |sim: &Sim, i: usize| -> Vec<(String, String)> {
        let reply = sim.nodes()[i].cluster_links(Protocol::Resp2, |link| LinkStats {
            create_time: link.get(),
            ..LinkStats::default()
        });
        let redis_resp::Frame::Array(entries) = reply else {
            panic!("an array")
        };
        entries
            .iter()
            .map(|entry| {
                let redis_resp::Frame::Array(pairs) = entry else {
                    panic!("pairs")
                };
                let text = |f: &redis_resp::Frame<Vec<u8>>| match f {
                    redis_resp::Frame::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
                    other => panic!("{other:?}"),
                };
                (text(&pairs[1]), text(&pairs[3]))
            })
            .collect()
    };
    for i in 0..6 {
        let mine = links(&sim, i);
        assert_eq!(mine.len(), 10, "node {i}: {mine:?}");
        for j in (0..6).filter(|&j| j != i) {
            let id = sim.nodes()[j].myself().id.to_string();
            for direction in ["to", "from"] {
                assert!(
                    mine.contains(&(direction.to_string(), id.clone())),
                    "node {i} lacks {direction} {j}: {mine:?}"
                );
            }
        }
    }
    sim.crash(5);
    let gone = sim.nodes()[5].myself().id.to_string();
    let after = links(&sim, 0);
    assert!(!after.contains(&("from".to_string(), gone)), "{after:?}");
}
