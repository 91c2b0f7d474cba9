//! A pool: a `cluster` pool hands every command to its engine (`driver.rs`, over
//! `redis-cluster-client`); a Sentinel or static pool routes by slot range to standalone
//! masters, one pipelined connection per server; a nutcracker pool by its continuum.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use redis_cluster_proto::hash_slot::Slot;
use redis_cluster_proto::resp::{Frame, encode_command};
use redis_cluster_proto::route::{ClusterError, CommandFlags, CommandTable, Merge, Route, Split};
use tokio::sync::oneshot;

use super::backend::{Backend, BackendError, Reply};
use super::driver::EngineHandle;
use super::sentinel::Groups;
use super::stats::{ServerStats, ServerTable, Stats};
use super::twem::Ring;

/// How often one command is redirected or retried before its error goes to the client.
const ATTEMPTS: usize = 16;

/// A command's arguments.
pub(crate) type Argv = Vec<Bytes>;

/// A request on its way: what the client's writer waits for, in order.
pub(crate) enum Pending {
    /// Answered already (locally, or an error).
    Ready(Frame),
    /// A cluster pool's command, answered by its engine (`None`: by pushes, SUBSCRIBE).
    Engine(oneshot::Receiver<super::driver::Answer>),
    /// One command to one node.
    One(Call),
    /// A split command: one call per part, merged.
    Split(Split, Vec<Call>),
    /// A command sent to several nodes, merged.
    Fan(Merge, Vec<Call>),
    /// SCAN over the masters one after the other.
    Scan(Argv),
    /// A nutcracker pool's command to one server: no retry, a failure is the client's
    /// `-ERR <reason>`.
    Ring(Call),
    /// A nutcracker pool's split command (MGET, DEL, UNLINK, TOUCH, EXISTS, MSET with
    /// several keys): one part per server, merged; a server failing any part fails the
    /// request, and for MGET (`true`) closes the client's connection, as nutcracker does.
    Fragments(Split, Vec<Call>, bool),
    /// Close the client's connection without a reply (nutcracker, when no server is left
    /// for a split MGET).
    Hangup,
    /// A request on a client's pinned connection (WATCH): its reply as it comes.
    Pinned(Arc<Backend>, oneshot::Receiver<Reply>),
    /// A command run on a connection of its own (blocking commands, transactions).
    Dedicated {
        /// The node.
        addr: String,
        /// The bytes to send.
        bytes: Vec<u8>,
        /// Frames it produces; the last is the reply.
        frames: usize,
        /// How long to wait (a blocking command's own timeout, or none).
        wait: Option<Duration>,
    },
}

/// One command queued on a node's connection, with what is needed to send it again.
pub(crate) struct Call {
    argv: Argv,
    slot: Option<Slot>,
    read: bool,
    /// A node the call is bound to whatever the map says (fan-outs, nutcracker pools).
    node: Option<String>,
    backend: Option<Arc<Backend>>,
    rx: Option<oneshot::Receiver<Reply>>,
    error: Option<Frame>,
}

/// The pool.
pub(crate) struct Pool {
    /// Its name.
    pub(crate) name: String,
    /// What is behind it.
    topology: Topology,
    /// Sent with AUTH on every backend connection.
    password: Option<String>,
    timeout: Duration,
    backends: Mutex<HashMap<String, Arc<Backend>>>,
    /// Each server's counters by address, in the order first connected (a nutcracker pool
    /// keeps its servers' in its ring).
    server_stats: ServerTable,
    refreshing: AtomicBool,
    turn: AtomicUsize,
    /// Counters.
    pub(crate) stats: Arc<Stats>,
    /// How much a client connection reads at a time (nutcracker's `-m` mbuf size).
    pub(crate) read_buffer: usize,
}

/// What a pool fronts: exactly one of these.
pub(crate) enum Topology {
    /// A Redis Cluster, behind the engine's task.
    Cluster(EngineHandle),
    /// Standalone masters sharded by slot ranges: Sentinel-managed groups, or fixed
    /// servers (a `static` pool's groups have no Sentinel).
    Groups(Arc<Groups>),
    /// A nutcracker pool: its servers and how keys pick one.
    Ring(Ring),
}

fn error(text: impl AsRef<str>) -> Frame {
    Frame::SimpleError(Bytes::copy_from_slice(text.as_ref().as_bytes()))
}

