//! The state machine of one Redis Cluster node: its node table, the slot table with migrating
//! and importing marks, its epochs, the cluster bus (handshakes, gossip, failure detection,
//! elections, manual failovers, replica migration), and the decisions a node takes from
//! them, such as where a keyed command goes.
//!
//! [`ClusterNode`] holds one node's view, built from a [`Config`] or loaded from nodes.conf
//! text; [`ClusterNode::route`] is the redirect decision of a real node (served, MOVED, ASK,
//! TRYAGAIN, CROSSSLOT, CLUSTERDOWN) with the server's error text. [`rebalance::plan`] says which
//! slots to move so that masters carry even loads, not even slot counts, and
//! [`migration::SlotMove`] moves one, a command at a time.
//!
//! It is not a server: it does no I/O, reads no clock and spawns nothing, and keeps no keys.
//! Times and randomness come in as arguments and from the seed; sockets, timers, files and the
//! keyspace are the driver's. The driver's loop: give each event to the node (a message with
//! [`ClusterNode::handle_message`], a link up or down, a timer with
//! [`ClusterNode::handle_timeout`] at [`ClusterNode::poll_timeout`]), then carry out every
//! [`Output`] it queued. Links are named by [`LinkId`]s the node hands out, so the driver
//! keys its sockets by them. Two nodes meeting, the wire a queue:
//!
//! ```
//! use std::collections::VecDeque;
//!
//! use redis_cluster_bus::Message;
//! use redis_cluster_state::{ClusterNode, Config, Duration, Instant, LinkId, Output};
//!
//! let mut nodes = [7000, 7001].map(|port| {
//!     let mut config = Config::new("127.0.0.1", port);
//!     config.seed = u64::from(port); // each its own id
//!     ClusterNode::new(config)
//! });
//! nodes[1].meet("127.0.0.1", 7000, 17000, Instant::ZERO)?;
//! // Each connection as (node, its handle) at both ends; bytes on their way.
//! let mut conns: Vec<[(usize, LinkId); 2]> = Vec::new();
//! let mut wire: VecDeque<(usize, LinkId, Vec<u8>)> = VecDeque::new();
//! let mut buf = Vec::new(); // where the node writes each message, once
//! let mut now = Instant::ZERO;
//! while now < Instant::from_millis(3_000) {
//!     for node in &mut nodes {
//!         node.handle_timeout(now);
//!     }
//!     loop {
//!         for i in 0..2 {
//!             while let Some(output) = nodes[i].poll_output(&mut buf) {
//!                 match output {
//!                     Output::Connect { link, cport, .. } => {
//!                         let peer = usize::from(cport - 17000);
//!                         let accepted = nodes[peer].handle_accepted(now);
//!                         conns.push([(i, link), (peer, accepted)]);
//!                         nodes[i].handle_connected(link, now);
//!                     }
//!                     Output::Transmit { links } => {
//!                         for link in links {
//!                             let conn = conns.iter().find(|c| c.contains(&(i, link)));
//!                             let to = conn.and_then(|c| c.iter().find(|end| end.0 != i));
//!                             if let Some(&(peer, peer_link)) = to {
//!                                 wire.push_back((peer, peer_link, buf.clone()));
//!                             }
//!                         }
//!                     }
//!                     Output::Close(link) => conns.retain(|c| !c.contains(&(i, link))),
//!                     _ => {} // nodes.conf saves, events, Pub/Sub deliveries
//!                 }
//!             }
//!         }
//!         let Some((to, link, bytes)) = wire.pop_front() else {
//!             break;
//!         };
//!         nodes[to].handle_message(link, "127.0.0.1", &Message::decode(&bytes)?, now);
//!     }
//!     let next = nodes.iter().map(ClusterNode::poll_timeout).min().unwrap_or(now);
//!     now = next.max(now + Duration::from_millis(1));
//! }
//! for node in &nodes {
//!     assert_eq!(node.nodes().filter(|n| !n.in_handshake()).count(), 2);
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Time is an [`Instant`] on the driver's clock and a [`Duration`], whole milliseconds.
//! `ARCHITECTURE.md` asks for an opaque monotonic instant; this one has a known origin,
//! because the wire carries times: gossip entries hold ping and pong times in Unix seconds
//! that the receiver compares with its own clock, and `CLUSTER NODES` prints them. A real
//! node's driver therefore passes Unix milliseconds ([`Instant::from_unix_millis`]); the
//! times a [`Node`] records (`ping_sent`, `pong_received`, …) are those same milliseconds,
//! as the wire and `CLUSTER NODES` show them. Every input takes `now`, and the node's clock
//! never goes back; the exceptions change no state that time bears on: the debugging
//! switches (`set_drop_filter`, `set_walk_every_tick`), `set_hostname` and `count_message`.
//!
//! [`ClusterNode`] is thin: it takes the inputs, dispatches them, and alone queues outputs.
//! What it knows is kept in parts with private fields and methods of their own, which
//! return what changed and send nothing: the topology (nodes, the id index, the blacklist,
//! slot owners, open slots), the cluster state and when it is due again, the link handles,
//! the table of deadlines, the election and the manual failover, and the message counters.
//!
//! Messages leave as bytes: [`ClusterNode::poll_output`] writes each into a buffer the
//! caller passes and reuses, and [`Output::Transmit`] names every link those bytes go to,
//! so a broadcast is built and encoded once. Where `ARCHITECTURE.md` has messages go to a
//! node (or to an address, for MEET), they go to links, which the node names itself.
//!
//! The source, a sentence per file: `cluster.rs` holds [`ClusterNode`], its parts, and the
//! inputs that change slots and epochs; `topology.rs` the nodes and who serves what (pure
//! data); `node.rs`, `table.rs` and `index.rs` one node's entry, the table of them and the
//! look-up by id; `health.rs` `cluster_state`; `config.rs` the options; `error.rs` why a
//! command is refused; `time.rs` time; `timers.rs` when things are due (the table of deadlines,
//! the cron's walks); `output.rs` what the driver is told ([`Output`], [`Event`], [`LinkId`]);
//! `handles.rs` the link handles given out, `link.rs` links coming and going; `send.rs` the
//! output queue and the messages built; `cron.rs` the 100 ms cron; `gossip.rs` the gossip
//! section; `bus.rs` what a message does to the tables; `failure.rs` PFAIL reports and FAIL;
//! `election.rs` an election's and a manual failover's data and rules, `failover.rs` when their
//! steps run (and replica migration); `pubsub.rs` PUBLISH across the cluster; `subcommand.rs`
//! parses the CLUSTER subcommands, `command.rs` runs them, `reply.rs` writes their replies,
//! `stats.rs` counts messages for CLUSTER INFO, and `text.rs` writes and loads CLUSTER NODES
//! and nodes.conf; `route.rs` the redirect decision; `rebalance.rs` and `migration.rs` a
//! rebalance's plan and its moves. The parts' files import nothing of `ClusterNode`, and
//! `tests/modules.rs` keeps the modules free of import cycles.
//!
//! What it is not: a server, a client or an operator's tool. The rebalance planner and
//! [`migration::SlotMove`] are the operator's side of the slot-ownership protocol this crate
//! implements (SETSLOT's marks, the steps a half-done move leaves, [`rebalance::Closing`]'s
//! reading of open slots), and they stay beside it: like the rest they do no I/O and take
//! no dependency, so a crate of their own would take nothing off anyone's build and add one
//! more version to keep in step with the commands they drive.
//!
//! The table alone answers a router's question, no bus needed:
//!
//! ```
//! use redis_cluster_state::{ClusterNode, Config, Instant, Request};
//! use redis_hash_slot::SlotRange;
//!
//! let mut node = ClusterNode::new(Config::new("127.0.0.1", 7000));
//! node.add_slots(SlotRange::ALL, Instant::ZERO)?;
//! let keys = [&b"foo"[..]];
//! assert!(node.route(&Request::new(&keys), |_| true).is_served());
//! # Ok::<(), redis_cluster_state::CommandError>(())
//! ```
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

mod bus;
mod cluster;
mod command;
mod config;
mod cron;
mod election;
mod error;
mod failover;
mod failure;
mod gossip;
mod handles;
mod health;
mod index;
mod link;
pub mod migration;
mod node;
mod output;
mod pubsub;
pub mod rebalance;
mod reply;
mod route;
mod send;
mod stats;
mod subcommand;
mod table;
mod text;
mod time;
mod timers;
mod topology;

pub use cluster::ClusterNode;
pub use config::{Config, EndpointType, is_hostname};
pub use cron::CRON_MS;
pub use election::FailoverMode;
pub use error::CommandError;
pub use node::{Node, NodeIp};
pub use output::{Event, LinkId, Output};
pub use reply::{LinkStats, Protocol, Reply};
pub use route::{Decision, Request};
pub use subcommand::{ClusterCommand, SetSlot};
pub use text::ConfError;
pub use time::{Duration, Instant};
