//! The engine of a Redis Cluster client or proxy, without I/O.
//!
//! [`Engine`] takes a client's commands and gives back, for each, the reply one standalone
//! server would have sent, in the order the client asked. In between it does what every
//! cluster client writes again: it keeps the slot map (`CLUSTER SHARDS`, or `CLUSTER SLOTS` on
//! a node without it, reloaded after a MOVED, a lost connection or CLUSTERDOWN, and on a
//! period; never from a node whose `cluster_current_epoch` is behind one already seen),
//! sends each command to the node of its slot on one pipelined connection per node, follows
//! MOVED (the map is updated, the command sent again) and ASK (ASKING and the command,
//! once, the map untouched), retries TRYAGAIN, CLUSTERDOWN, LOADING, MASTERDOWN and lost
//! connections at deadlines it computes, a bounded number of times, then gives the last error.
//! Multi-key commands over several slots are split per slot (a node refuses keys of two slots
//! in one command even when it owns both, so the parts for one node are batched on its
//! connection instead) and merged by the command's own response policy from
//! `redis-cluster-route`'s table, which the engine picks from what the cluster runs
//! (`INFO server`). All-shards commands fan out; SCAN walks the slots with one cursor;
//! blocking commands get a connection of their own; `HELLO 2` / `HELLO 3` switch a client's
//! RESP version, and its commands then travel on backend connections of that version.
//!
//! Later commands of a client's slot never overtake earlier ones: a command is sent only when
//! every earlier unanswered command of that slot is on the same connection, and none of them
//! can meet TRYAGAIN (a multi-key command) or blocks.
//!
//! # What it is not
//! No sockets, no clock, no threads, no runtime: the caller opens the connections the engine
//! names ([`ConnId`]), writes the bytes it hands out, feeds back what backends send, and tells
//! it the time. A tokio proxy, a blocking `std::net` client and a test harness drive the same
//! code. It does not authenticate clients.
//!
//! # SCAN
//! A node's own SCAN cannot give each key once while slots move between nodes (a key moving
//! to a node already scanned is never seen; one moving the other way is seen twice), so a
//! cluster's SCAN cursor is a slot number, and each call reads whole slots with `CLUSTER
//! GETKEYSINSLOT` on the slot's master, between two `EXISTS` of a key of that slot that
//! nobody has: the owner of a stable slot answers `0`, a node migrating it `ASK`, one that
//! does not own it `MOVED`. Unless both say `0`, the slot is read again where they point
//! (after `ASKING` for an ASK) and its keys are the union of the reads. A key present for
//! the whole scan is given exactly once, reshards or not; a call starts with COUNT slots and
//! reads more while it has fewer than COUNT keys (at most 16 × COUNT slots, at least 256).
//! MATCH is applied by the engine, TYPE by one `TYPE` per key found; a slot no master
//! serves is passed over (no key of it can be reached). A slot holding
//! [`Config::scan_slot_keys`] keys or more makes SCAN answer an error rather than a part of
//! the slot. With [`Config::fixed_map`] (standalone masters, which have no slots to read)
//! SCAN walks the masters one after the other with their own cursors.
//!
//! # Pub/Sub
//! SUBSCRIBE and PSUBSCRIBE go on a connection of the client's own to one master (PUBLISH
//! reaches every node), SSUBSCRIBE on one per node of the channels' slots; what they send
//! comes out as [`Output::Push`]. The engine remembers the subscriptions: after a lost
//! connection, or an `sunsubscribe` the client did not ask for (its slot moved), it
//! subscribes again through the current map and drops the confirmations. A RESP2 client in
//! Pub/Sub mode gets the server's error for other commands.
//!
//! # Transactions
//! MULTI is queued in the engine (commands the server would refuse are answered as it does,
//! and EXEC then answers EXECABORT); EXEC sends MULTI, the commands and EXEC in one write to
//! the node of their one slot (with masters the caller names, which check no slots: to the
//! one master that holds all their keys), so that nothing of another client comes between
//! them on a shared connection; a queued command's MOVED sends the whole transaction again
//! where the slot is. WATCH opens a connection of the client's own to the watched keys' node, kept
//! until EXEC, DISCARD or UNWATCH; a lost WATCH connection makes the next EXEC fail as a
//! touched key does (a null reply).
//!
//! # Backpressure
//! With [`Config::client_output_limit`] the engine counts the bytes of each client's replies
//! and pushes it handed out; the driver reports what it wrote with
//! [`Engine::handle_written`]. Past the limit comes [`Output::Pause`] (stop reading that
//! client's commands), and [`Output::Resume`] once half is written. [`Engine::pending`]
//! gives a count bound as well.
//!
//! # Standalone masters
//! With [`Config::fixed_map`] the engine serves masters the caller names, sharded by slot
//! range (fixed servers, or Sentinel-managed groups), and asks the nodes nothing about slots.
//! [`Engine::set_slot_map`] moves a range to a new master (a Sentinel switch: what is in
//! flight finishes on the old one), [`Engine::hold`] keeps a range's commands unsent while a
//! failover is under way and [`Engine::release`] sends them on; a hold that ends first
//! answers `MASTERDOWN`. A demoted master's `READONLY` is retried as `MASTERDOWN` is.
//! [`sentinel::Follower`] says when to do which.
//!
//! # The run loop
//! Inputs are `handle_*` calls, each with `now`; after each, drain [`Engine::poll_transmit`],
//! [`Engine::poll_output`], then sleep until [`Engine::poll_timeout`] or the next input. Here
//! a one-node "cluster" is played by hand:
//!
//! ```
//! use std::time::Instant;
//! use bytes::Bytes;
//! use redis_cluster_client::{Config, Engine, Output};
//! use redis_cluster_route::Endpoint;
//! use redis_resp::Frame;
//!
//! let seed = Endpoint { host: "127.0.0.1".into(), port: 7000, ..Endpoint::default() };
//! let now = Instant::now();
//! let mut engine = Engine::new(Config::new(vec![seed]), now);
//! let client = engine.open_client();
//! engine.handle_request(now, client, vec![Bytes::from("GET"), Bytes::from("foo")]);
//!
//! // The driver's loop, with a scripted node instead of a socket.
//! let mut wire = Vec::new();
//! let mut replies = Vec::new();
//! loop {
//!     while let Some(output) = engine.poll_output() {
//!         match output {
//!             // A real driver connects a socket here.
//!             Output::Connect { conn, .. } => engine.handle_connected(now, conn),
//!             Output::Reply { frame, .. } => replies.push(frame),
//!             _ => {}
//!         }
//!     }
//!     let Some(conn) = engine.poll_transmit(&mut wire) else { break };
//!     // The node answers INFO server, CLUSTER INFO, CLUSTER SHARDS, then the GET.
//!     let answer: &[u8] = if wire.windows(6).any(|w| w == b"SHARDS") {
//!         b"$32\r\n# Server\r\nredis_version:7.0.15\r\n\r\n\
//!           $43\r\ncluster_state:ok\r\ncluster_current_epoch:1\r\n\r\n\
//!           *1\r\n*4\r\n$5\r\nslots\r\n*2\r\n:0\r\n:16383\r\n$5\r\nnodes\r\n*1\r\n\
//!           *6\r\n$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n$4\r\nport\r\n:7000\r\n$4\r\nrole\r\n$6\r\nmaster\r\n"
//!     } else {
//!         b"$3\r\nbar\r\n"
//!     };
//!     wire.clear();
//!     engine.handle_data(now, conn, answer);
//! }
//! assert_eq!(replies, [Frame::BulkString(Bytes::from("bar"))]);
//! ```
//!
//! The two central types are [`Engine`] (inputs) and [`Output`] (what it asks of its driver).
#![forbid(unsafe_code)]

