//! `redis-cluster-proxy`: clients talk to it as to one Redis server. In front of a Redis
//! Cluster it is a driver of the `redis-cluster-client` engine, which routes each command by
//! hash slot, follows MOVED / ASK / TRYAGAIN, splits and merges multi-key commands, and keeps
//! each client's replies in the order it asked; in front of Sentinel-managed or fixed masters
//! it shards by slot range; started with nutcracker's command line and YAML file, it takes
//! nutcracker's place. This binary holds sockets, tasks, configuration, logs and the stats
//! port.
//!
//! ```text
//! cargo install --path crates/redis-cluster-proxy
//! redis-cluster-proxy proxy.toml
//! redis-cluster-proxy -c nutcracker.yml   # a twemproxy config, unchanged
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

mod crash;
mod proxy;

use std::time::Duration;

use proxy::log;

/// nutcracker's command line, option for option.
struct Options {
    conf: String,
    test: bool,
    daemonize: bool,
    verbosity: u8,
    output: Option<String>,
    stats_port: Option<u16>,
    stats_addr: String,
    stats_interval: Duration,
    pidfile: Option<String>,
    mbuf: usize,
    threads: usize,
}

const USAGE: &str = "Usage: redis-cluster-proxy [-?hVdDt] [-v verbosity level] [-o output file]
                 [-c conf file] [-s stats port] [-a stats addr]
                 [-i stats interval] [-p pid file] [-m mbuf size]
                 [conf file]

