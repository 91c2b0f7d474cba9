//! Bus links by handle: the state machine names every connection with a [`LinkId`] it hands
//! out, an outbound one when it asks for it ([`Output::Connect`]), an inbound one when the
//! driver accepts it ([`ClusterNode::handle_accepted`]). A handle never changes and is never
//! reused, so a driver keys its sockets by it and keeps no table of node ids: a handshake
//! node's link keeps its handle when the node's real id replaces the temporary one.

use redis_cluster_bus::{MessageType, NodeFlags, NodeId};

use crate::{
    cluster::ClusterNode,
    handles::Closed,
    output::{LinkId, Output},
    time::Instant,
};

impl ClusterNode {
    /// A connection a peer opened to this node: its handle, for
    /// [`ClusterNode::handle_message`] and [`ClusterNode::handle_link_down`].
    pub fn handle_accepted(&mut self, now: Instant) -> LinkId {
        self.tick(now);
        self.links.accept()
    }

    /// Asks the driver for an outbound link to the node at table index `at`.
    pub(crate) fn connect(&mut self, at: u16) {
        let Some(id) = self.topology.at(at).map(|n| n.id) else {
            return;
        };
        let link = self.links.open(id);
        let Some(node) = self.topology.at_mut(at) else {
            return;
        };
        node.connecting = true;
        node.outbound_link = Some(link);
        let (ip, cport) = (alloc::string::String::from(node.ip.as_str()), node.cport);
        self.push(Output::Connect {
            link,
            node: id,
            ip,
            cport,
        });
    }

    /// The outbound link that carries messages to `id` now, if it is up.
    pub(crate) fn link_to(&self, id: &NodeId) -> Option<LinkId> {
        self.node(id)
            .filter(|n| n.link)
            .and_then(|n| n.outbound_link)
    }

    /// The node an outbound `link` goes to (`None`: an inbound link, or one closed).
    pub(crate) fn outbound_node(&self, link: LinkId) -> Option<NodeId> {
        self.links.node(link)
    }

    /// A handshake node's link now goes to the node's real id.
    pub(crate) fn relink(&mut self, link: LinkId, to: NodeId) {
        self.links.relink(link, to);
    }

    /// Closes `id`'s outbound link (connected or connecting) and forgets its handle; tells
    /// the driver to close it when it was up, as the server frees a link.
    pub(crate) fn close_outbound(&mut self, id: &NodeId) {
        let Some(node) = self.node(id) else {
            return;
        };
        let (link, up) = (node.outbound_link, node.link);
        if let Some(node) = self.topology.node_mut(id) {
            node.link = false;
            node.connecting = false;
            node.outbound_link = None;
        }
        if let Some(link) = link {
            self.links.close(link);
            if up {
                self.push(Output::Close(link));
            }
        }
    }

    /// The outbound `link` is connected: the first message on it is a MEET for a node still
    /// to meet, else a PING. A link to a node forgotten meanwhile is closed.
    pub fn handle_connected(&mut self, link: LinkId, now: Instant) {
        let now = self.tick(now);
        let node = self.outbound_node(link);
        if node == Some(self.myself().id) {
            return;
        }
        let Some(entry) = node.and_then(|id| self.topology.node_mut(&id)) else {
            self.links.close(link);
            self.push(Output::Close(link));
            return;
        };
        entry.link = true;
        entry.connecting = false;
        entry.link_time = now;
        let meet = entry.flags.contains(NodeFlags::MEET);
        entry.set(NodeFlags::MEET, false);
        let kind = if meet {
            MessageType::MEET
        } else {
            MessageType::PING
        };
        self.send_ping(link, kind, now);
    }

    /// `link` closed, or failed to connect. A handle the state machine closed itself, or
    /// does not know, is ignored.
    pub fn handle_link_down(&mut self, link: LinkId, now: Instant) {
        let now = self.tick(now);
        let id = match self.links.close(link) {
            Closed::Outbound(id) => id,
            Closed::Unknown => return,
            Closed::Inbound => {
                for (_, node) in self.topology.enumerate_mut() {
                    if node.inbound_link == Some(link) {
                        node.inbound_link = None;
                    }
                }
                return;
            }
        };
        if let Some(node) = self.topology.node_mut(&id) {
            if !node.flags.contains(NodeFlags::MYSELF) {
                // The ping in flight stays: failure detection goes on without a link. A
                // connection that could not even open counts as a ping sent now, or a dead
                // node would never time out.
                if node.connecting && node.ping_sent == 0 {
                    node.ping_sent = now;
                }
                node.link = false;
                node.connecting = false;
                node.outbound_link = None;
            }
        }
    }
}
