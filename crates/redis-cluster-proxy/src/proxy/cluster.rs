//! A pool: a `cluster`, `sentinel` or `static` pool hands every command to its engine
//! (`driver.rs`, over `redis-cluster-client`: a cluster's slot map, or the masters the
//! configuration and Sentinel name); a nutcracker pool routes by its continuum to its
//! servers, one pipelined connection each.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use redis_cluster_proto::client::twemproxy::{Fragments, Plan};
use redis_cluster_proto::resp::{Frame, encode_command};
use redis_cluster_proto::route::CommandTable;
use tokio::sync::oneshot;

use super::backend::{Backend, BackendError, Reply};
use super::config::ClientLimits;
use super::driver::EngineHandle;
use super::sentinel::Groups;
use super::stats::{ServerStats, ServerTable, Stats};
use super::twem::Ring;

/// A command's arguments.
pub(crate) type Argv = Vec<Bytes>;

/// A request on its way: what the client's writer waits for, in order.
pub(crate) enum Pending {
    /// Answered already (locally, or an error).
    Ready(Frame),
    /// A nutcracker pool's command to one server: no retry, a failure is the client's
    /// `-ERR <reason>`.
    Ring(Call),
    /// A nutcracker pool's split command (MGET, DEL, UNLINK, TOUCH, EXISTS, MSET with
    /// several keys): one part per server, merged by [`Fragments::merge`].
    /// Boxed: every reply of a client is moved through its channel, and few are split.
    Fragments(Box<(Fragments, Vec<Call>)>),
    /// Close the client's connection without a reply (nutcracker, when no server is left
    /// for a split MGET).
    Hangup,
    /// A nutcracker pool's blocking command, on a connection of its own.
    Dedicated {
        /// The server.
        addr: String,
        /// The bytes to send.
        bytes: Vec<u8>,
    },
}

/// One command queued on a server's connection.
pub(crate) struct Call {
    backend: Arc<Backend>,
    rx: oneshot::Receiver<Reply>,
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
    /// A nutcracker pool's server connections.
    backends: Mutex<HashMap<String, Arc<Backend>>>,
    /// Each server's counters by address, in the order first connected (a nutcracker pool
    /// keeps its servers' in its ring).
    server_stats: ServerTable,
    turn: AtomicUsize,
    /// Counters.
    pub(crate) stats: Arc<Stats>,
    /// How much a client connection reads at a time (nutcracker's `-m` mbuf size).
    pub(crate) read_buffer: usize,
    /// How many clients may be connected at once; `None` for no limit.
    pub(crate) maxclients: Option<u64>,
    /// How long a client may be idle before it is closed; `None` for never.
    pub(crate) client_timeout: Option<Duration>,
    /// What one client may send and leave unread.
    pub(crate) limits: ClientLimits,
}

