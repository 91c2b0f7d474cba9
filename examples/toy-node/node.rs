//! One toy node: its state machine behind a lock, its bus links, its timer, its clients.
//! `start` binds the two ports and spawns the tasks; the toy-node and toy-cluster examples
//! both run nodes through it.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::{Bytes, BytesMut};
use redis_cluster_proto::bus::{Framed, Framer, Message, NodeId};
use redis_cluster_proto::resp::{
    self as resp, DecodeError, Decoder, ErrorKind, Frame, Limits, encode, encode_command,
};
use redis_cluster_proto::state::{
    ClusterNode, Config, EndpointType, Instant, LinkId, LinkStats, Output,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::{Notify, mpsc, oneshot};

use crate::commands::{Client, Migration, Outcome};
use crate::config::{self, Settings};
use crate::db::Db;
use crate::db::Entry;
use crate::dump::{Snapshot, rdb_file, read_rdb};
use crate::log::{Level, Log};
use crate::replication::Replication;
use redis_cluster_proto::resp::server_limits::OutputLimit;

/// The command line and configuration file, as redis-server reads them (`config.rs`), with
/// the paths resolved against `dir`.
#[derive(Debug)]
pub(crate) struct Options {
    pub(crate) settings: Settings,
    /// `dir`, absolute.
    dir: PathBuf,
}

impl Options {
    /// `redis-server [FILE] [--name value ...]`; the error is the server's fatal message.
    pub(crate) fn parse(args: &[String]) -> Result<Self, String> {
        let mut settings = Settings::load(args)?;
        let fatal = |why: &str| {
            format!(
                "\n*** FATAL CONFIG FILE ERROR ({}) ***\n{why}",
                config::SERVER
            )
        };
        if !settings.flag("cluster-enabled") {
            return Err(fatal(
                "cluster-enabled no: the toy node runs in cluster mode only",
            ));
        }
        if !settings.get("replicaof").unwrap_or("").is_empty() {
            return Err(fatal("replicaof directive not allowed in cluster mode"));
        }
        if settings.number("tls-port") != 0 {
            return Err(fatal("tls-port: the toy node does not speak TLS"));
        }
        let dir = match settings.get("dir").unwrap_or("") {
            "" => std::env::current_dir(),
            dir => std::fs::canonicalize(dir),
        }
        .map_err(|e| format!("dir: {}", config::os_reason(&e)))?;
        settings.put("dir", &dir.display().to_string());
        Ok(Self { settings, dir })
    }

    fn port(&self) -> u16 {
        u16::try_from(self.settings.number("port")).unwrap_or(6379)
    }

    fn cport(&self) -> u16 {
        match self.settings.number("cluster-port") {
            0 => self.port().wrapping_add(10_000),
            port => u16::try_from(port).unwrap_or(0),
        }
    }

    fn conf_path(&self) -> PathBuf {
        self.dir.join(
            self.settings
                .get("cluster-config-file")
                .unwrap_or("nodes.conf"),
        )
    }

    /// A path of the configuration, relative to `dir` as the server (which chdirs there)
    /// reads it; `None` when empty.
    fn path(&self, name: &str) -> Option<PathBuf> {
        let value = self.settings.get(name).filter(|v| !v.is_empty())?;
        Some(self.dir.join(value))
    }

    /// Where the log goes and what it says.
    pub(crate) fn log(&self) -> Log {
        Log {
            level: Level::parse(self.settings.get("loglevel").unwrap_or(""))
                .unwrap_or(Level::Notice),
            file: self.path("logfile"),
            role: 'M',
        }
    }
}

/// Messages queued for one bus link before the node gives up on a peer that does not read
/// and closes the link (the state machine then reconnects, as after any lost link): about
/// 600 KB of PINGs and PONGs. PUBLISH messages carry their payloads, and
/// `cluster-link-sendbuf-limit` bounds the bytes, as on the server; its default, 0, bounds
/// nothing there, and [`LINK_BYTES`] here.
const LINK_QUEUE: usize = 256;

/// Bytes queued for one bus link before the node gives up on its peer when
/// `cluster-link-sendbuf-limit` is 0.
const LINK_BYTES: usize = 16 << 20;

/// The node's end of one bus link: its queue of encoded messages (a broadcast's bytes are
/// shared by every link's queue). Dropping it closes the link: its task stops writing, even
/// in the middle of a write.
struct LinkWriter {
    queue: mpsc::Sender<Bytes>,
    _alive: oneshot::Sender<()>,
    /// When the link was made (ms), for CLUSTER LINKS.
    created: u64,
    /// Bytes queued and not written yet, for CLUSTER LINKS.
    queued: Arc<AtomicUsize>,
}

/// The link task's end of a [`LinkWriter`].
struct LinkQueue {
    messages: mpsc::Receiver<Bytes>,
    queued: Arc<AtomicUsize>,
    /// Completes (with an error) when the `LinkWriter` is dropped.
    alive: oneshot::Receiver<()>,
}

impl LinkWriter {
    fn new() -> (Self, LinkQueue) {
        let (queue, messages) = mpsc::channel(LINK_QUEUE);
        let (alive, watch) = oneshot::channel();
        let queued = Arc::new(AtomicUsize::new(0));
        let writer = Self {
            queue,
            _alive: alive,
            created: now(),
            queued: queued.clone(),
        };
        (
            writer,
            LinkQueue {
                messages,
                queued,
                alive: watch,
            },
        )
    }
}

/// The wall clock in ms, the state machine's time.
pub(crate) fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// What the node's tasks share: the state machine, the links' writers, the keyspace.
pub(crate) struct Node {
    pub(crate) cluster: ClusterNode,
    /// The client port, for INFO and CONFIG GET.
    pub(crate) port: u16,
    /// `requirepass`.
    pub(crate) password: Option<String>,
    /// The writer of each bus link, by the state machine's handle (never reused): a link
    /// task that ends acts only when its entry is still there (the state machine may have
    /// closed the link meanwhile).
    links: HashMap<LinkId, LinkWriter>,
    /// The last number given to a replica's connection.
    next_conn: u64,
    pub(crate) db: Db,
    conf_path: PathBuf,
    /// The configuration, for CONFIG GET / SET / REWRITE.
    pub(crate) settings: Settings,
    /// The inert parameters already logged as such.
    pub(crate) inert_told: HashSet<String>,
    pub(crate) log: Log,
    /// The pidfile written at start, removed at shutdown.
    pidfile: Option<PathBuf>,
    /// `dir/dbfilename`: the RDB file SAVE writes and the start loads.
    rdb_path: Option<PathBuf>,
    /// `dir/appendfilename`: the append-only file.
    aof_path: Option<PathBuf>,
    /// When the dataset was last saved (Unix seconds), for LASTSAVE and INFO.
    pub(crate) last_save: u64,
    /// The append-only file, while `appendonly yes`.
    pub(crate) aof: Option<crate::aof::Aof>,
    /// The last client id given out.
    next_client: u64,
    /// When the node started (ms), for INFO's uptime.
    pub(crate) started: u64,
    /// Clients connected now.
    pub(crate) clients: usize,
    /// INFO's counters, which CONFIG RESETSTAT zeroes.
    pub(crate) stats: Stats,
    /// Clients waiting in a blocked command: every other command wakes them to try again.
    pub(crate) blocked: usize,
    /// The keys a MIGRATE is moving: commands on them wait until it ends.
    pub(crate) in_flight: HashSet<Vec<u8>>,
    pub(crate) replication: Replication,
    /// The clients' subscriptions.
    pub(crate) pubsub: crate::pubsub::PubSub,
    /// FUNCTION LOAD's libraries.
    pub(crate) libraries: Vec<crate::scripts::Library>,
    /// The scripts EVAL and SCRIPT LOAD saw, for EVALSHA.
    pub(crate) scripts: crate::scripts::Cache,
    /// The master this node replicates from, and the task that does it.
    following: Option<(NodeId, tokio::task::AbortHandle)>,
    /// CLIENT PAUSE: until when (ms), and whether every command waits (ALL) or the writes.
    pub(crate) client_pause: Option<(u64, bool)>,
}

/// The counters of INFO's Stats section.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    pub(crate) connections: u64,
    pub(crate) commands: u64,
    /// Connections refused at `maxclients` (INFO's `rejected_connections`).
    pub(crate) rejected_connections: u64,
}

