//! One pipelined connection to a server: requests go out in the order they are queued, and
//! replies come back to them in that order. Queuing is synchronous, so a client's commands
//! reach a server in the order the client sent them. Every connection keeps its server's
//! counters ([`ServerStats`]): requests, replies, queues, and how the connection ended.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::BytesMut;
use redis_cluster_proto::resp::{Decoder, Frame};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{Notify, mpsc, oneshot};

use super::stats::{Ending, ServerStats};

/// Why a request got no reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum BackendError {
    /// The connection could not be opened: the address, and the system's reason.
    Connect(String, String),
    /// The server closed the connection.
    Eof,
    /// The connection failed or sent something that is not RESP: why.
    Closed(String),
    /// No reply within the pool's timeout: the connection was dropped.
    Timeout,
}

impl std::fmt::Display for BackendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Connect(addr, why) => write!(f, "cannot connect to the server: {addr}: {why}"),
            Self::Eof => f.write_str("connection to the server lost: closed by the server"),
            Self::Closed(why) => write!(f, "connection to the server lost: {why}"),
            Self::Timeout => f.write_str("the server did not answer in time"),
        }
    }
}

impl BackendError {
    /// What nutcracker writes after `-ERR ` for this failure: the system's message for the
    /// error (`strerror`), `Connection timed out` for a late reply, and `unknown` when the
    /// server closed the connection (no error number).
    pub(crate) fn errno_text(&self) -> &str {
        match self {
            Self::Connect(_, why) | Self::Closed(why) => why,
            Self::Eof => "unknown",
            Self::Timeout => "Connection timed out",
        }
    }
}

/// The system's message for an I/O error, without Rust's ` (os error N)` suffix: the text
/// `strerror` gives.
pub(crate) fn strerror(e: &std::io::Error) -> String {
    let text = e.to_string();
    match text.rfind(" (os error ") {
        Some(at) => text[..at].to_string(),
        None => text,
    }
}

/// The reply to one request: the last of the frames it asked for.
pub(crate) type Reply = Result<Frame, BackendError>;

struct Request {
    bytes: Vec<u8>,
    /// How many frames the request produces (ASKING + a command: 2); the last is the reply.
    frames: usize,
    /// Whether the server's counters count it (a connection's own AUTH / SELECT are not).
    counted: bool,
    reply: oneshot::Sender<Reply>,
}

/// A request written, waiting for its reply.
struct Waiting {
    frames: usize,
    bytes: u64,
    counted: bool,
    reply: oneshot::Sender<Reply>,
}

/// A connection to one server.
pub(crate) struct Backend {
    /// `host:port`.
    pub(crate) addr: String,
    tx: mpsc::UnboundedSender<Request>,
    alive: Arc<AtomicBool>,
    killed: Arc<Notify>,
    /// Set before a kill for a late reply, so that the end is counted as a timeout.
    timed_out: Arc<AtomicBool>,
    timeout: Duration,
    stats: Arc<ServerStats>,
}

impl Backend {
    /// Opens a connection within `timeout`, with counters of its own.
    pub(crate) async fn connect(addr: &str, timeout: Duration) -> Result<Arc<Self>, BackendError> {
        let (backend, ready) = Self::start(addr, timeout, Arc::default());
        match ready.await {
            Ok(Err(e)) => Err(e),
            _ => Ok(backend),
        }
    }

    /// A connection to `addr` that keeps `stats`, the server's counters, and is opened in
    /// the background: requests queue at once, and fail with [`BackendError::Connect`] if
    /// it cannot be opened within `timeout`. Requests queued together thus share one
    /// attempt, as on nutcracker's non-blocking connections.
    pub(crate) fn open(addr: &str, timeout: Duration, stats: Arc<ServerStats>) -> Arc<Self> {
        Self::start(addr, timeout, stats).0
    }

    fn start(
        addr: &str,
        timeout: Duration,
        stats: Arc<ServerStats>,
    ) -> (Arc<Self>, oneshot::Receiver<Result<(), BackendError>>) {
        stats.attempts.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = mpsc::unbounded_channel();
        let (ready, opened) = oneshot::channel();
        let backend = Arc::new(Self {
            addr: addr.to_string(),
            tx,
            alive: Arc::new(AtomicBool::new(true)),
            killed: Arc::new(Notify::new()),
            timed_out: Arc::new(AtomicBool::new(false)),
            timeout,
            stats,
        });
        tokio::spawn(run(backend.clone(), rx, ready));
        (backend, opened)
    }

    /// Whether the connection is still usable.
    pub(crate) fn is_alive(&self) -> bool {
        self.alive.load(Ordering::Relaxed) && !self.tx.is_closed()
    }

    /// Marks the connection dead: its tasks stop, its requests in flight fail.
    pub(crate) fn kill(&self) {
        self.alive.store(false, Ordering::Relaxed);
        self.killed.notify_one();
    }

