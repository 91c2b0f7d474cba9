//! A scripted cluster for the engine's tests: nodes that own slots, migrate them (ASK,
//! TRYAGAIN), answer MOVED, go down and come back, over links the test delivers by hand. The
//! keyspace is one map, so that the node a command runs on cannot change its answer: only
//! the engine's routing, order and retries can.

#![allow(dead_code, unreachable_pub)]

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use redis_cluster_client::{ClientId, Config, ConnId, Engine, Output, RequestId};
use redis_cluster_route::{CommandTable, Endpoint};
use redis_hash_slot::key_slot;
use redis_resp::{Decoder, Frame, encode, errors};

pub const BASE_PORT: u16 = 7000;

/// The owner of a slot nobody serves (left out of `CLUSTER SLOTS`).
pub const UNSERVED: usize = usize::MAX;

/// A link: one engine connection to one node.
#[derive(Debug)]
pub struct Link {
    pub node: usize,
    pub asking: bool,
    pub decoder: Decoder,
    pub input: BytesMut,
    /// Reply bytes not yet given to the engine.
    pub outbox: Vec<u8>,
    /// Commands this link ran, in order (for assertions).
    pub seen: Vec<Vec<Bytes>>,
    /// How many writes the engine made on it.
    pub writes: usize,
    /// Inside MULTI: the commands queued, and whether one was refused.
    pub multi: Option<(Vec<Vec<Bytes>>, bool)>,
    /// WATCHed keys and their values then.
    pub watched: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    /// Channels, patterns and shard channels it is subscribed to.
    pub channels: BTreeSet<Vec<u8>>,
    pub shard: BTreeSet<Vec<u8>>,
}

/// The cluster.
#[derive(Debug)]
pub struct Cluster {
    pub nodes: usize,
    pub owner: Vec<usize>,
    /// slot → the node it is migrating to.
    pub migrating: HashMap<u16, usize>,
    /// Keys of migrating slots already at the target.
    pub moved: HashSet<Vec<u8>>,
    pub store: HashMap<Vec<u8>, Vec<u8>>,
    pub down: Vec<bool>,
    /// Nodes that refuse CLUSTER SHARDS (older servers).
    pub no_shards: Vec<bool>,
    pub links: BTreeMap<ConnId, Link>,
    /// Connections that refuse to open.
    pub refuse: HashSet<usize>,
    /// Nodes that were demoted to replicas outside cluster mode: writes get READONLY.
    pub demoted: HashSet<usize>,
    /// Each node's `cluster_current_epoch`, when the test gives them (else `CLUSTER INFO`
    /// is refused, as by a node that says nothing of epochs).
    pub epochs: Vec<u64>,
    /// A node's own, outdated view of who owns each slot (a node that lags behind).
    pub views: HashMap<usize, Vec<usize>>,
    /// `CLUSTER GETKEYSINSLOT` commands run, all nodes together.
    pub scans: usize,
    /// The nodes are standalone servers: they run any keys, checking no slot.
    pub standalone: bool,
}

pub fn addr(node: usize) -> String {
    format!("127.0.0.1:{}", BASE_PORT + node as u16)
}

pub fn bulk(s: &str) -> Frame {
    Frame::BulkString(Bytes::copy_from_slice(s.as_bytes()))
}

pub fn err(s: &str) -> Frame {
    Frame::SimpleError(Bytes::copy_from_slice(s.as_bytes()))
}

pub fn argv(line: &str) -> Vec<Bytes> {
    line.split(' ')
        .map(|a| Bytes::copy_from_slice(a.as_bytes()))
        .collect()
}

impl Cluster {
    /// `nodes` masters, the slots cut in equal ranges.
    pub fn new(nodes: usize) -> Self {
        let owner = (0..16384usize).map(|s| s * nodes / 16384).collect();
        Self {
            nodes,
            owner,
            migrating: HashMap::new(),
            moved: HashSet::new(),
            store: HashMap::new(),
            down: vec![false; nodes],
            no_shards: vec![true; nodes],
            links: BTreeMap::new(),
            refuse: HashSet::new(),
            demoted: HashSet::new(),
            epochs: Vec::new(),
            views: HashMap::new(),
            scans: 0,
            standalone: false,
        }
    }

