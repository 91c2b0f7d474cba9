//! What a node sends: the queue of outputs the driver drains, and the messages it builds
//! (its header, PINGs with their gossip, broadcasts), queued on the links that are up.

use alloc::{boxed::Box, vec::Vec};

use redis_cluster_bus::{MessageType, NodeId, OwnedHeader, OwnedMessage};
use redis_hash_slot::SlotSet;

use crate::{
    cluster::ClusterNode,
    output::{LinkId, Output, Queued},
};

impl ClusterNode {
    /// The next output, in the order they were produced. `buf` is cleared; for an
    /// [`Output::Transmit`] it then holds the message's bytes, to be written on each of its
    /// links.
    ///
    /// ```
    /// use redis_cluster_bus::{Message, MessageType};
    /// use redis_cluster_state::{ClusterNode, Config, Instant, Output};
    ///
    /// let mut node = ClusterNode::new(Config::new("127.0.0.1", 7000));
    /// node.meet("127.0.0.1", 7001, 17001, Instant::ZERO)?;
    /// node.handle_timeout(Instant::ZERO); // the cron asks for a link to the node met
    /// let mut buf = Vec::new();
    /// let link = std::iter::from_fn(|| node.poll_output(&mut buf))
    ///     .find_map(|o| match o {
    ///         Output::Connect { link, .. } => Some(link),
    ///         _ => None,
    ///     })
    ///     .ok_or("a connect")?;
    /// node.handle_connected(link, Instant::ZERO);
    /// let Some(Output::Transmit { links }) = node.poll_output(&mut buf) else {
    ///     return Err("a message".into());
    /// };
    /// assert_eq!(links, [link]);
    /// assert_eq!(Message::decode(&buf)?.kind(), MessageType::MEET);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn poll_output(&mut self, buf: &mut Vec<u8>) -> Option<Output> {
        buf.clear();
        match self.outputs.pop_front()? {
            Queued::Output(output) => Some(output),
            Queued::Message { links, message } => {
                buf.reserve(message.encoded_len());
                message.encode(buf);
                Some(Output::Transmit { links })
            }
        }
    }

    pub(crate) fn push(&mut self, output: Output) {
        // One save waiting is enough: the driver writes nodes.conf as it is when it gets
        // there, after every change of the same input.
        let save = |q: &Queued| matches!(q, Queued::Output(Output::SaveConfig));
        if matches!(output, Output::SaveConfig) && self.outputs.iter().any(save) {
            return;
        }
        self.outputs.push_back(Queued::Output(output));
    }

    /// Queues `message` for `links` (none: nothing is queued).
    fn push_message(&mut self, links: Vec<LinkId>, message: OwnedMessage) {
        if !links.is_empty() {
            self.outputs.push_back(Queued::Message {
                links,
                message: Box::new(message),
            });
        }
    }

    /// A message of type `kind` with this node's header and `body`, to every linked node
    /// (`clusterBroadcastMessage`).
    pub(crate) fn broadcast(&mut self, kind: MessageType, body: redis_cluster_bus::OwnedBody) {
        let me = self.myself().id;
        let linked: Vec<NodeId> = self
            .nodes()
            .filter(|n| n.link && n.id != me && !n.in_handshake())
            .map(|n| n.id)
            .collect();
        let mut links = Vec::with_capacity(linked.len());
        for to in linked {
            self.count_message(kind, true);
            links.extend(self.link_to(&to));
        }
        if !links.is_empty() {
            let message = OwnedMessage::new(kind, self.header(), body);
            self.push_message(links, message);
        }
    }

    /// Queues `message` on the outbound link to `id` when it is up (else the message is
    /// dropped, as the server sends nothing on a missing link).
    pub(crate) fn send_to(&mut self, id: &NodeId, message: OwnedMessage) {
        if let Some(link) = self.link_to(id) {
            self.push_message(alloc::vec![link], message);
        }
    }

    /// A PING, PONG or MEET to `id` on its outbound link. Without one nothing is built or
    /// counted, but a PING's time is recorded: it counts as sent for failure detection.
    pub(crate) fn ping_node(&mut self, id: &NodeId, kind: MessageType, now: u64) {
        match self.link_to(id) {
            Some(link) => self.send_ping(link, kind, now),
            None if kind == MessageType::PING => self.note_ping_sent(id, now),
            None => {}
        }
    }

    /// Builds and queues a PING, PONG or MEET with this node's header and gossip.
    pub(crate) fn send_ping(&mut self, link: LinkId, kind: MessageType, now: u64) {
        if kind == MessageType::PING {
            if let Some(id) = self.outbound_node(link) {
                self.note_ping_sent(&id, now);
            }
        }
        let ping = self.gossip_body();
        let message = OwnedMessage::new(kind, self.header(), ping);
        self.count_message(kind, true);
        self.push_message(alloc::vec![link], message);
    }

    /// Records a PING sent to `id` at `now` unless one is in flight. Written quietly, the
    /// node's new due time folded into the walk's, as a PONG's time is: as a new table
    /// version, every ping sent made the next cron tick walk the whole table (at N = 1000,
    /// two walks in three were for that).
    fn note_ping_sent(&mut self, id: &NodeId, now: u64) {
        if let Some(at) = self.topology.index_of(id) {
            if let Some(node) = self.topology.at_mut_quiet(at) {
                if node.ping_sent == 0 {
                    node.ping_sent = now;
                }
            }
            self.fold_due(at);
        }
    }

    /// This node's header: a replica advertises its master's slots and config epoch.
    pub(crate) fn header(&self) -> OwnedHeader {
        let me = self.myself();
        let master = me
            .master
            .as_ref()
            .and_then(|m| self.node(m))
            .filter(|_| me.is_replica());
        let myslots = match master {
            Some(master) => SlotSet::clone(&master.slots),
            None => SlotSet::clone(&me.slots),
        };
        OwnedHeader {
            port: me.port,
            current_epoch: self.current_epoch,
            config_epoch: self.my_epoch(),
            offset: me.repl_offset,
            sender: me.id,
            myslots,
            replicaof: master.map_or(NodeId::NONE, |m| m.id),
            myip: me.ip.as_bytes().to_vec(),
            pport: me.pport,
            cport: me.cport,
            flags: me.flags,
            state: u8::from(!self.health.ok()),
            mflags: self.header_mflags(),
        }
    }
}
