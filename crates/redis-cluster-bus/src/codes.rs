//! The bus's wire codes: node ids, node flags, message flags, message and extension types.
//!
//! Each is a newtype over the wire value with named constants, so that a value this crate does
//! not know (a flag bit of a newer server, a new extension) is kept and written back as it came.

use core::fmt;

/// A node id: 40 bytes, normally lowercase hex. "No node" (a master's `replicaof`) is 40 zero
/// bytes on the wire, [`NodeId::NONE`].
///
/// Equality and order are the bytes' (lexicographic), computed as five big-endian words: a
/// node table keyed by id compares ids on every look-up, and a call to `memcmp` per
/// comparison was a fifth of a simulated cluster's time.
#[derive(Clone, Copy)]
pub struct NodeId(pub [u8; Self::LEN]);

impl NodeId {
    /// The id as five big-endian words: ordering them orders the bytes.
    #[inline]
    fn words(&self) -> [u64; 5] {
        let mut words = [0u64; 5];
        for (word, chunk) in words.iter_mut().zip(self.0.chunks_exact(8)) {
            let mut bytes = [0u8; 8];
            bytes.copy_from_slice(chunk);
            *word = u64::from_be_bytes(bytes);
        }
        words
    }
}

impl PartialEq for NodeId {
    #[inline]
    fn eq(&self, other: &Self) -> bool {
        let (a, b) = (self.words(), other.words());
        a.iter().zip(&b).fold(0, |diff, (x, y)| diff | (x ^ y)) == 0
    }
}

impl Eq for NodeId {}

impl core::hash::Hash for NodeId {
    fn hash<H: core::hash::Hasher>(&self, state: &mut H) {
        self.0.hash(state);
    }
}

impl PartialOrd for NodeId {
    #[inline]
    fn partial_cmp(&self, other: &Self) -> Option<core::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for NodeId {
    #[inline]
    fn cmp(&self, other: &Self) -> core::cmp::Ordering {
        self.words().cmp(&other.words())
    }
}

impl NodeId {
    /// Bytes in a node id.
    pub const LEN: usize = 40;
    /// Forty zero bytes: no node.
    pub const NONE: Self = Self([0; Self::LEN]);

    /// Whether this is [`NodeId::NONE`].
    pub fn is_none(&self) -> bool {
        *self == Self::NONE
    }

    /// The id's bytes.
    pub const fn as_bytes(&self) -> &[u8; Self::LEN] {
        &self.0
    }
}

impl fmt::Display for NodeId {
    /// The id as text; bytes that are not printable ASCII as `\xHH`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for &b in &self.0 {
            if b.is_ascii_graphic() {
                write!(f, "{}", char::from(b))?;
            } else {
                write!(f, "\\x{b:02x}")?;
            }
        }
        Ok(())
    }
}

/// Text that is not a node id: 40 hex digits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("not a node id (40 hex digits)")]
pub struct NodeIdError;

impl core::str::FromStr for NodeId {
    type Err = NodeIdError;

    /// Reads 40 hex digits, as CLUSTER NODES, MOVED's peers and nodes.conf write ids.
    ///
    /// ```
    /// use redis_cluster_bus::NodeId;
    ///
    /// let id: NodeId = "e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca".parse()?;
    /// assert_eq!(id.to_string(), "e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca");
    /// assert!("e7d1".parse::<NodeId>().is_err());
    /// # Ok::<(), redis_cluster_bus::NodeIdError>(())
    /// ```
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bytes: [u8; Self::LEN] = text.as_bytes().try_into().map_err(|_| NodeIdError)?;
        match bytes.iter().all(u8::is_ascii_hexdigit) {
            true => Ok(Self(bytes)),
            false => Err(NodeIdError),
        }
    }
}

impl fmt::Debug for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "NodeId({self})")
    }
}