Options (nutcracker's):
  -h, --help             : this help
  -V, --version          : show version and exit
  -t, --test-conf        : test configuration for syntax errors and exit
  -d, --daemonize        : run as a daemon
  -D, --describe-stats   : print stats description and exit
  -v, --verbose=N        : set logging level (default: 5, min: 0, max: 11)
  -o, --output=S         : set logging file (default: stderr)
  -c, --conf-file=S      : set configuration file (YAML as nutcracker's, or TOML)
  -s, --stats-port=N     : set stats monitoring port (default: 22222 for a YAML file)
  -a, --stats-addr=S     : set stats monitoring ip (default: 0.0.0.0)
  -i, --stats-interval=N : set stats aggregation interval in msec (default: 30000 msec)
  -p, --pid-file=S       : set pid file (default: none)
  -m, --mbuf-size=N      : set size of a client read buffer in bytes (default: 16384)
      --threads=N        : worker threads (default: 1, one thread for everything, as
                           nutcracker; more spread clients and backends over N threads)";

const STATS: &str = "pool stats:
  client_eof          \"client connections the client closed\"
  client_err          \"client connections closed on an error\"
  client_connections  \"client connections open now\"
  server_ejects       \"servers taken off the continuum\"
  forward_error       \"requests or parts a server failed\"
  fragments           \"parts of split requests sent\"

server stats:
  server_eof          \"connections the server closed\"
  server_err          \"connections that failed\"
  server_timedout     \"connections dropped on a late reply\"
  server_connections  \"connections open now\"
  server_ejected_at   \"last ejection, in microseconds since the epoch\"
  requests            \"requests sent\"
  request_bytes       \"bytes of requests sent\"
  responses           \"replies received\"
  response_bytes      \"bytes of replies received\"
  in_queue            \"requests waiting to be written\"
  in_queue_bytes      \"bytes of requests waiting to be written\"
  out_queue           \"requests waiting for their reply\"
  out_queue_bytes     \"bytes of requests waiting for their reply\"";

fn fail(text: &str) -> ! {
    eprintln!("redis-cluster-proxy: {text}");
    std::process::exit(1);
}

/// Reads the command line as nutcracker's `getopt_long` does: `-v 6`, `-v6`,
/// `--verbose=6`, `--verbose 6`; a lone path is read as `-c path`.
fn options(args: &[String]) -> Options {
    let mut options = Options {
        conf: "/etc/nutcracker/nutcracker.yml".into(),
        test: false,
        daemonize: false,
        verbosity: log::NOTICE,
        output: None,
        stats_port: None,
        stats_addr: "0.0.0.0".into(),
        stats_interval: Duration::from_millis(30_000),
        pidfile: None,
        mbuf: 16 * 1024,
        threads: 1,
    };
    let mut at = 0;
    while at < args.len() {
        let arg = args[at].as_str();
        at += 1;
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) if arg.starts_with("--") => (flag, Some(value.to_string())),
            _ if arg.len() > 2 && arg.starts_with('-') && !arg.starts_with("--") => {
                (&arg[..2], Some(arg[2..].to_string()))
            }
            _ => (arg, None),
        };
        let short = match flag {
            "--help" => "-h",
            "--version" => "-V",
            "--test-conf" => "-t",
            "--daemonize" => "-d",
            "--describe-stats" => "-D",
            "--verbose" => "-v",
            "--output" => "-o",
            "--conf-file" => "-c",
            "--stats-port" => "-s",
            "--stats-addr" => "-a",
            "--stats-interval" => "-i",
            "--pid-file" => "-p",
            "--mbuf-size" => "-m",
            "--threads" => "--threads",
            other => other,
        };
        let mut value = || -> String {
            if let Some(value) = inline.clone() {
                return value;
            }
            let Some(value) = args.get(at) else {
                fail(&format!("option {flag} requires an argument"));
            };
            at += 1;
            value.clone()
        };
        match short {
            "-h" | "-?" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            "-V" => {
                println!(
                    "This is redis-cluster-proxy-{} (nutcracker-0.5.0 compatible)",
                    env!("CARGO_PKG_VERSION")
                );
                std::process::exit(0);
            }
            "-D" => {
                println!("{STATS}");
                std::process::exit(0);
            }
            "-t" => options.test = true,
            "-d" => options.daemonize = true,
            "-v" => {
                let v = value();
                options.verbosity = match v.parse::<i64>() {
                    Ok(level) => level.clamp(0, i64::from(log::MAX)) as u8,
                    Err(_) => fail(&format!("option -v requires a number, not '{v}'")),
                };
            }
            "-o" => options.output = Some(value()),
            "-c" => options.conf = value(),
            "-s" => {
                let v = value();
                match v.parse::<u16>() {
                    Ok(port) if port > 0 => options.stats_port = Some(port),
                    _ => fail(&format!("option -s value {v} is not a valid port")),
                }
            }
            "-a" => options.stats_addr = value(),
            "-i" => {
                let v = value();
                match v.parse::<u64>() {
                    Ok(ms) if ms > 0 => options.stats_interval = Duration::from_millis(ms),
                    _ => fail(&format!("option -i value {v} is not a valid interval")),
                }
            }
            "-p" => options.pidfile = Some(value()),
            "--threads" => {
                let v = value();
                match v.parse::<usize>() {
                    Ok(n) if (1..=256).contains(&n) => options.threads = n,
                    _ => fail(&format!(
                        "option --threads value {v} is not a number of threads"
                    )),
                }
            }
            "-m" => {
                let v = value();
                match v.parse::<usize>() {
                    Ok(size) if (512..=16 << 20).contains(&size) => options.mbuf = size,
                    _ => fail(&format!("option -m value {v} is not a valid mbuf size")),
                }
            }
            path if !path.starts_with('-') => options.conf = path.to_string(),
            other => {
                eprintln!("redis-cluster-proxy: invalid option -- '{other}'\n{USAGE}");
                std::process::exit(1);
            }
        }
    }
    options
}

