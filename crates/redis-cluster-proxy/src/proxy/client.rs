//! One client connection: commands are read and handed on in order (to the pool's engine,
//! or queued on a nutcracker pool's server connection), and a writer task writes the replies
//! in that same order, so a pipelining client gets its replies in the order it asked.
//! Transactions, Pub/Sub and HELLO are the engine's; the proxy answers what is about itself.

use std::future::Future;
use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::task::Poll;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use redis_cluster_proto::resp::{
    Command, Config as DecoderConfig, Decoder, Frame, Limits, encode, encoded_len,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::net::tcp::OwnedReadHalf;
use tokio::sync::{Notify, mpsc};
use tokio::task::AbortHandle;

use super::cluster::{Argv, Pending, Pool};
use super::driver::{Answer, EngineClient, Gate, PushTx, Reporter, Submitter};
use super::log;
use super::stats::Stats;
use redis_cluster_proto::resp::server_limits::OutputLimit;

/// How many replies one client may be owed (asked for and not yet written to its socket)
/// before the proxy stops reading its commands: a client pipelining GETs of 1 MB values that
/// it never reads costs at most this many of them. A pipeline of 16 (redis-benchmark -P 16)
/// still flows.
const WINDOW: usize = 16;

/// A client's window: how many replies it is owed, at most [`WINDOW`]. The reader takes a
/// place for each command and waits while every place is taken; the writer gives the places
/// back once their replies are written, and closes the window when it ends, so that a reader
/// waiting for a writer that is gone wakes up (and finds it gone). Two atomics where a
/// semaphore took a lock and an `Arc` per command.
#[derive(Debug, Default)]
struct Window {
    owed: AtomicUsize,
    closed: AtomicBool,
    freed: Notify,
}

impl Window {
    /// Takes a place, waiting while all are taken; `false` once the window is closed.
    async fn take(&self) -> bool {
        loop {
            if self.take_now() {
                return true;
            }
            if self.closed.load(Ordering::Acquire) {
                return false;
            }
            self.freed.notified().await;
        }
    }

    /// Takes a place if one is free and the window open, without waiting.
    fn take_now(&self) -> bool {
        // Only the reader adds: between this load and the add the count can only fall.
        if !self.closed.load(Ordering::Acquire) && self.owed.load(Ordering::Acquire) < WINDOW {
            self.owed.fetch_add(1, Ordering::AcqRel);
            return true;
        }
        false
    }

    /// The replies of `places` places were written.
    fn give_back(&self, places: usize) {
        if places > 0 && self.owed.fetch_sub(places, Ordering::AcqRel) >= WINDOW {
            // The reader may be waiting, or about to: `notify_one` keeps a permit for it.
            self.freed.notify_one();
        }
    }

    /// How many replies are owed.
    fn owed(&self) -> usize {
        self.owed.load(Ordering::Acquire)
    }
}

/// Closes the window when the writer ends, however it ends (an abort included).
struct CloseOnDrop(Arc<Window>);

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        self.0.closed.store(true, Ordering::Release);
        self.0.freed.notify_one();
    }
}

/// The reader's side of the writer's channel: commands the engine answers are told to the
/// writer as one [`Item::Engine`] per run (a channel operation on each side saved per
/// command), sent before any other item and before the reader waits for anything. With one
/// thread (the default) the engine's task does not run until then, so a push it makes still
/// comes after the replies to the commands read before it; with more threads the engine
/// could answer a command before its item was sent, with or without the run.
///
/// The run's commands go to the engine together, when the writer hears of them: one message
/// to the engine's task per run as well.
struct Outbox {
    tx: mpsc::UnboundedSender<Item>,
    run: Option<(usize, Instant)>,
    /// The engine's way in (a pool with an engine), and the run's commands not sent yet.
    engine: Option<Submitter>,
    commands: Vec<Command>,
    /// How many commands the last run sent the engine (at most [`LAST_RUN_MAX`]): the room
    /// the next run's vector starts with.
    last_run: usize,
}

/// The most room a run's vector of commands is given before its first push.
const LAST_RUN_MAX: usize = 1024;

impl Outbox {
    /// One more command for the engine, that arrived at `arrived` and holds a place in the
    /// window.
    fn engine(&mut self, arrived: Instant, command: Command) {
        match &mut self.run {
            // One read's commands share their arrival.
            Some((count, at)) if *at == arrived => *count += 1,
            _ => {
                self.flush();
                self.run = Some((1, arrived));
            }
        }
        if self.commands.capacity() == 0 {
            // As many as the last run: a vector handed to the engine is not coming back.
            self.commands.reserve(self.last_run);
        }
        self.commands.push(command);
    }