/// What a pool fronts: exactly one of these.
pub(crate) enum Topology {
    /// A Redis Cluster, behind the engine's task.
    Cluster(EngineHandle),
    /// Standalone masters sharded by slot ranges, behind the engine's task: Sentinel-managed
    /// groups, or fixed servers (a `static` pool's groups have no Sentinel).
    Groups(EngineHandle, Arc<Groups>),
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
    /// A pool in front of `topology`.
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
            turn: AtomicUsize::new(0),
            stats,
            read_buffer: 16 * 1024,
            maxclients: None,
            client_timeout: None,
            limits: ClientLimits::default(),
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
            Topology::Groups(_, groups) => Some(groups),
            _ => None,
        }
    }

    /// The engine of a cluster, Sentinel or static pool.
    pub(crate) fn engine(&self) -> Option<&EngineHandle> {
        match &self.topology {
            Topology::Cluster(engine) | Topology::Groups(engine, _) => Some(engine),
            _ => None,
        }
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

    /// A nutcracker pool's routing, as its [`Ring`] plans it: a command to the server of its
    /// first key; MGET, DEL, UNLINK, TOUCH, EXISTS and MSET with several keys split by
    /// server and merged; blocking commands on a connection of their own.
    pub(crate) async fn dispatch(&self, argv: Argv) -> Pending {
        let Some(ring) = self.ring() else {
            // Every other pool's clients talk to its engine (client.rs): nothing comes here.
            return Pending::Ready(error("ERR internal: a command outside the pool's engine"));
        };
        let random = self.turn.fetch_add(1, Ordering::Relaxed) as u32;
        match ring.plan(&CommandTable::REDIS_7_0, &argv, random, &self.stats) {
            Plan::One { server, blocking } => {
                let addr = &ring.servers[server].addr;
                if blocking {
                    return Pending::Dedicated {
                        addr: addr.clone(),
                        bytes: encode(&argv),
                    };
                }
                Pending::Ring(self.call_node(addr, argv).await)
            }
            Plan::Fragments(fragments) => {
                let mut calls = Vec::with_capacity(fragments.parts().len());
                for (server, part) in fragments.parts() {
                    calls.push(
                        self.call_node(&ring.servers[*server].addr, part.clone())
                            .await,
                    );
                }
                self.stats
                    .fragments
                    .fetch_add(calls.len() as u64, Ordering::Relaxed);
                Pending::Fragments(Box::new((fragments, calls)))
            }
            Plan::NoServer { reply, hang_up } => {
                self.stats.forward_error.fetch_add(1, Ordering::Relaxed);
                match hang_up {
                    true => Pending::Hangup,
                    false => Pending::Ready(reply),
                }
            }
        }
    }

    async fn call_node(&self, node: &str, argv: Argv) -> Call {
        let backend = self.backend(node);
        let rx = backend.send(encode(&argv), 1);
        Call { backend, rx }
    }

    /// The password backends are sent, if any.
    pub(crate) fn password(&self) -> Option<&str> {
        self.password.as_deref()
    }

    /// Waits for a pending request's reply.
    pub(crate) async fn resolve(self: &Arc<Self>, pending: Pending) -> Frame {
        match pending {
            Pending::Ready(frame) => frame,
            Pending::Ring(call) => self.finish_ring(call).await.unwrap_or_else(|e| e),
            Pending::Fragments(parts) => self.finish_fragments(parts.0, parts.1).await.0,
            Pending::Hangup => error("ERR no server"),
            Pending::Dedicated { addr, bytes } => {
                let backend = match Backend::connect(&addr, self.timeout).await {
                    Ok(backend) => backend,
                    Err(e) => return error(format!("ERR {e}")),
                };
                let rx = backend.send(bytes, 1);
                let reply = rx
                    .await
                    .unwrap_or(Err(BackendError::Closed("closed".into())));
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
            Pending::Fragments(parts) => {
                let (frame, hang_up) = self.finish_fragments(parts.0, parts.1).await;
                (Some(frame), hang_up)
            }
            other => (Some(self.resolve(other).await), false),
        }
    }

    /// A nutcracker pool's call: its reply, or `Err` with nutcracker's `-ERR <reason>`.
    async fn finish_ring(&self, call: Call) -> Result<Frame, Frame> {
        let reply = call.backend.wait(call.rx).await;
        reply.map_err(|e| {
            self.stats.forward_error.fetch_add(1, Ordering::Relaxed);
            self.stats.backend_errors.fetch_add(1, Ordering::Relaxed);
            error(format!("ERR {}", e.errno_text()))
        })
    }

    /// A split command's merged reply (the engine crate's [`Fragments::merge`]), and
    /// whether the client's connection closes after it.
    async fn finish_fragments(&self, fragments: Fragments, calls: Vec<Call>) -> (Frame, bool) {
        let mut replies = Vec::with_capacity(calls.len());
        for call in calls {
            let reply = call.backend.wait(call.rx).await;
            if reply.is_err() {
                self.stats.forward_error.fetch_add(1, Ordering::Relaxed);
                self.stats.backend_errors.fetch_add(1, Ordering::Relaxed);
            }
            replies.push(reply.map_err(|e| e.errno_text().to_string()));
        }
        let merged = fragments.merge(replies);
        (merged.reply, merged.hang_up)
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
