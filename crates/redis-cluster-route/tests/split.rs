//! Routes, splits and merges: case by case, and for random MGET / MSET / DEL / EXISTS /
//! UNLINK / TOUCH over random keys, split → each part run on a model keyspace → merge equals
//! the whole command run on one model keyspace (reply and resulting keyspace).

use std::collections::HashMap;

use proptest::prelude::*;
use redis_cluster_route::{CommandTable, Merge, MergeError, ResponsePolicy, Route};
use redis_hash_slot::key_slot;
use redis_resp::Frame;

const TABLE: CommandTable = CommandTable::REDIS_7_0;

type Reply = Frame<Vec<u8>>;

fn route(line: &str) -> Route {
    TABLE
        .route(&line.split(' ').collect::<Vec<_>>())
        .expect("a known command")
}

#[test]
fn routes_follow_keys_and_tips() {
    assert_eq!(route("GET foo"), Route::Slot(key_slot(b"foo")));
    assert_eq!(route("MGET {a}1 {a}2"), Route::Slot(key_slot(b"a")));
    assert!(matches!(route("MGET a b"), Route::Split(_)));
    assert!(matches!(route("MSET a 1 b 2"), Route::Split(_)));
    assert_eq!(route("SUNION a b"), Route::CrossSlot, "not multi_shard");
    assert_eq!(
        route("DBSIZE"),
        Route::AllShards(Merge::Policy(ResponsePolicy::AggSum))
    );
    assert_eq!(route("KEYS *"), Route::AllShards(Merge::Aggregate));
    assert_eq!(
        route("CONFIG SET maxmemory 0"),
        Route::AllNodes(Merge::Policy(ResponsePolicy::AllSucceeded))
    );
    assert_eq!(
        route("SCRIPT EXISTS a b"),
        Route::AllShards(Merge::Policy(ResponsePolicy::AggLogicalAnd))
    );
    assert_eq!(route("SCAN 0"), Route::Special);
    assert_eq!(route("ECHO hi"), Route::Any);
    assert!(TABLE.route(&["NOSUCH"]).is_err());
}

#[test]
fn a_split_keeps_each_key_with_its_arguments() {
    let argv = ["MSET", "a", "1", "b", "2", "{a}x", "3"];
    let Route::Split(split) = TABLE.route(&argv).expect("known") else {
        panic!("a split")
    };
    let parts: Vec<Vec<&str>> = (0..split.parts().len())
        .map(|p| split.argv(p, &argv).copied().collect())
        .collect();
    assert_eq!(
        parts,
        [vec!["MSET", "a", "1", "{a}x", "3"], vec!["MSET", "b", "2"]]
    );
    assert_eq!(split.parts()[0].slot, key_slot(b"a"));
    assert_eq!(split.parts()[0].groups, [0, 2]);
    // MSET with a key without its value cannot be split: CROSSSLOT, as a node answers.
    assert_eq!(TABLE.route(&["MSET", "a", "1", "b"]), Ok(Route::CrossSlot));
}

#[test]
fn merges_follow_the_response_policy() {
    let int = Frame::<&str>::Integer;
    let sum = Merge::Policy(ResponsePolicy::AggSum);
    assert_eq!(sum.merge(vec![int(2), int(3)]), Ok(int(5)));
    let error = Frame::SimpleError("MOVED 1 127.0.0.1:7000");
    assert_eq!(sum.merge(vec![int(2), error.clone()]), Ok(error.clone()));
    assert_eq!(
        sum.merge(vec![int(2), Frame::SimpleString("OK")]),
        Err(MergeError::Unexpected(sum))
    );
    let all = Merge::Policy(ResponsePolicy::AllSucceeded);
    assert_eq!(
        all.merge(vec![Frame::SimpleString("OK"), Frame::SimpleString("OK")]),
        Ok(Frame::SimpleString("OK"))
    );
    assert_eq!(
        all.merge(vec![Frame::SimpleString("OK"), error.clone()]),
        Ok(error.clone())
    );
    let one = Merge::Policy(ResponsePolicy::OneSucceeded);
    assert_eq!(
        one.merge(vec![error.clone(), Frame::SimpleString("OK")]),
        Ok(Frame::SimpleString("OK"))
    );
    assert_eq!(one.merge(vec![error.clone()]), Ok(error));
    let and = Merge::Policy(ResponsePolicy::AggLogicalAnd);
    assert_eq!(
        and.merge(vec![
            Frame::Array(vec![int(1), int(1)]),
            Frame::Array(vec![int(1), int(0)])
        ]),
        Ok(Frame::Array(vec![int(1), int(0)]))
    );
    let min = Merge::Policy(ResponsePolicy::AggMin);
    assert_eq!(min.merge(vec![int(2), int(0), int(1)]), Ok(int(0)));
    let max = Merge::Policy(ResponsePolicy::AggMax);
    assert_eq!(max.merge(vec![int(2), int(0), int(1)]), Ok(int(2)));
    assert_eq!(
        Merge::Aggregate.merge(vec![
            Frame::Array(vec![Frame::BulkString("a")]),
            Frame::Array(vec![Frame::BulkString("b")])
        ]),
        Ok(Frame::Array(vec![
            Frame::BulkString("a"),
            Frame::BulkString("b")
        ]))
    );
    assert_eq!(
        Merge::Policy(ResponsePolicy::Special).merge(vec![int(1)]),
        Err(MergeError::Special)
    );
}

