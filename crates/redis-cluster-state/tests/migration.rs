//! `SlotMove`, the migration protocol one command at a time: driven against scripted
//! masters that answer as redis-server does, including the half-done states an interrupted
//! run leaves behind.

use redis_cluster_bus::{Address, NodeId};
use redis_cluster_state::migration::{MoveError, SlotMove, Step};
use redis_hash_slot::Slot;
use redis_resp::Frame;

type Reply = Frame<Vec<u8>>;

fn ok() -> Reply {
    Frame::SimpleString(b"OK".to_vec())
}

fn err(text: &str) -> Reply {
    Frame::SimpleError(text.as_bytes().to_vec())
}

fn keys(names: &[&str]) -> Reply {
    Frame::Array(
        names
            .iter()
            .map(|k| Frame::BulkString(k.as_bytes().to_vec()))
            .collect(),
    )
}

/// Three masters, `0000…`, `1111…` and `2222…`, named `id0` to `id2` in the commands the
/// tests read.
fn ids() -> [NodeId; 3] {
    ["0", "1", "2"].map(|digit| digit.repeat(40).parse().expect("an id"))
}

/// The number of a master of [`ids`].
fn number(id: &NodeId) -> usize {
    ids()
        .iter()
        .position(|i| i == id)
        .expect("one of the three")
}

/// A move of `slot` from master `from` to master `to` (numbers of [`ids`]), the target at
/// `host:port`, all three masters told.
fn slot_move(slot: u16, from: usize, to: usize, host: &str, port: u16) -> SlotMove {
    let slot = Slot::new(slot).expect("a slot");
    let ids = ids();
    SlotMove::new(slot, ids[from], ids[to], Address::new(host, port)).with_masters(ids)
}

/// Drives `mv` to its end, each command answered by `answer(master, argv)` with the
/// master's number: the commands sent, as `master: words` (ids as `id0` to `id2`), and the
/// result.
fn drive(
    mut mv: SlotMove,
    mut answer: impl FnMut(usize, &[Vec<u8>]) -> Reply,
) -> (Vec<String>, Result<u64, MoveError>) {
    let mut sent = Vec::new();
    let mut step = mv.start();
    loop {
        match step {
            Step::Done { keys } => return (sent, Ok(keys)),
            Step::Send { master, argv } => {
                let master = number(&master);
                let words: Vec<String> = argv
                    .iter()
                    .map(
                        |a| match ids().iter().position(|id| id.as_bytes() == &a[..]) {
                            Some(n) => format!("id{n}"),
                            None => String::from_utf8_lossy(a).into_owned(),
                        },
                    )
                    .collect();
                sent.push(format!("{master}: {}", words.join(" ")));
                assert!(sent.len() < 100, "no end: {sent:#?}");
                let reply = answer(master, &argv);
                step = match mv.reply(&reply) {
                    Ok(next) => next,
                    Err(e) => return (sent, Err(e)),
                };
            }
        }
    }
}

/// Word `i` of a command, or "".
fn word(argv: &[Vec<u8>], i: usize) -> &str {
    argv.get(i)
        .and_then(|w| std::str::from_utf8(w).ok())
        .unwrap_or_default()
}

#[test]
fn a_slot_moves_with_its_keys_in_redis_cli_order() {
    let mut left = vec!["a", "b", "c"];
    let mv = slot_move(7, 0, 1, "10.0.0.2", 7001).with_batch(2);
    let (sent, result) = drive(mv, |_, argv| match word(argv, 0) {
        "CLUSTER" if word(argv, 1) == "GETKEYSINSLOT" => keys(&left[..left.len().min(2)]),
        "MIGRATE" => {
            let n = argv.len() - 8;
            left.drain(..n);
            ok()
        }
        _ => ok(),
    });
    assert_eq!(result, Ok(3));
    assert_eq!(
        sent,
        [
            "1: CLUSTER SETSLOT 7 IMPORTING id0",
            "0: CLUSTER SETSLOT 7 MIGRATING id1",
            "0: CLUSTER GETKEYSINSLOT 7 2",
            "0: MIGRATE 10.0.0.2 7001  0 60000 REPLACE KEYS a b",
            "0: CLUSTER GETKEYSINSLOT 7 2",
            "0: MIGRATE 10.0.0.2 7001  0 60000 REPLACE KEYS c",
            "0: CLUSTER GETKEYSINSLOT 7 2",
            "1: CLUSTER SETSLOT 7 NODE id1",
            "0: CLUSTER SETSLOT 7 NODE id1",
            "2: CLUSTER SETSLOT 7 NODE id1",
        ]
    );
}

