//! What a nutcracker pool keeps besides its connections: its servers with their counters,
//! the engine crate's sans-IO `twemproxy::Pool` (the continuum of the servers in service, plans, and
//! ejection and retry: `auto_eject_hosts`, `server_failure_limit`, `server_retry_timeout`),
//! and the stats document nutcracker's stats port serves.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use redis_cluster_proto::client::twemproxy::{
    Ejection, Plan, Pool as Continuum, PoolConfig, ServerConfig,
};
use redis_cluster_proto::route::CommandTable;

use super::cluster::Pool;
use super::config::Twemproxy;
use super::log;
use super::stats::{ServerStats, Stats};

/// Microseconds since the epoch, as nutcracker stamps ejections.
pub(crate) fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// One `servers:` entry.
pub(crate) struct Server {
    /// Its name in the stats and on the continuum.
    pub(crate) name: String,
    /// `host:port`.
    pub(crate) addr: String,
    /// Its counters, shared by its connections (`failures` counts those in a row).
    pub(crate) stats: Arc<ServerStats>,
}

/// A nutcracker pool's servers: where keys go and which servers are out is
/// `redis-cluster-client`'s [`twemproxy::Pool`](Continuum); this holds it for the client tasks (lookups read,
/// ejections write), with the servers' addresses and counters.
pub(crate) struct Ring {
    pool: RwLock<Continuum>,
    /// Whether a server is out: while none is, a lookup needs no clock.
    any_out: AtomicBool,
    /// `server_failure_limit` with ejection on.
    limit: Option<u64>,
    /// In configuration order.
    pub(crate) servers: Vec<Server>,
    /// SELECTed on every server connection.
    pub(crate) db: u32,
}

impl Ring {
    /// The pool's servers, all in service.
    pub(crate) fn new(twem: &Twemproxy) -> Self {
        let servers = twem
            .servers
            .iter()
            .map(|s| Server {
                name: s.name.clone(),
                addr: s.address.clone(),
                stats: Arc::default(),
            })
            .collect();
        let ejection = twem.auto_eject_hosts.then(|| Ejection {
            failure_limit: twem.server_failure_limit.max(1),
            retry: twem.server_retry_timeout,
        });
        let pool = Continuum::new(PoolConfig {
            hash: twem.hash,
            hash_tag: twem.hash_tag,
            distribution: twem.distribution,
            servers: twem
                .servers
                .iter()
                .map(|s| ServerConfig {
                    name: s.name.clone(),
                    weight: s.weight,
                })
                .collect(),
            ejection,
        });
        Self {
            pool: RwLock::new(pool),
            any_out: AtomicBool::new(false),
            limit: ejection.map(|e| u64::from(e.failure_limit)),
            servers,
            db: twem.redis_db,
        }
    }

    /// Where `argv` goes (`random` for the random distribution). Servers whose retry time
    /// has come are back first, and a server the plan names that failed
    /// `server_failure_limit` times in a row is ejected and the command planned again.
    pub(crate) fn plan(
        &self,
        table: &CommandTable,
        argv: &[Bytes],
        random: u32,
        stats: &Stats,
    ) -> Plan {
        self.bring_back();
        let mut plan = read(&self.pool).plan(table, argv, random);
        for _ in 0..self.servers.len() {
            let failing = match &plan {
                Plan::One { server, .. } => Some(*server).filter(|s| self.failing(*s)),
                Plan::Fragments(f) => f.parts().iter().map(|(s, _)| *s).find(|s| self.failing(*s)),
                Plan::NoServer { .. } => None,
            };
            let Some(server) = failing else { break };
            self.eject(server, stats);
            plan = read(&self.pool).plan(table, argv, random);
        }
        plan
    }

    /// Ejects every server that has failed too often (the stats document calls this before
    /// it reads the counters, as nutcracker ejects at the failure itself).
    pub(crate) fn eject_failing(&self, stats: &Stats) {
        self.bring_back();
        for index in 0..self.servers.len() {
            if self.failing(index) {
                self.eject(index, stats);
            }
        }
    }

    fn failing(&self, index: usize) -> bool {
        let failures = self
            .servers
            .get(index)
            .map_or(0, |s| s.stats.failures.load(Ordering::Relaxed));
        self.limit.is_some_and(|limit| failures >= limit)
    }

    /// Takes server `index` out of service for its retry time.
    fn eject(&self, index: usize, stats: &Stats) {
        let Some(server) = self.servers.get(index) else {
            return;
        };
        let failures = server.stats.failures.swap(0, Ordering::Relaxed);
        let mut pool = self.pool.write().unwrap_or_else(|e| e.into_inner());
        let Some(back) = pool.eject_if_failing(index, failures, Instant::now()) else {
            return;
        };
        self.any_out.store(true, Ordering::Relaxed);
        drop(pool);
        server
            .stats
            .server_ejected_at
            .store(now_us(), Ordering::Relaxed);
        stats.server_ejects.fetch_add(1, Ordering::Relaxed);
        log::write(
            log::WARN,
            format_args!(
                "server {} ({}) ejected after {failures} failures, back in {:?}",
                server.name,
                server.addr,
                back.saturating_duration_since(Instant::now())
            ),
        );
    }