impl Node {
    /// CONFIG RESETSTAT.
    pub(crate) fn reset_stats(&mut self) {
        self.stats = Stats::default();
    }

    /// A new number for a replica's connection.
    fn next_serial(&mut self) -> u64 {
        self.next_conn += 1;
        self.next_conn
    }
}

/// The node and the two wake-ups its tasks wait for.
struct State {
    node: Mutex<Node>,
    /// The timer task: the next deadline may have moved.
    timer: Notify,
    /// Blocked clients: the keyspace or the cluster changed, try again.
    changed: Notify,
}

type Shared = Arc<State>;

fn lock(shared: &Shared) -> MutexGuard<'_, Node> {
    shared
        .node
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Carries out everything the state machine asked for since the last input.
fn pump(shared: &Shared, node: &mut Node) {
    drain(shared, node);
    crate::pubsub::drop_unserved(node);
    // A replica follows its master's stream; a promoted one stops, keeping its data.
    let master = node.cluster.myself().master;
    if node.following.as_ref().map(|(id, _)| *id) != master {
        if let Some((_, task)) = node.following.take() {
            task.abort();
        }
        node.replication.link_up = false;
        if let Some(master) = master {
            node.replication.disconnect_replicas();
            let task = tokio::spawn(follow(shared.clone(), master));
            node.following = Some((master, task.abort_handle()));
        }
        node.log.role = if master.is_some() { 'S' } else { 'M' };
    }
}

fn drain(shared: &Shared, node: &mut Node) {
    // Links whose peer stopped reading: closed, and reported down, after the outputs; with
    // the bytes they held when over `cluster-link-sendbuf-limit`.
    let mut stuck: Vec<(LinkId, Option<usize>)> = Vec::new();
    // 0, the server's default, is no limit at all there; here the queue's own bounds.
    let configured =
        usize::try_from(node.settings.number("cluster-link-sendbuf-limit")).unwrap_or(0);
    let limit = if configured > 0 {
        configured
    } else {
        LINK_BYTES
    };
    // Where the state machine writes each message, once.
    let mut encoded = Vec::new();
    loop {
        while let Some(output) = node.cluster.poll_output(&mut encoded) {
            match output {
                Output::Connect {
                    link, ip, cport, ..
                } => {
                    tokio::spawn(connect(shared.clone(), link, ip, cport));
                }
                Output::Transmit { links } => {
                    let bytes = Bytes::copy_from_slice(&encoded);
                    for link in links {
                        let Some(writer) = node.links.get(&link) else {
                            continue;
                        };
                        match writer.queue.try_send(bytes.clone()) {
                            Ok(()) => {
                                let used = bytes.len()
                                    + writer.queued.fetch_add(bytes.len(), Ordering::Relaxed);
                                if used > limit {
                                    stuck.push((link, Some(used)));
                                }
                            }
                            Err(TrySendError::Full(_)) => stuck.push((link, None)),
                            Err(TrySendError::Closed(_)) => {}
                        }
                    }
                }
                Output::Close(link) => {
                    node.links.remove(&link);
                }
                Output::SaveConfig => save(node),
                Output::Deliver {
                    channel,
                    message,
                    sharded,
                } => {
                    deliver(node, &channel, &message, sharded, now());
                }
                Output::Event(event) => node.log.write(Level::Notice, &event.to_string()),
            }
        }
        if stuck.is_empty() {
            return;
        }
        for (link, over) in stuck.drain(..) {
            if node.links.remove(&link).is_none() {
                continue;
            }
            let over = over.filter(|_| configured > 0).ok_or(over);
            let text = match (over, node.cluster.link_peer(link)) {
                // The server's words (it checks the links of known nodes only).
                (Ok(used), Some((direction, id))) => format!(
                    "Freeing cluster link({direction} node {id}, used memory: {used}) due to \
                     exceeding send buffer memory limit."
                ),
                (Ok(used), None) => format!(
                    "Freeing cluster link({link}, used memory: {used}) due to exceeding send \
                     buffer memory limit."
                ),
                (Err(Some(used)), _) => {
                    format!("{link}: the peer does not read ({used} bytes queued), link closed")
                }
                (Err(None), _) => format!("{link}: the peer does not read, link closed"),
            };
            node.log.write(Level::Warning, &text);
            if over.is_ok() {
                node.cluster.count_link_over_limit();
            }
            node.cluster
                .handle_link_down(link, Instant::from_unix_millis(now()));
        }
    }
}

/// `CLIENT KILL ip:port` of a replica's link to its master (`address` is the master's):
/// the link drops, and the next [`pump`] opens a new one. Whether it was that link.
pub(crate) fn drop_master_link(node: &mut Node, address: &[u8]) -> bool {
    let Some((master, _)) = &node.following else {
        return false;
    };
    let linked = node
        .cluster
        .node(master)
        .is_some_and(|m| format!("{}:{}", m.ip, m.port).as_bytes() == address);
    if linked {
        if let Some((_, task)) = node.following.take() {
            task.abort();
        }
        node.replication.link_up = false;
    }
    linked
}

impl Node {
    /// CLUSTER LINKS: each bus link with its creation time and what waits to be written.
    pub(crate) fn cluster_links(
        &self,
        protocol: redis_cluster_proto::state::Protocol,
    ) -> Frame<Vec<u8>> {
        self.cluster.cluster_links(protocol, |link| {
            self.links.get(&link).map_or_else(LinkStats::default, |w| {
                let used = w.queued.load(Ordering::Relaxed) as u64;
                LinkStats {
                    create_time: w.created,
                    events: if used > 0 { "rw" } else { "r" }.to_string(),
                    send_buffer_allocated: used,
                    send_buffer_used: used,
                }
            })
        })
    }
}

/// [`pump`] after an input from a link or a client: the timer task sleeps until the next
/// deadline, which may have moved.
fn pump_and_wake(shared: &Shared, node: &mut Node) {
    pump(shared, node);
    shared.timer.notify_one();
}

/// The keyspace and the libraries as an RDB file would hold them.
fn snapshot(node: &Node, now: u64) -> Snapshot {
    let keys = node
        .db
        .keys(now)
        .filter_map(|key| {
            let entry = node.db.peek(key, now)?;
            Some((key.clone(), entry.value.clone(), entry.expires))
        })
        .collect();
    let libraries = node.libraries.iter().map(|l| l.code().to_vec()).collect();
    Snapshot { keys, libraries }
}