    /// Sends the run so far: its commands to the engine, its count to the writer.
    fn flush(&mut self) {
        if let Some((count, arrived)) = self.run.take() {
            if let Some(engine) = &self.engine {
                self.last_run = self.commands.len().min(LAST_RUN_MAX);
                engine.requests(std::mem::take(&mut self.commands));
            }
            let _ = self.tx.send(Item::Engine { count, arrived });
        }
    }

    /// Sends `item` after the run so far; whether the writer is still there.
    fn send(&mut self, item: Item) -> bool {
        self.flush();
        self.tx.send(item).is_ok()
    }
}

impl Drop for Outbox {
    fn drop(&mut self) {
        self.flush();
    }
}

enum Item {
    /// A reply to come, when the command arrived, and whether it holds a place in the
    /// client's window.
    Reply(Pending, Instant, bool),
    /// The engine's next `count` answers, to commands of one read (arrived then), each
    /// holding a place in the window: one item for a run of them, not one per command.
    Engine { count: usize, arrived: Instant },
    /// Frames out of band (Pub/Sub pushes from the engine).
    Frames(Vec<Frame>),
    /// Close the connection after the replies before it.
    Close,
}

/// What a command asks of the connection.
enum Action {
    /// Close the connection without a reply (nutcracker's answer to what it does not serve).
    Close,
    /// QUIT in a nutcracker pool: closed without a reply, counted as the client's own close.
    Quit,
    Reply(Pending),
    ReplyAndClose(Pending),
    /// A command for the engine: its answer is the client's next one from the engine.
    Engine(Command),
}

fn error(text: &str) -> Frame {
    Frame::SimpleError(Bytes::copy_from_slice(text.as_bytes()))
}

fn ok() -> Frame {
    Frame::SimpleString(Bytes::from_static(b"OK"))
}

/// What a connection is in the middle of.
#[derive(Default)]
struct Session {
    /// A nutcracker pool with `redis_auth`: whether the client sent the password.
    authenticated: bool,
    /// The client sent (P|S)SUBSCRIBE: the idle timeout no longer applies, as the server
    /// exempts subscribers (kept after it unsubscribes).
    subscriber: bool,
    /// Every pool but nutcracker's: this client's side of the engine, which has its
    /// transactions and Pub/Sub.
    engine: Option<EngineClient>,
}

