//! The state machine's behaviour, pinned: every output of every node (messages by their
//! encoded bytes, connections, closes, nodes.conf saves, events, deliveries) in the scenarios
//! of the other tests, for a few seeds each, folded into one digest per run (`Sim::digest`).
//!
//! The redesign of `redis-cluster-state` must not change what a node does. A change that
//! does move a digest says in its commit which behaviour changed and why, and writes the new
//! value here in the same commit; a failing run prints the whole table to paste.

use redis_cluster_sim::{Faults, NODE_TIMEOUT, Sim};
use redis_cluster_state::{FailoverMode, Instant};
use redis_hash_slot::{Slot, SlotRange};

/// Formation as redis-cli creates a cluster, then quiet.
fn formation(seed: u64) -> Sim {
    let mut sim = Sim::create(3, 1, seed, |_, _| {});
    sim.run_for(10_000);
    sim
}

/// A master crashes, a replica takes over, the old master comes back as a replica.
fn failover(seed: u64) -> Sim {
    let mut sim = Sim::create(3, 2, seed, |_, _| {});
    sim.crash(1);
    sim.run_for(6 * NODE_TIMEOUT);
    sim.restart(1);
    sim.run_for(2 * NODE_TIMEOUT);
    sim
}

/// CLUSTER FAILOVER in its three modes, one after the other.
fn manual_failover(seed: u64) -> Sim {
    let mut sim = Sim::create(3, 1, seed, |_, _| {});
    let (master, replica) = (sim.nodes()[1].myself().id, sim.nodes()[4].myself().id);
    sim.node_mut(1)
        .set_replication_offset(&master, 100, Instant::ZERO);
    sim.node_mut(4)
        .set_replication_offset(&replica, 60, Instant::ZERO);
    let now = sim.now();
    let _ = sim
        .node_mut(4)
        .failover(FailoverMode::Default, Instant::from_millis(now));
    sim.run_for(1_000);
    let now = Instant::from_millis(sim.now());
    sim.node_mut(4).set_replication_offset(&replica, 100, now);
    sim.run_for(3_000);
    sim.crash(2);
    sim.run_for(200);
    let now = sim.now();
    let _ = sim
        .node_mut(5)
        .failover(FailoverMode::Force, Instant::from_millis(now));
    sim.run_for(2_000);
    sim.partition(&[0, 3]);
    let now = sim.now();
    let _ = sim
        .node_mut(3)
        .failover(FailoverMode::Takeover, Instant::from_millis(now));
    sim.run_for(1_000);
    sim.heal();
    sim.run_for(2 * NODE_TIMEOUT);
    sim
}

/// A master cut off in a minority, then the network healed.
fn partition(seed: u64) -> Sim {
    let mut sim = Sim::create(3, 1, seed, |_, _| {});
    sim.partition(&[0]);
    sim.run_for(4 * NODE_TIMEOUT);
    sim.heal();
    sim.run_for(2 * NODE_TIMEOUT);
    sim
}

/// A master orphaned of its replicas gets a spare one.
fn replica_migration(seed: u64) -> Sim {
    let mut sim = Sim::create(2, 2, seed, |_, _| {});
    sim.crash(3);
    sim.crash(5);
    sim.run_for(6 * NODE_TIMEOUT);
    sim
}

/// Colliding config epochs, then a slot moved by SETSLOT as redis-cli reshards.
fn epochs_and_migration(seed: u64) -> Sim {
    let mut sim = Sim::new(3, seed);
    for (i, (start, end)) in [(0, 5460), (5461, 10922), (10923, 16383)]
        .into_iter()
        .enumerate()
    {
        let range = SlotRange::new(
            Slot::new(start).expect("slot"),
            Slot::new(end).expect("slot"),
        )
        .expect("range");
        sim.node_mut(i)
            .add_slots(range, Instant::ZERO)
            .expect("free");
    }
    sim.meet(1, 0);
    sim.meet(2, 0);
    sim.run_for(10_000);
    let (from, to) = (
        sim.nodes()[0].myself().id.to_string(),
        sim.nodes()[1].myself().id.to_string(),
    );
    let command = |sim: &mut Sim, i: usize, args: &[&str]| {
        let now = sim.now();
        let reply = sim.node_mut(i).cluster_command(
            args,
            Default::default(),
            Instant::from_millis(now),
            |_| 0,
        );
        assert!(reply.is_some(), "{args:?}");
    };
    command(&mut sim, 1, &["SETSLOT", "100", "IMPORTING", &from]);
    command(&mut sim, 0, &["SETSLOT", "100", "MIGRATING", &to]);
    command(&mut sim, 1, &["SETSLOT", "100", "NODE", &to]);
    command(&mut sim, 0, &["SETSLOT", "100", "NODE", &to]);
    command(&mut sim, 2, &["BUMPEPOCH"]);
    command(&mut sim, 2, &["FORGET", &from]);
    sim.run_for(5_000);
    sim
}

