//! The load-aware rebalance planner: balanced whenever a balanced plan exists (checked by
//! brute force on small cases), as cheap as the cheapest within 10%, no slot moved twice,
//! no master emptied unless asked.

use proptest::prelude::*;
use redis_cluster_state::rebalance::{Plan, PlanError, PlanOptions, SlotLoad, plan};

/// Whether `loads` lie within the bounds of `options`, by the same exact arithmetic as the
/// definition: share / ratio ≤ load ≤ share × ratio, share = total × capacity / capacities.
fn within(loads: &[u64], options: &PlanOptions) -> bool {
    let total: u128 = loads.iter().map(|&l| u128::from(l)).sum();
    let capacity: u128 = options.capacities.iter().map(|&c| u128::from(c)).sum();
    let ratio = u128::from(options.ratio_permille);
    loads.iter().zip(&options.capacities).all(|(&load, &c)| {
        let (load, c) = (u128::from(load), u128::from(c));
        load * capacity * ratio >= total * c * 1000 && load * capacity * 1000 <= total * c * ratio
    })
}

/// The cheapest balanced plan, trying every owner for every slot with load (slots without
/// load stay, as the planner keeps them), or `None`.
fn brute_force(slots: &[SlotLoad], options: &PlanOptions) -> Option<u64> {
    let masters = options.capacities.len();
    let loaded: Vec<usize> = (0..slots.len())
        .filter(|&s| slots[s].owner.is_some() && slots[s].load > 0)
        .collect();
    let mut best: Option<u64> = None;
    let mut choice = vec![0usize; loaded.len()];
    loop {
        let mut owners: Vec<Option<usize>> = slots.iter().map(|s| s.owner).collect();
        for (&slot, &to) in loaded.iter().zip(&choice) {
            owners[slot] = Some(to);
        }
        let mut loads = vec![0u64; masters];
        let mut counts = vec![0usize; masters];
        for (s, owner) in slots.iter().zip(&owners) {
            if let Some(o) = owner {
                loads[*o] += s.load;
                counts[*o] += 1;
            }
        }
        let kept = (0..masters).all(|m| {
            let had = slots.iter().any(|s| s.owner == Some(m));
            !had || counts[m] > 0 || options.capacities[m] == 0
        });
        if kept && within(&loads, options) {
            let cost = slots
                .iter()
                .zip(&owners)
                .filter(|(s, o)| s.owner != **o)
                .map(|(s, _)| s.cost)
                .sum();
            best = Some(best.map_or(cost, |b: u64| b.min(cost)));
        }
        // The next choice, as a number in base `masters`.
        let mut at = 0;
        loop {
            if at == choice.len() {
                return best;
            }
            choice[at] += 1;
            if choice[at] < masters {
                break;
            }
            choice[at] = 0;
            at += 1;
        }
    }
}

/// What every plan must satisfy, balanced or not.
fn check_shape(slots: &[SlotLoad], options: &PlanOptions, plan: &Plan) {
    let masters = options.capacities.len();
    let mut owners: Vec<Option<usize>> = slots.iter().map(|s| s.owner).collect();
    let mut seen = std::collections::HashSet::new();
    for m in &plan.moves {
        assert!(seen.insert(m.slot), "slot {} moved twice", m.slot);
        assert_eq!(
            slots[m.slot].owner,
            Some(m.from),
            "a move from a master that lacks it"
        );
        assert_ne!(m.from, m.to);
        assert!(slots[m.slot].load > 0, "a slot without load moved");
        owners[m.slot] = Some(m.to);
    }
    let mut after = vec![0u64; masters];
    let mut counts = vec![0usize; masters];
    for (s, owner) in slots.iter().zip(&owners) {
        if let Some(o) = owner {
            after[*o] += s.load;
            counts[*o] += 1;
        }
    }
    assert_eq!(plan.after, after);
    for (m, &count) in counts.iter().enumerate() {
        let had = slots.iter().any(|s| s.owner == Some(m));
        if had && options.capacities[m] > 0 {
            assert!(count > 0, "master {m} emptied without being asked");
        }
    }
    let cost: u64 = plan.moves.iter().map(|m| slots[m.slot].cost).sum();
    assert_eq!(plan.cost, cost);
    assert_eq!(plan.balanced, within(&after, options));
}