fn encode(argv: &[Bytes]) -> Vec<u8> {
    let mut out = Vec::new();
    encode_command(argv, &mut out);
    out
}

impl Pool {
    /// A pool in front of `topology`, nothing loaded yet ([`Pool::refresh`]).
    pub(crate) fn new(
        name: String,
        topology: Topology,
        password: Option<String>,
        timeout: Duration,
        stats: Arc<Stats>,
        server_stats: ServerTable,
    ) -> Self {
        Self {
            name,
            topology,
            password,
            timeout,
            backends: Mutex::new(HashMap::new()),
            server_stats,
            refreshing: AtomicBool::new(false),
            turn: AtomicUsize::new(0),
            stats,
            read_buffer: 16 * 1024,
        }
    }

    /// A nutcracker pool's servers.
    pub(crate) fn ring(&self) -> Option<&Ring> {
        match &self.topology {
            Topology::Ring(ring) => Some(ring),
            _ => None,
        }
    }

    /// A Sentinel or static pool's groups.
    pub(crate) fn groups(&self) -> Option<&Arc<Groups>> {
        match &self.topology {
            Topology::Groups(groups) => Some(groups),
            _ => None,
        }
    }

    /// A cluster pool's engine.
    pub(crate) fn engine(&self) -> Option<&EngineHandle> {
        match &self.topology {
            Topology::Cluster(engine) => Some(engine),
            _ => None,
        }
    }

    /// A Sentinel pool waits (a few timeouts at most) until its follower knows every
    /// group's master; other pools have nothing to load (a cluster pool's engine keeps its
    /// own slot map).
    pub(crate) async fn refresh(&self) -> Result<(), String> {
        let Some(groups) = self.groups() else {
            return Ok(());
        };
        let found = groups.wait_known(self.timeout * 3).await;
        if found.is_ok() {
            self.stats.refreshes.fetch_add(1, Ordering::Relaxed);
        }
        found
    }

    /// Refreshes the map in the background, once at a time.
    pub(crate) fn refresh_soon(self: &Arc<Self>) {
        if self.refreshing.swap(true, Ordering::AcqRel) {
            return;
        }
        let pool = self.clone();
        tokio::spawn(async move {
            let _ = pool.refresh().await;
            pool.refreshing.store(false, Ordering::Release);
        });
    }

    /// The counters of the server at `addr` (created on first use).
    fn server_stats(&self, addr: &str) -> Arc<ServerStats> {
        if let Some(ring) = self.ring() {
            if let Some(server) = ring.servers.iter().find(|s| s.addr == addr) {
                return server.stats.clone();
            }
        }
        stats_for(&self.server_stats, addr)
    }

    /// Each server's name and counters, for the stats document.
    pub(crate) fn server_list(&self) -> Vec<(String, Arc<ServerStats>)> {
        match self.ring() {
            Some(ring) => ring
                .servers
                .iter()
                .map(|s| (s.name.clone(), s.stats.clone()))
                .collect(),
            None => lock(&self.server_stats).clone(),
        }
    }

    /// `preconnect: true`: a connection to every server of a nutcracker pool now, before
    /// any client asks.
    pub(crate) async fn preconnect(&self) {
        if let Some(ring) = self.ring() {
            for server in &ring.servers {
                self.backend(&server.addr);
            }
        }
    }

    /// The connection to `addr`, opened (in the background) when there is none or it died;
    /// a connection that cannot be opened fails the requests queued on it.
    fn backend(&self, addr: &str) -> Arc<Backend> {
        if let Some(backend) = lock(&self.backends).get(addr).filter(|b| b.is_alive()) {
            return backend.clone();
        }
        let backend = Backend::open(addr, self.timeout, self.server_stats(addr));
        self.stats
            .backend_connections
            .fetch_add(1, Ordering::Relaxed);
        if let Some(password) = &self.password {
            // Queued first on the connection: everything after it runs authenticated.
            let auth = [Bytes::from_static(b"AUTH"), Bytes::from(password.clone())];
            drop(backend.send_setup(encode(&auth), 1));
        }
        if let Some(db) = self.ring().map(|r| r.db).filter(|db| *db != 0) {
            let select = [Bytes::from_static(b"SELECT"), Bytes::from(db.to_string())];
            drop(backend.send_setup(encode(&select), 1));
        }
        lock(&self.backends).insert(addr.to_string(), backend.clone());
        backend
    }

