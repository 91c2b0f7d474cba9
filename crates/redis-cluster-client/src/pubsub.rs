//! Pub/Sub: a client's SUBSCRIBE and PSUBSCRIBE go on a connection of its own to one master
//! (PUBLISH reaches every node of a cluster), its SSUBSCRIBE on one per node of its channels'
//! slots. What those connections send comes out as [`Output::Push`](crate::Output::Push).
//! The engine remembers what the client is subscribed to: when a connection is lost, or a
//! node drops a shard channel whose slot moved away (an `sunsubscribe` the client did not
//! ask for), it subscribes again, through the current map, and swallows the confirmations.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::time::Instant;

use bytes::Bytes;
use redis_cluster_route::{ClusterError, Redirect, Route};
use redis_resp::{Frame, errors};

use crate::engine::{Engine, Name, masters};
use crate::{ClientId, ConnId, Output, RequestId, error_frame};

/// What one client is subscribed to, and where.
#[derive(Debug, Default)]
pub(crate) struct Subscriptions {
    channels: BTreeSet<Bytes>,
    patterns: BTreeSet<Bytes>,
    /// Shard channels and the node each is subscribed on (`None`: to subscribe again).
    shard: BTreeMap<Bytes, Option<String>>,
    /// The connection of SUBSCRIBE and PSUBSCRIBE.
    conn: Option<ConnId>,
    /// The connections of SSUBSCRIBE, by node.
    shard_conns: BTreeMap<String, ConnId>,
    /// Confirmations of the engine's own re-subscriptions, to drop, per connection.
    swallow: HashMap<ConnId, usize, crate::IdHasher>,
    /// Frames held until the client's earlier replies are out.
    pub(crate) held: VecDeque<Frame>,
    /// When to subscribe again what a lost connection or a moved slot took.
    pub(crate) again: Option<Instant>,
    /// Subscriber connections lost in a row (the pause before subscribing again grows).
    failures: u32,
}

impl Subscriptions {
    /// Whether the client is in Pub/Sub mode (subscribed to anything).
    pub(crate) fn active(&self) -> bool {
        !self.channels.is_empty() || !self.patterns.is_empty() || !self.shard.is_empty()
    }

    /// Every connection of the client's subscriptions.
    pub(crate) fn conns(&self) -> Vec<ConnId> {
        self.conn
            .iter()
            .chain(self.shard_conns.values())
            .copied()
            .collect()
    }
}

const ALLOWED: &str =
    "only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context";

fn bulk(text: &[u8]) -> Frame {
    Frame::BulkString(Bytes::copy_from_slice(text))
}

