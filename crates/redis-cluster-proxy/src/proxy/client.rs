//! One client connection: commands are read and dispatched in order (each queued on its
//! node's connection at once), and a writer task waits for the replies in that same order,
//! following redirects, so a pipelining client gets its replies in the order it asked.
//!
//! WATCH pins the client to a connection of its own to the watched keys' node, where its
//! MULTI … EXEC then runs; SUBSCRIBE, PSUBSCRIBE and SSUBSCRIBE turn the client into a relay
//! to a Pub/Sub connection of its own, until it disconnects.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use redis_cluster_proto::hash_slot::Slot;
use redis_cluster_proto::resp::{Decoder, Frame, encode, encode_command};
use redis_cluster_proto::route::{CommandTable, Route};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};

/// How many replies one client may be owed (asked for and not yet written to its socket)
/// before the proxy stops reading its commands: a client pipelining GETs of 1 MB values that
/// it never reads costs at most this many of them. A pipeline of 16 (redis-benchmark -P 16)
/// still flows.
const WINDOW: usize = 16;

use super::backend::Backend;
use super::cluster::{Argv, Pending, Pool};
use super::driver::{EngineClient, PushTx};

enum Item {
    /// A reply to come, when the command arrived, and its place in the client's window.
    Reply(Pending, Instant, Option<OwnedSemaphorePermit>),
    /// Several replies to one command (UNSUBSCRIBE of several channels).
    Frames(Vec<Frame>),
    /// From here on, relay between the client and a Pub/Sub connection to `addr`, which
    /// gets `bytes` first.
    PubSub { addr: String, bytes: Vec<u8> },
    /// A command for the Pub/Sub connection.
    Forward(Vec<u8>),
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
    Frames(Vec<Frame>),
    ReplyAndClose(Pending),
    PubSub {
        addr: String,
        bytes: Vec<u8>,
    },
    Forward(Vec<u8>),
}

fn error(text: &str) -> Frame {
    Frame::SimpleError(Bytes::copy_from_slice(text.as_bytes()))
}

fn ok() -> Frame {
    Frame::SimpleString(Bytes::from_static(b"OK"))
}

fn encoded(argv: &[Bytes]) -> Vec<u8> {
    let mut out = Vec::new();
    encode_command(argv, &mut out);
    out
}

/// What a connection is in the middle of.
#[derive(Default)]
struct Session {
    /// Inside MULTI: the commands queued.
    multi: Option<Vec<Argv>>,
    /// After WATCH: the connection the watch lives on, and the watched keys' slot.
    watch: Option<(Arc<Backend>, Option<Slot>)>,
    /// Relaying to a Pub/Sub connection.
    pubsub: bool,
    /// A nutcracker pool with `redis_auth`: whether the client sent the password.
    authenticated: bool,
    /// A cluster pool: this client's side of the engine, which has its transactions and
    /// Pub/Sub.
    engine: Option<EngineClient>,
}