    /// Where a command for `slot` goes: a group's master (any master when there is no
    /// slot), a nutcracker pool's first server.
    fn node_for(&self, slot: Option<Slot>, _read: bool) -> Option<String> {
        match &self.topology {
            Topology::Ring(ring) => ring.servers.first().map(|s| s.addr.clone()),
            Topology::Groups(groups) => groups.master_for(slot),
            Topology::Cluster(_) => None,
        }
    }

    fn masters(&self) -> Vec<String> {
        match &self.topology {
            Topology::Ring(ring) => ring.servers.iter().map(|s| s.addr.clone()).collect(),
            Topology::Groups(groups) => groups.masters(),
            Topology::Cluster(_) => Vec::new(),
        }
    }

    /// Queues `argv` for `slot` (or any node) now, so that it keeps its place among the
    /// client's commands.
    async fn call(&self, argv: Argv, slot: Option<Slot>, read: bool) -> Call {
        let Some(node) = self.node_for(slot, read) else {
            return Call {
                argv,
                slot,
                read,
                node: None,
                backend: None,
                rx: None,
                error: Some(error("CLUSTERDOWN Hash slot not served")),
            };
        };
        let mut call = self.call_node(&node, argv).await;
        (call.slot, call.read, call.node) = (slot, read, None);
        call
    }

    /// Routes one client command and queues what it needs.
    pub(crate) async fn dispatch(&self, argv: Argv) -> Pending {
        if let Some(ring) = self.ring() {
            return self.ring_dispatch(ring, argv).await;
        }
        if self.engine().is_some() {
            // A cluster pool's clients talk to its engine (client.rs): nothing comes here.
            return Pending::Ready(error(
                "ERR internal: a cluster pool command outside its engine",
            ));
        }
        let table = &CommandTable::REDIS_7_0;
        if let Some(groups) = self.groups() {
            // During a failover the group's new requests wait for its new master: none is
            // acknowledged by a master that is about to stop being one.
            let slot = match table.route(&argv) {
                Ok(Route::Slot(slot)) => Some(slot),
                _ => None,
            };
            if let Err(group) = groups.wait_unheld(slot).await {
                return Pending::Ready(error(format!(
                    "MASTERDOWN the failover of group {group} did not end within the hold"
                )));
            }
        }
        let spec = table.lookup(&argv);
        let read = spec.is_some_and(|s| s.flags.contains(CommandFlags::READONLY));
        if spec.is_some_and(|s| s.flags.contains(CommandFlags::BLOCKING)) {
            return self.dedicated(&argv);
        }
        match table.route(&argv) {
            Ok(Route::Any) => Pending::One(self.call(argv, None, read).await),
            Ok(Route::Slot(slot)) => Pending::One(self.call(argv, Some(slot), read).await),
            // MSETNX split by slot could set some keys and report that it set none: only
            // one server can give its all-or-nothing answer.
            Ok(Route::Split(_)) if argv[0].eq_ignore_ascii_case(b"MSETNX") => Pending::Ready(
                error("CROSSSLOT Keys in request don't hash to the same slot"),
            ),
            Ok(Route::Split(split)) => {
                let mut calls = Vec::with_capacity(split.parts().len());
                for (i, part) in split.parts().iter().enumerate() {
                    let sub: Argv = split.argv(i, &argv).cloned().collect();
                    calls.push(self.call(sub, Some(part.slot), read).await);
                }
                self.stats.splits.fetch_add(1, Ordering::Relaxed);
                Pending::Split(split, calls)
            }
            Ok(Route::AllShards(merge)) => {
                let mut calls = Vec::new();
                for node in self.masters() {
                    calls.push(self.call_node(&node, argv.clone()).await);
                }
                Pending::Fan(merge, calls)
            }
            // Standalone masters have no replicas of their own to reach.
            Ok(Route::AllNodes(merge)) => {
                let mut calls = Vec::new();
                for node in self.masters() {
                    calls.push(self.call_node(&node, argv.clone()).await);
                }
                Pending::Fan(merge, calls)
            }
            Ok(Route::Special) => Pending::Scan(argv),
            Ok(Route::CrossSlot) => Pending::Ready(error(
                "CROSSSLOT Keys in request don't hash to the same slot",
            )),
            // Unknown commands, wrong arities: the server's own error text.
            Err(_) => Pending::One(self.call(argv, None, false).await),
        }
    }