    /// Queues `bytes` (one or more commands producing `frames` replies); the receiver gets
    /// the last reply.
    pub(crate) fn send(&self, bytes: Vec<u8>, frames: usize) -> oneshot::Receiver<Reply> {
        self.queue(bytes, frames, true)
    }

    /// [`Backend::send`] for the connection's own set-up (AUTH, SELECT, READONLY): not
    /// counted as a request.
    pub(crate) fn send_setup(&self, bytes: Vec<u8>, frames: usize) -> oneshot::Receiver<Reply> {
        self.queue(bytes, frames, false)
    }

    fn queue(&self, bytes: Vec<u8>, frames: usize, counted: bool) -> oneshot::Receiver<Reply> {
        let (reply, rx) = oneshot::channel();
        if counted {
            let len = bytes.len() as u64;
            self.stats.requests.fetch_add(1, Ordering::Relaxed);
            self.stats.request_bytes.fetch_add(len, Ordering::Relaxed);
            self.stats.in_queue.fetch_add(1, Ordering::Relaxed);
            self.stats.in_queue_bytes.fetch_add(len, Ordering::Relaxed);
        }
        let request = Request {
            bytes,
            frames,
            counted,
            reply,
        };
        if let Err(mpsc::error::SendError(request)) = self.tx.send(request) {
            unqueued(&self.stats, &request);
            let _ = request
                .reply
                .send(Err(BackendError::Closed("connection closed".into())));
        }
        rx
    }

    /// Waits for a reply queued by [`Backend::send`], at most the pool's timeout; on a
    /// timeout the connection is dropped (what follows on it can no longer be matched).
    pub(crate) async fn wait(&self, mut rx: oneshot::Receiver<Reply>) -> Reply {
        // A reply already there needs no timer (most of a pipeline's are).
        match rx.try_recv() {
            Ok(reply) => return reply,
            Err(oneshot::error::TryRecvError::Closed) => {
                return Err(BackendError::Closed("connection closed".into()));
            }
            Err(oneshot::error::TryRecvError::Empty) => {}
        }
        match tokio::time::timeout(self.timeout, rx).await {
            Ok(Ok(reply)) => reply,
            Ok(Err(_)) => Err(BackendError::Closed("connection closed".into())),
            Err(_) => {
                self.timed_out.store(true, Ordering::Relaxed);
                self.kill();
                Err(BackendError::Timeout)
            }
        }
    }
}

/// Opens the connection, then writes (reading in a task of its own); if it cannot be
/// opened, every request queued fails with the reason.
async fn run(
    backend: Arc<Backend>,
    mut rx: mpsc::UnboundedReceiver<Request>,
    ready: oneshot::Sender<Result<(), BackendError>>,
) {
    let stats = backend.stats.clone();
    let addr = backend.addr.clone();
    let opened = tokio::time::timeout(backend.timeout, TcpStream::connect(&addr)).await;
    let failure = match opened {
        Ok(Ok(stream)) => {
            stats.server_connections.fetch_add(1, Ordering::Relaxed);
            let _ = ready.send(Ok(()));
            let _ = stream.set_nodelay(true);
            let (rd, wr) = stream.into_split();
            let pending = Arc::new(Mutex::new(VecDeque::new()));
            let ends = Ends {
                killed: backend.killed.clone(),
                timed_out: backend.timed_out.clone(),
                alive: backend.alive.clone(),
                stats: stats.clone(),
            };
            let alive = backend.alive.clone();
            // The writer must not keep the connection (and its sender) alive.
            drop(backend);
            tokio::spawn(read(rd, pending.clone(), ends));
            write(wr, rx, pending, alive, stats).await;
            return;
        }
        Ok(Err(e)) => {
            stats.ended(Ending::Error);
            BackendError::Connect(addr, strerror(&e))
        }
        Err(_) => {
            stats.ended(Ending::Timeout);
            BackendError::Connect(addr, "Connection timed out".into())
        }
    };
    backend.alive.store(false, Ordering::Relaxed);
    let _ = ready.send(Err(failure.clone()));
    drop(backend);
    rx.close();
    while let Ok(request) = rx.try_recv() {
        unqueued(&stats, &request);
        let _ = request.reply.send(Err(failure.clone()));
    }
}

type Pending = Arc<Mutex<VecDeque<Waiting>>>;

/// A counted request leaves the in-queue without being written.
fn unqueued(stats: &ServerStats, request: &Request) {
    if request.counted {
        ServerStats::down(&stats.in_queue, 1);
        ServerStats::down(&stats.in_queue_bytes, request.bytes.len() as u64);
    }
}