    pub fn node_of(&self, key: &str) -> usize {
        self.owner[usize::from(u16::from(key_slot(key.as_bytes())))]
    }

    /// Whether no reply of `node` waits to be delivered.
    pub fn quiet(&self, node: usize) -> bool {
        self.links
            .values()
            .all(|l| l.node != node || (l.outbox.is_empty() && l.input.is_empty()))
    }

    /// Bytes the engine wrote on `conn`: the node runs each whole command at once.
    pub fn deliver(&mut self, conn: ConnId, bytes: &[u8]) {
        let Some(mut link) = self.links.remove(&conn) else {
            return;
        };
        link.writes += 1;
        link.input.extend_from_slice(bytes);
        while let Ok(Some(command)) = link.decoder.decode_command(&mut link.input) {
            let args: Vec<Bytes> = (0..command.len())
                .filter_map(|i| command.arg_bytes(i))
                .collect();
            if let Some(frames) = self.pubsub(&mut link, &args) {
                for frame in frames {
                    encode(&frame, &mut link.outbox);
                }
                link.seen.push(args);
                continue;
            }
            let reply = self.run(&mut link, &args);
            link.seen.push(args);
            encode(&reply, &mut link.outbox);
        }
        self.links.insert(conn, link);
    }

    /// Pub/Sub on a link (RESP2 frames): `None` for any other command.
    fn pubsub(&mut self, link: &mut Link, args: &[Bytes]) -> Option<Vec<Frame>> {
        let name = args[0].to_ascii_lowercase();
        let kind = || Frame::BulkString(Bytes::copy_from_slice(&name));
        let count = |l: &Link| Frame::Integer((l.channels.len() + l.shard.len()) as i64);
        let mut out = Vec::new();
        match &name[..] {
            b"subscribe" | b"ssubscribe" => {
                if name == b"ssubscribe" {
                    let keys: Vec<Bytes> = args[1..].to_vec();
                    if let Some(refused) = self.refuse_keys(link.node, false, &keys) {
                        return Some(vec![refused]);
                    }
                }
                for channel in &args[1..] {
                    let set = if name == b"subscribe" {
                        &mut link.channels
                    } else {
                        &mut link.shard
                    };
                    set.insert(channel.to_vec());
                    out.push(Frame::Array(vec![
                        kind(),
                        Frame::BulkString(channel.clone()),
                        count(link),
                    ]));
                }
            }
            b"unsubscribe" | b"sunsubscribe" => {
                let named: Vec<Vec<u8>> = if args.len() > 1 {
                    args[1..].iter().map(|c| c.to_vec()).collect()
                } else if name == b"unsubscribe" {
                    link.channels.iter().cloned().collect()
                } else {
                    link.shard.iter().cloned().collect()
                };
                for channel in named {
                    let set = if name == b"unsubscribe" {
                        &mut link.channels
                    } else {
                        &mut link.shard
                    };
                    set.remove(&channel);
                    out.push(Frame::Array(vec![
                        kind(),
                        Frame::BulkString(channel.into()),
                        count(link),
                    ]));
                }
            }
            b"ping" if !link.channels.is_empty() || !link.shard.is_empty() => {
                let text = args.get(1).cloned().unwrap_or_default();
                out.push(Frame::Array(vec![bulk("pong"), Frame::BulkString(text)]));
            }
            b"publish" | b"spublish" => {
                let shard = name == b"spublish";
                if shard {
                    if let Some(refused) = self.refuse_keys(link.node, false, &args[1..2]) {
                        return Some(vec![refused]);
                    }
                }
                let message = Frame::Array(vec![
                    bulk(if shard { "smessage" } else { "message" }),
                    Frame::BulkString(args[1].clone()),
                    Frame::BulkString(args[2].clone()),
                ]);
                let node = link.node;
                let mut reached = 0;
                for l in self.links.values_mut().chain(std::iter::once(&mut *link)) {
                    let subscribed = if shard {
                        l.node == node && l.shard.contains(&args[1][..])
                    } else {
                        l.channels.contains(&args[1][..])
                    };
                    if subscribed {
                        encode(&message, &mut l.outbox);
                        reached += 1;
                    }
                }
                out.push(Frame::Integer(reached));
            }
            _ => return None,
        }
        Some(out)
    }