    /// Ejected servers whose retry time has come are back on the continuum.
    fn bring_back(&self) {
        if !self.any_out.load(Ordering::Relaxed) {
            return;
        }
        let now = Instant::now();
        if read(&self.pool).poll_timeout().is_none_or(|at| at > now) {
            return;
        }
        let mut pool = self.pool.write().unwrap_or_else(|e| e.into_inner());
        pool.handle_timeout(now);
        self.any_out
            .store(pool.poll_timeout().is_some(), Ordering::Relaxed);
    }
}

fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|e| e.into_inner())
}

/// nutcracker's order for names (pools in the document, servers in a pool): shorter first,
/// then by bytes (its string comparison looks at lengths first).
fn by_name<T>(items: &mut [(String, T)]) {
    items.sort_by(|(a, _), (b, _)| a.len().cmp(&b.len()).then(a.cmp(b)));
}

/// What the stats document says about the process.
pub(crate) struct Process {
    /// `source`: the host name.
    pub(crate) source: String,
    /// `uptime`, in seconds.
    pub(crate) uptime: u64,
    /// Listening pools (each counts as a connection, as nutcracker's listeners do).
    pub(crate) listeners: u64,
}

/// The stats document nutcracker's stats port serves: one line of JSON with the same keys
/// in the same order and layout. `total_connections` and `curr_connections` count, as
/// nutcracker does, the listeners, the clients and the server connections (attempts
/// included in the total).
pub(crate) fn document(process: &Process, pools: &[Arc<Pool>]) -> String {
    let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
    let mut listed: Vec<(String, &Arc<Pool>)> = pools.iter().map(|p| (p.name.clone(), p)).collect();
    by_name(&mut listed);
    let (mut total, mut current) = (process.listeners, process.listeners);
    let mut body = String::new();
    for (at, (name, pool)) in listed.iter().enumerate() {
        if let Some(ring) = pool.ring() {
            ring.eject_failing(&pool.stats);
        }
        let stats = &pool.stats;
        total += get(&stats.connections);
        current += get(&stats.connected);
        let _ = write!(
            body,
            "{}\"{}\": {{\"client_eof\":{}, \"client_err\":{}, \"client_connections\":{}, \
             \"server_ejects\":{}, \"forward_error\":{}, \"fragments\":{}",
            // nutcracker separates pools (and servers) with a bare "," after the first.
            if at == 0 { ", " } else { "," },
            escape(name),
            get(&stats.client_eof),
            get(&stats.client_err),
            get(&stats.connected),
            get(&stats.server_ejects),
            get(&stats.forward_error),
            get(&stats.fragments),
        );
        let mut servers = pool.server_list();
        by_name(&mut servers);
        let mut first = true;
        for (name, s) in servers {
            total += get(&s.attempts);
            current += get(&s.server_connections);
            let _ = write!(
                body,
                "{}\"{}\": {{\"server_eof\":{}, \"server_err\":{}, \"server_timedout\":{}, \
                 \"server_connections\":{}, \"server_ejected_at\":{}, \"requests\":{}, \
                 \"request_bytes\":{}, \"responses\":{}, \"response_bytes\":{}, \
                 \"in_queue\":{}, \"in_queue_bytes\":{}, \"out_queue\":{}, \
                 \"out_queue_bytes\":{}}}",
                if first { ", " } else { "," },
                escape(&name),
                get(&s.server_eof),
                get(&s.server_err),
                get(&s.server_timedout),
                get(&s.server_connections),
                get(&s.server_ejected_at),
                get(&s.requests),
                get(&s.request_bytes),
                get(&s.responses),
                get(&s.response_bytes),
                get(&s.in_queue),
                get(&s.in_queue_bytes),
                get(&s.out_queue),
                get(&s.out_queue_bytes),
            );
            first = false;
        }
        body.push('}');
    }
    format!(
        "{{\"service\":\"nutcracker\", \"source\":\"{}\", \"version\":\"{}\", \"uptime\":{}, \
         \"timestamp\":{}, \"total_connections\":{total}, \"curr_connections\":{current}{body}}}\n",
        escape(&process.source),
        env!("CARGO_PKG_VERSION"),
        process.uptime,
        now_us() / 1_000_000,
    )
}

/// A JSON string's content.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

/// The host name, as `gethostname` gives it (`source` in the stats document).
pub(crate) fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into())
}