mod answer;
mod config;
mod conn;
mod dispatch;
mod engine;
mod fixed;
mod hello;
mod ids;
mod pubsub;
mod refresh;
mod request;
mod scan;
pub mod sentinel;
mod slab;
mod transaction;
#[cfg(feature = "twemproxy")]
pub mod twemproxy;

use bytes::Bytes;
use redis_cluster_route::Endpoint;
use redis_resp::Frame;

pub use config::Config;
pub use engine::{Counters, Engine};

/// A fast hasher for maps keyed by the engine's ids ([`ConnId`], [`ClientId`], [`RequestId`]),
/// which the engine hands out in sequence: std's default SipHash defends against keys an
/// attacker chooses, which these are not, and cost several percent of a proxy's CPU here.
///
/// ```
/// use std::collections::HashMap;
/// use redis_cluster_client::{ConnId, IdHasher};
///
/// let mut writers: HashMap<ConnId, &str, IdHasher> = HashMap::default();
/// writers.insert(ConnId(7), "127.0.0.1:7000");
/// assert_eq!(writers.get(&ConnId(7)), Some(&"127.0.0.1:7000"));
/// ```
pub type IdHasher = std::hash::BuildHasherDefault<ids::Mix>;

/// A backend connection, named by the engine when it asks for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnId(pub u64);