    /// A nutcracker pool's routing: a command goes to the server of its first key (that of
    /// its hash-tagged part) on the continuum of the servers in service. MGET, DEL, UNLINK,
    /// TOUCH, EXISTS and MSET with several keys are split by server, each part named in
    /// lower case as nutcracker sends its fragments, and merged. Blocking commands get a
    /// connection of their own to their key's server.
    async fn ring_dispatch(&self, ring: &Ring, argv: Argv) -> Pending {
        let table = &CommandTable::REDIS_7_0;
        let random = self.turn.fetch_add(1, Ordering::Relaxed) as u32;
        let server = |key: &[u8]| ring.server_for(key, random, &self.stats);
        let splits = [
            &b"mget"[..],
            b"del",
            b"unlink",
            b"touch",
            b"exists",
            b"mset",
        ]
        .into_iter()
        .find(|n| argv[0].eq_ignore_ascii_case(n));
        let pairs = usize::from(splits == Some(&b"mset"[..]));
        if let Some(name) = splits.filter(|_| argv.len() > 2 + pairs * 2) {
            let split = table.split_by(&argv, |key| server(key).unwrap_or(usize::MAX));
            if let Some(split) = split {
                let mget = name == b"mget";
                let name = Bytes::from_static(name);
                if split.parts().iter().any(|p| p.shard == usize::MAX) {
                    // No server left: nutcracker drops an MGET's client without a reply.
                    self.stats.forward_error.fetch_add(1, Ordering::Relaxed);
                    return match mget {
                        true => Pending::Hangup,
                        false => Pending::Ready(error("ERR Connection refused")),
                    };
                }
                let mut calls = Vec::with_capacity(split.parts().len());
                for (i, part) in split.parts().iter().enumerate() {
                    let mut sub: Argv = split.argv(i, &argv).cloned().collect();
                    sub[0] = name.clone();
                    let addr = &ring.servers[part.shard].addr;
                    calls.push(self.call_node(addr, sub).await);
                }
                self.stats
                    .fragments
                    .fetch_add(calls.len() as u64, Ordering::Relaxed);
                return Pending::Fragments(split, calls, mget);
            }
        }
        let first = table
            .keys(&argv)
            .ok()
            .and_then(|keys| keys.positions().next())
            .and_then(|at| argv.get(at));
        let chosen = server(first.map_or(&[][..], |k| k.as_ref()));
        let Some(index) = chosen else {
            self.stats.forward_error.fetch_add(1, Ordering::Relaxed);
            return Pending::Ready(error("ERR Connection refused"));
        };
        let addr = &ring.servers[index].addr;
        let spec = table.lookup(&argv);
        if spec.is_some_and(|s| s.flags.contains(CommandFlags::BLOCKING)) {
            return Pending::Dedicated {
                addr: addr.clone(),
                bytes: encode(&argv),
                frames: 1,
                wait: None,
            };
        }
        Pending::Ring(self.call_node(addr, argv).await)
    }

    async fn call_node(&self, node: &str, argv: Argv) -> Call {
        let mut call = Call {
            argv,
            slot: None,
            read: false,
            node: Some(node.to_string()),
            backend: None,
            rx: None,
            error: None,
        };
        let backend = self.backend(node);
        call.rx = Some(backend.send(encode(&call.argv), 1));
        call.backend = Some(backend);
        call
    }

    /// A blocking command on a connection of its own, to the node of its slot.
    fn dedicated(&self, argv: &Argv) -> Pending {
        let slot = match CommandTable::REDIS_7_0.route(argv) {
            Ok(Route::Slot(slot)) => Some(slot),
            Ok(Route::CrossSlot) => {
                return Pending::Ready(error(
                    "CROSSSLOT Keys in request don't hash to the same slot",
                ));
            }
            _ => None,
        };
        let Some(addr) = self.node_for(slot, false) else {
            return Pending::Ready(error("CLUSTERDOWN Hash slot not served"));
        };
        Pending::Dedicated {
            addr,
            bytes: encode(argv),
            frames: 1,
            wait: None,
        }
    }

    /// The one slot of a transaction's commands (`None` when none has a key), or the
    /// error a client gets for it.
    pub(crate) fn transaction_slot(commands: &[Argv]) -> Result<Option<Slot>, Frame> {
        let mut slot: Option<Slot> = None;
        for argv in commands {
            match CommandTable::REDIS_7_0.route(argv) {
                Ok(Route::Slot(s)) if slot.is_none_or(|known| known == s) => slot = Some(s),
                Ok(Route::Any) => {}
                Ok(Route::Slot(_)) | Ok(Route::CrossSlot) | Ok(Route::Split(_)) => {
                    return Err(error(
                        "CROSSSLOT Keys in request don't hash to the same slot",
                    ));
                }
                Ok(_) => {
                    return Err(error(
                        "ERR this command cannot run inside a transaction through the proxy",
                    ));
                }
                Err(_) => {}
            }
        }
        Ok(slot)
    }

