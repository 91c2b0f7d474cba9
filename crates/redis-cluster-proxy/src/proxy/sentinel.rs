//! A `sentinel` pool's topology: groups (each a Sentinel-managed master name) sharded by hash
//! slot ranges, and the Sentinels that say where each group's master is.
//!
//! Discovery asks one Sentinel for every group's master (`SENTINEL get-master-addr-by-name`)
//! and checks with `ROLE` that each really is a master. A watcher stays subscribed to that
//! Sentinel's `+switch-master` (and `+sdown` / `-sdown`, logged), pings it every second, and
//! when a switch comes moves the group to its new master (the old connection drains: what is
//! in flight finishes, nothing new goes there). When the Sentinel link fails or stays silent
//! for three seconds, the watcher moves to the next Sentinel and starts over.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use redis_cluster_proto::hash_slot::Slot;
use redis_cluster_proto::resp::{Decoder, Frame, encode_command};
use redis_cluster_proto::route::sentinel::{self, Role};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::backend::Backend;
use super::log;

/// How long a subscribed Sentinel may stay silent (its heartbeat PONG included).
const SILENCE: Duration = Duration::from_secs(3);

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

fn address(a: &sentinel::Address) -> String {
    if a.host.contains(':') {
        format!("[{}]:{}", a.host, a.port)
    } else {
        format!("{}:{}", a.host, a.port)
    }
}

fn argv(words: &[&str]) -> Vec<u8> {
    let mut out = Vec::new();
    let words: Vec<Bytes> = words
        .iter()
        .map(|w| Bytes::copy_from_slice(w.as_bytes()))
        .collect();
    encode_command(&words, &mut out);
    out
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

    /// Asks the Sentinel in use (then the next ones) for every group's master, and checks
    /// each with ROLE. Groups keep their old master when no Sentinel answers for them.
    pub(crate) async fn discover(
        &self,
        timeout: Duration,
        password: Option<&str>,
    ) -> Result<(), String> {
        let mut last = String::from("no Sentinel configured");
        for _ in 0..self.sentinels.len() {
            let at = self.sentinel().to_string();
            match self.discover_from(&at, timeout, password).await {
                Ok(()) => return Ok(()),
                Err(e) => {
                    last = format!("{at}: {e}");
                    self.current.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        Err(last)
    }

    async fn discover_from(
        &self,
        at: &str,
        timeout: Duration,
        password: Option<&str>,
    ) -> Result<(), String> {
        let sentinel = Backend::connect(at, timeout)
            .await
            .map_err(|e| e.to_string())?;
        let mut found = Vec::new();
        for group in &self.groups {
            let reply = sentinel
                .call(
                    argv(&["SENTINEL", "get-master-addr-by-name", &group.name]),
                    1,
                )
                .await
                .map_err(|e| e.to_string())?;
            let master = sentinel::master_addr(&reply)
                .map_err(|e| format!("{}: {e:?}", group.name))?
                .ok_or_else(|| format!("Sentinel does not know {}", group.name))?;
            let master = address(&master);
            // ROLE must say master: a Sentinel may answer before it reconfigured anything.
            let node = Backend::connect(&master, timeout)
                .await
                .map_err(|e| e.to_string())?;
            if let Some(password) = password {
                let _ = node.call(argv(&["AUTH", password]), 1).await;
            }
            let role = node
                .call(argv(&["ROLE"]), 1)
                .await
                .map_err(|e| e.to_string())?;
            node.kill();
            match sentinel::role(&role) {
                Ok(Role::Master { .. }) => found.push(master),
                other => {
                    return Err(format!(
                        "{master} of {} is not a master: {other:?}",
                        group.name
                    ));
                }
            }
        }
        sentinel.kill();
        for (group, master) in self.groups.iter().zip(found) {
            set(&group.master, Some(master));
        }
        Ok(())
    }

    /// Follows the Sentinel in use forever: subscribed to its events, pinging it, moving to
    /// the next one when it fails. `on_switch` gets the old and new master of a switch.
    pub(crate) async fn watch(
        self: Arc<Self>,
        timeout: Duration,
        password: Option<String>,
        on_switch: impl Fn(&str, &str),
    ) {
        loop {
            let at = self.sentinel().to_string();
            if let Err(e) = self
                .subscribed(&at, timeout, password.as_deref(), &on_switch)
                .await
            {
                log::write(
                    log::WARN,
                    format_args!("sentinel {at}: {e}; moving to the next one"),
                );
            }
            self.current.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn subscribed(
        &self,
        at: &str,
        timeout: Duration,
        password: Option<&str>,
        on_switch: &impl Fn(&str, &str),
    ) -> Result<(), String> {
        let mut stream = tokio::time::timeout(timeout, TcpStream::connect(at))
            .await
            .map_err(|_| "connect timed out".to_string())?
            .map_err(|e| e.to_string())?;
        stream
            .write_all(&argv(&["SUBSCRIBE", "+switch-master", "+sdown", "-sdown"]))
            .await
            .map_err(|e| e.to_string())?;
        // Subscribed first, then asked: a switch between the two is not missed.
        self.discover_from(at, timeout, password).await?;
        let mut buf = BytesMut::with_capacity(4096);
        let mut decoder = Decoder::new();
        let mut heartbeat = tokio::time::interval(Duration::from_secs(1));
        let mut heard = tokio::time::Instant::now();
        loop {
            while let Some(frame) = decoder.decode(&mut buf).map_err(|e| e.to_string())? {
                heard = tokio::time::Instant::now();
                self.event(&frame, on_switch);
            }
            tokio::select! {
                n = stream.read_buf(&mut buf) => match n {
                    Ok(0) => return Err("closed".into()),
                    Ok(_) => {}
                    Err(e) => return Err(e.to_string()),
                },
                _ = heartbeat.tick() => {
                    if heard.elapsed() > SILENCE {
                        return Err(format!("silent for {SILENCE:?}"));
                    }
                    stream.write_all(&argv(&["PING"])).await.map_err(|e| e.to_string())?;
                }
            }
        }
    }

    fn event(&self, frame: &Frame, on_switch: &impl Fn(&str, &str)) {
        if let Some(switch) = sentinel::switch_master(frame) {
            let Some(group) = self.groups.iter().find(|g| g.name == switch.name) else {
                return;
            };
            let (old, new) = (address(&switch.old), address(&switch.new));
            log::write(
                log::NOTICE,
                format_args!("group {}: master {old} -> {new}", group.name),
            );
            set(&group.master, Some(new.clone()));
            self.switches.fetch_add(1, Ordering::Relaxed);
            on_switch(&old, &new);
            return;
        }
        if let Frame::Array(items) = frame {
            if let [_, Frame::BulkString(channel), Frame::BulkString(payload)] = &items[..] {
                if channel.as_ref() == b"+sdown" || channel.as_ref() == b"-sdown" {
                    log::write(
                        log::NOTICE,
                        format_args!(
                            "sentinel: {} {}",
                            String::from_utf8_lossy(channel),
                            String::from_utf8_lossy(payload)
                        ),
                    );
                }
            }
        }
    }
}
