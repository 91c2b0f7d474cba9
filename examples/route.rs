//! Shows how `redis-cluster-route` sees a command: its keys, their slots, and how a proxy
//! routes it, splits it and merges its replies.
//!
//! ```text
//! cargo run --example route -- MSET a 1 b 2
//! cargo run --example route -- --server valkey-9.1.2 DELIFEQ k v
//! echo '["474554","666f6f"]' | cargo run --example route -- --server redis-8.2.3 --batch
//! ```
//!
//! `--server NAME-VERSION` picks the table (`redis-7.0.15`, the default, `redis-8.2.3`,
//! `valkey-8.1.8`, `valkey-9.1.2`, or any version: the nearest older table of that server);
//! `--valkey` is `--server valkey-8.1.8`. `--batch` reads one JSON array of hex-encoded
//! arguments per line and prints one JSON object per line: `{"keys_hex": [...], "slots":
//! [...]}`, or `{"error": "..."}` with the text `COMMAND GETKEYS` answers, for scripted
//! comparisons with a server.

#[path = "../crates/redis-cluster-tools/src/exit.rs"]
mod exit;

use std::io::{self, BufRead, Write};

use redis_cluster_proto::hash_slot::key_slot;
use redis_cluster_proto::route::{CommandTable, Merge, Route};
use serde_json::{Value, json};

const USAGE: &str = "usage: route [--server NAME-VERSION | --valkey] COMMAND [ARG ...]\n       \
                     route [--server NAME-VERSION | --valkey] --batch";

fn main() {
    exit::exit("route", run());
}

fn run() -> io::Result<()> {
    let mut table = CommandTable::REDIS_7_0;
    let mut batch_mode = false;
    // The options, then the command's words as they are (a word may start with a dash).
    let mut words: Vec<std::ffi::OsString> = Vec::new();
    let mut parser = lexopt::Parser::from_env();
    while let Some(arg) = parser.next().map_err(exit::lexopt)? {
        use lexopt::Arg::{Long, Short, Value};
        match arg {
            Short('h') | Long("help") => {
                println!("{USAGE}");
                return Ok(());
            }
            Short('V') | Long("version") => {
                println!("route {}", env!("CARGO_PKG_VERSION"));
                return Ok(());
            }
            Long("valkey") => table = CommandTable::VALKEY_8_1,
            Long("server") => {
                let server = parser.value().map_err(exit::lexopt)?;
                let server = server.to_string_lossy();
                let Some((name, version)) = server.rsplit_once('-') else {
                    return Err(exit::usage(format!(
                        "--server {server:?}: not NAME-VERSION (redis-8.2.3)\n{USAGE}"
                    )));
                };
                table = CommandTable::for_server(name, version);
            }
            Long("batch") => batch_mode = true,
            Value(command) => {
                words.push(command);
                words.extend(parser.raw_args().map_err(exit::lexopt)?);
            }
            other => return Err(exit::usage(format!("{}\n{USAGE}", other.unexpected()))),
        }
    }
    if batch_mode {
        if !words.is_empty() {
            return Err(exit::usage(format!("--batch takes no command\n{USAGE}")));
        }
        return batch(table);
    }
    let args: Vec<String> = words
        .into_iter()
        .map(|word| word.to_string_lossy().into_owned())
        .collect();
    if args.is_empty() {
        return Err(exit::usage(format!("no command given\n{USAGE}")));
    }
    let mut out = io::BufWriter::new(io::stdout().lock());
    explain(&mut out, table, &args)?;
    out.flush()
}

fn explain(out: &mut impl Write, table: CommandTable, argv: &[String]) -> io::Result<()> {
    let Some(spec) = table.lookup(argv) else {
        let server = table.server;
        return writeln!(
            out,
            "{}: unknown to {server} (a module's command?)",
            argv[0]
        );
    };
    writeln!(
        out,
        "{} (arity {}, flags {:?}, {:?})",
        spec.name, spec.arity, spec.flags, spec.acl_categories
    )?;
    match table.keys(argv) {
        Ok(keys) if keys.is_empty() => writeln!(out, "keys: none")?,
        Ok(keys) => {
            for (at, flags) in keys.with_flags() {
                let slot = u16::from(key_slot(argv[at].as_bytes()));
                writeln!(out, "key {at}: {:?} slot {slot} {flags:?}", argv[at])?;
            }
        }
        Err(e) => writeln!(out, "keys: {e}")?,
    }
    match table.route(argv) {
        Ok(Route::Split(split)) => {
            writeln!(out, "route: split over {} slots", split.parts().len())?;
            for (n, part) in split.parts().iter().enumerate() {
                let sub: Vec<&str> = split.argv(n, argv).map(String::as_str).collect();
                writeln!(out, "  slot {:5}: {}", u16::from(part.slot), sub.join(" "))?;
            }
            writeln!(out, "merge: {}", merge(split.merge_policy()))
        }
        Ok(Route::AllShards(m)) => writeln!(out, "route: every master; merge: {}", merge(m)),
        Ok(Route::AllNodes(m)) => writeln!(out, "route: every node; merge: {}", merge(m)),
        Ok(Route::Slot(slot)) => {
            writeln!(out, "route: the node serving slot {}", u16::from(slot))
        }
        Ok(Route::Any) => writeln!(out, "route: any node"),
        Ok(Route::Special) => writeln!(
            out,
            "route: needs command-specific handling (request_policy:special)"
        ),
        Ok(Route::CrossSlot) => writeln!(out, "route: refused, CROSSSLOT"),
        Err(e) => writeln!(out, "route: {e}"),
    }
}

fn merge(merge: Merge) -> String {
    match merge {
        Merge::Policy(policy) => format!("{policy:?}"),
        Merge::Aggregate => "replies concatenated".into(),
        Merge::ByKey => "replies put back in key order".into(),
    }
}

fn batch(table: CommandTable) -> io::Result<()> {
    let mut out = io::BufWriter::new(io::stdout().lock());
    for line in io::stdin().lock().lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let value = match parse(&line) {
            Some(argv) => match table.command_getkeys(&argv) {
                Ok(keys) => json!({
                    "keys_hex": keys.positions().map(|at| hex(&argv[at])).collect::<Vec<_>>(),
                    "slots": keys.positions().map(|at| u16::from(key_slot(&argv[at]))).collect::<Vec<_>>(),
                }),
                Err(e) => json!({ "error": e.to_string() }),
            },
            None => json!({ "error": "not a JSON array of hex strings" }),
        };
        writeln!(out, "{value}")?;
    }
    out.flush()
}

fn parse(line: &str) -> Option<Vec<Vec<u8>>> {
    let Value::Array(items) = serde_json::from_str(line).ok()? else {
        return None;
    };
    items.iter().map(|item| unhex(item.as_str()?)).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if text.len() % 2 != 0 {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(text.get(at..at + 2)?, 16).ok())
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
