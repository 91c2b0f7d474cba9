//! Ping extensions (format section 8): [`Extension`], read in place, and [`ExtensionType`].

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
    pub fn len(self) -> usize {
        self.bytes.len()
    }

    /// Always `false`: an extension holds at least its 8-byte header.
    pub fn is_empty(self) -> bool {
        self.bytes.is_empty()
    }

    /// The type.
    pub fn kind(self) -> ExtensionType {
        ExtensionType(u16::from_be_bytes(crate::header::field_at(self.bytes, 4)))
    }

    /// The payload, padding included.
    pub fn payload(self) -> &'a [u8] {
        self.bytes.get(Self::HEADER_LEN..).unwrap_or_default()
    }

    /// A string extension's text (up to its NUL); `None` for other types.
    pub fn text(self) -> Option<&'a [u8]> {
        self.kind()
            .is_string()
            .then(|| crate::header::until_nul(self.payload()))
    }

    /// A forgotten-node extension's node and TTL in seconds.
    pub fn forgotten_node(self) -> Option<(NodeId, u64)> {
        if self.kind() != ExtensionType::FORGOTTEN_NODE {
            return None;
        }
        let (id, rest) = self.payload().split_first_chunk::<40>()?;
        let ttl = rest.first_chunk::<8>()?;
        Some((NodeId(*id), u64::from_be_bytes(*ttl)))
    }

    /// A shard-id extension's shard id.
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
    pub(crate) const fn new(rest: &'a [u8], count: u16) -> Self {
        Self { rest, left: count }
    }
}

impl<'a> Iterator for Extensions<'a> {
    type Item = Extension<'a>;

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
