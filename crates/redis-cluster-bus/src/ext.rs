//! Ping extensions (format section 8): [`Extension`], read in place, [`OwnedExtension`], one
//! to send, [`ExtensionType`], and the [`Dialect`] that says what types 4 and 5 are.

use alloc::vec::Vec;
use core::fmt;

use crate::codes::{NodeFlags, NodeId};

/// Which numbering of the extensions after `shard_id` (type 3) a sender follows: Redis and
/// Valkey forked there (format section 8.2). Redis 8 sends type 4 as `internal_secret`, 40
/// raw bytes; Valkey 8 and 9 send types 4 and 5 as `client_ipv4` / `client_ipv6`,
/// NUL-terminated text.
///
/// A receiver tells them apart by the sender's header flags ([`Dialect::of_sender`]): every
/// Valkey 8.1+ node sets its light-header flags on itself, no Redis does. Whatever a reading
/// does not take as text stays raw bytes ([`OwnedExtension::raw`]), so re-encoding is exact
/// even under the wrong dialect.
///
/// ```
/// use redis_cluster_bus::{Dialect, ExtensionType, NodeFlags};
///
/// assert_eq!(Dialect::of_sender(NodeFlags::MASTER), Dialect::Redis);
/// let valkey = NodeFlags::MASTER | NodeFlags::LIGHT_HDR_PUBLISH_SUPPORTED;
/// assert_eq!(Dialect::of_sender(valkey), Dialect::Valkey);
/// assert_eq!(ExtensionType(4).name_in(Dialect::Redis), Some("internal_secret"));
/// assert_eq!(ExtensionType(4).name_in(Dialect::Valkey), Some("client_ipv4"));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dialect {
    /// Redis 7.x and 8.x: type 4 is `internal_secret` (Redis 8), type 5 unknown.
    Redis,
    /// Valkey 8.0 and later: types 4 and 5 are `client_ipv4` and `client_ipv6`.
    Valkey,
}

impl Dialect {
    /// The dialect of a message's sender, from the node flags of its header: Valkey when it
    /// sets a light-header flag on itself (all Valkey 8.1+ nodes do), else Redis. A Valkey
    /// 8.0 node reads as Redis: its client addresses then stay raw, and re-encode exactly.
    pub const fn of_sender(flags: NodeFlags) -> Self {
        let light =
            NodeFlags::LIGHT_HDR_PUBLISH_SUPPORTED.union(NodeFlags::LIGHT_HDR_MODULE_SUPPORTED);
        if flags.intersects(light) {
            Self::Valkey
        } else {
            Self::Redis
        }
    }
}

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
    /// The cluster's internal secret, 40 raw bytes (Redis 8; Valkey's [`Self::CLIENT_IPV4`]
    /// has the same number: see [`Dialect`]).
    pub const INTERNAL_SECRET: Self = Self(4);

    /// The name the vectors' manifest uses, read as Valkey numbers types 4 and 5, or `None`
    /// for an unknown type; [`ExtensionType::name_in`] reads either dialect.
    pub fn name(self) -> Option<&'static str> {
        self.name_in(Dialect::Valkey)
    }

    /// The name in `dialect`, or `None` for a type unknown to it.
    pub fn name_in(self, dialect: Dialect) -> Option<&'static str> {
        const NAMES: [&str; 4] = ["hostname", "human_nodename", "forgotten_node", "shard_id"];
        match (self.0, dialect) {
            (4, Dialect::Redis) => Some("internal_secret"),
            (4, Dialect::Valkey) => Some("client_ipv4"),
            (5, Dialect::Valkey) => Some("client_ipv6"),
            (n, _) => NAMES.get(usize::from(n)).copied(),
        }
    }

    /// Whether the payload is a NUL-terminated, zero-padded string, read as Valkey numbers
    /// types 4 and 5; [`ExtensionType::is_string_in`] reads either dialect.
    #[inline]
    pub const fn is_string(self) -> bool {
        self.is_string_in(Dialect::Valkey)
    }

    /// Whether the payload is a NUL-terminated, zero-padded string in `dialect`.
    #[inline]
    pub const fn is_string_in(self, dialect: Dialect) -> bool {
        match dialect {
            Dialect::Redis => matches!(self.0, 0 | 1),
            Dialect::Valkey => matches!(self.0, 0 | 1 | 4 | 5),
        }
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

    /// A string extension's text (up to its NUL), read as Valkey numbers types 4 and 5;
    /// `None` for other types. [`Extension::text_in`] reads either dialect.
    #[inline]
    pub fn text(self) -> Option<&'a [u8]> {
        self.text_in(Dialect::Valkey)
    }

    /// A string extension's text in `dialect` (up to its NUL); `None` for other types.
    #[inline]
    pub fn text_in(self, dialect: Dialect) -> Option<&'a [u8]> {
        self.kind()
            .is_string_in(dialect)
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

    /// Redis 8's internal secret (40 bytes), when `dialect` is Redis's and this is one.
    #[inline]
    pub fn internal_secret(self, dialect: Dialect) -> Option<&'a [u8; 40]> {
        if dialect != Dialect::Redis || self.kind() != ExtensionType::INTERNAL_SECRET {
            return None;
        }
        self.payload().first_chunk::<40>()
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
/// text without its NUL). Encoding adds the NUL for string types (as Valkey numbers them,
/// unless [`OwnedExtension::raw`]) and pads to 8 bytes, as the servers do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnedExtension {
    /// The type.
    pub kind: ExtensionType,
    /// The payload: text for string types, 40 + 8 bytes for a forgotten node, 40 for a shard
    /// id, raw bytes (padding included, as received) for unknown types and raw ones.
    pub payload: Vec<u8>,
    /// The payload is written as it is, no NUL added: for a type that is not text in the
    /// sender's [`Dialect`] (Redis 8's `internal_secret` is Valkey's `client_ipv4` number),
    /// and for a received string whose bytes are not the canonical text, NUL and zeros.
    pub raw: bool,
}

impl OwnedExtension {
    /// A copy of a received extension that encodes to the same bytes, read as Valkey
    /// numbers types 4 and 5 ([`OwnedExtension::from_view_in`] reads either dialect).
    pub fn from_view(ext: Extension<'_>) -> Self {
        Self::from_view_in(ext, Dialect::Valkey)
    }

    /// A copy of a received extension, read in `dialect`, that encodes to the same bytes:
    /// a string is kept as its text only when the text, a NUL and the least zero padding
    /// make its payload, and as raw bytes otherwise.
    pub fn from_view_in(ext: Extension<'_>, dialect: Dialect) -> Self {
        let payload = ext.payload();
        let text = ext.text_in(dialect).filter(|text| {
            let padded = (text.len() + 1).next_multiple_of(8);
            padded == payload.len() && payload[text.len()..].iter().all(|&b| b == 0)
        });
        let string = ext.kind().is_string();
        match text {
            // Taken as text in `dialect`; written back as text when encoding does that
            // (Valkey's numbering), else as the same bytes.
            Some(text) if string => Self {
                kind: ext.kind(),
                payload: text.to_vec(),
                raw: false,
            },
            _ => Self {
                kind: ext.kind(),
                payload: payload.to_vec(),
                raw: string,
            },
        }
    }

    /// Bytes on the wire: the 8-byte header, the payload (plus a NUL for strings), padded to
    /// a multiple of 8.
    pub fn encoded_len(&self) -> usize {
        let nul = usize::from(self.kind.is_string() && !self.raw);
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