#[test]
fn a_half_done_move_resumes() {
    // The target already owns the slot and the source still has a key: IMPORTING is
    // refused as the server refuses it, and the move goes on.
    let mut left = vec!["k"];
    let mv = slot_move(9, 2, 0, "h", 1);
    let (sent, result) = drive(mv, |_, argv| match (word(argv, 0), word(argv, 3)) {
        ("CLUSTER", "IMPORTING") => err("ERR I'm already the owner of hash slot 9"),
        ("CLUSTER", _) if word(argv, 1) == "GETKEYSINSLOT" => keys(&left),
        ("MIGRATE", _) => {
            left.clear();
            ok()
        }
        _ => ok(),
    });
    assert_eq!(result, Ok(1), "{sent:#?}");

    // The source gave the slot up already and holds none of its keys: only the SETSLOT
    // NODEs are left.
    let mv = slot_move(9, 2, 0, "h", 1);
    let (sent, result) = drive(mv, |_, argv| match word(argv, 3) {
        "MIGRATING" => err("ERR I'm not the owner of hash slot 9"),
        _ if word(argv, 1) == "COUNTKEYSINSLOT" => Frame::Integer(0),
        _ => ok(),
    });
    assert_eq!(result, Ok(0));
    assert_eq!(sent[2], "2: CLUSTER COUNTKEYSINSLOT 9");
    assert_eq!(sent.len(), 6, "{sent:#?}");

    // … but if it still holds keys, that is for a human (or redis-cli --cluster fix).
    let mv = slot_move(9, 2, 0, "h", 1);
    let (_, result) = drive(mv, |_, argv| match word(argv, 3) {
        "MIGRATING" => err("ERR I'm not the owner of hash slot 9"),
        _ if word(argv, 1) == "COUNTKEYSINSLOT" => Frame::Integer(3),
        _ => ok(),
    });
    assert_eq!(
        result,
        Err(MoveError::Stray {
            master: ids()[2],
            slot: Slot::new(9).expect("a slot")
        })
    );
}

#[test]
fn refusals_stop_the_move_and_keys_that_do_not_leave_are_caught() {
    let mv = slot_move(1, 0, 1, "h", 1);
    let (_, result) = drive(mv, |_, argv| match word(argv, 0) {
        "MIGRATE" => err("IOERR error or timeout reading to target instance"),
        "CLUSTER" if word(argv, 1) == "GETKEYSINSLOT" => keys(&["x"]),
        _ => ok(),
    });
    assert_eq!(
        result,
        Err(MoveError::Refused {
            master: ids()[0],
            command: "MIGRATE",
            message: "IOERR error or timeout reading to target instance".into()
        })
    );

    // MIGRATE says OK and the keys stay: stop rather than loop.
    let mv = slot_move(1, 0, 1, "h", 1);
    let (_, result) = drive(mv, |_, argv| match word(argv, 1) {
        "GETKEYSINSLOT" => keys(&["x"]),
        _ => ok(),
    });
    assert_eq!(
        result,
        Err(MoveError::Stuck {
            master: ids()[0],
            slot: Slot::new(1).expect("a slot")
        })
    );

    // A third master that does not know the target yet may refuse SETSLOT NODE: gossip
    // tells it. The target or the source may not.
    let mv = slot_move(1, 0, 1, "h", 1);
    let (_, result) = drive(mv, |master, argv| match word(argv, 3) {
        "NODE" if master == 2 => err("ERR I don't know about node id1"),
        _ if word(argv, 1) == "GETKEYSINSLOT" => keys(&[]),
        _ => ok(),
    });
    assert_eq!(result, Ok(0));
    let mv = slot_move(1, 0, 1, "h", 1);
    let (_, result) = drive(mv, |master, argv| match word(argv, 3) {
        "NODE" if master == 0 => err("ERR nope"),
        _ if word(argv, 1) == "GETKEYSINSLOT" => keys(&[]),
        _ => ok(),
    });
    assert!(matches!(result, Err(MoveError::Refused { master, .. }) if master == ids()[0]));
}
