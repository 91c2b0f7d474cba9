//! [`Engine`]: inputs, outputs, and the routing of calls to connections.

use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::time::Instant;

use bytes::Bytes;
use redis_cluster_route::{
    ClusterError, CommandFlags, CommandTable, Endpoint, ReadFrom, Redirect, Route, SlotMap,
};
use redis_hash_slot::Slot;
use redis_resp::{Frame, errors};

use crate::conn::{Conn, Expect};
use crate::hello;
use crate::pubsub::Subscriptions;
use crate::refresh::Refresh;
use crate::request::{Call, CallKey, CallState, Combine, Request, Target, scan_cursor, scan_step};
use crate::transaction::{Multi, Watch};
use crate::{ClientId, Config, ConnId, Event, IdHasher, Output, RequestId, error_frame};

/// One client's state: its requests in the order it sent them, and per slot its calls not
/// yet answered, oldest first.
#[derive(Debug, Default)]
pub(crate) struct ClientState {
    order: VecDeque<RequestId>,
    slots: HashMap<u16, VecDeque<CallKey>, IdHasher>,
    pub(crate) proto: u8,
    /// Inside MULTI: the commands queued so far.
    pub(crate) multi: Option<Multi>,
    /// After WATCH: the connection that holds it.
    pub(crate) watch: Option<Watch>,
    /// Pub/Sub.
    pub(crate) subs: Subscriptions,
}

impl ClientState {
    /// Whether replies of the client are still owed (pushes wait behind them).
    pub(crate) fn pending_replies(&self) -> bool {
        !self.order.is_empty()
    }
}

/// The engine of a cluster client or proxy: no sockets, no clock, no runtime.
///
/// Feed it inputs (`handle_*`, each with `now`), then drain its outputs until each is empty:
/// [`Engine::poll_transmit`] for bytes to write, [`Engine::poll_output`] for connections to
/// open or close, replies and events, and [`Engine::poll_timeout`] for when to call
/// [`Engine::handle_timeout`]. The crate docs show the loop.
#[derive(Debug)]
pub struct Engine {
    pub(crate) config: Config,
    pub(crate) table: CommandTable,
    pub(crate) map: Option<SlotMap>,
    pub(crate) conns: HashMap<ConnId, Conn, IdHasher>,
    /// The shared (pipelined) connection of each node, for RESP2 and RESP3.
    shared: HashMap<String, [Option<ConnId>; 2], IdHasher>,
    /// The map's masters as `host:port`: per shard index, and sorted (each once).
    pub(crate) master_addrs: Vec<String>,
    pub(crate) masters_sorted: Vec<String>,
    next_id: u64,
    pub(crate) clients: HashMap<ClientId, ClientState, IdHasher>,
    pub(crate) requests: HashMap<RequestId, Request, IdHasher>,
    /// Calls waiting to be retried, by when.
    retries: BTreeSet<(Instant, CallKey)>,
    /// Requests waiting for a first slot map.
    unrouted: Vec<RequestId>,
    outputs: VecDeque<Output>,
    /// Connections with bytes to write, each once.
    writable: VecDeque<ConnId>,
    pub(crate) refresh: Refresh,
    /// Whether `INFO server` was asked (the table is chosen from its answer).
    info_asked: bool,
    /// What the cluster said it runs (`redis_version` and friends), for HELLO.
    pub(crate) server: hello::Server,
    turn: usize,
    pub(crate) counters: Counters,
}

/// What the engine did, counted since it started (for a driver's INFO or metrics).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Counters {
    /// MOVED redirects followed.
    pub moved: u64,
    /// ASK redirects followed.
    pub asked: u64,
    /// Commands sent again after TRYAGAIN, CLUSTERDOWN, LOADING, MASTERDOWN or a lost
    /// connection.
    pub retried: u64,
    /// Multi-key commands split over slots.
    pub split: u64,
    /// Slot maps loaded.
    pub refreshed: u64,
    /// Backend connections opened.
    pub connections: u64,
}

impl Engine {
    /// An engine that starts by loading the slot map from `config`'s seeds.
    pub fn new(config: Config, now: Instant) -> Self {
        let table = config.table;
        let config_refresh = (config.refresh_interval, config.refresh_min_interval);
        let mut engine = Self {
            config,
            table,
            map: None,
            conns: HashMap::default(),
            shared: HashMap::default(),
            master_addrs: Vec::new(),
            masters_sorted: Vec::new(),
            next_id: 0,
            clients: HashMap::default(),
            requests: HashMap::default(),
            retries: BTreeSet::new(),
            unrouted: Vec::new(),
            outputs: VecDeque::new(),
            writable: VecDeque::new(),
            refresh: Refresh::new(now, config_refresh.0, config_refresh.1),
            info_asked: false,
            server: hello::Server::default(),
            turn: 0,
            counters: Counters::default(),
        };
        engine.drive_refresh(now);
        engine
    }