#[test]
fn a_by_key_merge_takes_only_arrays_of_each_parts_length() {
    let bulk = Frame::BulkString;
    let unexpected = Err(MergeError::Unexpected(Merge::ByKey));
    let error = Frame::SimpleError("ERR x");
    // One part, every key on one shard: its reply, as it is, when it has a value a key.
    let one = TABLE.split_by(&["MGET", "a", "b"], |_| 0).expect("splits");
    let reply = Frame::Array(vec![bulk("1"), Frame::NullBulkString]);
    assert_eq!(one.merge(vec![reply.clone()]), Ok(reply));
    assert_eq!(one.merge(vec![Frame::Array(vec![bulk("1")])]), unexpected);
    assert_eq!(one.merge(vec![bulk("1")]), unexpected);
    assert_eq!(one.merge(vec![error.clone()]), Ok(error.clone()));
    assert_eq!(
        one.merge(Vec::<Frame<&str>>::new()),
        Err(MergeError::Count {
            expected: 1,
            got: 0
        })
    );
    // Two parts: values back in their keys' places; a short part or a non-array refused.
    let two = TABLE
        .split_by(&["MGET", "a", "bb", "c"], |key| key.len())
        .expect("splits");
    assert_eq!(
        two.merge(vec![
            Frame::Array(vec![bulk("a"), bulk("c")]),
            Frame::Array(vec![bulk("bb")])
        ]),
        Ok(Frame::Array(vec![bulk("a"), bulk("bb"), bulk("c")]))
    );
    assert_eq!(
        two.merge(vec![
            Frame::Array(vec![bulk("a")]),
            Frame::Array(vec![bulk("bb")])
        ]),
        unexpected
    );
    assert_eq!(
        two.merge(vec![Frame::Array(vec![bulk("a"), bulk("c")]), bulk("bb")]),
        unexpected
    );
    assert_eq!(
        two.merge(vec![
            Frame::Array(vec![bulk("a"), bulk("c")]),
            error.clone()
        ]),
        Ok(error)
    );
}

/// Past the parts walked for each key (16), parts are found through an index: the same
/// split, one part per slot in the order slots first appear, keys in order.
#[test]
fn a_split_over_many_slots_is_the_walked_split() {
    for keys in [15, 16, 17, 40, 2_000] {
        let argv: Vec<String> = std::iter::once("MGET".to_string())
            .chain((0..keys).map(|i| format!("key:{}", i % 700)))
            .collect();
        let Route::Split(split) = TABLE.route(&argv).expect("known") else {
            panic!("a split")
        };
        let mut want: Vec<(u16, Vec<usize>)> = Vec::new();
        for (group, key) in argv[1..].iter().enumerate() {
            let slot = u16::from(key_slot(key.as_bytes()));
            match want.iter_mut().find(|(s, _)| *s == slot) {
                Some((_, groups)) => groups.push(group),
                None => want.push((slot, vec![group])),
            }
        }
        let got: Vec<(u16, Vec<usize>)> = split
            .parts()
            .iter()
            .map(|p| (u16::from(p.slot), p.groups.clone()))
            .collect();
        assert_eq!(got, want, "{keys} keys");
        assert!(split.parts().iter().all(|p| p.shard == usize::from(p.slot)));
    }
}