    /// A migrating slot ends on its target: shard subscribers of its channels on the old owner
    /// are told `sunsubscribe`, as Redis 7 tells them.
    pub fn finish(&mut self, slot: u16) {
        let Some(to) = self.migrating.remove(&slot) else {
            return;
        };
        let from = self.owner[usize::from(slot)];
        self.owner[usize::from(slot)] = to;
        self.moved.retain(|key| u16::from(key_slot(key)) != slot);
        for link in self.links.values_mut().filter(|l| l.node == from) {
            let gone: Vec<Vec<u8>> = link
                .shard
                .iter()
                .filter(|c| u16::from(key_slot(c)) == slot)
                .cloned()
                .collect();
            for channel in gone {
                link.shard.remove(&channel);
                let count = (link.channels.len() + link.shard.len()) as i64;
                let frame = Frame::Array(vec![
                    bulk("sunsubscribe"),
                    Frame::BulkString(channel.into()),
                    Frame::Integer(count),
                ]);
                encode(&frame, &mut link.outbox);
            }
        }
    }

    fn run(&mut self, link: &mut Link, args: &[Bytes]) -> Frame {
        let node = link.node;
        let asking = std::mem::take(&mut link.asking);
        let name = args[0].to_ascii_uppercase();
        match &name[..] {
            b"ASKING" => {
                link.asking = true;
                return Frame::SimpleString(Bytes::from_static(b"OK"));
            }
            b"READONLY" | b"AUTH" => return Frame::SimpleString(Bytes::from_static(b"OK")),
            b"INFO" => {
                return Frame::BulkString(Bytes::from_static(
                    b"# Server\r\nredis_version:7.0.15\r\n",
                ));
            }
            b"CLUSTER" if args[1].eq_ignore_ascii_case(b"SLOTS") => return self.slots(node),
            b"CLUSTER" if args[1].eq_ignore_ascii_case(b"INFO") && !self.epochs.is_empty() => {
                let text = format!(
                    "cluster_state:ok\r\ncluster_current_epoch:{}\r\n",
                    self.epochs[node]
                );
                return Frame::BulkString(Bytes::from(text));
            }
            b"CLUSTER" if args[1].eq_ignore_ascii_case(b"GETKEYSINSLOT") => {
                return self.keys_in_slot(node, args);
            }
            b"CLUSTER" => return err("ERR unknown subcommand"),
            b"SCAN" => return self.scan(node, args),
            b"DBSIZE" => {
                let n = self.store.keys().filter(|k| self.home(k) == node).count();
                return Frame::Integer(n as i64);
            }
            _ => {}
        }
        match &name[..] {
            b"MULTI" => {
                link.multi = Some((Vec::new(), false));
                return Frame::SimpleString(Bytes::from_static(b"OK"));
            }
            b"EXEC" => return self.exec_transaction(link),
            b"WATCH" => {
                if let Some(refused) = self.refuse_keys(node, asking, &args[1..]) {
                    return refused;
                }
                for key in &args[1..] {
                    let now = self.store.get(&key[..]).cloned();
                    link.watched.push((key.to_vec(), now));
                }
                return Frame::SimpleString(Bytes::from_static(b"OK"));
            }
            b"UNWATCH" => {
                link.watched.clear();
                return Frame::SimpleString(Bytes::from_static(b"OK"));
            }
            _ => {}
        }
        let table = CommandTable::REDIS_7_0;
        let write = table
            .lookup(args)
            .is_some_and(|s| s.flags.contains(redis_cluster_route::CommandFlags::WRITE));
        if write && self.demoted.contains(&node) {
            return err("READONLY You can't write against a read only replica.");
        }
        let keys: Vec<Bytes> = match table.keys(args) {
            Ok(keys) => keys.positions().map(|i| args[i].clone()).collect(),
            Err(_) => Vec::new(),
        };
        if let Some(refused) = self.refuse_keys(node, asking, &keys) {
            if let Some((_, dirty)) = link.multi.as_mut() {
                *dirty = true;
            }
            return refused;
        }
        if let Some((queued, _)) = link.multi.as_mut() {
            queued.push(args.to_vec());
            return Frame::SimpleString(Bytes::from_static(b"QUEUED"));
        }
        exec(&mut self.store, args)
    }

