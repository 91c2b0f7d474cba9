//! The command tables in `src/table/` are generated from the real servers' `COMMAND` replies
//! in the workspace's `tests/vectors/commands/`. This test generates them again and fails on
//! any difference; `REGENERATE_TABLES=1 cargo test -p redis-cluster-route --test table`
//! rewrites them.
//!
//! It also checks that the RESP2 and RESP3 replies of each server describe the same table.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use redis_cluster_route::{CommandTable, server_of_info};
use redis_resp::{Frame, Status};

type F<'a> = Frame<&'a [u8]>;

/// The servers, their vectors folder, the generated module and its table.
const SERVERS: [(&str, &str, &str, CommandTable); 4] = [
    (
        "Redis 7.0.15",
        "redis-7.0.15",
        "redis_7_0.rs",
        CommandTable::REDIS_7_0,
    ),
    (
        "Redis 8.2.3",
        "redis-8.2.3",
        "redis_8_2.rs",
        CommandTable::REDIS_8_2,
    ),
    (
        "Valkey 8.1.8",
        "valkey-8.1.8",
        "valkey_8_1.rs",
        CommandTable::VALKEY_8_1,
    ),
    (
        "Valkey 9.1.2",
        "valkey-9.1.2",
        "valkey_9_1.rs",
        CommandTable::VALKEY_9_1,
    ),
];

fn vectors(folder: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/vectors/commands")
        .join(folder)
}

fn decode(bytes: &[u8]) -> F<'_> {
    match redis_resp::decode(bytes).expect("a RESP reply") {
        Status::Complete((frame, used)) => {
            assert_eq!(used, bytes.len(), "one reply per file");
            frame
        }
        Status::Incomplete { .. } => panic!("a whole reply"),
    }
}

/// The elements of an array or a set.
fn items<'f, 'a>(frame: &'f F<'a>) -> &'f [F<'a>] {
    match frame {
        Frame::Array(items) | Frame::Set(items) => items,
        other => panic!("an array, not {other:?}"),
    }
}

/// The pairs of a map, or of a flat RESP2 array of names and values.
fn pairs<'f, 'a>(frame: &'f F<'a>) -> Vec<(&'f F<'a>, &'f F<'a>)> {
    match frame {
        Frame::Map(pairs) => pairs.iter().map(|(k, v)| (k, v)).collect(),
        Frame::Array(flat) => flat.chunks_exact(2).map(|p| (&p[0], &p[1])).collect(),
        other => panic!("a map, not {other:?}"),
    }
}

fn text<'a>(frame: &F<'a>) -> &'a str {
    match frame {
        Frame::SimpleString(s) | Frame::BulkString(s) => std::str::from_utf8(s).expect("UTF-8"),
        other => panic!("a string, not {other:?}"),
    }
}

fn int(frame: &F<'_>) -> i64 {
    match frame {
        Frame::Integer(n) => *n,
        other => panic!("an integer, not {other:?}"),
    }
}

fn field<'f, 'a>(frame: &'f F<'a>, name: &str) -> Option<&'f F<'a>> {
    pairs(frame)
        .into_iter()
        .find(|(k, _)| text(k) == name)
        .map(|(_, v)| v)
}

/// `Type::A.or(Type::B)…` for the names given, each checked against the crate's own list.
fn bits(ty: &str, names: &[&str], known: impl Fn(&str) -> bool) -> String {
    if names.is_empty() {
        return format!("{ty}::EMPTY");
    }
    names
        .iter()
        .map(|name| {
            assert!(
                known(name),
                "{ty}: unknown name {name:?}: add it to the crate"
            );
            let constant = name.trim_start_matches('@').to_ascii_uppercase();
            format!("{ty}::{constant}")
        })
        .reduce(|a, b| format!("{a}.or({b})"))
        .unwrap_or_default()
}