/// SAVE: the keyspace and the libraries to `dir/dbfilename`, in RDB format, written as
/// nodes.conf is (temporary file, fsync, rename). What the server does at shutdown when it
/// has save points, and on SAVE / BGSAVE.
pub(crate) fn save_rdb(node: &mut Node) -> Result<(), String> {
    let Some(path) = node.rdb_path.clone() else {
        return Err("no dbfilename".into());
    };
    let bytes = rdb_file(&snapshot(node, now()));
    match config::write_durably(&path, &bytes) {
        Ok(()) => {
            node.last_save = now() / 1000;
            node.log.write(Level::Notice, "DB saved on disk");
            Ok(())
        }
        Err(e) => {
            let text = format!("Failed saving the DB: {}", config::os_reason(&e));
            node.log.write(Level::Warning, &text);
            Err(text)
        }
    }
}

/// `appendonly yes` at run time (or at start with no file yet): the keyspace written to a
/// new append-only file, which every write then extends.
pub(crate) fn start_aof(node: &mut Node) -> Result<(), String> {
    let Some(path) = node.aof_path.clone() else {
        return Err("no appendfilename".into());
    };
    let content = crate::replication::records(node, now());
    let always = node.settings.get("appendfsync") == Some("always");
    match crate::aof::Aof::rewrite(&path, &content, always) {
        Ok(aof) => {
            node.aof = Some(aof);
            node.log.write(
                Level::Notice,
                "Background append only file rewriting started",
            );
            Ok(())
        }
        Err(e) => {
            let text = format!(
                "Can't open the append-only file {}: {}",
                path.display(),
                config::os_reason(&e)
            );
            node.log.write(Level::Warning, &text);
            Err(text)
        }
    }
}

/// The dataset at start: the append-only file when `appendonly yes` and there is one (as
/// the server prefers it), else the RDB file; with `appendonly yes` and no file yet, one
/// is written from what was loaded.
fn load_data(node: &mut Node) -> Result<(), String> {
    if !node.settings.flag("appendonly") {
        return load_rdb(node);
    }
    let Some(path) = node.aof_path.clone() else {
        return load_rdb(node);
    };
    let started = now();
    match crate::aof::load(&path, &mut node.db, started)? {
        Some(loaded) => {
            if loaded.truncated > 0 {
                let text = format!(
                    "!!! Warning: short read while loading the AOF file {}!!! AOF loaded anyway \
                     because aof-load-truncated is enabled ({} bytes cut off)",
                    path.display(),
                    loaded.truncated
                );
                node.log.write(Level::Warning, &text);
            }
            let always = node.settings.get("appendfsync") == Some("always");
            let aof = crate::aof::Aof::open(&path, always)
                .map_err(|e| format!("{}: {}", path.display(), config::os_reason(&e)))?;
            node.aof = Some(aof);
            let text = format!(
                "DB loaded from append only file: {:.3} seconds",
                (now() - started) as f64 / 1000.0
            );
            node.log.write(Level::Notice, &text);
            Ok(())
        }
        None => {
            load_rdb(node)?;
            start_aof(node)
        }
    }
}

/// Loads `dir/dbfilename` at start, if there is one: its keys (those not expired yet) and
/// its libraries. A file that does not read stops the start, as it stops the server.
fn load_rdb(node: &mut Node) -> Result<(), String> {
    let Some(path) = node.rdb_path.clone() else {
        return Ok(());
    };
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(format!("{}: {}", path.display(), config::os_reason(&e))),
    };
    let started = now();
    let snapshot = read_rdb(&bytes).map_err(|e| {
        format!(
            "{}: {}. Unrecoverable error, aborting now.",
            path.display(),
            e.text().trim_start_matches("ERR ")
        )
    })?;
    for (key, value, expires) in snapshot.keys {
        if expires.is_none_or(|at| at > started) {
            node.db.insert(&key, Entry { value, expires });
        }
    }
    let mut client = Client::new(0, false);
    for code in snapshot.libraries {
        crate::scripts::restore(node, &mut client, &code, started)
            .map_err(|e| format!("{}: a library does not load: {e}", path.display()))?;
    }
    let seconds = (now() - started) as f64 / 1000.0;
    let text = format!("DB loaded from disk: {seconds:.3} seconds");
    node.log.write(Level::Notice, &text);
    Ok(())
}

/// Saves nodes.conf as the server does (`clusterSaveConfig`): a temporary file, fsynced,
/// renamed over the old one. Called before the reply to the command that changed it.
pub(crate) fn save(node: &Node) {
    let text = node.cluster.nodes_conf();
    if let Err(e) = config::write_durably(&node.conf_path, text.as_bytes()) {
        let text = format!(
            "Could not save the cluster configuration {}: {}",
            node.conf_path.display(),
            config::os_reason(&e)
        );
        node.log.write(Level::Warning, &text);
    }
}

async fn connect(shared: Shared, link: LinkId, ip: String, cport: u16) {
    let stream = tokio::time::timeout(
        Duration::from_millis(1000),
        TcpStream::connect((ip.as_str(), cport)),
    )
    .await;
    let Ok(Ok(stream)) = stream else {
        let mut node = lock(&shared);
        node.cluster
            .handle_link_down(link, Instant::from_unix_millis(now()));
        pump_and_wake(&shared, &mut node);
        return;
    };
    let _ = stream.set_nodelay(true);
    let queue = {
        let mut node = lock(&shared);
        let (writer, queue) = LinkWriter::new();
        node.links.insert(link, writer);
        node.cluster
            .handle_connected(link, Instant::from_unix_millis(now()));
        pump_and_wake(&shared, &mut node);
        queue
    };
    run_link(shared, stream, link, queue).await;
}

/// One bus connection: writes what the state machine sends on it, reads and hands over what
/// arrives, and reports its end unless the state machine closed it.
async fn run_link(shared: Shared, stream: TcpStream, link: LinkId, queue: LinkQueue) {
    let LinkQueue {
        messages: mut rx,
        queued,
        alive: mut closed,
    } = queue;
    let peer = stream
        .peer_addr()
        .map_or_else(|_| String::new(), |a: SocketAddr| a.ip().to_string());
    let (mut rd, mut wr) = stream.into_split();
    // The writer ends when the node drops the link's `LinkWriter` (it closed the link),
    // even in the middle of a write to a peer that does not read, or when a write fails;
    // the reader with it.
    let mut writer = tokio::spawn(async move {
        loop {
            let bytes = tokio::select! {
                _ = &mut closed => break,
                bytes = rx.recv() => bytes,
            };
            let Some(bytes) = bytes else { break };
            tokio::select! {
                _ = &mut closed => break,
                written = wr.write_all(&bytes) => if written.is_err() { break },
            }
            queued.fetch_sub(bytes.len(), Ordering::Relaxed);
        }
    });
    let framer = Framer::default();
    // As the server's link buffer (RCVBUF_INIT_LEN), 1 KiB to start, grown to what the
    // messages need: a link costs little until its peer sends much (a peer that declares a
    // large message and stalls holds what it sent, not what it declared).
    let mut buf: Vec<u8> = Vec::with_capacity(1024);
    let mut chunk = vec![0u8; 16 * 1024];
    'read: loop {
        let n = tokio::select! {
            read = rd.read(&mut chunk) => match read {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            },
            _ = &mut writer => break,
        };
        buf.extend_from_slice(&chunk[..n]);
        loop {
            match framer.frame(&buf) {
                Ok(Framed::Message(len)) => {
                    let bytes: Vec<u8> = buf.drain(..len).collect();
                    let Ok(message) = Message::decode(&bytes) else {
                        break 'read; // the server frees a link that sends garbage
                    };
                    let mut node = lock(&shared);
                    node.cluster.handle_message(
                        link,
                        &peer,
                        &message,
                        Instant::from_unix_millis(now()),
                    );
                    pump_and_wake(&shared, &mut node);
                }
                Ok(Framed::Incomplete(_)) => break,
                Err(_) => break 'read,
            }
        }
    }
    writer.abort();
    let mut node = lock(&shared);
    if node.links.remove(&link).is_none() {
        return; // the node closed it itself
    }
    node.cluster
        .handle_link_down(link, Instant::from_unix_millis(now()));
    pump_and_wake(&shared, &mut node);
}

