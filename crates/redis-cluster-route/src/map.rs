//! [`SlotMap`]: which node serves each hash slot, from `CLUSTER SLOTS`, `CLUSTER SHARDS` or
//! `CLUSTER NODES`, kept up to date by MOVED redirects.

use alloc::{string::String, vec, vec::Vec};
use core::fmt;

use redis_cluster_bus::{Address, NodesLine, SlotToken};
use redis_hash_slot::{SLOT_COUNT, Slot, SlotRange};
use redis_resp::Frame;

use crate::{
    frame::{field, int, items, text},
    redirect::Redirect,
};

/// Where a node serves clients.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Endpoint {
    /// The host to connect to, as the server announced it (its IP, or its hostname when the
    /// cluster prefers hostnames); empty when unknown: then the host of the node that gave
    /// the map.
    pub host: String,
    /// The client port.
    pub port: u16,
    /// The node id, when the source gives it (MOVED does not).
    pub id: Option<String>,
    /// The node's IP, when given beside a hostname endpoint.
    pub ip: Option<String>,
    /// The node's announced hostname, when it has one.
    pub hostname: Option<String>,
}

impl Endpoint {
    fn same_node(&self, other: &Self) -> bool {
        match (&self.id, &other.id) {
            (Some(a), Some(b)) => a == b,
            _ => self.host == other.host && self.port == other.port,
        }
    }
}

impl Endpoint {
    /// Where to connect: the host and the port.
    pub fn address(&self) -> Address {
        Address::new(self.host.clone(), self.port)
    }
}

impl From<Address> for Endpoint {
    /// An endpoint known by its address alone (no id, IP or hostname beside it).
    fn from(address: Address) -> Self {
        Self {
            host: address.host,
            port: address.port,
            ..Self::default()
        }
    }
}

impl fmt::Display for Endpoint {
    /// As its [`Address`] writes itself: `host:port`, an IPv6 host in brackets.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.address(), f)
    }
}

/// `host:port` is not an address (the grammar is [`Address`]'s).
pub type EndpointError = redis_cluster_bus::AddressError;

impl core::str::FromStr for Endpoint {
    type Err = EndpointError;

    /// Reads `host:port` as [`Endpoint`]'s `Display` writes it.
    ///
    /// ```
    /// use redis_cluster_route::Endpoint;
    ///
    /// let node: Endpoint = "[::1]:7000".parse()?;
    /// assert_eq!((node.host.as_str(), node.port), ("::1", 7000));
    /// assert_eq!(node.to_string(), "[::1]:7000");
    /// assert!("localhost".parse::<Endpoint>().is_err());
    /// # Ok::<(), redis_cluster_route::EndpointError>(())
    /// ```
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        text.parse::<Address>().map(Self::from)
    }
}

/// A master and its replicas.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Shard {
    /// The master.
    pub master: Endpoint,
    /// Its replicas, in the order the source lists them.
    pub replicas: Vec<Endpoint>,
}

/// Where reads go.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ReadFrom {
    /// Every command to the master.
    #[default]
    Master,
    /// Reads to a replica when the slot has one (after READONLY on that connection), else to
    /// the master.
    PreferReplica,
    /// Reads in turn to the master and each replica.
    RoundRobin,
}

/// Why a reply could not be read as a slot map.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MapError {
    /// The reply does not have the shape this command replies with.
    #[error("unexpected reply shape: {0}")]
    Shape(&'static str),
    /// A slot number or range outside 0–16383.
    #[error("bad slot range {0}..={1}")]
    BadSlot(i64, i64),
    /// A port outside 0–65535.
    #[error("bad port {0}")]
    BadPort(i64),
    /// A `CLUSTER NODES` line that does not parse.
    #[error("CLUSTER NODES line {line}: {what}")]
    BadLine {
        /// The line number, from 1.
        line: usize,
        /// What is wrong.
        what: &'static str,
    },
}

/// Which shard serves each of the 16384 slots: a lookup is one index.
///
/// ```
/// use redis_cluster_route::{ReadFrom, SlotMap};
/// use redis_hash_slot::key_slot;
///
/// let nodes = "\
/// 07c3 127.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-8191
/// 67ed 127.0.0.1:7001@17001 master - 0 0 2 connected 8192-16383
/// 8a2f 127.0.0.1:7002@17002 slave 07c3 0 0 1 connected
/// ";
/// let map = SlotMap::from_cluster_nodes(nodes)?;
/// let slot = key_slot(b"foo"); // 12182
/// assert_eq!(map.master(slot).map(|m| m.port), Some(7001));
/// assert_eq!(map.replicas(key_slot(b"bar")).len(), 1);
/// assert_eq!(map.node_for(key_slot(b"bar"), true, ReadFrom::PreferReplica, 0).map(|n| n.port), Some(7002));
/// # Ok::<(), redis_cluster_route::MapError>(())
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct SlotMap {
    shards: Vec<Shard>,
    /// The shard of each slot; [`UNASSIGNED`] for none.
    slots: Vec<u16>,
}