fn key_spec(frame: &F<'_>) -> String {
    let flags: Vec<&str> = items(field(frame, "flags").expect("flags"))
        .iter()
        .map(text)
        .collect();
    let flags = bits("KeySpecFlags", &flags, |n| {
        redis_cluster_route::KeySpecFlags::from_name(n).is_some()
    });
    let begin = field(frame, "begin_search").expect("begin_search");
    let begin = match text(field(begin, "type").expect("type")) {
        "index" => {
            let spec = field(begin, "spec").expect("spec");
            format!(
                "BeginSearch::Index({})",
                int(field(spec, "index").expect("index"))
            )
        }
        "keyword" => {
            let spec = field(begin, "spec").expect("spec");
            format!(
                "BeginSearch::Keyword {{ keyword: {:?}, start_from: {} }}",
                text(field(spec, "keyword").expect("keyword")),
                int(field(spec, "startfrom").expect("startfrom"))
            )
        }
        "unknown" => "BeginSearch::Unknown".to_owned(),
        other => panic!("begin_search type {other}"),
    };
    let find = field(frame, "find_keys").expect("find_keys");
    let find = match text(field(find, "type").expect("type")) {
        "range" => {
            let spec = field(find, "spec").expect("spec");
            format!(
                "FindKeys::Range {{ last_key: {}, step: {}, limit: {} }}",
                int(field(spec, "lastkey").expect("lastkey")),
                int(field(spec, "keystep").expect("keystep")),
                int(field(spec, "limit").expect("limit"))
            )
        }
        "keynum" => {
            let spec = field(find, "spec").expect("spec");
            format!(
                "FindKeys::Keynum {{ keynum_index: {}, first_key: {}, step: {} }}",
                int(field(spec, "keynumidx").expect("keynumidx")),
                int(field(spec, "firstkey").expect("firstkey")),
                int(field(spec, "keystep").expect("keystep"))
            )
        }
        "unknown" => "FindKeys::Unknown".to_owned(),
        other => panic!("find_keys type {other}"),
    };
    let notes = field(frame, "notes").map_or("", text);
    format!(
        "KeySpec {{ notes: {notes:?}, flags: {flags}, begin_search: {begin}, find_keys: {find} }}"
    )
}

/// The tips in the server's order, which varies from command to command.
fn tips(frame: &F<'_>) -> String {
    let camel = |s: &str| {
        s.split('_')
            .map(|w| w[..1].to_ascii_uppercase() + &w[1..])
            .collect::<String>()
    };
    let tips: Vec<String> = items(frame)
        .iter()
        .map(text)
        .map(|tip| match tip.split_once(':') {
            Some(("request_policy", p)) => {
                format!("Tip::RequestPolicy(RequestPolicy::{})", camel(p))
            }
            Some(("response_policy", p)) => {
                format!("Tip::ResponsePolicy(ResponsePolicy::{})", camel(p))
            }
            None if tip == "nondeterministic_output" => "Tip::NondeterministicOutput".to_owned(),
            None if tip == "nondeterministic_output_order" => {
                "Tip::NondeterministicOutputOrder".to_owned()
            }
            _ => panic!("unknown tip {tip}"),
        })
        .collect();
    if tips.is_empty() {
        return "Tips::NONE".to_owned();
    }
    format!("Tips(&[{}])", tips.join(", "))
}

/// One `CommandSpec` literal, its subcommands sorted by name.
fn command(frame: &F<'_>, out: &mut String, indent: usize) {
    let f = items(frame);
    let pad = " ".repeat(indent);
    let flags: Vec<&str> = items(&f[2]).iter().map(text).collect();
    let acl: Vec<&str> = items(&f[6]).iter().map(text).collect();
    writeln!(out, "{pad}CommandSpec {{").unwrap();
    writeln!(out, "{pad}    name: {:?},", text(&f[0])).unwrap();
    writeln!(out, "{pad}    arity: {},", int(&f[1])).unwrap();
    let flags = bits("CommandFlags", &flags, |n| {
        redis_cluster_route::CommandFlags::from_name(n).is_some()
    });
    writeln!(out, "{pad}    flags: {flags},").unwrap();
    let legacy = (int(&f[3]), int(&f[4]), int(&f[5]));
    writeln!(out, "{pad}    legacy_keys: {legacy:?},").unwrap();
    let acl = bits("AclCategories", &acl, |n| {
        redis_cluster_route::AclCategories::from_name(n).is_some()
    });
    writeln!(out, "{pad}    acl_categories: {acl},").unwrap();
    writeln!(out, "{pad}    tips: {},", tips(&f[7])).unwrap();
    let specs: Vec<String> = items(&f[8]).iter().map(key_spec).collect();
    if specs.is_empty() {
        writeln!(out, "{pad}    key_specs: &[],").unwrap();
    } else {
        writeln!(out, "{pad}    key_specs: &[").unwrap();
        for spec in specs {
            writeln!(out, "{pad}        {spec},").unwrap();
        }
        writeln!(out, "{pad}    ],").unwrap();
    }
    let mut subs: Vec<&F<'_>> = match &f[9] {
        Frame::NullArray | Frame::Null => Vec::new(),
        other => items(other).iter().collect(),
    };
    subs.sort_by_key(|sub| text(&items(sub)[0]));
    if subs.is_empty() {
        writeln!(out, "{pad}    subcommands: &[],").unwrap();
    } else {
        writeln!(out, "{pad}    subcommands: &[").unwrap();
        for sub in subs {
            command(sub, out, indent + 8);
        }
        writeln!(out, "{pad}    ],").unwrap();
    }
    writeln!(out, "{pad}}},").unwrap();
}

