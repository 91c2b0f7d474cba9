//! Scenario 7: random fault schedules (crashes, restarts, partitions, healing, lost, delayed,
//! reordered and duplicated messages). Whatever happened, once everything is healed and
//! quiet, all nodes agree on every slot's owner; no node's current epoch ever went back;
//! nothing panicked.
//!
//! And the cron's shortcut: a node walks its table only when the table changed or a node's
//! time came. The same schedules run with a walk on every tick give the same trace, and so
//! do runs with slow links and a short timeout, where a late PONG must bring the walk
//! forward.

use proptest::prelude::*;
use redis_cluster_sim::{Faults, NODE_TIMEOUT, Sim};
use redis_hash_slot::Slot;

#[derive(Clone, Debug)]
enum Op {
    Crash(usize),
    Restart(usize),
    Partition(Vec<usize>),
    Heal,
    Network(Faults),
    Run(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0usize..6).prop_map(Op::Crash),
        (0usize..6).prop_map(Op::Restart),
        proptest::collection::vec(0usize..6, 1..3).prop_map(Op::Partition),
        Just(Op::Heal),
        (1u64..50, 0u64..300, 0u16..200, 0u16..200).prop_map(|(min, spread, loss, duplicate)| {
            Op::Network(Faults {
                latency_min: min,
                latency_max: min + spread,
                loss,
                duplicate,
            })
        }),
        (100u64..8_000).prop_map(Op::Run),
    ]
}

fn apply(sim: &mut Sim, op: &Op) {
    match op {
        Op::Crash(i) => sim.crash(*i),
        Op::Restart(i) => sim.restart(*i),
        Op::Partition(group) => sim.partition(group),
        Op::Heal => sim.heal(),
        Op::Network(faults) => sim.set_faults(*faults),
        Op::Run(ms) => sim.run_for(*ms),
    }
}

fn epochs(sim: &Sim) -> Vec<u64> {
    sim.nodes().iter().map(|n| n.current_epoch()).collect()
}

/// Three masters and three replicas, formed as redis-cli forms them.
fn cluster(seed: u64) -> Sim {
    Sim::create(3, 1, seed, |_, _| {})
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn after_any_faults_and_quiet_everyone_agrees(
        seed in 0u64..1_000,
        ops in proptest::collection::vec(op(), 1..6),
    ) {
        let mut sim = cluster(seed);
        let mut last = epochs(&sim);
        for op in &ops {
            apply(&mut sim, op);
            let now = epochs(&sim);
            for (i, (before, after)) in last.iter().zip(&now).enumerate() {
                prop_assert!(after >= before, "node {}'s current epoch went back", i);
            }
            last = now;
        }
        // Heal everything and let it settle.
        sim.heal();
        sim.set_faults(Faults::default());
        for i in 0..6 {
            sim.restart(i);
        }
        sim.run_for(6 * NODE_TIMEOUT);
        for (i, (before, after)) in last.iter().zip(&epochs(&sim)).enumerate() {
            prop_assert!(after >= before, "node {}'s current epoch went back", i);
        }
        for n in (0..16384).step_by(61).chain([16383]) {
            let slot = Slot::new(n).expect("slot");
            let owner = sim.nodes()[0].owner(slot).map(|o| o.id);
            for (i, node) in sim.nodes().iter().enumerate() {
                prop_assert_eq!(node.owner(slot).map(|o| o.id), owner, "slot {} on node {}", n, i);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(40))]

    #[test]
    fn walking_only_when_needed_changes_nothing(
        seed in 0u64..1_000,
        ops in proptest::collection::vec(op(), 1..6),
    ) {
        let run = |every_tick: bool| {
            let mut sim = cluster(seed);
            sim.set_walk_every_tick(every_tick);
            for op in &ops {
                apply(&mut sim, op);
            }
            sim.heal();
            sim.set_faults(Faults::default());
            sim.run_for(2 * NODE_TIMEOUT);
            let nodes: Vec<String> = sim.nodes().iter().map(|n| n.cluster_nodes()).collect();
            (sim.trace().to_vec(), nodes)
        };
        let (trace, nodes) = run(false);
        let (every_trace, every_nodes) = run(true);
        prop_assert!(trace.len() > 100, "a run that did something");
        prop_assert_eq!(trace, every_trace);
        prop_assert_eq!(nodes, every_nodes);
    }
}

/// A PONG that arrives after the cron's walk following its PING leaves that walk's due time
/// for the node at its PFAIL check, though the half-timeout ping is due sooner; the node
/// folds the new due time in when it writes the pong time. With a short timeout and slow
/// links there is no other change to bring the walk forward: without the fold, most of
/// these runs ping later than a walk on every tick does.
#[test]
fn a_late_pong_brings_the_next_walk_forward() {
    for seed in 0..10 {
        let run = |every_tick: bool| {
            let mut sim = Sim::formed(1, 1, seed, 1_000);
            sim.set_walk_every_tick(every_tick);
            sim.set_faults(Faults {
                latency_min: 120,
                latency_max: 300,
                loss: 0,
                duplicate: 0,
            });
            sim.run_for(30_000);
            sim.trace().to_vec()
        };
        let trace = run(false);
        assert!(trace.len() > 100, "seed {seed}: a run that did something");
        assert_eq!(trace, run(true), "seed {seed}");
    }
}
