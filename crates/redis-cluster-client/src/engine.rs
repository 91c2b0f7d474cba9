//! [`Engine`]: its state, its inputs and its outputs. Sending is `dispatch.rs`, receiving
//! `answer.rs`, the slot map `refresh.rs`.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::time::Instant;

use bytes::Bytes;
use redis_cluster_route::{CommandTable, Endpoint, SlotMap};
use redis_hash_slot::SlotRange;
use redis_resp::{Frame, Kind, Status};

use crate::conn::{Conn, Expect};
use crate::hello;
use crate::pubsub::Subscriptions;
use crate::refresh::Refresh;
use crate::request::{Call, CallKey, CallState, Combine, Pass, Reply, Request};
use crate::slab::Requests;
use crate::transaction::{Multi, Watch};
use crate::{ClientId, Config, ConnId, IdHasher, Output, RequestId};

/// What [`Engine::take_raw`] did with the front of a connection's input.
enum Raw {
    /// Handed a reply on as bytes: look at what follows.
    Taken,
    /// Nothing more to do until more bytes arrive (or the connection is gone).
    Wait,
    /// The front is to be decoded into a frame.
    Frame,
}

/// One client's state: its requests in the order it sent them, and per slot its calls not
/// yet answered, oldest first.
#[derive(Debug, Default)]
pub(crate) struct ClientState {
    pub(crate) order: VecDeque<RequestId>,
    pub(crate) slots: HashMap<u16, SlotQueue, IdHasher>,
    pub(crate) proto: u8,
    /// Inside MULTI: the commands queued so far.
    pub(crate) multi: Option<Multi>,
    /// After WATCH: the connection that holds it.
    pub(crate) watch: Option<Watch>,
    /// Pub/Sub.
    pub(crate) subs: Subscriptions,
    /// Bytes of replies and pushes handed out and not reported written
    /// ([`Config::client_output_limit`]).
    pub(crate) unwritten: usize,
    /// Whether [`Output::Pause`] was said last (and not [`Output::Resume`]).
    pub(crate) paused: bool,
}

/// One client's unanswered calls of one slot, oldest first.
#[derive(Debug, Default)]
pub(crate) struct SlotQueue {
    pub(crate) keys: CallQueue,
    /// How many calls at the front are known to be written on `conn`, none of them a
    /// barrier: `pump` looks at the calls after them only, so a pipeline of n commands of
    /// one slot costs n steps, not n². Anything that takes one of them off `conn` (a
    /// redirect, a retry) sets it back to 0; an answer takes one off the count.
    pub(crate) clear: usize,
    pub(crate) conn: Option<ConnId>,
}

/// Calls in order: the first kept inline, the others in a `VecDeque`. A slot's queue
/// usually holds one call (a pipeline of commands on random keys meets a slot once), and
/// lives from that call's sending to its answer: a `VecDeque` alone took a heap block and
/// gave it back for each, one allocation per call (as many as ten for an MGET in a cluster).
#[derive(Debug, Default)]
pub(crate) struct CallQueue {
    /// The oldest call; `None` only when `more` is empty too.
    first: Option<CallKey>,
    more: VecDeque<CallKey>,
}

impl CallQueue {
    pub(crate) fn push_back(&mut self, key: CallKey) {
        match self.first {
            None => self.first = Some(key),
            Some(_) => self.more.push_back(key),
        }
    }

    pub(crate) fn len(&self) -> usize {
        usize::from(self.first.is_some()) + self.more.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.first.is_none()
    }

    /// The calls from index `start` on, oldest first.
    pub(crate) fn iter_from(&self, start: usize) -> impl Iterator<Item = &CallKey> {
        self.first.iter().chain(self.more.iter()).skip(start)
    }

