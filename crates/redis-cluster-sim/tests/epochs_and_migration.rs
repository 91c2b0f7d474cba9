//! Scenario 6: a configEpoch collision between masters resolves to distinct epochs.
//! Scenario 5: a slot migration driven as redis-cli reshard drives it; the redirects while it
//! is open, and SETSLOT NODE converging on every node.

use redis_cluster_sim::Sim;
use redis_cluster_state::{Decision, Instant, Request};
use redis_hash_slot::{Slot, SlotRange, key_slot};

fn range(start: u16, end: u16) -> SlotRange {
    SlotRange::new(
        Slot::new(start).expect("slot"),
        Slot::new(end).expect("slot"),
    )
    .expect("range")
}

#[test]
fn colliding_config_epochs_become_distinct() {
    for seed in 0..10 {
        // Three fresh masters with config epoch 0 each, met without SET-CONFIG-EPOCH.
        let mut sim = Sim::new(3, seed);
        for (i, (start, end)) in [(0, 5460), (5461, 10922), (10923, 16383)]
            .into_iter()
            .enumerate()
        {
            sim.node_mut(i)
                .add_slots(range(start, end), Instant::ZERO)
                .expect("free");
        }
        sim.meet(1, 0);
        sim.meet(2, 0);
        sim.run_for(10_000);
        let mut epochs: Vec<u64> = sim
            .nodes()
            .iter()
            .map(|n| n.myself().config_epoch)
            .collect();
        epochs.sort_unstable();
        epochs.dedup();
        assert_eq!(epochs.len(), 3, "seed {seed}: distinct epochs {epochs:?}");
        // Every node records the others' epochs as they are.
        for node in sim.nodes() {
            for other in sim.nodes() {
                let seen = node.node(&other.myself().id).expect("known").config_epoch;
                assert_eq!(seen, other.myself().config_epoch, "seed {seed}");
            }
        }
    }
}

#[test]
fn a_slot_migrates_with_the_redirects_of_the_table() {
    let mut sim = Sim::new(3, 3);
    for (i, (start, end)) in [(0, 5460), (5461, 10922), (10923, 16383)]
        .into_iter()
        .enumerate()
    {
        sim.node_mut(i)
            .add_slots(range(start, end), Instant::ZERO)
            .expect("free");
        sim.node_mut(i)
            .set_config_epoch(i as u64 + 1, Instant::ZERO)
            .expect("alone");
    }
    sim.meet(1, 0);
    sim.meet(2, 0);
    sim.run_for(5_000);
    // "bar" is in slot 5061, node 0's; it moves to node 1.
    let slot = key_slot(b"bar");
    assert_eq!(slot.get(), 5061);
    let (source, target) = (sim.nodes()[0].myself().id, sim.nodes()[1].myself().id);
    // IMPORTING on the target first, then MIGRATING on the source (redis-cli's order).
    let line = |sim: &mut Sim, i: usize, args: &[&str]| {
        let reply = sim
            .node_mut(i)
            .cluster_command(args, Default::default(), Instant::ZERO, |_| 0);
        match reply {
            Some(redis_resp::Frame::SimpleString(s)) => String::from_utf8_lossy(&s).into_owned(),
            other => format!("{other:?}"),
        }
    };
    let (s, t) = (source.to_string(), target.to_string());
    assert_eq!(
        line(&mut sim, 1, &["SETSLOT", "5061", "IMPORTING", &s]),
        "OK"
    );
    assert_eq!(
        line(&mut sim, 0, &["SETSLOT", "5061", "MIGRATING", &t]),
        "OK"
    );

    let keys = [b"bar".as_slice()];
    let source_view = &sim.nodes()[0];
    assert!(
        source_view
            .route(&Request::new(&keys), |_| true)
            .is_served()
    );
    assert_eq!(
        source_view
            .route(&Request::new(&keys), |_| false)
            .to_string(),
        "ASK 5061 127.0.0.1:7001"
    );
    let target_view = &sim.nodes()[1];
    assert_eq!(
        target_view
            .route(&Request::new(&keys), |_| false)
            .to_string(),
        "MOVED 5061 127.0.0.1:7000"
    );
    let asking = Request {
        asking: true,
        ..Request::new(&keys)
    };
    assert_eq!(target_view.route(&asking, |_| false), Decision::Serve);

    // Keys moved; NODE on the target first (it bumps its epoch), then the source.
    assert_eq!(line(&mut sim, 1, &["SETSLOT", "5061", "NODE", &t]), "OK");
    assert_eq!(line(&mut sim, 0, &["SETSLOT", "5061", "NODE", &t]), "OK");
    sim.run_for(5_000);
    for (i, node) in sim.nodes().iter().enumerate() {
        assert_eq!(node.owner(slot).map(|o| o.id), Some(target), "node {i}");
        assert!(node.migrating_to(slot).is_none() && node.importing_from(slot).is_none());
    }
    // The third node learned it from the bus: MOVED to the new owner.
    assert_eq!(
        sim.nodes()[2]
            .route(&Request::new(&keys), |_| true)
            .to_string(),
        "MOVED 5061 127.0.0.1:7001"
    );
    let epochs: Vec<u64> = sim
        .nodes()
        .iter()
        .map(|n| n.myself().config_epoch)
        .collect();
    assert!(
        epochs[1] > 3,
        "the importing node bumped its epoch: {epochs:?}"
    );
}