/// Serves one client until it quits, closes, or sends something that is not RESP.
pub(crate) async fn serve(stream: TcpStream, pool: Arc<Pool>) {
    let stats = pool.stats.clone();
    stats.connections.fetch_add(1, Ordering::Relaxed);
    stats.connected.fetch_add(1, Ordering::Relaxed);
    let _ = stream.set_nodelay(true);
    let (mut rd, wr) = stream.into_split();
    let (tx, rx) = mpsc::unbounded_channel();
    let window = Arc::new(Semaphore::new(WINDOW));
    let mut writer = tokio::spawn(write_replies(wr, rx, pool.clone()));
    let mut writer_done = None;
    // Whether the proxy, not the client, ended the connection.
    let mut by_proxy = false;
    let mut buf = BytesMut::with_capacity(pool.read_buffer);
    let mut decoder = Decoder::new();
    let mut session = Session {
        authenticated: pool.password().is_none(),
        ..Session::default()
    };
    if let Some(engine) = pool.engine() {
        // Pub/Sub frames go in the client's stream after the replies before them.
        let pushes = tx.clone();
        let pushes: PushTx = Arc::new(move |frame| {
            let _ = pushes.send(Item::Frames(vec![frame]));
        });
        session.engine = engine.open(pushes).await;
        if session.engine.is_none() {
            return;
        }
    }
    // A nutcracker pool behaves as nutcracker: no inline commands, and a request it cannot
    // parse closes the connection without a reply.
    let nutcracker = pool.ring().is_some();
    'read: loop {
        loop {
            if nutcracker && buf.first().is_some_and(|&b| b != b'*') {
                let _ = tx.send(Item::Close);
                by_proxy = true;
                break 'read;
            }
            match decoder.decode_command(&mut buf) {
                Ok(Some(command)) => {
                    // A client that does not read its replies stops being read once it owes
                    // WINDOW of them: its memory here stays bounded.
                    let permit = window.clone().acquire_owned().await.ok();
                    let started = Instant::now();
                    stats.commands.fetch_add(1, Ordering::Relaxed);
                    let argv: Argv = (0..command.len())
                        .filter_map(|i| command.arg_bytes(i))
                        .collect();
                    let item = match handle(&pool, &mut session, argv).await {
                        Action::Close => Item::Close,
                        Action::Quit => {
                            let _ = tx.send(Item::Close);
                            break 'read;
                        }
                        Action::Reply(pending) => Item::Reply(pending, started, permit),
                        Action::Frames(frames) => Item::Frames(frames),
                        Action::ReplyAndClose(pending) => {
                            let _ = tx.send(Item::Reply(pending, started, permit));
                            Item::Close
                        }
                        Action::PubSub { addr, bytes } => Item::PubSub { addr, bytes },
                        Action::Forward(bytes) => Item::Forward(bytes),
                    };
                    let close = matches!(item, Item::Close);
                    by_proxy |= close;
                    if tx.send(item).is_err() || close {
                        break 'read;
                    }
                }
                Ok(None) => break,
                Err(_) if nutcracker => {
                    let _ = tx.send(Item::Close);
                    by_proxy = true;
                    break 'read;
                }
                Err(e) => {
                    // Garbage: an error, then the connection closes; nothing else is
                    // affected.
                    let text = format!("ERR Protocol error: {e}");
                    let _ = tx.send(Item::Reply(
                        Pending::Ready(error(&text)),
                        Instant::now(),
                        None,
                    ));
                    let _ = tx.send(Item::Close);
                    by_proxy = true;
                    break 'read;
                }
            }
        }
        tokio::select! {
            read = rd.read_buf(&mut buf) => match read {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            },
            // The writer closed the connection (a split request a server failed).
            done = &mut writer => {
                writer_done = Some(done.unwrap_or(false));
                break;
            }
        }
    }
    drop(tx);
    let closed_by_writer = match writer_done {
        Some(closed) => closed,
        None => writer.await.unwrap_or(false),
    };
    let counter = if by_proxy || closed_by_writer {
        &stats.client_err
    } else {
        &stats.client_eof
    };
    counter.fetch_add(1, Ordering::Relaxed);
    stats.connected.fetch_sub(1, Ordering::Relaxed);
}

