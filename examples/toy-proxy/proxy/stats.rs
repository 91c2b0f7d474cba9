//! The proxy's counters, and the text `INFO` answers with.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

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
             connected_clients:{}\r\ntotal_commands_processed:{commands}\r\n\
             error_replies:{}\r\nbackend_connections:{}\r\nbackend_errors:{}\r\n\
             redirects_moved:{}\r\nredirects_ask:{}\r\nretries:{}\r\nsplit_commands:{}\r\n\
             slot_map_loads:{}\r\navg_latency_us:{}\r\n",
            self.started.elapsed().as_secs(),
            get(&self.connections),
            get(&self.connected),
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
