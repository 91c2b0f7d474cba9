//! One backend connection as the engine sees it: bytes owed to it, the replies it owes, and
//! what each of those replies is for.

use std::collections::VecDeque;
use std::time::Instant;

use bytes::BytesMut;
use redis_resp::{Decoder, encode_command};

use crate::request::CallKey;

/// What a reply on a connection is for, in the order the commands were written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Expect {
    /// A client's command (or a part of one).
    Call(CallKey),
    /// A client's command whose reply is its request's whole reply, with
    /// [`Config::raw_replies`](crate::Config::raw_replies): handed on as the node's bytes
    /// unless it is an error (then as [`Expect::Call`]).
    Whole(CallKey),
    /// A SCAN slot read's command before its last: the reply is kept for the last one.
    Piece(CallKey),
    /// A SCAN slot read's last command: its reply settles the read (`scan.rs`).
    Visit(CallKey),
    /// A transaction's MULTI or queued command: only an error matters.
    Queued(CallKey),
    /// A set-up command (AUTH, HELLO, READONLY) or ASKING: an error is reported, the reply
    /// dropped.
    Setup,
    /// The slot map: `CLUSTER SHARDS` (`true`) or `CLUSTER SLOTS`.
    Refresh { shards: bool },
    /// `CLUSTER INFO` before a slot map: the node's current epoch.
    Epoch,
    /// `INFO server`: what the cluster runs.
    Info,
}

/// The most room a connection's output buffer is given ahead of its first write: a batch
/// larger than this grows as before, and an idle connection's hint costs nothing until it
/// writes again.
pub(crate) const OUT_HINT_MAX: usize = 64 * 1024;

/// A backend connection.
#[derive(Debug)]
pub(crate) struct Conn {
    /// `host:port`, as [`Endpoint`](redis_cluster_route::Endpoint) prints it.
    pub(crate) addr: String,
    /// The host alone, for a redirect that names none.
    pub(crate) host: String,
    /// The RESP version it was switched to (2 unless `HELLO 3` was sent).
    pub(crate) proto: u8,
    /// A connection of one blocking command, closed after its reply.
    pub(crate) dedicated: bool,
    /// A client's WATCH connection, kept until its EXEC, DISCARD or UNWATCH.
    pub(crate) pinned: bool,
    /// A client's Pub/Sub connection: what it sends (after its set-up replies) is pushed to
    /// that client.
    pub(crate) subscriber: Option<crate::ClientId>,
    /// Whether the driver reported it open; bytes wait until then.
    pub(crate) open: bool,
    /// Bytes not yet handed to the driver.
    pub(crate) out: Vec<u8>,
    /// The size of the last batch handed to the driver (at most [`OUT_HINT_MAX`]): the room
    /// `out` gets at its next first write, instead of growing from nothing by doubling.
    pub(crate) out_hint: usize,
    /// Replies owed, oldest first, with when each was asked.
    pub(crate) owed: VecDeque<(Expect, Instant)>,
    /// Bytes received and not yet decoded.
    pub(crate) input: BytesMut,
    pub(crate) decoder: Decoder,
}

impl Conn {
    pub(crate) fn new(addr: String, host: String, proto: u8, dedicated: bool) -> Self {
        Self {
            addr,
            host,
            proto,
            dedicated,
            pinned: false,
            subscriber: None,
            open: false,
            out: Vec::new(),
            out_hint: 0,
            owed: VecDeque::new(),
            input: BytesMut::new(),
            decoder: Decoder::new(),
        }
    }

    /// Queues one command whose reply is for `expect`.
    pub(crate) fn write<A: AsRef<[u8]>>(&mut self, argv: &[A], expect: Expect, now: Instant) {
        self.make_room();
        encode_command(argv, &mut self.out);
        self.owed.push_back((expect, now));
    }

    /// Queues one command already encoded (a client's, as it sent it) whose reply is for
    /// `expect`.
    pub(crate) fn write_packed(&mut self, packed: &[u8], expect: Expect, now: Instant) {
        self.make_room();
        self.out.extend_from_slice(packed);
        self.owed.push_back((expect, now));
    }

    /// Gives an `out` that was handed away as much room as the last batch took.
    #[inline]
    fn make_room(&mut self) {
        if self.out.capacity() == 0 {
            self.out.reserve(self.out_hint);
        }
    }

    /// Hands the bytes owed to the driver: appended to `out`, or swapped into it when it is
    /// empty (no copy).
    pub(crate) fn take_out(&mut self, out: &mut Vec<u8>) {
        self.out_hint = self.out.len().min(OUT_HINT_MAX);
        if out.is_empty() {
            std::mem::swap(out, &mut self.out);
        } else {
            out.append(&mut self.out);
        }
    }

    /// When the oldest reply owed is late, for a timed connection.
    pub(crate) fn deadline(&self, timeout: std::time::Duration) -> Option<Instant> {
        if self.dedicated || self.pinned && self.owed.is_empty() {
            return None;
        }
        self.owed.front().map(|(_, at)| *at + timeout)
    }
}

#[cfg(test)]
mod tests {
    use super::{Conn, Expect, OUT_HINT_MAX};
    use std::time::Instant;

    #[test]
    fn a_connection_starts_its_next_batch_with_the_room_of_its_last() {
        let now = Instant::now();
        let mut conn = Conn::new("a:1".into(), "a".into(), 2, false);
        for _ in 0..16 {
            conn.write_packed(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n", Expect::Setup, now);
        }
        let batch = conn.out.len();
        let mut out = Vec::new();
        conn.take_out(&mut out);
        assert_eq!(out.len(), batch, "handed over whole");
        assert_eq!(conn.out.capacity(), 0, "handed over, not copied");
        conn.write(&[&b"PING"[..]], Expect::Setup, now);
        assert!(
            conn.out.capacity() >= batch,
            "{} < {batch}",
            conn.out.capacity()
        );
        // Appended to bytes already there, and a huge batch gives a bounded hint.
        conn.out.resize(OUT_HINT_MAX * 2, b'x');
        let mut out = b"before".to_vec();
        conn.take_out(&mut out);
        assert_eq!(out.len(), 6 + OUT_HINT_MAX * 2);
        assert!(conn.out.is_empty());
        assert_eq!(conn.out_hint, OUT_HINT_MAX);
    }
}