    /// EXEC on a link: EXECABORT after a refused command, null when a watched key changed.
    fn exec_transaction(&mut self, link: &mut Link) -> Frame {
        let Some((queued, dirty)) = link.multi.take() else {
            return err("ERR EXEC without MULTI");
        };
        let watched = std::mem::take(&mut link.watched);
        if dirty {
            return err("EXECABORT Transaction discarded because of previous errors.");
        }
        if watched.iter().any(|(k, v)| self.store.get(k) != v.as_ref()) {
            return Frame::NullArray;
        }
        Frame::Array(queued.iter().map(|c| exec(&mut self.store, c)).collect())
    }

    /// The error a node answers for a command on `keys` it does not serve now: CLUSTERDOWN,
    /// CROSSSLOT, MOVED, ASK or TRYAGAIN; `None` to run it.
    fn refuse_keys(&mut self, node: usize, asking: bool, keys: &[Bytes]) -> Option<Frame> {
        if self.down[node] {
            return Some(err(errors::CLUSTERDOWN));
        }
        if self.standalone {
            return None;
        }
        let first = keys.first()?;
        let slot = key_slot(first);
        if keys.iter().any(|k| key_slot(k) != slot) {
            return Some(err(errors::CROSSSLOT));
        }
        let raw = u16::from(slot);
        let owner = self.owner[usize::from(raw)];
        let target = self.migrating.get(&raw).copied();
        if owner == node {
            if target.is_some() {
                let here: Vec<bool> = keys
                    .iter()
                    .map(|k| self.store.contains_key(&k[..]) && !self.moved.contains(&k[..]))
                    .collect();
                if here.iter().all(|h| !h) {
                    return Some(err(&format!("ASK {raw} {}", addr(target.unwrap_or(owner)))));
                }
                if here.iter().any(|h| !h) {
                    return Some(err(errors::TRYAGAIN));
                }
            }
            return None;
        }
        if target == Some(node) && asking {
            for k in keys {
                self.moved.insert(k.to_vec());
            }
            return None;
        }
        Some(err(&format!("MOVED {raw} {}", addr(owner))))
    }

    /// The node a key lives on now.
    fn home(&self, key: &[u8]) -> usize {
        let raw = u16::from(key_slot(key));
        match self.migrating.get(&raw) {
            Some(&to) if self.moved.contains(key) => to,
            _ => self.owner[usize::from(raw)],
        }
    }

    /// SCAN of the keys living on `node`, ten at a time, in key order.
    fn scan(&self, node: usize, args: &[Bytes]) -> Frame {
        let cursor: usize = std::str::from_utf8(&args[1]).unwrap().parse().unwrap();
        let mut keys: Vec<&Vec<u8>> = self.store.keys().filter(|k| self.home(k) == node).collect();
        keys.sort();
        let page: Vec<Frame> = keys
            .iter()
            .skip(cursor)
            .take(10)
            .map(|k| Frame::BulkString(Bytes::copy_from_slice(k)))
            .collect();
        let next = if cursor + 10 >= keys.len() {
            0
        } else {
            cursor + 10
        };
        Frame::Array(vec![bulk(&next.to_string()), Frame::Array(page)])
    }