/// A client of the engine (a proxy's client connection, or a library's user).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClientId(pub u64);

/// One request of a client.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RequestId(pub u64);

/// What the engine asks of its driver, drained with [`Engine::poll_output`].
///
/// Every reply passes through an `Output`, so it is kept small (56 bytes on a 64-bit
/// target): what is rare and large, a connection's endpoint and an event, is boxed.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Output {
    /// Open a TCP connection to this node under this name, then report
    /// [`Engine::handle_connected`] or [`Engine::handle_closed`].
    Connect {
        /// The name the engine gives it.
        conn: ConnId,
        /// Where.
        endpoint: Box<Endpoint>,
    },
    /// Close this connection (the engine forgot it already: report nothing more about it).
    Close {
        /// Which.
        conn: ConnId,
    },
    /// The reply to a request, after those of every earlier request of its client.
    Reply {
        /// Whose.
        client: ClientId,
        /// Which.
        request: RequestId,
        /// The reply, in the client's RESP version.
        frame: Frame,
    },
    /// The reply to a request as the node sent it (or, for a read split over nodes, an array
    /// header and each key's value as its node sent it), one whole RESP value in the
    /// client's version, with [`Config::raw_replies`] (see there for which replies come so),
    /// after those of every earlier request of its client.
    Raw {
        /// Whose.
        client: ClientId,
        /// Which.
        request: RequestId,
        /// The reply's bytes.
        bytes: Bytes,
    },
    /// A request with no reply of its own is done (SUBSCRIBE and the like: what answers it
    /// comes as [`Output::Push`]); it keeps its place in the client's order as a reply does.
    Answered {
        /// Whose.
        client: ClientId,
        /// Which.
        request: RequestId,
    },
    /// A frame for a client outside any reply: a Pub/Sub message or confirmation (a RESP3
    /// push, or a RESP2 array), after the replies to the client's earlier requests.
    Push {
        /// Whose.
        client: ClientId,
        /// The frame, as the node sent it.
        frame: Frame,
    },
    /// Stop reading this client's commands: it is owed more than
    /// [`Config::client_output_limit`] bytes of replies it has not taken (the driver reports
    /// what it writes with [`Engine::handle_written`]).
    Pause {
        /// Whose.
        client: ClientId,
    },
    /// Read this client's commands again: half of what paused it was written.
    Resume {
        /// Whose.
        client: ClientId,
    },
    /// Something the driver may log or count.
    Event(Box<Event>),
}

/// What happened, for logs and counters.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// A new slot map is in use.
    SlotMapChanged {
        /// Masters serving slots.
        masters: usize,
        /// Slots with a master.
        assigned: usize,
    },
    /// No node asked in a whole round gave a slot map.
    RefreshFailed {
        /// The last node's reason.
        reason: String,
    },
    /// A connection failed or was dropped; what it owed is retried.
    ConnectionLost {
        /// The node.
        endpoint: Endpoint,
        /// Why.
        reason: String,
    },
    /// A node refused a set-up command (AUTH, HELLO, READONLY).
    SetupRefused {
        /// The node.
        endpoint: Endpoint,
        /// Its error.
        error: String,
    },
    /// The cluster said what it runs; the command table follows.
    ServerIdentified {
        /// `redis` or `valkey`.
        name: String,
        /// Its version.
        version: String,
        /// The table now in use.
        table: &'static str,
    },
}

/// An error reply, as a node would send it.
pub(crate) fn error_frame(text: &str) -> Frame {
    Frame::SimpleError(Bytes::copy_from_slice(text.as_bytes()))
}