bitflags::bitflags! {
    /// Flags of a node: the sender's own in the header, the sender's view of another node in
    /// a gossip entry (format section 4). Only the low 16 bits travel; bits this crate has no
    /// name for are kept ([`NodeFlags::from_bits_retain`]) and written back as they came.
    ///
    /// `Debug` names the bits (`NodeFlags(MASTER | MYSELF)`); `Display` writes the flags
    /// field of a `CLUSTER NODES` line, as the server does:
    ///
    /// ```
    /// use redis_cluster_bus::NodeFlags;
    ///
    /// let flags = NodeFlags::MYSELF | NodeFlags::MASTER | NodeFlags::EXTENSIONS_SUPPORTED;
    /// assert_eq!(flags.to_string(), "myself,master");
    /// assert_eq!(format!("{flags:?}"), "NodeFlags(MASTER | MYSELF | EXTENSIONS_SUPPORTED)");
    /// assert_eq!(NodeFlags::empty().to_string(), "noflags");
    /// assert_eq!(
    ///     NodeFlags::from_cluster_nodes("slave,fail?"),
    ///     Some(NodeFlags::REPLICA | NodeFlags::PFAIL)
    /// );
    /// // A bit of a newer server survives, named by its value.
    /// let newer = NodeFlags::from_bits_retain(0x8001);
    /// assert_eq!(newer.bits(), 0x8001);
    /// assert_eq!(format!("{newer:?}"), "NodeFlags(MASTER | 0x8000)");
    /// ```
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
    pub struct NodeFlags: u16 {
        /// A master (Valkey: primary).
        const MASTER = 0x0001;
        /// A replica.
        const REPLICA = 0x0002;
        /// Suspected failed by the sender.
        const PFAIL = 0x0004;
        /// Agreed failed.
        const FAIL = 0x0008;
        /// The sender itself (always in header flags, never in gossip).
        const MYSELF = 0x0010;
        /// Still in handshake.
        const HANDSHAKE = 0x0020;
        /// Address unknown.
        const NOADDR = 0x0040;
        /// The sender still has to MEET this node.
        const MEET = 0x0080;
        /// A master eligible as a replica-migration target.
        const MIGRATE_TO = 0x0100;
        /// `cluster-replica-no-failover yes`.
        const NOFAILOVER = 0x0200;
        /// Redis 8.0+, Valkey 8.0+: the node understands ping extensions.
        const EXTENSIONS_SUPPORTED = 0x0400;
        /// Valkey: the node takes light-header PUBLISH / PUBLISHSHARD.
        const LIGHT_HDR_PUBLISH_SUPPORTED = 0x0800;
        /// Valkey 8.1: the node takes light-header MODULE.
        const LIGHT_HDR_MODULE_SUPPORTED = 0x1000;
        // Every other bit is a newer server's: kept, not dropped.
        const _ = !0;
    }
}

/// The flags a `CLUSTER NODES` line shows, with their names, in the server's fixed order;
/// the other bits do not appear there.
const CLUSTER_NODES_NAMES: [(NodeFlags, &str); 8] = [
    (NodeFlags::MYSELF, "myself"),
    (NodeFlags::MASTER, "master"),
    (NodeFlags::REPLICA, "slave"),
    (NodeFlags::PFAIL, "fail?"),
    (NodeFlags::FAIL, "fail"),
    (NodeFlags::HANDSHAKE, "handshake"),
    (NodeFlags::NOADDR, "noaddr"),
    (NodeFlags::NOFAILOVER, "nofailover"),
];

impl NodeFlags {
    /// The flags of a `CLUSTER NODES` / nodes.conf flags field (`myself,master`, `slave`,
    /// `noflags`), or `None` when a name is not one the server writes (Valkey writes
    /// `master` and `slave` there too).
    pub fn from_cluster_nodes(field: &str) -> Option<Self> {
        let mut flags = Self::empty();
        for name in field.split(',') {
            flags |= match name {
                "noflags" => Self::empty(),
                _ => CLUSTER_NODES_NAMES
                    .iter()
                    .find(|(_, n)| *n == name)
                    .map(|&(flag, _)| flag)?,
            };
        }
        Some(flags)
    }
}