/// Serves one client until it quits, closes, or sends something that is not RESP.
pub(crate) async fn serve(mut stream: TcpStream, pool: Arc<Pool>) {
    let stats = pool.stats.clone();
    let before = stats.connected.fetch_add(1, Ordering::Relaxed);
    // `maxclients`, as the server has it: the error, then the connection closes, counted
    // in `rejected_connections` and not in `total_connections_received`.
    if pool.maxclients.is_some_and(|max| before >= max) {
        stats.connected.fetch_sub(1, Ordering::Relaxed);
        stats.rejected.fetch_add(1, Ordering::Relaxed);
        let _ = stream
            .write_all(b"-ERR max number of clients reached\r\n")
            .await;
        return;
    }
    stats.connections.fetch_add(1, Ordering::Relaxed);
    let _ = stream.set_nodelay(true);
    let (mut rd, wr) = stream.into_split();
    let (tx, rx) = mpsc::unbounded_channel();
    let window = Arc::new(Window::default());
    // The engine's answers to this client's commands, in their order.
    let (answers, answers_rx) = mpsc::unbounded_channel();
    // Closed by the engine while the client is owed too many bytes.
    let gate = Arc::new(Gate::default());
    // Bytes of Pub/Sub messages queued for the writer and not written; the writer's abort
    // handle, for a subscriber that lets them pile up.
    let push_backlog = Arc::new(AtomicUsize::new(0));
    let cut_off: Arc<OnceLock<AbortHandle>> = Arc::default();
    // Whether the proxy, not the client, ended the connection.
    let mut by_proxy = false;
    // Taken when bytes are waiting. Once every command in it is handled it is given back,
    // unless it is small (`KEEP_ROOM`): a client that has sent nothing holds no buffer, and
    // one between commands at most `KEEP_ROOM` (each held 16 KiB from its start, as much
    // again as the rest of it).
    let mut buf = BytesMut::new();
    // Whether `buf` has had more than `KEEP_ROOM` since it was last given back.
    let mut large = false;
    // How much the next read asks for: at most the pool's `read_buffer`, sized to what the
    // client sends (see `next_room`).
    let mut room = FIRST_ROOM.min(pool.read_buffer);
    // `proto_max_bulk_len` bounds each argument; the whole command is bounded by
    // `client_query_buffer_limit`, checked after each read, so not by the decoder.
    let mut decoder = Decoder::with_config(DecoderConfig {
        limits: Limits {
            max_bulk_len: pool.limits.max_bulk_len,
            max_frame_len: usize::MAX,
            ..Limits::DEFAULT
        },
        lenient: false,
    });
    let mut session = Session {
        authenticated: pool.password().is_none(),
        ..Session::default()
    };
    // The pubsub limit: checked at each message, and by the writer while a write waits.
    let mut pubsub_limit = None;
    if let Some(engine) = pool.engine() {
        // Pub/Sub frames go in the client's stream after the replies before them. A weak
        // sender: the engine's hold on it must not keep the writer waiting for more once
        // this task is done (each closed client's tasks and buffers stayed alive forever).
        let pushes = tx.downgrade();
        let (backlog, cut) = (push_backlog.clone(), cut_off.clone());
        let over = Arc::new(OutputLimitCheck::new(pool.limits.pubsub, Instant::now()));
        pubsub_limit = Some(over.clone());
        let pushes: PushTx = Arc::new(move |frame| {
            // A subscriber that does not read its messages is disconnected once they pass
            // the pool's `client_output_buffer_limit pubsub`, as the server disconnects it.
            let size = encoded_len(&frame);
            let owed = backlog.fetch_add(size, Ordering::Relaxed) + size;
            if let Some(why) = over.check(owed as u64, Instant::now()) {
                if let Some(writer) = cut.get().filter(|w| !w.is_finished()) {
                    log_cut(owed, why);
                    writer.abort();
                }
                return;
            }
            if let Some(pushes) = pushes.upgrade() {
                let _ = pushes.send(Item::Frames(vec![frame]));
            }
        });
        session.engine = engine.open(pushes, answers, gate.clone()).await;
        if session.engine.is_none() {
            return;
        }
    }
    let reporter = session.engine.as_ref().map(EngineClient::reporter);
    let mut writer = tokio::spawn(write_replies(
        wr,
        window.clone(),
        rx,
        answers_rx,
        reporter,
        Backlog {
            bytes: push_backlog.clone(),
            limit: pubsub_limit,
        },
        pool.clone(),
    ));
    let _ = cut_off.set(writer.abort_handle());
    let mut writer_done = None;
    // A nutcracker pool behaves as nutcracker: no inline commands, and a request it cannot
    // parse closes the connection without a reply.
    let nutcracker = pool.ring().is_some();
    let mut outbox = Outbox {
        tx,
        run: None,
        engine: session.engine.as_ref().map(EngineClient::submitter),
        commands: Vec::new(),
        last_run: 0,
    };
    'read: loop {
        // When this read's commands arrived (the latency counter's start): one clock
        // reading per read, not per command.
        let arrived = Instant::now();
        loop {
            if nutcracker && buf.first().is_some_and(|&b| b != b'*') {
                outbox.send(Item::Close);
                by_proxy = true;
                break 'read;
            }
            match decoder.decode_command(&mut buf) {
                Ok(Some(command)) => {
                    // A client that does not read its replies stops being read once it owes
                    // WINDOW of them: its memory here stays bounded. The writer hears of
                    // the run so far before the reader waits for it.
                    let permit = window.take_now() || {
                        outbox.flush();
                        window.take().await
                    };
                    if !permit {
                        // The window closed: the writer is gone.
                        break 'read;
                    }
                    let started = arrived;
                    stats.commands.fetch_add(1, Ordering::Relaxed);
                    if pool.client_timeout.is_some() && !session.subscriber {
                        session.subscriber = command.arg(0).is_some_and(|name| {
                            [&b"SUBSCRIBE"[..], b"PSUBSCRIBE", b"SSUBSCRIBE"]
                                .iter()
                                .any(|s| name.eq_ignore_ascii_case(s))
                        });
                    }
                    let item = match handle(&pool, &mut session, command).await {
                        Action::Close => Item::Close,
                        Action::Quit => {
                            outbox.send(Item::Close);
                            break 'read;
                        }
                        Action::Engine(command) => {
                            outbox.engine(started, command);
                            continue;
                        }
                        Action::Reply(pending) => Item::Reply(pending, started, permit),
                        Action::ReplyAndClose(pending) => {
                            outbox.send(Item::Reply(pending, started, permit));
                            Item::Close
                        }
                    };
                    let close = matches!(item, Item::Close);
                    by_proxy |= close;
                    if !outbox.send(item) || close {
                        break 'read;
                    }
                }
                Ok(None) => {
                    outbox.flush();
                    break;
                }
                Err(_) if nutcracker => {
                    outbox.send(Item::Close);
                    by_proxy = true;
                    break 'read;
                }
                Err(e) => {
                    // Garbage: an error, then the connection closes; nothing else is
                    // affected.
                    let text = format!("ERR Protocol error: {e}");
                    outbox.send(Item::Reply(
                        Pending::Ready(error(&text)),
                        Instant::now(),
                        false,
                    ));
                    outbox.send(Item::Close);
                    by_proxy = true;
                    break 'read;
                }
            }
        }
        // A client owed more than CLIENT_OUTPUT_LIMIT bytes is not read until it takes
        // them (or its writer ends: a client gone while paused must not be waited for).
        tokio::select! {
            () = gate.wait() => {}
            done = &mut writer => {
                writer_done = Some(done.unwrap_or(true));
                break;
            }
        }
        // `client_timeout`, as the server's `timeout`: a client that sent nothing for that
        // long and is owed no reply is closed (never a subscriber).
        let idle = pool.client_timeout.filter(|_| !session.subscriber);
        if buf.is_empty() && large {
            buf = BytesMut::new();
            large = false;
        }
        tokio::select! {
            ready = rd.readable() => if ready.is_err() {
                break;
            },
            () = idle_for(idle, &window) => {
                stats.idle_closed.fetch_add(1, Ordering::Relaxed);
                outbox.send(Item::Close);
                by_proxy = true;
                break;
            }
            // The writer closed the connection (a split request a server failed).
            done = &mut writer => {
                // Aborted (a subscriber over its limit): the proxy's doing.
                writer_done = Some(done.unwrap_or(true));
                break;
            }
        }
        buf.reserve(room);
        large |= buf.capacity() > KEEP_ROOM;
        let before = buf.len();
        let read = read_once(&mut rd, &mut buf).await;
        room = next_room(
            room,
            buf.len() - before,
            buf.capacity() == buf.len(),
            pool.read_buffer,
        );
        match read {
            Ok(0) => break,
            // `client_query_buffer_limit`: as the server, what is held unparsed after a read
            // is checked, and a client past it is closed without a reply.
            Ok(_) if buf.len() as u64 > pool.limits.query_buffer => {
                log::write(
                    log::WARN,
                    format_args!(
                        "Closing client that reached max query buffer length: qbuf={} \
                         (qbuf initial bytes: {:?})",
                        buf.len(),
                        String::from_utf8_lossy(&buf[..buf.len().min(64)])
                    ),
                );
                outbox.send(Item::Close);
                by_proxy = true;
                break;
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(_) => break,
        }
    }
    drop(outbox);
    let closed_by_writer = match writer_done {
        Some(closed) => closed,
        None => writer.await.unwrap_or(true),
    };
    let counter = if by_proxy || closed_by_writer {
        &stats.client_err
    } else {
        &stats.client_eof
    };
    counter.fetch_add(1, Ordering::Relaxed);
    stats.connected.fetch_sub(1, Ordering::Relaxed);
}