const UNASSIGNED: u16 = u16::MAX;

impl Default for SlotMap {
    fn default() -> Self {
        Self {
            shards: Vec::new(),
            slots: vec![UNASSIGNED; usize::from(SLOT_COUNT)],
        }
    }
}

impl fmt::Debug for SlotMap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SlotMap")
            .field("shards", &self.shards)
            .field("assigned", &self.assigned())
            .finish()
    }
}

impl SlotMap {
    /// The shards, in the order they were first seen.
    pub fn shards(&self) -> &[Shard] {
        &self.shards
    }

    /// How many slots have a master.
    pub fn assigned(&self) -> usize {
        self.slots.iter().filter(|&&s| s != UNASSIGNED).count()
    }

    /// The shard serving `slot`.
    pub fn shard(&self, slot: Slot) -> Option<&Shard> {
        let index = *self.slots.get(usize::from(u16::from(slot)))?;
        self.shards.get(usize::from(index))
    }

    /// The index in [`SlotMap::shards`] of the shard serving `slot` (one lookup: a driver
    /// can keep per-shard state, a connection say, in a vector beside the map).
    pub fn shard_index(&self, slot: Slot) -> Option<usize> {
        let index = *self.slots.get(usize::from(u16::from(slot)))?;
        (index != UNASSIGNED).then_some(usize::from(index))
    }

    /// The master serving `slot`.
    pub fn master(&self, slot: Slot) -> Option<&Endpoint> {
        self.shard(slot).map(|shard| &shard.master)
    }

    /// The replicas of the master serving `slot`.
    pub fn replicas(&self, slot: Slot) -> &[Endpoint] {
        self.shard(slot).map_or(&[], |shard| &shard.replicas)
    }

    /// The node to send a command for `slot` to: the master for a write (`read` false) or
    /// under [`ReadFrom::Master`]; else a replica chosen by `turn` (a counter the caller
    /// advances, so that the choice stays deterministic), the master when there is none.
    pub fn node_for(
        &self,
        slot: Slot,
        read: bool,
        policy: ReadFrom,
        turn: usize,
    ) -> Option<&Endpoint> {
        let shard = self.shard(slot)?;
        let replicas = &shard.replicas;
        Some(match policy {
            _ if !read => &shard.master,
            ReadFrom::Master => &shard.master,
            ReadFrom::PreferReplica if replicas.is_empty() => &shard.master,
            ReadFrom::PreferReplica => &replicas[turn % replicas.len()],
            ReadFrom::RoundRobin => match turn % (replicas.len() + 1) {
                0 => &shard.master,
                n => &replicas[n - 1],
            },
        })
    }

    /// Gives every node listed without a host (CLUSTER SLOTS' empty endpoint, or `?`) the
    /// host of the node that gave the map, as a client must read them.
    pub fn fill_unknown_hosts(&mut self, host: &str) {
        for shard in &mut self.shards {
            for node in core::iter::once(&mut shard.master).chain(&mut shard.replicas) {
                if node.host.is_empty() || node.host == "?" {
                    node.host = String::from(host);
                }
            }
        }
    }

    /// Gives `slot` to the shard whose master is `master` (added when new).
    pub fn assign(&mut self, slot: Slot, master: Endpoint) {
        let index = self.shard_of(master);
        if let Some(entry) = self.slots.get_mut(usize::from(u16::from(slot))) {
            *entry = index;
        }
    }

    /// Gives every slot of `range` to the shard whose master is `master` (added when new): a
    /// map of standalone masters sharded by slot range is built this way.
    ///
    /// ```
    /// use redis_cluster_route::{Endpoint, SlotMap};
    /// use redis_hash_slot::{Slot, SlotRange};
    ///
    /// let node = |port| Endpoint { host: "127.0.0.1".into(), port, ..Endpoint::default() };
    /// let mut map = SlotMap::default();
    /// map.assign_range("0-8191".parse()?, node(6379));
    /// map.assign_range("8192-16383".parse()?, node(6380));
    /// assert_eq!(map.assigned(), 16384);
    /// assert_eq!(map.master(Slot::new(9000).unwrap()).map(|m| m.port), Some(6380));
    /// # Ok::<(), redis_hash_slot::ParseSlotRangeError>(())
    /// ```
    pub fn assign_range(&mut self, range: SlotRange, master: Endpoint) {
        let index = self.shard_of(master);
        let (first, last) = (range.start().get(), range.end().get());
        if let Some(slots) = self.slots.get_mut(usize::from(first)..=usize::from(last)) {
            slots.fill(index);
        }
    }