    /// MULTI, the commands, EXEC, as bytes, and the frames they produce.
    pub(crate) fn transaction_bytes(commands: &[Argv]) -> (Vec<u8>, usize) {
        let mut bytes = encode(&[Bytes::from_static(b"MULTI")]);
        for argv in commands {
            encode_command(argv, &mut bytes);
        }
        encode_command(&[Bytes::from_static(b"EXEC")], &mut bytes);
        (bytes, commands.len() + 2)
    }

    /// A transaction (MULTI, the commands, EXEC) on a connection of its own, to the node of
    /// the commands' one slot.
    pub(crate) fn transaction(&self, commands: &[Argv]) -> Pending {
        let slot = match Self::transaction_slot(commands) {
            Ok(slot) => slot,
            Err(frame) => return Pending::Ready(frame),
        };
        let Some(addr) = self.node_for(slot, false) else {
            return Pending::Ready(error("CLUSTERDOWN Hash slot not served"));
        };
        let (bytes, frames) = Self::transaction_bytes(commands);
        Pending::Dedicated {
            addr,
            bytes,
            frames,
            wait: Some(self.timeout),
        }
    }

    /// A connection of its own to the master of `slot` (WATCH pins one; a Pub/Sub client
    /// gets one).
    pub(crate) async fn dedicated_to(&self, slot: Option<Slot>) -> Result<Arc<Backend>, Frame> {
        let Some(addr) = self.node_for(slot, false) else {
            return Err(error("CLUSTERDOWN Hash slot not served"));
        };
        let backend = Backend::connect(&addr, self.timeout)
            .await
            .map_err(|e| error(format!("ERR {e}")))?;
        if let Some(password) = &self.password {
            let auth = [Bytes::from_static(b"AUTH"), Bytes::from(password.clone())];
            drop(backend.send(encode(&auth), 1));
        }
        Ok(backend)
    }

    /// Where a client's Pub/Sub connection goes: SSUBSCRIBE to the node of its channels'
    /// one slot, SUBSCRIBE and PSUBSCRIBE to any master (PUBLISH reaches every node).
    pub(crate) fn pubsub_node(&self, argv: &Argv) -> Result<String, Frame> {
        let slot = if argv[0].eq_ignore_ascii_case(b"SSUBSCRIBE") {
            match CommandTable::REDIS_7_0.route(argv) {
                Ok(Route::Slot(slot)) => Some(slot),
                Ok(Route::CrossSlot) => {
                    return Err(error(
                        "CROSSSLOT Keys in request don't hash to the same slot",
                    ));
                }
                _ => None,
            }
        } else {
            None
        };
        self.node_for(slot, false)
            .ok_or_else(|| error("CLUSTERDOWN Hash slot not served"))
    }

    /// The password backends are sent, if any.
    pub(crate) fn password(&self) -> Option<&str> {
        self.password.as_deref()
    }

    /// Waits for a pending request and follows redirects until it has the client's reply.
    pub(crate) async fn resolve(self: &Arc<Self>, pending: Pending) -> Frame {
        match pending {
            Pending::Ready(frame) => frame,
            Pending::One(call) => self.finish(call).await,
            Pending::Split(split, calls) => split
                .merge(self.finish_all(calls).await)
                .unwrap_or_else(|e| error(format!("ERR cannot merge the replies: {e}"))),
            Pending::Fan(merge, calls) => merge
                .merge(self.finish_all(calls).await)
                .unwrap_or_else(|e| error(format!("ERR cannot merge the replies: {e}"))),
            Pending::Scan(argv) => self.scan(argv).await,
            Pending::Ring(call) => self.finish_ring(call).await.unwrap_or_else(|e| e),
            Pending::Fragments(split, calls, mget) => {
                self.finish_fragments(split, calls, mget).await.0
            }
            Pending::Hangup => error("ERR no server"),
            Pending::Engine(rx) => rx
                .await
                .ok()
                .flatten()
                .unwrap_or_else(|| error("ERR no reply")),
            Pending::Pinned(backend, rx) => backend
                .wait(rx)
                .await
                .unwrap_or_else(|e| error(format!("ERR {e}"))),
            Pending::Dedicated {
                addr,
                bytes,
                frames,
                wait,
            } => {
                let backend = match Backend::connect(&addr, self.timeout).await {
                    Ok(backend) => backend,
                    Err(e) => return error(format!("ERR {e}")),
                };
                let rx = backend.send(bytes, frames);
                let reply = match wait {
                    Some(wait) => match tokio::time::timeout(wait, rx).await {
                        Ok(Ok(reply)) => reply,
                        _ => Err(BackendError::Timeout),
                    },
                    None => rx
                        .await
                        .unwrap_or(Err(BackendError::Closed("closed".into()))),
                };
                backend.kill();
                reply.unwrap_or_else(|e| error(format!("ERR {e}")))
            }
        }
    }