/// The first read's room, and the least any read asks for.
const FIRST_ROOM: usize = 1024;

/// The largest room a client's buffer keeps while it waits for the next read. Kept, the
/// buffer is used again in place when the commands read into it are done by then (a client
/// that waits for its replies before it sends more) instead of a new one being allocated.
const KEEP_ROOM: usize = 4 * FIRST_ROOM;

/// The room for the read after one that read `got` bytes (`filled`: all the room it had), at
/// most `max`. A buffer that was filled doubles; one that was filled to less than a quarter
/// halves. Each read's buffer is a new allocation whenever the commands of the last one are
/// still in flight (they are slices of it), and a small one is much cheaper to allocate and
/// free: a client that pipelines a few hundred bytes at a time (16 GETs are about 600) is read
/// with 1 KiB, not `max` (16 KiB unless `-m` says otherwise).
fn next_room(room: usize, got: usize, filled: bool, max: usize) -> usize {
    let least = FIRST_ROOM.min(max);
    if filled {
        room.saturating_mul(2).min(max)
    } else if got < room / 4 {
        (room / 2).max(least)
    } else {
        room
    }
}

/// Reads once what the socket holds into `buf`'s spare room, as tokio's `AsyncRead` reads:
/// a read that leaves room unfilled means the socket is drained, and its readiness is cleared
/// (the event it was seen in, not a later one), so the next wait is for new bytes.
/// `try_read_buf` leaves the readiness set, and each read was followed by a second system
/// call that found nothing. `WouldBlock` when nothing was there (the readiness was stale).
async fn read_once(rd: &mut OwnedReadHalf, buf: &mut BytesMut) -> std::io::Result<usize> {
    let mut read = std::pin::pin!(rd.read_buf(buf));
    std::future::poll_fn(|cx| match read.as_mut().poll(cx) {
        // `read_buf` is cancel-safe: nothing was read.
        Poll::Pending => Poll::Ready(Err(std::io::ErrorKind::WouldBlock.into())),
        done => done,
    })
    .await
}