impl Engine {
    /// A client's Pub/Sub commands, sent or answered here; any other command comes back to be
    /// routed (refused instead while a RESP2 client is subscribed, as the server does).
    pub(crate) fn pubsub(
        &mut self,
        now: Instant,
        id: RequestId,
        client: ClientId,
        name: &Name,
        argv: Vec<Bytes>,
    ) -> Option<Vec<Bytes>> {
        let name = name.as_bytes();
        let state = self.clients.get(&client)?;
        let active = state.subs.active();
        let proto = state.proto;
        match name {
            b"subscribe" | b"psubscribe" if argv.len() > 1 => {
                let conn = self.subscriber_conn(now, client, None);
                let subs = &mut self.clients.get_mut(&client)?.subs;
                let set = if name == b"subscribe" {
                    &mut subs.channels
                } else {
                    &mut subs.patterns
                };
                set.extend(argv[1..].iter().cloned());
                self.forward(conn, &argv);
            }
            b"ssubscribe" if argv.len() > 1 => {
                // Channels of several slots: the one standalone server that holds them all
                // takes them, as it takes keys.
                let slot = match self.table.route(&argv) {
                    Ok(Route::Slot(slot)) => Some(slot),
                    Ok(Route::CrossSlot) => self.one_server_slot(&argv),
                    _ => None,
                };
                let Some(slot) = slot else {
                    self.finish(id, error_frame(errors::CROSSSLOT));
                    return None;
                };
                let Some(addr) = self.master_of(slot) else {
                    self.finish(id, error_frame(errors::CLUSTERDOWN_UNBOUND));
                    return None;
                };
                let conn = self.subscriber_conn(now, client, Some(&addr));
                let subs = &mut self.clients.get_mut(&client)?.subs;
                for channel in &argv[1..] {
                    subs.shard.insert(channel.clone(), Some(addr.clone()));
                }
                self.forward(conn, &argv);
            }
            b"unsubscribe" | b"punsubscribe" => {
                let subs = &mut self.clients.get_mut(&client)?.subs;
                let set = if name == b"unsubscribe" {
                    &mut subs.channels
                } else {
                    &mut subs.patterns
                };
                match subs.conn {
                    Some(conn) => {
                        if argv.len() == 1 {
                            set.clear();
                        } else {
                            for channel in &argv[1..] {
                                set.remove(channel);
                            }
                        }
                        self.forward(conn, &argv);
                    }
                    None => self.not_subscribed(client, name, &argv),
                }
            }
            b"sunsubscribe" => {
                let subs = &mut self.clients.get_mut(&client)?.subs;
                let mut to: BTreeMap<ConnId, Vec<Bytes>> = BTreeMap::new();
                if argv.len() == 1 {
                    for conn in subs.shard_conns.values() {
                        to.entry(*conn).or_default();
                    }
                    subs.shard.clear();
                } else {
                    for channel in &argv[1..] {
                        let node = subs.shard.remove(channel).flatten();
                        if let Some(conn) = node.and_then(|n| subs.shard_conns.get(&n)) {
                            to.entry(*conn).or_default().push(channel.clone());
                        }
                    }
                }
                if to.is_empty() {
                    self.not_subscribed(client, name, &argv);
                }
                for (conn, channels) in to {
                    let mut command = vec![argv[0].clone()];
                    command.extend(channels);
                    self.forward(conn, &command);
                }
            }
            b"ping" if active && proto == 2 => {
                let conn = self.clients.get(&client)?.subs.conns().first().copied();
                match conn {
                    Some(conn) => self.forward(conn, &argv),
                    None => return Some(argv),
                }
            }
            _ if active && proto == 2 => {
                let full = argv
                    .first()
                    .map(|n| String::from_utf8_lossy(n).to_lowercase())
                    .unwrap_or_default();
                let text = format!("ERR Can't execute '{full}': {ALLOWED}");
                self.finish(id, error_frame(&text));
                return None;
            }
            _ => return Some(argv),
        }
        // The command's replies come from its connection, as pushes.
        self.finish_silently(id);
        None
    }

    /// What a server answers to an unsubscription from nothing: one frame per channel named,
    /// or one with a null channel.
    fn not_subscribed(&mut self, client: ClientId, name: &[u8], argv: &[Bytes]) {
        let proto = self.clients.get(&client).map_or(2, |s| s.proto);
        let null = if proto == 3 {
            Frame::Null
        } else {
            Frame::NullBulkString
        };
        let channels: Vec<Frame> = match argv.len() {
            1 => vec![null],
            _ => argv[1..].iter().map(|c| bulk(c)).collect(),
        };
        for channel in channels {
            let items = vec![bulk(name), channel, Frame::Integer(0)];
            let frame = if proto == 3 {
                Frame::Push(items)
            } else {
                Frame::Array(items)
            };
            self.push_to(client, frame);
        }
    }

