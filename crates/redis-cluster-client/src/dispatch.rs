//! Sending: a request routed into calls, each call onto the connection of its node, in the
//! order its slot allows; connections opened, closed and lost; retries scheduled.

use std::borrow::Cow;
use std::time::Instant;

use bytes::Bytes;
use redis_cluster_route::{CommandFlags, Part, ReadFrom, Route};
use redis_hash_slot::{Slot, key_slot};
use redis_resp::{Frame, errors};

use crate::conn::{Conn, Expect};
use crate::engine::{Engine, Name, all_nodes, endpoint, masters};
use crate::hello;
use crate::request::{Call, CallKey, CallState, Combine, Pass, Target, scan_cursor};
use crate::{ClientId, ConnId, Event, Output, RequestId, error_frame};

impl Engine {
    /// Routes a request whose command is still as the client sent it, once there is a map.
    pub(crate) fn route(&mut self, now: Instant, id: RequestId) {
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
        // The name in lower case, once: transactions, Pub/Sub and HELLO look at it.
        let name = Name::of(&argv);
        let Some(argv) = self.session(now, id, client, &name, argv) else {
            return;
        };
        let Some(argv) = self.pubsub(now, id, client, &name, argv) else {
            return;
        };
        if let Some(reply) = self.local(client, &name, &argv) {
            self.finish(id, reply);
            return;
        }
        let Some(map) = &self.map else {
            return;
        };
        // One lookup of the command for its route, flags and key count. Standalone masters
        // check no slots: the keys one master serves go to it as one command, as predixy and
        // nutcracker send them, where a cluster needs one command per slot (a 10-key MGET
        // through one server was ten calls). While a range is held (a failover), the split
        // stays by slot: holds are by range. One master for every slot (a proxy in front of
        // one server) needs no key's shard: the keys are not all hashed, and a command over
        // several slots goes whole without a split being built.
        let shard = |slot| map.shard_index(slot).unwrap_or(usize::MAX);
        let mut routed = if self.config.fixed_map.is_some() && self.holds.is_empty() {
            if self.one_master {
                self.table.routed_unsplit(&argv)
            } else {
                self.table.routed_by(&argv, shard)
            }
        } else {
            self.table.routed(&argv)
        };
        // A command a cluster refuses over several slots (SUNION, RENAME) runs on the one
        // standalone server that holds all its keys, as predixy sends it, held or not.
        if let Ok(r) = &mut routed {
            if r.route == Route::CrossSlot {
                if let Some(slot) = self.one_server_slot(&argv) {
                    r.route = Route::Slot(slot);
                }
            }
        }
        let (route, spec, keys) = match routed {
            Ok(r) => (Ok(r.route), Some(r.spec), r.keys),
            Err(e) => (Err(e), self.table.lookup(&argv), 0),
        };
        let read = spec.is_some_and(|s| s.flags.contains(CommandFlags::READONLY));
        let blocking = spec.is_some_and(|s| s.flags.contains(CommandFlags::BLOCKING));
        let several = keys > 1;
        // The vector for one call, without an allocation when the slab has one to spare.
        let mut one = self.requests.take_spare(&id);
        let (combine, mut calls) = match route {
            Ok(Route::Slot(slot)) => {
                let mut call = Call::new(argv, Target::Slot { slot, read });
                call.barrier = several || blocking;
                call.packed = true;
                one.push(call);
                (Combine::One, one)
            }
            Ok(Route::Any) | Err(_) => {
                let mut call = Call::new(argv, Target::Any);
                call.packed = true;
                one.push(call);
                (Combine::One, one)
            }
            // MSETNX split over nodes could set some keys and report that it set none: only
            // one node can give its all-or-nothing answer. Whole on one node, it is atomic.
            Ok(Route::Split(split))
                if split.parts().len() > 1 && argv[0].eq_ignore_ascii_case(b"MSETNX") =>
            {
                self.finish(id, error_frame(errors::CROSSSLOT));
                return;
            }
            Ok(Route::Split(split)) => {
                let target = |part: &Part| Target::Slot {
                    slot: part.slot,
                    read,
                };
                let calls = match split.parts() {
                    // One part holds every key group in order: it is the command itself (no
                    // copy of its arguments).
                    [part] => {
                        let mut call = Call::new(argv, target(part));
                        call.barrier = part.groups.len() > 1;
                        call.packed = true;
                        one.push(call);
                        one
                    }
                    parts => (0..parts.len())
                        .map(|i| {
                            let part = &parts[i];
                            let mut sub = Vec::with_capacity(split.argc(i));
                            sub.extend(split.argv(i, &argv).cloned());
                            let mut call = Call::new(sub, target(part));
                            call.barrier = part.groups.len() > 1;
                            call
                        })
                        .collect(),
                };
                self.counters.split += 1;
                (Combine::Split(Box::new(split)), calls)
            }
            Ok(Route::AllShards(merge)) => (Combine::Fan(merge), fan(&argv, masters(map))),
            Ok(Route::AllNodes(merge)) => (Combine::Fan(merge), fan(&argv, all_nodes(map))),
            Ok(Route::Special) if self.config.fixed_map.is_none() => {
                self.scan_start(now, id, &argv);
                return;
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
            match self.enqueue(key) {
                // Usually so (a pipeline on random keys meets a slot once): what `pump`
                // would do with a queue of this call alone, without looking it up again.
                Some((client, slot, true)) => self.send_alone(now, key, client, slot),
                _ => self.dispatch(now, key),
            }
        }
    }

    /// Commands the engine answers itself (HELLO), with the reply.
    pub(crate) fn local(&mut self, client: ClientId, name: &Name, argv: &[Bytes]) -> Option<Frame> {
        if name.as_bytes() != b"hello" {
            return None;
        }
        let state = self.clients.get_mut(&client)?;
        let reply = hello::answer(argv, &mut state.proto, client, &self.server);
        Some(reply)
    }

    /// Puts a call of a slot at the end of its client's queue for that slot: its client,
    /// its slot, and whether the queue holds it alone, when it has a slot and a client.
    pub(crate) fn enqueue(&mut self, key: CallKey) -> Option<(ClientId, Slot, bool)> {
        let request = self.requests.get(&key.0)?;
        let slot = request.calls.get(key.1).and_then(Call::slot)?;
        let client = request.client;
        let state = self.clients.get_mut(&client)?;
        let queue = &mut state.slots.entry(u16::from(slot)).or_default().keys;
        queue.push_back(key);
        Some((client, slot, queue.len() == 1))
    }

    /// With masters the caller names (standalone servers, which check no slots), the slot of
    /// the first key of `argv` when one master holds every key; `None` otherwise, and in a
    /// cluster.
    pub(crate) fn one_server_slot(&self, argv: &[Bytes]) -> Option<Slot> {
        let map = self
            .map
            .as_ref()
            .filter(|_| self.config.fixed_map.is_some())?;
        one_shard(&self.table, argv, |slot| map.shard_index(slot))
    }

    /// Whether slots `a` and `b` are one node's to run a command over both: the same slot,
    /// or, with masters the caller names, the same master.
    pub(crate) fn same_server(&self, a: Slot, b: Slot) -> bool {
        let shard = |map: &redis_cluster_route::SlotMap, slot| map.shard_index(slot);
        a == b
            || self
                .map
                .as_ref()
                .filter(|_| self.config.fixed_map.is_some())
                .is_some_and(|map| shard(map, a).is_some() && shard(map, a) == shard(map, b))
    }

    /// Sends a call queued alone for its client's slot: what [`Engine::pump`] does for such
    /// a queue (nothing goes before it), without finding the queue and the call again.
    fn send_alone(&mut self, now: Instant, key: CallKey, client: ClientId, slot: Slot) {
        self.send(now, key);
        let written = self.call_mut(key).and_then(|c| match c.state {
            CallState::Sent(conn) if !c.barrier => Some(conn),
            _ => None,
        });
        if let Some(conn) = written {
            self.grow_prefix(client, u16::from(slot), 1, conn);
        }
    }

    /// A call of a slot queue leaves its connection (redirected, retried): the queue's
    /// known-written prefix is known no more.
    pub(crate) fn unclear(&mut self, key: CallKey) {
        let Some(request) = self.requests.get(&key.0) else {
            return;
        };
        let Some(slot) = request.calls.get(key.1).and_then(Call::slot) else {
            return;
        };
        let queue = self
            .clients
            .get_mut(&request.client)
            .and_then(|c| c.slots.get_mut(&u16::from(slot)));
        if let Some(queue) = queue {
            queue.clear = 0;
            queue.conn = None;
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
        let raw = u16::from(slot);
        let Some(queue) = self.clients.get(&client).and_then(|c| c.slots.get(&raw)) else {
            return;
        };
        // The calls after the known-written prefix (those before are on `queue.conn`).
        let start = queue.clear.min(queue.keys.len());
        let mut on: Option<ConnId> = queue.conn.filter(|_| start > 0);
        // A copy (sending may change the queue): on the stack for the usual few.
        let mut small = [(RequestId(0), 0usize); 16];
        let large: Vec<CallKey>;
        let rest = queue.keys.len() - start;
        let keys: &[CallKey] = if rest <= small.len() {
            for (at, key) in small.iter_mut().zip(queue.keys.iter_from(start)) {
                *at = *key;
            }
            &small[..rest]
        } else {
            large = queue.keys.iter_from(start).copied().collect();
            &large
        };
        // Whether every call so far is written on `on` and none is a barrier: the prefix
        // grows while this holds.
        let mut prefix = true;
        for (offset, &key) in keys.iter().enumerate() {
            let Some(call) = self.requests.get(&key.0).and_then(|r| r.calls.get(key.1)) else {
                prefix = false;
                continue;
            };
            let barrier = call.barrier;
            match call.state {
                CallState::Done => {
                    prefix = false;
                    continue;
                }
                CallState::Retry(_) => return,
                CallState::Sent(conn) => {
                    if on.is_some_and(|o| o != conn) || barrier {
                        return;
                    }
                    on = Some(conn);
                    if prefix {
                        self.grow_prefix(client, raw, start + offset + 1, conn);
                    }
                }
                CallState::Queued => {
                    if on.is_some() && call.dedicated {
                        return;
                    }
                    if let Some(o) = on {
                        let proto = self.clients.get(&client).map_or(2, |c| c.proto);
                        let conn = self.master_conn(call, proto).or_else(|| {
                            let addr = self.target_addr(call)?;
                            self.shared_conn(&addr, proto)
                        });
                        if conn != Some(o) {
                            return;
                        }
                    }
                    self.send(now, key);
                    match self.call_mut(key).map(|c| c.state) {
                        Some(CallState::Sent(conn)) if !barrier => {
                            on = Some(conn);
                            if prefix {
                                self.grow_prefix(client, raw, start + offset + 1, conn);
                            }
                        }
                        _ => return,
                    }
                }
            }
        }
    }

    /// The first `clear` calls of the client's queue for `slot` are written on `conn`.
    fn grow_prefix(&mut self, client: ClientId, slot: u16, clear: usize, conn: ConnId) {
        let queue = self
            .clients
            .get_mut(&client)
            .and_then(|c| c.slots.get_mut(&slot));
        if let Some(queue) = queue {
            if clear <= queue.keys.len() {
                queue.clear = clear;
                queue.conn = Some(conn);
            }
        }
    }

    /// Where a call would go now, as `host:port` (borrowed from the map's addresses for a
    /// master: the common case allocates nothing).
    pub(crate) fn target_addr(&self, call: &Call) -> Option<Cow<'_, str>> {
        if let Some(addr) = call.asking() {
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
        self.one_master =
            map.shards().len() == 1 && map.assigned() == usize::from(redis_hash_slot::SLOT_COUNT);
        self.masters_sorted = masters(map);
        let shared = &self.shared;
        self.master_conns = self
            .master_addrs
            .iter()
            .map(|addr| shared.get(addr).copied().unwrap_or_default())
            .collect();
    }

    /// `shared`'s entry for `addr` changed: so does `master_conns`' for each shard it masters.
    fn shared_changed(&mut self, addr: &str) {
        let pair = self.shared.get(addr).copied().unwrap_or_default();
        for (master, conns) in self.master_addrs.iter().zip(&mut self.master_conns) {
            if master == addr {
                *conns = pair;
            }
        }
    }

    /// The shared connection for RESP `proto` of the master `call` goes to, when it goes to
    /// its slot's master and one is open: [`Engine::shared_conn`] of [`Engine::target_addr`]
    /// without the address (`None` does not say that there is none: ask those).
    pub(crate) fn master_conn(&self, call: &Call, proto: u8) -> Option<ConnId> {
        let Target::Slot { slot, read } = call.target else {
            return None;
        };
        if read && self.config.read_from != ReadFrom::Master || call.asking().is_some() {
            return None;
        }
        let index = self.map.as_ref()?.shard_index(slot)?;
        let conn = self.master_conns.get(index)?[usize::from(proto == 3)];
        debug_assert!(
            conn.is_none()
                || conn
                    == self
                        .target_addr(call)
                        .and_then(|a| self.shared_conn(&a, proto)),
            "master_conns out of step with shared"
        );
        conn
    }

    /// The shared connection to `addr` for RESP `proto`, if there is one.
    pub(crate) fn shared_conn(&self, addr: &str, proto: u8) -> Option<ConnId> {
        self.shared.get(addr)?[usize::from(proto == 3)]
    }

    /// Writes a call on the connection of its node.
    pub(crate) fn send(&mut self, now: Instant, key: CallKey) {
        let Some(request) = self.requests.get(&key.0) else {
            return;
        };
        let proto = self.clients.get(&request.client).map_or(2, |c| c.proto);
        let Some(call) = request.calls.get(key.1) else {
            return;
        };
        if let Some(conn) = call.pinned() {
            return self.send_pinned(now, key, conn);
        }
        if !self.holds.is_empty() {
            let addr = self.target_addr(call).map(Cow::into_owned);
            if addr.is_some_and(|addr| self.held(now, key, &addr)) {
                return;
            }
        }
        let Some(call) = self.requests.get(&key.0).and_then(|r| r.calls.get(key.1)) else {
            return;
        };
        self.turn = self.turn.wrapping_add(1);
        let dedicated = call.dedicated;
        // The connection, found without allocating when it is open already (and for a
        // slot's master, without its address).
        let open = match dedicated {
            false => self.master_conn(call, proto),
            true => None,
        };
        let found = match open {
            Some(conn) => Some(Ok(conn)),
            None => match self.target_addr(call) {
                None => None,
                Some(addr) if dedicated => Some(Err(addr.into_owned())),
                Some(addr) => Some(
                    self.shared_conn(&addr, proto)
                        .ok_or_else(|| addr.into_owned()),
                ),
            },
        };
        let conn = match found {
            Some(Ok(conn)) => conn,
            Some(Err(addr)) if dedicated => self.open(now, &addr, proto, true),
            Some(Err(addr)) => self.connection(now, &addr, proto),
            None => {
                // No node serves the slot: the map may be stale. This counts as an attempt,
                // or a slot nobody serves would be asked about forever.
                self.refresh.want(now);
                if let Some(call) = self.call_mut(key) {
                    call.attempts += 1;
                }
                self.retry(now, key, error_frame(errors::CLUSTERDOWN_UNBOUND));
                return;
            }
        };
        let raw = self.config.raw_replies;
        let (Some(request), Some(c)) = (self.requests.get_mut(&key.0), self.conns.get_mut(&conn))
        else {
            return;
        };
        // Decided as it is written (an ASK or a retry makes a call's reply a frame's again).
        let whole = raw && request.passes_on(key.1, None) != Pass::No;
        let Some(call) = request.calls.get_mut(key.1) else {
            return;
        };
        let rare = call.rare.as_deref_mut();
        if rare.and_then(|r| r.asking.take()).is_some() {
            c.write(&[&b"ASKING"[..]], Expect::Setup, now);
        }
        if let Some(batch) = call.batch() {
            c.write(&[&b"MULTI"[..]], Expect::Queued(key), now);
            for command in batch {
                c.write(command, Expect::Queued(key), now);
            }
        }
        let mut last = match whole {
            true => Expect::Whole(key),
            false => Expect::Call(key),
        };
        if let Combine::SlotScan(scan) = &mut request.combine {
            if let Some(visit) = scan.visit_mut(key.1) {
                visit.pieces.clear();
                for command in &visit.commands {
                    c.write(command, Expect::Piece(key), now);
                }
                last = Expect::Visit(key);
            }
        }
        match &request.packed {
            Some(packed) if call.packed => c.write_packed(packed, last, now),
            _ => c.write(&call.argv, last, now),
        }
        call.attempts += 1;
        if let Some(rare) = call.rare.as_deref_mut() {
            rare.queued_error = None;
        }
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
        self.shared_changed(addr);
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
        self.outputs.push_back(Output::Connect {
            conn,
            endpoint: Box::new(endpoint),
        });
        conn
    }

    /// Drops a connection from the tables (its owed replies are the caller's business).
    pub(crate) fn forget(&mut self, conn: ConnId) -> Option<Conn> {
        let c = self.conns.remove(&conn)?;
        if !c.dedicated && !c.pinned && c.subscriber.is_none() {
            if let Some(pair) = self.shared.get_mut(&c.addr) {
                let at = &mut pair[usize::from(c.proto == 3)];
                if *at == Some(conn) {
                    *at = None;
                    self.shared_changed(&c.addr);
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
            if let Expect::Call(key) | Expect::Whole(key) | Expect::Visit(key) = expect {
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
    pub(crate) fn lost(&mut self, now: Instant, conn: ConnId, reason: &str) {
        let Some(c) = self.forget(conn) else {
            return;
        };
        if let Some(client) = c.subscriber {
            self.subscriber_lost(now, client, conn);
        }
        self.push_event(Event::ConnectionLost {
            endpoint: endpoint(&c.addr),
            reason: reason.to_string(),
        });
        let text = format!("ERR connection to {} lost: {reason}", c.addr);
        for (expect, _) in c.owed {
            match expect {
                // A WATCH held on this connection is gone: no retry can bring it back.
                Expect::Call(key) if self.call_ref(key).is_some_and(|c| c.pinned().is_some()) => {
                    self.complete(now, key, error_frame(&text));
                }
                Expect::Call(key) | Expect::Whole(key) | Expect::Visit(key) => {
                    self.retry(now, key, error_frame(&text));
                }
                Expect::Refresh { .. } => self.refresh_failed(now, &text),
                Expect::Epoch => {}
                Expect::Info => self.info_asked = false,
                Expect::Setup | Expect::Queued(_) | Expect::Piece(_) => {}
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
            let last = call
                .rare
                .as_deref_mut()
                .and_then(|r| r.last_error.take())
                .unwrap_or(error);
            self.complete(now, key, last);
            return;
        }
        self.unclear(key);
        let Some(call) = self.call_mut(key) else {
            return;
        };
        let pause = crate::config::backoff(base, longest, call.attempts.max(1));
        let at = now + pause;
        call.rare_mut().last_error = Some(error);
        call.state = CallState::Retry(at);
        self.retries.insert((at, key));
        self.counters.retried += 1;
    }
}

/// One call of `argv` to each of `nodes`.
fn fan(argv: &[Bytes], nodes: Vec<String>) -> Vec<Call> {
    nodes
        .into_iter()
        .map(|node| Call::new(argv.to_vec(), Target::Node(node)))
        .collect()
}

/// The slot of the first key of `argv` when every key is on the same `shard` (`None` for a
/// slot no shard serves), else `None`.
fn one_shard(
    table: &redis_cluster_route::CommandTable,
    argv: &[Bytes],
    shard: impl Fn(Slot) -> Option<usize>,
) -> Option<Slot> {
    let keys = table.routing_keys(argv).ok()?;
    let mut slots = keys
        .positions()
        .map(|at| argv.get(at).map(|key| key_slot(key)));
    let first = slots.next()??;
    let home = shard(first)?;
    slots
        .all(|slot| slot.is_some_and(|slot| shard(slot) == Some(home)))
        .then_some(first)
}