    /// The slot map, once one was loaded.
    pub fn slot_map(&self) -> Option<&SlotMap> {
        self.map.as_ref()
    }

    /// What the engine did so far.
    pub fn counters(&self) -> Counters {
        self.counters
    }

    /// The command table in use: the cluster's own once it answered `INFO server`.
    pub fn table(&self) -> &CommandTable {
        &self.table
    }

    // ---------------------------------------------------------------- inputs: clients

    /// A new client (a proxy's client connection; a library's one user). Its requests are
    /// answered in the order it sends them.
    pub fn open_client(&mut self) -> ClientId {
        let id = ClientId(self.id());
        self.clients.insert(
            id,
            ClientState {
                proto: 2,
                ..ClientState::default()
            },
        );
        id
    }

    /// The client is gone, and so are its requests: replies still owed for them are dropped
    /// when they come, and nothing of theirs is sent again.
    pub fn close_client(&mut self, now: Instant, client: ClientId) {
        if let Some(state) = self.clients.remove(&client) {
            if let Some(conn) = state.watch.and_then(|w| w.conn) {
                self.close(now, conn);
            }
            for conn in state.subs.conns() {
                self.close(now, conn);
            }
            // Its requests go: what a node still owes them is dropped when it comes, and the
            // connections of its blocking commands close (a BLPOP 0 would hold one forever).
            for id in &state.order {
                self.requests.remove(id);
            }
            let blocked: Vec<ConnId> = self
                .conns
                .iter()
                .filter(|(_, c)| c.dedicated)
                .filter(|(_, c)| {
                    c.owed.iter().any(
                        |(e, _)| matches!(e, Expect::Call((id, _)) if state.order.contains(id)),
                    )
                })
                .map(|(id, _)| *id)
                .collect();
            for conn in blocked {
                self.close(now, conn);
            }
        }
    }

    /// The RESP version a client speaks (2 until its `HELLO 3`).
    pub fn protocol(&self, client: ClientId) -> Option<u8> {
        self.clients.get(&client).map(|c| c.proto)
    }

    /// How many of the client's requests are not answered yet (a driver stops reading a
    /// client whose count, or whose unwritten replies, pass its bound).
    pub fn pending(&self, client: ClientId) -> usize {
        self.clients.get(&client).map_or(0, |c| c.order.len())
    }

    /// How many requests, of every client, are not answered yet (a driver that shuts down
    /// waits for none).
    pub fn requests_pending(&self) -> usize {
        self.requests.len()
    }

    /// A client's command. Its reply comes out of [`Engine::poll_output`] as
    /// [`Output::Reply`], after the replies of the client's earlier requests.
    pub fn handle_request(
        &mut self,
        now: Instant,
        client: ClientId,
        argv: Vec<Bytes>,
    ) -> RequestId {
        let id = RequestId(self.id());
        let request = Request {
            client,
            unrouted: Some(argv),
            calls: Vec::new(),
            combine: Combine::One,
            reply: None,
            silent: false,
        };
        self.requests.insert(id, request);
        match self.clients.get_mut(&client) {
            Some(state) => state.order.push_back(id),
            None => {
                // A client that was closed (or never opened): nobody reads the reply.
                self.requests.remove(&id);
                return id;
            }
        }
        self.route(now, id);
        id
    }

    // ---------------------------------------------------------------- inputs: backends

    /// The connection the engine asked for is open: what was queued on it can be written.
    pub fn handle_connected(&mut self, _now: Instant, conn: ConnId) {
        if let Some(c) = self.conns.get_mut(&conn) {
            c.open = true;
            if !c.out.is_empty() {
                self.writable.push_back(conn);
            }
        }
    }