    /// Applies a redirect: MOVED gives the slot to the node named (so later commands for it
    /// go there at once; the caller should still reload the whole map in the background, as
    /// a MOVED usually means more slots moved); ASK changes nothing (it is one-shot: send
    /// ASKING then the command to the node named). Returns whether the map changed.
    pub fn apply(&mut self, redirect: &Redirect<'_>) -> bool {
        let Redirect::Moved { slot, host, port } = *redirect else {
            return false;
        };
        let endpoint = Endpoint {
            host: String::from_utf8_lossy(host).into_owned(),
            port,
            ..Endpoint::default()
        };
        let before = self.master(slot).cloned();
        self.assign(slot, endpoint);
        before.as_ref() != self.master(slot)
    }

    fn shard_of(&mut self, master: Endpoint) -> u16 {
        if let Some(at) = self.shards.iter().position(|s| s.master.same_node(&master)) {
            return at as u16;
        }
        self.shards.push(Shard {
            master,
            replicas: Vec::new(),
        });
        (self.shards.len() - 1) as u16
    }

    fn fill_range(&mut self, start: i64, end: i64, shard: u16) -> Result<(), MapError> {
        let bad = MapError::BadSlot(start, end);
        let (Ok(first), Ok(last)) = (usize::try_from(start), usize::try_from(end)) else {
            return Err(bad);
        };
        match self.slots.get_mut(first..=last) {
            Some(range) if first <= last => range.fill(shard),
            _ => return Err(bad),
        }
        Ok(())
    }

    /// The map in a `CLUSTER SLOTS` reply (RESP2 or RESP3).
    pub fn from_cluster_slots<B: AsRef<[u8]>>(reply: &Frame<B>) -> Result<Self, MapError> {
        let mut map = Self::default();
        for range in items(reply).ok_or(MapError::Shape("CLUSTER SLOTS: an array"))? {
            let fields = items(range).ok_or(MapError::Shape("a slot range: an array"))?;
            let [start, end, master, replicas @ ..] = fields else {
                return Err(MapError::Shape("a slot range: start, end, master"));
            };
            let (start, end) = (int(start), int(end));
            let (Some(start), Some(end)) = (start, end) else {
                return Err(MapError::Shape("slot numbers are integers"));
            };
            let index = map.shard_of(slots_endpoint(master)?);
            for replica in replicas {
                let replica = slots_endpoint(replica)?;
                let shard = &mut map.shards[usize::from(index)];
                if !shard.replicas.contains(&replica) {
                    shard.replicas.push(replica);
                }
            }
            map.fill_range(start, end, index)?;
        }
        Ok(map)
    }

    /// The map in a `CLUSTER SHARDS` reply (RESP2 or RESP3). Nodes whose health is `failed`
    /// are left out of the replicas.
    pub fn from_cluster_shards<B: AsRef<[u8]>>(reply: &Frame<B>) -> Result<Self, MapError> {
        let mut map = Self::default();
        for shard in items(reply).ok_or(MapError::Shape("CLUSTER SHARDS: an array"))? {
            let slots = field(shard, "slots")
                .and_then(items)
                .ok_or(MapError::Shape("a shard's slots"))?;
            let nodes = field(shard, "nodes")
                .and_then(items)
                .ok_or(MapError::Shape("a shard's nodes"))?;
            let mut master = None;
            let mut replicas = Vec::new();
            for node in nodes {
                let endpoint = shards_endpoint(node)?;
                let role = field(node, "role").and_then(text);
                let health = field(node, "health").and_then(text);
                if role == Some(b"master".as_slice()) {
                    master = Some(endpoint);
                } else if health != Some(b"failed".as_slice()) {
                    replicas.push(endpoint);
                }
            }
            // A shard without slots (a master that lost them) routes nothing.
            if slots.is_empty() {
                continue;
            }
            let master = master.ok_or(MapError::Shape("a shard with slots has a master"))?;
            let index = map.shard_of(master);
            map.shards[usize::from(index)].replicas = replicas;
            for pair in slots.chunks(2) {
                match pair {
                    [start, end] => {
                        let (Some(start), Some(end)) = (int(start), int(end)) else {
                            return Err(MapError::Shape("slot numbers are integers"));
                        };
                        map.fill_range(start, end, index)?;
                    }
                    _ => return Err(MapError::Shape("slots come in start, end pairs")),
                }
            }
        }
        Ok(map)
    }

