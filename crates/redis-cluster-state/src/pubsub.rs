//! Pub/Sub across the cluster (format section 6.3): what PUBLISH and SPUBLISH on this node
//! send on the bus, and what arrives from the others. Subscriptions are the driver's: the
//! state machine only says where a message goes and what came in ([`Output::Deliver`]).

use alloc::vec::Vec;

use redis_cluster_bus::{MessageType, NodeId, OwnedBody, OwnedMessage, OwnedPublish, Publish};

use redis_hash_slot::Slot;

use crate::{cluster::ClusterNode, output::Output, time::Instant};

impl ClusterNode {
    /// PUBLISH on this node: the message goes to every node this node has a link to
    /// (`clusterPropagatePublish`), each of which gives it to its own subscribers. The
    /// driver delivers it to this node's subscribers itself.
    ///
    /// ```
    /// use redis_cluster_state::{ClusterNode, Config, Instant, Output};
    ///
    /// let mut node = ClusterNode::new(Config::new("127.0.0.1", 7000));
    /// node.publish(b"news", b"hello", Instant::ZERO);
    /// // A node alone sends it nowhere.
    /// assert!(!core::iter::from_fn(|| node.poll_output(&mut Vec::new())).any(|o| matches!(o, Output::Transmit { .. })));
    /// ```
    pub fn publish(&mut self, channel: &[u8], message: &[u8], now: Instant) {
        self.tick(now);
        let body = OwnedBody::Publish(OwnedPublish {
            channel: channel.to_vec(),
            message: message.to_vec(),
        });
        self.broadcast(MessageType::PUBLISH, body);
    }

    /// SPUBLISH on this node (which serves the channel's slot): the message goes to the
    /// other nodes of its shard, its master or its replicas (`clusterPropagatePublishShard`).
    pub fn publish_shard(&mut self, channel: &[u8], message: &[u8], now: Instant) {
        self.tick(now);
        let Some(master) = self.shard_master() else {
            return;
        };
        let myself = self.myself().id;
        let shard: Vec<NodeId> = self
            .nodes()
            .filter(|n| n.id == master || n.master == Some(master))
            .filter(|n| n.id != myself && n.link && !n.in_handshake())
            .map(|n| n.id)
            .collect();
        let body = OwnedBody::Publish(OwnedPublish {
            channel: channel.to_vec(),
            message: message.to_vec(),
        });
        for to in shard {
            let message = OwnedMessage::new(MessageType::PUBLISHSHARD, self.header(), body.clone());
            self.count_message(MessageType::PUBLISHSHARD, true);
            self.send_to(&to, message);
        }
    }

    /// The master of this node's shard: itself as a master, its master as a replica (none
    /// for a replica whose master is not known).
    fn shard_master(&self) -> Option<NodeId> {
        let me = self.myself();
        if me.is_replica() {
            me.master
        } else {
            Some(me.id)
        }
    }

    /// Whether this node's shard serves `slot`: its master owns it, this node being that
    /// master or one of its replicas (the server's `clusterGetNodesServingMySlots`). When a
    /// slot leaves the shard the server drops its shard channels and tells each subscriber
    /// with `sunsubscribe`; a driver asks this after the cluster changed and does the same.
    ///
    /// ```
    /// use redis_cluster_state::{ClusterNode, Config, Instant};
    /// use redis_hash_slot::{Slot, key_slot};
    ///
    /// let mut node = ClusterNode::new(Config::new("127.0.0.1", 7000));
    /// let slot = key_slot(b"orders");
    /// assert!(!node.serves_slot(slot));
    /// node.add_slots([slot], Instant::ZERO).unwrap();
    /// assert!(node.serves_slot(slot));
    /// ```
    pub fn serves_slot(&self, slot: Slot) -> bool {
        let master = self.shard_master();
        master.is_some() && self.owner(slot).map(|n| n.id) == master
    }

    /// A PUBLISH or PUBLISHSHARD that arrived: for this node's subscribers.
    pub(crate) fn deliver(&mut self, publish: &Publish<'_>) {
        self.push(Output::Deliver {
            channel: publish.channel().to_vec(),
            message: publish.message().to_vec(),
            sharded: publish.kind() == MessageType::PUBLISHSHARD,
        });
    }
}