/// Crashes, restarts, a partition and a lossy, reordering, duplicating network.
fn faults(seed: u64) -> Sim {
    let mut sim = Sim::create(3, 1, seed, |_, _| {});
    sim.set_faults(Faults {
        latency_min: 5,
        latency_max: 200,
        loss: 100,
        duplicate: 50,
    });
    sim.crash(2);
    sim.run_for(3_000);
    sim.partition(&[0, 4]);
    sim.run_for(8_000);
    sim.restart(2);
    sim.heal();
    sim.run_for(4_000);
    sim.set_faults(Faults::default());
    sim.run_for(3 * NODE_TIMEOUT);
    sim
}

/// A cluster loaded from nodes.conf files, as after a restart of every node.
fn formed(seed: u64) -> Sim {
    let mut sim = Sim::formed(4, 1, seed, 2_000);
    sim.run_for(10_000);
    sim.crash(0);
    sim.run_for(10_000);
    sim
}

type Scenario = (&'static str, fn(u64) -> Sim);

const SCENARIOS: [Scenario; 8] = [
    ("formation", formation),
    ("failover", failover),
    ("manual_failover", manual_failover),
    ("partition", partition),
    ("replica_migration", replica_migration),
    ("epochs_and_migration", epochs_and_migration),
    ("faults", faults),
    ("formed", formed),
];

const SEEDS: [u64; 3] = [0, 1, 7];

/// The digests, by scenario, then seed (in the order of [`SEEDS`]).
const EXPECTED: [(&str, [u64; 3]); 8] = [
    (
        "formation",
        [0x92bb5a1b2dad4493, 0x0c41a6c8628ca4df, 0xcfa27e3395abf937],
    ),
    (
        "failover",
        [0xaf11fdef1c39189e, 0xc0a984b5182f2fcc, 0x05ecb527947670fa],
    ),
    (
        "manual_failover",
        [0x6ad91e21953dfb63, 0x7763389886eb2afc, 0xe10dd028cea3da61],
    ),
    (
        "partition",
        [0x925b7d53c9d2c886, 0x2fc0c520a14f1d0b, 0xe69f00eb616d1d10],
    ),
    (
        "replica_migration",
        [0x94205a7f54a9f7a7, 0xdc9df635a8f295b1, 0x371cdf68f0673f48],
    ),
    (
        "epochs_and_migration",
        [0x539d97a142b97300, 0xbbae49666df6be07, 0x7a849f3f9e80f956],
    ),
    (
        "faults",
        [0x5070bbd169785393, 0xc77ae7b6e4af6839, 0xb93e1bda2c112cc0],
    ),
    (
        "formed",
        [0x4c634e054e5fc45d, 0x1c0d35714c5d707a, 0x0b363eb27abf5302],
    ),
];

#[test]
fn every_output_of_every_scenario_is_as_recorded() {
    let mut table = String::new();
    let mut wrong = Vec::new();
    for ((name, run), (expected_name, expected)) in SCENARIOS.iter().zip(EXPECTED) {
        assert_eq!(
            *name, expected_name,
            "the two tables list the same scenarios"
        );
        let digests: Vec<u64> = SEEDS.iter().map(|&seed| run(seed).digest()).collect();
        for ((seed, got), want) in SEEDS.iter().zip(&digests).zip(expected) {
            if *got != want {
                wrong.push(format!(
                    "{name} seed {seed}: {got:#018x}, recorded {want:#018x}"
                ));
            }
        }
        let cells: Vec<String> = digests.iter().map(|d| format!("{d:#018x}")).collect();
        table.push_str(&format!("    (\"{name}\", [{}]),\n", cells.join(", ")));
    }
    assert!(
        wrong.is_empty(),
        "{}\n\nthe table of this run:\n{table}",
        wrong.join("\n")
    );
}

#[test]
fn the_digest_tells_runs_apart() {
    // The digest is not blind: another seed, or the same seed run longer, differs.
    let a = formation(0).digest();
    assert_eq!(a, formation(0).digest(), "the same run, the same digest");
    assert_ne!(a, formation(1).digest());
    let mut longer = formation(0);
    longer.run_for(1_000);
    assert_ne!(a, longer.digest());
}