/// `-d`: the same command line without `-d`, as a child in a process group of its own with
/// no terminal; this process exits.
fn daemonize() -> ! {
    use std::os::unix::process::CommandExt as _;
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "-d" && a != "--daemonize")
        .collect();
    let exe = std::env::current_exe().unwrap_or_else(|e| fail(&format!("daemonize: {e}")));
    let spawned = std::process::Command::new(exe)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .process_group(0)
        .spawn();
    match spawned {
        Ok(_) => std::process::exit(0),
        Err(e) => fail(&format!("daemonize: {e}")),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let options = options(&args);
    let path = &options.conf;
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) => fail(&format!(
            "configuration file '{path}' syntax is invalid: {e}"
        )),
    };
    let format = proxy::config::Format::of(std::path::Path::new(path), &text);
    let yaml = format == proxy::config::Format::Yaml;
    let mut config = match proxy::Config::load_as(format, &text) {
        Ok(config) => config,
        Err(e) => fail(&format!(
            "configuration file '{path}' syntax is invalid: {e}"
        )),
    };
    if options.test {
        eprintln!("redis-cluster-proxy: configuration file '{path}' syntax is ok");
        return;
    }
    if options.daemonize {
        daemonize();
    }
    config.read_buffer = options.mbuf;
    if let Err(e) = log::init(options.output.as_deref(), options.verbosity) {
        fail(&format!(
            "opening log file '{:?}' failed: {e}",
            options.output
        ));
    }
    crash::log_segfaults();
    if let Some(pidfile) = &options.pidfile {
        // The pid alone, no newline, as nutcracker writes it.
        if let Err(e) = std::fs::write(pidfile, std::process::id().to_string()) {
            fail(&format!("opening pid file '{pidfile}' failed: {e}"));
        }
    }
    // One thread by default: on the 2-core machine this project measures on, a single
    // thread spends 2.5-2.7 µs of CPU per pipelined request where two spend 2.8 µs and serve
    // fewer requests per second (benches/cluster_proxy.sh).
    let runtime = match options.threads {
        1 => tokio::runtime::Builder::new_current_thread(),
        n => {
            let mut builder = tokio::runtime::Builder::new_multi_thread();
            builder.worker_threads(n);
            builder
        }
    }
    .enable_all()
    .build()
    .unwrap_or_else(|e| fail(&format!("cannot start the runtime: {e}")));
    runtime.block_on(async {
        log::write(
            log::NOTICE,
            format_args!(
                "redis-cluster-proxy-{} started on pid {}",
                env!("CARGO_PKG_VERSION"),
                std::process::id()
            ),
        );
        let running = match proxy::start(config).await {
            Ok(running) => running,
            Err(e) => fail(&format!("cannot start: {e}")),
        };
        for (pool, addr) in running.pools.iter().zip(&running.addrs) {
            log::write(
                log::NOTICE,
                format_args!("pool {} listening on {addr}", pool.name),
            );
        }
        // A YAML file means a nutcracker set-up: its stats port is on by default.
        let stats_port = options.stats_port.or(yaml.then_some(22222));
        if let Some(port) = stats_port {
            let addr = format!("{}:{port}", options.stats_addr);
            let pools = running.pools.clone();
            match proxy::serve_stats(&addr, options.stats_interval, pools).await {
                Ok(local) => log::write(log::NOTICE, format_args!("stats on {local}")),
                Err(e) => fail(&format!("failed to listen on stats {addr}: {e}")),
            }
        }
        signals().await;
    });
    if let Some(pidfile) = &options.pidfile {
        let _ = std::fs::remove_file(pidfile);
    }
}

/// Serves SIGHUP (reopen the log), SIGTTIN / SIGTTOU (log level up / down) until SIGINT or
/// SIGTERM.
async fn signals() {
    use tokio::signal::unix::{SignalKind, signal};
    let kinds = [
        SignalKind::hangup(),
        SignalKind::from_raw(21), // SIGTTIN
        SignalKind::from_raw(22), // SIGTTOU
        SignalKind::interrupt(),
        SignalKind::terminate(),
    ];
    let mut streams = Vec::new();
    for kind in kinds {
        match signal(kind) {
            Ok(stream) => streams.push(stream),
            Err(e) => fail(&format!("cannot handle signals: {e}")),
        }
    }
    let [hup, ttin, ttou, int, term] = &mut streams[..] else {
        return;
    };
    loop {
        tokio::select! {
            _ = hup.recv() => {
                log::write(0, format_args!("signal 1 (SIGHUP) received, reopening log file"));
                log::reopen();
            }
            _ = ttin.recv() => {
                log::write(0, format_args!("signal 21 (SIGTTIN) received, up logging level"));
                log::level_up();
            }
            _ = ttou.recv() => {
                log::write(0, format_args!("signal 22 (SIGTTOU) received, down logging level"));
                log::level_down();
            }
            _ = int.recv() => {
                log::write(0, format_args!("signal 2 (SIGINT) received, exiting"));
                return;
            }
            _ = term.recv() => {
                log::write(0, format_args!("signal 15 (SIGTERM) received, exiting"));
                return;
            }
        }
    }
}
