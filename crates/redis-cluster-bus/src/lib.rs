//! The Redis Cluster bus: the binary `clusterMsg` messages that cluster nodes exchange on
//! their bus port (client port + 10000).
//!
//! The format, byte for byte and per server version (Redis 7.0 to 8.0, Valkey 8.x), is in the
//! project's `CLUSTER-BUS-FORMAT.md`; this crate reads and writes it the way the servers do.
//! [`Framer`] cuts a bus stream into messages; [`Message::decode`] validates one by the
//! servers' rules and reads every field in place, one module per body layout tied together
//! by that enum (the 2 KiB slot bitmap as a
//! [`SlotSetView`](redis_hash_slot::SlotSetView), gossip entries and ping extensions as
//! iterators over the message's own bytes); [`OwnedMessage`] holds a message a program builds,
//! and encodes it byte for byte with `totlen`, `count` and `extensions` computed. Wire codes
//! are newtypes that keep values this crate does not know ([`NodeId`], [`NodeFlags`],
//! [`MessageFlags`], [`MessageType`], [`ExtensionType`]).
//!
//! It does no I/O; reading allocates nothing, owned messages need `alloc`.
//!
//! ```
//! use redis_cluster_bus::{Framed, Framer, Message};
//!
//! # let stream = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"),
//! #     "/../../tests/vectors/clusterbus/redis-7.0.15/PING-002.bin")).unwrap_or_else(|_| {
//! #     let mut m = vec![0u8; 2256];
//! #     m[..4].copy_from_slice(b"RCmb");
//! #     m[4..8].copy_from_slice(&2256u32.to_be_bytes());
//! #     m[8..10].copy_from_slice(&1u16.to_be_bytes());
//! #     m
//! # });
//! let Framed::Message(len) = Framer::default().frame(&stream)? else { return Ok(()) };
//! if let Message::Ping(ping) = Message::decode(&stream[..len])? {
//!     println!("{} knows {} nodes", ping.header().sender(), ping.gossip().len());
//! }
//! # Ok::<(), redis_cluster_bus::BusError>(())
//! ```
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

mod address;
mod codes;
mod error;
mod ext;
mod framer;
mod gossip;
mod header;
mod message;
mod nodes_line;

pub use address::{Address, AddressError};
pub use codes::{MessageFlags, MessageType, NodeFlags, NodeId, NodeIdError};
pub use error::{Action, BusError};
pub use ext::{Dialect, Extension, ExtensionType, Extensions, OwnedExtension};
pub use framer::{Framed, Framer};
pub use gossip::{GOSSIP_LEN, Gossip, GossipEntry, OwnedGossip};
pub use header::{HEADER_LEN, Header, LIGHT_HEADER_LEN, OwnedHeader, SIGNATURE, VERSION};
pub use message::{
    Fail, Failover, Message, Module, OwnedBody, OwnedFail, OwnedMessage, OwnedModule, OwnedPing,
    OwnedPublish, OwnedUpdate, Ping, Publish, Unknown, Update,
};
pub use nodes_line::{NodeAddress, NodesLine, NodesLineError, SlotToken};
