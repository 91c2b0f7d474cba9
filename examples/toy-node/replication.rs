//! Replication between toy nodes: a master's write stream and a replica's copy of it.
//!
//! The stream carries the *effect* of each write rather than the command: for every key a
//! write touched, `RESTORE key <expiry> <payload> REPLACE ABSTTL` when the key exists
//! afterwards and `DEL key` when it does not (`FLUSHALL` for FLUSHALL). The replica applies
//! them as they come, so that relative expiry times, pops and increments need no
//! rewriting. The replication offset is, as on the server, the count of stream bytes: the
//! master's grows with each write while a replica is attached, the replica's with each
//! command applied, and both go to the state machine, which sends them on the bus (manual
//! failover waits for the replica's offset to reach the master's).
//!
//! A replica connects to its master's client port and sends `PSYNC ? -1`; the toy master
//! answers with a snapshot (FLUSHALL, then one RESTORE per key), then
//! `+FULLRESYNC <replid> <offset>`, then the stream. This is not the server's protocol (no
//! RDB file): a toy node replicates from toy masters only.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use redis_cluster_proto::resp::encode_command;
use redis_cluster_proto::state::Instant;
use tokio::sync::{Notify, broadcast};

use crate::db::{Db, Entry};
use crate::dump::{dump, restore};
use crate::node::Node;

/// Stream chunks a slow replica may lag behind before it is cut off (and resyncs).
const STREAM_QUEUE: usize = 4096;

/// A node's side of replication: its stream as a master.
pub(crate) struct Replication {
    /// The replication id `+FULLRESYNC` names.
    pub(crate) replid: String,
    /// Stream bytes written (a master) or applied (a replica).
    pub(crate) offset: u64,
    /// The stream, to every attached replica.
    pub(crate) stream: broadcast::Sender<Bytes>,
    /// A replica: its link to its master is synced and streaming (`master_link_status:up`).
    pub(crate) link_up: bool,
    /// A master: the replicas fed now, for ROLE, INFO and WAIT.
    pub(crate) replicas: Vec<Attached>,
    /// When the replicas were last sent a PING (ms).
    pinged: u64,
}

/// A replica fed by this master.
#[derive(Debug, Clone)]
pub(crate) struct Attached {
    /// Its feed's number.
    pub(crate) serial: u64,
    /// The address it gave (`REPLCONF listening-port`).
    pub(crate) ip: String,
    pub(crate) port: u16,
    /// The offset it last acknowledged (`REPLCONF ACK`).
    pub(crate) ack: u64,
    /// The stream offset its feed has written to its socket: what the master holds for it
    /// is the master's offset less this (`client-output-buffer-limit replica`).
    pub(crate) fed: Arc<AtomicU64>,
    /// Since when (Unix ms) that has been past the soft limit.
    pub(crate) over_soft_since: Option<u64>,
    /// Told when the replica is over its limit: its feed ends, its connection closes.
    pub(crate) cut: Arc<Notify>,
}

impl Replication {
    /// A master that becomes a replica drops its replicas, as the server does: their feeds
    /// end (their stream closes) and they connect again to whichever master they follow.
    pub(crate) fn disconnect_replicas(&mut self) {
        self.stream = broadcast::channel(STREAM_QUEUE).0;
        self.replicas.clear();
    }

    /// How many replicas acknowledged at least `offset` (WAIT).
    pub(crate) fn acked(&self, offset: u64) -> usize {
        self.replicas.iter().filter(|r| r.ack >= offset).count()
    }
}

impl Replication {
    pub(crate) fn new(seed: u64) -> Self {
        let mut state = seed | 1;
        let replid = (0..40)
            .map(|_| {
                // xorshift: the id only has to differ between nodes and runs
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                char::from(b"0123456789abcdef"[(state % 16) as usize])
            })
            .collect();
        Self {
            replid,
            offset: 0,
            stream: broadcast::channel(STREAM_QUEUE).0,
            link_up: false,
            replicas: Vec::new(),
            pinged: 0,
        }
    }

    /// Whether any replica is attached (the stream is only written then).
    pub(crate) fn attached(&self) -> bool {
        self.stream.receiver_count() > 0
    }
}

/// The stream's record of `key` as it is now.
fn record(db: &mut Db, key: &[u8], now: u64, out: &mut Vec<u8>) {
    match db.get(key, now) {
        Some(Entry { value, expires }) => {
            let expires = expires.unwrap_or(0).to_string();
            let payload = dump(value);
            encode_command(
                &[
                    &b"RESTORE"[..],
                    key,
                    expires.as_bytes(),
                    &payload,
                    b"REPLACE",
                    b"ABSTTL",
                ],
                out,
            );
        }
        None => encode_command(&[&b"DEL"[..], key], out),
    }
}

