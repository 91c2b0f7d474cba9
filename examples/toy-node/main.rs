//! A toy Redis Cluster node: the crates wired to sockets, timers and files (issues #6, #22).
//! The cluster bus, the CLUSTER commands, the command table and the redirect decisions are
//! the crates' work; this example owns the sockets, the clock, the files and a keyspace of
//! strings, lists and hashes.
//!
//! ```text
//! cargo run --example toy-node -- [redis.conf] [--port 7000 --dir DIR --name value ...]
//! ```
//!
//! It is started as redis-server is: a configuration file of redis.conf's directives
//! (`config.rs`: every parameter of Redis 7.0.15), then `--name value` arguments that
//! override it; it logs as the server does (`log.rs`). It serves the bus (MEET, gossip,
//! failure detection, failover as the state machine drives them), the client commands of
//! `commands.rs` on the keyspace of `db.rs`, DUMP / RESTORE payloads and RDB files
//! (`dump.rs`), the append-only file (`aof.rs`), MIGRATE, replication between toy nodes
//! (`replication.rs`), scripts and functions in a Lua subset (`lua.rs`, `scripts.rs`) and
//! pub/sub (`pubsub.rs`).

mod aof;
mod commands;
mod config;
mod db;
mod dump;
mod float;
mod log;
mod lua;
mod node;
mod pubsub;
mod replication;
mod scripts;
mod stream;
mod stream_commands;

const USAGE: &str = "Usage: toy-node [CONFIG-FILE] [--name value ...]
       toy-node -v or --version
       toy-node -h or --help

As redis-server: CONFIG-FILE holds redis.conf's directives, one per line (port 7000,
cluster-node-timeout 5000, ...); each --name value after it overrides the file. Every
parameter of Redis 7.0.15's CONFIG GET * is taken; those the toy does not act on are kept
and logged once.";

use tokio::signal::unix::{SignalKind, signal};

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // As redis-server takes them, first: -h / --help, -v / --version.
    match args.first().map(String::as_str) {
        Some("-h" | "--help") => {
            println!("{USAGE}");
            return;
        }
        Some("-v" | "--version") => {
            println!(
                "toy-node v={} (redis-cluster-proto's toy Redis Cluster node; speaks as Redis \
                 7.0.15)",
                env!("CARGO_PKG_VERSION")
            );
            return;
        }
        _ => {}
    }
    // Every log line is a tracing event; this layer writes them as the server does.
    log::ServerFormat::install();
    let options = match node::Options::parse(&args) {
        Ok(options) => options,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    if options.settings.flag("daemonize") {
        daemonize(&args, &options);
    }
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        eprintln!("toy-node: cannot handle signals");
        std::process::exit(1);
    };
    let node = match node::start(&options).await {
        Ok(node) => node,
        Err(e) => {
            options.log().write(log::Level::Warning, &e);
            std::process::exit(1);
        }
    };
    let name = tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
    };
    node.shutdown(name);
    std::process::exit(0);
}

/// `daemonize yes`: the node goes on in a child of its own, detached from the terminal, with
/// the same arguments (and a pidfile, as the server writes one when daemonized), while this
/// process exits.
fn daemonize(args: &[String], options: &node::Options) {
    let mut child =
        std::process::Command::new(std::env::current_exe().unwrap_or_else(|_| "toy-node".into()));
    child.args(args).args(["--daemonize", "no"]);
    if options.settings.get("pidfile").is_none_or(str::is_empty) {
        child.args(["--pidfile", "/var/run/redis.pid"]);
    }
    let spawned = child
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    match spawned {
        Ok(_) => std::process::exit(0),
        Err(e) => {
            eprintln!("toy-node: cannot daemonize: {e}");
            std::process::exit(1);
        }
    }
}
