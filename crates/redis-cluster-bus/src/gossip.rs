//! [`GossipEntry`]: one 104-byte entry of a PING, PONG or MEET, read in place.

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
    pub const fn new(bytes: &'a [u8; GOSSIP_LEN]) -> Self {
        Self { bytes }
    }

    /// The entry's bytes.
    pub const fn as_bytes(self) -> &'a [u8; GOSSIP_LEN] {
        self.bytes
    }

    fn array<const N: usize>(self, at: usize) -> [u8; N] {
        crate::header::field_at(self.bytes, at)
    }

    /// The id of the node described.
    pub fn node(self) -> NodeId {
        NodeId(self.array(0))
    }

    /// Seconds (sender's clock) of the sender's unanswered ping to that node; 0 for none.
    pub fn ping_sent(self) -> u32 {
        u32::from_be_bytes(self.array(40))
    }

    /// Seconds (sender's clock) of the last pong the sender got from that node.
    pub fn pong_received(self) -> u32 {
        u32::from_be_bytes(self.array(44))
    }

    /// The node's address as the sender knows it, up to its NUL.
    pub fn ip(self) -> &'a [u8] {
        crate::header::until_nul(self.bytes.get(48..94).unwrap_or_default())
    }

    /// The node's client port.
    pub fn port(self) -> u16 {
        u16::from_be_bytes(self.array(94))
    }

    /// The node's bus port.
    pub fn cport(self) -> u16 {
        u16::from_be_bytes(self.array(96))
    }

    /// The sender's flags for that node.
    pub fn flags(self) -> NodeFlags {
        NodeFlags(u16::from_be_bytes(self.array(98)))
    }

    /// The node's secondary client port.
    pub fn pport(self) -> u16 {
        u16::from_be_bytes(self.array(100))
    }
}

/// The gossip entries of a message, in order.
#[derive(Clone, Debug)]
pub struct Gossip<'a> {
    entries: core::slice::ChunksExact<'a, u8>,
}

impl<'a> Gossip<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Self {
            entries: bytes.chunks_exact(GOSSIP_LEN),
        }
    }
}

impl<'a> Iterator for Gossip<'a> {
    type Item = GossipEntry<'a>;

    fn next(&mut self) -> Option<GossipEntry<'a>> {
        self.entries
            .next()
            .and_then(|chunk| chunk.try_into().ok())
            .map(GossipEntry::new)
    }

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
