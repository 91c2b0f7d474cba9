//! A `sentinel` pool's topology: groups (each a Sentinel-managed master name) sharded by hash
//! slot ranges, and the Sentinels that say where each group's master is.
//!
//! What Sentinel says is read by `redis-cluster-client`'s [`Follower`] (it asks for each
//! group's master, checks ROLE, hears every Sentinel, and holds a group during a failover);
//! [`Groups::follow`] is its driver: sockets, a timer, and the shared state the pool reads
//! (each group's master, and until when its requests wait).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use redis_cluster_proto::client::sentinel::{Follower, FollowerConfig, Output};
use redis_cluster_proto::client::{ConnId, IdHasher};
use redis_cluster_proto::hash_slot::Slot;
use redis_cluster_proto::route::Endpoint;
use tokio::sync::{Notify, mpsc};

use super::log;
use super::net::{self, Wire};

/// One group: a master name and the slots it serves.
pub(crate) struct Group {
    pub(crate) name: String,
    pub(crate) first: u16,
    pub(crate) last: u16,
    /// `host:port` of its master, once known.
    pub(crate) master: RwLock<Option<String>>,
    /// A failover is under way: new requests wait until this moment at most.
    pub(crate) held: RwLock<Option<Instant>>,
}

/// The groups and the Sentinels.
pub(crate) struct Groups {
    pub(crate) sentinels: Vec<String>,
    pub(crate) groups: Vec<Group>,
    /// The Sentinel in use, by index.
    pub(crate) current: AtomicUsize,
    /// Switches followed.
    pub(crate) switches: AtomicUsize,
    /// Woken when a master becomes known or a hold ends.
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
                    held: RwLock::new(None),
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

    /// The master of the group serving `slot` (the first group's for no slot).
    pub(crate) fn master_for(&self, slot: Option<Slot>) -> Option<String> {
        let group = match slot {
            Some(slot) => {
                let slot = u16::from(slot);
                self.groups
                    .iter()
                    .find(|g| g.first <= slot && slot <= g.last)?
            }
            None => self.groups.first()?,
        };
        read(&group.master)
    }

    /// Every group's master that is known.
    pub(crate) fn masters(&self) -> Vec<String> {
        let mut masters: Vec<String> = self.groups.iter().filter_map(|g| read(&g.master)).collect();
        masters.sort();
        masters.dedup();
        masters
    }

    /// The Sentinel in use.
    pub(crate) fn sentinel(&self) -> &str {
        let at = self.current.load(Ordering::Relaxed) % self.sentinels.len().max(1);
        self.sentinels.get(at).map_or("", String::as_str)
    }

    /// Waits while the group of `slot` (every group, for none) is held by a failover, at
    /// most until its hold ends; `Err` with the group's name when the hold ended before the
    /// switch came.
    pub(crate) async fn wait_unheld(&self, slot: Option<Slot>) -> Result<(), String> {
        let slot = slot.map(u16::from);
        let groups = self
            .groups
            .iter()
            .filter(|g| slot.is_none_or(|s| g.first <= s && s <= g.last));
        for group in groups {
            loop {
                let notified = self.changed.notified();
                let Some(until) = read(&group.held) else {
                    break;
                };
                let now = Instant::now();
                if until <= now {
                    return Err(group.name.clone());
                }
                let _ = tokio::time::timeout(until - now, notified).await;
            }
        }
        Ok(())
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

    /// Drives the pool's Sentinel [`Follower`] forever. `on_switch` gets the old and new
    /// master of a switch.
    pub(crate) async fn follow(
        self: Arc<Self>,
        timeout: Duration,
        password: Option<String>,
        on_switch: impl Fn(&str, &str),
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
                    other => self.apply(&follower, other, &on_switch),
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
    fn apply(&self, follower: &Follower, output: Output, on_switch: &impl Fn(&str, &str)) {
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
                set(&g.master, Some(new.clone()));
                if let Some(old) = old {
                    self.switches.fetch_add(1, Ordering::Relaxed);
                    on_switch(&old.to_string(), &new);
                }
            }
            Output::Hold {
                group: name,
                event,
                sentinel,
            } => {
                let Some(g) = group(&name) else { return };
                let until = follower.held_until(&name, Instant::now());
                set(&g.held, until);
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
                set(&g.held, None);
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
