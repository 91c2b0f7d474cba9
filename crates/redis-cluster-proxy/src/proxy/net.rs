//! A backend connection as tasks, for the drivers of the sans-IO state machines (the
//! cluster engine, the Sentinel follower): connect within a timeout, then a writer task
//! fed by a channel and a reader that reports what it reads.

use std::time::Duration;

use redis_cluster_proto::client::ConnId;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

use super::backend::strerror;

/// What a connection's tasks report.
pub(crate) enum Wire {
    /// Open: bytes for it go to this sender.
    Connected(ConnId, mpsc::UnboundedSender<Vec<u8>>),
    /// Bytes it read.
    Data(ConnId, Vec<u8>),
    /// It failed or closed, and why.
    Closed(ConnId, String),
}

/// Opens `addr` in the background and reports on `tx` (wrapped by `wrap`); the handle
/// aborts the reader (dropping the writer's sender closes the writing half).
pub(crate) fn connect<M: Send + 'static>(
    conn: ConnId,
    addr: String,
    timeout: Duration,
    tx: mpsc::UnboundedSender<M>,
    wrap: fn(Wire) -> M,
) -> tokio::task::AbortHandle {
    let reader = tokio::spawn(async move {
        let report = |wire| tx.send(wrap(wire)).is_ok();
        let socket = match tokio::time::timeout(timeout, TcpStream::connect(&addr)).await {
            Ok(Ok(socket)) => socket,
            Ok(Err(e)) => {
                report(Wire::Closed(conn, strerror(&e)));
                return;
            }
            Err(_) => {
                report(Wire::Closed(conn, "Connection timed out".into()));
                return;
            }
        };
        let _ = socket.set_nodelay(true);
        let (mut rd, mut wr) = socket.into_split();
        let (writer, mut writes) = mpsc::unbounded_channel::<Vec<u8>>();
        let closing = tx.clone();
        tokio::spawn(async move {
            while let Some(bytes) = writes.recv().await {
                if let Err(e) = wr.write_all(&bytes).await {
                    let _ = closing.send(wrap(Wire::Closed(conn, strerror(&e))));
                    return;
                }
            }
            let _ = wr.shutdown().await;
        });
        if !report(Wire::Connected(conn, writer)) {
            return;
        }
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let wire = match rd.read(&mut buf).await {
                Ok(0) => Wire::Closed(conn, "Connection closed by the server".into()),
                Ok(n) => Wire::Data(conn, buf[..n].to_vec()),
                Err(e) => Wire::Closed(conn, strerror(&e)),
            };
            let last = matches!(wire, Wire::Closed(..));
            if !report(wire) || last {
                return;
            }
        }
    });
    reader.abort_handle()
}
