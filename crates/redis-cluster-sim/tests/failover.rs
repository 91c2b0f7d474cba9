//! Scenario 2 of the issue, over 100 seeds: a crashed master is replaced by exactly one of its
//! replicas within 3 × node_timeout of simulated time; every node agrees on every slot's owner;
//! no node's epochs ever go backwards. Then the old master comes back as a replica of the new
//! one.

use redis_cluster_bus::NodeId;
use redis_cluster_sim::{NODE_TIMEOUT, Sim};
use redis_hash_slot::Slot;

/// Every node's (current epoch, config epoch).
fn epochs(sim: &Sim) -> Vec<(u64, u64)> {
    sim.nodes()
        .iter()
        .map(|n| (n.current_epoch(), n.myself().config_epoch))
        .collect()
}

/// The owner of every slot, if all live nodes agree on it.
fn agreed_owners(sim: &Sim) -> Option<Vec<Option<NodeId>>> {
    let mut live = (0..sim.nodes().len()).filter(|&i| sim.is_alive(i));
    let first = live.next()?;
    let owners = |i: usize| -> Vec<Option<NodeId>> {
        (0..16384)
            .map(|n| {
                sim.nodes()[i]
                    .owner(Slot::new(n).expect("slot"))
                    .map(|o| o.id)
            })
            .collect()
    };
    let reference = owners(first);
    live.all(|i| owners(i) == reference).then_some(reference)
}

/// Three masters with two replicas each (redis-cli's create): nodes 3 and 6 replicate 0, 4
/// and 7 replicate 1, 5 and 8 replicate 2.
fn cluster(seed: u64) -> Sim {
    Sim::create(3, 2, seed, |_, _| {})
}

#[test]
fn a_crashed_master_is_replaced_by_one_replica() {
    for seed in 0..100 {
        let mut sim = cluster(seed);
        assert!(
            sim.nodes().iter().all(|n| n.state_ok()),
            "seed {seed}: formed"
        );
        let old = sim.nodes()[0].myself().id;
        sim.crash(0);
        let crashed_at = sim.now();
        let mut last = epochs(&sim);
        let mut promoted = Vec::new();
        while sim.now() < crashed_at + 3 * NODE_TIMEOUT {
            sim.run_for(100);
            let now = epochs(&sim);
            for (i, (before, after)) in last.iter().zip(&now).enumerate() {
                assert!(
                    after.0 >= before.0,
                    "seed {seed}: node {i}'s current epoch went back"
                );
            }
            last = now;
            promoted = [3, 6]
                .into_iter()
                .filter(|&r| sim.nodes()[r].myself().is_master())
                .collect();
            let healthy = sim
                .nodes()
                .iter()
                .enumerate()
                .all(|(i, n)| i == 0 || n.state_ok());
            let done = promoted.len() == 1
                && healthy
                && agreed_owners(&sim)
                    .is_some_and(|owners| owners[0] == Some(sim.nodes()[promoted[0]].myself().id));
            if done {
                break;
            }
        }
        assert_eq!(
            promoted.len(),
            1,
            "seed {seed}: exactly one replica promoted"
        );
        let told = sim
            .trace()
            .iter()
            .any(|(t, i, what)| *t >= crashed_at && *i == promoted[0] && what == "BecameMaster");
        assert!(told, "seed {seed}: the driver is told to stop replicating");
        let new = sim.nodes()[promoted[0]].myself().id;
        let owners = agreed_owners(&sim).unwrap_or_else(|| panic!("seed {seed}: no agreement"));
        assert!(
            owners[..5461].iter().all(|o| *o == Some(new)),
            "seed {seed}: slots moved"
        );
        assert!(!owners.contains(&Some(old)), "seed {seed}");
        for i in 1..9 {
            assert!(sim.nodes()[i].state_ok(), "seed {seed}: node {i} ok again");
        }
        // The other replica follows the new master.
        let sibling = 9 - promoted[0];
        assert_eq!(
            sim.nodes()[sibling].myself().master,
            Some(new),
            "seed {seed}"
        );

        // The old master comes back: it learns it lost its slots and follows the new master.
        if seed % 10 == 0 {
            sim.restart(0);
            sim.run_for(4 * NODE_TIMEOUT);
            let back = sim.nodes()[0].myself();
            assert!(
                back.is_replica(),
                "seed {seed}: the old master is a replica"
            );
            assert_eq!(back.master, Some(new), "seed {seed}");
            assert!(
                agreed_owners(&sim).is_some(),
                "seed {seed}: one owner per slot"
            );
        }
    }
}
