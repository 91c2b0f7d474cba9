//! The proxy's counters, and the text `INFO` answers with. The counters named as
//! nutcracker's (a pool's `client_eof` … `fragments`, a server's [`ServerStats`]) are the
//! ones its stats port serves (`twem::Document`).

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// Each server's counters by address, in the order first seen, shared by a pool and its
/// engine task.
pub(crate) type ServerTable =
    std::sync::Arc<std::sync::Mutex<Vec<(String, std::sync::Arc<ServerStats>)>>>;

/// Counters of one pool, updated without locks.
#[derive(Debug)]
pub(crate) struct Stats {
    started: Instant,
    /// Client connections accepted.
    pub(crate) connections: AtomicU64,
    /// Client connections open now.
    pub(crate) connected: AtomicU64,
    /// Commands received.
    pub(crate) commands: AtomicU64,
    /// Error replies sent to clients.
    pub(crate) errors: AtomicU64,
    /// Backend connections opened.
    pub(crate) backend_connections: AtomicU64,
    /// Requests that lost their backend connection or timed out.
    pub(crate) backend_errors: AtomicU64,
    /// MOVED redirects followed.
    pub(crate) moved: AtomicU64,
    /// ASK redirects followed.
    pub(crate) ask: AtomicU64,
    /// TRYAGAIN / CLUSTERDOWN / LOADING retries.
    pub(crate) retries: AtomicU64,
    /// Multi-key commands split across slots.
    pub(crate) splits: AtomicU64,
    /// Slot map loads.
    pub(crate) refreshes: AtomicU64,
    /// Total time from a command's arrival to its reply, in microseconds.
    pub(crate) latency_us: AtomicU64,
    /// Client connections the client closed.
    pub(crate) client_eof: AtomicU64,
    /// Client connections the proxy closed on an error (a request it does not serve, a
    /// split request a server failed).
    pub(crate) client_err: AtomicU64,
    /// Servers ejected from a nutcracker pool's continuum.
    pub(crate) server_ejects: AtomicU64,
    /// Requests (or parts of one) a server failed: refused, timed out, connection lost.
    pub(crate) forward_error: AtomicU64,
    /// Parts of split requests sent.
    pub(crate) fragments: AtomicU64,
    /// Client connections refused for `maxclients`.
    pub(crate) rejected: AtomicU64,
    /// Client connections closed for being idle past `client_timeout`.
    pub(crate) idle_closed: AtomicU64,
}

/// One server's counters, as nutcracker's stats name them: kept by its connections
/// (`Backend`) across reconnections. The gauges (`server_connections`, `in_queue`,
/// `out_queue` and their bytes) go up and down; the rest only up.
#[derive(Debug, Default)]
pub(crate) struct ServerStats {
    /// Connections the server closed.
    pub(crate) server_eof: AtomicU64,
    /// Connections that failed: refused, reset, a reply that is not RESP.
    pub(crate) server_err: AtomicU64,
    /// Connections dropped because a reply was late.
    pub(crate) server_timedout: AtomicU64,
    /// Connections open now.
    pub(crate) server_connections: AtomicU64,
    /// Connections opened or attempted, ever.
    pub(crate) attempts: AtomicU64,
    /// When the server was last ejected, in microseconds since the epoch (0: never).
    pub(crate) server_ejected_at: AtomicU64,
    /// Requests queued to the server (the connection's own AUTH / SELECT not counted).
    pub(crate) requests: AtomicU64,
    pub(crate) request_bytes: AtomicU64,
    /// Replies to them.
    pub(crate) responses: AtomicU64,
    pub(crate) response_bytes: AtomicU64,
    /// Requests waiting to be written, and their bytes.
    pub(crate) in_queue: AtomicU64,
    pub(crate) in_queue_bytes: AtomicU64,
    /// Requests written and waiting for their reply, and their bytes.
    pub(crate) out_queue: AtomicU64,
    pub(crate) out_queue_bytes: AtomicU64,
    /// Connection failures in a row (reset by a reply): ejection counts these.
    pub(crate) failures: AtomicU64,
}

/// How a connection ended, for [`ServerStats::ended`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ending {
    /// The server closed it.
    Eof,
    /// An I/O error, a refused connection, or a reply that is not RESP.
    Error,
    /// A reply came too late.
    Timeout,
    /// The proxy dropped it for its own reasons (a failover, a pinned client gone).
    Dropped,
}

impl ServerStats {
    /// Counts a connection's end (or a failed attempt to open one) and, unless the proxy
    /// dropped it, one more failure in a row.
    pub(crate) fn ended(&self, how: Ending) {
        let counter = match how {
            Ending::Eof => &self.server_eof,
            Ending::Error => &self.server_err,
            Ending::Timeout => &self.server_timedout,
            Ending::Dropped => return,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        self.failures.fetch_add(1, Ordering::Relaxed);
    }

    /// A gauge down by `n` (never below zero).
    pub(crate) fn down(gauge: &AtomicU64, n: u64) {
        let _ = gauge.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
            Some(v.saturating_sub(n))
        });
    }
}

impl Default for Stats {
    fn default() -> Self {
        Self {
            started: Instant::now(),
            connections: AtomicU64::new(0),
            connected: AtomicU64::new(0),
            commands: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            backend_connections: AtomicU64::new(0),
            backend_errors: AtomicU64::new(0),
            moved: AtomicU64::new(0),
            ask: AtomicU64::new(0),
            retries: AtomicU64::new(0),
            splits: AtomicU64::new(0),
            refreshes: AtomicU64::new(0),
            latency_us: AtomicU64::new(0),
            client_eof: AtomicU64::new(0),
            client_err: AtomicU64::new(0),
            server_ejects: AtomicU64::new(0),
            forward_error: AtomicU64::new(0),
            fragments: AtomicU64::new(0),
            rejected: AtomicU64::new(0),
            idle_closed: AtomicU64::new(0),
        }
    }
}

impl Stats {
    /// The `INFO` text: `# Proxy` then `name:value` lines, CRLF-terminated as the server's.
    pub(crate) fn info(&self, pool: &str) -> String {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let commands = get(&self.commands);
        let mut out = String::from("# Proxy\r\n");
        let _ = write!(
            out,
            "pool:{pool}\r\nuptime_in_seconds:{}\r\ntotal_connections_received:{}\r\n\
             connected_clients:{}\r\nrejected_connections:{}\r\nidle_clients_closed:{}\r\n\
             total_commands_processed:{commands}\r\n\
             error_replies:{}\r\nbackend_connections:{}\r\nbackend_errors:{}\r\n\
             redirects_moved:{}\r\nredirects_ask:{}\r\nretries:{}\r\nsplit_commands:{}\r\n\
             slot_map_loads:{}\r\navg_latency_us:{}\r\n",
            self.started.elapsed().as_secs(),
            get(&self.connections),
            get(&self.connected),
            get(&self.rejected),
            get(&self.idle_closed),
            get(&self.errors),
            get(&self.backend_connections),
            get(&self.backend_errors),
            get(&self.moved),
            get(&self.ask),
            get(&self.retries),
            get(&self.splits),
            get(&self.refreshes),
            get(&self.latency_us).checked_div(commands).unwrap_or(0),
        );
        out
    }
}