    /// The map in `CLUSTER NODES` text (or a nodes.conf): masters with their slots (migrating and importing
    /// marks are skipped: the slot stays with its owner), replicas under their masters, nodes
    /// flagged `fail`, `handshake` or `noaddr` left out.
    pub fn from_cluster_nodes(text: &str) -> Result<Self, MapError> {
        struct Line<'a> {
            id: &'a str,
            endpoint: Endpoint,
            master_of: Option<&'a str>,
            slots: Vec<(i64, i64)>,
        }
        let mut masters = Vec::new();
        let mut replicas = Vec::new();
        for (number, line) in text.lines().enumerate() {
            // Blank lines, and nodes.conf's `vars` line, say nothing about slots.
            if line.trim().is_empty() || line.starts_with("vars ") {
                continue;
            }
            let bad = |what| MapError::BadLine {
                line: number + 1,
                what,
            };
            let line = NodesLine::parse(line).map_err(|e| bad(e.what()))?;
            if ["fail", "handshake", "noaddr"]
                .iter()
                .any(|f| line.has_flag(f))
            {
                continue;
            }
            let address = line.address;
            let endpoint = Endpoint {
                host: String::from(address.ip),
                port: address.port,
                id: Some(String::from(line.id)),
                ip: Some(String::from(address.ip)),
                hostname: address.hostname.map(String::from),
            };
            let mut slots = Vec::new();
            for token in line.slots() {
                // A migrating or importing mark: the slot stays with its owner.
                if let SlotToken::Range(range) = token.map_err(|e| bad(e.what()))? {
                    slots.push((i64::from(range.start().get()), i64::from(range.end().get())));
                }
            }
            let parsed = Line {
                id: line.id,
                endpoint,
                master_of: line.master,
                slots,
            };
            if line.has_flag("master") {
                masters.push(parsed);
            } else if line.has_flag("slave") {
                replicas.push(parsed);
            }
        }
        let mut map = Self::default();
        for master in &masters {
            if master.slots.is_empty() {
                continue;
            }
            let index = map.shard_of(master.endpoint.clone());
            for &(start, end) in &master.slots {
                map.fill_range(start, end, index)?;
            }
            map.shards[usize::from(index)].replicas = replicas
                .iter()
                .filter(|r| r.master_of == Some(master.id))
                .map(|r| r.endpoint.clone())
                .collect();
        }
        Ok(map)
    }
}

fn owned(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn port(n: Option<i64>) -> Result<u16, MapError> {
    let n = n.ok_or(MapError::Shape("a port is an integer"))?;
    u16::try_from(n).map_err(|_| MapError::BadPort(n))
}

/// `[endpoint, port, id, metadata]` of CLUSTER SLOTS; the id and metadata are absent before
/// Redis 7.0 (the id before 4.0). The endpoint `?` (hostname preferred, none set) is unknown.
fn slots_endpoint<B: AsRef<[u8]>>(frame: &Frame<B>) -> Result<Endpoint, MapError> {
    let fields = items(frame).ok_or(MapError::Shape("a node: an array"))?;
    let [host, number, rest @ ..] = fields else {
        return Err(MapError::Shape("a node: endpoint and port"));
    };
    let host = text(host).ok_or(MapError::Shape("an endpoint is a string"))?;
    let mut endpoint = Endpoint {
        host: if host == b"?" {
            String::new()
        } else {
            owned(host)
        },
        port: port(int(number))?,
        ..Endpoint::default()
    };
    if let Some(id) = rest.first().and_then(text) {
        endpoint.id = Some(owned(id));
    }
    if let Some(meta) = rest.get(1) {
        endpoint.ip = field(meta, "ip").and_then(text).map(owned);
        endpoint.hostname = field(meta, "hostname").and_then(text).map(owned);
    }
    Ok(endpoint)
}

/// A node of CLUSTER SHARDS: `endpoint` (or `ip`), `port` (or `tls-port` alone), `id`,
/// `ip`, `hostname`.
fn shards_endpoint<B: AsRef<[u8]>>(frame: &Frame<B>) -> Result<Endpoint, MapError> {
    let host = field(frame, "endpoint")
        .or_else(|| field(frame, "ip"))
        .and_then(text)
        .ok_or(MapError::Shape("a shard node's endpoint"))?;
    let number = field(frame, "port").or_else(|| field(frame, "tls-port"));
    Ok(Endpoint {
        host: if host == b"?" {
            String::new()
        } else {
            owned(host)
        },
        port: port(number.and_then(int))?,
        id: field(frame, "id").and_then(text).map(owned),
        ip: field(frame, "ip").and_then(text).map(owned),
        hostname: field(frame, "hostname").and_then(text).map(owned),
    })
}