/// Accepts the bus connections peers open to this node.
async fn serve_bus(shared: Shared, listener: TcpListener) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        let (link, queue) = {
            let mut node = lock(&shared);
            let link = node
                .cluster
                .handle_accepted(Instant::from_unix_millis(now()));
            let (writer, queue) = LinkWriter::new();
            node.links.insert(link, writer);
            (link, queue)
        };
        tokio::spawn(run_link(shared.clone(), stream, link, queue));
    }
}

/// The cron: `handle_timeout` at every deadline the state machine names (and at least every
/// 100 ms, its tick).
async fn run_timer(shared: Shared) {
    loop {
        let wait = {
            let mut node = lock(&shared);
            let now = now();
            node.cluster.handle_timeout(Instant::from_unix_millis(now));
            crate::replication::ping_replicas(&mut node, now);
            pump(&shared, &mut node);
            node.cluster
                .poll_timeout()
                .as_millis()
                .saturating_sub(now)
                .clamp(1, 100)
        };
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(wait)) => {}
            () = shared.timer.notified() => {}
        }
    }
}

/// One client connection: RESP requests in, replies out, in order. A blocked command
/// (BLPOP, or a write while writes are paused) is run again whenever another command ran or
/// the cluster changed, at the latest every 100 ms, until it answers or its deadline passes.
async fn serve_client(shared: Shared, mut stream: TcpStream) {
    // `maxclients`, as the server enforces it on accept: the error, then the connection
    // closes. The server counts two bus connections for every other node it knows
    // (`getClusterConnectionsCount`) beside its clients, and says so.
    let full = {
        let mut node = lock(&shared);
        let links = 2 * node.cluster.nodes().count().saturating_sub(1);
        let limit = usize::try_from(node.settings.number("maxclients")).unwrap_or(0);
        let full = node.clients + links >= limit;
        if full {
            node.stats.rejected_connections += 1;
        }
        full
    };
    if full {
        let _ = stream
            .write_all(b"-ERR max number of clients + cluster connections reached\r\n")
            .await;
        return;
    }
    let (mut client, (mut input, mut output)) = {
        let mut node = lock(&shared);
        node.next_client += 1;
        node.stats.connections += 1;
        node.clients += 1;
        let client = Client::new(node.next_client, node.password.is_some());
        let limits = (
            InputLimits::of(&node.settings),
            node.settings.output_limits(),
        );
        (client, limits)
    };
    let _connected = Connected(shared.clone(), client.id);
    let mut decoder = Decoder::new();
    let mut buf = BytesMut::with_capacity(16 * 1024);
    let mut out = BytesMut::new();
    loop {
        // One clock reading for the commands of one read (they run within microseconds);
        // a blocked command reads it again each time it is re-run.
        let batch_now = now();
        loop {
            // RESP arrays of bulk strings and inline lines, as the server reads them (it
            // skips empty commands); a protocol error gets its reply and ends the connection.
            // The limits depend on AUTH, which the command before may have just passed; a
            // new decoder starts the frame it was reading over (`buf` keeps all of it).
            let limits = input.limits(client.authenticated());
            if decoder.config().limits != limits {
                decoder = Decoder::with_config(resp::Config {
                    limits,
                    ..resp::Config::default()
                });
            }
            let command = match decoder.decode_command(&mut buf) {
                Ok(Some(command)) => command,
                Ok(None) => break,
                Err(e) => {
                    let line = input.reply(&e, &buf, client.authenticated()).into_bytes();
                    encode(&Frame::<Vec<u8>>::SimpleError(line), &mut out);
                    let _ = stream.write_all(&out).await;
                    return;
                }
            };
            let args: Vec<&[u8]> = command.args().collect();
            if args.is_empty() {
                continue;
            }
            // A blocked command holds the replies of the ones after it, as on the server.
            let mut blocked_until: Option<Option<u64>> = None; // set when it first blocks
            let mut blocked = None;
            let replies: Vec<Frame<Vec<u8>>> = loop {
                let changed = shared.changed.notified();
                let (outcome, wake) = {
                    let mut node = lock(&shared);
                    let now = if blocked_until.is_some() {
                        now()
                    } else {
                        batch_now
                    };
                    let deadline = node.cluster.poll_timeout();
                    if blocked_until.is_none() {
                        node.stats.commands += 1;
                    }
                    let outcome = crate::commands::run(&mut node, &mut client, &args, now);
                    pump(&shared, &mut node);
                    // The timer sleeps until the cron's deadline: wake it only if that
                    // moved; blocked clients only if there are some.
                    if node.cluster.poll_timeout() < deadline {
                        shared.timer.notify_one();
                    }
                    let wake =
                        matches!(outcome, Outcome::Reply(_) | Outcome::Many(_)) && node.blocked > 0;
                    (outcome, wake)
                };
                match outcome {
                    Outcome::Quit => {
                        encode(&Frame::<Vec<u8>>::SimpleString(b"OK".to_vec()), &mut out);
                        let _ = stream.write_all(&out).await;
                        return;
                    }
                    Outcome::Feed => {
                        feed(&shared, stream, out, client.listening_port).await;
                        return;
                    }
                    Outcome::Migrate(job) => {
                        let restored = migrate(&job).await;
                        let mut node = lock(&shared);
                        crate::commands::migrated(&mut node, &job, &restored.1);
                        if node.blocked > 0 {
                            shared.changed.notify_waiters();
                        }
                        break vec![restored.0];
                    }
                    Outcome::Reply(reply) => {
                        if wake {
                            shared.changed.notify_waiters();
                        }
                        break vec![reply];
                    }
                    Outcome::Many(replies) => {
                        if wake {
                            shared.changed.notify_waiters();
                        }
                        break replies;
                    }
                    Outcome::Block { deadline } => {
                        let deadline = *blocked_until.get_or_insert(deadline);
                        blocked.get_or_insert_with(|| Blocked::new(&shared));
                        if !out.is_empty() {
                            let limit = config::class_limit(&output, &client);
                            if !flush(&shared, &mut stream, &mut out, limit, client.id).await {
                                return;
                            }
                        }
                        let left = deadline.map_or(100, |at| at.saturating_sub(now()).min(100));
                        if deadline.is_some_and(|at| at <= now()) {
                            break vec![client.timed_out()];
                        }
                        tokio::select! {
                            () = changed => {}
                            () = tokio::time::sleep(Duration::from_millis(left)) => {}
                        }
                    }
                }
            };
            for reply in &replies {
                encode(reply, &mut out);
            }
            // Replies are written as they come once they pass 64 KB, so that a client
            // that pipelines large reads and does not read holds its replies in the socket,
            // not in memory.
            if out.len() > 64 * 1024 {
                let limit = config::class_limit(&output, &client);
                if !flush(&shared, &mut stream, &mut out, limit, client.id).await {
                    return;
                }
            }
        }
        if !out.is_empty() {
            let limit = config::class_limit(&output, &client);
            if !flush(&shared, &mut stream, &mut out, limit, client.id).await {
                return;
            }
        }
        // `timeout`: a client idle that long is closed, as the server's cron closes it
        // (never a subscriber; a blocked client is not waiting here). Read each time: CONFIG
        // SET changes it at once.
        let idle = {
            let node = lock(&shared);
            input = InputLimits::of(&node.settings);
            output = node.settings.output_limits();
            let secs = u64::try_from(node.settings.number("timeout")).unwrap_or(0);
            (secs > 0 && client.inbox.is_none()).then(|| Duration::from_secs(secs))
        };
        // Wait for the next request, or for a message to a subscribed client (which a
        // subscriber too slow to take was dropped from: its connection closes).
        tokio::select! {
            () = idle_timer(idle) => {
                lock(&shared).log.write(Level::Verbose, "Closing idle client");
                return;
            }
            read = stream.read_buf(&mut buf) => match read {
                Ok(0) | Err(_) => return,
                // `client-query-buffer-limit`: the server checks what it holds unparsed after
                // each read, and closes the client without a reply.
                Ok(_) if buf.len() as u64 > input.query_buffer => {
                    let text = format!(
                        "Closing client that reached max query buffer length: id={} \
                         qbuf={} (qbuf initial bytes: {:?})",
                        client.id,
                        buf.len(),
                        String::from_utf8_lossy(&buf[..buf.len().min(64)])
                    );
                    lock(&shared).log.write(Level::Warning, &text);
                    return;
                }
                Ok(_) => {}
            },
            push = next_push(&mut client.inbox) => {
                let Some(push) = push else { return };
                encode(&push, &mut out);
                if let Some(inbox) = client.inbox.as_mut() {
                    while out.len() < 64 * 1024 {
                        let Some(more) = inbox.try_recv() else { break };
                        encode(&more, &mut out);
                    }
                }
            }
        }
    }
}

