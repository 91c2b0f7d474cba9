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
//! ```
//! use redis_cluster_state::{ClusterNode, Config, Request};
//! use redis_hash_slot::SlotRange;
//!
//! let mut node = ClusterNode::new(Config::new("127.0.0.1", 7000));
//! node.add_slots(SlotRange::ALL)?;
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

pub use bus::{CRON_MS, Event, Link, Output};
pub use cluster::{ClusterNode, CommandError};
pub use config::{Config, EndpointType};
pub use failover::FailoverMode;
pub use node::{Node, NodeIp};
pub use reply::{LinkStats, Protocol, Reply};
pub use route::{Decision, Request};
pub use text::ConfError;