    /// Bytes a backend sent on `conn`.
    pub fn handle_data(&mut self, now: Instant, conn: ConnId, data: &[u8]) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        c.input.extend_from_slice(data);
        loop {
            let Some(c) = self.conns.get_mut(&conn) else {
                return;
            };
            let frame = match c.decoder.decode(&mut c.input) {
                Ok(Some(frame)) => frame,
                Ok(None) => return,
                Err(e) => {
                    let why = format!("not RESP: {e}");
                    self.outputs.push_back(Output::Close { conn });
                    self.lost(now, conn, &why);
                    return;
                }
            };
            if let Some(client) = c.subscriber {
                // Set-up replies first; then everything is the client's.
                match c.owed.pop_front() {
                    Some((expect, _)) if !matches!(frame, Frame::Push(_)) => {
                        self.answer(now, conn, expect, frame);
                    }
                    other => {
                        if let Some(owed) = other {
                            c.owed.push_front(owed);
                        }
                        self.pubsub_frame(now, client, conn, frame);
                    }
                }
                continue;
            }
            if matches!(frame, Frame::Push(_)) {
                continue; // out of band: nothing owed is answered by it
            }
            let Some((expect, _)) = c.owed.pop_front() else {
                let why = "a reply nobody asked for";
                self.outputs.push_back(Output::Close { conn });
                self.lost(now, conn, why);
                return;
            };
            let dedicated = c.dedicated && c.owed.is_empty();
            self.answer(now, conn, expect, frame);
            if dedicated {
                self.outputs.push_back(Output::Close { conn });
                self.forget(conn);
            }
        }
    }

    /// The connection could not be opened, or was lost: what it owed is retried elsewhere or
    /// later.
    pub fn handle_closed(&mut self, now: Instant, conn: ConnId, reason: &str) {
        self.lost(now, conn, reason);
    }

    /// Time passed: retries whose pause is over are sent, late backends are dropped, the
    /// slot map is reloaded when due. Calling it early is harmless.
    pub fn handle_timeout(&mut self, now: Instant) {
        while let Some(&(at, key)) = self.retries.first() {
            if at > now {
                break;
            }
            self.retries.pop_first();
            if let Some(call) = self.call_mut(key) {
                if call.state == CallState::Retry(at) {
                    call.state = CallState::Queued;
                    self.dispatch(now, key);
                }
            }
        }
        let timeout = self.config.timeout;
        let late: Vec<ConnId> = self
            .conns
            .iter()
            .filter(|(_, c)| c.deadline(timeout).is_some_and(|d| d <= now))
            .map(|(id, _)| *id)
            .collect();
        for conn in late {
            self.outputs.push_back(Output::Close { conn });
            self.lost(now, conn, "timed out");
        }
        let due: Vec<ClientId> = self
            .clients
            .iter()
            .filter(|(_, s)| s.subs.again.is_some_and(|at| at <= now))
            .map(|(id, _)| *id)
            .collect();
        for client in due {
            self.resubscribe(now, client);
        }
        self.drive_refresh(now);
    }

    // ---------------------------------------------------------------- outputs

    /// Writes the bytes owed to one connection into `out` (appended) and names it; `None`
    /// when no open connection has bytes to write.
    pub fn poll_transmit(&mut self, out: &mut Vec<u8>) -> Option<ConnId> {
        while let Some(conn) = self.writable.pop_front() {
            let Some(c) = self.conns.get_mut(&conn) else {
                continue;
            };
            if !c.open || c.out.is_empty() {
                continue;
            }
            if out.is_empty() {
                std::mem::swap(out, &mut c.out);
            } else {
                out.append(&mut c.out);
            }
            return Some(conn);
        }
        None
    }

    /// The next connection to open or close, reply, or event.
    pub fn poll_output(&mut self) -> Option<Output> {
        self.outputs.pop_front()
    }

    /// When [`Engine::handle_timeout`] is next due.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let retry = self.retries.first().map(|(at, _)| *at);
        let late = self
            .conns
            .values()
            .filter_map(|c| c.deadline(self.config.timeout))
            .min();
        [retry, late, self.refresh.due()]
            .into_iter()
            .flatten()
            .min()
    }

    // ---------------------------------------------------------------- routing

    fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    pub(crate) fn call_mut(&mut self, (id, index): CallKey) -> Option<&mut Call> {
        self.requests.get_mut(&id)?.calls.get_mut(index)
    }

    pub(crate) fn call_ref(&self, (id, index): CallKey) -> Option<&Call> {
        self.requests.get(&id)?.calls.get(index)
    }

    /// Routes a request whose command is still as the client sent it, once there is a map.
    fn route(&mut self, now: Instant, id: RequestId) {
        let Some(request) = self.requests.get_mut(&id) else {
            return;
        };
        let client = request.client;
        let Some(argv) = request.unrouted.take() else {
            return;
        };
        if self.map.is_none() {
            if let Some(request) = self.requests.get_mut(&id) {
                request.unrouted = Some(argv);
            }
            self.unrouted.push(id);
            return;
        }
        let Some(argv) = self.session(now, id, client, argv) else {
            return;
        };
        let Some(argv) = self.pubsub(now, id, client, argv) else {
            return;
        };
        if let Some(reply) = self.local(client, &argv) {
            self.finish(id, reply);
            return;
        }
        let Some(map) = &self.map else {
            return;
        };
        let table = self.table;
        let spec = table.lookup(&argv);
        let read = spec.is_some_and(|s| s.flags.contains(CommandFlags::READONLY));
        let blocking = spec.is_some_and(|s| s.flags.contains(CommandFlags::BLOCKING));
        let several = table.keys(&argv).is_ok_and(|k| k.len() > 1);
        let (combine, mut calls) = match table.route(&argv) {
            Ok(Route::Slot(slot)) => {
                let mut call = Call::new(argv, Target::Slot { slot, read });
                call.barrier = several || blocking;
                (Combine::One, vec![call])
            }
            Ok(Route::Any) | Err(_) => (Combine::One, vec![Call::new(argv, Target::Any)]),
            // MSETNX split by slot could set some keys and report that it set none: only one
            // node can give its all-or-nothing answer.
            Ok(Route::Split(_)) if argv[0].eq_ignore_ascii_case(b"MSETNX") => {
                self.finish(id, error_frame(errors::CROSSSLOT));
                return;
            }
            Ok(Route::Split(split)) => {
                let calls = (0..split.parts().len())
                    .map(|i| {
                        let part = &split.parts()[i];
                        let sub: Vec<Bytes> = split.argv(i, &argv).cloned().collect();
                        let mut call = Call::new(
                            sub,
                            Target::Slot {
                                slot: part.slot,
                                read,
                            },
                        );
                        call.barrier = part.groups.len() > 1;
                        call
                    })
                    .collect();
                self.counters.split += 1;
                (Combine::Split(split), calls)
            }
            Ok(Route::AllShards(merge)) => {
                let calls = masters(map)
                    .into_iter()
                    .map(|node| Call::new(argv.clone(), Target::Node(node)))
                    .collect();
                (Combine::Fan(merge), calls)
            }
            Ok(Route::AllNodes(merge)) => {
                let calls = all_nodes(map)
                    .into_iter()
                    .map(|node| Call::new(argv.clone(), Target::Node(node)))
                    .collect();
                (Combine::Fan(merge), calls)
            }
            Ok(Route::Special) => {
                let masters = masters(map);
                let start = argv.get(1).and_then(|c| scan_cursor(c));
                match start {
                    Some((node, inner)) if node < masters.len() => {
                        let mut argv = argv;
                        argv[1] = Bytes::from(inner.to_string());
                        let call = Call::new(argv, Target::Node(masters[node].clone()));
                        (Combine::Scan { masters, node }, vec![call])
                    }
                    _ => {
                        self.finish(id, error_frame("ERR invalid cursor"));
                        return;
                    }
                }
            }
            Ok(Route::CrossSlot) => {
                self.finish(id, error_frame(errors::CROSSSLOT));
                return;
            }
        };
        if calls.is_empty() {
            self.finish(id, error_frame(errors::CLUSTERDOWN_UNBOUND));
            return;
        }
        for call in &mut calls {
            call.dedicated = blocking;
        }
        let count = calls.len();
        if let Some(request) = self.requests.get_mut(&id) {
            request.calls = calls;
            request.combine = combine;
        }
        for index in 0..count {
            let key = (id, index);
            self.enqueue(key);
            self.dispatch(now, key);
        }
    }

    /// Commands the engine answers itself (HELLO), with the reply.
    fn local(&mut self, client: ClientId, argv: &[Bytes]) -> Option<Frame> {
        let name = argv.first()?;
        if !name.eq_ignore_ascii_case(b"HELLO") {
            return None;
        }
        let state = self.clients.get_mut(&client)?;
        let reply = hello::answer(argv, &mut state.proto, client, &self.server);
        Some(reply)
    }

    /// Puts a call of a slot at the end of its client's queue for that slot.
    pub(crate) fn enqueue(&mut self, key: CallKey) {
        let Some(request) = self.requests.get(&key.0) else {
            return;
        };
        let Some(slot) = request.calls.get(key.1).and_then(Call::slot) else {
            return;
        };
        if let Some(state) = self.clients.get_mut(&request.client) {
            state
                .slots
                .entry(u16::from(slot))
                .or_default()
                .push_back(key);
        }
    }

    /// Sends a queued call if nothing of its client's slot must go before it.
    pub(crate) fn dispatch(&mut self, now: Instant, key: CallKey) {
        let Some(request) = self.requests.get(&key.0) else {
            return;
        };
        match request.calls.get(key.1).and_then(Call::slot) {
            Some(slot) => {
                let client = request.client;
                self.pump(now, client, slot);
            }
            None => self.send(now, key),
        }
    }

    /// Sends what can go of one client's calls for one slot, oldest first. A call goes only
    /// when every older one is on the connection it would take (a connection keeps order)
    /// and none of them is a barrier; so a redirect or a retry never lets a later command of
    /// the slot overtake an earlier one.
    pub(crate) fn pump(&mut self, now: Instant, client: ClientId, slot: Slot) {
        let Some(queue) = self
            .clients
            .get(&client)
            .and_then(|c| c.slots.get(&u16::from(slot)))
        else {
            return;
        };
        let keys: Vec<CallKey> = queue.iter().copied().collect();
        let mut on: Option<ConnId> = None;
        for key in keys {
            let Some(call) = self.requests.get(&key.0).and_then(|r| r.calls.get(key.1)) else {
                continue;
            };
            let barrier = call.barrier;
            match call.state {
                CallState::Done => continue,
                CallState::Retry(_) => return,
                CallState::Sent(conn) => {
                    if on.is_some_and(|o| o != conn) || barrier {
                        return;
                    }
                    on = Some(conn);
                }
                CallState::Queued => {
                    if on.is_some() && call.dedicated {
                        return;
                    }
                    if let Some(o) = on {
                        let proto = self.clients.get(&client).map_or(2, |c| c.proto);
                        match self.target_addr(call) {
                            Some(addr) if self.shared_conn(&addr, proto) == Some(o) => {}
                            _ => return,
                        }
                    }
                    self.send(now, key);
                    match self.call_mut(key).map(|c| c.state) {
                        Some(CallState::Sent(conn)) if !barrier => on = Some(conn),
                        _ => return,
                    }
                }
            }
        }
    }

    /// Where a call would go now, as `host:port` (borrowed from the map's addresses for a
    /// master: the common case allocates nothing).
    fn target_addr(&self, call: &Call) -> Option<Cow<'_, str>> {
        if let Some(addr) = &call.asking {
            return Some(Cow::Owned(addr.clone()));
        }
        let map = self.map.as_ref();
        match &call.target {
            Target::Node(addr) => Some(Cow::Owned(addr.clone())),
            Target::Slot { slot, read } => {
                let map = map?;
                let master = !*read || self.config.read_from == ReadFrom::Master;
                if master {
                    let index = map.shard_index(*slot)?;
                    return self
                        .master_addrs
                        .get(index)
                        .map(|a| Cow::Borrowed(a.as_str()));
                }
                map.node_for(*slot, *read, self.config.read_from, self.turn)
                    .map(|node| Cow::Owned(node.to_string()))
            }
            Target::Any => match self.masters_sorted.len() {
                0 => self.config.seeds.first().map(|s| Cow::Owned(s.to_string())),
                n => self
                    .masters_sorted
                    .get(self.turn % n)
                    .map(|a| Cow::Borrowed(a.as_str())),
            },
        }
    }

    /// The map's masters' addresses, after the map changed.
    pub(crate) fn map_changed(&mut self) {
        let Some(map) = &self.map else {
            return;
        };
        self.master_addrs = map.shards().iter().map(|s| s.master.to_string()).collect();
        self.masters_sorted = masters(map);
    }

    /// The shared connection to `addr` for RESP `proto`, if there is one.
    fn shared_conn(&self, addr: &str, proto: u8) -> Option<ConnId> {
        self.shared.get(addr)?[usize::from(proto == 3)]
    }

    /// Writes a call on the connection of its node.
    fn send(&mut self, now: Instant, key: CallKey) {
        let Some(request) = self.requests.get(&key.0) else {
            return;
        };
        let proto = self.clients.get(&request.client).map_or(2, |c| c.proto);
        let Some(call) = request.calls.get(key.1) else {
            return;
        };
        if let Some(conn) = call.pinned {
            return self.send_pinned(now, key, conn);
        }
        self.turn = self.turn.wrapping_add(1);
        let dedicated = call.dedicated;
        // The connection, found without allocating when it is open already.
        let found = match self.target_addr(call) {
            None => None,
            Some(addr) if dedicated => Some(Err(addr.into_owned())),
            Some(addr) => Some(
                self.shared_conn(&addr, proto)
                    .ok_or_else(|| addr.into_owned()),
            ),
        };
        let conn = match found {
            Some(Ok(conn)) => conn,
            Some(Err(addr)) if dedicated => self.open(now, &addr, proto, true),
            Some(Err(addr)) => self.connection(now, &addr, proto),
            None => {
                // No node serves the slot: the map may be stale.
                self.refresh.want(now);
                self.retry(now, key, error_frame(errors::CLUSTERDOWN_UNBOUND));
                return;
            }
        };
        let (Some(call), Some(c)) = (
            self.requests
                .get_mut(&key.0)
                .and_then(|r| r.calls.get_mut(key.1)),
            self.conns.get_mut(&conn),
        ) else {
            return;
        };
        if call.asking.take().is_some() {
            c.write(&[&b"ASKING"[..]], Expect::Setup, now);
        }
        if let Some(batch) = &call.batch {
            c.write(&[&b"MULTI"[..]], Expect::Queued(key), now);
            for command in batch {
                c.write(command, Expect::Queued(key), now);
            }
        }
        c.write(&call.argv, Expect::Call(key), now);
        call.attempts += 1;
        call.queued_error = None;
        call.state = CallState::Sent(conn);
        if c.open {
            self.writable.push_back(conn);
        }
    }

    /// The shared connection to `addr` for RESP `proto`, opened when there is none.
    pub(crate) fn connection(&mut self, now: Instant, addr: &str, proto: u8) -> ConnId {
        if let Some(conn) = self.shared_conn(addr, proto) {
            return conn;
        }
        let conn = self.open(now, addr, proto, false);
        self.shared.entry(addr.to_string()).or_default()[usize::from(proto == 3)] = Some(conn);
        conn
    }

    /// A new connection to `addr`, its set-up commands queued first.
    pub(crate) fn open(&mut self, now: Instant, addr: &str, proto: u8, dedicated: bool) -> ConnId {
        let conn = ConnId(self.id());
        let endpoint = endpoint(addr);
        let mut c = Conn::new(addr.to_string(), endpoint.host.clone(), proto, dedicated);
        let auth = self.config.auth.clone();
        if proto == 3 {
            let mut hello: Vec<Bytes> =
                vec![Bytes::from_static(b"HELLO"), Bytes::from_static(b"3")];
            if let Some((user, password)) = &auth {
                hello.push(Bytes::from_static(b"AUTH"));
                hello.push(Bytes::from(
                    user.clone().unwrap_or_else(|| "default".into()),
                ));
                hello.push(Bytes::from(password.clone()));
            }
            c.write(&hello, Expect::Setup, now);
        } else if let Some((user, password)) = &auth {
            let mut argv = vec![Bytes::from_static(b"AUTH")];
            argv.extend(user.clone().map(Bytes::from));
            argv.push(Bytes::from(password.clone()));
            c.write(&argv, Expect::Setup, now);
        }
        if self.config.read_from != ReadFrom::Master {
            c.write(&[&b"READONLY"[..]], Expect::Setup, now);
        }
        if !self.info_asked && !self.config.fixed_table {
            self.info_asked = true;
            c.write(&[&b"INFO"[..], b"server"], Expect::Info, now);
        }
        self.conns.insert(conn, c);
        self.counters.connections += 1;
        self.outputs.push_back(Output::Connect { conn, endpoint });
        conn
    }

    /// Drops a connection from the tables (its owed replies are the caller's business).
    fn forget(&mut self, conn: ConnId) -> Option<Conn> {
        let c = self.conns.remove(&conn)?;
        if !c.dedicated && !c.pinned && c.subscriber.is_none() {
            if let Some(pair) = self.shared.get_mut(&c.addr) {
                let at = &mut pair[usize::from(c.proto == 3)];
                if *at == Some(conn) {
                    *at = None;
                }
            }
        }
        if c.pinned {
            self.watch_lost(conn);
        }
        Some(c)
    }

    /// Closes a connection the engine no longer needs. A call still owed a reply on it (of a
    /// request still there) gets an error rather than no answer.
    pub(crate) fn close(&mut self, now: Instant, conn: ConnId) {
        let Some(c) = self.forget(conn) else {
            return;
        };
        self.outputs.push_back(Output::Close { conn });
        let text = format!("ERR connection to {} closed", c.addr);
        for (expect, _) in c.owed {
            if let Expect::Call(key) = expect {
                if self
                    .call_ref(key)
                    .is_some_and(|call| call.state == CallState::Sent(conn))
                {
                    self.complete(now, key, error_frame(&text));
                }
            }
        }
    }

    /// A connection failed: its calls are retried, its refresh moves to another node.
    fn lost(&mut self, now: Instant, conn: ConnId, reason: &str) {
        let Some(c) = self.forget(conn) else {
            return;
        };
        if let Some(client) = c.subscriber {
            self.subscriber_lost(now, client, conn);
        }
        self.outputs.push_back(Output::Event(Event::ConnectionLost {
            endpoint: endpoint(&c.addr),
            reason: reason.to_string(),
        }));
        let text = format!("ERR connection to {} lost: {reason}", c.addr);
        for (expect, _) in c.owed {
            match expect {
                // A WATCH held on this connection is gone: no retry can bring it back.
                Expect::Call(key) if self.call_ref(key).is_some_and(|c| c.pinned.is_some()) => {
                    self.complete(now, key, error_frame(&text));
                }
                Expect::Call(key) => self.retry(now, key, error_frame(&text)),
                Expect::Refresh { .. } => self.refresh_failed(now, &text),
                Expect::Info => self.info_asked = false,
                Expect::Setup | Expect::Queued(_) => {}
            }
        }
        self.refresh.want(now);
        self.drive_refresh(now);
    }

    /// A call to send again after a pause, or, its attempts spent, answered with `error`.
    pub(crate) fn retry(&mut self, now: Instant, key: CallKey, error: Frame) {
        let max = self.config.max_attempts;
        let (base, longest) = (self.config.retry_base, self.config.retry_max);
        let Some(call) = self.call_mut(key) else {
            return;
        };
        if call.attempts >= max {
            let last = call.last_error.take().unwrap_or(error);
            self.complete(now, key, last);
            return;
        }
        let pause = crate::config::backoff(base, longest, call.attempts.max(1));
        let at = now + pause;
        call.last_error = Some(error);
        call.state = CallState::Retry(at);
        self.retries.insert((at, key));
        self.counters.retried += 1;
    }

    /// What a reply on `conn` answers.
    fn answer(&mut self, now: Instant, conn: ConnId, expect: Expect, frame: Frame) {
        match expect {
            Expect::Call(key) => self.answer_call(now, conn, key, frame),
            Expect::Queued(key) => {
                if let Some(call) = self.call_mut(key) {
                    if frame.is_error() && call.queued_error.is_none() {
                        call.queued_error = Some(frame);
                    }
                }
            }
            Expect::Setup => {
                if let Frame::SimpleError(text) | Frame::BulkError(text) = &frame {
                    let addr = self
                        .conns
                        .get(&conn)
                        .map(|c| c.addr.clone())
                        .unwrap_or_default();
                    self.outputs.push_back(Output::Event(Event::SetupRefused {
                        endpoint: endpoint(&addr),
                        error: String::from_utf8_lossy(text).into_owned(),
                    }));
                }
            }
            Expect::Refresh { shards } => self.answer_refresh(now, conn, shards, frame),
            Expect::Info => self.answer_info(frame),
        }
    }

    fn answer_call(&mut self, now: Instant, conn: ConnId, key: CallKey, frame: Frame) {
        let Some(frame) = self.transaction_reply(now, key, frame) else {
            return;
        };
        let text = match &frame {
            Frame::SimpleError(text) => text.clone(),
            _ => return self.complete(now, key, frame),
        };
        let host = self
            .conns
            .get(&conn)
            .map(|c| c.host.clone())
            .unwrap_or_default();
        let max = self.config.max_attempts;
        let attempts_left = self.call_mut(key).is_some_and(|c| c.attempts < max);
        match ClusterError::parse(&text) {
            ClusterError::Redirect(redirect) if attempts_left => {
                let (slot, to_host, port, moved) = match redirect {
                    Redirect::Moved { slot, host, port } => (slot, host, port, true),
                    Redirect::Ask { slot, host, port } => (slot, host, port, false),
                };
                let to_host = if to_host.is_empty() || to_host == b"?" {
                    host
                } else {
                    String::from_utf8_lossy(to_host).into_owned()
                };
                let to = Endpoint {
                    host: to_host,
                    port,
                    ..Endpoint::default()
                };
                let addr = to.to_string();
                if moved {
                    self.counters.moved += 1;
                    self.moved(now, slot, to);
                } else {
                    self.counters.asked += 1;
                }
                let Some(call) = self.call_mut(key) else {
                    return;
                };
                call.state = CallState::Queued;
                if !moved {
                    call.asking = Some(addr);
                }
                self.dispatch(now, key);
            }
            ClusterError::TryAgain
            | ClusterError::Loading
            | ClusterError::MasterDown
            | ClusterError::ClusterDown(_) => {
                if matches!(ClusterError::parse(&text), ClusterError::ClusterDown(_)) {
                    self.refresh.want(now);
                    self.drive_refresh(now);
                }
                self.retry(now, key, frame);
                let slot = self.call_mut(key).and_then(|c| c.slot());
                let client = self.requests.get(&key.0).map(|r| r.client);
                if let (Some(slot), Some(client)) = (slot, client) {
                    self.pump(now, client, slot);
                }
            }
            _ => self.complete(now, key, frame),
        }
    }

    /// A MOVED: the slot is the named node's from now on, and the map is reloaded soon.
    fn moved(&mut self, now: Instant, slot: Slot, to: Endpoint) {
        self.refresh.moved(slot, to.clone());
        if let Some(map) = &mut self.map {
            map.assign(slot, to);
        }
        self.map_changed();
        self.refresh.want(now);
        self.drive_refresh(now);
    }

    /// A call has its final reply.
    pub(crate) fn complete(&mut self, now: Instant, key: CallKey, frame: Frame) {
        let Some(request) = self.requests.get_mut(&key.0) else {
            return;
        };
        let client = request.client;
        if let Combine::Scan { masters, node } = &mut request.combine {
            match scan_step(frame, *node, masters.len()) {
                Ok(reply) => {
                    if let Some(call) = request.calls.get_mut(key.1) {
                        call.reply = Some(reply);
                        call.state = CallState::Done;
                    }
                }
                Err(next) => {
                    *node = next;
                    let addr = masters[next].clone();
                    if let Some(call) = request.calls.get_mut(key.1) {
                        call.argv[1] = Bytes::from_static(b"0");
                        call.target = Target::Node(addr);
                        call.state = CallState::Queued;
                        call.attempts = 0;
                    }
                    self.send(now, key);
                    return;
                }
            }
        } else if let Some(call) = request.calls.get_mut(key.1) {
            call.reply = Some(frame);
            call.state = CallState::Done;
        }
        let slot = request.calls.get(key.1).and_then(Call::slot);
        let merged = request.combined();
        if let Some(slot) = slot {
            if let Some(state) = self.clients.get_mut(&client) {
                let raw = u16::from(slot);
                if let Some(queue) = state.slots.get_mut(&raw) {
                    queue.retain(|k| *k != key);
                    if queue.is_empty() {
                        state.slots.remove(&raw);
                    }
                }
            }
            self.pump(now, client, slot);
        }
        if let Some(reply) = merged {
            self.finish(key.0, reply);
        }
    }

    /// A request has its reply: it goes out when every earlier one of its client has.
    pub(crate) fn finish(&mut self, id: RequestId, reply: Frame) {
        let Some(request) = self.requests.get_mut(&id) else {
            return;
        };
        request.reply = Some(reply);
        let client = request.client;
        let Some(state) = self.clients.get_mut(&client) else {
            // Its client is gone: nobody reads the reply.
            self.requests.remove(&id);
            return;
        };
        while let Some(front) = state.order.front().copied() {
            let ready = self.requests.get(&front).is_some_and(|r| r.reply.is_some());
            if !ready {
                break;
            }
            state.order.pop_front();
            if let Some(request) = self.requests.remove(&front) {
                match (request.reply, request.silent) {
                    (Some(frame), false) => self.outputs.push_back(Output::Reply {
                        client,
                        request: front,
                        frame,
                    }),
                    _ => self.outputs.push_back(Output::Answered {
                        client,
                        request: front,
                    }),
                }
            }
        }
        if state.order.is_empty() {
            for frame in std::mem::take(&mut state.subs.held) {
                self.outputs.push_back(Output::Push { client, frame });
            }
        }
    }

    /// A request whose replies come as pushes (SUBSCRIBE and the like): done, with no reply.
    pub(crate) fn finish_silently(&mut self, id: RequestId) {
        if let Some(request) = self.requests.get_mut(&id) {
            request.silent = true;
        }
        self.finish(id, Frame::Null);
    }

    pub(crate) fn push_output(&mut self, output: Output) {
        self.outputs.push_back(output);
    }

    /// A slot map arrived: requests that waited for one are routed, and calls of slots the
    /// map did not serve are sent again.
    pub(crate) fn map_installed(&mut self, now: Instant) {
        for id in std::mem::take(&mut self.unrouted) {
            self.route(now, id);
        }
    }

    /// Requests that waited for a first map get `error`.
    pub(crate) fn fail_unrouted(&mut self, error: &Frame) {
        for id in std::mem::take(&mut self.unrouted) {
            if let Some(request) = self.requests.get_mut(&id) {
                request.unrouted = None;
            }
            self.finish(id, error.clone());
        }
    }

    /// Chooses the command table from `INFO server`.
    fn answer_info(&mut self, frame: Frame) {
        let Some(text) = frame.as_bytes() else {
            return;
        };
        self.server = hello::Server::from_info(text);
        if self.config.fixed_table {
            return;
        }
        let table = if self.server.name == "valkey" {
            CommandTable::VALKEY_8_1
        } else {
            CommandTable::REDIS_7_0
        };
        self.table = table;
        self.outputs
            .push_back(Output::Event(Event::ServerIdentified {
                name: self.server.name.clone(),
                version: self.server.version.clone(),
                table: table.server,
            }));
    }

    pub(crate) fn push_event(&mut self, event: Event) {
        self.outputs.push_back(Output::Event(event));
    }

    pub(crate) fn mark_writable(&mut self, conn: ConnId) {
        if self.conns.get(&conn).is_some_and(|c| c.open) {
            self.writable.push_back(conn);
        }
    }
}

/// The masters of a map, sorted by address, each once.
pub(crate) fn masters(map: &SlotMap) -> Vec<String> {
    let mut out: Vec<String> = map.shards().iter().map(|s| s.master.to_string()).collect();
    out.sort();
    out.dedup();
    out
}

/// Every node of a map, replicas included, sorted, each once.
fn all_nodes(map: &SlotMap) -> Vec<String> {
    let mut out: Vec<String> = map
        .shards()
        .iter()
        .flat_map(|s| std::iter::once(&s.master).chain(&s.replicas))
        .map(ToString::to_string)
        .collect();
    out.sort();
    out.dedup();
    out
}

/// `host:port` (with `[v6]:port`) back into an endpoint; the engine only makes such text
/// from endpoints, so the fallback (the text as a host, port 0) is for the impossible.
pub(crate) fn endpoint(addr: &str) -> Endpoint {
    addr.parse().unwrap_or_else(|_| Endpoint {
        host: addr.to_string(),
        ..Endpoint::default()
    })
}