/// A keyspace of strings that runs the splittable commands as one server would.
#[derive(Clone, Debug, Default, PartialEq)]
struct Model(HashMap<Vec<u8>, Vec<u8>>);

impl Model {
    fn run(&mut self, argv: &[Vec<u8>]) -> Reply {
        let args = &argv[1..];
        match argv[0].as_slice() {
            b"MGET" => Frame::Array(
                args.iter()
                    .map(|k| {
                        self.0
                            .get(k)
                            .map_or(Frame::NullBulkString, |v| Frame::BulkString(v.clone()))
                    })
                    .collect(),
            ),
            b"MSET" => {
                for pair in args.chunks(2) {
                    self.0.insert(pair[0].clone(), pair[1].clone());
                }
                Frame::SimpleString(b"OK".to_vec())
            }
            b"DEL" | b"UNLINK" => {
                Frame::Integer(args.iter().filter(|k| self.0.remove(*k).is_some()).count() as i64)
            }
            b"EXISTS" | b"TOUCH" => {
                Frame::Integer(args.iter().filter(|k| self.0.contains_key(*k)).count() as i64)
            }
            other => panic!("the model has no {other:?}"),
        }
    }
}

fn key() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        "[a-e]".prop_map(String::into_bytes),
        "\\{[a-c]\\}[0-9]".prop_map(String::into_bytes),
    ]
}

fn command() -> impl Strategy<Value = Vec<Vec<u8>>> {
    let keys = proptest::collection::vec(key(), 1..12);
    prop_oneof![
        (
            prop_oneof![
                Just("MGET"),
                Just("DEL"),
                Just("UNLINK"),
                Just("EXISTS"),
                Just("TOUCH")
            ],
            keys
        )
            .prop_map(|(name, keys)| {
                std::iter::once(name.as_bytes().to_vec())
                    .chain(keys)
                    .collect()
            }),
        proptest::collection::vec((key(), "[x-z]{0,3}"), 1..8).prop_map(|pairs| {
            std::iter::once(b"MSET".to_vec())
                .chain(pairs.into_iter().flat_map(|(k, v)| [k, v.into_bytes()]))
                .collect()
        }),
    ]
}

proptest! {
    #[test]
    fn split_then_merge_equals_one_server(
        start in proptest::collection::vec((key(), "[x-z]{1,2}"), 0..10),
        argv in command(),
    ) {
        let mut one = Model(start.into_iter().map(|(k, v)| (k, v.into_bytes())).collect());
        let mut split_model = one.clone();
        let whole = one.run(&argv);
        let merged = match TABLE.route(&argv).expect("known") {
            Route::Split(split) => {
                let replies = (0..split.parts().len())
                    .map(|p| {
                        let part: Vec<Vec<u8>> = split.argv(p, &argv).cloned().collect();
                        prop_assert!(part.len() < argv.len(), "a part is smaller");
                        Ok(split_model.run(&part))
                    })
                    .collect::<Result<Vec<_>, TestCaseError>>()?;
                split.merge(replies).map_err(|e| TestCaseError::fail(e.to_string()))?
            }
            Route::Slot(_) => split_model.run(&argv),
            other => return Err(TestCaseError::fail(format!("{other:?}"))),
        };
        prop_assert_eq!(merged, whole);
        prop_assert_eq!(split_model, one);
    }
}

proptest! {
    /// A split by any shard function merges back to the one-server reply, and a split by
    /// slot is the one `route` makes.
    #[test]
    fn split_by_any_shard_merges_to_one_server(
        start in proptest::collection::vec((key(), "[x-z]{1,2}"), 0..10),
        argv in command(),
        shards in 1usize..5,
    ) {
        let mut one = Model(start.into_iter().map(|(k, v)| (k, v.into_bytes())).collect());
        let mut split_model = one.clone();
        let whole = one.run(&argv);
        let shard = |key: &[u8]| key.iter().map(|&b| usize::from(b)).sum::<usize>() % shards;
        let split = TABLE.split_by(&argv, shard).expect("a multi-shard command");
        let mut seen = Vec::new();
        let mut replies = Vec::new();
        for (p, part) in split.parts().iter().enumerate() {
            prop_assert!(!seen.contains(&part.shard), "one part per shard");
            seen.push(part.shard);
            let sub: Vec<Vec<u8>> = split.argv(p, &argv).cloned().collect();
            let keys = TABLE
                .keys(&sub)
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            for at in keys.positions() {
                prop_assert_eq!(shard(&sub[at]), part.shard);
            }
            replies.push(split_model.run(&sub));
        }
        let merged = split.merge(replies).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(merged, whole);
        prop_assert_eq!(split_model, one);
        if let Route::Split(by_slot) = TABLE.route(&argv).expect("known") {
            let again = TABLE
                .split_by(&argv, |key| usize::from(key_slot(key)))
                .expect("splits");
            prop_assert_eq!(again, by_slot);
        }
    }
}

