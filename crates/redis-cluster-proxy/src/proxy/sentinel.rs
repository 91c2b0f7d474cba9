//! A `sentinel` pool's topology: groups (each a Sentinel-managed master name) sharded by hash
//! slot ranges, and the Sentinels that say where each group's master is.
//!
//! What Sentinel says is read by `redis-cluster-client`'s [`Follower`] (it asks for each
//! group's master, checks ROLE, hears every Sentinel, and says when to hold a group during a
//! failover); [`Groups::follow`] is its driver: sockets and a timer. What it hears goes to the
//! pool's engine (the slot map of the groups' masters, holds and releases), which routes,
//! holds and retries; the groups keep each master for INFO.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use redis_cluster_proto::client::sentinel::{Follower, FollowerConfig, Output};
use redis_cluster_proto::client::{ConnId, IdHasher};
use redis_cluster_proto::hash_slot::{Slot, SlotRange};
use redis_cluster_proto::route::{Endpoint, SlotMap};
use tokio::sync::{Notify, mpsc};

use super::driver::EngineHandle;
use super::log;
use super::net::{self, Wire};

/// One group: a master name and the slots it serves.
pub(crate) struct Group {
    pub(crate) name: String,
    pub(crate) first: u16,
    pub(crate) last: u16,
    /// `host:port` of its master, once known.
    pub(crate) master: RwLock<Option<String>>,
}

/// The groups and the Sentinels.
pub(crate) struct Groups {
    pub(crate) sentinels: Vec<String>,
    pub(crate) groups: Vec<Group>,
    /// The Sentinel in use, by index.
    pub(crate) current: AtomicUsize,
    /// Switches followed.
    pub(crate) switches: AtomicUsize,
    /// Woken when a master becomes known.
    pub(crate) changed: Notify,
}

fn read<T: Clone>(lock: &RwLock<T>) -> T {
    lock.read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone()
}

fn set<T>(lock: &RwLock<T>, value: T) {
    *lock
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = value;
}

fn endpoint(addr: &str) -> Option<Endpoint> {
    addr.parse().ok()
}

impl Group {
    /// Its slots (`None` only for a range the configuration reader would have refused).
    fn range(&self) -> Option<SlotRange> {
        SlotRange::new(Slot::new(self.first)?, Slot::new(self.last)?)
    }
}

impl Groups {
    pub(crate) fn new(sentinels: Vec<String>, groups: Vec<(String, u16, u16)>) -> Self {
        Self {
            sentinels,
            groups: groups
                .into_iter()
                .map(|(name, first, last)| Group {
                    name,
                    first,
                    last,
                    master: RwLock::new(None),
                })
                .collect(),
            current: AtomicUsize::new(0),
            switches: AtomicUsize::new(0),
            changed: Notify::new(),
        }
    }

    /// Fixed servers: groups named by their address, whose masters never move (no
    /// Sentinel).
    pub(crate) fn fixed(servers: Vec<(String, u16, u16)>) -> Self {
        let groups = Self::new(Vec::new(), servers);
        for group in &groups.groups {
            set(&group.master, Some(group.name.clone()));
        }
        groups
    }

    /// The slot map of the masters known: each group's range to its master.
    pub(crate) fn map(&self) -> SlotMap {
        let mut map = SlotMap::default();
        for group in &self.groups {
            let (Some(master), Some(range)) = (read(&group.master), group.range()) else {
                continue;
            };
            if let Some(master) = endpoint(&master) {
                map.assign_range(range, master);
            }
        }
        map
    }

    /// The Sentinel in use.
    pub(crate) fn sentinel(&self) -> &str {
        let at = self.current.load(Ordering::Relaxed) % self.sentinels.len().max(1);
        self.sentinels.get(at).map_or("", String::as_str)
    }

    /// Waits until every group's master is known, or `limit` passed.
    pub(crate) async fn wait_known(&self, limit: Duration) -> Result<(), String> {
        let deadline = Instant::now() + limit;
        loop {
            let notified = self.changed.notified();
            let missing: Vec<&str> = self
                .groups
                .iter()
                .filter(|g| read(&g.master).is_none())
                .map(|g| g.name.as_str())
                .collect();
            if missing.is_empty() {
                return Ok(());
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(format!("no master known for {}", missing.join(", ")));
            }
            let _ = tokio::time::timeout(deadline - now, notified).await;
        }
    }

