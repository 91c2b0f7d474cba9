//! The Redis Cluster bus: the binary `clusterMsg` messages that cluster nodes exchange on
//! their bus port (client port + 10000).
//!
//! The format, byte for byte and per server version (Redis 7.0 to 8.0, Valkey 8.x), is in the
//! project's `CLUSTER-BUS-FORMAT.md`; this crate reads and writes it the way the servers do.
//! [`Framer`] cuts a bus stream into messages; [`Message::decode`] validates one by the
//! servers' rules and reads every field in place (the 2 KiB slot bitmap as a
//! [`SlotSetView`](redis_hash_slot::SlotSetView), gossip entries and ping extensions as
//! iterators over the message's own bytes); [`OwnedMessage`] holds a message a program builds,
//! and encodes it byte for byte with `totlen`, `count` and `extensions` computed. Wire codes
//! are newtypes that keep values this crate does not know ([`NodeId`], [`NodeFlags`],
//! [`MessageFlags`], [`MessageType`], [`ExtensionType`]).
//!
//! It does no I/O; reading allocates nothing, owned messages need `alloc`.
//!
//! ```
//! use redis_cluster_bus::{Framed, Framer, HEADER_LEN, Header};
//!
//! # let mut stream = vec![0u8; HEADER_LEN];
//! # stream[..4].copy_from_slice(b"RCmb");
//! # stream[4..8].copy_from_slice(&(HEADER_LEN as u32).to_be_bytes());
//! # stream[8..10].copy_from_slice(&1u16.to_be_bytes());
//! let Framed::Message(len) = Framer::default().frame(&stream)? else { return Ok(()) };
//! let header = Header::new(stream[..HEADER_LEN].try_into().expect("a normal header"));
//! assert_eq!(header.totlen() as usize, len);
//! # Ok::<(), redis_cluster_bus::BusError>(())
//! ```
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

mod codes;
mod error;
mod ext;
mod framer;
mod gossip;
mod header;
mod message;
mod owned;

pub use codes::{MessageFlags, MessageType, NodeFlags, NodeId};
pub use error::{Action, BusError};
pub use ext::{Extension, ExtensionType, Extensions};
pub use framer::{Framed, Framer};
pub use gossip::{GOSSIP_LEN, Gossip, GossipEntry};
pub use header::{HEADER_LEN, Header, LIGHT_HEADER_LEN, SIGNATURE, VERSION};
pub use message::Message;
pub use owned::{OwnedBody, OwnedExtension, OwnedGossip, OwnedHeader, OwnedMessage};
