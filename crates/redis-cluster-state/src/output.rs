//! What the state machine tells its driver: the [`Output`]s it queues after each input, the
//! [`Event`]s among them, and the [`LinkId`]s that name bus links.

use alloc::{boxed::Box, string::String, vec::Vec};
use core::{fmt, num::NonZeroU64};

use redis_cluster_bus::{NodeId, OwnedMessage};

#[cfg(doc)]
use crate::ClusterNode;

/// Something the driver must do, drained with [`ClusterNode::poll_output`] after each input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Output {
    /// Open a bus connection to `ip:cport` and name it `link`, then call
    /// [`ClusterNode::handle_connected`] (or [`ClusterNode::handle_link_down`] on failure).
    Connect {
        /// The handle of the new link.
        link: LinkId,
        /// The node it goes to, for logs (maybe a handshake node's temporary id).
        node: NodeId,
        /// Its IP.
        ip: String,
        /// Its bus port.
        cport: u16,
    },
    /// Write the message [`ClusterNode::poll_output`] encoded into the caller's buffer on
    /// each of `links`: a broadcast is one `Transmit` to every linked node, in id order,
    /// encoded once.
    Transmit {
        /// Where, never empty.
        links: Vec<LinkId>,
    },
    /// Close `link` (its node was forgotten, left the handshake as a duplicate, moved, or
    /// stopped answering on it). No [`ClusterNode::handle_link_down`] is due for it.
    Close(LinkId),
    /// The node table or the epochs changed: nodes.conf should be written again.
    SaveConfig,
    /// Something the driver may act on or log.
    Event(Event),
    /// A message published on another node arrived (PUBLISH, or PUBLISHSHARD from a node
    /// of this node's shard): the driver gives it to this node's subscribers of `channel`
    /// (pattern subscribers too, for PUBLISH), as the server does.
    Deliver {
        /// The channel.
        channel: Vec<u8>,
        /// The message.
        message: Vec<u8>,
        /// SPUBLISH's (to SSUBSCRIBE clients) rather than PUBLISH's.
        sharded: bool,
    },
}

/// An output as the node keeps it until it is polled: a message stays typed until it is
/// encoded into the caller's buffer.
#[derive(Clone, Debug)]
pub(crate) enum Queued {
    /// Anything but a message.
    Output(Output),
    /// A message for `links`.
    Message {
        links: Vec<LinkId>,
        message: Box<OwnedMessage>,
    },
}

/// What changed, for the driver: its replication, its logs, its blocked clients.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// `cluster_state` changed (`Cluster state changed: ok|fail`).
    StateChanged {
        /// Whether it is `ok` now.
        ok: bool,
    },
    /// This node became a replica of `master` (REPLICATE, a lost last slot, replica
    /// migration): the driver starts replicating from it.
    BecameReplica {
        /// The new master.
        master: NodeId,
    },
    /// This node became a master (an election won, a manual failover, a takeover): the
    /// driver stops replicating.
    BecameMaster,
    /// A node was flagged FAIL.
    NodeFailed {
        /// The node.
        node: NodeId,
    },
    /// A node's FAIL flag was cleared.
    NodeRecovered {
        /// The node.
        node: NodeId,
    },
}

/// The line a server would log for the event, in its words where it has some
/// (`Cluster state changed: ok`, `Marking node … as failing`, `Clear FAIL state for node …`).
///
/// ```
/// use redis_cluster_state::Event;
///
/// assert_eq!(Event::StateChanged { ok: false }.to_string(), "Cluster state changed: fail");
/// ```
impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::StateChanged { ok } => {
                write!(
                    f,
                    "Cluster state changed: {}",
                    if *ok { "ok" } else { "fail" }
                )
            }
            Self::BecameReplica { master } => {
                write!(f, "Reconfiguring myself as a replica of {master}")
            }
            Self::BecameMaster => f.write_str("Reconfiguring myself as a master"),
            Self::NodeFailed { node } => write!(f, "Marking node {node} as failing"),
            Self::NodeRecovered { node } => write!(f, "Clear FAIL state for node {node}"),
        }
    }
}

/// A bus connection, as the state machine names it to the driver.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LinkId(NonZeroU64);

impl LinkId {
    /// The handle numbered `n` (handles start at 1).
    pub(crate) const fn new(n: NonZeroU64) -> Self {
        Self(n)
    }

    /// The handle's number, for logs.
    pub const fn get(self) -> u64 {
        self.0.get()
    }
}

impl fmt::Debug for LinkId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LinkId({})", self.0)
    }
}

impl fmt::Display for LinkId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "link {}", self.0)
    }
}