    /// Drives the pool's Sentinel [`Follower`] forever, telling `engine` what it hears.
    pub(crate) async fn follow(
        self: Arc<Self>,
        timeout: Duration,
        password: Option<String>,
        engine: EngineHandle,
    ) {
        let sentinels = self.sentinels.iter().filter_map(|s| endpoint(s)).collect();
        let names = self.groups.iter().map(|g| g.name.clone()).collect();
        let mut config = FollowerConfig::new(sentinels, names);
        config.auth = password.map(|p| (None, p));
        let mut follower = Follower::new(config, Instant::now());
        let (tx, mut rx) = mpsc::unbounded_channel::<Wire>();
        let mut writers: HashMap<ConnId, mpsc::UnboundedSender<Vec<u8>>, IdHasher> =
            HashMap::default();
        let mut readers: HashMap<ConnId, tokio::task::AbortHandle, IdHasher> = HashMap::default();
        let mut out = Vec::new();
        loop {
            while let Some(output) = follower.poll_output() {
                match output {
                    Output::Connect { conn, endpoint } => {
                        let reader =
                            net::connect(conn, endpoint.to_string(), timeout, tx.clone(), |w| w);
                        readers.insert(conn, reader);
                    }
                    Output::Close { conn } => {
                        writers.remove(&conn);
                        if let Some(reader) = readers.remove(&conn) {
                            reader.abort();
                        }
                    }
                    other => self.apply(&follower, other, &engine),
                }
            }
            while let Some(conn) = follower.poll_transmit(&mut out) {
                if let Some(writer) = writers.get(&conn) {
                    let _ = writer.send(std::mem::take(&mut out));
                }
                out.clear();
            }
            let at = follower
                .poll_timeout()
                .unwrap_or_else(|| Instant::now() + Duration::from_secs(1));
            tokio::select! {
                wire = rx.recv() => {
                    let now = Instant::now();
                    match wire {
                        Some(Wire::Connected(conn, writer)) => {
                            writers.insert(conn, writer);
                            follower.handle_connected(now, conn);
                        }
                        Some(Wire::Data(conn, bytes)) => follower.handle_data(now, conn, &bytes),
                        Some(Wire::Closed(conn, reason)) => {
                            writers.remove(&conn);
                            readers.remove(&conn);
                            follower.handle_closed(now, conn, &reason);
                        }
                        None => return,
                    }
                }
                () = tokio::time::sleep_until(tokio::time::Instant::from_std(at)) => {
                    follower.handle_timeout(Instant::now());
                }
            }
        }
    }

    /// What the follower said, into the state the pool reads, and the log.
    fn apply(&self, follower: &Follower, output: Output, engine: &EngineHandle) {
        let group = |name: &str| self.groups.iter().find(|g| g.name == name);
        match output {
            Output::Master {
                group: name,
                old,
                new,
            } => {
                let Some(g) = group(&name) else { return };
                let new = new.to_string();
                log::write(
                    log::NOTICE,
                    format_args!(
                        "group {name}: master {} -> {new}",
                        old.as_ref()
                            .map_or_else(|| "none".to_string(), ToString::to_string)
                    ),
                );
                set(&g.master, Some(new));
                if old.is_some() {
                    self.switches.fetch_add(1, Ordering::Relaxed);
                }
                engine.set_slot_map(self.map());
            }
            Output::Hold {
                group: name,
                event,
                sentinel,
            } => {
                let Some(g) = group(&name) else { return };
                if let (Some(until), Some(range)) =
                    (follower.held_until(&name, Instant::now()), g.range())
                {
                    engine.hold(range, until);
                }
                log::write(
                    log::NOTICE,
                    format_args!(
                        "group {name}: {event} from sentinel {sentinel}: holding its requests"
                    ),
                );
            }
            Output::Release {
                group: name,
                switched,
            } => {
                let Some(g) = group(&name) else { return };
                if let Some(range) = g.range() {
                    engine.release(range);
                }
                log::write(
                    log::NOTICE,
                    format_args!("group {name}: requests released (switched: {switched})"),
                );
            }
            Output::Notice { sentinel, text } => {
                log::write(log::NOTICE, format_args!("sentinel {sentinel}: {text}"));
            }
            _ => {}
        }
        if let Some(at) = follower.sentinel() {
            if let Some(i) = self
                .sentinels
                .iter()
                .position(|s| endpoint(s).as_ref() == Some(at))
            {
                self.current.store(i, Ordering::Relaxed);
            }
        }
        self.changed.notify_waiters();
    }
}
