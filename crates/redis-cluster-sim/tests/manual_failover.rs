//! Scenario 4: manual failovers. Default: the master pauses writes, the replica waits for the
//! master's offset, wins an election (FORCEACK lets the masters vote while its master is up),
//! and the old master follows it, redirecting writes from then on. FORCE: no handshake with a dead master, still an
//! election. TAKEOVER: no election at all, even without a majority.

use redis_cluster_sim::Sim;
use redis_cluster_state::{FailoverMode, Instant, Request};
use redis_hash_slot::Slot;

/// A key whose slot is in `start..=end`.
fn key_of(start: u16, end: u16) -> Vec<u8> {
    (0u32..)
        .map(|n| format!("k{n}").into_bytes())
        .find(|k| (start..=end).contains(&redis_hash_slot::key_slot(k).get()))
        .expect("a key")
}

fn cluster(seed: u64) -> Sim {
    Sim::create(3, 1, seed, |_, _| {})
}

#[test]
fn default_waits_for_the_offset_and_the_old_master_stops_writing() {
    for seed in 0..5 {
        let mut sim = cluster(seed);
        let (master, replica) = (sim.nodes()[1].myself().id, sim.nodes()[4].myself().id);
        sim.node_mut(1)
            .set_replication_offset(&master, 100, Instant::ZERO);
        sim.node_mut(4)
            .set_replication_offset(&replica, 60, Instant::ZERO);
        let now = sim.now();
        sim.node_mut(4)
            .failover(FailoverMode::Default, Instant::from_millis(now))
            .expect("accepted");
        sim.run_for(1_000);
        assert!(
            sim.nodes()[1].writes_paused(Instant::from_millis(sim.now())),
            "seed {seed}: paused"
        );
        assert!(
            sim.nodes()[4].myself().is_replica(),
            "seed {seed}: offset not reached"
        );
        // Replication catches up.
        let now = Instant::from_millis(sim.now());
        sim.node_mut(4).set_replication_offset(&replica, 100, now);
        sim.run_for(2_000);
        assert!(sim.nodes()[4].myself().is_master(), "seed {seed}: promoted");
        let old = &sim.nodes()[1];
        assert!(
            old.myself().is_replica(),
            "seed {seed}: the old master follows"
        );
        assert_eq!(old.myself().master, Some(replica), "seed {seed}");
        assert!(
            !old.writes_paused(Instant::from_millis(sim.now())),
            "seed {seed}"
        );
        let key = key_of(5461, 10922);
        let keys = [key.as_slice()];
        let write = Request {
            write: true,
            ..Request::new(&keys)
        };
        let answer = old.route(&write, |_| true).to_string();
        assert!(
            answer.starts_with("MOVED ") && answer.ends_with(":7004"),
            "seed {seed}: {answer}"
        );
        for (i, node) in sim.nodes().iter().enumerate() {
            let owner = node.owner(Slot::new(6000).expect("slot")).map(|o| o.id);
            assert_eq!(owner, Some(replica), "seed {seed}: node {i}");
        }
    }
}

#[test]
fn force_elects_without_the_dead_master() {
    let mut sim = cluster(1);
    let replica = sim.nodes()[5].myself().id;
    sim.crash(2);
    sim.run_for(200);
    let now = sim.now();
    let refused = sim
        .node_mut(5)
        .failover(FailoverMode::Default, Instant::from_millis(now));
    assert_eq!(
        refused.map_err(|e| e.to_string()),
        Err("Master is down or failed, please use CLUSTER FAILOVER FORCE".to_owned())
    );
    sim.node_mut(5)
        .failover(FailoverMode::Force, Instant::from_millis(now))
        .expect("accepted");
    sim.run_for(1_000);
    assert!(
        sim.nodes()[5].myself().is_master(),
        "elected long before the master is FAIL"
    );
    let owner = sim.nodes()[0]
        .owner(Slot::new(16000).expect("slot"))
        .map(|o| o.id);
    assert_eq!(owner, Some(replica));
}

#[test]
fn takeover_needs_no_majority() {
    let mut sim = cluster(2);
    let replica = sim.nodes()[3].myself().id;
    // Node 3 with its master only: no majority of masters reachable.
    sim.partition(&[0, 3]);
    let now = sim.now();
    sim.node_mut(3)
        .failover(FailoverMode::Takeover, Instant::from_millis(now))
        .expect("accepted");
    let node = &sim.nodes()[3];
    assert!(node.myself().is_master());
    assert_eq!(
        node.owner(Slot::new(0).expect("slot")).map(|o| o.id),
        Some(replica)
    );
    assert!(
        node.myself().config_epoch > 6,
        "a new config epoch of its own"
    );
    sim.run_for(2_000);
    assert!(
        sim.nodes()[0].myself().is_replica(),
        "its old master follows it"
    );
    let refused = sim
        .node_mut(1)
        .failover(FailoverMode::Default, Instant::from_millis(now));
    assert_eq!(
        refused.map_err(|e| e.to_string()),
        Err("You should send CLUSTER FAILOVER to a replica".to_owned())
    );
}