/// A client's Pub/Sub messages not yet written, in bytes, and the pubsub limit they are held
/// to (pools with an engine).
struct Backlog {
    bytes: Arc<AtomicUsize>,
    limit: Option<Arc<OutputLimitCheck>>,
}

/// Logs the disconnection of a subscriber owed `owed` bytes of messages, and why.
fn log_cut(owed: usize, why: &str) {
    log::write(
        log::WARN,
        format_args!("a subscriber left {owed} bytes of messages unread, {why}: disconnected"),
    );
}

/// Writes `out` (it holds Pub/Sub messages) and, while the write waits on a subscriber that
/// does not read, checks `limit` once a second, as the server's cron checks its clients: a
/// subscriber over the soft limit for too long is closed even when no message comes any more
/// to check it at. `Err(None)` when the write failed, `Err(Some(why))` when the limit cut it.
async fn write_watched(
    wr: &mut tokio::net::tcp::OwnedWriteHalf,
    out: &[u8],
    limit: &OutputLimitCheck,
    backlog: &AtomicUsize,
) -> Result<(), Option<&'static str>> {
    let write = wr.write_all(out);
    tokio::pin!(write);
    loop {
        tokio::select! {
            written = &mut write => return written.map_err(|_| None),
            () = tokio::time::sleep(Duration::from_secs(1)) => {
                let owed = backlog.load(Ordering::Relaxed);
                if let Some(why) = limit.check(owed as u64, Instant::now()) {
                    log_cut(owed, why);
                    return Err(Some(why));
                }
            }
        }
    }
}

/// A subscriber's [`OutputLimit`] and its clock: whether it is owed more than `hard` bytes,
/// or more than `soft` for longer than `soft_seconds` (the server's rule, from the first time
/// over `soft` until it is back under it).
struct OutputLimitCheck {
    limit: OutputLimit,
    /// Where the limit's milliseconds count from.
    start: Instant,
    /// Since when (ms from `start`) the client has been over `soft`.
    soft_since: std::sync::Mutex<Option<u64>>,
}

impl OutputLimitCheck {
    fn new(limit: OutputLimit, start: Instant) -> Self {
        Self {
            limit,
            start,
            soft_since: std::sync::Mutex::new(None),
        }
    }

    /// Why a client owed `owed` bytes at `now` is to be closed; `None` while it is not.
    fn check(&self, owed: u64, now: Instant) -> Option<&'static str> {
        let now_ms = u64::try_from(now.saturating_duration_since(self.start).as_millis())
            .unwrap_or(u64::MAX);
        let mut since = self
            .soft_since
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !self.limit.exceeded(owed, &mut since, now_ms) {
            return None;
        }
        Some(if self.limit.hard > 0 && owed > self.limit.hard {
            "over the hard limit"
        } else {
            "over the soft limit for too long"
        })
    }
}

/// Ends once a client has been idle for `limit` (never, for none): that long with every
/// permit of its `window` back, so that no reply is owed to it. A reply still to come
/// (a blocked BLPOP, a slow backend) starts the wait again once it is written.
async fn idle_for(limit: Option<Duration>, window: &Window) {
    let Some(limit) = limit else {
        return std::future::pending().await;
    };
    loop {
        // Owed nothing: wait the limit, then check that nothing came to be owed meanwhile
        // (a command read is owed a reply until it is written).
        if window.owed() == 0 {
            tokio::time::sleep(limit).await;
            if window.owed() == 0 {
                return;
            }
        }
        // Owed something: check again a little later.
        tokio::time::sleep(limit.min(Duration::from_millis(100))).await;
    }
}

/// A nutcracker pool's commands as nutcracker takes them; every other pool's go to its
/// engine.
async fn handle(pool: &Pool, session: &mut Session, command: Command) -> Action {
    // The name in capitals, on the stack for every name a command table has (the longest
    // is 17 bytes): no allocation per command.
    let mut stack = [0u8; 32];
    let heap;
    let first = command.arg(0).unwrap_or_default();
    let name: &[u8] = if first.len() <= stack.len() {
        let name = &mut stack[..first.len()];
        name.copy_from_slice(first);
        name.make_ascii_uppercase();
        name
    } else {
        heap = first.to_ascii_uppercase();
        &heap
    };
    if pool.ring().is_some() {
        let argv: Argv = (0..command.len())
            .filter_map(|i| command.arg_bytes(i))
            .collect();
        return as_nutcracker(pool, session, name, argv).await;
    }
    match &session.engine {
        Some(_) => as_engine(pool, name, command),
        None => Action::Reply(Pending::Ready(error("ERR the pool has no engine"))),
    }
}

