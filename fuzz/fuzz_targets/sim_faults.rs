//! The structured target for the state machine: a formed six-node cluster under a fault
//! schedule read from the input (crashes, restarts, partitions, healing, lossy and slow
//! networks, time). Nothing panics, and no node's current epoch ever goes back.
//!
//! Forming the cluster is most of an input's cost: the formed cluster of each seed is built
//! once per process and cloned (a clone carries the random generator's state, so an input
//! runs as it would on a cluster formed for it alone).
#![no_main]

use std::sync::Mutex;

use libfuzzer_sys::fuzz_target;
use redis_cluster_sim::{Faults, Sim};

/// The formed cluster of each seed byte, once one was asked for.
static FORMED: Mutex<Vec<Option<Sim>>> = Mutex::new(Vec::new());

/// A formed cluster of three masters with a replica each, for `seed`.
fn formed(seed: u8) -> Sim {
    let mut cache = FORMED
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if cache.is_empty() {
        cache.resize(256, None);
    }
    cache[usize::from(seed)]
        .get_or_insert_with(|| {
            let mut sim = Sim::create(3, 1, u64::from(seed), |_, _| {});
            sim.set_tracing(false);
            sim
        })
        .clone()
}

fuzz_target!(|input: &[u8]| {
    let Some((&seed, ops)) = input.split_first() else {
        return;
    };
    let mut sim = formed(seed);
    let mut last: Vec<u64> = sim.nodes().iter().map(|n| n.current_epoch()).collect();
    for op in ops.chunks(2).take(12) {
        let [kind, arg] = *op else { break };
        let node = usize::from(arg) % 6;
        match kind % 6 {
            0 => sim.crash(node),
            1 => sim.restart(node),
            2 => {
                let group: Vec<usize> = (0..6).filter(|i| arg & (1 << i) != 0).collect();
                sim.partition(&group);
            }
            3 => sim.heal(),
            4 => sim.set_faults(Faults {
                latency_min: 1,
                latency_max: 1 + u64::from(arg),
                loss: u16::from(arg % 64) * 3,
                duplicate: u16::from(arg / 64) * 50,
            }),
            _ => sim.run_for(u64::from(arg) * 40),
        }
        let now: Vec<u64> = sim.nodes().iter().map(|n| n.current_epoch()).collect();
        for (before, after) in last.iter().zip(&now) {
            assert!(after >= before, "a current epoch went back");
        }
        last = now;
    }
});