/// Sends queued requests, several per write when they queue up faster than the socket
/// takes them. Each request joins the pending queue before its bytes go out.
async fn write(
    mut wr: tokio::net::tcp::OwnedWriteHalf,
    mut rx: mpsc::UnboundedReceiver<Request>,
    pending: Pending,
    alive: Arc<AtomicBool>,
    stats: Arc<ServerStats>,
) {
    let mut out = Vec::new();
    while let Some(first) = rx.recv().await {
        out.clear();
        let mut next = Some(first);
        while let Some(request) = next.take() {
            unqueued(&stats, &request);
            if !alive.load(Ordering::Relaxed) {
                let _ = request
                    .reply
                    .send(Err(BackendError::Closed("dropped".into())));
            } else {
                let bytes = request.bytes.len() as u64;
                if request.counted {
                    stats.out_queue.fetch_add(1, Ordering::Relaxed);
                    stats.out_queue_bytes.fetch_add(bytes, Ordering::Relaxed);
                }
                out.extend_from_slice(&request.bytes);
                lock(&pending).push_back(Waiting {
                    frames: request.frames,
                    bytes,
                    counted: request.counted,
                    reply: request.reply,
                });
            }
            if out.len() < 64 * 1024 {
                next = rx.try_recv().ok();
            }
        }
        if out.is_empty() {
            continue;
        }
        if let Err(e) = wr.write_all(&out).await {
            alive.store(false, Ordering::Relaxed);
            fail_all(&pending, &stats, &BackendError::Closed(strerror(&e)));
            break;
        }
        if !alive.load(Ordering::Relaxed) {
            break;
        }
    }
    alive.store(false, Ordering::Relaxed);
    // Whatever is still queued fails: nobody will send it.
    rx.close();
    while let Ok(request) = rx.try_recv() {
        unqueued(&stats, &request);
        let _ = request
            .reply
            .send(Err(BackendError::Closed("closed".into())));
    }
}

/// What the reader needs to tell how its connection ended.
struct Ends {
    killed: Arc<Notify>,
    timed_out: Arc<AtomicBool>,
    alive: Arc<AtomicBool>,
    stats: Arc<ServerStats>,
}

/// Reads replies and hands each request the last of its frames.
async fn read(mut rd: tokio::net::tcp::OwnedReadHalf, pending: Pending, ends: Ends) {
    let Ends {
        killed,
        timed_out,
        alive,
        stats,
    } = ends;
    let mut buf = BytesMut::with_capacity(16 * 1024);
    let mut decoder = Decoder::new();
    // Frames read for the request at the head of the queue, and their bytes.
    let mut got: Vec<Frame> = Vec::new();
    let mut got_bytes = 0u64;
    let (error, ending) = loop {
        if !alive.load(Ordering::Relaxed) {
            break (BackendError::Closed("dropped".into()), Ending::Dropped);
        }
        let before = buf.len();
        let decoded = decoder.decode(&mut buf);
        got_bytes += (before - buf.len()) as u64;
        match decoded {
            Ok(Some(frame)) => {
                got.push(frame);
                let head = lock(&pending).front().map(|w| w.frames);
                match head {
                    Some(frames) if got.len() >= frames => {
                        let entry = lock(&pending).pop_front();
                        if let (Some(waiting), Some(last)) = (entry, got.pop()) {
                            if waiting.counted {
                                ServerStats::down(&stats.out_queue, 1);
                                ServerStats::down(&stats.out_queue_bytes, waiting.bytes);
                                stats.responses.fetch_add(1, Ordering::Relaxed);
                                stats.response_bytes.fetch_add(got_bytes, Ordering::Relaxed);
                            }
                            // A reply: the server works; failures in a row start again.
                            stats.failures.store(0, Ordering::Relaxed);
                            let _ = waiting.reply.send(Ok(last));
                        }
                        got.clear();
                        got_bytes = 0;
                    }
                    Some(_) => {}
                    None => {
                        break (
                            BackendError::Closed("a reply nobody asked for".into()),
                            Ending::Error,
                        );
                    }
                }
                continue;
            }
            Ok(None) => {}
            Err(e) => {
                break (
                    BackendError::Closed(format!("not RESP: {e}")),
                    Ending::Error,
                );
            }
        }
        tokio::select! {
            n = rd.read_buf(&mut buf) => match n {
                Ok(0) => break (BackendError::Eof, Ending::Eof),
                Ok(_) => {}
                Err(e) => break (BackendError::Closed(strerror(&e)), Ending::Error),
            },
            () = killed.notified() => break (BackendError::Closed("dropped".into()), Ending::Dropped),
        }
    };
    alive.store(false, Ordering::Relaxed);
    let (error, ending) = if timed_out.load(Ordering::Relaxed) {
        (BackendError::Timeout, Ending::Timeout)
    } else {
        (error, ending)
    };
    ServerStats::down(&stats.server_connections, 1);
    stats.ended(ending);
    fail_all(&pending, &stats, &error);
}

fn fail_all(pending: &Pending, stats: &ServerStats, why: &BackendError) {
    for waiting in lock(pending).drain(..) {
        if waiting.counted {
            ServerStats::down(&stats.out_queue, 1);
            ServerStats::down(&stats.out_queue_bytes, waiting.bytes);
        }
        let _ = waiting.reply.send(Err(why.clone()));
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
