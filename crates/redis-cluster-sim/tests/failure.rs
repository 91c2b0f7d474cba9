//! Failure detection in the simulator: a crashed master is flagged PFAIL, then FAIL by every
//! live node once a majority of masters reported it; FAIL spreads by FAIL messages; the
//! cluster goes down (its slots are not covered any more); after a restart the FAIL of a
//! master that kept its slots clears only after twice the node timeout.

use redis_cluster_sim::{NODE_TIMEOUT, Sim};

/// Three masters, one replica each; node 1's replica (node 4) never fails over, so that node 1
/// stays the owner of its slots while it is down.
fn cluster(seed: u64) -> Sim {
    let sim = Sim::create(3, 1, seed, |i, config| config.replica_no_failover = i == 4);
    assert!(sim.nodes().iter().all(|n| n.state_ok()));
    sim
}

#[test]
fn a_crashed_master_is_failed_by_everyone() {
    for seed in [1, 2, 3] {
        let mut sim = cluster(seed);
        let victim = sim.nodes()[1].myself().id;
        sim.crash(1);
        let crashed_at = sim.now();
        let mut failed_at = None;
        while sim.now() < crashed_at + 3 * NODE_TIMEOUT {
            sim.run_for(100);
            let all = (0..6)
                .filter(|&i| i != 1)
                .all(|i| sim.nodes()[i].node(&victim).is_some_and(|n| n.is_failed()));
            if all {
                failed_at = Some(sim.now());
                break;
            }
        }
        let failed_at = failed_at.unwrap_or_else(|| panic!("seed {seed}: not FAIL everywhere"));
        assert!(
            failed_at - crashed_at > NODE_TIMEOUT,
            "seed {seed}: not before the timeout"
        );
        for i in [0, 2, 3, 4, 5] {
            assert!(
                !sim.nodes()[i].state_ok(),
                "seed {seed}: node {i} sees its slots lost"
            );
        }

        // Back up: it still owns its slots, so FAIL stays for twice the node timeout.
        sim.restart(1);
        sim.run_for(NODE_TIMEOUT);
        assert!(
            sim.nodes()[0].node(&victim).is_some_and(|n| n.is_failed()),
            "seed {seed}"
        );
        sim.run_for(3 * NODE_TIMEOUT);
        for i in [0, 2, 3, 4, 5] {
            let node = &sim.nodes()[i];
            assert!(
                !node.node(&victim).is_some_and(|n| n.is_failed()),
                "seed {seed}: node {i}"
            );
            assert!(node.state_ok(), "seed {seed}: node {i}");
        }
    }
}