/// What a client may send, from the node's settings as they are now (CONFIG SET changes
/// them at once; a connection reads them again after each batch of commands).
#[derive(Debug, Clone, Copy)]
struct InputLimits {
    /// `proto-max-bulk-len`: the longest argument.
    bulk: u64,
    /// `client-query-buffer-limit`: the most a client may have sent and not had parsed.
    query_buffer: u64,
}

impl InputLimits {
    /// What an unauthenticated client may declare (the server's `authRequired` checks):
    /// 10 arguments of 16 KiB each.
    const UNAUTHENTICATED_ARGS: u64 = 10;
    const UNAUTHENTICATED_BULK: u64 = 16 * 1024;

    fn of(settings: &Settings) -> Self {
        let bytes = |name| u64::try_from(settings.number(name)).unwrap_or(u64::MAX);
        Self {
            bulk: bytes("proto-max-bulk-len"),
            query_buffer: bytes("client-query-buffer-limit"),
        }
    }

    /// The decoder's limits. The whole frame is bounded by the query buffer check after
    /// each read, which closes the client as the server does, so not by the decoder.
    fn limits(&self, authenticated: bool) -> Limits {
        let (args, bulk) = match authenticated {
            true => (i32::MAX as u64, self.bulk),
            false => (
                Self::UNAUTHENTICATED_ARGS,
                self.bulk.min(Self::UNAUTHENTICATED_BULK),
            ),
        };
        Limits {
            max_elements: args,
            max_bulk_len: bulk,
            max_frame_len: usize::MAX,
            ..Limits::DEFAULT
        }
    }

    /// The server's reply to a command it cannot read: past an unauthenticated client's
    /// limits (but within everyone's) it names them.
    fn reply(&self, error: &DecodeError, buf: &[u8], authenticated: bool) -> String {
        match error.kind {
            ErrorKind::TooManyElements { len, .. } if !authenticated && len <= i32::MAX as u64 => {
                "ERR Protocol error: unauthenticated multibulk length".into()
            }
            ErrorKind::BulkTooLong { len, .. } if !authenticated && len <= self.bulk => {
                "ERR Protocol error: unauthenticated bulk length".into()
            }
            _ => error.server_reply(buf),
        }
    }
}

/// Ends after `limit`; never, for none.
async fn idle_timer(limit: Option<Duration>) {
    match limit {
        Some(limit) => tokio::time::sleep(limit).await,
        None => std::future::pending().await,
    }
}

/// The next frame for a subscribed client; never, for one that is not.
async fn next_push(inbox: &mut Option<crate::pubsub::Inbox>) -> Option<Frame<Vec<u8>>> {
    match inbox {
        Some(inbox) => inbox.recv().await,
        None => std::future::pending().await,
    }
}

/// Delivers a message to this node's subscribers under `client-output-buffer-limit pubsub`,
/// logging those dropped for it as the server logs them; how many got it.
pub(crate) fn deliver(
    node: &mut Node,
    channel: &[u8],
    message: &[u8],
    sharded: bool,
    now: u64,
) -> usize {
    let limit = node.settings.output_limits().pubsub;
    let (got, dropped) = node.pubsub.deliver(channel, message, sharded, limit, now);
    for id in dropped {
        log_output_limit(node, id, true);
    }
    got
}

/// The server's warning for a client closed for its output buffer: when a reply takes it
/// past its limit ("scheduled to be closed ASAP"), or when its time past the soft limit
/// runs out while it does not read ("closed").
pub(crate) fn log_output_limit(node: &Node, id: u64, at_once: bool) {
    let how = match at_once {
        true => "scheduled to be closed ASAP",
        false => "closed",
    };
    let text = format!("Client id={id} {how} for overcoming of output buffer limits.");
    node.log.write(Level::Warning, &text);
}

/// How writing a client's replies ended badly.
enum WriteEnd {
    /// The connection failed.
    Gone,
    /// The client holds more than its class's `client-output-buffer-limit`: past the hard
    /// limit (`true`), or past the soft one for too long.
    Limit(bool),
}

/// Writes and clears `out`, a client's replies, under its class's limit; `false` when the
/// connection is to end (it failed, or the client was over its limit: logged as the server
/// logs it).
async fn flush(
    shared: &Shared,
    stream: &mut TcpStream,
    out: &mut BytesMut,
    limit: OutputLimit,
    id: u64,
) -> bool {
    match write_limited(stream, out, limit).await {
        Ok(()) => {
            out.clear();
            true
        }
        Err(WriteEnd::Gone) => false,
        Err(WriteEnd::Limit(at_once)) => {
            log_output_limit(&lock(shared), id, at_once);
            false
        }
    }
}