    /// [`Pool::resolve`], and whether the client's connection closes after the reply (a
    /// nutcracker pool's split MGET a server failed), or at once without one.
    pub(crate) async fn resolve_closing(
        self: &Arc<Self>,
        pending: Pending,
    ) -> (Option<Frame>, bool) {
        match pending {
            Pending::Hangup => (None, true),
            Pending::Engine(rx) => {
                let answer = rx
                    .await
                    .unwrap_or_else(|_| Some(error("ERR the proxy's engine stopped")));
                (answer, false)
            }
            Pending::Fragments(split, calls, close) => {
                let (frame, failed) = self.finish_fragments(split, calls, close).await;
                (Some(frame), failed && close)
            }
            other => (Some(self.resolve(other).await), false),
        }
    }

    /// A nutcracker pool's call: its reply, or `Err` with nutcracker's `-ERR <reason>`.
    async fn finish_ring(&self, mut call: Call) -> Result<Frame, Frame> {
        let reply = match (call.rx.take(), &call.backend) {
            (Some(rx), Some(backend)) => backend.wait(rx).await,
            _ => Err(BackendError::Closed("unknown".into())),
        };
        reply.map_err(|e| {
            self.stats.forward_error.fetch_add(1, Ordering::Relaxed);
            self.stats.backend_errors.fetch_add(1, Ordering::Relaxed);
            error(format!("ERR {}", e.errno_text()))
        })
    }

    /// A split command's merged reply, and whether a server failed a part (then the reply
    /// is that failure's `-ERR <reason>`). A part a server answered with an error reply
    /// makes a split DEL, UNLINK, TOUCH, EXISTS or MSET `-ERR Invalid argument`, as
    /// nutcracker 0.5.0 answers (its coalescing meets a reply of the wrong type: EINVAL;
    /// checked with a replica among the servers); a split MGET keeps the merged reply.
    async fn finish_fragments(&self, split: Split, calls: Vec<Call>, mget: bool) -> (Frame, bool) {
        let mut replies = Vec::with_capacity(calls.len());
        let mut failed = None;
        for call in calls {
            match self.finish_ring(call).await {
                Ok(frame) => replies.push(frame),
                Err(frame) => {
                    failed.get_or_insert(frame);
                }
            }
        }
        if let Some(frame) = failed {
            return (frame, true);
        }
        if !mget && replies.iter().any(Frame::is_error) {
            return (error("ERR Invalid argument"), false);
        }
        let merged = split
            .merge(replies)
            .unwrap_or_else(|e| error(format!("ERR cannot merge the replies: {e}")));
        (merged, false)
    }

    /// The call sent again: to its bound node, or wherever the map now sends its slot.
    async fn again(&self, call: Call) -> Call {
        match call.node {
            Some(node) => self.call_node(&node, call.argv).await,
            None => self.call(call.argv, call.slot, call.read).await,
        }
    }

    /// Every call's reply, in order.
    async fn finish_all(self: &Arc<Self>, calls: Vec<Call>) -> Vec<Frame> {
        let mut replies = Vec::with_capacity(calls.len());
        for call in calls {
            replies.push(self.finish(call).await);
        }
        replies
    }