    /// Takes `key` out; its index, if it was there.
    pub(crate) fn remove(&mut self, key: CallKey) -> Option<usize> {
        if self.first == Some(key) {
            self.first = self.more.pop_front();
            return Some(0);
        }
        let at = self.more.iter().position(|k| *k == key)?;
        self.more.remove(at);
        Some(at + 1)
    }
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
    pub(crate) shared: HashMap<String, [Option<ConnId>; 2], IdHasher>,
    /// The map's masters as `host:port`: per shard index, and sorted (each once).
    pub(crate) master_addrs: Vec<String>,
    /// The map has one master and it serves every slot: no command needs its keys' shards.
    pub(crate) one_master: bool,
    /// Per shard index, `shared`'s entry for `master_addrs`' address, kept in step with both:
    /// a call to a slot's master finds its connection without hashing the address.
    pub(crate) master_conns: Vec<[Option<ConnId>; 2]>,
    pub(crate) masters_sorted: Vec<String>,
    pub(crate) next_id: u64,
    pub(crate) clients: HashMap<ClientId, ClientState, IdHasher>,
    pub(crate) requests: Requests,
    /// Calls waiting to be retried, by when.
    pub(crate) retries: BTreeSet<(Instant, CallKey)>,
    /// Requests waiting for a first slot map.
    pub(crate) unrouted: Vec<RequestId>,
    pub(crate) outputs: VecDeque<Output>,
    /// Connections with bytes to write, each once.
    pub(crate) writable: VecDeque<ConnId>,
    pub(crate) refresh: Refresh,
    /// Whether `INFO server` was asked (the table is chosen from its answer).
    pub(crate) info_asked: bool,
    /// What the cluster said it runs (`redis_version` and friends), for HELLO.
    pub(crate) server: hello::Server,
    pub(crate) turn: usize,
    pub(crate) counters: Counters,
    /// Slot ranges whose commands wait, each until when (`fixed.rs`).
    pub(crate) holds: Vec<(SlotRange, Instant)>,
    /// The calls waiting for a hold to end, with the range that holds them and until when.
    pub(crate) held: Vec<(CallKey, SlotRange, Instant)>,
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
    /// An engine that starts by loading the slot map from `config`'s seeds, or with
    /// [`Config::fixed_map`] when it is set.
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
            one_master: false,
            master_conns: Vec::new(),
            masters_sorted: Vec::new(),
            next_id: 0,
            clients: HashMap::default(),
            requests: Requests::default(),
            retries: BTreeSet::new(),
            unrouted: Vec::new(),
            outputs: VecDeque::new(),
            writable: VecDeque::new(),
            refresh: Refresh::new(now, config_refresh.0, config_refresh.1),
            info_asked: false,
            server: hello::Server::default(),
            turn: 0,
            counters: Counters::default(),
            holds: Vec::new(),
            held: Vec::new(),
        };
        if let Some(map) = engine.config.fixed_map.clone() {
            // Masters the caller names: nothing is asked of the nodes.
            engine.refresh.stop();
            engine.map = Some(map);
            engine.map_changed();
        }
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
                self.requests.discard(id);
            }
            let blocked: Vec<ConnId> = self
                .conns
                .iter()
                .filter(|(_, c)| c.dedicated)
                .filter(|(_, c)| {
                    c.owed.iter().any(
                        |(e, _)| matches!(e, Expect::Call((id, _)) | Expect::Whole((id, _)) if state.order.contains(id)),
                    )
                })
                .map(|(id, _)| *id)
                .collect();
            for conn in blocked {
                self.close(now, conn);
            }
        }
    }

    /// The driver wrote `bytes` of the client's replies and pushes to it (their RESP
    /// encoding, as [`redis_resp::encoded_len`] counts it). With
    /// [`Config::client_output_limit`], a paused client whose unwritten bytes fall to half
    /// the limit is resumed ([`Output::Resume`]).
    pub fn handle_written(&mut self, client: ClientId, bytes: usize) {
        let Some(limit) = self.config.client_output_limit else {
            return;
        };
        let Some(state) = self.clients.get_mut(&client) else {
            return;
        };
        state.unwritten = state.unwritten.saturating_sub(bytes);
        if state.paused && state.unwritten <= limit / 2 {
            state.paused = false;
            self.outputs.push_back(Output::Resume { client });
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
        self.request(now, client, argv, None)
    }

    /// [`Engine::handle_request`] with the command's bytes as the client sent them, a RESP
    /// array of `argv`'s bulk strings (what
    /// [`Command::into_packed`](redis_resp::Command::into_packed) gives a proxy). Wherever the
    /// command goes whole to one node those bytes are written as they are, instead of
    /// `argv` encoded again; a command that is split, rewritten or made a transaction's is
    /// encoded from `argv` as usual. `packed` must encode exactly `argv`: the engine routes
    /// by `argv` and does not read `packed`.
    ///
    /// ```
    /// use std::time::Instant;
    /// use bytes::Bytes;
    /// use redis_cluster_client::{Config, Engine, Output};
    /// use redis_cluster_route::{Endpoint, SlotMap};
    /// use redis_hash_slot::SlotRange;
    ///
    /// // One standalone server that serves every slot.
    /// let server = Endpoint { host: "127.0.0.1".into(), port: 6379, ..Endpoint::default() };
    /// let mut map = SlotMap::default();
    /// map.assign_range(SlotRange::ALL, server);
    /// let mut config = Config::new(Vec::new());
    /// config.fixed_map = Some(map);
    /// let now = Instant::now();
    /// let mut engine = Engine::new(config, now);
    /// let client = engine.open_client();
    /// let argv = vec![Bytes::from_static(b"GET"), Bytes::from_static(b"k")];
    /// let packed = Bytes::from_static(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n");
    /// engine.handle_packed_request(now, client, argv, packed.clone());
    /// while let Some(output) = engine.poll_output() {
    ///     if let Output::Connect { conn, .. } = output {
    ///         engine.handle_connected(now, conn);
    ///     }
    /// }
    /// let mut out = Vec::new();
    /// engine.poll_transmit(&mut out).expect("bytes for the server");
    /// assert!(out.ends_with(&packed));
    /// ```
    pub fn handle_packed_request(
        &mut self,
        now: Instant,
        client: ClientId,
        argv: Vec<Bytes>,
        packed: Bytes,
    ) -> RequestId {
        self.request(now, client, argv, Some(packed))
    }

    /// A client's command as [`Decoder::decode_command`](redis_resp::Decoder::decode_command)
    /// gives it: what a proxy reads from its clients. Its arguments go into a vector that a
    /// finished request left (no allocation in a steady pipeline), and a command that came
    /// as a RESP array is passed on as its bytes wherever it goes whole to one node, as
    /// [`Engine::handle_packed_request`] does; an inline command is encoded as an array.
    ///
    /// ```
    /// use std::time::Instant;
    /// use bytes::BytesMut;
    /// use redis_cluster_client::{Config, Engine, Output};
    /// use redis_cluster_route::{Endpoint, SlotMap};
    /// use redis_hash_slot::SlotRange;
    /// use redis_resp::Decoder;
    ///
    /// // One standalone server that serves every slot.
    /// let server = Endpoint { host: "127.0.0.1".into(), port: 6379, ..Endpoint::default() };
    /// let mut map = SlotMap::default();
    /// map.assign_range(SlotRange::ALL, server);
    /// let mut config = Config::new(Vec::new());
    /// config.fixed_map = Some(map);
    /// let now = Instant::now();
    /// let mut engine = Engine::new(config, now);
    /// let client = engine.open_client();
    /// // What a client sent: an array, then an inline command.
    /// let mut input = BytesMut::from(&b"*2\r\n$3\r\nget\r\n$1\r\nk\r\nGET j\r\n"[..]);
    /// let mut decoder = Decoder::new();
    /// while let Ok(Some(command)) = decoder.decode_command(&mut input) {
    ///     engine.handle_command(now, client, command);
    /// }
    /// while let Some(output) = engine.poll_output() {
    ///     if let Output::Connect { conn, .. } = output {
    ///         engine.handle_connected(now, conn);
    ///     }
    /// }
    /// let mut out = Vec::new();
    /// engine.poll_transmit(&mut out).expect("bytes for the server");
    /// assert!(out.ends_with(b"*2\r\n$3\r\nget\r\n$1\r\nk\r\n*2\r\n$3\r\nGET\r\n$1\r\nj\r\n"));
    /// ```
    pub fn handle_command(
        &mut self,
        now: Instant,
        client: ClientId,
        command: redis_resp::Command,
    ) -> RequestId {
        let mut argv = self.requests.spare_argv();
        argv.reserve(command.len());
        argv.extend((0..command.len()).filter_map(|i| command.arg_bytes(i)));
        self.request(now, client, argv, command.into_packed())
    }

    fn request(
        &mut self,
        now: Instant,
        client: ClientId,
        argv: Vec<Bytes>,
        packed: Option<Bytes>,
    ) -> RequestId {
        let request = Request {
            client,
            unrouted: Some(argv),
            packed,
            calls: Vec::new(),
            combine: Combine::One,
            reply: None,
            silent: false,
            answered: 0,
        };
        let id = self.requests.insert(request);
        match self.clients.get_mut(&client) {
            Some(state) => state.order.push_back(id),
            None => {
                // A client that was closed (or never opened): nobody reads the reply.
                self.requests.discard(&id);
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
            if self.config.raw_replies {
                match self.take_raw(now, conn) {
                    Raw::Taken => continue,
                    Raw::Wait => return,
                    Raw::Frame => {}
                }
            }
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
            self.answer(now, conn, expect, frame);
            // A dedicated connection closes after its last reply; answering may have written
            // one more command on it (a WATCH queued behind others, sent after an UNWATCH
            // retired its connection), which it must answer first.
            let done = self
                .conns
                .get(&conn)
                .is_some_and(|c| c.dedicated && c.owed.is_empty());
            if done {
                self.outputs.push_back(Output::Close { conn });
                self.forget(conn);
            }
        }
    }

    /// With [`Config::raw_replies`]: hands on the reply at the front of `conn`'s input as its
    /// bytes when it is the whole reply of a request ([`Request::passes_on`]) and no error;
    /// anything else is left to be decoded into a frame.
    fn take_raw(&mut self, now: Instant, conn: ConnId) -> Raw {
        let Some(c) = self.conns.get_mut(&conn) else {
            return Raw::Wait;
        };
        if c.input.is_empty() {
            return Raw::Wait;
        }
        // The front reply is read one way from its first byte to its last: the kind of
        // what is owed decides, and it stays at the front until the reply is whole.
        let key = match c.owed.front() {
            Some((Expect::Whole(key), _)) if c.subscriber.is_none() => *key,
            _ => return Raw::Frame,
        };
        let span = match c.decoder.decode_span(&c.input) {
            Ok(Status::Complete(span)) => span,
            Ok(Status::Incomplete { .. }) => return Raw::Wait,
            Err(e) => {
                let why = format!("not RESP: {e}");
                self.outputs.push_back(Output::Close { conn });
                self.lost(now, conn, &why);
                return Raw::Wait;
            }
        };
        // Errors may be redirects or retries; pushes and attributes are not the reply; and
        // a reply the merge would refuse must reach it. (The decoder is between frames
        // again: the frame path reads this one afresh.)
        let kind = span.kind;
        if matches!(
            kind,
            Kind::SIMPLE_ERROR | Kind::BULK_ERROR | Kind::PUSH | Kind::ATTRIBUTE
        ) {
            return Raw::Frame;
        }
        let pass = self
            .requests
            .get(&key.0)
            .map_or(Pass::No, |r| r.passes_on(key.1, Some(&c.input[..span.len])));
        if pass == Pass::No {
            return Raw::Frame;
        }
        let bytes = c.input.split_to(span.len).freeze();
        c.owed.pop_front();
        match pass {
            Pass::Part => self.complete_reply(now, key, Reply::Raw(bytes)),
            _ => self.complete_raw(now, key, bytes),
        }
        Raw::Taken
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
        self.prune_holds(now);
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
            c.take_out(out);
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

    pub(crate) fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    pub(crate) fn call_mut(&mut self, (id, index): CallKey) -> Option<&mut Call> {
        self.requests.get_mut(&id)?.calls.get_mut(index)
    }

    pub(crate) fn call_ref(&self, (id, index): CallKey) -> Option<&Call> {
        self.requests.get(&id)?.calls.get(index)
    }
}

/// A command's name in lower case, kept on the stack: enough to tell the few commands the
/// engine answers itself (none is longer than 16 bytes) without allocating per request. A
/// longer name is empty here.
#[derive(Clone, Copy)]
pub(crate) struct Name {
    buf: [u8; 16],
    len: usize,
}

impl Name {
    pub(crate) fn of(argv: &[Bytes]) -> Self {
        let mut name = Self {
            buf: [0; 16],
            len: 0,
        };
        if let Some(first) = argv.first().filter(|n| n.len() <= name.buf.len()) {
            name.len = first.len();
            name.buf[..first.len()].copy_from_slice(first);
            name.buf.make_ascii_lowercase();
        }
        name
    }

    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
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
pub(crate) fn all_nodes(map: &SlotMap) -> Vec<String> {
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
/// Where a MOVED or ASK points: its host, or `conn_host` (the node that answered) when it
/// names none (empty, or `?` for an unknown endpoint).
pub(crate) fn redirect_endpoint(named: &[u8], port: u16, conn_host: &str) -> Endpoint {
    let host = match named {
        b"" | b"?" => conn_host.to_string(),
        named => String::from_utf8_lossy(named).into_owned(),
    };
    Endpoint {
        host,
        port,
        ..Endpoint::default()
    }
}

pub(crate) fn endpoint(addr: &str) -> Endpoint {
    addr.parse().unwrap_or_else(|_| Endpoint {
        host: addr.to_string(),
        ..Endpoint::default()
    })
}

#[cfg(test)]
mod tests {
    use super::CallQueue;
    use crate::RequestId;

    /// The inline first call and the spilled ones form one queue: order kept through
    /// pushes and removals at the front, the middle and the back, as a `VecDeque` keeps it.
    #[test]
    fn a_call_queue_keeps_order_as_a_vecdeque() {
        let key = |n: u64| (RequestId(n), 0);
        let mut queue = CallQueue::default();
        let mut model = std::collections::VecDeque::new();
        let check = |queue: &CallQueue, model: &std::collections::VecDeque<_>| {
            assert_eq!(queue.len(), model.len());
            assert_eq!(queue.is_empty(), model.is_empty());
            for start in 0..=model.len() {
                let got: Vec<_> = queue.iter_from(start).copied().collect();
                let want: Vec<_> = model.iter().skip(start).copied().collect();
                assert_eq!(got, want);
            }
        };
        check(&queue, &model);
        for n in 0..5 {
            queue.push_back(key(n));
            model.push_back(key(n));
            check(&queue, &model);
        }
        for n in [2, 0, 4, 9, 1, 3] {
            let at = model.iter().position(|k| *k == key(n));
            if let Some(at) = at {
                model.remove(at);
            }
            assert_eq!(queue.remove(key(n)), at, "{n}");
            check(&queue, &model);
            queue.push_back(key(10 + n));
            model.push_back(key(10 + n));
            check(&queue, &model);
        }
        while let Some(&front) = model.front() {
            model.pop_front();
            assert_eq!(queue.remove(front), Some(0));
            check(&queue, &model);
        }
    }

    /// Every reply is moved into the engine's queue of outputs and out of it again: what
    /// is large and rare stays boxed (an endpoint inline made every output 136 bytes).
    #[test]
    fn an_output_fits_a_cache_line() {
        assert!(
            size_of::<crate::Output>() <= 64,
            "{}",
            size_of::<crate::Output>()
        );
    }
}
