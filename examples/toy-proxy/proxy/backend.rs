//! One pipelined connection to a server: requests go out in the order they are queued, and
//! replies come back to them in that order. Queuing is synchronous, so a client's commands
//! reach a server in the order the client sent them.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::BytesMut;
use redis_cluster_proto::resp::{Decoder, Frame};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{Notify, mpsc, oneshot};

/// Why a request got no reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum BackendError {
    /// The connection could not be opened.
    Connect(String),
    /// The connection closed, failed, or sent something that is not RESP.
    Closed(String),
    /// No reply within the pool's timeout: the connection was dropped.
    Timeout,
}

impl std::fmt::Display for BackendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Connect(e) => write!(f, "cannot connect to the server: {e}"),
            Self::Closed(e) => write!(f, "connection to the server lost: {e}"),
            Self::Timeout => f.write_str("the server did not answer in time"),
        }
    }
}

/// The reply to one request: the last of the frames it asked for.
pub(crate) type Reply = Result<Frame, BackendError>;

struct Request {
    bytes: Vec<u8>,
    /// How many frames the request produces (ASKING + a command: 2); the last is the reply.
    frames: usize,
    reply: oneshot::Sender<Reply>,
}

/// A connection to one server.
pub(crate) struct Backend {
    /// `host:port`.
    pub(crate) addr: String,
    tx: mpsc::UnboundedSender<Request>,
    alive: Arc<AtomicBool>,
    killed: Arc<Notify>,
    timeout: Duration,
}

impl Backend {
    /// Opens a connection within `timeout`.
    pub(crate) async fn connect(addr: &str, timeout: Duration) -> Result<Arc<Self>, BackendError> {
        let stream = tokio::time::timeout(timeout, TcpStream::connect(addr))
            .await
            .map_err(|_| BackendError::Connect(format!("{addr}: timed out")))?
            .map_err(|e| BackendError::Connect(format!("{addr}: {e}")))?;
        let _ = stream.set_nodelay(true);
        let (rd, wr) = stream.into_split();
        let (tx, rx) = mpsc::unbounded_channel();
        let alive = Arc::new(AtomicBool::new(true));
        let pending = Arc::new(Mutex::new(VecDeque::new()));
        let killed = Arc::new(Notify::new());
        tokio::spawn(write(wr, rx, pending.clone(), alive.clone()));
        tokio::spawn(read(rd, pending, killed.clone(), alive.clone()));
        Ok(Arc::new(Self {
            addr: addr.to_string(),
            tx,
            alive,
            killed,
            timeout,
        }))
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
        let (reply, rx) = oneshot::channel();
        let request = Request {
            bytes,
            frames,
            reply,
        };
        if let Err(mpsc::error::SendError(request)) = self.tx.send(request) {
            let _ = request
                .reply
                .send(Err(BackendError::Closed("connection closed".into())));
        }
        rx
    }

    /// Waits for a reply queued by [`Backend::send`], at most the pool's timeout; on a
    /// timeout the connection is dropped (what follows on it can no longer be matched).
    pub(crate) async fn wait(&self, rx: oneshot::Receiver<Reply>) -> Reply {
        match tokio::time::timeout(self.timeout, rx).await {
            Ok(Ok(reply)) => reply,
            Ok(Err(_)) => Err(BackendError::Closed("connection closed".into())),
            Err(_) => {
                self.kill();
                Err(BackendError::Timeout)
            }
        }
    }

    /// [`Backend::send`] then [`Backend::wait`].
    pub(crate) async fn call(&self, bytes: Vec<u8>, frames: usize) -> Reply {
        let rx = self.send(bytes, frames);
        self.wait(rx).await
    }
}

type Pending = Arc<Mutex<VecDeque<(usize, oneshot::Sender<Reply>)>>>;

/// Sends queued requests, several per write when they queue up faster than the socket
/// takes them. Each request joins the pending queue before its bytes go out.
async fn write(
    mut wr: tokio::net::tcp::OwnedWriteHalf,
    mut rx: mpsc::UnboundedReceiver<Request>,
    pending: Pending,
    alive: Arc<AtomicBool>,
) {
    let mut out = Vec::new();
    while let Some(first) = rx.recv().await {
        out.clear();
        let mut next = Some(first);
        while let Some(request) = next.take() {
            if !alive.load(Ordering::Relaxed) {
                let _ = request
                    .reply
                    .send(Err(BackendError::Closed("dropped".into())));
            } else {
                out.extend_from_slice(&request.bytes);
                lock(&pending).push_back((request.frames, request.reply));
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
            fail_all(&pending, &format!("write: {e}"));
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
        let _ = request
            .reply
            .send(Err(BackendError::Closed("closed".into())));
    }
}

/// Reads replies and hands each request the last of its frames.
async fn read(
    mut rd: tokio::net::tcp::OwnedReadHalf,
    pending: Pending,
    killed: Arc<Notify>,
    alive: Arc<AtomicBool>,
) {
    let mut buf = BytesMut::with_capacity(16 * 1024);
    let mut decoder = Decoder::new();
    // Frames read for the request at the head of the queue.
    let mut got: Vec<Frame> = Vec::new();
    let error = loop {
        if !alive.load(Ordering::Relaxed) {
            break "dropped".to_string();
        }
        match decoder.decode(&mut buf) {
            Ok(Some(frame)) => {
                got.push(frame);
                let head = lock(&pending).front().map(|(frames, _)| *frames);
                match head {
                    Some(frames) if got.len() >= frames => {
                        let entry = lock(&pending).pop_front();
                        if let (Some((_, reply)), Some(last)) = (entry, got.pop()) {
                            let _ = reply.send(Ok(last));
                        }
                        got.clear();
                    }
                    Some(_) => {}
                    None => break "a reply nobody asked for".to_string(),
                }
                continue;
            }
            Ok(None) => {}
            Err(e) => break format!("not RESP: {e}"),
        }
        tokio::select! {
            n = rd.read_buf(&mut buf) => match n {
                Ok(0) => break "closed by the server".to_string(),
                Ok(_) => {}
                Err(e) => break format!("read: {e}"),
            },
            () = killed.notified() => break "dropped".to_string(),
        }
    };
    alive.store(false, Ordering::Relaxed);
    fail_all(&pending, &error);
}

fn fail_all(pending: &Pending, why: &str) {
    for (_, reply) in lock(pending).drain(..) {
        let _ = reply.send(Err(BackendError::Closed(why.to_string())));
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