    /// `CLUSTER GETKEYSINSLOT slot count`: the keys of the slot living on `node` (a node
    /// that is down answers CLUSTERDOWN to its probes, not to this).
    fn keys_in_slot(&mut self, node: usize, args: &[Bytes]) -> Frame {
        let number =
            |i: usize| -> usize { std::str::from_utf8(&args[i]).unwrap().parse().unwrap() };
        let (slot, count) = (number(2), number(3));
        self.scans += 1;
        let mut keys: Vec<&Vec<u8>> = self
            .store
            .keys()
            .filter(|k| usize::from(u16::from(key_slot(k))) == slot && self.home(k) == node)
            .collect();
        keys.sort();
        let page = keys.iter().take(count);
        Frame::Array(
            page.map(|k| Frame::BulkString(Bytes::copy_from_slice(k)))
                .collect(),
        )
    }

    /// `CLUSTER SLOTS` as `asked` sees the cluster.
    fn slots(&self, asked: usize) -> Frame {
        let owner = self.views.get(&asked).unwrap_or(&self.owner);
        let mut ranges = Vec::new();
        let mut start = 0;
        for slot in 1..=16384 {
            if slot == 16384 || owner[slot] != owner[start] {
                let node = owner[start];
                if node == UNSERVED {
                    start = slot;
                    continue;
                }
                ranges.push(Frame::Array(vec![
                    Frame::Integer(start as i64),
                    Frame::Integer(slot as i64 - 1),
                    Frame::Array(vec![
                        bulk("127.0.0.1"),
                        Frame::Integer(i64::from(BASE_PORT) + node as i64),
                    ]),
                ]));
                start = slot;
            }
        }
        Frame::Array(ranges)
    }
}

/// Runs a command on one keyspace as a standalone server would (the few commands the tests
/// use).
pub fn exec(store: &mut HashMap<Vec<u8>, Vec<u8>>, args: &[Bytes]) -> Frame {
    let name = args[0].to_ascii_uppercase();
    let ok = || Frame::SimpleString(Bytes::from_static(b"OK"));
    let value = |v: Option<&Vec<u8>>| match v {
        Some(v) => Frame::BulkString(Bytes::copy_from_slice(v)),
        None => Frame::NullBulkString,
    };
    match &name[..] {
        b"GET" => value(store.get(&args[1][..])),
        b"SET" => {
            store.insert(args[1].to_vec(), args[2].to_vec());
            ok()
        }
        b"MSET" | b"MSETNX" if args.len() % 2 == 0 => err(&format!(
            "ERR wrong number of arguments for '{}' command",
            String::from_utf8_lossy(&args[0]).to_lowercase()
        )),
        b"MSET" => {
            for pair in args[1..].chunks(2) {
                store.insert(pair[0].to_vec(), pair[1].to_vec());
            }
            ok()
        }
        b"MSETNX" => {
            let pairs = || args[1..].chunks(2);
            if pairs().any(|pair| store.contains_key(&pair[0][..])) {
                return Frame::Integer(0);
            }
            for pair in pairs() {
                store.insert(pair[0].to_vec(), pair[1].to_vec());
            }
            Frame::Integer(1)
        }
        b"MGET" => Frame::Array(args[1..].iter().map(|k| value(store.get(&k[..]))).collect()),
        b"DEL" => Frame::Integer(
            args[1..]
                .iter()
                .filter(|k| store.remove(&k[..]).is_some())
                .count() as i64,
        ),
        b"EXISTS" => Frame::Integer(
            args[1..]
                .iter()
                .filter(|k| store.contains_key(&k[..]))
                .count() as i64,
        ),
        b"INCR" => {
            let now = store.get(&args[1][..]).map_or(Some(0), |v| {
                std::str::from_utf8(v).ok()?.parse::<i64>().ok()
            });
            match now {
                Some(n) => {
                    store.insert(args[1].to_vec(), (n + 1).to_string().into_bytes());
                    Frame::Integer(n + 1)
                }
                None => err("ERR value is not an integer or out of range"),
            }
        }
        b"RENAME" => match store.remove(&args[1][..]) {
            Some(v) => {
                store.insert(args[2].to_vec(), v);
                ok()
            }
            None => err("ERR no such key"),
        },
        b"PING" => Frame::SimpleString(Bytes::from_static(b"PONG")),
        b"TYPE" if store.contains_key(&args[1][..]) => {
            Frame::SimpleString(Bytes::from_static(b"string"))
        }
        b"TYPE" => Frame::SimpleString(Bytes::from_static(b"none")),
        _ => err(&format!(
            "ERR unknown command '{}'",
            String::from_utf8_lossy(&args[0])
        )),
    }
}

