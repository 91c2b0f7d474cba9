//! Key extraction and slots, case by case: the forms the key specs describe (index, keyword
//! from either end, keynum), subcommands, the server's own fallbacks, routing by the legacy
//! range, unknown commands and a caller-supplied spec. The same rules are checked against a
//! real server in the workspace's `tests/route_interop.rs`.

use proptest::prelude::*;
use redis_cluster_route::{
    BeginSearch, CommandFlags, CommandSpec, CommandTable, FindKeys, KeyError, KeySpec,
    KeySpecFlags, Keys, SlotAnswer, Tips,
};
use redis_hash_slot::key_slot;

const TABLE: CommandTable = CommandTable::REDIS_7_0;

fn words(line: &str) -> Vec<&str> {
    line.split(' ').collect()
}

/// `COMMAND GETKEYS` semantics: the keys' positions, or the error.
fn getkeys(line: &str) -> Result<Vec<usize>, KeyError> {
    TABLE
        .command_getkeys(&words(line))
        .map(|keys| keys.positions().collect())
}

fn routing(line: &str) -> Vec<usize> {
    TABLE
        .routing_keys(&words(line))
        .expect("a known command")
        .positions()
        .collect()
}

#[test]
fn keys_as_command_getkeys_finds_them() {
    let cases: &[(&str, Result<&[usize], KeyError>)] = &[
        ("GET k", Ok(&[1])),
        ("get k", Ok(&[1])),
        ("MSET a 1 b 2 c 3", Ok(&[1, 3, 5])),
        ("DEL a b c", Ok(&[1, 2, 3])),
        ("BLPOP a b 0", Ok(&[1, 2])),
        ("BITOP AND dest a b", Ok(&[2, 3, 4])),
        ("ZRANGESTORE dst src 0 -1", Ok(&[1, 2])),
        // keynum forms
        ("EVAL script 2 a b arg", Ok(&[3, 4])),
        ("EVAL script 0 arg", Ok(&[])),
        ("EVAL script 3 a b", Ok(&[])),
        ("FCALL f 1 a x", Ok(&[3])),
        ("ZUNIONSTORE dst 2 a b WEIGHTS 1 2", Ok(&[1, 3, 4])),
        ("ZUNION 2 a b", Ok(&[2, 3])),
        ("ZUNION 0 a b", Err(KeyError::InvalidArguments)),
        ("LMPOP 2 a b LEFT", Ok(&[2, 3])),
        ("BLMPOP 0 2 a b LEFT", Ok(&[3, 4])),
        ("SINTERCARD 2 a b LIMIT 1", Ok(&[2, 3])),
        // keyword forms
        ("XREAD COUNT 2 STREAMS a b 0 0", Ok(&[4, 5])),
        ("XREADGROUP GROUP g c STREAMS a >", Ok(&[5])),
        ("GEORADIUS k 0 0 1 km STORE dst", Ok(&[1, 7])),
        ("GEORADIUS k 0 0 1 km", Ok(&[1])),
        ("MIGRATE h 6379 k 0 100", Ok(&[3])),
        // With KEYS, the key argument must be empty (two spaces: an empty word).
        ("MIGRATE h 6379  0 100 KEYS a b", Ok(&[7, 8])),
        (
            "MIGRATE h 6379 k 0 100 KEYS a b",
            Err(KeyError::InvalidArguments),
        ),
        // SORT: the specs cannot tell, the server's own function does.
        ("SORT k", Ok(&[1])),
        ("SORT k BY w LIMIT 0 1 GET g STORE dst", Ok(&[1, 10])),
        ("SORT_RO k BY w", Ok(&[1])),
        // Flags that vary with the arguments: the server's own function.
        ("SET k v GET", Ok(&[1])),
        // subcommands
        ("OBJECT ENCODING k", Ok(&[2])),
        ("object encoding k", Ok(&[2])),
        ("MEMORY USAGE k SAMPLES 5", Ok(&[2])),
        ("XINFO STREAM k FULL", Ok(&[2])),
        // errors, with the server's texts
        ("PING x", Err(KeyError::NoKeyArguments)),
        ("SPUBLISH channel message", Err(KeyError::NoKeyArguments)),
        ("GET a b", Err(KeyError::WrongArity)),
        ("NOSUCH k", Err(KeyError::UnknownCommand)),
        ("OBJECT NOSUCH k", Err(KeyError::UnknownSubcommand)),
    ];
    for (line, expected) in cases {
        let expected = expected.map(<[usize]>::to_vec);
        assert_eq!(getkeys(line), expected, "{line}");
    }
    assert_eq!(
        KeyError::InvalidArguments.to_string(),
        "Invalid arguments specified for command"
    );
}

#[test]
fn keys_is_lenient_where_getkeys_refuses() {
    let keys = TABLE.keys(&words("PING")).expect("known");
    assert!(keys.is_empty());
    let keys = TABLE.keys(&words("ZUNION 0 a b")).expect("known");
    assert!(keys.is_empty());
    assert_eq!(TABLE.keys(&words("NOSUCH")), Err(KeyError::UnknownCommand));
}

#[test]
fn key_flags_come_from_the_spec_that_found_them() {
    let keys = TABLE.keys(&words("ZUNIONSTORE dst 2 a b")).expect("known");
    let flags: Vec<_> = keys.with_flags().collect();
    assert_eq!(flags[0], (1, KeySpecFlags::OW.or(KeySpecFlags::UPDATE)));
    assert_eq!(flags[1], (3, KeySpecFlags::RO.or(KeySpecFlags::ACCESS)));
    assert_eq!(keys.len(), 3);
}