impl fmt::Display for NodeFlags {
    /// The flags field of a `CLUSTER NODES` line: the names it shows, comma-separated, in the
    /// server's order, or `noflags`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut any = false;
        for (flag, name) in CLUSTER_NODES_NAMES {
            if self.contains(flag) {
                if any {
                    f.write_str(",")?;
                }
                f.write_str(name)?;
                any = true;
            }
        }
        if !any {
            f.write_str("noflags")?;
        }
        Ok(())
    }
}

bitflags::bitflags! {
    /// Byte 0 of the header's `mflags` (format section 5); unknown bits are kept.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
    pub struct MessageFlags: u8 {
        /// The sender is a master paused for a manual failover.
        const PAUSED = 0x01;
        /// On a FAILOVER_AUTH_REQUEST: vote even though the master is up.
        const FORCEACK = 0x02;
        /// Extensions present or supported (the exact rule differs per server version).
        const EXT_DATA = 0x04;
        // Every other bit is a newer server's: kept, not dropped.
        const _ = !0;
    }
}

/// A message type as on the wire; Valkey sets [`MessageType::LIGHT`] on light-header messages.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MessageType(pub u16);

impl MessageType {
    /// Heartbeat, with gossip and extensions.
    pub const PING: Self = Self(0);
    /// Answer to PING or MEET, or a broadcast after a configuration change.
    pub const PONG: Self = Self(1);
    /// First message of a handshake.
    pub const MEET: Self = Self(2);
    /// A node is declared failed.
    pub const FAIL: Self = Self(3);
    /// PUBLISH on any node.
    pub const PUBLISH: Self = Self(4);
    /// A replica asks for votes.
    pub const FAILOVER_AUTH_REQUEST: Self = Self(5);
    /// A master grants its vote.
    pub const FAILOVER_AUTH_ACK: Self = Self(6);
    /// Tells a node that its slot claims are stale.
    pub const UPDATE: Self = Self(7);
    /// A replica starts a manual failover with its master.
    pub const MFSTART: Self = Self(8);
    /// A module's message.
    pub const MODULE: Self = Self(9);
    /// SPUBLISH, to the publisher's shard.
    pub const PUBLISHSHARD: Self = Self(10);
    /// The bit that marks Valkey's 16-byte light header.
    pub const LIGHT: u16 = 0x8000;

    /// The type without the light bit.
    pub const fn base(self) -> Self {
        Self(self.0 & !Self::LIGHT)
    }

    /// Whether the light bit is set.
    pub const fn is_light(self) -> bool {
        self.0 & Self::LIGHT != 0
    }

    /// The name the vectors' manifest uses (`PING`, `PUBLISH_LIGHT`, …), or `None` for a type
    /// this crate does not know.
    pub fn name(self) -> Option<&'static str> {
        const NAMES: [&str; 11] = [
            "PING",
            "PONG",
            "MEET",
            "FAIL",
            "PUBLISH",
            "FAILOVER_AUTH_REQUEST",
            "FAILOVER_AUTH_ACK",
            "UPDATE",
            "MFSTART",
            "MODULE",
            "PUBLISHSHARD",
        ];
        const LIGHT_NAMES: [(u16, &str); 3] = [
            (4, "PUBLISH_LIGHT"),
            (9, "MODULE_LIGHT"),
            (10, "PUBLISHSHARD_LIGHT"),
        ];
        if self.is_light() {
            let base = self.base().0;
            LIGHT_NAMES
                .iter()
                .find(|(t, _)| *t == base)
                .map(|(_, n)| *n)
        } else {
            NAMES.get(usize::from(self.0)).copied()
        }
    }
}

impl fmt::Debug for MessageType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => f.write_str(name),
            None => write!(f, "MessageType({:#06x})", self.0),
        }
    }
}
