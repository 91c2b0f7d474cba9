//! The tokio driver of a pool's [`Engine`] (a cluster's, or standalone masters'): one task owns the engine; client tasks
//! send it commands and get replies and pushes back; each backend connection is a reader
//! task and a writer task. Sockets, timers and counters live here; routing, redirects,
//! retries, splits, transactions and Pub/Sub are the engine's.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use redis_cluster_proto::client::{ClientId, Config, ConnId, Counters, Engine, IdHasher, Output};
use redis_cluster_proto::hash_slot::SlotRange;
use redis_cluster_proto::resp::{Command, Frame};
use redis_cluster_proto::route::{Endpoint, ReadFrom, SlotMap};
use tokio::sync::{mpsc, oneshot};

use super::log;
use super::net::{self, Wire};
use super::stats::{ServerStats, Stats};

/// Where a client connection takes frames out of band (Pub/Sub pushes), in its reply order.
pub(crate) type PushTx = Arc<dyn Fn(Frame) + Send + Sync>;

/// A command's answer from the engine.
#[derive(Debug)]
pub(crate) enum Answer {
    /// Its reply, made or merged by the engine.
    Frame(Frame),
    /// Its reply as the server sent it, to be written as it is.
    Raw(Bytes),
    /// None: pushes answer it (SUBSCRIBE).
    Pushes,
}

/// Where a client's answers go, in its request order (the engine gives them in that order):
/// those given one after the other in a round as one message, where one message per answer
/// was a channel operation on each side per command.
pub(crate) type Answers = mpsc::UnboundedSender<Vec<Answer>>;

/// How many answers a client's message has room for at first: a pipeline's worth.
const ANSWERS: usize = 16;

/// How many bytes of replies a client may be owed (handed to its connection's writer and not
/// yet written to its socket) before its commands stop being read: the engine's
/// `client_output_limit`. Beside the window of 16 owed replies (client.rs), it binds for
/// replies of 256 KB and more.
pub(crate) const CLIENT_OUTPUT_LIMIT: usize = 4 << 20;

/// Whether a client's commands may be read: closed while the engine says it is owed too
/// many bytes ([`Output::Pause`] … [`Output::Resume`]).
#[derive(Debug, Default)]
pub(crate) struct Gate {
    paused: std::sync::atomic::AtomicBool,
    opened: tokio::sync::Notify,
}

impl Gate {
    /// Waits while the gate is closed.
    pub(crate) async fn wait(&self) {
        while self.paused.load(std::sync::atomic::Ordering::Acquire) {
            self.opened.notified().await;
        }
    }

    fn set(&self, paused: bool) {
        self.paused
            .store(paused, std::sync::atomic::Ordering::Release);
        if !paused {
            // A permit is kept if the reader is not waiting yet: no wake-up is lost.
            self.opened.notify_one();
        }
    }
}

/// A client's writer reports to the engine what it wrote of the engine's replies.
#[derive(Clone, Debug)]
pub(crate) struct Reporter {
    id: ClientId,
    tx: mpsc::UnboundedSender<ToEngine>,
}

impl Reporter {
    /// `bytes` of the engine's replies and pushes reached the client's socket.
    pub(crate) fn written(&self, bytes: usize) {
        if bytes > 0 {
            let _ = self.tx.send(ToEngine::Written(self.id, bytes));
        }
    }
}

/// What the engine task keeps of a client.
struct Link {
    pushes: PushTx,
    answers: Answers,
    gate: Arc<Gate>,
}

/// What the engine task is told.
enum ToEngine {
    Open {
        pushes: PushTx,
        answers: Answers,
        gate: Arc<Gate>,
        id: oneshot::Sender<ClientId>,
    },
    /// A client's writer wrote this many bytes of the engine's replies.
    Written(ClientId, usize),
    Close(ClientId),
    /// Commands of one read, oldest first: one channel operation for a pipeline, where one
    /// per command was about 2.5 % of the proxy's CPU on GET (perf).
    Requests {
        client: ClientId,
        commands: Vec<Command>,
    },
    Wire(Wire),
    /// The masters moved (a Sentinel switch).
    Map(SlotMap),
    /// Hold a range's commands until then (a failover began).
    Hold(SlotRange, Instant),
    /// Release them.
    Release(SlotRange),
}

