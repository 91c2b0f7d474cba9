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
            owed: VecDeque::new(),
            input: BytesMut::new(),
            decoder: Decoder::new(),
        }
    }

    /// Queues one command whose reply is for `expect`.
    pub(crate) fn write<A: AsRef<[u8]>>(&mut self, argv: &[A], expect: Expect, now: Instant) {
        encode_command(argv, &mut self.out);
        self.owed.push_back((expect, now));
    }

    /// Queues one command already encoded (a client's, as it sent it) whose reply is for
    /// `expect`.
    pub(crate) fn write_packed(&mut self, packed: &[u8], expect: Expect, now: Instant) {
        self.out.extend_from_slice(packed);
        self.owed.push_back((expect, now));
    }

    /// When the oldest reply owed is late, for a timed connection.
    pub(crate) fn deadline(&self, timeout: std::time::Duration) -> Option<Instant> {
        if self.dedicated || self.pinned && self.owed.is_empty() {
            return None;
        }
        self.owed.front().map(|(_, at)| *at + timeout)
    }
}
