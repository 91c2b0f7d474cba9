//! `redis-cluster-route` against a real `redis-server` 7.0, for every command with keys in
//! its table: our keys equal `COMMAND GETKEYS` (keys, or the same error) for several argument
//! lists per command, and our slot answer equals what the server in cluster mode does with
//! the command (queued inside MULTI, CROSSSLOT, or "hash slot not served").

mod support;

use redis_cluster_proto::hash_slot::key_slot;
use redis_cluster_proto::resp::Frame;
use redis_cluster_proto::route::{
    BeginSearch, CommandSpec, CommandTable, FindKeys, KeyError, SlotAnswer, server_of_info,
};
use support::{RedisServer, text};

/// A small deterministic generator (xorshift64*), so that a failure replays.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a>(&mut self, words: &[&'a str]) -> &'a str {
        words[self.below(words.len())]
    }
}

/// Words an argument is drawn from: keys (some sharing a hash tag), numbers that a count may
/// be read from, and the keywords the key specs and the servers' own key finders look for.
const KEYS: &[&str] = &["a", "b", "{t}x", "{t}y", "{t}z", "foo", "bar", "key:1"];
const NUMBERS: &[&str] = &["0", "1", "2", "3", "-1", "2x", " 1", "007", "99"];
const KEYWORDS: &[&str] = &[
    "STREAMS",
    "streams",
    "STORE",
    "STOREDIST",
    "KEYS",
    "LIMIT",
    "GET",
    "BY",
    "BLOCK",
    "COUNT",
    "GROUP",
    "NOACK",
    "AUTH",
    "AUTH2",
    "COPY",
    "REPLACE",
    "",
];