fn small_case() -> impl Strategy<Value = (Vec<SlotLoad>, PlanOptions)> {
    (2usize..=3, 1usize..=7).prop_flat_map(|(masters, n)| {
        let slot = (0..masters, 0u64..40, 1u64..40).prop_map(|(owner, load, cost)| SlotLoad {
            owner: Some(owner),
            load,
            cost,
        });
        let capacities = prop::collection::vec(0u32..=3, masters)
            .prop_filter("a master with capacity", |c| c.iter().any(|&c| c > 0));
        let ratio = prop::sample::select(vec![1000u32, 1100, 1200, 1500, 2000]);
        (prop::collection::vec(slot, n), capacities, ratio).prop_map(
            |(slots, capacities, ratio_permille)| {
                (
                    slots,
                    PlanOptions {
                        ratio_permille,
                        capacities,
                    },
                )
            },
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn small_plans_are_balanced_when_possible_and_near_the_cheapest(
        (slots, options) in small_case()
    ) {
        let found = plan(&slots, &options).expect("valid options");
        check_shape(&slots, &options, &found);
        if let Some(optimum) = brute_force(&slots, &options) {
            prop_assert!(found.balanced, "a balanced plan of cost {optimum} exists: {found:?}");
            // Within 10% of the optimum.
            prop_assert!(found.cost * 10 <= optimum * 11, "{} against {optimum}", found.cost);
        } else {
            prop_assert!(!found.balanced);
        }
    }

    /// Many slots, each small against a master's share: the greedy search alone (too many
    /// assignments for the exact one) must balance them.
    #[test]
    fn many_small_slots_balance(
        masters in 2usize..=6,
        owners in prop::collection::vec(0usize..6, 300..800),
        loads in prop::collection::vec(0u64..100, 800),
        skew in 0usize..6,
    ) {
        // Skewed: one master owns every third slot more.
        let slots: Vec<SlotLoad> = owners
            .iter()
            .enumerate()
            .map(|(i, &o)| SlotLoad {
                owner: Some(if i % 3 == 0 { skew % masters } else { o % masters }),
                load: loads[i],
                cost: loads[i] + 1,
            })
            .collect();
        let options = PlanOptions::even(masters, 1100);
        let found = plan(&slots, &options).expect("valid options");
        check_shape(&slots, &options, &found);
        prop_assert!(found.balanced, "{:?} → {:?}", found.before, found.after);
        prop_assert!(found.stuck.is_empty());
    }
}

#[test]
fn a_master_with_capacity_zero_is_emptied_and_the_rest_share_its_load() {
    let slots: Vec<SlotLoad> = (0..30)
        .map(|i| SlotLoad {
            owner: Some(i % 3),
            load: 10,
            cost: 10,
        })
        .collect();
    let options = PlanOptions {
        ratio_permille: 1050,
        capacities: vec![1, 1, 0],
    };
    let found = plan(&slots, &options).expect("valid options");
    check_shape(&slots, &options, &found);
    assert!(found.balanced);
    assert_eq!(found.after, [150, 150, 0]);
    assert!(found.moves.iter().all(|m| m.from == 2));
}

#[test]
fn one_slot_heavier_than_any_share_is_named_stuck() {
    let mut slots: Vec<SlotLoad> = (0..90)
        .map(|i| SlotLoad {
            owner: Some(i % 3),
            load: 1,
            cost: 1,
        })
        .collect();
    slots[7].load = 1000;
    let found = plan(&slots, &PlanOptions::even(3, 1200)).expect("valid options");
    assert!(!found.balanced);
    assert_eq!(found.stuck, [7]);
}

/// The skew of `cluster-doctor`'s test, in keys: 150 000 keys over the slots split
/// 8000 / 4000 / 4384, one slot with a tag of 50 000 keys, one with a 10 MB key.
#[test]
fn the_seeded_cluster_is_balanced_without_moving_the_tag_or_the_big_key() {
    let owner = |slot: usize| match slot {
        0..8000 => 0,
        8000..12000 => 1,
        _ => 2,
    };
    let mut slots: Vec<SlotLoad> = (0..16384)
        .map(|slot| {
            let keys = 150_000 / 16384 + u64::from(slot < 150_000 % 16384);
            SlotLoad {
                owner: Some(owner(slot)),
                load: keys,
                cost: keys * 100,
            }
        })
        .collect();
    let (tag, big) = (4000, 12500);
    slots[tag].load += 50_000;
    slots[tag].cost += 50_000 * 100;
    slots[big].cost += 10 << 20;
    let found = plan(&slots, &PlanOptions::even(3, 1200)).expect("valid options");
    check_shape(&slots, &PlanOptions::even(3, 1200), &found);
    assert!(found.balanced, "{:?}", found.after);
    let max = *found.after.iter().max().unwrap_or(&0) as f64;
    let mean = found.after.iter().sum::<u64>() as f64 / 3.0;
    assert!(max / mean < 1.2, "{max} / {mean}");
    assert!(found.moves.iter().all(|m| m.slot != tag && m.slot != big));
}

#[test]
fn bad_options_are_refused() {
    let slots = [SlotLoad {
        owner: Some(2),
        load: 1,
        cost: 1,
    }];
    assert_eq!(
        plan(&slots, &PlanOptions::even(2, 1200)),
        Err(PlanError::Owner {
            slot: 0,
            owner: 2,
            masters: 2
        })
    );
    assert_eq!(
        plan(&slots, &PlanOptions::even(3, 999)),
        Err(PlanError::Ratio(999))
    );
    let none = PlanOptions {
        ratio_permille: 1200,
        capacities: vec![0, 0, 0],
    };
    assert_eq!(plan(&slots, &none), Err(PlanError::NoCapacity));
}

#[test]
fn open_slots_finish_once_keys_moved_and_roll_back_otherwise() {
    use redis_cluster_state::rebalance::{Closing, OpenSlot};

    let open = |owner, migrating: &[(usize, usize)], importing: &[(usize, usize)]| OpenSlot {
        owner,
        migrating: migrating.to_vec(),
        importing: importing.to_vec(),
    };
    let finish = Closing::Finish { from: 0, to: 1 };
    // Both marks: finished, without asking where the keys are.
    let both = open(Some(0), &[(0, 1)], &[(1, 0)]);
    assert_eq!(both.closing(|_| unreachable!("not asked")), finish);
    // The source's mark only: finished if the target holds keys of the slot.
    let source = open(Some(0), &[(0, 1)], &[]);
    assert_eq!(source.closing(|to| to == 1), finish);
    assert_eq!(source.closing(|_| false), Closing::RollBack);
    // The importer's mark only: the same, the pair read from it.
    let importer = open(Some(0), &[], &[(1, 0)]);
    assert_eq!(importer.closing(|to| to == 1), finish);
    assert_eq!(importer.closing(|_| false), Closing::RollBack);
    // The target already serves the slot (SETSLOT NODE reached it): finished.
    let served = open(Some(1), &[(0, 1)], &[]);
    assert_eq!(served.closing(|_| false), finish);
    assert_eq!(open(Some(0), &[], &[]).closing(|_| true), Closing::RollBack);
}