/// After a write on a master: the new state of `keys` (or a FLUSHALL) to the replicas and
/// to the append-only file.
pub(crate) fn propagate(node: &mut Node, keys: &[Vec<u8>], flushall: bool, now: u64) {
    if !node.replication.attached() && node.aof.is_none() {
        return;
    }
    let mut out = Vec::new();
    if flushall {
        encode_command(&["FLUSHALL"], &mut out);
    }
    for key in keys {
        record(&mut node.db, key, now, &mut out);
    }
    if out.is_empty() {
        return;
    }
    if let Some(aof) = node.aof.as_mut() {
        if let Err(e) = aof.append(&out) {
            let text = format!("Error writing to the AOF file: {e}");
            node.log.write(crate::log::Level::Warning, &text);
        }
    }
    if !node.replication.attached() {
        return;
    }
    node.replication.offset += out.len() as u64;
    let _ = node.replication.stream.send(Bytes::from(out));
    cut_slow_replicas(node);
    let (id, offset) = (node.cluster.myself().id, node.replication.offset);
    node.cluster
        .set_replication_offset(&id, offset, Instant::from_unix_millis(now));
}

/// `client-output-buffer-limit replica`: a replica whose feed lags the stream by more than
/// the hard limit, or by more than the soft one for longer than its seconds, is cut off (and
/// the server's warning logged), as the server closes it; it then syncs again.
fn cut_slow_replicas(node: &mut Node) {
    let limit = node.settings.output_limits().replica;
    if limit.hard == 0 && limit.soft == 0 {
        return;
    }
    let (offset, now) = (node.replication.offset, crate::node::now());
    let mut cut = Vec::new();
    for replica in &mut node.replication.replicas {
        let held = offset.saturating_sub(replica.fed.load(Ordering::Relaxed));
        if limit.exceeded(held, &mut replica.over_soft_since, now) {
            replica.cut.notify_one();
            cut.push(replica.serial);
        }
    }
    for serial in cut {
        crate::node::log_output_limit(node, serial, true);
    }
}

/// Every `repl-ping-replica-period` seconds a master sends its replicas a PING in the
/// stream, as the server does: their offsets move on (a replica at offset 0 is "loading"
/// in CLUSTER SHARDS) and they know the link lives.
pub(crate) fn ping_replicas(node: &mut Node, now: u64) {
    let period = u64::try_from(node.settings.number("repl-ping-replica-period")).unwrap_or(10);
    if !node.replication.attached() || now < node.replication.pinged + period.max(1) * 1000 {
        return;
    }
    node.replication.pinged = now;
    let mut out = Vec::new();
    encode_command(&["PING"], &mut out);
    node.replication.offset += out.len() as u64;
    let _ = node.replication.stream.send(Bytes::from(out));
    cut_slow_replicas(node);
    let (id, offset) = (node.cluster.myself().id, node.replication.offset);
    node.cluster
        .set_replication_offset(&id, offset, Instant::from_unix_millis(now));
}

/// The whole keyspace as stream records (RESTORE per key), with no FLUSHALL: an AOF
/// rewrite's content.
pub(crate) fn records(node: &mut Node, now: u64) -> Vec<u8> {
    let mut out = Vec::new();
    let keys: Vec<Vec<u8>> = node.db.keys(now).cloned().collect();
    for key in &keys {
        record(&mut node.db, key, now, &mut out);
    }
    out
}

/// A full resync for a new replica: the snapshot to send first (FLUSHALL and every key),
/// then `+FULLRESYNC`, and the stream from that point on.
pub(crate) fn attach(node: &mut Node, now: u64) -> (Vec<u8>, broadcast::Receiver<Bytes>) {
    let stream = node.replication.stream.subscribe();
    let mut snapshot = Vec::new();
    encode_command(&["FLUSHALL"], &mut snapshot);
    snapshot.extend(records(node, now));
    let line = format!(
        "+FULLRESYNC {} {}\r\n",
        node.replication.replid, node.replication.offset
    );
    snapshot.extend_from_slice(line.as_bytes());
    (snapshot, stream)
}

/// On a replica: applies one command of its master's stream to the keyspace. `false` for a
/// command that is not one the stream carries.
pub(crate) fn apply(db: &mut Db, args: &[Bytes], now: u64) -> bool {
    match args {
        [name] if name.eq_ignore_ascii_case(b"FLUSHALL") => db.clear(),
        [name] if name.eq_ignore_ascii_case(b"PING") => {}
        [name, key] if name.eq_ignore_ascii_case(b"DEL") => {
            db.remove(key);
        }
        [name, key, expires, payload, ..] if name.eq_ignore_ascii_case(b"RESTORE") => {
            let Ok(value) = restore(payload) else {
                return false;
            };
            let expires = std::str::from_utf8(expires)
                .ok()
                .and_then(|e| e.parse::<u64>().ok())
                .filter(|&at| at != 0);
            db.remove(key);
            if expires.is_none_or(|at| at > now) {
                db.insert(key, Entry { value, expires });
            }
        }
        _ => return false,
    }
    true
}