/// Commands the proxy answers itself, transactions, Pub/Sub, and everything else routed.
async fn handle(pool: &Pool, session: &mut Session, argv: Argv) -> Action {
    let name = argv
        .first()
        .map(|n| n.to_ascii_uppercase())
        .unwrap_or_default();
    let ready = |frame| Action::Reply(Pending::Ready(frame));
    if pool.ring().is_some() {
        return as_nutcracker(pool, session, &name, argv).await;
    }
    if let Some(engine) = &session.engine {
        return as_cluster(pool, engine, &name, argv);
    }
    if session.pubsub {
        return match name.as_slice() {
            b"QUIT" => Action::ReplyAndClose(Pending::Ready(ok())),
            _ => Action::Forward(encoded(&argv)),
        };
    }
    if session.multi.is_some() {
        return in_transaction(pool, session, &name, argv);
    }
    if let Some(frame) = about_the_proxy(pool, &name, &argv) {
        return ready(frame);
    }
    match name.as_slice() {
        b"PING" => match argv.get(1) {
            None => ready(Frame::SimpleString(Bytes::from_static(b"PONG"))),
            Some(text) if argv.len() == 2 => ready(Frame::BulkString(text.clone())),
            _ => ready(error("ERR wrong number of arguments for 'ping' command")),
        },
        b"QUIT" => Action::ReplyAndClose(Pending::Ready(ok())),
        b"MULTI" => {
            session.multi = Some(Vec::new());
            ready(ok())
        }
        b"EXEC" => ready(error("ERR EXEC without MULTI")),
        b"DISCARD" => ready(error("ERR DISCARD without MULTI")),
        b"WATCH" => watch(pool, session, argv).await,
        b"UNWATCH" => match session.watch.take() {
            Some((backend, _)) => {
                let rx = backend.send(encoded(&argv), 1);
                Action::Reply(Pending::Pinned(backend, rx))
            }
            None => ready(ok()),
        },
        b"HELLO" => ready(error("NOPROTO the proxy speaks RESP2 only")),
        b"SUBSCRIBE" | b"PSUBSCRIBE" | b"SSUBSCRIBE" => match pool.pubsub_node(&argv) {
            Ok(addr) => {
                session.pubsub = true;
                let mut bytes = Vec::new();
                if let Some(password) = pool.password() {
                    let auth = [
                        Bytes::from_static(b"AUTH"),
                        Bytes::copy_from_slice(password.as_bytes()),
                    ];
                    encode_command(&auth, &mut bytes);
                }
                encode_command(&argv, &mut bytes);
                Action::PubSub { addr, bytes }
            }
            Err(frame) => ready(frame),
        },
        b"UNSUBSCRIBE" | b"PUNSUBSCRIBE" | b"SUNSUBSCRIBE" => {
            // Not subscribed: what a server answers, one reply per channel (or one for none).
            let kind = Bytes::from(String::from_utf8_lossy(&name).to_ascii_lowercase());
            let channels: Vec<Frame> = if argv.len() > 1 {
                argv[1..]
                    .iter()
                    .map(|c| Frame::BulkString(c.clone()))
                    .collect()
            } else {
                vec![Frame::NullBulkString]
            };
            Action::Frames(
                channels
                    .into_iter()
                    .map(|channel| {
                        Frame::Array(vec![
                            Frame::BulkString(kind.clone()),
                            channel,
                            Frame::Integer(0),
                        ])
                    })
                    .collect(),
            )
        }
        _ => Action::Reply(pool.dispatch(argv).await),
    }
}

/// A cluster pool's commands: the proxy answers what is about itself (QUIT, SELECT, INFO of
/// its own, CLIENT SETNAME, AUTH, MONITOR); the engine everything else, transactions,
/// Pub/Sub and HELLO included.
fn as_cluster(pool: &Pool, engine: &EngineClient, name: &[u8], argv: Argv) -> Action {
    if name == b"QUIT" {
        return Action::ReplyAndClose(Pending::Ready(ok()));
    }
    match about_the_proxy(pool, name, &argv) {
        Some(frame) => Action::Reply(Pending::Ready(frame)),
        None => Action::Reply(Pending::Engine(engine.request(argv))),
    }
}