/// The commands of a pool with an engine: the proxy answers what is about itself (QUIT,
/// SELECT, INFO of its own, CLIENT SETNAME, AUTH, MONITOR); the engine everything else,
/// transactions, Pub/Sub and HELLO included.
fn as_engine(pool: &Pool, name: &[u8], command: Command) -> Action {
    if name == b"QUIT" {
        return Action::ReplyAndClose(Pending::Ready(ok()));
    }
    match about_the_proxy(pool, name, command.arg(1)) {
        Some(frame) => Action::Reply(Pending::Ready(frame)),
        None => Action::Engine(command),
    }
}

/// The commands about the proxy itself, answered by it in every kind of pool but
/// nutcracker's: SELECT (0 only), INFO of its own sections, CLIENT SETNAME / SETINFO, AUTH
/// (no client password), MONITOR (refused). `first` is the argument after the name.
fn about_the_proxy(pool: &Pool, name: &[u8], first: Option<&[u8]>) -> Option<Frame> {
    Some(match name {
        b"SELECT" => match first {
            Some(b"0") => ok(),
            _ => error("ERR SELECT is not allowed in cluster mode"),
        },
        b"INFO" if proxy_section(first) => Frame::BulkString(Bytes::from(info(pool))),
        b"CLIENT" => {
            let sub = first.map(<[u8]>::to_ascii_uppercase);
            match sub.as_deref() {
                Some(b"SETNAME") | Some(b"SETINFO") => ok(),
                _ => error("ERR CLIENT is not supported by the proxy"),
            }
        }
        b"AUTH" => error(AUTH_WITHOUT_PASSWORD),
        b"MONITOR" => error("ERR MONITOR is not supported by the proxy"),
        _ => return None,
    })
}

/// Whether INFO asks for the proxy's own section (none named, or proxy, all, default,
/// everything); other sections are a node's. `section` is INFO's first argument.
fn proxy_section(section: Option<&[u8]>) -> bool {
    let section = section.map(<[u8]>::to_ascii_lowercase);
    matches!(
        section.as_deref(),
        None | Some(b"proxy") | Some(b"all") | Some(b"default") | Some(b"everything")
    )
}

const AUTH_WITHOUT_PASSWORD: &str = "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?";

/// A nutcracker pool's commands: what nutcracker 0.5.0 accepts (its table, read from the
/// real binary: `nutcracker-commands.txt`) is routed; anything else closes the connection,
/// unanswered. AUTH is the proxy's: with `redis_auth` the client must send that password
/// before anything else (PING included), a wrong one logs it out again; without, AUTH gets
/// nutcracker's error. PING is answered here.
async fn as_nutcracker(pool: &Pool, session: &mut Session, name: &[u8], argv: Argv) -> Action {
    let ready = |frame| Action::Reply(Pending::Ready(frame));
    if name == b"QUIT" {
        return Action::Quit;
    }
    if !nutcracker_accepts(name, argv.len() - 1) {
        return Action::Close;
    }
    match (name, pool.password()) {
        (b"AUTH", None) => ready(error("ERR Client sent AUTH, but no password is set")),
        (b"AUTH", Some(password)) => {
            session.authenticated = argv[1].as_ref() == password.as_bytes();
            match session.authenticated {
                true => ready(ok()),
                false => ready(error("ERR invalid password")),
            }
        }
        _ if !session.authenticated => ready(error("NOAUTH Authentication required")),
        (b"PING", _) => ready(Frame::SimpleString(Bytes::from_static(b"PONG"))),
        _ => Action::Reply(pool.dispatch(argv).await),
    }
}

/// Whether nutcracker 0.5.0 serves command `name` with `extra` arguments after it.
fn nutcracker_accepts(name: &[u8], extra: usize) -> bool {
    static TABLE: OnceLock<std::collections::HashMap<Vec<u8>, u8>> = OnceLock::new();
    let table = TABLE.get_or_init(|| {
        include_str!("nutcracker-commands.txt")
            .lines()
            .filter_map(|line| {
                let (name, mask) = line.split_once(' ')?;
                let mask = u8::from_str_radix(mask, 2).ok()?;
                Some((name.to_ascii_uppercase().into_bytes(), mask))
            })
            .collect()
    });
    // The table probes up to seven arguments; more are read as six or seven, whichever has
    // the same parity (MSET takes pairs: its mask is 01010100).
    let probed = if extra > 7 { 6 + extra % 2 } else { extra };
    table
        .get(name)
        .is_some_and(|mask| mask & (1 << probed) != 0)
}

