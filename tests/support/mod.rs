//! Real peers for interop tests: a `redis-server` of the test's own, and a minimal client.
//!
//! A server gets ports of its own on 127.0.0.1 and a scratch directory, and is killed by PID when
//! its [`RedisServer`] is dropped, which happens on a failing assertion too. Every read from it is
//! bounded in time. A missing `redis-server` fails the test: `.ci/test` installs it.

#![allow(dead_code, unreachable_pub)] // each test binary uses a different part of this module

use std::ffi::OsStr;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use redis_cluster_proto::resp::{Decoder, Frame, encode_command};

/// How long a server may take to answer PING after it is started.
const START_TIMEOUT: Duration = Duration::from_secs(10);
/// How long any one reply may take.
const READ_TIMEOUT: Duration = Duration::from_secs(30);

/// A `redis-server` child process, killed on drop.
pub struct RedisServer {
    child: Child,
    port: u16,
    /// The cluster bus port; 0 for a standalone server.
    bus_port: u16,
    dir: PathBuf,
    /// How it was started: the binary and every argument, for [`RedisServer::restart`].
    command: Vec<std::ffi::OsString>,
}

impl RedisServer {
    /// Starts a cluster-enabled server with no persistence, plus `extra` config arguments
    /// (`["--name", "value", ...]`). Retries with new ports if another process took them.
    pub fn start_cluster(extra: &[&str]) -> Self {
        Self::start(true, extra)
    }

    /// Starts a standalone server with no persistence, plus `extra` config arguments.
    pub fn start_standalone(extra: &[&str]) -> Self {
        Self::start(false, extra)
    }

    /// Starts a Sentinel (`redis-server <conf> --sentinel`) monitoring the master on
    /// 127.0.0.1:`master_port` as `mymaster`, quorum 1, down after one second.
    pub fn start_sentinel(master_port: u16) -> Self {
        let conf = format!(
            "sentinel monitor mymaster 127.0.0.1 {master_port} 1\n\
             sentinel down-after-milliseconds mymaster 1000\n\
             sentinel failover-timeout mymaster 10000\n"
        );
        Self::start_with(Mode::Sentinel(conf), &[])
    }

    /// Starts a Sentinel with the given config file contents.
    pub fn start_sentinel_with(conf: String) -> Self {
        Self::start_with(Mode::Sentinel(conf), &[])
    }

    /// Starts a cluster-mode server whose nodes.conf is `conf(port, bus_port)`, written before
    /// it starts, so that the server loads it.
    pub fn start_cluster_with_conf(conf: impl Fn(u16, u16) -> String + 'static) -> Self {
        Self::start_with(Mode::ClusterConf(Box::new(conf)), &[])
    }

    fn start(cluster: bool, extra: &[&str]) -> Self {
        let mode = if cluster {
            Mode::Cluster
        } else {
            Mode::Standalone
        };
        Self::start_with(mode, extra)
    }

    fn start_with(mode: Mode, extra: &[&str]) -> Self {
        let cluster = matches!(mode, Mode::Cluster | Mode::ClusterConf(_));
        let binary = std::env::var("REDIS_SERVER").unwrap_or_else(|_| "redis-server".into());
        let mut last_error = String::new();
        for attempt in 0..5 {
            let (port, bus_port) = (free_port(), free_port());
            let dir = std::env::temp_dir().join(format!(
                "redis-cluster-proto-test-{}-{port}-{attempt}",
                std::process::id()
            ));
            std::fs::create_dir_all(&dir).expect("create the server's scratch directory");
            let mut args: Vec<String> = Vec::new();
            if let Mode::Sentinel(conf) = &mode {
                // A Sentinel rewrites its config file: it must be a file of its own.
                let path = dir.join("sentinel.conf");
                std::fs::write(&path, conf).expect("write sentinel.conf");
                args.push(path.display().to_string());
                args.push("--sentinel".into());
            } else {
                args.extend(["--save", "", "--appendonly", "no"].map(String::from));
            }
            if let Mode::ClusterConf(conf) = &mode {
                std::fs::write(dir.join("nodes.conf"), conf(port, bus_port))
                    .expect("write nodes.conf");
            }
            args.extend(
                ["--port", &port.to_string(), "--bind", "127.0.0.1"]
                    .into_iter()
                    .chain(["--daemonize", "no", "--logfile", "redis.log"])
                    .map(String::from),
            );
            if cluster {
                let bus_port = bus_port.to_string();
                args.extend(
                    ["--cluster-enabled", "yes", "--cluster-port", &bus_port]
                        .into_iter()
                        .chain(["--cluster-config-file", "nodes.conf"])
                        .map(String::from),
                );
            }
            let mut command: Vec<std::ffi::OsString> = vec![binary.clone().into()];
            command.extend(args.iter().map(Into::into));
            command.extend(["--dir".into(), dir.clone().into_os_string()]);
            command.extend(extra.iter().map(Into::into));
            let child = spawn_server(&command).unwrap_or_else(|e| {
                panic!("cannot run {binary:?} ({e}); `bash .ci/test` installs redis-server")
            });
            let bus_port = if cluster { bus_port } else { 0 };
            let mut server = Self {
                child,
                port,
                bus_port,
                dir,
                command,
            };
            match server.wait_ready() {
                Ok(()) => return server,
                Err(e) => last_error = e,
            }
        }
        panic!("redis-server did not start: {last_error}");
    }