    /// One call's reply to a standalone server: READONLY / MASTERDOWN (a Sentinel group in a
    /// failover), TRYAGAIN, LOADING and lost connections are retried with a growing pause.
    async fn finish(self: &Arc<Self>, mut call: Call) -> Frame {
        let mut pause = Duration::from_millis(5);
        for attempt in 0..ATTEMPTS {
            let reply = match (call.error.take(), call.rx.take(), &call.backend) {
                (Some(frame), _, _) => Ok(frame),
                (None, Some(rx), Some(backend)) => backend.wait(rx).await,
                _ => Err(BackendError::Closed("not sent".into())),
            };
            let last = attempt + 1 == ATTEMPTS;
            let frame = match reply {
                Ok(frame) => frame,
                Err(e) => {
                    self.stats.backend_errors.fetch_add(1, Ordering::Relaxed);
                    // A node that refuses connections: its error at once, as when the
                    // connection was opened before queuing.
                    if last || call.argv.is_empty() || matches!(e, BackendError::Connect(..)) {
                        return error(format!("ERR {e}"));
                    }
                    self.refresh_soon();
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_millis(500));
                    call = self.again(call).await;
                    continue;
                }
            };
            let Frame::SimpleError(text) = &frame else {
                return frame;
            };
            match ClusterError::parse(text) {
                // READONLY / MASTERDOWN from a Sentinel group's node: it was demoted, or its
                // master is away; ask the Sentinels and try again.
                ClusterError::ReadOnly | ClusterError::MasterDown
                    if !last && self.groups().is_some() =>
                {
                    self.stats.retries.fetch_add(1, Ordering::Relaxed);
                    self.refresh_soon();
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_millis(500));
                    call = self.again(call).await;
                }
                ClusterError::TryAgain | ClusterError::ClusterDown(_) | ClusterError::Loading
                    if !last =>
                {
                    self.stats.retries.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_millis(500));
                    self.refresh_soon();
                    call = self.again(call).await;
                }
                _ => return frame,
            }
        }
        error("ERR too many redirects")
    }

    /// A Sentinel switch: new requests go to the new master; the old connection drains
    /// (what is in flight finishes) and is dropped when the last of it is answered.
    pub(crate) fn switched(&self, old: &str) {
        lock(&self.backends).remove(old);
    }

    /// SCAN across the masters: the proxy's cursor is the node's cursor times 1024 plus the
    /// node's place in the sorted list of masters.
    async fn scan(self: &Arc<Self>, mut argv: Argv) -> Frame {
        let masters = self.masters();
        let cursor: u64 = argv
            .get(1)
            .and_then(|c| std::str::from_utf8(c).ok())
            .and_then(|c| c.parse().ok())
            .unwrap_or(u64::MAX);
        if cursor == u64::MAX || masters.is_empty() {
            return error("ERR invalid cursor");
        }
        let (mut node, mut inner) = ((cursor % 1024) as usize, cursor / 1024);
        while node < masters.len() {
            argv[1] = Bytes::from(inner.to_string());
            let call = self.call_node(&masters[node], argv.clone()).await;
            let reply = self.finish(call).await;
            let Frame::Array(mut parts) = reply else {
                return reply;
            };
            let (Some(keys), Some(next)) = (parts.pop(), parts.pop()) else {
                return error("ERR unexpected SCAN reply");
            };
            let next: u64 = match &next {
                Frame::BulkString(b) => std::str::from_utf8(b)
                    .ok()
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(0),
                _ => 0,
            };
            let (following, at) = if next != 0 {
                (next, node)
            } else {
                (0, node + 1)
            };
            let out = if next == 0 && at >= masters.len() {
                0
            } else {
                match following.checked_mul(1024) {
                    Some(base) => base + at as u64,
                    None => return error("ERR the node's cursor is too large for the proxy"),
                }
            };
            let empty = matches!(&keys, Frame::Array(k) if k.is_empty());
            if !empty || out == 0 {
                return Frame::Array(vec![Frame::BulkString(Bytes::from(out.to_string())), keys]);
            }
            (node, inner) = (at, following);
        }
        Frame::Array(vec![
            Frame::BulkString(Bytes::from_static(b"0")),
            Frame::Array(vec![]),
        ])
    }
}

/// The counters of the server at `addr` in `table`, created on first use.
pub(crate) fn stats_for(
    table: &Mutex<Vec<(String, Arc<ServerStats>)>>,
    addr: &str,
) -> Arc<ServerStats> {
    let mut known = lock(table);
    if let Some((_, stats)) = known.iter().find(|(a, _)| a == addr) {
        return stats.clone();
    }
    let stats = Arc::<ServerStats>::default();
    known.push((addr.to_string(), stats.clone()));
    stats
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