    /// The client's connection for SUBSCRIBE (`node` none: any master) or for SSUBSCRIBE on
    /// `node`, opened when it has none.
    fn subscriber_conn(&mut self, now: Instant, client: ClientId, node: Option<&str>) -> ConnId {
        let subs = self.clients.get(&client).map(|s| (s.subs.conn, s.proto));
        let (general, proto) = subs.unwrap_or((None, 2));
        let existing = match node {
            None => general,
            Some(addr) => self
                .clients
                .get(&client)
                .and_then(|s| s.subs.shard_conns.get(addr).copied()),
        };
        if let Some(conn) = existing.filter(|c| self.conns.contains_key(c)) {
            return conn;
        }
        let addr = match node {
            Some(addr) => addr.to_string(),
            None => self
                .map
                .as_ref()
                .and_then(|m| masters(m).into_iter().next())
                .or_else(|| self.config.seeds.first().map(ToString::to_string))
                .unwrap_or_default(),
        };
        let conn = self.open(now, &addr, proto, false);
        if let Some(c) = self.conns.get_mut(&conn) {
            c.subscriber = Some(client);
        }
        if let Some(state) = self.clients.get_mut(&client) {
            match node {
                None => state.subs.conn = Some(conn),
                Some(addr) => {
                    state.subs.shard_conns.insert(addr.to_string(), conn);
                }
            }
        }
        conn
    }

    /// The master serving `slot` now, as `host:port`.
    fn master_of(&self, slot: redis_hash_slot::Slot) -> Option<String> {
        let index = self.map.as_ref()?.shard_index(slot)?;
        self.master_addrs.get(index).cloned()
    }

    fn forward(&mut self, conn: ConnId, argv: &[Bytes]) {
        if let Some(c) = self.conns.get_mut(&conn) {
            redis_resp::encode_command(argv, &mut c.out);
        }
        self.mark_writable(conn);
    }

    /// A frame a subscriber connection sent.
    pub(crate) fn pubsub_frame(
        &mut self,
        now: Instant,
        client: ClientId,
        conn: ConnId,
        frame: Frame,
    ) {
        if let Frame::SimpleError(text) = &frame {
            if let ClusterError::Redirect(Redirect::Moved { slot, host, port }) =
                ClusterError::parse(text)
            {
                return self.shard_moved(now, client, conn, slot, host.to_vec(), port);
            }
        }
        let Some(state) = self.clients.get_mut(&client) else {
            return;
        };
        let subs = &mut state.subs;
        let items = match &frame {
            Frame::Array(items) | Frame::Push(items) => &items[..],
            _ => &[][..],
        };
        let kind = items
            .first()
            .and_then(Frame::as_bytes)
            .map(<[u8]>::to_ascii_lowercase);
        let confirms = matches!(
            kind.as_deref(),
            Some(b"subscribe" | b"psubscribe" | b"ssubscribe")
        );
        if let Some(left) = subs.swallow.get_mut(&conn).filter(|n| **n > 0 && confirms) {
            *left -= 1;
            subs.failures = 0;
            return;
        }
        if kind.as_deref() == Some(b"sunsubscribe") {
            let channel = items
                .get(1)
                .and_then(Frame::as_bytes)
                .map(Bytes::copy_from_slice);
            if let Some(node) = channel.and_then(|c| subs.shard.get_mut(&c)) {
                // Not asked for: the slot moved away. Subscribe again where it went.
                *node = None;
                subs.again = Some(now + self.config.retry_base);
                self.refresh.want(now);
                return;
            }
        }
        self.push_to(client, frame);
    }

    /// An SSUBSCRIBE met MOVED (the map was stale): the map learns it, and the slot's shard
    /// channels are subscribed again where it is.
    fn shard_moved(
        &mut self,
        now: Instant,
        client: ClientId,
        conn: ConnId,
        slot: redis_hash_slot::Slot,
        host: Vec<u8>,
        port: u16,
    ) {
        let from = self
            .conns
            .get(&conn)
            .map(|c| (c.addr.clone(), c.host.clone()));
        let Some((addr, here)) = from else {
            return;
        };
        let host = if host.is_empty() {
            here
        } else {
            String::from_utf8_lossy(&host).into_owned()
        };
        let to = redis_cluster_route::Endpoint {
            host,
            port,
            ..Default::default()
        };
        if let Some(map) = &mut self.map {
            map.assign(slot, to);
        }
        self.map_changed();
        self.refresh.want(now);
        let pause = self.config.retry_base;
        let Some(state) = self.clients.get_mut(&client) else {
            return;
        };
        let subs = &mut state.subs;
        if let Some(left) = subs.swallow.get_mut(&conn).filter(|n| **n > 0) {
            *left -= 1;
        }
        for (channel, at) in subs.shard.iter_mut() {
            if at.as_deref() == Some(addr.as_str()) && redis_hash_slot::key_slot(channel) == slot {
                *at = None;
            }
        }
        subs.again = Some(now + pause);
    }