    /// Kills the server with SIGKILL, as a crash would, and reaps it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts the killed server again, as it was started, on its ports and from its files
    /// (nodes.conf, an append-only file), and waits until it answers PING.
    pub fn restart(&mut self) {
        self.kill();
        self.child = spawn_server(&self.command).expect("start redis-server again");
        if let Err(e) = self.wait_ready() {
            panic!("redis-server did not start again: {e}");
        }
    }

    /// The server's process id (for signals: SIGSTOP to make it hang).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The client port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's scratch directory (its nodes.conf, its log).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The cluster bus port (0 for a standalone server).
    pub fn bus_port(&self) -> u16 {
        self.bus_port
    }

    /// A new client connection.
    pub fn client(&self) -> Client {
        Client::connect(self.port)
    }

    /// A new raw connection, with the same time bounds as a [`Client`].
    pub fn stream(&self) -> TcpStream {
        bounded(TcpStream::connect(("127.0.0.1", self.port)).expect("connect to redis-server"))
    }

    fn wait_ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + START_TIMEOUT;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                let mut stderr = String::new();
                if let Some(mut pipe) = self.child.stderr.take() {
                    let _ = pipe.read_to_string(&mut stderr);
                }
                let log = std::fs::read_to_string(self.dir.join("redis.log")).unwrap_or_default();
                return Err(format!("exited with {status}: {stderr}{log}"));
            }
            // A connection reset or a wrong answer is not ready yet. Another process's
            // listener on a port this one failed to bind answers too, before the child has
            // exited (a test once sent its cluster's slots to another test's node): the
            // server must be this child.
            let pid = self.child.id();
            if TcpStream::connect(("127.0.0.1", self.port)).is_ok_and(|s| is_process(s, pid)) {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err(format!(
            "no PONG on port {} within {START_TIMEOUT:?}",
            self.port
        ))
    }
}