/// Several argument lists for `spec` (`prefix` is its name, and the subcommand's): lengths
/// its arity allows, arguments drawn at random, then the shapes its key specs look for
/// (keyword, then keys; a count, then that many keys).
fn argument_lists(spec: &CommandSpec, prefix: &[&'static str], rng: &mut Rng) -> Vec<Vec<String>> {
    let min = spec.arity.unsigned_abs() as usize;
    let lengths: Vec<usize> = if spec.arity > 0 {
        vec![min; 6]
    } else {
        vec![
            min,
            min + 1,
            min + 2,
            min + 3,
            min + 4,
            min + 5,
            min + 6,
            min + 9,
        ]
    };
    let mut lists = Vec::new();
    for (n, len) in lengths.into_iter().enumerate() {
        let mut argv: Vec<String> = prefix.iter().map(|s| s.to_string()).collect();
        while argv.len() < len {
            let pool = match rng.below(10) {
                0..=5 => KEYS,
                6 | 7 => NUMBERS,
                _ => KEYWORDS,
            };
            argv.push(rng.pick(pool).to_owned());
        }
        // Every other list is shaped for one of the key specs.
        if n % 2 == 1 && !spec.key_specs.is_empty() {
            let key_spec = spec.key_specs[rng.below(spec.key_specs.len())];
            let mut at = match key_spec.begin_search {
                BeginSearch::Index(at) => at as usize,
                BeginSearch::Keyword { keyword, .. } => {
                    let at = prefix.len() + rng.below(len.saturating_sub(prefix.len()).max(1));
                    if at < argv.len() {
                        argv[at] = keyword.to_owned();
                    }
                    at + 1
                }
                BeginSearch::Unknown => argv.len(),
            };
            if let FindKeys::Keynum {
                keynum_index,
                first_key,
                ..
            } = key_spec.find_keys
            {
                let room = argv.len().saturating_sub(at + first_key as usize);
                let count = rng.below(room.max(1) + 1);
                if let Some(slot) = argv.get_mut(at + keynum_index as usize) {
                    *slot = count.to_string();
                }
                at += first_key as usize;
            }
            for arg in argv.iter_mut().skip(at) {
                if rng.below(3) > 0 {
                    *arg = rng.pick(KEYS).to_owned();
                }
            }
        }
        lists.push(argv);
    }
    lists
}

/// Every command and subcommand of the table, with the words that name it.
fn commands(table: &CommandTable) -> Vec<(&'static CommandSpec, Vec<&'static str>)> {
    let mut out = Vec::new();
    for command in table.commands() {
        if command.subcommands.is_empty() {
            out.push((command, vec![command.name]));
        }
        for sub in command.subcommands {
            let (container, name) = sub.name.split_once('|').expect("container|sub");
            out.push((sub, vec![container, name]));
        }
    }
    out
}

/// What `COMMAND GETKEYS` replied: the keys, or the error without its `ERR `.
fn getkeys_reply(frame: &Frame) -> Result<Vec<String>, String> {
    match frame {
        Frame::Array(keys) => Ok(keys.iter().map(text).collect()),
        Frame::SimpleError(e) => Err(text(&Frame::SimpleError(e.clone()))
            .trim_start_matches("ERR ")
            .to_owned()),
        other => panic!("COMMAND GETKEYS replied {other:?}"),
    }
}

/// Whether the slot check sends `argv` inside MULTI: a known command with keys.
fn queued(table: &CommandTable, argv: &[String]) -> bool {
    table
        .lookup(argv)
        .is_some_and(CommandSpec::has_key_arguments)
}

#[test]
fn keys_and_slots_agree_with_redis_server() {
    // Half the slots served, so that the server's answer also tells which slot it computed.
    let server = RedisServer::start_cluster(&["--cluster-require-full-coverage", "no"]);
    let mut client = server.client();
    let reply = client.command(&[b"CLUSTER", b"ADDSLOTSRANGE", b"0", b"8191"]);
    assert_eq!(text(&reply), "OK");
    // The table of the server that runs (`REDIS_SERVER` picks the binary), as a proxy picks it.
    let info = text(&client.command(&[b"INFO", b"server"]));
    let (name, version) = server_of_info(&info);
    let table = CommandTable::for_server(name, version);
    println!("{name} {version}: the table of {}", table.server);
    let crossslot_first = name == "valkey" && !version.starts_with(['7', '8']);
    let mut rng = Rng(0x5eed_1234_abcd_ef01);

    let mut lists = Vec::new();
    for (spec, prefix) in commands(&table) {
        if spec.has_key_arguments() {
            lists.extend(argument_lists(spec, &prefix, &mut rng));
            // One argument short of the arity.
            let short = (spec.arity.unsigned_abs() as usize).saturating_sub(1);
            if short > prefix.len() {
                let mut argv: Vec<String> = prefix.iter().map(|s| s.to_string()).collect();
                argv.resize(short, "k".to_owned());
                lists.push(argv);
            }
        } else {
            // GETKEYS refuses a command without keys whatever its arguments (given at least
            // one: `COMMAND GETKEYS` itself needs two words after COMMAND).
            let mut argv = argument_lists(spec, &prefix, &mut rng).remove(0);
            if argv.len() < 2 {
                argv.push("k".to_owned());
            }
            lists.push(argv);
        }
    }
    for unknown in [
        &["nosuchcommand", "k"][..],
        &["object", "nosuch", "k"],
        &["GET", "a", "b"],
    ] {
        lists.push(unknown.iter().map(|s| s.to_string()).collect());
    }
    // Wait for the cluster to say ok (its slots are assigned; no other node to meet).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !text(&client.command(&[b"CLUSTER", b"INFO"])).contains("cluster_state:ok") {
        assert!(
            std::time::Instant::now() < deadline,
            "cluster_state never ok"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }

    let (mut compared, mut slot_checked, mut differences) = (0, 0, Vec::new());
    let mut outcomes = std::collections::BTreeMap::<String, usize>::new();
    for batch in lists.chunks(100) {
        let mut commands: Vec<Vec<&[u8]>> = Vec::new();
        for argv in batch {
            let mut getkeys: Vec<&[u8]> = vec![b"COMMAND", b"GETKEYS"];
            getkeys.extend(argv.iter().map(|a| a.as_bytes()));
            commands.push(getkeys);
            // Only commands with keys are queued: the others include QUIT, MULTI and HELLO.
            if queued(&table, argv) {
                commands.push(vec![b"MULTI"]);
                commands.push(argv.iter().map(|a| a.as_bytes()).collect());
                commands.push(vec![b"DISCARD"]);
            }
        }
        let refs: Vec<&[&[u8]]> = commands.iter().map(Vec::as_slice).collect();
        client.send(&refs);
        for argv in batch {
            let theirs = getkeys_reply(&client.read_reply());
            let ours = table
                .command_getkeys(argv)
                .map(|keys| keys.positions().map(|at| argv[at].clone()).collect())
                .map_err(|e| e.to_string());
            compared += 1;
            let outcome = match &theirs {
                Ok(keys) if keys.is_empty() => "no keys".to_owned(),
                Ok(_) => "keys".to_owned(),
                Err(e) => e.clone(),
            };
            *outcomes.entry(outcome).or_default() += 1;
            if ours != theirs {
                differences.push(format!(
                    "GETKEYS {argv:?}: ours {ours:?}, server {theirs:?}"
                ));
            }

            if !queued(&table, argv) {
                continue;
            }
            assert_eq!(text(&client.read_reply()), "OK", "MULTI");
            let reply = text(&client.read_reply());
            assert_eq!(text(&client.read_reply()), "OK", "DISCARD");
            // The server stops at the first key when its slot is not served.
            let first = table
                .routing_keys(argv)
                .ok()
                .and_then(|k| k.positions().next());
            let unserved = first.is_some_and(|at| u16::from(key_slot(argv[at].as_bytes())) >= 8192);
            // Valkey 9 looks at every key before it answers for an unserved slot: keys of two
            // slots are CROSSSLOT first.
            let crossslot = matches!(table.slot(argv), Ok(SlotAnswer::CrossSlot));
            let expected = match table.slot(argv) {
                _ if unserved && !(crossslot_first && crossslot) => {
                    "CLUSTERDOWN Hash slot not served".to_owned()
                }
                Ok(SlotAnswer::NoKeys) => "QUEUED".to_owned(),
                Ok(SlotAnswer::Slot(slot)) if u16::from(slot) < 8192 => "QUEUED".to_owned(),
                Ok(SlotAnswer::Slot(_)) => "CLUSTERDOWN Hash slot not served".to_owned(),
                Ok(SlotAnswer::CrossSlot) => {
                    "CROSSSLOT Keys in request don't hash to the same slot".to_owned()
                }
                Err(
                    KeyError::WrongArity | KeyError::UnknownCommand | KeyError::UnknownSubcommand,
                ) => {
                    continue;
                }
                Err(e) => panic!("{argv:?}: {e}"),
            };
            // Other refusals (commands not allowed in MULTI, WATCH) say nothing about slots.
            let conclusive = reply == "QUEUED"
                || reply.starts_with("CROSSSLOT")
                || reply.starts_with("CLUSTERDOWN");
            if conclusive {
                let word = reply.split(' ').next().unwrap_or_default();
                *outcomes.entry(format!("slot: {word}")).or_default() += 1;
                slot_checked += 1;
                if reply != expected {
                    differences.push(format!("slot {argv:?}: ours {expected}, server {reply}"));
                }
            }
        }
    }
    eprintln!("{outcomes:#?}");
    // Every kind of answer was exercised.
    for outcome in [
        "keys",
        "no keys",
        "Invalid arguments specified for command",
        "Invalid number of arguments specified for command",
        "The command has no key arguments",
        "Invalid command specified",
        "slot: QUEUED",
        "slot: CROSSSLOT",
        "slot: CLUSTERDOWN",
    ] {
        assert!(
            outcomes.contains_key(outcome),
            "no {outcome:?} in {outcomes:?}"
        );
    }
    assert!(
        differences.is_empty(),
        "{} differences in {compared} argument lists:\n{}",
        differences.len(),
        differences.join("\n")
    );
    assert!(compared >= 1000, "only {compared} argument lists");
    assert!(
        slot_checked >= 1000,
        "only {slot_checked} slot answers checked"
    );
    // The keys chosen really spread over both halves of the slots.
    let slots: std::collections::BTreeSet<bool> = KEYS
        .iter()
        .map(|k| u16::from(key_slot(k.as_bytes())) < 8192)
        .collect();
    assert_eq!(slots.len(), 2);
}