/// What the engine task reports after each round: its counters and the command table it
/// uses (the cluster's own, once `INFO server` answered).
type Report = Arc<std::sync::Mutex<(Counters, &'static str)>>;

/// A cluster pool's handle on its engine task.
#[derive(Clone, Debug)]
pub(crate) struct EngineHandle {
    tx: mpsc::UnboundedSender<ToEngine>,
    counters: Report,
}

/// One client connection's side of the engine.
pub(crate) struct EngineClient {
    id: ClientId,
    tx: mpsc::UnboundedSender<ToEngine>,
}

impl EngineClient {
    /// What the client's writer reports its progress with.
    pub(crate) fn reporter(&self) -> Reporter {
        Reporter {
            id: self.id,
            tx: self.tx.clone(),
        }
    }

    /// What the client's reader sends its commands with.
    pub(crate) fn submitter(&self) -> Submitter {
        Submitter {
            id: self.id,
            tx: self.tx.clone(),
        }
    }
}

/// A client's reader's way to the engine: the commands of one read go as one message.
pub(crate) struct Submitter {
    id: ClientId,
    tx: mpsc::UnboundedSender<ToEngine>,
}

impl Submitter {
    /// Sends commands, oldest first; their answers come on the client's answers channel, in
    /// that order, after those of the commands sent before them.
    pub(crate) fn requests(&self, commands: Vec<Command>) {
        let _ = self.tx.send(ToEngine::Requests {
            client: self.id,
            commands,
        });
    }
}

impl Drop for EngineClient {
    fn drop(&mut self) {
        let _ = self.tx.send(ToEngine::Close(self.id));
    }
}

impl EngineHandle {
    /// Starts the engine task of a pool: a cluster found from `seeds`, or standalone masters
    /// as `fixed` shards them (their driver then reports switches with
    /// [`EngineHandle::set_slot_map`]).
    #[allow(clippy::too_many_arguments)] // the pool's settings, each named
    pub(crate) fn start(
        seeds: &[String],
        fixed: Option<SlotMap>,
        read_from: ReadFrom,
        timeout: Duration,
        password: Option<String>,
        stats: Arc<Stats>,
        server_stats: impl Fn(&str) -> Arc<ServerStats> + Send + 'static,
        name: String,
    ) -> Self {
        let seeds = seeds.iter().filter_map(|s| s.parse().ok()).collect();
        let mut config = Config::new(seeds);
        config.fixed_map = fixed;
        config.client_output_limit = Some(CLIENT_OUTPUT_LIMIT);
        config.read_from = read_from;
        config.timeout = timeout;
        config.auth = password.map(|p| (None, p));
        // Replies the engine passes on unchanged are written out as the server sent them.
        config.raw_replies = true;
        let (tx, rx) = mpsc::unbounded_channel();
        let engine = Engine::new(config, Instant::now());
        let counters = Arc::new(std::sync::Mutex::new((
            Counters::default(),
            engine.table().server,
        )));
        let task = Task {
            engine,
            tx: tx.clone(),
            clients: HashMap::default(),
            writers: HashMap::default(),
            readers: HashMap::default(),
            addrs: HashMap::default(),
            timeout,
            stats,
            server_stats: Box::new(server_stats),
            counters: counters.clone(),
            name,
            answering: None,
        };
        tokio::spawn(task.run(rx));
        Self { tx, counters }
    }

    /// A new client of the engine; its pushes go to `pushes`, its answers to `answers`.
    pub(crate) async fn open(
        &self,
        pushes: PushTx,
        answers: Answers,
        gate: Arc<Gate>,
    ) -> Option<EngineClient> {
        let (id, rx) = oneshot::channel();
        self.tx
            .send(ToEngine::Open {
                pushes,
                answers,
                gate,
                id,
            })
            .ok()?;
        let id = rx.await.ok()?;
        Some(EngineClient {
            id,
            tx: self.tx.clone(),
        })
    }

    /// The masters moved: later commands go where `map` says.
    pub(crate) fn set_slot_map(&self, map: SlotMap) {
        let _ = self.tx.send(ToEngine::Map(map));
    }

    /// A failover of `range` began: its commands wait until `until` at most.
    pub(crate) fn hold(&self, range: SlotRange, until: Instant) {
        let _ = self.tx.send(ToEngine::Hold(range, until));
    }

    /// The failover of `range` ended: its commands go on.
    pub(crate) fn release(&self, range: SlotRange) {
        let _ = self.tx.send(ToEngine::Release(range));
    }

    /// The engine's counters, as of its last round.
    pub(crate) fn counters(&self) -> Counters {
        self.report().0
    }

    /// The server whose command table the engine uses (`redis 8.2.3`), as of its last round.
    pub(crate) fn table(&self) -> &'static str {
        self.report().1
    }

    fn report(&self) -> (Counters, &'static str) {
        *self
            .counters
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Each server's counters, by address.
type StatsOf = Box<dyn Fn(&str) -> Arc<ServerStats> + Send>;

/// The engine task's state.
struct Task {
    engine: Engine,
    tx: mpsc::UnboundedSender<ToEngine>,
    /// Each client's pushes, answers and read gate.
    clients: HashMap<ClientId, Link, IdHasher>,
    writers: HashMap<ConnId, mpsc::UnboundedSender<Vec<u8>>, IdHasher>,
    readers: HashMap<ConnId, tokio::task::AbortHandle, IdHasher>,
    addrs: HashMap<ConnId, Arc<ServerStats>, IdHasher>,
    timeout: Duration,
    stats: Arc<Stats>,
    server_stats: StatsOf,
    counters: Report,
    name: String,
    /// The answers of the round's latest client, not sent yet.
    answering: Option<(ClientId, Vec<Answer>)>,
}

/// How many messages one round takes before it writes: a pipeline's commands to one node
/// leave in one write.
const BATCH: usize = 512;

impl Task {
    async fn run(mut self, mut rx: mpsc::UnboundedReceiver<ToEngine>) {
        loop {
            self.drain();
            let deadline = self.engine.poll_timeout();
            let message = match deadline {
                Some(at) => {
                    let at = tokio::time::Instant::from_std(at);
                    tokio::select! {
                        message = rx.recv() => message,
                        () = tokio::time::sleep_until(at) => {
                            self.engine.handle_timeout(Instant::now());
                            continue;
                        }
                    }
                }
                None => rx.recv().await,
            };
            let Some(message) = message else {
                return;
            };
            // One clock reading per round: a round takes microseconds, and the engine's
            // deadlines are milliseconds.
            let now = Instant::now();
            self.handle(message, now);
            for _ in 0..BATCH {
                match rx.try_recv() {
                    Ok(message) => self.handle(message, now),
                    Err(_) => break,
                }
            }
        }
    }

    fn handle(&mut self, message: ToEngine, now: Instant) {
        match message {
            ToEngine::Open {
                pushes,
                answers,
                gate,
                id,
            } => {
                let client = self.engine.open_client();
                self.clients.insert(
                    client,
                    Link {
                        pushes,
                        answers,
                        gate,
                    },
                );
                let _ = id.send(client);
            }
            ToEngine::Written(client, bytes) => self.engine.handle_written(client, bytes),
            ToEngine::Close(client) => {
                // The engine drops the client's requests without a word: so does this.
                self.clients.remove(&client);
                self.engine.close_client(now, client);
            }
            ToEngine::Requests { client, commands } => {
                for command in commands {
                    self.engine.handle_command(now, client, command);
                }
            }
            ToEngine::Wire(Wire::Connected(conn, writer)) => {
                if let Some(stats) = self.addrs.get(&conn) {
                    stats
                        .server_connections
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                self.writers.insert(conn, writer);
                self.engine.handle_connected(now, conn);
            }
            ToEngine::Wire(Wire::Data(conn, bytes)) => {
                if let Some(stats) = self.addrs.get(&conn) {
                    stats
                        .response_bytes
                        .fetch_add(bytes.len() as u64, std::sync::atomic::Ordering::Relaxed);
                }
                self.engine.handle_data(now, conn, &bytes);
            }
            ToEngine::Map(map) => self.engine.set_slot_map(now, map),
            ToEngine::Hold(range, until) => self.engine.hold(now, range, until),
            ToEngine::Release(range) => self.engine.release(now, range),
            ToEngine::Wire(Wire::Closed(conn, reason)) => {
                if self.forget(conn) {
                    self.stats
                        .backend_errors
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    self.engine.handle_closed(now, conn, &reason);
                }
            }
        }
    }

    /// Does what the engine asks until it asks nothing more.
    fn drain(&mut self) {
        loop {
            let mut busy = false;
            while let Some(output) = self.engine.poll_output() {
                busy = true;
                self.output(output);
            }
            let mut buf = Vec::new();
            while let Some(conn) = self.engine.poll_transmit(&mut buf) {
                busy = true;
                if let Some(stats) = self.addrs.get(&conn) {
                    stats
                        .request_bytes
                        .fetch_add(buf.len() as u64, std::sync::atomic::Ordering::Relaxed);
                }
                match self.writers.get(&conn) {
                    Some(writer) => {
                        let _ = writer.send(std::mem::take(&mut buf));
                    }
                    None => buf.clear(),
                }
            }
            if !busy {
                break;
            }
        }
        self.send_answers();
        let report = (self.engine.counters(), self.engine.table().server);
        *self
            .counters
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = report;
    }

    fn output(&mut self, output: Output) {
        match output {
            Output::Connect { conn, endpoint } => self.connect(conn, *endpoint),
            Output::Close { conn } => {
                self.forget(conn);
            }
            Output::Reply { client, frame, .. } => self.answer(client, Answer::Frame(frame)),
            Output::Raw { client, bytes, .. } => self.answer(client, Answer::Raw(bytes)),
            Output::Answered { client, .. } => self.answer(client, Answer::Pushes),
            Output::Push { client, frame } => {
                if let Some(link) = self.clients.get(&client) {
                    (link.pushes)(frame);
                }
            }
            Output::Pause { client } => {
                if let Some(link) = self.clients.get(&client) {
                    link.gate.set(true);
                }
            }
            Output::Resume { client } => {
                if let Some(link) = self.clients.get(&client) {
                    link.gate.set(false);
                }
            }
            Output::Event(event) if log::enabled(log::INFO) => {
                log::write(log::INFO, format_args!("pool {}: {event:?}", self.name));
            }
            _ => {}
        }
    }

    /// Adds `answer` to the answers of `client` to send; those of another client before it
    /// go first. (A push need not wait for them: the client's writer orders both by the
    /// items its reader sent, and it waits for an answer it has not got.)
    fn answer(&mut self, client: ClientId, answer: Answer) {
        match &mut self.answering {
            Some((to, answers)) if *to == client => answers.push(answer),
            _ => {
                self.send_answers();
                let mut answers = Vec::with_capacity(ANSWERS);
                answers.push(answer);
                self.answering = Some((client, answers));
            }
        }
    }

    /// Sends the answers kept by [`Task::answer`].
    fn send_answers(&mut self) {
        if let Some((client, answers)) = self.answering.take() {
            if let Some(link) = self.clients.get(&client) {
                let _ = link.answers.send(answers);
            }
        }
    }

    /// Drops a connection's tasks; whether it was known.
    fn forget(&mut self, conn: ConnId) -> bool {
        let connected = self.writers.remove(&conn).is_some();
        let reader = self.readers.remove(&conn);
        let known = connected || reader.is_some();
        if let Some(reader) = reader {
            reader.abort();
        }
        if let (Some(stats), true) = (self.addrs.remove(&conn), connected) {
            stats
                .server_connections
                .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
        }
        known
    }

    /// Opens a connection in the background: connected, then read until it ends.
    fn connect(&mut self, conn: ConnId, endpoint: Endpoint) {
        let addr = endpoint.to_string();
        let stats = (self.server_stats)(&addr);
        stats
            .attempts
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.stats
            .backend_connections
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.addrs.insert(conn, stats);
        let reader = net::connect(conn, addr, self.timeout, self.tx.clone(), ToEngine::Wire);
        self.readers.insert(conn, reader);
    }
}