/// The commands about the proxy itself, answered by it in every kind of pool but
/// nutcracker's: SELECT (0 only), INFO of its own sections, CLIENT SETNAME / SETINFO, AUTH
/// (no client password), MONITOR (refused).
fn about_the_proxy(pool: &Pool, name: &[u8], argv: &[Bytes]) -> Option<Frame> {
    Some(match name {
        b"SELECT" => match argv.get(1).map(|db| db.as_ref()) {
            Some(b"0") => ok(),
            _ => error("ERR SELECT is not allowed in cluster mode"),
        },
        b"INFO" if proxy_section(argv) => Frame::BulkString(Bytes::from(info(pool))),
        b"CLIENT" => {
            let sub = argv.get(1).map(|s| s.to_ascii_uppercase());
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
/// everything); other sections are a node's.
fn proxy_section(argv: &[Bytes]) -> bool {
    let section = argv.get(1).map(|s| s.to_ascii_lowercase());
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
    static TABLE: std::sync::OnceLock<std::collections::HashMap<Vec<u8>, u8>> =
        std::sync::OnceLock::new();
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

/// Inside MULTI: commands are queued here; EXEC sends them all at once, on the pinned
/// connection after a WATCH, else on a connection of their own.
fn in_transaction(pool: &Pool, session: &mut Session, name: &[u8], argv: Argv) -> Action {
    let ready = |frame| Action::Reply(Pending::Ready(frame));
    match name {
        b"EXEC" => {
            let queued = session.multi.take().unwrap_or_default();
            match session.watch.take() {
                Some((backend, watched)) => {
                    let slot = match Pool::transaction_slot(&queued) {
                        Ok(slot) => slot,
                        Err(frame) => return ready(frame),
                    };
                    if slot.is_some() && watched.is_some() && slot != watched {
                        return ready(error(
                            "CROSSSLOT Keys in request don't hash to the same slot",
                        ));
                    }
                    let (bytes, frames) = Pool::transaction_bytes(&queued);
                    let rx = backend.send(bytes, frames);
                    Action::Reply(Pending::Pinned(backend, rx))
                }
                None => Action::Reply(pool.transaction(&queued)),
            }
        }
        b"DISCARD" => {
            session.multi = None;
            match session.watch.take() {
                // DISCARD also forgets the watched keys.
                Some((backend, _)) => {
                    let rx = backend.send(encoded(&[Bytes::from_static(b"UNWATCH")]), 1);
                    Action::Reply(Pending::Pinned(backend, rx))
                }
                None => ready(ok()),
            }
        }
        b"MULTI" => ready(error("ERR MULTI calls can not be nested")),
        b"WATCH" => ready(error("ERR WATCH inside MULTI is not allowed")),
        _ => {
            if let Some(queued) = session.multi.as_mut() {
                queued.push(argv);
            }
            ready(Frame::SimpleString(Bytes::from_static(b"QUEUED")))
        }
    }
}

/// WATCH: the keys' node gets a connection of this client's own, kept until EXEC, DISCARD
/// or UNWATCH; later WATCHes must be in the same slot.
async fn watch(pool: &Pool, session: &mut Session, argv: Argv) -> Action {
    let ready = |frame| Action::Reply(Pending::Ready(frame));
    let slot = match CommandTable::REDIS_7_0.route(&argv) {
        Ok(Route::Slot(slot)) => Some(slot),
        Ok(Route::CrossSlot) | Ok(Route::Split(_)) => {
            return ready(error(
                "CROSSSLOT Keys in request don't hash to the same slot",
            ));
        }
        // Wrong arity and the like: the server's own error.
        _ => None,
    };
    if let Some((backend, watched)) = &session.watch {
        if slot.is_some() && *watched != slot {
            return ready(error(
                "CROSSSLOT Keys in request don't hash to the same slot",
            ));
        }
        let rx = backend.send(encoded(&argv), 1);
        return Action::Reply(Pending::Pinned(backend.clone(), rx));
    }
    match pool.dedicated_to(slot).await {
        Ok(backend) => {
            let rx = backend.send(encoded(&argv), 1);
            session.watch = Some((backend.clone(), slot));
            Action::Reply(Pending::Pinned(backend, rx))
        }
        Err(frame) => ready(frame),
    }
}

/// The `INFO` text: the pool's counters, and for a Sentinel pool the Sentinel in use and
/// each group's master.
fn info(pool: &Pool) -> String {
    if let Some(engine) = pool.engine() {
        // A cluster pool's redirects and retries are its engine's.
        let counters = engine.counters();
        let stats = &pool.stats;
        stats.moved.store(counters.moved, Ordering::Relaxed);
        stats.ask.store(counters.asked, Ordering::Relaxed);
        stats.retries.store(counters.retried, Ordering::Relaxed);
        stats.splits.store(counters.split, Ordering::Relaxed);
        stats.refreshes.store(counters.refreshed, Ordering::Relaxed);
    }
    let mut text = pool.stats.info(&pool.name);
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

/// Writes the replies in request order, as many per write as are ready; after a Pub/Sub
/// item, relays between the client and its Pub/Sub connection. Returns whether it closed
/// the connection itself (a nutcracker pool's split request a server failed).
async fn write_replies(
    mut wr: tokio::net::tcp::OwnedWriteHalf,
    mut rx: mpsc::UnboundedReceiver<Item>,
    pool: Arc<Pool>,
) -> bool {
    let stats = pool.stats.clone();
    let mut out = Vec::with_capacity(16 * 1024);
    // The window places of the replies in `out`: given back once they are written.
    let mut written = Vec::new();
    while let Some(item) = rx.recv().await {
        let mut next = Some(item);
        let mut close = false;
        let mut failed = false;
        let mut pubsub = None;
        while let Some(item) = next.take() {
            match item {
                Item::Reply(pending, started, permit) => {
                    written.extend(permit);
                    let (frame, hang_up) = pool.resolve_closing(pending).await;
                    if let Some(frame) = frame {
                        if matches!(frame, Frame::SimpleError(_)) {
                            stats.errors.fetch_add(1, Ordering::Relaxed);
                        }
                        encode(&frame, &mut out);
                    }
                    let took = started.elapsed().as_micros() as u64;
                    stats.latency_us.fetch_add(took, Ordering::Relaxed);
                    if hang_up {
                        (close, failed) = (true, true);
                    }
                }
                Item::Frames(frames) => {
                    for frame in &frames {
                        encode(frame, &mut out);
                    }
                }
                Item::Close => close = true,
                Item::PubSub { addr, bytes } => pubsub = Some((addr, bytes)),
                Item::Forward(_) => {} // only after a Pub/Sub item, handled by the relay
            }
            if !close && pubsub.is_none() && out.len() < 64 * 1024 {
                next = rx.try_recv().ok();
            }
        }
        if wr.write_all(&out).await.is_err() {
            return false;
        }
        out.clear();
        written.clear();
        if close {
            let _ = wr.shutdown().await;
            return failed;
        }
        if let Some((addr, bytes)) = pubsub {
            relay(wr, rx, &addr, bytes).await;
            return false;
        }
    }
    false
}

/// The Pub/Sub relay: the client's commands to the server as they come, the server's
/// frames (replies and messages) to the client byte for byte.
async fn relay(
    mut wr: tokio::net::tcp::OwnedWriteHalf,
    mut rx: mpsc::UnboundedReceiver<Item>,
    addr: &str,
    first: Vec<u8>,
) {
    let mut server = match TcpStream::connect(addr).await {
        Ok(server) => server,
        Err(e) => {
            let mut out = Vec::new();
            encode(
                &error(&format!("ERR cannot connect to the server: {e}")),
                &mut out,
            );
            let _ = wr.write_all(&out).await;
            let _ = wr.shutdown().await;
            return;
        }
    };
    if server.write_all(&first).await.is_err() {
        return;
    }
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        tokio::select! {
            item = rx.recv() => match item {
                Some(Item::Forward(bytes)) => {
                    if server.write_all(&bytes).await.is_err() {
                        break;
                    }
                }
                Some(Item::Reply(pending, _, _)) => {
                    // QUIT's OK: the last thing the client gets.
                    if let Pending::Ready(frame) = pending {
                        let mut out = Vec::new();
                        encode(&frame, &mut out);
                        let _ = wr.write_all(&out).await;
                    }
                }
                Some(Item::Close) | None => break,
                Some(Item::PubSub { .. }) | Some(Item::Frames(_)) => {}
            },
            n = server.read(&mut buf) => match n {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if wr.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
            },
        }
    }
    let _ = wr.shutdown().await;
}
