//! The redis-cluster-proto crates under one name.
//!
//! Each module is a re-export of one crate of the workspace, which can also be depended on
//! alone: [`hash_slot`] is `redis-hash-slot`. None of them does I/O.
//!
//! ```
//! use redis_cluster_proto::hash_slot::key_slot;
//!
//! assert_eq!(u16::from(key_slot(b"foo")), 12182);
//! ```
#![no_std]

pub use redis_hash_slot as hash_slot;