/// The module for one server's `COMMAND` reply.
fn generate(server: &str, folder: &str, reply: &F<'_>) -> String {
    let mut commands: Vec<&F<'_>> = items(reply).iter().collect();
    commands.sort_by_key(|c| text(&items(c)[0]));
    let mut out = format!(
        "//! The commands of {server}, generated from its `COMMAND` reply\n\
         //! (`tests/vectors/commands/{folder}/command.resp2`) by `tests/table.rs`. Do not edit.\n\
         \n\
         use crate::spec::*;\n\
         \n\
         /// Every command, sorted by name.\n\
         pub(crate) const COMMANDS: &[CommandSpec] = &[\n"
    );
    for c in commands {
        command(c, &mut out, 4);
    }
    out.push_str("];\n");
    out
}

#[test]
fn generated_tables_match_the_servers_replies() {
    let regenerate = std::env::var_os("REGENERATE_TABLES").is_some();
    for (server, folder, module, _) in SERVERS {
        let resp2 = std::fs::read(vectors(folder).join("command.resp2")).expect("command.resp2");
        let resp3 = std::fs::read(vectors(folder).join("command.resp3")).expect("command.resp3");
        let generated = generate(server, folder, &decode(&resp2));
        assert_eq!(
            generated,
            generate(server, folder, &decode(&resp3)),
            "{server}: RESP2 and RESP3 replies describe different tables"
        );
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("src/table")
            .join(module);
        if regenerate {
            std::fs::write(&path, &generated).expect("write the table");
            continue;
        }
        let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            checked_in == generated,
            "{} differs from what {server}'s reply generates; run \
             REGENERATE_TABLES=1 cargo test -p redis-cluster-route --test table",
            path.display()
        );
    }
}

/// Sorts an entry's subcommands by name, the order the table gives them; the server's is its
/// hash table's, which changes from run to run.
fn sorted_subcommands<'a>(entry: &F<'a>) -> F<'a> {
    let mut entry = entry.clone();
    if let Frame::Array(fields) = &mut entry {
        if let Some(Frame::Array(subs)) = fields.get_mut(9) {
            subs.sort_by_key(|sub| text(&items(sub)[0]).to_owned());
        }
    }
    entry
}

#[test]
fn command_entries_encode_to_the_servers_bytes() {
    for (server, folder, _, table) in SERVERS {
        for (file, resp3) in [("command.resp2", false), ("command.resp3", true)] {
            let bytes = std::fs::read(vectors(folder).join(file)).expect("a COMMAND reply");
            let reply = decode(&bytes);
            let entries = items(&reply);
            assert_eq!(entries.len(), table.commands().len(), "{server} {file}");
            for entry in entries {
                let name = text(&items(entry)[0]);
                let spec = table.command(name.as_bytes()).expect("in the table");
                let (mut theirs, mut ours) = (Vec::new(), Vec::new());
                redis_resp::encode(&sorted_subcommands(entry), &mut theirs);
                redis_resp::encode(&table.info(spec, resp3), &mut ours);
                assert!(
                    theirs == ours,
                    "{server} {file} {name}:\n{}\n{}",
                    String::from_utf8_lossy(&theirs).escape_debug(),
                    String::from_utf8_lossy(&ours).escape_debug()
                );
            }
        }
    }
}

#[test]
fn every_name_of_command_list_is_in_the_table() {
    for (server, folder, _, table) in SERVERS {
        let bytes = std::fs::read(vectors(folder).join("command-list.resp2")).expect("a reply");
        let reply = decode(&bytes);
        let mut theirs: Vec<&str> = items(&reply).iter().map(text).collect();
        theirs.sort_unstable();
        let mut ours: Vec<&str> = table.all().map(|spec| spec.name).collect();
        ours.sort_unstable();
        assert_eq!(theirs, ours, "{server}");
        for name in theirs {
            let upper = name.to_ascii_uppercase();
            let spec = table.by_full_name(upper.as_bytes());
            assert_eq!(spec.map(|spec| spec.name), Some(name), "{server}");
        }
    }
}

/// The real `INFO server` of each of the four servers names the table made from that
/// server's own `COMMAND` reply.
#[test]
fn each_real_info_server_picks_its_own_table() {
    for (_, folder, _, table) in SERVERS {
        let path = vectors(folder).join("info-server.txt");
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let (name, version) = server_of_info(&text);
        let chosen = CommandTable::for_server(name, version);
        assert_eq!(chosen.server, table.server, "{folder}: {name} {version}");
    }
}
