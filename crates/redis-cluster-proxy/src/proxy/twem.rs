//! What a nutcracker pool keeps besides its connections: its servers with their counters,
//! their ejection and retry (`auto_eject_hosts`, `server_failure_limit`,
//! `server_retry_timeout`), the continuum of the servers in service, and the stats document
//! nutcracker's stats port serves.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redis_cluster_proto::route::twemproxy::{Continuum, Distribution, Hash, Weighted};

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
    weight: u32,
    /// Its counters, shared by its connections.
    pub(crate) stats: Arc<ServerStats>,
    /// While ejected: when it goes back on the continuum (µs since the epoch); 0 in service.
    retry_at: AtomicU64,
}

/// `auto_eject_hosts: true`: after `limit` failures in a row a server leaves the continuum
/// for `retry`.
struct Eject {
    limit: u64,
    retry: Duration,
}

/// The continuum of the servers in service.
struct Live {
    continuum: Continuum,
    /// Continuum index → server index.
    servers: Vec<usize>,
    /// The earliest time an ejected server comes back (µs; `u64::MAX`: none is out).
    next_rebuild: u64,
}

/// A nutcracker pool's servers and how a key picks one.
pub(crate) struct Ring {
    pub(crate) hash: Hash,
    pub(crate) hash_tag: Option<[u8; 2]>,
    distribution: Distribution,
    /// In configuration order.
    pub(crate) servers: Vec<Server>,
    /// SELECTed on every server connection.
    pub(crate) db: u32,
    eject: Option<Eject>,
    live: RwLock<Live>,
    /// The live continuum's `next_rebuild`, readable without the lock: while no server is
    /// out (`u64::MAX`) a lookup needs no clock.
    next_rebuild: AtomicU64,
}

impl Ring {
    /// The pool's servers, all in service.
    pub(crate) fn new(twem: &Twemproxy) -> Self {
        let servers: Vec<Server> = twem
            .servers
            .iter()
            .map(|s| Server {
                name: s.name.clone(),
                addr: s.address.clone(),
                weight: s.weight,
                stats: Arc::default(),
                retry_at: AtomicU64::new(0),
            })
            .collect();
        let eject = twem.auto_eject_hosts.then(|| Eject {
            limit: u64::from(twem.server_failure_limit.max(1)),
            retry: twem.server_retry_timeout,
        });
        let live = build(twem.distribution, &servers, 0);
        let next_rebuild = AtomicU64::new(live.next_rebuild);
        Self {
            hash: twem.hash,
            hash_tag: twem.hash_tag,
            distribution: twem.distribution,
            servers,
            db: twem.redis_db,
            eject,
            live: RwLock::new(live),
            next_rebuild,
        }
    }

    /// The server `key` goes to (`random` for the random distribution), or `None` when every
    /// server is ejected. A server that failed `server_failure_limit` times in a row is
    /// ejected first, and servers whose retry time has come are back.
    pub(crate) fn server_for(&self, key: &[u8], random: u32, stats: &Stats) -> Option<usize> {
        if self.next_rebuild.load(Ordering::Relaxed) != u64::MAX {
            let now = now_us();
            if self.next_rebuild.load(Ordering::Relaxed) <= now {
                self.rebuild(now);
            }
        }
        loop {
            let chosen = {
                let live = read(&self.live);
                if live.servers.is_empty() {
                    return None;
                }
                let at = live
                    .continuum
                    .server_for(self.hash, self.hash_tag, key, random);
                live.servers.get(at).copied()?
            };
            if !self.eject_if_failing(chosen, stats) {
                return Some(chosen);
            }
        }
    }

    /// Ejects every server that has failed too often (the stats document calls this before
    /// it reads the counters, as nutcracker ejects at the failure itself).
    pub(crate) fn eject_failing(&self, stats: &Stats) {
        for index in 0..self.servers.len() {
            self.eject_if_failing(index, stats);
        }
        let now = now_us();
        if self.next_rebuild.load(Ordering::Relaxed) <= now {
            self.rebuild(now);
        }
    }

    /// Ejects server `index` if it failed `limit` times in a row; whether it did.
    fn eject_if_failing(&self, index: usize, stats: &Stats) -> bool {
        let (Some(eject), Some(server)) = (&self.eject, self.servers.get(index)) else {
            return false;
        };
        let failures = &server.stats.failures;
        let due = failures.load(Ordering::Relaxed);
        if due < eject.limit
            || failures
                .compare_exchange(due, 0, Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
        {
            return false;
        }
        let now = now_us();
        let back = now + eject.retry.as_micros() as u64;
        server.retry_at.store(back.max(1), Ordering::Relaxed);
        server.stats.server_ejected_at.store(now, Ordering::Relaxed);
        stats.server_ejects.fetch_add(1, Ordering::Relaxed);
        log::write(
            log::WARN,
            format_args!(
                "server {} ({}) ejected after {due} failures, back in {:?}",
                server.name, server.addr, eject.retry
            ),
        );
        self.rebuild(now);
        true
    }

    /// The continuum again, from the servers in service at `now`.
    fn rebuild(&self, now: u64) {
        let live = build(self.distribution, &self.servers, now);
        let mut current = self.live.write().unwrap_or_else(|e| e.into_inner());
        self.next_rebuild
            .store(live.next_rebuild, Ordering::Relaxed);
        *current = live;
    }
}

fn build(distribution: Distribution, servers: &[Server], now: u64) -> Live {
    let mut next_rebuild = u64::MAX;
    let mut weighted = Vec::new();
    let mut indexes = Vec::new();
    for (index, server) in servers.iter().enumerate() {
        let retry_at = server.retry_at.load(Ordering::Relaxed);
        if retry_at > now {
            next_rebuild = next_rebuild.min(retry_at);
            continue;
        }
        if retry_at != 0 {
            server.retry_at.store(0, Ordering::Relaxed);
        }
        weighted.push(Weighted {
            name: server.name.clone(),
            weight: server.weight,
        });
        indexes.push(index);
    }
    Live {
        continuum: Continuum::new(distribution, &weighted),
        servers: indexes,
        next_rebuild,
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
