//! Gossip entries of a PING, PONG or MEET: [`GossipEntry`], 104 bytes read in place, and
//! [`OwnedGossip`], one built in its wire form.

use crate::codes::{NodeFlags, NodeId};

/// Bytes in a gossip entry.
pub const GOSSIP_LEN: usize = 104;

/// What the sender knows of one other node (format section 6.1).
#[derive(Clone, Copy)]
pub struct GossipEntry<'a> {
    bytes: &'a [u8; GOSSIP_LEN],
}

impl<'a> GossipEntry<'a> {
    /// The entry in `bytes`.
    #[inline]
    pub const fn new(bytes: &'a [u8; GOSSIP_LEN]) -> Self {
        Self { bytes }
    }

    /// The entry's bytes.
    #[inline]
    pub const fn as_bytes(self) -> &'a [u8; GOSSIP_LEN] {
        self.bytes
    }

    #[inline]
    fn array<const N: usize>(self, at: usize) -> [u8; N] {
        crate::header::field_at(self.bytes, at)
    }

    /// The id of the node described.
    #[inline]
    pub fn node(self) -> NodeId {
        NodeId(self.array(0))
    }

    /// Seconds (sender's clock) of the sender's unanswered ping to that node; 0 for none.
    #[inline]
    pub fn ping_sent(self) -> u32 {
        u32::from_be_bytes(self.array(40))
    }

    /// Seconds (sender's clock) of the last pong the sender got from that node.
    #[inline]
    pub fn pong_received(self) -> u32 {
        u32::from_be_bytes(self.array(44))
    }

    /// The node's address as the sender knows it, up to its NUL.
    #[inline]
    pub fn ip(self) -> &'a [u8] {
        crate::header::until_nul(self.bytes.get(48..94).unwrap_or_default())
    }

    /// The node's client port.
    #[inline]
    pub fn port(self) -> u16 {
        u16::from_be_bytes(self.array(94))
    }

    /// The node's bus port.
    #[inline]
    pub fn cport(self) -> u16 {
        u16::from_be_bytes(self.array(96))
    }

    /// The sender's flags for that node.
    #[inline]
    pub fn flags(self) -> NodeFlags {
        NodeFlags::from_bits_retain(u16::from_be_bytes(self.array(98)))
    }

    /// The node's secondary client port.
    #[inline]
    pub fn pport(self) -> u16 {
        u16::from_be_bytes(self.array(100))
    }
}

/// A gossip entry to send, kept in its 104-byte wire form so that encoding a message copies
/// all its entries at once; [`OwnedGossip::entry`] reads the fields back.
///
/// ```
/// use redis_cluster_bus::{NodeFlags, NodeId, OwnedGossip};
///
/// let node = NodeId(*b"e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca");
/// let gossip = OwnedGossip::new(node)
///     .with_ip(b"127.0.0.1")
///     .with_port(7001)
///     .with_cport(17001)
///     .with_flags(NodeFlags::MASTER);
/// assert_eq!(gossip.entry().ip(), b"127.0.0.1");
/// assert_eq!(gossip.entry().cport(), 17001);
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct OwnedGossip {
    bytes: [u8; GOSSIP_LEN],
}

impl OwnedGossip {
    /// An entry for `node`, every other field zero.
    #[inline]
    pub fn new(node: NodeId) -> Self {
        let mut bytes = [0; GOSSIP_LEN];
        bytes[..NodeId::LEN].copy_from_slice(&node.0);
        Self { bytes }
    }

    /// An entry as it was on the wire (the two unused bytes at its end included).
    #[inline]
    pub const fn from_bytes(bytes: [u8; GOSSIP_LEN]) -> Self {
        Self { bytes }
    }

    /// The wire form.
    #[inline]
    pub const fn as_bytes(&self) -> &[u8; GOSSIP_LEN] {
        &self.bytes
    }

    /// The fields, read as from a received entry.
    #[inline]
    pub const fn entry(&self) -> GossipEntry<'_> {
        GossipEntry::new(&self.bytes)
    }

    #[inline]
    fn with<const N: usize>(mut self, at: usize, value: [u8; N]) -> Self {
        if let Some(field) = self.bytes.get_mut(at..at + N) {
            field.copy_from_slice(&value);
        }
        self
    }

    /// Seconds (sender's clock) of the sender's unanswered ping to the node; 0 for none.
    #[inline]
    pub fn with_ping_sent(self, seconds: u32) -> Self {
        self.with(40, seconds.to_be_bytes())
    }

    /// Seconds (sender's clock) of the last pong from the node.
    #[inline]
    pub fn with_pong_received(self, seconds: u32) -> Self {
        self.with(44, seconds.to_be_bytes())
    }

    /// The node's address, zero-padded; cut to the 46-byte field when longer.
    #[inline]
    pub fn with_ip(self, ip: &[u8]) -> Self {
        let mut field = [0; 46];
        let n = ip.len().min(field.len());
        if let (Some(to), Some(from)) = (field.get_mut(..n), ip.get(..n)) {
            to.copy_from_slice(from);
        }
        self.with(48, field)
    }

    /// The node's client port.
    #[inline]
    pub fn with_port(self, port: u16) -> Self {
        self.with(94, port.to_be_bytes())
    }

    /// The node's bus port.
    #[inline]
    pub fn with_cport(self, cport: u16) -> Self {
        self.with(96, cport.to_be_bytes())
    }

    /// The sender's flags for the node.
    #[inline]
    pub fn with_flags(self, flags: NodeFlags) -> Self {
        self.with(98, flags.bits().to_be_bytes())
    }

    /// The node's secondary client port.
    #[inline]
    pub fn with_pport(self, pport: u16) -> Self {
        self.with(100, pport.to_be_bytes())
    }
}

impl From<GossipEntry<'_>> for OwnedGossip {
    #[inline]
    fn from(entry: GossipEntry<'_>) -> Self {
        Self::from_bytes(*entry.as_bytes())
    }
}

impl core::fmt::Debug for OwnedGossip {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        self.entry().fmt(f)
    }
}

/// The gossip entries of a message, in order.
#[derive(Clone, Debug)]
pub struct Gossip<'a> {
    entries: core::slice::ChunksExact<'a, u8>,
}

impl<'a> Gossip<'a> {
    #[inline]
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Self {
            entries: bytes.chunks_exact(GOSSIP_LEN),
        }
    }
}

impl<'a> Iterator for Gossip<'a> {
    type Item = GossipEntry<'a>;

    #[inline]
    fn next(&mut self) -> Option<GossipEntry<'a>> {
        self.entries
            .next()
            .and_then(|chunk| chunk.try_into().ok())
            .map(GossipEntry::new)
    }

    #[inline]
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.entries.size_hint()
    }
}

impl ExactSizeIterator for Gossip<'_> {}

impl core::fmt::Debug for GossipEntry<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("GossipEntry")
            .field("node", &self.node())
            .field("port", &self.port())
            .field("cport", &self.cport())
            .field("flags", &self.flags())
            .finish_non_exhaustive()
    }
}
