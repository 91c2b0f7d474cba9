//! RESP2 and RESP3, the Redis serialization protocol: decoding and encoding.
//!
//! This crate reads and writes every RESP2 and RESP3 type byte for byte as the real server
//! does, for clients, proxies and servers alike. Its [`Decoder`] resumes where the last read
//! stopped and hands out [`Frame`]s whose strings are slices of the input (no copy), with a
//! request fast path ([`Decoder::decode_command`]) and a passthrough span for proxies
//! ([`Decoder::decode_span`]). It is strict by default, bounded by [`Limits`] against hostile
//! peers, and does no I/O: bytes come in as buffers and go out into buffers.
//!
//! ```
//! use bytes::BytesMut;
//! use redis_resp::{Decoder, Frame, encode};
//!
//! let mut decoder = Decoder::new();
//! let mut buf = BytesMut::from(&b"%1\r\n+server\r\n+redis\r\n"[..]);
//! let frame = decoder.decode(&mut buf)?.expect("a whole frame");
//! assert!(matches!(&frame, Frame::Map(pairs) if pairs.len() == 1));
//! let mut out = Vec::new();
//! encode(&frame, &mut out);
//! assert_eq!(out, b"%1\r\n+server\r\n+redis\r\n");
//! # Ok::<(), redis_resp::DecodeError>(())
//! ```
//!
//! The two central types are [`Decoder`] (bytes in) and [`Frame`] (values out, and in again
//! through [`encode`]). The errors name the rule that was broken and the offset of the byte
//! that broke it ([`DecodeError`]).
//!
//! [`server_limits`] has the server's rules for what a connection may hold: memory values as
//! `redis.conf` writes them and `client-output-buffer-limit`.
//!
//! # What it does not do
//! No sockets, no clock, no threads: a [`Decoder`] is fed bytes and returns values. It does not
//! know commands either: which arguments are keys is `redis-cluster-route`'s business.
//!
//! # Strictness
//! By default the decoder is as strict as the server: integers and lengths follow its
//! `string2ll` (no `+`, no leading zero, no `-0`, within `i64`), every line and every payload
//! must end in CRLF, `-1` is the only negative length (RESP2's nulls), and a double must look
//! like what a server prints. [`Config::lenient`] relaxes what hiredis relaxes in replies.
//! Strict decoding accepts one spelling per value, so a decoded frame re-encodes to the exact
//! bytes it came from.
//!
//! # Speed
//! A frame whose bytes have all arrived is read by a plain recursive descent, which answers
//! only when it is sure; anything else (an incomplete or invalid frame, attributes, streamed
//! parts, great depth) goes to the scanner, which validates each byte once even across reads
//! and is the one authority on errors. Small hand-written steps exist because
//! `benches/resp.rs` showed them faster: integers read eight digits at a time (SWAR) and one
//! or two without it, and values built where they are kept rather than moved. The measured
//! table, with the peers and hiredis, is in the crate's README.
//!
//! # Features
//! - `std` (default): `std` support in `bytes`. Without it the crate needs only `alloc`.
#![cfg_attr(
    feature = "codec",
    doc = "- `codec`: [`codec::RespCodec`], a `tokio-util` decoder and encoder of frames."
)]
#![cfg_attr(
    not(feature = "codec"),
    doc = "- `codec`: `codec::RespCodec`, a `tokio-util` decoder and encoder of frames."
)]
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;
#[cfg(feature = "std")]
extern crate std;

mod build;
mod command;
mod decoder;
mod encode;
mod error;
pub mod errors;
mod fast;
mod frame;
mod limits;
mod parse;
mod scan;
pub mod server_limits;

#[cfg(feature = "codec")]
pub mod codec;

pub use command::{BorrowedCommand, Command};
pub use decoder::{Borrowed, Decoder, Span, Status, decode};
pub use encode::{
    encode, encode_ask, encode_bulk, encode_command, encode_error, encode_integer, encode_moved,
    encode_null, encode_null_bulk, encode_ok, encoded_len,
};
pub use error::{DecodeError, ErrorKind, IntegerError};
pub use frame::{Frame, Kind};
pub use limits::{Config, Limits};
