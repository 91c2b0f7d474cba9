//! A local Redis Cluster of toy nodes in one process, formed as `redis-cli --cluster create`
//! forms one, and up until Ctrl-C (issue #6):
//!
//! ```text
//! cargo run --release --example toy-cluster -- [--masters 3] [--replicas 1] [--port 7000]
//!     [--cluster-node-timeout 5000] [--dir DIR] [--verbose]
//! redis-cli -c -p 7000
//! ```
//!
//! Node `i` serves clients on `port + i` and the cluster bus on `port + i + 10000`, each
//! exactly as a `toy-node` process would (the same code, run here on one runtime). The
//! cluster is formed through the nodes' client ports with the commands redis-cli sends:
//! CLUSTER ADDSLOTSRANGE on the masters (the same split of the 16384 slots), CLUSTER
//! SET-CONFIG-EPOCH, CLUSTER MEET, then CLUSTER REPLICATE on the replicas once every node
//! knows every other; it is ready when every node says `cluster_state:ok`. The nodes.conf
//! files go to `DIR` (by default a directory under the system's temporary directory,
//! removed at the end). Nothing of the user's is deleted: `DIR` must be new, empty, or one
//! toy-cluster marked as its own (a `.toy-cluster` file); at start only the files an earlier
//! run wrote there (`nodes-PORT.conf`) are removed, and a directory that holds anything
//! else without the mark is refused.

#[path = "../toy-node/aof.rs"]
mod aof;
#[path = "../toy-node/commands.rs"]
mod commands;
#[path = "../toy-node/config.rs"]
mod config;
#[path = "../toy-node/db.rs"]
mod db;
#[path = "../toy-node/dump.rs"]
mod dump;
#[path = "../toy-node/float.rs"]
mod float;
#[path = "../toy-node/log.rs"]
mod log;
#[path = "../toy-node/lua.rs"]
mod lua;
#[path = "../toy-node/node.rs"]
mod node;
#[path = "../toy-node/pubsub.rs"]
mod pubsub;
#[path = "../toy-node/replication.rs"]
mod replication;
#[path = "../toy-node/scripts.rs"]
mod scripts;
#[path = "../toy-node/stream.rs"]
mod stream;
#[path = "../toy-node/stream_commands.rs"]
mod stream_commands;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use redis_cluster_proto::resp::{Decoder, Frame, encode_command};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The slots redis-cli gives each of `masters` masters: equal shares, rounded as it rounds
/// them (3 masters: 0-5460, 5461-10922, 10923-16383).
fn slot_ranges(masters: usize) -> Vec<(u16, u16)> {
    let share = 16384.0 / masters as f64;
    let mut ranges = Vec::with_capacity(masters);
    let (mut first, mut cursor) = (0i64, 0.0f64);
    for i in 0..masters {
        let mut last = (cursor + share - 1.0).round() as i64;
        if last > 16383 || i == masters - 1 {
            last = 16383;
        }
        last = last.max(first);
        ranges.push((first as u16, last as u16));
        first = last + 1;
        cursor += share;
    }
    ranges
}

/// A connection to one node's client port.
struct Conn {
    port: u16,
    stream: TcpStream,
    decoder: Decoder,
    buf: BytesMut,
}

impl Conn {
    async fn open(port: u16) -> Result<Self, String> {
        let stream = TcpStream::connect(("127.0.0.1", port))
            .await
            .map_err(|e| format!("{port}: {e}"))?;
        Ok(Self {
            port,
            stream,
            decoder: Decoder::new(),
            buf: BytesMut::new(),
        })
    }

