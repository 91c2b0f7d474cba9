//! Replica migration (semantics 4.3): when a master loses its last healthy replica, the
//! replica with the smallest id among those of the masters with the most replicas moves to
//! it, once it has been orphaned for more than five seconds; the others stay.

use redis_cluster_sim::{NODE_TIMEOUT, Sim};

#[test]
fn a_spare_replica_moves_to_an_orphaned_master() {
    for seed in 0..5 {
        // Masters 0 and 1; replicas 2 and 4 follow 0, replicas 3 and 5 follow 1.
        let mut sim = Sim::create(2, 2, seed, |_, _| {});
        let (m0, m1) = (sim.nodes()[0].myself().id, sim.nodes()[1].myself().id);
        sim.crash(3);
        sim.crash(5);
        sim.run_for(6 * NODE_TIMEOUT);
        let moved: Vec<usize> = [2, 4]
            .into_iter()
            .filter(|&r| sim.nodes()[r].myself().master == Some(m1))
            .collect();
        assert_eq!(moved.len(), 1, "seed {seed}: exactly one replica migrates");
        let stayed = 6 - moved[0];
        assert_eq!(sim.nodes()[stayed].myself().master, Some(m0), "seed {seed}");
        let smallest = [2, 4]
            .into_iter()
            .min_by_key(|&r| sim.nodes()[r].myself().id)
            .expect("two");
        assert_eq!(moved[0], smallest, "seed {seed}: the smallest id moves");
        // Everyone learns it from the moved replica's headers.
        let moved_id = sim.nodes()[moved[0]].myself().id;
        for i in [0, 1, 2, 4] {
            let seen = sim.nodes()[i].node(&moved_id).and_then(|n| n.master);
            assert_eq!(seen, Some(m1), "seed {seed}: node {i}");
        }
    }
}
