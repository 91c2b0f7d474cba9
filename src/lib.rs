//! The redis-cluster-proto crates under one name.
//!
//! Each module is a re-export of one crate of the workspace, which can also be depended on
//! alone: [`hash_slot`] is `redis-hash-slot`, [`resp`] is `redis-resp`, [`bus`] is
//! `redis-cluster-bus`, [`route`] is `redis-cluster-route`, [`state`] is `redis-cluster-state`,
//! and with the `std` feature (the default) `client` is `redis-cluster-client`, the engine of a
//! cluster client or proxy. None of them does I/O. [`bytes`] is the `bytes` crate the frames
//! hold their data in, so that a user names the same `Bytes`.
//!
//! Features: `std` (the default); `twemproxy`, nutcracker's pools (`route::twemproxy`,
//! `client::twemproxy`, which bring the md-5 crate); `codec`, `resp::codec`, a tokio-util
//! `Decoder` + `Encoder` of frames (which brings tokio-util).
//!
//! ```
//! use redis_cluster_proto::bytes::Bytes;
//! use redis_cluster_proto::hash_slot::key_slot;
//! use redis_cluster_proto::resp::Frame;
//!
//! assert_eq!(u16::from(key_slot(b"foo")), 12182);
//! let frame: Frame<Bytes> = Frame::BulkString(Bytes::from_static(b"bar"));
//! assert_eq!(frame.as_bytes(), Some(&b"bar"[..]));
//! # #[cfg(feature = "codec")]
//! let _framed_codec = redis_cluster_proto::resp::codec::RespCodec::default();
//! ```
#![no_std]
#![forbid(unsafe_code)]

pub use bytes;
pub use redis_cluster_bus as bus;
#[cfg(feature = "std")]
pub use redis_cluster_client as client;
pub use redis_cluster_route as route;
pub use redis_cluster_state as state;
pub use redis_hash_slot as hash_slot;
pub use redis_resp as resp;
