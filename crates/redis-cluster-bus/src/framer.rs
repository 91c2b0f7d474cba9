//! [`Framer`]: whole messages out of a bus connection's byte stream.

use crate::{
    codes::MessageType,
    error::BusError,
    header::{HEADER_LEN, LIGHT_HEADER_LEN, SIGNATURE},
};

/// What the framer found at the front of the stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framed {
    /// A whole message of this many bytes is at the front of the buffer.
    Message(usize),
    /// At least this many more bytes are needed.
    Incomplete(usize),
}

/// Splits a bus connection's byte stream into messages, as the servers do (format section 1):
/// a signature, a `totlen` no smaller than the header, and then `totlen` bytes. It checks
/// each message as soon as its first 14 bytes are in (enough to see the type, and so the
/// light header), long before the rest arrives.
///
/// ```
/// use redis_cluster_bus::{Framed, Framer};
///
/// let framer = Framer::default();
/// let mut light = b"RCmb\0\0\0\x1c\0\x01\0\0\x80\x04\0\0".to_vec(); // a light PUBLISH, 28 bytes
/// assert_eq!(framer.frame(&light), Ok(Framed::Incomplete(12)));
/// light.extend_from_slice(&[0; 12]);
/// assert_eq!(framer.frame(&light), Ok(Framed::Message(28)));
/// assert!(framer.frame(b"HTTP/1.1 200 OK").is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Framer {
    max_totlen: u32,
}

impl Framer {
    /// The default limit on `totlen`: 16 MiB, far above anything a server sends (a PING with
    /// 65 535 gossip entries is under 7 MiB; PUBLISH payloads are the only large messages).
    pub const DEFAULT_MAX_TOTLEN: u32 = 16 * 1024 * 1024;

    /// A framer that refuses messages longer than `max_totlen` bytes.
    pub const fn with_max_totlen(max_totlen: u32) -> Self {
        Self { max_totlen }
    }

    /// Looks at the front of `buf`: a whole message, how many more bytes one needs, or why the
    /// stream is not a bus stream.
    pub fn frame(&self, buf: &[u8]) -> Result<Framed, BusError> {
        // Signature and totlen first (8 bytes, what Redis reads), then the type (14 bytes,
        // what Valkey reads to recognise the light header).
        let seen = buf.get(..buf.len().min(4)).unwrap_or_default();
        if !SIGNATURE.starts_with(seen) {
            let mut signature = [0; 4];
            signature[..seen.len()].copy_from_slice(seen);
            return Err(BusError::BadSignature(signature));
        }
        let Some(head) = buf.first_chunk::<14>() else {
            return Ok(Framed::Incomplete(14 - buf.len()));
        };
        let totlen = u32::from_be_bytes([head[4], head[5], head[6], head[7]]);
        let kind = MessageType(u16::from_be_bytes([head[12], head[13]]));
        let min = if kind.is_light() {
            if !matches!(kind.base().0, 4 | 9 | 10) {
                return Err(BusError::BadLightType(kind.0));
            }
            LIGHT_HEADER_LEN as u32
        } else {
            HEADER_LEN as u32
        };
        if totlen < min {
            return Err(BusError::TooShort { totlen, min });
        }
        if totlen > self.max_totlen {
            let max = self.max_totlen;
            return Err(BusError::TooLong { totlen, max });
        }
        let totlen = totlen as usize; // <= max_totlen, a u32
        Ok(if buf.len() >= totlen {
            Framed::Message(totlen)
        } else {
            Framed::Incomplete(totlen - buf.len())
        })
    }
}

impl Default for Framer {
    fn default() -> Self {
        Self::with_max_totlen(Self::DEFAULT_MAX_TOTLEN)
    }
}