    /// A frame for the client outside any reply: out now, or once its earlier replies are.
    fn push_to(&mut self, client: ClientId, frame: Frame) {
        let Some(state) = self.clients.get_mut(&client) else {
            return;
        };
        if state.pending_replies() {
            state.subs.held.push_back(frame);
        } else {
            if self.config.client_output_limit.is_some() {
                state.unwritten += redis_resp::encoded_len(&frame);
            }
            self.push_output(Output::Push { client, frame });
            self.check_output_limit(client);
        }
    }

    /// A subscriber connection is gone: what it held is subscribed again soon.
    pub(crate) fn subscriber_lost(&mut self, now: Instant, client: ClientId, conn: ConnId) {
        let (base, longest) = (self.config.retry_base, self.config.retry_max);
        let Some(state) = self.clients.get_mut(&client) else {
            return;
        };
        let subs = &mut state.subs;
        subs.failures = subs.failures.saturating_add(1);
        let pause = crate::config::backoff(base, longest, subs.failures);
        subs.swallow.remove(&conn);
        if subs.conn == Some(conn) {
            subs.conn = None;
        }
        let lost: Vec<String> = subs
            .shard_conns
            .iter()
            .filter(|(_, c)| **c == conn)
            .map(|(node, _)| node.clone())
            .collect();
        for node in lost {
            subs.shard_conns.remove(&node);
            for at in subs
                .shard
                .values_mut()
                .filter(|at| at.as_deref() == Some(node.as_str()))
            {
                *at = None;
            }
        }
        if subs.active() {
            subs.again = Some(now + pause);
        }
    }

    /// Subscribes again, through the current map, whatever lost its connection or its slot.
    pub(crate) fn resubscribe(&mut self, now: Instant, client: ClientId) {
        let Some(state) = self.clients.get_mut(&client) else {
            return;
        };
        state.subs.again = None;
        let general = !state.subs.channels.is_empty() || !state.subs.patterns.is_empty();
        if general && state.subs.conn.is_none() {
            let channels: Vec<Bytes> = state.subs.channels.iter().cloned().collect();
            let patterns: Vec<Bytes> = state.subs.patterns.iter().cloned().collect();
            let conn = self.subscriber_conn(now, client, None);
            for (name, list) in [(&b"SUBSCRIBE"[..], channels), (b"PSUBSCRIBE", patterns)] {
                if list.is_empty() {
                    continue;
                }
                let count = list.len();
                let mut argv = vec![Bytes::copy_from_slice(name)];
                argv.extend(list);
                self.forward(conn, &argv);
                self.swallowing(client, conn, count);
            }
        }
        let orphans: Vec<Bytes> = self
            .clients
            .get(&client)
            .map(|s| {
                s.subs
                    .shard
                    .iter()
                    .filter(|(_, at)| at.is_none())
                    .map(|(c, _)| c.clone())
                    .collect()
            })
            .unwrap_or_default();
        for channel in orphans {
            let slot = redis_hash_slot::key_slot(&channel);
            let Some(addr) = self.master_of(slot) else {
                if let Some(state) = self.clients.get_mut(&client) {
                    state.subs.again = Some(now + self.config.retry_max);
                }
                continue;
            };
            let conn = self.subscriber_conn(now, client, Some(&addr));
            self.forward(conn, &[Bytes::from_static(b"SSUBSCRIBE"), channel.clone()]);
            self.swallowing(client, conn, 1);
            if let Some(state) = self.clients.get_mut(&client) {
                state.subs.shard.insert(channel, Some(addr));
            }
        }
    }

    fn swallowing(&mut self, client: ClientId, conn: ConnId, count: usize) {
        if let Some(state) = self.clients.get_mut(&client) {
            *state.subs.swallow.entry(conn).or_default() += count;
        }
    }
}