/// The `INFO` text: the pool's counters, and for a Sentinel pool the Sentinel in use and
/// each group's master.
fn info(pool: &Pool) -> String {
    if let Some(engine) = pool.engine() {
        // Redirects and retries are the engine's.
        let counters = engine.counters();
        let stats = &pool.stats;
        stats.moved.store(counters.moved, Ordering::Relaxed);
        stats.ask.store(counters.asked, Ordering::Relaxed);
        stats.retries.store(counters.retried, Ordering::Relaxed);
        stats.splits.store(counters.split, Ordering::Relaxed);
        stats.refreshes.store(counters.refreshed, Ordering::Relaxed);
    }
    let mut text = pool.stats.info(&pool.name);
    if let Some(engine) = pool.engine() {
        text.push_str(&format!("command_table:{}\r\n", engine.table()));
    }
    if let Some(groups) = pool.groups() {
        if !groups.sentinels.is_empty() {
            text.push_str(&format!(
                "sentinel:{}\r\nsentinel_switches:{}\r\n",
                groups.sentinel(),
                groups.switches.load(Ordering::Relaxed)
            ));
        }
        for group in &groups.groups {
            let master = group
                .master
                .read()
                .map(|m| m.clone().unwrap_or_default())
                .unwrap_or_default();
            text.push_str(&format!("group_{}:{master}\r\n", group.name));
        }
    }
    text
}

/// Writes the replies in request order, as many per write as are ready. Returns whether it
/// closed the connection itself (a nutcracker pool's split request a server failed).
/// Adds an answer's bytes to `out`; how many.
fn put(answer: Answer, out: &mut Vec<u8>, stats: &Stats) -> usize {
    let before = out.len();
    match answer {
        Answer::Frame(frame) => {
            if matches!(frame, Frame::SimpleError(_)) {
                stats.errors.fetch_add(1, Ordering::Relaxed);
            }
            encode(&frame, out);
        }
        // Never an error: the engine hands those on as frames.
        Answer::Raw(bytes) => out.extend_from_slice(&bytes),
        Answer::Pushes => {}
    }
    out.len() - before
}

/// The engine's answers to a client, as they come: several to a message.
struct Inbox {
    rx: mpsc::UnboundedReceiver<Vec<Answer>>,
    /// Those of the latest message not taken yet.
    ready: std::vec::IntoIter<Answer>,
}

impl Inbox {
    /// The next answer, when it comes; an error when the engine has stopped.
    async fn next(&mut self) -> Answer {
        loop {
            if let Some(answer) = self.ready.next() {
                return answer;
            }
            match self.rx.recv().await {
                Some(answers) => self.ready = answers.into_iter(),
                None => return Answer::Frame(error("ERR the proxy's engine stopped")),
            }
        }
    }
}

