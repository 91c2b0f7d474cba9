//! Automatic failover (semantics 4.1): a replica of a FAIL master schedules an election after
//! a rank-dependent delay, asks the masters for votes, and takes its master's slots when a
//! majority grants them; a master votes by the server's rules.

use alloc::vec::Vec;

use redis_cluster_bus::{Failover, MessageType, NodeFlags, NodeId, OwnedBody, OwnedMessage};
use redis_hash_slot::Slot;

use crate::{
    bus::{Link, Output},
    cluster::ClusterNode,
};

/// A replica's election in progress.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Election {
    /// When the request goes out (ms); 0 when none is scheduled.
    pub(crate) time: u64,
    /// Whether the request went out.
    pub(crate) sent: bool,
    /// The replica's rank among its siblings when scheduled.
    pub(crate) rank: usize,
    /// Votes received.
    pub(crate) votes: usize,
    /// The epoch the request carried.
    pub(crate) epoch: u64,
}

/// `repl-ping-replica-period` of Redis 7.0, in ms: part of the data-age limit.
const REPL_PING_PERIOD: u64 = 10_000;

impl ClusterNode {
    /// The number of sibling replicas (not `nofailover`) with a strictly greater replication
    /// offset than this node's: its place in the election queue.
    fn failover_rank(&self, master: &NodeId) -> usize {
        let me = self.myself();
        self.replicas_of(master)
            .filter(|r| r.id != me.id && !r.flags.contains(NodeFlags::NOFAILOVER))
            .filter(|r| r.repl_offset > me.repl_offset)
            .count()
    }

    /// `clusterHandleSlaveFailover`, run by the cron and after each vote.
    pub(crate) fn handle_failover(&mut self, now: u64) {
        let me = self.myself();
        let Some(master_id) = me.master.filter(|_| me.is_replica()) else {
            return;
        };
        let Some(master) = self.node(&master_id) else {
            return;
        };
        if !master.is_failed() || master.slots.is_empty() || self.config.replica_no_failover {
            return;
        }
        let timeout = self.config.node_timeout;
        let auth_timeout = (timeout * 2).max(2000);
        let auth_retry = auth_timeout * 2;
        // 1. Data too old: the last interaction with the master is the last PONG from it.
        let data_age = now
            .saturating_sub(master.pong_received)
            .saturating_sub(timeout);
        let factor = u64::from(self.config.replica_validity_factor);
        if factor != 0 && data_age > REPL_PING_PERIOD + timeout * factor {
            return;
        }
        // 2. Schedule an election when the last attempt is old enough.
        let previous = self.election.time;
        if previous == 0 || now.saturating_sub(previous) > auth_retry {
            let rank = self.failover_rank(&master_id);
            let jitter = self.rng_next() % 500;
            self.election = Election {
                time: now + 500 + jitter + rank as u64 * 1000,
                sent: false,
                rank,
                votes: 0,
                epoch: 0,
            };
            // Siblings learn this node's offset.
            let siblings: Vec<NodeId> = self
                .replicas_of(&master_id)
                .filter(|r| r.link && r.id != self.myself().id)
                .map(|r| r.id)
                .collect();
            for sibling in siblings {
                self.send_ping(Link::Outbound(sibling), MessageType::PONG, now);
            }
            return;
        }
        // 3. A worse rank before the request: later.
        if !self.election.sent {
            let rank = self.failover_rank(&master_id);
            if rank > self.election.rank {
                self.election.time += (rank - self.election.rank) as u64 * 1000;
                self.election.rank = rank;
            }
        }
        // 4. Not yet, or expired.
        if now < self.election.time || now - self.election.time > auth_timeout {
            return;
        }
        // 5. The request.
        if !self.election.sent {
            self.current_epoch += 1;
            self.election.epoch = self.current_epoch;
            self.election.sent = true;
            self.broadcast(MessageType::FAILOVER_AUTH_REQUEST, now);
            self.push(Output::SaveConfig);
            return;
        }
        // 7. Won?
        if self.election.votes >= self.quorum() {
            self.win_election(master_id, now);
        }
    }

