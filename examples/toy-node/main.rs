//! A toy Redis Cluster node: the crates wired to sockets, timers and files (issue #6). The
//! cluster bus, the CLUSTER commands, the command table and the redirect decisions are the
//! crates' work; this example owns the sockets, the clock, nodes.conf and a keyspace of
//! strings, lists and hashes.
//!
//! ```text
//! cargo run --example toy-node -- --port 7000 [--cluster-port 17000] [--dir DIR]
//!     [--cluster-config-file nodes-7000.conf] [--cluster-node-timeout 15000]
//!     [--cluster-announce-hostname HOST] [--requirepass PASSWORD] [--loglevel warning]
//!     [CONFIG-FILE]
//! ```
//!
//! A configuration file, as redis-server's, holds the same directives one per line
//! (`port 7000`, `cluster-node-timeout 5000`, …); the command line overrides it.
//!
//! It serves the bus (MEET, gossip, failure detection, failover as the state machine drives
//! them), the client commands of `commands.rs` on the keyspace of `db.rs`, DUMP / RESTORE
//! payloads (`dump.rs`), MIGRATE, and replication between toy nodes (`replication.rs`).

mod commands;
mod db;

const USAGE: &str = "Usage: toy-node [CONFIG-FILE] [--port 6379] [--cluster-port PORT+10000]
                [--dir DIR] [--cluster-config-file nodes-PORT.conf]
                [--cluster-node-timeout 15000] [--cluster-announce-hostname HOST]
                [--requirepass PASSWORD] [--loglevel debug|verbose|notice|warning]
       toy-node -v or --version
       toy-node -h or --help

A configuration file holds the same directives one per line (port 7000, ...); the command
line overrides it.";
mod dump;
mod float;
mod node;
mod replication;

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
    let started = match node::Options::parse(&args) {
        Ok(options) => node::start(&options).await,
        Err(e) => Err(e),
    };
    if let Err(e) = started {
        eprintln!("toy-node: {e}");
        std::process::exit(1);
    }
    std::future::pending::<()>().await;
}