async fn write_replies(
    mut wr: tokio::net::tcp::OwnedWriteHalf,
    window: Arc<Window>,
    mut rx: mpsc::UnboundedReceiver<Item>,
    answers: mpsc::UnboundedReceiver<Vec<Answer>>,
    reporter: Option<Reporter>,
    pushes: Backlog,
    pool: Arc<Pool>,
) -> bool {
    let Backlog {
        bytes: push_backlog,
        limit: pubsub_limit,
    } = pushes;
    let stats = pool.stats.clone();
    let mut answers = Inbox {
        rx: answers,
        ready: Vec::new().into_iter(),
    };
    // Given back when nothing more waits to be written, as the reader's buffer.
    let mut out = Vec::new();
    // The window places of the replies in `out`: given back once they are written.
    let mut places = 0;
    let window = CloseOnDrop(window);
    // When the commands of the replies in `out` arrived, and how many arrived then.
    let mut starts: Vec<(Instant, usize)> = Vec::new();
    // Bytes of the engine's replies and pushes in `out`, reported once written; of the
    // pushes alone.
    let (mut engine_bytes, mut push_bytes) = (0, 0);
    while let Some(item) = rx.recv().await {
        out.reserve(4096);
        let mut next = Some(item);
        let mut close = false;
        let mut failed = false;
        while let Some(item) = next.take() {
            match item {
                Item::Engine { count, arrived } => {
                    places += count;
                    for _ in 0..count {
                        let answer = answers.next().await;
                        engine_bytes += put(answer, &mut out, &stats);
                    }
                    starts.push((arrived, count));
                }
                Item::Reply(pending, started, permit) => {
                    places += usize::from(permit);
                    let (frame, hang_up) = pool.resolve_closing(pending).await;
                    let answer = frame.map_or(Answer::Pushes, Answer::Frame);
                    put(answer, &mut out, &stats);
                    starts.push((started, 1));
                    if hang_up {
                        (close, failed) = (true, true);
                    }
                }
                Item::Frames(frames) => {
                    // Pushes: the engine's too.
                    let before = out.len();
                    for frame in &frames {
                        encode(frame, &mut out);
                    }
                    engine_bytes += out.len() - before;
                    push_bytes += out.len() - before;
                }
                Item::Close => close = true,
            }
            if !close && out.len() < 64 * 1024 {
                next = rx.try_recv().ok();
            }
        }
        // Each reply's latency ends when its batch is ready to write: one clock reading.
        let ready = Instant::now();
        let took: u64 = starts
            .drain(..)
            .map(|(started, count)| {
                ready.saturating_duration_since(started).as_micros() as u64 * count as u64
            })
            .sum();
        stats.latency_us.fetch_add(took, Ordering::Relaxed);
        // A subscriber's messages in the way: the limit is watched while the write waits.
        let limit = pubsub_limit.as_deref().filter(|_| push_bytes > 0);
        let written = match limit {
            Some(limit) => write_watched(&mut wr, &out, limit, &push_backlog).await,
            None => wr.write_all(&out).await.map_err(|_| None),
        };
        match written {
            Ok(()) => {}
            Err(None) => return false,
            // Over the pubsub limit: the proxy's doing.
            Err(Some(_)) => return true,
        }
        if let Some(reporter) = &reporter {
            reporter.written(std::mem::take(&mut engine_bytes));
        }
        push_backlog.fetch_sub(std::mem::take(&mut push_bytes), Ordering::Relaxed);
        if rx.is_empty() {
            out = Vec::new();
        } else {
            out.clear();
        }
        window.0.give_back(std::mem::take(&mut places));
        if close {
            let _ = wr.shutdown().await;
            return failed;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::{FIRST_ROOM, OutputLimit, OutputLimitCheck, next_room};

    #[test]
    fn a_read_asks_for_what_the_client_sends() {
        let max = 16 * 1024;
        // Filled: more was waiting, so the next read asks for twice as much, up to `max`.
        assert_eq!(next_room(FIRST_ROOM, FIRST_ROOM, true, max), 2 * FIRST_ROOM);
        assert_eq!(next_room(max, max, true, max), max);
        // Most of it used: the same again.
        assert_eq!(next_room(4096, 2000, false, max), 4096);
        // Under a quarter used: half, never under the first room.
        assert_eq!(next_room(4096, 1000, false, max), 2048);
        assert_eq!(next_room(FIRST_ROOM, 0, false, max), FIRST_ROOM);
        // A `read_buffer` (`-m`) under the first room bounds every read.
        assert_eq!(next_room(512, 512, true, 512), 512);
        assert_eq!(next_room(512, 0, false, 512), 512);
        // Growing from the first room reaches `max` and stops there.
        let mut room = FIRST_ROOM;
        for _ in 0..10 {
            room = next_room(room, room, true, max);
        }
        assert_eq!(room, max);
    }

    #[test]
    fn a_subscriber_is_cut_past_the_hard_limit_or_over_the_soft_one_too_long() {
        let t0 = Instant::now();
        let check = OutputLimitCheck::new(
            OutputLimit {
                hard: 100,
                soft: 10,
                soft_seconds: 2,
            },
            t0,
        );
        let at = |secs: u64| t0 + Duration::from_secs(secs);
        assert_eq!(check.check(10, at(0)), None);
        assert_eq!(check.check(101, at(0)), Some("over the hard limit"));
        // Over the soft limit: the clock starts, and runs out only after soft_seconds.
        assert_eq!(check.check(11, at(0)), None);
        assert_eq!(check.check(50, at(2)), None);
        assert_eq!(
            check.check(50, at(3)),
            Some("over the soft limit for too long")
        );
        // Back under it, the clock stops: the next time over starts it again.
        assert_eq!(check.check(5, at(4)), None);
        assert_eq!(check.check(50, at(5)), None);
        assert_eq!(check.check(50, at(7)), None);
        assert!(check.check(50, at(8)).is_some());
        // 0 turns a bound off.
        let off = OutputLimitCheck::new(OutputLimit::NONE, t0);
        assert_eq!(off.check(u64::MAX, at(0)), None);
        assert_eq!(off.check(u64::MAX, at(1000)), None);
    }
}