/// Writes a client's replies under its class's `client-output-buffer-limit`. The toy holds
/// at most one batch of replies for a client (it stops reading one that does not read), so
/// the batch is what the client holds: over the hard limit it is closed without a byte,
/// over the soft limit it is closed if the write takes longer than the soft seconds.
async fn write_limited(
    stream: &mut TcpStream,
    out: &[u8],
    limit: OutputLimit,
) -> Result<(), WriteEnd> {
    let held = out.len() as u64;
    if limit.hard > 0 && held > limit.hard {
        return Err(WriteEnd::Limit(true));
    }
    if limit.soft > 0 && held > limit.soft {
        let wait = Duration::from_secs(limit.soft_seconds);
        return match tokio::time::timeout(wait, stream.write_all(out)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) => Err(WriteEnd::Gone),
            Err(_) => Err(WriteEnd::Limit(false)),
        };
    }
    stream.write_all(out).await.map_err(|_| WriteEnd::Gone)
}

/// Sends a MIGRATE's keys to its target as the server does (AUTH, SELECT, then one
/// RESTORE-ASKING per key, pipelined) and reads the replies: the reply for the client, and
/// which keys were restored.
async fn migrate(job: &Migration) -> (Frame<Vec<u8>>, Vec<bool>) {
    let io_error = |what: &str| {
        let text = format!("IOERR error or timeout {what} to target instance");
        (
            Frame::SimpleError(text.into_bytes()),
            vec![false; job.keys.len()],
        )
    };
    let limit = Duration::from_millis(job.timeout_ms);
    let address = (job.host.as_str(), job.port);
    let Ok(Ok(mut stream)) = tokio::time::timeout(limit, TcpStream::connect(address)).await else {
        let text = b"IOERR error or timeout connecting to the client".to_vec();
        return (Frame::SimpleError(text), vec![false; job.keys.len()]);
    };
    let mut out = Vec::new();
    if !job.auth.is_empty() {
        let mut auth: Vec<&[u8]> = vec![b"AUTH"];
        auth.extend(job.auth.iter().map(Vec::as_slice));
        encode_command(&auth, &mut out);
    }
    encode_command(&["SELECT", &job.db.to_string()], &mut out);
    for (key, ttl, payload) in &job.keys {
        let ttl = ttl.to_string();
        let mut args: Vec<&[u8]> = vec![b"RESTORE-ASKING", key, ttl.as_bytes(), payload];
        if job.replace {
            args.push(b"REPLACE");
        }
        encode_command(&args, &mut out);
    }
    if !matches!(
        tokio::time::timeout(limit, stream.write_all(&out)).await,
        Ok(Ok(()))
    ) {
        return io_error("writing");
    }
    let mut decoder = Decoder::new();
    let mut buf = BytesMut::new();
    let mut replies = Vec::new();
    let expected = job.keys.len() + 1 + usize::from(!job.auth.is_empty());
    while replies.len() < expected {
        match decoder.decode(&mut buf) {
            Ok(Some(frame)) => {
                replies.push(frame);
                continue;
            }
            Ok(None) => {}
            Err(_) => return io_error("reading"),
        }
        match tokio::time::timeout(limit, stream.read_buf(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => {}
            _ => return io_error("reading"),
        }
    }
    // The first error answers the client; only the keys restored leave this node.
    let mut first_error = None;
    let mut restored = Vec::with_capacity(job.keys.len());
    for (n, reply) in replies.iter().enumerate() {
        let failed = match reply {
            Frame::SimpleError(text) => {
                first_error.get_or_insert_with(|| text.clone());
                true
            }
            _ => false,
        };
        if n + job.keys.len() >= expected {
            restored.push(!failed);
        }
    }
    let reply = match first_error {
        None => Frame::SimpleString(b"OK".to_vec()),
        Some(text) => {
            let mut line = b"ERR Target instance replied with error: ".to_vec();
            line.extend_from_slice(&text);
            Frame::SimpleError(line)
        }
    };
    (reply, restored)
}

/// A replica's connection, after its PSYNC: the snapshot, then the stream, until it lags
/// too far behind or goes away.
async fn feed(shared: &Shared, mut stream: TcpStream, pending: BytesMut, port: Option<u16>) {
    let ip = stream
        .peer_addr()
        .map_or_else(|_| String::new(), |a| a.ip().to_string());
    let fed = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let cut = Arc::new(Notify::new());
    let (snapshot, mut records, _fed) = {
        let mut node = lock(shared);
        let serial = node.next_serial();
        let port = port.unwrap_or(0);
        // The stream starts at the offset of the snapshot.
        fed.store(node.replication.offset, Ordering::Relaxed);
        node.replication
            .replicas
            .push(crate::replication::Attached {
                serial,
                ip,
                port,
                ack: 0,
                fed: fed.clone(),
                over_soft_since: None,
                cut: cut.clone(),
            });
        let (snapshot, records) = crate::replication::attach(&mut node, now());
        (snapshot, records, Fed(shared.clone(), serial))
    };
    // The snapshot too may be cut off: the stream piles up behind it.
    let sent = tokio::select! {
        sent = async {
            stream.write_all(&pending).await?;
            stream.write_all(&snapshot).await
        } => sent.is_ok(),
        () = cut.notified() => false,
    };
    if !sent {
        return;
    }
    // After PSYNC a replica sends only `REPLCONF ACK <offset>`; a read that ends means it
    // went away, anything else that it is not a replica.
    let (mut reader, mut writer) = stream.into_split();
    let mut acks = BytesMut::with_capacity(256);
    let mut decoder = Decoder::new();
    loop {
        tokio::select! {
            chunk = records.recv() => {
                let Ok(chunk) = chunk else { return };
                // Over `client-output-buffer-limit replica`: cut off, even mid-write.
                tokio::select! {
                    written = writer.write_all(&chunk) => {
                        if written.is_err() {
                            return;
                        }
                        fed.fetch_add(chunk.len() as u64, Ordering::Relaxed);
                    }
                    () = cut.notified() => return,
                }
            }
            () = cut.notified() => return,
            read = reader.read_buf(&mut acks) => {
                if !matches!(read, Ok(n) if n > 0) {
                    return;
                }
                if !take_acks(shared, &mut decoder, &mut acks, _fed.1) {
                    return;
                }
            }
        }
    }
}

/// Reads a replica's `REPLCONF ACK <offset>` commands and records the offsets, waking the
/// clients in WAIT; `false` when the replica sent anything else, or more than a command's
/// worth of bytes without finishing one.
fn take_acks(shared: &Shared, decoder: &mut Decoder, buf: &mut BytesMut, serial: u64) -> bool {
    loop {
        let command = match decoder.decode_command(buf) {
            Ok(Some(command)) => command,
            Ok(None) => return buf.len() <= 4096,
            Err(_) => return false,
        };
        let args: Vec<&[u8]> = command.args().collect();
        let ack = match args.as_slice() {
            [replconf, what, offset]
                if replconf.eq_ignore_ascii_case(b"REPLCONF")
                    && what.eq_ignore_ascii_case(b"ACK") =>
            {
                std::str::from_utf8(offset)
                    .ok()
                    .and_then(|o| o.parse::<u64>().ok())
            }
            _ => None,
        };
        let Some(ack) = ack else { return false };
        let mut node = lock(shared);
        if let Some(r) = node
            .replication
            .replicas
            .iter_mut()
            .find(|r| r.serial == serial)
        {
            r.ack = ack;
        }
        if node.blocked > 0 {
            shared.changed.notify_waiters();
        }
    }
}

/// A replica's side: connects to its master's client port, sends PSYNC, applies the
/// snapshot and then the stream, and reports its offset to the state machine; reconnects
/// (with a full resync) whenever the link drops. Aborted when the node stops following
/// this master.
async fn follow(shared: Shared, master: NodeId) {
    loop {
        let address = {
            let node = lock(&shared);
            node.cluster
                .node(&master)
                .filter(|m| !m.ip.is_empty())
                .map(|m| (m.ip.to_string(), m.port))
        };
        if let Some((ip, port)) = address {
            if let Ok(Ok(stream)) = tokio::time::timeout(
                Duration::from_secs(1),
                TcpStream::connect((ip.as_str(), port)),
            )
            .await
            {
                replicate(&shared, stream).await;
                lock(&shared).replication.link_up = false;
            }
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// One replication connection, until it fails.
async fn replicate(shared: &Shared, mut stream: TcpStream) {
    // As a replica tells its master where it serves clients, then asks for the stream.
    let mut hello = Vec::new();
    let port = lock(shared).port.to_string();
    encode_command(&["REPLCONF", "listening-port", &port], &mut hello);
    encode_command(&["PSYNC", "?", "-1"], &mut hello);
    if stream.write_all(&hello).await.is_err() {
        return;
    }
    let mut decoder = Decoder::new();
    let mut buf = BytesMut::with_capacity(64 * 1024);
    let mut synced = false;
    let mut acked = None;
    // Until the full sync ends the replica has no offset: "loading" to the cluster.
    {
        let mut node = lock(shared);
        node.replication.offset = 0;
        let id = node.cluster.myself().id;
        node.cluster
            .set_replication_offset(&id, 0, Instant::from_unix_millis(now()));
    }
    loop {
        loop {
            let before = buf.len();
            let frame = match decoder.decode(&mut buf) {
                Ok(Some(frame)) => frame,
                Ok(None) => break,
                Err(_) => return,
            };
            let used = (before - buf.len()) as u64;
            let Some(delay) = apply_frame(shared, frame, used, &mut synced) else {
                return;
            };
            if !synced && delay > 0 {
                tokio::time::sleep(Duration::from_micros(delay)).await;
            }
        }
        // As a replica acknowledges what it applied (REPLCONF ACK), for its master's WAIT.
        let offset = lock(shared).replication.offset;
        if synced && acked != Some(offset) {
            let mut ack = Vec::new();
            encode_command(&["REPLCONF", "ACK", &offset.to_string()], &mut ack);
            if stream.write_all(&ack).await.is_err() {
                return;
            }
            acked = Some(offset);
        }
        match stream.read_buf(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

/// A replica applies one frame of its master's stream; `None` when it is not a toy
/// master's stream, else the `key-load-delay` to wait before the next one (µs a key).
fn apply_frame(shared: &Shared, frame: Frame<Bytes>, used: u64, synced: &mut bool) -> Option<u64> {
    let mut node = lock(shared);
    match frame {
        Frame::SimpleString(line) if line.starts_with(b"FULLRESYNC ") => {
            let offset = line.rsplit(|&b| b == b' ').next();
            let offset = offset
                .and_then(|o| std::str::from_utf8(o).ok()?.parse::<u64>().ok())
                .unwrap_or(0);
            node.replication.offset = offset;
            node.replication.link_up = true;
            *synced = true;
        }
        // The answer to REPLCONF.
        Frame::SimpleString(line) if !*synced && line[..] == b"OK"[..] => {}
        Frame::Array(items) => {
            let args: Vec<Bytes> = items
                .into_iter()
                .filter_map(|item| match item {
                    Frame::BulkString(b) => Some(b),
                    _ => None,
                })
                .collect();
            if !crate::replication::apply(&mut node.db, &args, now()) {
                let text = "replication: not a toy master's stream";
                node.log.write(Level::Warning, text);
                return None;
            }
            // What the master's stream changes goes to this node's append-only file too (the
            // snapshot's FLUSHALL and keys, then each write), as the server feeds its AOF
            // from its master: a replica promoted and then restarted came back with what it
            // held when its file was started, and its shard's keys were gone.
            let ping = args
                .first()
                .is_some_and(|c| c.eq_ignore_ascii_case(b"PING"));
            if !ping {
                if let Some(aof) = node.aof.as_mut() {
                    let mut out = Vec::new();
                    encode_command(&args, &mut out);
                    if let Err(e) = aof.append(&out) {
                        let text = format!("Error writing to the AOF file: {e}");
                        node.log.write(Level::Warning, &text);
                    }
                }
            }
            if *synced {
                node.replication.offset += used;
            }
        }
        _ => {
            let text = "replication: not a toy master's stream";
            node.log.write(Level::Warning, text);
            return None;
        }
    }
    let (id, offset) = (node.cluster.myself().id, node.replication.offset);
    node.cluster
        .set_replication_offset(&id, offset, Instant::from_unix_millis(now()));
    if node.blocked > 0 {
        shared.changed.notify_waiters();
    }
    // `key-load-delay` (µs a key) slows the snapshot down, as it slows the server's
    // loading; the node goes on serving meanwhile.
    Some(u64::try_from(node.settings.number("key-load-delay")).unwrap_or(0))
}

/// A replica listed in `Replication::replicas` for as long as its feed runs.
struct Fed(Shared, u64);

impl Drop for Fed {
    fn drop(&mut self) {
        lock(&self.0)
            .replication
            .replicas
            .retain(|r| r.serial != self.1);
    }
}

/// A client counted in `Node::clients` for as long as this lives.
struct Connected(Shared, u64);

impl Drop for Connected {
    fn drop(&mut self) {
        let mut node = lock(&self.0);
        node.clients -= 1;
        node.pubsub.forget(self.1);
    }
}

/// A client counted in `Node::blocked` for as long as this lives.
struct Blocked(Shared);

impl Blocked {
    fn new(shared: &Shared) -> Self {
        lock(shared).blocked += 1;
        Self(shared.clone())
    }
}

impl Drop for Blocked {
    fn drop(&mut self) {
        lock(&self.0).blocked -= 1;
    }
}

/// The state machine's configuration from the parameters that make it: at start, and
/// again after each CONFIG SET.
pub(crate) fn cluster_config(settings: &Settings, mut config: Config) -> Config {
    let number = |name: &str| u64::try_from(settings.number(name)).unwrap_or(0);
    config.node_timeout =
        redis_cluster_proto::state::Duration::from_millis(number("cluster-node-timeout"));
    let host = settings.get("cluster-announce-hostname").unwrap_or("");
    config.hostname = (!host.is_empty()).then(|| host.to_string());
    config.require_full_coverage = settings.flag("cluster-require-full-coverage");
    config.allow_reads_when_down = settings.flag("cluster-allow-reads-when-down");
    config.allow_pubsubshard_when_down = settings.flag("cluster-allow-pubsubshard-when-down");
    config.replica_validity_factor =
        u32::try_from(number("cluster-replica-validity-factor")).unwrap_or(u32::MAX);
    config.migration_barrier =
        u32::try_from(number("cluster-migration-barrier")).unwrap_or(u32::MAX);
    config.allow_replica_migration = settings.flag("cluster-allow-replica-migration");
    config.replica_no_failover = settings.flag("cluster-replica-no-failover");
    config.preferred_endpoint = match settings.get("cluster-preferred-endpoint-type") {
        Some("hostname") => EndpointType::Hostname,
        Some("unknown-endpoint") => EndpointType::Unknown,
        _ => EndpointType::Ip,
    };
    config
}

/// Logs, once for each, the parameters set away from their defaults that the toy does not
/// act on.
pub(crate) fn tell_inert(node: &mut Node) {
    let inert: Vec<(String, String)> = node
        .settings
        .inert()
        .into_iter()
        .filter(|(name, _)| !node.inert_told.contains(*name))
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect();
    for (name, value) in inert {
        let text = format!("'{name} {value}' is kept but has no effect on the toy node");
        node.log.write(Level::Notice, &text);
        node.inert_told.insert(name);
    }
}

/// A running node, for its driver: `shutdown` on SIGTERM.
pub(crate) struct Handle(Shared);

impl Handle {
    /// What the server does on SIGTERM or SIGINT: saves nodes.conf, and the dataset when it
    /// has save points, removes its pidfile, says goodbye. The caller exits.
    pub(crate) fn shutdown(&self, signal: &str) {
        let mut node = lock(&self.0);
        node.log.raw(&format!(
            "{}:signal-handler Received {signal} scheduling shutdown...\n",
            std::process::id()
        ));
        node.log.write(Level::Warning, "User requested shutdown...");
        save(&node);
        if let Some(aof) = &node.aof {
            node.log
                .write(Level::Notice, "Calling fsync() on the AOF file.");
            if let Err(e) = aof.sync() {
                let text = format!("{}: {e}", aof.path().display());
                node.log.write(Level::Warning, &text);
            }
        }
        if !node.settings.get("save").unwrap_or("").is_empty() {
            node.log.write(
                Level::Notice,
                "Saving the final RDB snapshot before exiting.",
            );
            let _ = save_rdb(&mut node);
        }
        if let Some(pidfile) = &node.pidfile {
            node.log.write(Level::Notice, "Removing the pid file.");
            let _ = std::fs::remove_file(pidfile);
        }
        node.log
            .write(Level::Warning, "Redis is now ready to exit, bye bye...");
    }
}

/// Starts a node as `options` say: loads its nodes.conf if there is one, binds its client
/// and bus ports on 127.0.0.1, and spawns its tasks on the current runtime.
pub(crate) async fn start(options: &Options) -> Result<Handle, String> {
    let mut log = options.log();
    log.role = 'C';
    log.write(
        Level::Warning,
        "oO0OoO0OoO0Oo Redis is starting oO0OoO0OoO0Oo",
    );
    log.write(
        Level::Warning,
        &format!(
            "Redis version=7.0.15 (the toy node of redis-cluster-proto {}), bits=64, pid={}, \
             just started",
            env!("CARGO_PKG_VERSION"),
            std::process::id()
        ),
    );
    log.write(Level::Warning, "Configuration loaded");
    log.role = 'M';
    let port = options.port();
    let mut config = Config::new("127.0.0.1", port);
    config.cport = options.cport();
    let seed = now() ^ u64::from(std::process::id()) << 32 ^ u64::from(port) << 16;
    config.seed = seed;
    let config = cluster_config(&options.settings, config);
    let conf_path = options.conf_path();
    let cluster = match std::fs::read_to_string(&conf_path) {
        Ok(text) => {
            match ClusterNode::from_nodes_conf(config, &text, Instant::from_unix_millis(now())) {
                Ok(cluster) => {
                    let text = format!(
                        "Node configuration loaded, I'm {:.40}",
                        cluster.myself().id.to_string()
                    );
                    log.write(Level::Notice, &text);
                    cluster
                }
                Err(e) => return Err(format!("{}: {e}", conf_path.display())),
            }
        }
        Err(_) => {
            let cluster = ClusterNode::new(config);
            let id = cluster.myself().id;
            log.write(
                Level::Notice,
                &format!("No cluster configuration found, I'm {id}"),
            );
            cluster
        }
    };
    let listen = |port: u16| async move {
        TcpListener::bind(("127.0.0.1", port)).await.map_err(|e| {
            format!(
                "Warning: Could not create server TCP listening socket 127.0.0.1:{port}: \
                 {}\nFailed listening on port {port} (TCP), aborting.",
                config::os_reason(&e)
            )
        })
    };
    let clients = listen(port).await?;
    let bus = listen(options.cport()).await?;
    if options.settings.flag("always-show-logo") {
        log.raw(&format!(
            "\n    toy-node {} (redis-cluster-proto), as Redis 7.0.15, 64 bit\n    Running in \
             cluster mode\n    Port: {port}\n    PID: {}\n\n",
            env!("CARGO_PKG_VERSION"),
            std::process::id()
        ));
    } else {
        log.write(
            Level::Notice,
            &format!("Running mode=cluster, port={port}."),
        );
    }
    log.write(Level::Warning, "Server initialized");
    // As the server: a pidfile when one is named (or when daemonized), a warning if it
    // cannot be written.
    let pidfile = options.path("pidfile");
    if let Some(path) = &pidfile {
        if let Err(e) = std::fs::write(path, format!("{}\n", std::process::id())) {
            let text = format!("Failed to write PID file: {}", config::os_reason(&e));
            log.write(Level::Warning, &text);
        }
    }
    let shared: Shared = Arc::new(State {
        node: Mutex::new(Node {
            cluster,
            port,
            password: options
                .settings
                .get("requirepass")
                .filter(|p| !p.is_empty())
                .map(String::from),
            links: HashMap::new(),
            next_conn: 0,
            db: Db::default(),
            conf_path,
            settings: options.settings.clone(),
            inert_told: HashSet::new(),
            log: log.clone(),
            pidfile,
            rdb_path: options.path("dbfilename"),
            aof_path: options.path("appendfilename"),
            last_save: now() / 1000,
            aof: None,
            next_client: 0,
            started: now(),
            clients: 0,
            stats: Stats::default(),
            blocked: 0,
            in_flight: HashSet::new(),
            replication: Replication::new(seed),
            libraries: Vec::new(),
            pubsub: crate::pubsub::PubSub::default(),
            scripts: crate::scripts::Cache::default(),
            following: None,
            client_pause: None,
        }),
        timer: Notify::new(),
        changed: Notify::new(),
    });
    {
        let mut node = lock(&shared);
        load_data(&mut node)?;
        save(&node);
        tell_inert(&mut node);
        node.log.write(Level::Notice, "Ready to accept connections");
    }
    let handle = shared.clone();
    tokio::spawn(serve_bus(shared.clone(), bus));
    tokio::spawn(run_timer(shared.clone()));
    tokio::spawn(async move {
        loop {
            if let Ok((stream, _)) = clients.accept().await {
                // As the server does: replies leave at once, not when Nagle allows.
                let _ = stream.set_nodelay(true);
                tokio::spawn(serve_client(shared.clone(), stream));
            }
        }
    });
    Ok(Handle(handle))
}
