//! Ping extensions (format section 8): [`Extension`], read in place, [`OwnedExtension`], one
//! to send, and [`ExtensionType`].

use alloc::vec::Vec;
use core::fmt;

use crate::codes::NodeId;

/// An extension's type; unknown ones are kept.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ExtensionType(pub u16);

impl ExtensionType {
    /// `cluster-announce-hostname` (Redis 7.0).
    pub const HOSTNAME: Self = Self(0);
    /// `cluster-announce-human-nodename` (Redis 7.2).
    pub const HUMAN_NODENAME: Self = Self(1);
    /// A node the receiver must forget, with a TTL (Redis 7.2).
    pub const FORGOTTEN_NODE: Self = Self(2);
    /// The sender's shard id (Redis 7.2).
    pub const SHARD_ID: Self = Self(3);
    /// `cluster-announce-client-ipv4` (Valkey 8.0).
    pub const CLIENT_IPV4: Self = Self(4);
    /// `cluster-announce-client-ipv6` (Valkey 8.0).
    pub const CLIENT_IPV6: Self = Self(5);

    /// The name the vectors' manifest uses, or `None` for an unknown type.
    pub fn name(self) -> Option<&'static str> {
        const NAMES: [&str; 6] = [
            "hostname",
            "human_nodename",
            "forgotten_node",
            "shard_id",
            "client_ipv4",
            "client_ipv6",
        ];
        NAMES.get(usize::from(self.0)).copied()
    }

    /// Whether the payload is a NUL-terminated, zero-padded string.
    #[inline]
    pub const fn is_string(self) -> bool {
        matches!(self.0, 0 | 1 | 4 | 5)
    }
}

impl fmt::Debug for ExtensionType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => f.write_str(name),
            None => write!(f, "ExtensionType({})", self.0),
        }
    }
}

/// One ping extension: its 8-byte header and its payload (padding included), read in place.
#[derive(Clone, Copy, Debug)]
pub struct Extension<'a> {
    bytes: &'a [u8],
}

impl<'a> Extension<'a> {
    /// Bytes in an extension's own header.
    pub const HEADER_LEN: usize = 8;

    /// The extension's declared length: header and padded payload.
    #[inline]
    pub fn len(self) -> usize {
        self.bytes.len()
    }

    /// Always `false`: an extension holds at least its 8-byte header.
    #[inline]
    pub fn is_empty(self) -> bool {
        self.bytes.is_empty()
    }

    /// The type.
    #[inline]
    pub fn kind(self) -> ExtensionType {
        ExtensionType(u16::from_be_bytes(crate::header::field_at(self.bytes, 4)))
    }

    /// The payload, padding included.
    #[inline]
    pub fn payload(self) -> &'a [u8] {
        self.bytes.get(Self::HEADER_LEN..).unwrap_or_default()
    }

    /// A string extension's text (up to its NUL); `None` for other types.
    #[inline]
    pub fn text(self) -> Option<&'a [u8]> {
        self.kind()
            .is_string()
            .then(|| crate::header::until_nul(self.payload()))
    }

    /// A forgotten-node extension's node and TTL in seconds.
    #[inline]
    pub fn forgotten_node(self) -> Option<(NodeId, u64)> {
        if self.kind() != ExtensionType::FORGOTTEN_NODE {
            return None;
        }
        let (id, rest) = self.payload().split_first_chunk::<40>()?;
        let ttl = rest.first_chunk::<8>()?;
        Some((NodeId(*id), u64::from_be_bytes(*ttl)))
    }

    /// A shard-id extension's shard id.
    #[inline]
    pub fn shard_id(self) -> Option<NodeId> {
        if self.kind() != ExtensionType::SHARD_ID {
            return None;
        }
        self.payload().first_chunk::<40>().map(|id| NodeId(*id))
    }
}

/// The extensions of a message, in order. Built only over extensions whose lengths were
/// checked, so every item is whole.
#[derive(Clone, Debug)]
pub struct Extensions<'a> {
    rest: &'a [u8],
    left: u16,
}

impl<'a> Extensions<'a> {
    #[inline]
    pub(crate) const fn new(rest: &'a [u8], count: u16) -> Self {
        Self { rest, left: count }
    }
}

impl<'a> Iterator for Extensions<'a> {
    type Item = Extension<'a>;

    #[inline]
    fn next(&mut self) -> Option<Extension<'a>> {
        if self.left == 0 {
            return None;
        }
        let len = self
            .rest
            .first_chunk::<4>()
            .map(|l| u32::from_be_bytes(*l))? as usize;
        let (bytes, rest) = self.rest.split_at_checked(len)?;
        self.rest = rest;
        self.left -= 1;
        Some(Extension { bytes })
    }
}

/// A ping extension to send: its type and its payload without padding (a string extension's
/// text without its NUL). Encoding adds the NUL for string types and pads to 8 bytes, as the
/// servers do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnedExtension {
    /// The type.
    pub kind: ExtensionType,
    /// The payload: text for string types, 40 + 8 bytes for a forgotten node, 40 for a shard
    /// id, raw bytes (padding included, as received) for unknown types.
    pub payload: Vec<u8>,
}

impl OwnedExtension {
    /// A copy of a received extension that encodes to the same bytes.
    pub fn from_view(ext: Extension<'_>) -> Self {
        Self {
            kind: ext.kind(),
            payload: ext.text().unwrap_or(ext.payload()).to_vec(),
        }
    }

    /// Bytes on the wire: the 8-byte header, the payload (plus a NUL for strings), padded to
    /// a multiple of 8.
    pub fn encoded_len(&self) -> usize {
        let nul = usize::from(self.kind.is_string());
        Extension::HEADER_LEN + (self.payload.len() + nul).next_multiple_of(8)
    }

    /// Appends the extension to `out`.
    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        let len = self.encoded_len();
        out.extend_from_slice(&(len as u32).to_be_bytes());
        out.extend_from_slice(&self.kind.0.to_be_bytes());
        out.extend_from_slice(&[0, 0]);
        out.extend_from_slice(&self.payload);
        out.resize(
            out.len() + len - Extension::HEADER_LEN - self.payload.len(),
            0,
        );
    }
}
