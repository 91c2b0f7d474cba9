//! One client connection: commands are read and dispatched in order (each queued on its
//! node's connection at once), and a writer task waits for the replies in that same order,
//! following redirects, so a pipelining client gets its replies in the order it asked.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use redis_cluster_proto::resp::{Decoder, Frame, encode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

use super::cluster::{Argv, Pending, Pool};

enum Item {
    Reply(Pending, Instant),
    /// Close the connection after the replies before it.
    Close,
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
    /// Inside MULTI: the commands queued, and whether one was refused (EXECABORT).
    multi: Option<(Vec<Argv>, bool)>,
}

/// Serves one client until it quits, closes, or sends something that is not RESP.
pub(crate) async fn serve(stream: TcpStream, pool: Arc<Pool>) {
    let stats = pool.stats.clone();
    stats.connections.fetch_add(1, Ordering::Relaxed);
    stats.connected.fetch_add(1, Ordering::Relaxed);
    let _ = stream.set_nodelay(true);
    let (mut rd, wr) = stream.into_split();
    let (tx, rx) = mpsc::unbounded_channel();
    let writer = tokio::spawn(write_replies(wr, rx, pool.clone()));
    let mut buf = BytesMut::with_capacity(16 * 1024);
    let mut decoder = Decoder::new();
    let mut session = Session::default();
    'read: loop {
        loop {
            match decoder.decode_command(&mut buf) {
                Ok(Some(command)) => {
                    let started = Instant::now();
                    stats.commands.fetch_add(1, Ordering::Relaxed);
                    let argv: Argv = (0..command.len())
                        .filter_map(|i| command.arg_bytes(i))
                        .collect();
                    let (pending, close) = handle(&pool, &mut session, argv).await;
                    if tx.send(Item::Reply(pending, started)).is_err() {
                        break 'read;
                    }
                    if close {
                        let _ = tx.send(Item::Close);
                        break 'read;
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    // Garbage: an error, then the connection closes; nothing else is
                    // affected.
                    let text = format!("ERR Protocol error: {e}");
                    let _ = tx.send(Item::Reply(Pending::Ready(error(&text)), Instant::now()));
                    let _ = tx.send(Item::Close);
                    break 'read;
                }
            }
        }
        match rd.read_buf(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
    }
    drop(tx);
    let _ = writer.await;
    stats.connected.fetch_sub(1, Ordering::Relaxed);
}

/// Commands the proxy answers itself, transactions, and everything else routed.
async fn handle(pool: &Pool, session: &mut Session, argv: Argv) -> (Pending, bool) {
    let name = argv
        .first()
        .map(|n| n.to_ascii_uppercase())
        .unwrap_or_default();
    let ready = |frame| (Pending::Ready(frame), false);
    if let Some((queued, aborted)) = session.multi.as_mut() {
        match name.as_slice() {
            b"EXEC" => {
                let (queued, aborted) = session.multi.take().unwrap_or_default();
                if aborted {
                    return ready(error(
                        "EXECABORT Transaction discarded because of previous errors.",
                    ));
                }
                return (pool.transaction(&queued), false);
            }
            b"DISCARD" => {
                session.multi = None;
                return ready(ok());
            }
            b"MULTI" => return ready(error("ERR MULTI calls can not be nested")),
            b"WATCH" => return ready(error("ERR WATCH inside MULTI is not allowed")),
            _ => {
                queued.push(argv);
                let _ = aborted;
                return ready(Frame::SimpleString(Bytes::from_static(b"QUEUED")));
            }
        }
    }
    match name.as_slice() {
        b"PING" => match argv.get(1) {
            None => ready(Frame::SimpleString(Bytes::from_static(b"PONG"))),
            Some(text) if argv.len() == 2 => ready(Frame::BulkString(text.clone())),
            _ => ready(error("ERR wrong number of arguments for 'ping' command")),
        },
        b"QUIT" => (Pending::Ready(ok()), true),
        b"SELECT" => match argv.get(1).map(|db| db.as_ref()) {
            Some(b"0") => ready(ok()),
            _ => ready(error("ERR SELECT is not allowed in cluster mode")),
        },
        b"INFO" => {
            let section = argv.get(1).map(|s| s.to_ascii_lowercase());
            match section.as_deref() {
                None | Some(b"proxy") | Some(b"all") | Some(b"default") | Some(b"everything") => {
                    let mut text = pool.stats.info(&pool.name);
                    if let Some(groups) = &pool.sentinel {
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
                    ready(Frame::BulkString(Bytes::from(text)))
                }
                // Other sections: a node's own answer.
                Some(_) => (pool.dispatch(argv).await, false),
            }
        }
        b"MULTI" => {
            session.multi = Some((Vec::new(), false));
            ready(ok())
        }
        b"EXEC" => ready(error("ERR EXEC without MULTI")),
        b"DISCARD" => ready(error("ERR DISCARD without MULTI")),
        b"WATCH" | b"UNWATCH" => ready(error(
            "ERR WATCH is not supported by the proxy: its keys' node is not pinned yet",
        )),
        b"CLIENT" => {
            let sub = argv.get(1).map(|s| s.to_ascii_uppercase());
            match sub.as_deref() {
                Some(b"SETNAME") | Some(b"SETINFO") => ready(ok()),
                _ => ready(error("ERR CLIENT is not supported by the proxy")),
            }
        }
        b"AUTH" => ready(error(
            "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?",
        )),
        b"HELLO" => ready(error("NOPROTO the proxy speaks RESP2 only")),
        b"SUBSCRIBE" | b"PSUBSCRIBE" | b"SSUBSCRIBE" | b"UNSUBSCRIBE" | b"PUNSUBSCRIBE"
        | b"SUNSUBSCRIBE" | b"MONITOR" => ready(error(&format!(
            "ERR {} is not supported by the proxy yet",
            String::from_utf8_lossy(&name)
        ))),
        _ => (pool.dispatch(argv).await, false),
    }
}

/// Writes the replies in request order, as many per write as are ready.
async fn write_replies(
    mut wr: tokio::net::tcp::OwnedWriteHalf,
    mut rx: mpsc::UnboundedReceiver<Item>,
    pool: Arc<Pool>,
) {
    let stats = pool.stats.clone();
    let mut out = Vec::with_capacity(16 * 1024);
    while let Some(item) = rx.recv().await {
        let mut next = Some(item);
        let mut close = false;
        while let Some(item) = next.take() {
            match item {
                Item::Reply(pending, started) => {
                    let frame = pool.resolve(pending).await;
                    if matches!(frame, Frame::SimpleError(_)) {
                        stats.errors.fetch_add(1, Ordering::Relaxed);
                    }
                    let took = started.elapsed().as_micros() as u64;
                    stats.latency_us.fetch_add(took, Ordering::Relaxed);
                    encode(&frame, &mut out);
                }
                Item::Close => close = true,
            }
            if !close && out.len() < 64 * 1024 {
                next = rx.try_recv().ok();
            }
        }
        if wr.write_all(&out).await.is_err() {
            return;
        }
        out.clear();
        if close {
            let _ = wr.shutdown().await;
            return;
        }
    }
}
