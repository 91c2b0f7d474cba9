//! Scenario 3: a master cut off from the rest reports the cluster down after the node timeout;
//! the majority replaces it; after healing, the old master becomes a replica of the new one
//! (through UPDATE and the slot claims), and once quiet no slot has two owners.

use redis_cluster_sim::{NODE_TIMEOUT, Sim};
use redis_hash_slot::Slot;

fn cluster(seed: u64) -> Sim {
    Sim::create(3, 1, seed, |_, _| {})
}

#[test]
fn the_minority_master_goes_down_and_comes_back_as_a_replica() {
    for seed in 0..10 {
        let mut sim = cluster(seed);
        assert!(sim.nodes().iter().all(|n| n.state_ok()), "seed {seed}");
        let old = sim.nodes()[0].myself().id;
        sim.partition(&[0]);
        sim.run_for(NODE_TIMEOUT / 2);
        assert!(
            sim.nodes()[0].state_ok(),
            "seed {seed}: not down before the timeout"
        );
        sim.run_for(2 * NODE_TIMEOUT);
        assert!(
            !sim.nodes()[0].state_ok(),
            "seed {seed}: the minority is down"
        );
        let logged = sim
            .trace()
            .iter()
            .any(|(_, i, what)| *i == 0 && what == "StateChanged { ok: false }");
        assert!(
            logged,
            "seed {seed}: `Cluster state changed: fail` for the driver to log"
        );
        sim.run_for(2 * NODE_TIMEOUT);
        let new = sim.nodes()[3].myself();
        assert!(new.is_master(), "seed {seed}: the replica took over");
        let new = new.id;
        assert!(
            (1..6).all(|i| sim.nodes()[i].state_ok()),
            "seed {seed}: majority ok"
        );

        sim.heal();
        let healed = sim.now();
        sim.run_for(4 * NODE_TIMEOUT);
        // Its stale claims were answered with UPDATE messages.
        let updates = sim
            .trace()
            .iter()
            .filter(|(t, to, what)| *t >= healed && *to == 0 && what.starts_with("UPDATE"))
            .count();
        assert!(updates > 0, "seed {seed}: no UPDATE reached the old master");
        let back = sim.nodes()[0].myself();
        assert!(
            back.is_replica(),
            "seed {seed}: the old master is a replica"
        );
        assert_eq!(back.master, Some(new), "seed {seed}");
        // Quiet: one owner per slot, the same everywhere.
        for n in 0..16384 {
            let slot = Slot::new(n).expect("slot");
            let owner = sim.nodes()[1].owner(slot).map(|o| o.id);
            assert!(
                owner.is_some() && owner != Some(old),
                "seed {seed}: slot {n}"
            );
            for node in sim.nodes() {
                assert_eq!(
                    node.owner(slot).map(|o| o.id),
                    owner,
                    "seed {seed}: slot {n}"
                );
            }
        }
        assert!(
            sim.nodes().iter().all(|n| n.state_ok()),
            "seed {seed}: all ok"
        );
    }
}