    /// A message with this node's header and no body, to every linked node.
    fn broadcast(&mut self, kind: MessageType, now: u64) {
        let _ = now;
        let me = self.myself().id;
        let linked: Vec<NodeId> = self
            .nodes()
            .filter(|n| n.link && n.id != me && !n.in_handshake())
            .map(|n| n.id)
            .collect();
        for to in linked {
            let message = OwnedMessage::new(kind, self.header(), OwnedBody::Failover);
            self.count_message(kind.0, true);
            self.push(Output::Send {
                link: Link::Outbound(to),
                message,
            });
        }
    }

    /// Step 7, the election won: master now, with the election epoch as config epoch and
    /// every slot of the old master, then a PONG to everyone.
    fn win_election(&mut self, old_master: NodeId, now: u64) {
        let epoch = self.election.epoch;
        {
            let me = self.myself_mut();
            me.set(NodeFlags::REPLICA, false);
            me.set(NodeFlags::MASTER, true);
            me.master = None;
            if epoch > me.config_epoch {
                me.config_epoch = epoch;
            }
        }
        let slots: Vec<Slot> = self
            .node(&old_master)
            .map(|n| n.slots.iter().collect())
            .unwrap_or_default();
        let me = self.myself;
        for slot in slots {
            self.bind(slot, Some(me));
        }
        self.election = Election::default();
        self.update_state();
        self.push(Output::SaveConfig);
        let linked: Vec<NodeId> = self
            .nodes()
            .filter(|n| n.link && !n.flags.contains(NodeFlags::MYSELF) && !n.in_handshake())
            .map(|n| n.id)
            .collect();
        for to in linked {
            self.send_ping(Link::Outbound(to), MessageType::PONG, now);
        }
    }

    /// A FAILOVER_AUTH_REQUEST from a known node: the vote, by every rule of the server.
    pub(crate) fn handle_auth_request(&mut self, request: &Failover<'_>, now: u64) {
        let header = request.header();
        let me = self.myself();
        if !me.is_master() || me.slots.is_empty() {
            return;
        }
        let requester = header.sender();
        if header.current_epoch() < self.current_epoch || self.last_vote_epoch == self.current_epoch
        {
            return;
        }
        let Some(master_id) = header.replicaof() else {
            return; // not a replica
        };
        let force = header
            .message_flags()
            .contains(redis_cluster_bus::MessageFlags::FORCEACK);
        let Some(master) = self.node(&master_id) else {
            return;
        };
        if !master.is_failed() && !force {
            return;
        }
        let timeout = self.config.node_timeout;
        if master.voted_time != 0 && now.saturating_sub(master.voted_time) < timeout * 2 {
            return;
        }
        let request_epoch = header.config_epoch();
        for slot in header.myslots().iter() {
            if self
                .owner(slot)
                .is_some_and(|o| o.config_epoch > request_epoch)
            {
                return;
            }
        }
        self.last_vote_epoch = self.current_epoch;
        if let Some(master) = self.node_mut(&master_id) {
            master.voted_time = now;
        }
        self.push(Output::SaveConfig);
        let message = OwnedMessage::new(
            MessageType::FAILOVER_AUTH_ACK,
            self.header(),
            OwnedBody::Failover,
        );
        self.count_message(MessageType::FAILOVER_AUTH_ACK.0, true);
        self.push(Output::Send {
            link: Link::Outbound(requester),
            message,
        });
    }

    /// A FAILOVER_AUTH_ACK: a vote, if from a slot-owning master in this election's epoch.
    pub(crate) fn handle_auth_ack(&mut self, ack: &Failover<'_>, now: u64) {
        let header = ack.header();
        let voter = self
            .node(&header.sender())
            .is_some_and(|n| n.is_master() && !n.slots.is_empty());
        if voter && self.election.sent && header.current_epoch() >= self.election.epoch {
            self.election.votes += 1;
            self.handle_failover(now);
        }
    }
}