/// Starts `command` (a server binary and its arguments), its stderr kept for errors.
fn spawn_server(command: &[std::ffi::OsString]) -> std::io::Result<Child> {
    Command::new(&command[0])
        .args(&command[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        // `Child::kill` sends SIGKILL to this child's PID; `wait` reaps it.
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// What a started server is.
enum Mode {
    Standalone,
    Cluster,
    /// In cluster mode, with a nodes.conf made from its ports.
    ClusterConf(Box<dyn Fn(u16, u16) -> String>),
    /// A Sentinel, with its config file's contents.
    Sentinel(String),
}

/// `stream` with every read and write bounded by [`READ_TIMEOUT`].
fn bounded(stream: TcpStream) -> TcpStream {
    stream
        .set_read_timeout(Some(READ_TIMEOUT))
        .expect("set read timeout");
    stream
        .set_write_timeout(Some(READ_TIMEOUT))
        .expect("set write timeout");
    stream
}

/// Whether `stream` answers PING with PONG and is the server of process `pid` (its `INFO
/// server`'s `process_id`); any I/O error is a no.
fn is_process(stream: TcpStream, pid: u32) -> bool {
    let mut stream = bounded(stream);
    let mut out = Vec::new();
    encode_command(&[&b"PING"[..]], &mut out);
    encode_command(&[&b"INFO"[..], b"server"], &mut out);
    if stream.write_all(&out).is_err() {
        return false;
    }
    let (mut decoder, mut buf, mut replies) = (Decoder::new(), BytesMut::new(), Vec::new());
    let mut chunk = [0u8; 4096];
    while replies.len() < 2 {
        match decoder.decode(&mut buf) {
            Ok(Some(frame)) => {
                replies.push(frame);
                continue;
            }
            Ok(None) => {}
            Err(_) => return false,
        }
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return false,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let info = String::from_utf8_lossy(replies[1].as_bytes().unwrap_or_default()).into_owned();
    let line = format!("process_id:{pid}");
    replies[0] == Frame::SimpleString("PONG".into()) && info.lines().any(|l| l.trim_end() == line)
}

/// The ports handed out in this process. Tests run at once on threads, and the kernel can
/// give a port released by one test's [`free_port`] to the next test's: one CI run had two
/// tests' servers meet on one port (a cluster's slots sent to another test's node, a proxy
/// refusing another test's connections). A port is handed out once per process.
static HANDED_OUT: std::sync::Mutex<std::collections::BTreeSet<u16>> =
    std::sync::Mutex::new(std::collections::BTreeSet::new());

/// Whether `port` was not handed out before in this process (and is now).
fn first_hand(port: u16) -> bool {
    HANDED_OUT
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .insert(port)
}

/// `n` different ports that were free a moment ago and that no other test of this process
/// was given (separate calls to [`free_port`] could answer the same port twice: each
/// releases it before the next asks).
pub fn free_ports(n: usize) -> Vec<u16> {
    let (mut held, mut passed) = (Vec::new(), Vec::new());
    while held.len() < n {
        let listener = TcpListener::bind(("127.0.0.1", 0)).expect("bind an ephemeral port");
        let port = listener.local_addr().expect("its address").port();
        // A port handed out before is held too until the end, so as not to be given again.
        if first_hand(port) {
            held.push(listener);
        } else {
            passed.push(listener);
        }
    }
    held.iter()
        .map(|l| l.local_addr().expect("its address").port())
        .collect()
}

/// A port that was free a moment ago, and that no other test of this process was given.
pub fn free_port() -> u16 {
    free_ports(1)[0]
}

/// A blocking client for tests: commands out with `encode_command`, replies in through our
/// own [`Decoder`], every read bounded in time.
pub struct Client {
    stream: TcpStream,
    decoder: Decoder,
    buf: BytesMut,
}

impl Client {
    pub fn connect(port: u16) -> Self {
        Self::from_stream(TcpStream::connect(("127.0.0.1", port)).expect("connect to redis-server"))
    }

    fn from_stream(stream: TcpStream) -> Self {
        Self {
            stream: bounded(stream),
            decoder: Decoder::new(),
            buf: BytesMut::new(),
        }
    }

    /// The connection, for reading it raw (what was buffered is dropped).
    pub fn into_stream(self) -> TcpStream {
        self.stream
    }

    /// Sends one command and reads its reply.
    pub fn command(&mut self, argv: &[&[u8]]) -> Frame {
        self.send(&[argv]);
        self.read_reply()
    }

    /// Sends commands back to back, without reading.
    pub fn send(&mut self, commands: &[&[&[u8]]]) {
        let mut out = Vec::new();
        for argv in commands {
            encode_command(argv, &mut out);
        }
        self.stream.write_all(&out).expect("write to redis-server");
    }

    /// Sends bytes as they are (inline commands, hand-made arrays), without reading.
    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("write to redis-server");
    }

    /// Reads one reply.
    pub fn read_reply(&mut self) -> Frame {
        self.try_read_reply().expect("read a reply")
    }

    /// Sends one command and reads its reply, or says why the connection failed: for a
    /// server that may drop its clients meanwhile (Sentinel's `CLIENT KILL TYPE normal` on
    /// an instance it reconfigures).
    pub fn try_command(&mut self, argv: &[&[u8]]) -> std::io::Result<Frame> {
        let mut out = Vec::new();
        encode_command(argv, &mut out);
        self.stream.write_all(&out)?;
        self.try_read_reply()
    }

    /// Reads one reply, or says why the connection failed (closed: `UnexpectedEof`).
    pub fn try_read_reply(&mut self) -> std::io::Result<Frame> {
        let mut chunk = [0u8; 16 * 1024];
        loop {
            if let Some(frame) = self.decoder.decode(&mut self.buf).expect("a valid reply") {
                return Ok(frame);
            }
            let n = self.stream.read(&mut chunk)?;
            if n == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}

/// A real Redis Cluster on 127.0.0.1: `masters` masters sharing the slots evenly, each with
/// `replicas` replicas, formed as `redis-cli --cluster create` forms one (ADDSLOTSRANGE,
/// SET-CONFIG-EPOCH, MEET, REPLICATE), and ready (`cluster_state:ok` on every node, every
/// node knowing every other). Nodes are killed by PID on drop.
pub struct RealCluster {
    /// Masters first, then the replicas (replica `masters + k` follows master `k % masters`).
    pub nodes: Vec<RedisServer>,
}

impl RealCluster {
    pub fn start(masters: usize, replicas: usize, extra: &[&str]) -> Self {
        let split: Vec<usize> = (0..masters)
            .map(|i| (i + 1) * 16384 / masters - i * 16384 / masters)
            .collect();
        Self::start_split(&split, replicas, extra)
    }

    /// As [`RealCluster::start`], master `i` serving the `split[i]` slots after those of the
    /// masters before it.
    pub fn start_split(split: &[usize], replicas: usize, extra: &[&str]) -> Self {
        assert_eq!(split.iter().sum::<usize>(), 16384, "every slot served");
        let masters = split.len();
        let n = masters * (1 + replicas);
        let nodes: Vec<RedisServer> = (0..n).map(|_| RedisServer::start_cluster(extra)).collect();
        for (i, node) in nodes.iter().take(masters).enumerate() {
            let first: usize = split[..i].iter().sum();
            let start = first.to_string();
            let end = (first + split[i] - 1).to_string();
            let reply = node.client().command(&[
                b"CLUSTER",
                b"ADDSLOTSRANGE",
                start.as_bytes(),
                end.as_bytes(),
            ]);
            assert_eq!(reply, Frame::SimpleString("OK".into()));
        }
        for (i, node) in nodes.iter().enumerate() {
            let epoch = (i + 1).to_string();
            node.client()
                .command(&[b"CLUSTER", b"SET-CONFIG-EPOCH", epoch.as_bytes()]);
        }
        let (port, bus) = (nodes[0].port().to_string(), nodes[0].bus_port().to_string());
        for node in &nodes[1..] {
            let reply = node.client().command(&[
                b"CLUSTER",
                b"MEET",
                b"127.0.0.1",
                port.as_bytes(),
                bus.as_bytes(),
            ]);
            assert_eq!(reply, Frame::SimpleString("OK".into()));
        }
        let cluster = Self { nodes };
        cluster.wait_until("every node knows every other", |c| {
            c.nodes.iter().all(|node| {
                let text = info(node, b"NODES");
                text.lines().count() == n && !text.contains("handshake")
            })
        });
        for r in masters..n {
            let master = info(&cluster.nodes[(r - masters) % masters], b"MYID");
            let reply = cluster.nodes[r].client().command(&[
                b"CLUSTER",
                b"REPLICATE",
                master.trim().as_bytes(),
            ]);
            assert_eq!(reply, Frame::SimpleString("OK".into()));
        }
        cluster.wait_until("cluster_state:ok everywhere", |c| c.is_ok());
        // A master learns of its replica from the replica's pings, which can come after the
        // replica has synced, and until then passes an SPUBLISH to no replica (the likely
        // cause of a replica's sharded message that a test waited 30 s for, once). Every
        // node must see every replica as one, over a connected link.
        cluster.wait_until("every replica known to every node", |c| {
            c.nodes.iter().all(|node| {
                let text = info(node, b"NODES");
                let field = |line: &str, i: usize| line.split(' ').nth(i).unwrap_or("").to_owned();
                let replicas = text
                    .lines()
                    .filter(|line| field(line, 2).contains("slave"))
                    .count();
                replicas == n - masters && text.lines().all(|line| field(line, 7) == "connected")
            })
        });
        cluster
    }

    /// Whether every node says `cluster_state:ok`, none is flagged failing, and every
    /// replica has synced with its master (a replica that never did cannot fail over).
    pub fn is_ok(&self) -> bool {
        self.nodes.iter().all(|node| {
            let replication = match node.client().command(&[b"INFO", b"replication"]) {
                Frame::BulkString(b) => String::from_utf8_lossy(&b).into_owned(),
                _ => String::new(),
            };
            let synced = !replication.contains("role:slave")
                || replication.contains("master_link_status:up");
            synced
                && info(node, b"INFO").contains("cluster_state:ok")
                && !info(node, b"NODES").contains("fail")
        })
    }

    /// Polls `ready` every 100 ms for up to 60 s.
    pub fn wait_until(&self, what: &str, ready: impl Fn(&Self) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !ready(self) {
            assert!(Instant::now() < deadline, "{what}: not within 60 s");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// Runs `program` with `args`, its output captured, killed (SIGKILL) if it runs past
/// `limit`.
pub fn run_bounded(
    program: impl AsRef<OsStr>,
    args: &[impl AsRef<OsStr>],
    limit: Duration,
) -> Output {
    Command::new("timeout")
        .arg("-s")
        .arg("KILL")
        .arg(format!("{:.1}", limit.as_secs_f64()))
        .arg(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .expect("run a program under timeout")
}

/// `redis-cli` with `args` (redis-tools must be installed), as [`run_bounded`] runs it.
pub fn redis_cli(args: &[impl AsRef<OsStr>], limit: Duration) -> Output {
    run_bounded("redis-cli", args, limit)
}

/// A reply's text: a string's or an error's bytes, anything else as `Debug`.
pub fn text(frame: &Frame) -> String {
    match frame {
        Frame::BulkString(b) | Frame::SimpleString(b) | Frame::SimpleError(b) => {
            String::from_utf8_lossy(b).into_owned()
        }
        other => format!("{other:?}"),
    }
}

/// `redis-cli --cluster reshard` of `slots` slots from node `from` to node `to` of
/// `cluster` (pipeline 10, bounded to 180 s); fails the test when it fails.
pub fn reshard(cluster: &RealCluster, from: usize, to: usize, slots: usize) {
    let id = |node: &RedisServer| info(node, b"MYID").trim().to_string();
    let output = redis_cli(
        &[
            "--cluster".to_string(),
            "reshard".into(),
            format!("127.0.0.1:{}", cluster.nodes[from].port()),
            "--cluster-from".into(),
            id(&cluster.nodes[from]),
            "--cluster-to".into(),
            id(&cluster.nodes[to]),
            "--cluster-slots".into(),
            slots.to_string(),
            "--cluster-yes".into(),
            "--cluster-pipeline".into(),
            "10".into(),
        ],
        Duration::from_secs(180),
    );
    assert!(
        output.status.success(),
        "reshard failed:\n{}",
        String::from_utf8_lossy(&output.stdout)
    );
}

/// What a client that ran through a reshard to node `to` must show: the slots moved, it ran
/// (more than 1000 commands), and it saw no error.
pub fn assert_served_through_reshard(to: &RedisServer, done: usize, errors: &[String], via: &str) {
    assert!(slot_ranges(to) >= 2, "no slot moved");
    println!("{done} commands through {via} during the reshard");
    assert!(done > 1000, "the client hardly ran: {done}");
    assert!(
        errors.is_empty(),
        "{} errors: {:?}",
        errors.len(),
        &errors[..errors.len().min(5)]
    );
}

/// How many slot ranges a node's own CLUSTER NODES line lists (fields after the eighth).
pub fn slot_ranges(node: &RedisServer) -> usize {
    info(node, b"NODES")
        .lines()
        .find(|l| l.contains("myself"))
        .map(|l| l.split(' ').skip(8).count())
        .unwrap_or(0)
}

/// `CLUSTER <sub>` of a node, as text.
pub fn info(node: &RedisServer, sub: &[u8]) -> String {
    match node.client().command(&[b"CLUSTER", sub]) {
        Frame::BulkString(b) | Frame::SimpleString(b) => String::from_utf8_lossy(&b).into_owned(),
        Frame::VerbatimString { text, .. } => String::from_utf8_lossy(&text).into_owned(),
        other => panic!("CLUSTER {}: {other:?}", String::from_utf8_lossy(sub)),
    }
}

/// The proxy's binary (`crates/redis-cluster-proxy`; see [`package_binary`]).
pub fn proxy_binary() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| package_binary("redis-cluster-proxy", "redis-cluster-proxy"))
        .clone()
}

/// A tool of `crates/redis-cluster-tools` (`bus-dump`, `cluster-doctor`; see
/// [`package_binary`]), built once per test binary.
pub fn tool_binary(name: &str) -> PathBuf {
    // One build gives both tools: the package is built as a whole.
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| package_binary("redis-cluster-tools", name))
        .with_file_name(name)
}

/// `target/<profile>`, the folder of the test binary's `deps`.
fn target_profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's path");
    exe.parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps")
        .to_path_buf()
}

/// The binary `bin` of the workspace package `package`, built by `cargo build -p` with the
/// test's own profile (another package's binaries are not built for this one's tests; cargo
/// rebuilds them when their sources changed).
pub fn package_binary(package: &str, bin: &str) -> PathBuf {
    let dir = target_profile_dir();
    let profile = match dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") | None => "dev",
        Some(other) => other,
    };
    let status = Command::new(env!("CARGO"))
        .args([
            "build",
            "-q",
            "--locked",
            "-p",
            package,
            "--profile",
            profile,
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()
        .expect("cargo runs");
    assert!(status.success(), "cargo build -p {package} failed");
    dir.join(bin)
}

/// The toy node example's binary (see [`example_binary`]).
pub fn toy_node_binary() -> PathBuf {
    example_binary(
        "toy-node",
        &[
            "examples/toy-node",
            "src",
            "crates/redis-resp/src",
            "crates/redis-cluster-bus/src",
            "crates/redis-cluster-state/src",
            "crates/redis-hash-slot/src",
            "crates/redis-cluster-route/src",
        ],
    )
}

/// The binary of the example `name`, built by `cargo test` next to the test's own, checked to
/// be newer than every `.rs` file under `sources` (directories from the workspace root, the
/// example's own and the crates it is built from): `cargo test --test X` alone does not
/// rebuild examples, and an old binary would test old code.
pub fn example_binary(name: &str, sources: &[&str]) -> PathBuf {
    let exe = std::env::current_exe().expect("the test's path");
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps");
    let binary = dir.join("examples").join(name);
    let built = std::fs::metadata(&binary).and_then(|m| m.modified());
    let Ok(built) = built else {
        panic!(
            "{} is missing: `cargo test` builds the examples (or `cargo build --example {name}`)",
            binary.display()
        );
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let newest = sources
        .iter()
        .filter_map(|dir| newest_source(&root.join(dir)))
        .max();
    assert!(
        newest.is_none_or(|newest| newest <= built),
        "{} is older than its sources: run `cargo build --example {name}` (a plain \
         `cargo test` does)",
        binary.display()
    );
    binary
}

/// The latest modification time of a `.rs` file under `dir`.
fn newest_source(dir: &Path) -> Option<std::time::SystemTime> {
    let mut newest = None;
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        let time = if path.is_dir() {
            newest_source(&path)
        } else if path.extension().is_some_and(|e| e == "rs") {
            entry.metadata().and_then(|m| m.modified()).ok()
        } else {
            None
        };
        newest = newest.max(time);
    }
    newest
}

/// A process's resident memory, in KiB (0 when it cannot be read).
pub fn rss_kib(pid: u32) -> u64 {
    status_kib(pid, "VmRSS:")
}

/// The most resident memory a process has had, in KiB (0 when it cannot be read).
pub fn peak_rss_kib(pid: u32) -> u64 {
    status_kib(pid, "VmHWM:")
}

/// A KiB figure of `/proc/PID/status`.
fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// How many files a process has open (0 when it cannot be read).
pub fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |dir| dir.count())
}

/// Writes `pings` PINGs (a multiple of 10 000) to `port` in batches of 10 000 while another
/// thread reads: every byte of the replies must be that of `+PONG` at its place. Returns the
/// largest resident memory of the process `pid` seen while writing, in KiB.
pub fn pipeline_pings(port: u16, pings: usize, pid: u32) -> u64 {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    let mut reader = stream.try_clone().expect("a reader");
    let counter = std::thread::spawn(move || {
        let expected = 7 * pings;
        let (mut got, mut bad) = (0usize, None);
        let mut chunk = vec![0u8; 1 << 16];
        while got < expected {
            let n = reader.read(&mut chunk).expect("the replies");
            assert!(n > 0, "closed after {got} bytes of replies");
            for (i, &b) in chunk[..n].iter().enumerate() {
                if bad.is_none() && b != b"+PONG\r\n"[(got + i) % 7] {
                    bad = Some(got + i);
                }
            }
            got += n;
        }
        (got, bad)
    });
    let batch = b"PING\r\n".repeat(10_000);
    let mut peak = 0;
    for n in 0..pings / 10_000 {
        stream.write_all(&batch).expect("send PINGs");
        if n % 10 == 0 {
            peak = peak.max(rss_kib(pid));
        }
    }
    let (got, bad) = counter.join().expect("the reader");
    assert_eq!(
        (got, bad),
        (7 * pings, None),
        "the PING replies (byte count, first bad byte)"
    );
    peak
}
