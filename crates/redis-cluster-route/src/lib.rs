//! Command routing for Redis Cluster clients and proxies, from the servers' own description of
//! their commands.
//!
//! [`CommandTable`] holds every command and subcommand of a real server (generated from its
//! `COMMAND` reply: arity, flags, ACL categories, key specs, tips); [`CommandTable::keys`]
//! finds a command's keys by its key specs exactly as the server's `COMMAND GETKEYS` does,
//! [`CommandTable::slot`] says which hash slot a command goes to as a cluster node decides
//! it, and [`CommandTable::route`] says where a proxy sends it, splitting a multi-key command
//! by slot and merging the replies ([`Split`], [`Merge`]). [`SlotMap`] knows which node
//! serves each slot (from `CLUSTER SLOTS` / `SHARDS` / `NODES`, updated by
//! [`ClusterError::parse`]'s MOVED), and [`sentinel`] reads what a Sentinel says. It does no
//! I/O, reads no clock, and allocates nothing to route a single-key command.
//!
//! It is not a client: connections, retries and the redirect loop are the
//! `redis-cluster-client` engine's. Nor does it know a node's own state (that is
//! `redis-cluster-state`'s). The `twemproxy` module (nutcracker's hashes and distributions,
//! behind the feature of that name, the only one that brings md-5) stays here rather than in
//! a crate of its own: it answers the same question, which server a key goes to, for the
//! pools a proxy serves beside cluster ones, and the feature already keeps it out of every
//! build that does not ask for it.
//!
//! ```
//! use redis_cluster_route::{CommandTable, SlotAnswer};
//!
//! let table = CommandTable::REDIS_7_0;
//! let argv = ["MSET", "{user1}:a", "1", "{user1}:b", "2"];
//! let keys: Vec<usize> = table.keys(&argv)?.positions().collect();
//! assert_eq!(keys, [1, 3]);
//! assert!(matches!(table.slot(&argv)?, SlotAnswer::Slot(slot) if u16::from(slot) == 8106));
//! # Ok::<(), redis_cluster_route::KeyError>(())
//! ```
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

mod frame;
mod glob;
mod info;
mod keys;
mod map;
mod redirect;
mod reject;
pub mod sentinel;
mod spec;
mod split;
mod table;
#[cfg(feature = "twemproxy")]
pub mod twemproxy;

pub use glob::glob_match;
pub use keys::{KeyError, Keys, SlotAnswer};
pub use map::{Endpoint, EndpointError, MapError, ReadFrom, Shard, SlotMap};
pub use redirect::{ClusterError, Redirect};
pub use redis_cluster_bus::{Address, AddressError};
pub use reject::Rejection;
pub use spec::{
    AclCategories, BeginSearch, CommandFlags, CommandSpec, FindKeys, KeySpec, KeySpecFlags,
    RequestPolicy, ResponsePolicy, Tip, Tips,
};
pub use split::{Merge, MergeError, Part, Route, Routed, Split};
pub use table::{CommandTable, server_of_info};