/// The engine, the cluster, and the driver between them, with a virtual clock.
pub struct Harness {
    pub engine: Engine,
    pub cluster: Cluster,
    pub now: Instant,
    pub replies: Vec<(ClientId, RequestId, Frame)>,
    /// How many of `replies` came as bytes ([`Output::Raw`]), each checked to be one whole
    /// value as the node encodes it.
    pub raw: usize,
    pub pushes: Vec<(ClientId, Frame)>,
    pub events: Vec<redis_cluster_client::Event>,
    /// Each Pause (true) and Resume (false), in order.
    pub pauses: Vec<(ClientId, bool)>,
    /// Writes taken from the engine and not yet delivered.
    pub wire: VecDeque<(ConnId, Vec<u8>)>,
}

impl Harness {
    pub fn new(nodes: usize, tune: impl FnOnce(&mut Config)) -> Self {
        let seed = Endpoint {
            host: "127.0.0.1".into(),
            port: BASE_PORT,
            ..Endpoint::default()
        };
        let mut config = Config::new(vec![seed]);
        tune(&mut config);
        let now = Instant::now();
        Self {
            engine: Engine::new(config, now),
            cluster: Cluster::new(nodes),
            now,
            replies: Vec::new(),
            raw: 0,
            pushes: Vec::new(),
            events: Vec::new(),
            pauses: Vec::new(),
            wire: VecDeque::new(),
        }
    }

    /// Drains the engine's outputs; connections open at once unless refused.
    pub fn outputs(&mut self) {
        while let Some(output) = self.engine.poll_output() {
            match output {
                Output::Connect { conn, endpoint } => {
                    let node = usize::from(endpoint.port - BASE_PORT);
                    if self.cluster.refuse.contains(&node) {
                        self.engine
                            .handle_closed(self.now, conn, "Connection refused");
                        continue;
                    }
                    self.cluster.links.insert(
                        conn,
                        Link {
                            node,
                            asking: false,
                            decoder: Decoder::new(),
                            input: BytesMut::new(),
                            outbox: Vec::new(),
                            seen: Vec::new(),
                            writes: 0,
                            multi: None,
                            watched: Vec::new(),
                            channels: BTreeSet::new(),
                            shard: BTreeSet::new(),
                        },
                    );
                    self.engine.handle_connected(self.now, conn);
                }
                Output::Close { conn } => {
                    self.cluster.links.remove(&conn);
                }
                Output::Reply {
                    client,
                    request,
                    frame,
                } => self.replies.push((client, request, frame)),
                Output::Raw {
                    client,
                    request,
                    bytes,
                } => {
                    let frame = match Decoder::new().decode_slice(&bytes) {
                        Ok(redis_resp::Status::Complete((frame, used))) if used == bytes.len() => {
                            frame.map_bytes(&mut Bytes::copy_from_slice)
                        }
                        other => panic!("not one whole reply: {bytes:?} ({other:?})"),
                    };
                    let mut again = Vec::new();
                    encode(&frame, &mut again);
                    assert_eq!(again, bytes, "the bytes a node sent");
                    assert!(!frame.is_error(), "an error handed on as bytes: {frame:?}");
                    self.raw += 1;
                    self.replies.push((client, request, frame));
                }
                Output::Push { client, frame } => self.pushes.push((client, frame)),
                Output::Event(event) => self.events.push(*event),
                Output::Pause { client } => self.pauses.push((client, true)),
                Output::Resume { client } => self.pauses.push((client, false)),
                _ => {}
            }
        }
    }