#[test]
fn routing_follows_a_cluster_node() {
    // movablekeys: the server's function, which parses options where the spec only searches.
    assert_eq!(routing("XREAD COUNT 2 STREAMS a b 0 0"), [4, 5]);
    assert_eq!(routing("XREAD STREAMS a streams 0 0"), [2, 3]);
    assert_eq!(routing("XREAD STREAMS a b 0"), [] as [usize; 0]);
    // The legacy range, which also hashes shard channels.
    assert_eq!(routing("SPUBLISH channel message"), [1]);
    assert_eq!(routing("SSUBSCRIBE a b c"), [1, 2, 3]);
    assert_eq!(routing("MSET a 1 b 2"), [1, 3]);
    assert_eq!(routing("OBJECT ENCODING k"), [2]);
    assert_eq!(routing("PING"), [] as [usize; 0]);

    let slot = |line: &str| TABLE.slot(&words(line)).expect("a known command");
    assert_eq!(slot("GET foo"), SlotAnswer::Slot(key_slot(b"foo")));
    assert_eq!(slot("MGET {a}1 {a}2"), SlotAnswer::Slot(key_slot(b"a")));
    assert_eq!(slot("MGET a b"), SlotAnswer::CrossSlot);
    assert_eq!(slot("MGET a a"), SlotAnswer::Slot(key_slot(b"a")));
    assert_eq!(slot("INFO"), SlotAnswer::NoKeys);
    assert_eq!(TABLE.slot(&words("GET")), Err(KeyError::WrongArity));
}

#[test]
fn a_module_command_gets_its_keys_from_a_spec_the_caller_supplies() {
    // A made-up module command: `MOD.JOIN dest numkeys key...`.
    static SPEC: CommandSpec = CommandSpec {
        name: "mod.join",
        arity: -3,
        flags: CommandFlags::WRITE.or(CommandFlags::MOVABLEKEYS),
        legacy_keys: (0, 0, 0),
        acl_categories: redis_cluster_route::AclCategories::EMPTY,
        tips: Tips::NONE,
        key_specs: &[
            KeySpec {
                notes: "",
                flags: KeySpecFlags::OW,
                begin_search: BeginSearch::Index(1),
                find_keys: FindKeys::Range {
                    last_key: 0,
                    step: 1,
                    limit: 0,
                },
            },
            KeySpec {
                notes: "",
                flags: KeySpecFlags::RO,
                begin_search: BeginSearch::Index(2),
                find_keys: FindKeys::Keynum {
                    keynum_index: 0,
                    first_key: 1,
                    step: 1,
                },
            },
        ],
        subcommands: &[],
    };
    assert_eq!(
        TABLE.keys(&["mod.join", "d", "1", "k"]),
        Err(KeyError::UnknownCommand)
    );
    let keys = Keys::from_spec(&SPEC, &["mod.join", "d", "2", "a", "b"])
        .expect("arity")
        .expect("the specs answer");
    assert_eq!(keys.positions().collect::<Vec<_>>(), [1, 3, 4]);
    assert_eq!(
        Keys::from_spec(&SPEC, &["mod.join", "d", "x", "a"]),
        Ok(None),
        "an unreadable count: the specs cannot answer"
    );
    assert_eq!(
        Keys::from_spec(&SPEC, &["mod.join"]),
        Err(KeyError::WrongArity)
    );
}

#[test]
fn the_tables_hold_every_command_of_their_server() {
    let count = |t: CommandTable| {
        let top = t.commands().len();
        let subs: usize = t.commands().iter().map(|c| c.subcommands.len()).sum();
        (top, subs)
    };
    assert_eq!(count(CommandTable::REDIS_7_0), (240, 126));
    assert_eq!(count(CommandTable::VALKEY_8_1), (242, 137));
    let valkey = CommandTable::VALKEY_8_1;
    assert!(valkey.lookup(&["CLUSTER", "SLOT-STATS"]).is_some());
    assert!(TABLE.lookup(&["CLUSTER", "SLOT-STATS"]).is_none());
    // Sorted, so that lookup's binary search finds every name.
    for table in [CommandTable::REDIS_7_0, valkey] {
        for command in table.commands() {
            assert_eq!(table.command(command.name.as_bytes()), Some(command));
            for sub in command.subcommands {
                let name = &sub.name[command.name.len() + 1..];
                assert_eq!(
                    command.subcommand(name.to_uppercase().as_bytes()),
                    Some(sub)
                );
            }
        }
    }
}

proptest! {
    /// Any arguments to any command: no panic, and every key position is inside `argv`.
    #[test]
    fn any_arguments_give_keys_inside_argv(
        command in 0usize..240,
        args in proptest::collection::vec(
            prop_oneof![
                "[a-z]{1,3}",
                "-?[0-9]{1,3}",
                Just("STREAMS".to_owned()),
                Just("STORE".to_owned()),
                Just("KEYS".to_owned()),
                Just(String::new()),
            ],
            0..12,
        ),
    ) {
        let spec = &TABLE.commands()[command];
        let mut argv = vec![spec.name.to_owned()];
        if let Some(sub) = spec.subcommands.first() {
            argv.push(sub.name[spec.name.len() + 1..].to_owned());
        }
        argv.extend(args);
        for keys in [TABLE.keys(&argv), TABLE.routing_keys(&argv)].into_iter().flatten() {
            prop_assert!(keys.positions().all(|at| at > 0 && at < argv.len()));
            prop_assert_eq!(keys.positions().count(), keys.len());
        }
        let _ = TABLE.slot(&argv);
        let _ = TABLE.command_getkeys(&argv);
    }
}
