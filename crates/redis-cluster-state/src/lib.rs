//! The state machine of one Redis Cluster node: its node table, the slot table with migrating
//! and importing marks, its epochs, and the decisions a node takes from them, such as where a
//! keyed command goes.
//!
//! [`ClusterNode`] holds one node's view, built from a [`Config`] or loaded from nodes.conf
//! text; [`ClusterNode::route`] is the redirect decision of a real node (served, MOVED, ASK,
//! TRYAGAIN, CROSSSLOT, CLUSTERDOWN) with the server's error text. [`rebalance::plan`] says which
//! slots to move so that masters carry even loads, not even slot counts, and
//! [`migration::SlotMove`] moves one, a command at a time. It does no I/O, reads no
//! clock and spawns nothing: times and randomness come in as arguments and from the seed.
//!
//! Time is an [`Instant`] on the driver's clock and a [`Duration`], whole milliseconds.
//! `ARCHITECTURE.md` asks for an opaque monotonic instant; this one has a known origin,
//! because the wire carries times: gossip entries hold ping and pong times in Unix seconds
//! that the receiver compares with its own clock, and `CLUSTER NODES` prints them. A real
//! node's driver therefore passes Unix milliseconds ([`Instant::from_unix_millis`]); the
//! times a [`Node`] records (`ping_sent`, `pong_received`, …) are those same milliseconds,
//! as the wire and `CLUSTER NODES` show them.
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
mod failover;
mod failure;
mod index;
pub mod migration;
mod node;
mod pubsub;
pub mod rebalance;
mod reply;
mod route;
mod table;
mod text;
mod time;
mod timers;

pub use bus::{CRON_MS, Event, Link, Output};
pub use cluster::{ClusterNode, CommandError};
pub use config::{Config, EndpointType};
pub use failover::FailoverMode;
pub use node::{Node, NodeIp};
pub use reply::{LinkStats, Protocol, Reply};
pub use route::{Decision, Request};
pub use text::ConfError;
pub use time::{Duration, Instant};
