//! The toy proxy: a cluster-aware proxy built from `redis-resp` and `redis-cluster-route`.
//! Clients talk to it as to one Redis server; it routes each command by hash slot to the
//! cluster's nodes, follows MOVED / ASK / TRYAGAIN, splits multi-key commands across slots
//! and merges their replies, and keeps each client's replies in the order it asked.
//!
//! ```text
//! cargo run --release --example toy-proxy -- proxy.toml
//! ```
//!
//! The configuration (TOML) is described in `proxy/config.rs`; a minimal one:
//!
//! ```toml
//! [[pool]]
//! name = "cache"
//! listen = "127.0.0.1:7400"
//! seeds = ["127.0.0.1:7000"]
//! ```

mod proxy;

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: toy-proxy <config.toml>");
        std::process::exit(2);
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) => {
            eprintln!("{path}: {e}");
            std::process::exit(2);
        }
    };
    let config = match proxy::Config::parse(&text) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("{path}: {e}");
            std::process::exit(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("cannot start the runtime: {e}");
            std::process::exit(1);
        }
    };
    runtime.block_on(async {
        match proxy::start(config).await {
            Ok(running) => {
                for (pool, addr) in running.pools.iter().zip(&running.addrs) {
                    println!("pool {} listening on {addr}", pool.name);
                }
            }
            Err(e) => {
                eprintln!("cannot start: {e}");
                std::process::exit(1);
            }
        }
        let _ = tokio::signal::ctrl_c().await;
    });
}
