//! The toy proxy: a cluster-aware proxy built from `redis-resp` and `redis-cluster-route`.
//! Clients talk to it as to one Redis server; it routes each command by hash slot to the
//! cluster's nodes, follows MOVED / ASK / TRYAGAIN, splits multi-key commands across slots
//! and merges their replies, and keeps each client's replies in the order it asked.
//!
//! ```text
//! cargo run --release --example toy-proxy -- proxy.toml
//! cargo run --release --example toy-proxy -- -c nutcracker.yml   # a twemproxy config, unchanged
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

/// nutcracker's command line: `-c conf` (YAML, or our TOML), `-t` to test the configuration
/// and exit, `-p pidfile`; `-d`, `-o log`, `-s`, `-a`, `-i`, `-v`, `-m` are accepted (their
/// effects are not reproduced yet). A lone path is read as `-c path`.
fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mut path, mut test, mut pidfile) = (None, false, None);
    let mut at = 0;
    while at < args.len() {
        let flag = args[at].as_str();
        let value = args.get(at + 1).cloned();
        match flag {
            "-c" | "--conf-file" => (path, at) = (value, at + 1),
            "-p" | "--pid-file" => (pidfile, at) = (value, at + 1),
            "-t" | "--test-conf" => test = true,
            "-d" | "--daemonize" => {}
            "-o" | "--output" | "-s" | "--stats-port" | "-a" | "--stats-addr" | "-i"
            | "--stats-interval" | "-v" | "--verbose" | "-m" | "--mbuf-size" => at += 1,
            other if !other.starts_with('-') && path.is_none() => path = Some(other.to_string()),
            other => {
                eprintln!("toy-proxy: invalid option -- '{other}'");
                std::process::exit(1);
            }
        }
        at += 1;
    }
    let Some(path) = path else {
        eprintln!("usage: toy-proxy [-c conf.yml|conf.toml] [-t] [-p pidfile]");
        std::process::exit(2);
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) => {
            eprintln!("toy-proxy: configuration file '{path}' syntax is invalid: {e}");
            std::process::exit(1);
        }
    };
    let config = match proxy::Config::load(&text) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("toy-proxy: configuration file '{path}' syntax is invalid: {e}");
            std::process::exit(1);
        }
    };
    if test {
        eprintln!("toy-proxy: configuration file '{path}' syntax is ok");
        return;
    }
    if let Some(pidfile) = pidfile {
        if let Err(e) = std::fs::write(&pidfile, format!("{}\n", std::process::id())) {
            eprintln!("toy-proxy: cannot write {pidfile}: {e}");
            std::process::exit(1);
        }
    }
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
