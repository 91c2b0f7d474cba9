//! Which of Redis Cluster's 16384 hash slots a key belongs to, and sets and ranges of slots.
//!
//! Every cluster client, proxy and server must agree on one mapping from a key to a slot:
//! CRC16/XMODEM of the key's hash tag, modulo 16384. This crate computes it exactly as the real
//! server does ([`key_slot`], [`hash_tag`]), and models slots the way the cluster speaks of them:
//! [`Slot`] (a number that is always below 16384), [`SlotRange`] (`0-5460` as `CLUSTER NODES`
//! prints it) and [`SlotSet`] (the 2048-byte bitmap that every cluster-bus header carries, also
//! readable in place through [`SlotSetView`]).
//!
//! It does no I/O, needs neither `std` nor `alloc`, and allocates nothing.
//!
//! ```
//! use redis_hash_slot::{SlotRange, SlotSet, key_slot};
//!
//! let slot = key_slot(b"{user1000}.following");
//! assert_eq!(slot, key_slot(b"user1000"));
//! let owned: SlotSet = "0-5460".parse::<SlotRange>()?.into_iter().collect();
//! assert!(owned.contains(slot) == (u16::from(slot) <= 5460));
//! # Ok::<(), redis_hash_slot::ParseSlotRangeError>(())
//! ```
//!
//! # Features
//! - `std` (default): nothing beyond what the crate has without it; the error types implement
//!   `core::error::Error` either way. It exists so that every crate of the workspace can be
//!   depended on with `default-features = false` in the same way.
//!
//! # Speed
//! The checksum runs whole 16-byte blocks through the `crc` crate's slice-by-16 tables
//! (`Table<16>`, chosen by measurement over `NoTable` and `Table<1>`). The last 0 to 15 bytes,
//! which that crate does one dependent look-up at a time, are done here in blocks of 8 and 4 with
//! the same tables, and the scan for `{` reads eight bytes a step: two small hand-written loops,
//! kept because `benches/hash_slot.rs` shows them faster (8-byte keys were slower than the
//! server's own loop without them). The crate's README holds the measured table.
#![no_std]
#![forbid(unsafe_code)]

mod range;
mod set;
mod slot;

pub use range::{ParseSlotError, ParseSlotRangeError, SlotRange};
pub use set::{BITMAP_LEN, Iter, Ranges, SlotSet, SlotSetView};
pub use slot::{SLOT_COUNT, Slot, hash_tag, key_slot};
