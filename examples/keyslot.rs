//! Prints `key<TAB>slot` for each argument, or, with no argument, for each line of stdin.
//!
//! ```text
//! cargo run --example keyslot -- foo '{user1000}.following'
//! printf 'foo\nbar\n' | cargo run --example keyslot
//! ```
//!
//! Keys are taken as raw bytes. A line of stdin loses its `\n`, and a `\r` before it.
//! `-h` / `--help` and `-V` / `--version` as the first argument answer instead; after `--`
//! every argument is a key. A closed stdout (`keyslot | head`) ends it quietly.

#[path = "../crates/redis-cluster-tools/src/exit.rs"]
mod exit;

use std::io::{self, BufRead, Write};
use std::os::unix::ffi::OsStrExt;

use redis_cluster_proto::hash_slot::key_slot;

const USAGE: &str = "usage: keyslot [--] [KEY ...]   (no key: one per line of stdin)";

fn main() {
    exit::exit("keyslot", run());
}

fn run() -> io::Result<()> {
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    let mut args: Vec<_> = std::env::args_os().skip(1).collect();
    match args.first().and_then(|a| a.to_str()) {
        Some("-h" | "--help") => return writeln!(out, "{USAGE}"),
        Some("-V" | "--version") => {
            return writeln!(out, "keyslot {}", env!("CARGO_PKG_VERSION"));
        }
        Some("--") => {
            args.remove(0);
        }
        _ => {}
    }
    if !args.is_empty() {
        for arg in &args {
            print_slot(&mut out, arg.as_bytes())?;
        }
        return out.flush();
    }
    let mut input = io::stdin().lock();
    let mut line = Vec::new();
    while input.read_until(b'\n', &mut line)? > 0 {
        let key = line.strip_suffix(b"\n").unwrap_or(&line);
        let key = key.strip_suffix(b"\r").unwrap_or(key);
        print_slot(&mut out, key)?;
        line.clear();
    }
    out.flush()
}

fn print_slot(out: &mut impl Write, key: &[u8]) -> io::Result<()> {
    out.write_all(key)?;
    writeln!(out, "\t{}", key_slot(key))
}
