//! The Redis Cluster bus: the binary `clusterMsg` messages that cluster nodes exchange on
//! their bus port (client port + 10000).
//!
//! The format, byte for byte and per server version (Redis 7.0 to 8.0, Valkey 8.x), is in the
//! project's `CLUSTER-BUS-FORMAT.md`; this crate reads it the way the servers do. So far it
//! has the wire codes as newtypes that keep unknown values ([`NodeId`], [`NodeFlags`],
//! [`MessageFlags`], [`MessageType`]), the 2256-byte [`Header`] read in place (its slot bitmap
//! as a [`SlotSetView`](redis_hash_slot::SlotSetView), not a copy), and the stream
//! [`Framer`], and every [`Message`] validated by the servers' rules and read in place (gossip
//! entries, ping extensions, FAIL, PUBLISH, UPDATE, MODULE, light headers), and
//! [`OwnedMessage`] that encodes byte for byte. Builders, a pcap walk and the live handshake
//! with a real server come next.
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