    /// Takes every write the engine has, onto the wire (not delivered).
    pub fn take_writes(&mut self) {
        self.outputs();
        loop {
            let mut out = Vec::new();
            let Some(conn) = self.engine.poll_transmit(&mut out) else {
                break;
            };
            self.wire.push_back((conn, out));
            self.outputs();
        }
    }

    /// Delivers the oldest write on the wire to its node.
    pub fn deliver_one(&mut self) -> bool {
        let Some((conn, bytes)) = self.wire.pop_front() else {
            return false;
        };
        self.cluster.deliver(conn, &bytes);
        true
    }

    /// Delivers at most `n` bytes of the oldest write (at least one); the rest stays first on
    /// the wire. The node runs the whole commands it has so far.
    pub fn deliver_some(&mut self, n: usize) -> bool {
        let Some((conn, bytes)) = self.wire.pop_front() else {
            return false;
        };
        let n = n.clamp(1, bytes.len().max(1));
        if n < bytes.len() {
            self.wire.push_front((conn, bytes[n..].to_vec()));
        }
        self.cluster.deliver(conn, &bytes[..n]);
        true
    }

    /// Gives the engine what one link's node answered.
    pub fn answer(&mut self, conn: ConnId) {
        let Some(link) = self.cluster.links.get_mut(&conn) else {
            return;
        };
        let bytes = std::mem::take(&mut link.outbox);
        if !bytes.is_empty() {
            self.engine.handle_data(self.now, conn, &bytes);
        }
        self.outputs();
    }

    pub fn answer_all(&mut self) {
        let conns: Vec<ConnId> = self.cluster.links.keys().copied().collect();
        for conn in conns {
            self.answer(conn);
        }
    }

    /// Everything delivered and answered until nothing moves, time advancing to each
    /// deadline; at most `rounds` deadlines.
    pub fn settle(&mut self, rounds: usize) {
        for _ in 0..rounds {
            loop {
                self.take_writes();
                let moved = !self.wire.is_empty();
                while self.deliver_one() {}
                let pending = self.cluster.links.values().any(|l| !l.outbox.is_empty());
                self.answer_all();
                if !moved && !pending {
                    break;
                }
            }
            if self.engine.requests_pending() == 0 {
                return;
            }
            match self.engine.poll_timeout() {
                Some(at) if at > self.now => self.now = at,
                Some(_) => {}
                None => return,
            }
            self.engine.handle_timeout(self.now);
            self.outputs();
        }
    }

    /// Lets `ms` of virtual time pass (deadlines in it fire), then settles.
    pub fn advance(&mut self, ms: u64) {
        let end = self.now + Duration::from_millis(ms);
        for _ in 0..1000 {
            let next = self
                .engine
                .poll_timeout()
                .filter(|at| *at <= end)
                .unwrap_or(end);
            self.now = self.now.max(next);
            self.engine.handle_timeout(self.now);
            self.outputs();
            self.settle(5);
            if self.now >= end {
                break;
            }
        }
    }

    /// Runs until the slot map is loaded.
    pub fn start(&mut self) {
        while self.engine.slot_map().is_none() {
            self.take_writes();
            while self.deliver_one() {}
            self.answer_all();
            self.now += Duration::from_millis(1);
            self.engine.handle_timeout(self.now);
        }
        self.outputs();
    }

    /// The reply frames of one client, in the order they came out.
    pub fn replies_of(&self, client: ClientId) -> Vec<Frame> {
        self.replies
            .iter()
            .filter(|r| r.0 == client)
            .map(|r| r.2.clone())
            .collect()
    }

    /// The link the engine uses for `node` (its shared connection), if any.
    pub fn link_of(&self, node: usize) -> Option<ConnId> {
        self.cluster
            .links
            .iter()
            .find(|(_, l)| l.node == node)
            .map(|(c, _)| *c)
    }
}
