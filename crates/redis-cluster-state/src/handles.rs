//! [`Links`]: the bus link handles the node gave out and has not closed, each outbound one
//! with the node it goes to. Pure data: `link.rs` decides when links open and close.

use alloc::collections::{BTreeMap, BTreeSet};
use core::num::NonZeroU64;

use redis_cluster_bus::NodeId;

use crate::output::LinkId;

/// The handles given out and not yet closed: each outbound link with its node, and the
/// inbound links.
#[derive(Clone, Debug, Default)]
pub(crate) struct Links {
    /// The last handle given out.
    last: u64,
    /// Each outbound link's node (a handshake node's link follows its rename).
    outbound: BTreeMap<LinkId, NodeId>,
    inbound: BTreeSet<LinkId>,
}

impl Links {
    /// A new handle, never given out before.
    fn next(&mut self) -> LinkId {
        self.last = self.last.saturating_add(1);
        LinkId::new(NonZeroU64::new(self.last).unwrap_or(NonZeroU64::MAX))
    }

    /// A new outbound link to `node`.
    pub(crate) fn open(&mut self, node: NodeId) -> LinkId {
        let link = self.next();
        self.outbound.insert(link, node);
        link
    }

    /// A new inbound link.
    pub(crate) fn accept(&mut self) -> LinkId {
        let link = self.next();
        self.inbound.insert(link);
        link
    }

    /// Whether `link` is open, either way.
    pub(crate) fn is_open(&self, link: LinkId) -> bool {
        self.outbound.contains_key(&link) || self.inbound.contains(&link)
    }

    /// The node an outbound link goes to.
    pub(crate) fn node(&self, link: LinkId) -> Option<NodeId> {
        self.outbound.get(&link).copied()
    }

    /// An outbound link now goes to `to` (a handshake node's real id replaced its own).
    pub(crate) fn relink(&mut self, link: LinkId, to: NodeId) {
        if let Some(id) = self.outbound.get_mut(&link) {
            *id = to;
        }
    }

    /// Forgets `link`; for an outbound one, returns its node.
    pub(crate) fn close(&mut self, link: LinkId) -> Closed {
        match self.outbound.remove(&link) {
            Some(node) => Closed::Outbound(node),
            None if self.inbound.remove(&link) => Closed::Inbound,
            None => Closed::Unknown,
        }
    }
}

/// What [`Links::close`] closed.
pub(crate) enum Closed {
    /// An outbound link, to this node.
    Outbound(NodeId),
    /// An inbound link.
    Inbound,
    /// No link it knew.
    Unknown,
}