proptest! {
    /// Routing by the shard of each key's slot: a command over one slot routes as `routed`
    /// routes it; one over several shards splits as `split_by` with that shard function
    /// does, one part per shard, and merges back to the one-server reply.
    #[test]
    fn routed_by_shard_of_slot_splits_by_shard(
        start in proptest::collection::vec((key(), "[x-z]{1,2}"), 0..10),
        argv in command(),
        shards in 1u16..5,
    ) {
        let shard = |slot: redis_hash_slot::Slot| usize::from(u16::from(slot) % shards);
        let by_slot = TABLE.routed(&argv).expect("known");
        let routed = TABLE.routed_by(&argv, shard).expect("known");
        prop_assert_eq!((routed.spec, routed.keys), (by_slot.spec, by_slot.keys));
        match (routed.route, by_slot.route) {
            (Route::Split(split), Route::Split(_)) => {
                let again = TABLE
                    .split_by(&argv, |key| shard(key_slot(key)))
                    .expect("splits");
                prop_assert_eq!(&split, &again);
                for part in split.parts() {
                    prop_assert_eq!(shard(part.slot), part.shard);
                }
                let mut one = Model(start.into_iter().map(|(k, v)| (k, v.into_bytes())).collect());
                let mut split_model = one.clone();
                let whole = one.run(&argv);
                let replies: Vec<Reply> = (0..split.parts().len())
                    .map(|p| split_model.run(&split.argv(p, &argv).cloned().collect::<Vec<_>>()))
                    .collect();
                prop_assert_eq!(split.merge(replies), Ok(whole));
                prop_assert_eq!(split_model, one);
            }
            (ours, theirs) => prop_assert_eq!(ours, theirs),
        }
    }
}

proptest! {
    /// With every slot on one shard, `routed_whole` (which hashes few keys) answers as
    /// `routed_by` with that one shard (which hashes them all), and `routed_unsplit` the same
    /// but for a split, which is always of one part (the slot of that part), and for a
    /// command over several slots that a cluster refuses (its first key's slot).
    #[test]
    fn routed_whole_and_unsplit_are_routed_by_one_shard(
        argv in prop_oneof![
            command(),
            // Commands that do not split, over one key, several or none, some of the
            // wrong arity.
            (
                prop_oneof![Just("GET"), Just("RENAME"), Just("SUNION"), Just("PING"), Just("DBSIZE")],
                proptest::collection::vec(key(), 0..4),
            )
                .prop_map(|(name, keys)| {
                    std::iter::once(name.as_bytes().to_vec()).chain(keys).collect()
                }),
        ]
    ) {
        let whole = TABLE.routed_whole(&argv);
        prop_assert_eq!(&whole, &TABLE.routed_by(&argv, |_| 0));
        match (whole, TABLE.routed_unsplit(&argv)) {
            (Ok(whole), Ok(unsplit)) => {
                prop_assert_eq!(
                    (whole.spec.name, whole.keys),
                    (unsplit.spec.name, unsplit.keys)
                );
                match &whole.route {
                    Route::Split(split) => {
                        prop_assert_eq!(split.parts().len(), 1);
                        prop_assert_eq!(unsplit.route, Route::Slot(split.parts()[0].slot));
                    }
                    Route::CrossSlot => {
                        let keys = TABLE.routing_keys(&argv).expect("routed");
                        let first = keys.positions().next().expect("a key");
                        prop_assert_eq!(unsplit.route, Route::Slot(key_slot(&argv[first])));
                    }
                    route => prop_assert_eq!(&unsplit.route, route),
                }
            }
            (whole, unsplit) => prop_assert_eq!(whole, unsplit),
        }
    }
}