    /// Sends one command and reads its reply; an error reply is an error.
    async fn call(&mut self, args: &[&str]) -> Result<String, String> {
        let mut out = Vec::new();
        encode_command(args, &mut out);
        let fail = |e: std::io::Error| format!("{}: {e}", self.port);
        self.stream.write_all(&out).await.map_err(fail)?;
        loop {
            match self.decoder.decode(&mut self.buf) {
                Ok(Some(Frame::SimpleError(e))) => {
                    return Err(format!(
                        "{}: {}: {}",
                        self.port,
                        args.join(" "),
                        String::from_utf8_lossy(&e)
                    ));
                }
                Ok(Some(Frame::SimpleString(text) | Frame::BulkString(text))) => {
                    return Ok(String::from_utf8_lossy(&text).into_owned());
                }
                Ok(Some(other)) => return Ok(format!("{other:?}")),
                Ok(None) => {}
                Err(e) => return Err(format!("{}: bad reply: {e}", self.port)),
            }
            let n = self.stream.read_buf(&mut self.buf).await;
            match n {
                Ok(0) => return Err(format!("{}: connection closed", self.port)),
                Ok(_) => {}
                Err(e) => return Err(format!("{}: {e}", self.port)),
            }
        }
    }
}

/// Asks every node the same question until `done` holds of every answer, for at most 30 s.
async fn wait_all(
    conns: &mut [Conn],
    args: &[&str],
    what: &str,
    done: impl Fn(&str) -> bool,
) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    for conn in conns {
        loop {
            let answer = conn.call(args).await?;
            if done(&answer) {
                break;
            }
            if Instant::now() > deadline {
                return Err(format!("{}: {what} never happened:\n{answer}", conn.port));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    Ok(())
}

/// Forms the cluster of the nodes on `ports`: the first `masters` are masters, the others
/// replicas, given out to the masters in turn.
async fn form(ports: &[u16], masters: usize) -> Result<(), String> {
    let mut conns = Vec::with_capacity(ports.len());
    for &port in ports {
        conns.push(Conn::open(port).await?);
    }
    for (conn, (first, last)) in conns.iter_mut().zip(slot_ranges(masters)) {
        let (first, last) = (first.to_string(), last.to_string());
        conn.call(&["CLUSTER", "ADDSLOTSRANGE", &first, &last])
            .await?;
    }
    for (epoch, conn) in conns.iter_mut().enumerate() {
        let epoch = (epoch + 1).to_string();
        conn.call(&["CLUSTER", "SET-CONFIG-EPOCH", &epoch]).await?;
    }
    let first = ports[0].to_string();
    for conn in &mut conns[1..] {
        conn.call(&["CLUSTER", "MEET", "127.0.0.1", &first]).await?;
    }
    let total = ports.len();
    let known = |nodes: &str| {
        nodes.lines().count() == total && !nodes.contains("handshake") && !nodes.contains("noaddr")
    };
    wait_all(
        &mut conns,
        &["CLUSTER", "NODES"],
        "every node knowing every other",
        known,
    )
    .await?;
    let mut ids = Vec::with_capacity(masters);
    for conn in &mut conns[..masters] {
        ids.push(conn.call(&["CLUSTER", "MYID"]).await?);
    }
    for (n, conn) in conns[masters..].iter_mut().enumerate() {
        conn.call(&["CLUSTER", "REPLICATE", &ids[n % masters]])
            .await?;
    }
    let replicas = total - masters;
    let settled = |nodes: &str| {
        nodes.lines().filter(|l| l.contains("slave")).count() == replicas
            && nodes.lines().filter(|l| l.contains("master")).count() == masters
    };
    wait_all(
        &mut conns,
        &["CLUSTER", "NODES"],
        "every replica seen",
        settled,
    )
    .await?;
    let ok = |info: &str| info.contains("cluster_state:ok");
    wait_all(&mut conns, &["CLUSTER", "INFO"], "cluster_state:ok", ok).await
}

struct Plan {
    masters: usize,
    replicas: usize,
    port: u16,
    node_timeout: u64,
    dir: Option<PathBuf>,
    verbose: bool,
}

fn parse(args: &[String]) -> Result<Plan, String> {
    let mut plan = Plan {
        masters: 3,
        replicas: 1,
        port: 7000,
        node_timeout: 5000,
        dir: None,
        verbose: false,
    };
    let mut args = lexopt::Parser::from_args(args);
    while let Some(arg) = args.next().map_err(|e| e.to_string())? {
        use lexopt::Arg::Long;
        let name = match arg {
            Long("verbose") => {
                plan.verbose = true;
                continue;
            }
            Long(name @ ("masters" | "replicas" | "port" | "cluster-node-timeout" | "dir")) => {
                format!("--{name}")
            }
            other => return Err(other.unexpected().to_string()),
        };
        let value = args.value().map_err(|e| e.to_string())?;
        if name == "--dir" {
            plan.dir = Some(PathBuf::from(value));
            continue;
        }
        let value = value.to_string_lossy();
        let number = || format!("{name}: not a number: {value:?}");
        match name.as_str() {
            "--masters" => plan.masters = value.parse().map_err(|_| number())?,
            "--replicas" => plan.replicas = value.parse().map_err(|_| number())?,
            "--port" => plan.port = value.parse().map_err(|_| number())?,
            _ => plan.node_timeout = value.parse().map_err(|_| number())?,
        }
    }
    if plan.masters == 0 || plan.masters > 16384 {
        return Err(String::from("--masters must be between 1 and 16384"));
    }
    let nodes = plan.masters * (plan.replicas + 1);
    if usize::from(plan.port) + nodes + 10_000 > usize::from(u16::MAX) {
        return Err(format!("{nodes} nodes from port {} do not fit", plan.port));
    }
    Ok(plan)
}

/// The file that marks a directory as toy-cluster's own.
const MARK: &str = ".toy-cluster";

/// Whether `name` is a file the nodes of a run write: `nodes-PORT.conf`, `dump-PORT.rdb`
/// (SAVE), or the `.tmp` either is written to before the rename.
fn ours(name: &str) -> bool {
    let name = name.strip_suffix(".tmp").unwrap_or(name);
    let port = name
        .strip_prefix("nodes-")
        .and_then(|rest| rest.strip_suffix(".conf"))
        .or_else(|| name.strip_prefix("dump-")?.strip_suffix(".rdb"));
    port.is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// Makes `dir` ready for the nodes' files. A new or empty directory is marked as ours; in a
/// marked one the files of an earlier run are removed; anything else is refused, so that no
/// file of the user's is ever deleted. The default directory (under the temporary one, named
/// after the port) is taken as ours also unmarked when it holds nothing but nodes' files:
/// what a run of a toy-cluster from before the mark left.
fn prepare(dir: &Path, default: bool) -> Result<(), String> {
    let show = dir.display();
    std::fs::create_dir_all(dir).map_err(|e| format!("{show}: {e}"))?;
    let names: Vec<String> = std::fs::read_dir(dir)
        .map_err(|e| format!("{show}: {e}"))?
        .map(|entry| entry.map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{show}: {e}"))?;
    let marked = names.iter().any(|n| n == MARK) || default && names.iter().all(|n| ours(n));
    if !names.is_empty() && !marked {
        let mut shown: Vec<&str> = names.iter().map(String::as_str).collect();
        shown.sort_unstable();
        shown.truncate(3);
        return Err(format!(
            "{show} is not empty ({}{}) and is not a directory toy-cluster made: nothing in it \
             is deleted; give --dir a new or empty directory",
            shown.join(", "),
            if names.len() > 3 { ", …" } else { "" }
        ));
    }
    for name in names.iter().filter(|n| ours(n)) {
        let path = dir.join(name);
        std::fs::remove_file(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    std::fs::write(
        dir.join(MARK),
        "made by toy-cluster: it removes only nodes-PORT.conf and dump-PORT.rdb here\n",
    )
    .map_err(|e| format!("{}: {e}", dir.join(MARK).display()))
}

/// Removes what the run wrote in `dir`, the mark, and `dir` itself once empty.
fn clean(dir: &Path) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if ours(&name) || name == MARK {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
    let _ = std::fs::remove_dir(dir);
}

async fn run(plan: &Plan) -> Result<(PathBuf, Vec<u16>, Vec<node::Handle>), String> {
    let dir = plan
        .dir
        .clone()
        .unwrap_or_else(|| std::env::temp_dir().join(format!("toy-cluster-{}", plan.port)));
    prepare(&dir, plan.dir.is_none())?;
    let total = plan.masters * (plan.replicas + 1);
    let ports: Vec<u16> = (0..total as u16).map(|i| plan.port + i).collect();
    let mut nodes = Vec::with_capacity(ports.len());
    for &port in &ports {
        let args: Vec<String> = [
            "--port".into(),
            port.to_string(),
            "--cluster-port".into(),
            (port + 10_000).to_string(),
            "--cluster-node-timeout".into(),
            plan.node_timeout.to_string(),
            "--cluster-config-file".into(),
            format!("nodes-{port}.conf"),
            // Each node its own file; none saved at shutdown: a run starts afresh.
            "--dbfilename".into(),
            format!("dump-{port}.rdb"),
            "--save".into(),
            String::new(),
            "--dir".into(),
            dir.display().to_string(),
            "--loglevel".into(),
            String::from(if plan.verbose { "notice" } else { "warning" }),
        ]
        .into();
        nodes.push(node::start(&node::Options::parse(&args)?).await?);
    }
    form(&ports, plan.masters).await?;
    Ok((dir, ports, nodes))
}

fn main() {
    // The scripts' interpreter recurses on the native stack, to a bounded depth that a debug
    // build's frames need more than tokio's 2 MiB worker stacks for: 8 MiB, as the main
    // thread has.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .thread_stack_size(8 << 20)
        .enable_all()
        .build();
    match runtime {
        Ok(runtime) => runtime.block_on(cluster_main()),
        Err(e) => {
            eprintln!("toy-cluster: no runtime: {e}");
            std::process::exit(1);
        }
    }
}

async fn cluster_main() {
    // The nodes' log lines are tracing events; this layer writes them as the server does,
    // each to its node's logfile (none here: stdout), at the `--verbose` level or above.
    log::ServerFormat::install();
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("-h" | "--help") => {
            println!(
                "usage: toy-cluster [--masters 3] [--replicas 1] [--port 7000] \
                 [--cluster-node-timeout 5000] [--dir DIR] [--verbose]\n\n\
                 DIR must be new, empty, or one toy-cluster made (it holds a .toy-cluster \
                 file): nothing else in it is ever deleted."
            );
            return;
        }
        Some("-v" | "-V" | "--version") => {
            println!("toy-cluster {}", env!("CARGO_PKG_VERSION"));
            return;
        }
        _ => {}
    }
    let plan = match parse(&args) {
        Ok(plan) => plan,
        Err(e) => {
            eprintln!("toy-cluster: {e}");
            std::process::exit(2);
        }
    };
    let (dir, ports, nodes) = match run(&plan).await {
        Ok(started) => started,
        Err(e) => {
            eprintln!("toy-cluster: {e}");
            std::process::exit(1);
        }
    };
    let last = ports.last().copied().unwrap_or(plan.port);
    println!(
        "toy cluster ready: {} masters with {} replica(s) each on 127.0.0.1:{}-{last}, \
         cluster_state:ok\n\n    redis-cli -c -p {}\n\nnodes.conf files in {}; Ctrl-C stops it.",
        plan.masters,
        plan.replicas,
        plan.port,
        plan.port,
        dir.display()
    );
    // Ctrl-C, or a SIGTERM from `kill` or `timeout`.
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    let signal = tokio::select! {
        _ = tokio::signal::ctrl_c() => "SIGINT",
        Some(()) = async { term.as_mut()?.recv().await } => "SIGTERM",
    };
    // Each node saves its nodes.conf, as a server does on the signal.
    for node in &nodes {
        node.shutdown(signal);
    }
    if plan.dir.is_none() {
        clean(&dir);
    }
}
