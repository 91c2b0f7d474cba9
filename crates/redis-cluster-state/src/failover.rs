//! Automatic failover (semantics 4.1): a replica of a FAIL master schedules an election after
//! a rank-dependent delay, asks the masters for votes, and takes its master's slots when a
//! majority grants them; a master votes by the server's rules.

use alloc::{vec, vec::Vec};

use redis_cluster_bus::{Failover, MessageType, NodeFlags, NodeId, OwnedBody, OwnedMessage};
use redis_hash_slot::Slot;

use crate::{
    cluster::ClusterNode,
    election::{Election, FailoverMode, Manual},
    error::CommandError,
    output::Output,
    time::{Duration, Instant},
    timers::Timer,
};

/// How long a manual failover may take (`CLUSTER_MF_TIMEOUT`).
const MANUAL_TIMEOUT: Duration = Duration::from_millis(5_000);

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
        let manual = self.manual_asked() && self.manual.can_start();
        if (!master.is_failed() && !manual) || !master.has_slots() {
            return;
        }
        if self.config.replica_no_failover && !manual {
            return;
        }
        let timeout = self.config.node_timeout.as_millis();
        let auth_timeout = (timeout * 2).max(2000);
        let auth_retry = auth_timeout * 2;
        // 1. Data too old: the last interaction with the master is the last PONG from it.
        let data_age = now
            .saturating_sub(master.pong_received)
            .saturating_sub(timeout);
        let factor = u64::from(self.config.replica_validity_factor);
        if !manual && factor != 0 && data_age > REPL_PING_PERIOD + timeout * factor {
            return;
        }
        // 2. Schedule an election when the last attempt is old enough. While a manual
        // failover was asked for (its deadline set, even before the master paused), there is
        // no delay and no rank: a master that failed meanwhile is replaced at once, as the
        // server's `mf_end` check does.
        let asked = self.manual_asked();
        let at = Instant::from_millis(now);
        let retry = Duration::from_millis(auth_retry);
        if self.election.may_retry(at, retry) {
            let rank = if asked {
                0
            } else {
                self.failover_rank(&master_id)
            };
            let jitter = self.rng_next() % 500;
            let delay = if asked {
                0
            } else {
                500 + jitter + rank as u64 * 1000
            };
            let start = at + Duration::from_millis(delay);
            self.timers.set(Timer::Election, start);
            self.election = Election::schedule(start, rank);
            // Siblings learn this node's offset.
            let siblings: Vec<NodeId> = self
                .replicas_of(&master_id)
                .filter(|r| r.link && r.id != self.myself().id)
                .map(|r| r.id)
                .collect();
            for sibling in siblings {
                self.ping_node(&sibling, MessageType::PONG, now);
            }
            if !asked {
                return;
            }
        }
        // 3. A worse rank before the request: later.
        if !self.election.requested() && !asked {
            let rank = self.failover_rank(&master_id);
            if let Some(start) = self.election.rerank(rank) {
                self.timers.set(Timer::Election, start);
            }
        }
        // 4. Not yet, or expired.
        let Some(start) = self.election.start() else {
            return;
        };
        if at < start || at - start > Duration::from_millis(auth_timeout) {
            return;
        }
        // 5. The request.
        if !self.election.requested() {
            self.timers.stop(Timer::Election);
            self.current_epoch += 1;
            self.election.request(self.current_epoch);
            self.broadcast(MessageType::FAILOVER_AUTH_REQUEST, OwnedBody::Failover);
            self.push(Output::SaveConfig);
            return;
        }
        // 7. Won?
        if self.election.votes() >= self.quorum() {
            self.win_election(master_id, now);
        }
    }

    /// Step 7, the election won: master now, with the election epoch as config epoch and
    /// every slot of the old master, then a PONG to everyone.
    fn win_election(&mut self, old_master: NodeId, now: u64) {
        self.push(Output::Event(crate::output::Event::BecameMaster));
        let epoch = self.election.epoch();
        {
            let me = self.topology.myself_mut();
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
        let me = self.topology.me();
        for slot in slots {
            self.bind(slot, Some(me));
        }
        self.reset_election();
        self.end_manual();
        self.refresh_state();
        self.push(Output::SaveConfig);
        let linked: Vec<NodeId> = self
            .nodes()
            .filter(|n| n.link && !n.flags.contains(NodeFlags::MYSELF) && !n.in_handshake())
            .map(|n| n.id)
            .collect();
        for to in linked {
            self.ping_node(&to, MessageType::PONG, now);
        }
    }

    /// A FAILOVER_AUTH_REQUEST from a known node: the vote, by every rule of the server.
    pub(crate) fn handle_auth_request(&mut self, request: &Failover<'_>, now: u64) {
        let header = request.header();
        let me = self.myself();
        if !me.is_master() || !me.has_slots() {
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
        let timeout = self.config.node_timeout.as_millis();
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
        if let Some(master) = self.topology.node_mut(&master_id) {
            master.voted_time = now;
        }
        self.push(Output::SaveConfig);
        let message = OwnedMessage::new(
            MessageType::FAILOVER_AUTH_ACK,
            self.header(),
            OwnedBody::Failover,
        );
        self.count_message(MessageType::FAILOVER_AUTH_ACK, true);
        self.send_to(&requester, message);
    }

    /// A FAILOVER_AUTH_ACK: a vote, if from a slot-owning master in this election's epoch.
    pub(crate) fn handle_auth_ack(&mut self, ack: &Failover<'_>, now: u64) {
        let header = ack.header();
        let voter = self
            .node(&header.sender())
            .is_some_and(|n| n.is_master() && n.has_slots());
        if voter && self.election.vote(header.current_epoch()) {
            self.handle_failover(now);
        }
    }
}

impl ClusterNode {
    /// `CLUSTER FAILOVER [FORCE|TAKEOVER]` on a replica (semantics 4.2). Replies at once;
    /// the failover completes (or times out after 5 s) as messages come and go.
    pub fn failover(&mut self, mode: FailoverMode, now: Instant) -> Result<(), CommandError> {
        let now = self.tick(now);
        let me = self.myself();
        if !me.is_replica() {
            return Err(CommandError::FailoverOnMaster);
        }
        let Some(master) = me.master.and_then(|m| self.node(&m)) else {
            return Err(CommandError::MasterUnknown);
        };
        let master_id = master.id;
        if mode == FailoverMode::Default && (master.is_failed() || !master.link) {
            return Err(CommandError::MasterDown);
        }
        self.start_manual(Manual::default(), Instant::from_millis(now));
        self.reset_election();
        match mode {
            FailoverMode::Takeover => {
                // No election: a new config epoch of our own, then the slots.
                self.bump_epoch(Instant::from_millis(now));
                self.election = Election::take_over(self.myself().config_epoch);
                self.win_election(master_id, now);
            }
            FailoverMode::Force => {
                self.manual = Manual::forced();
                self.handle_failover(now);
            }
            FailoverMode::Default => {
                let message =
                    OwnedMessage::new(MessageType::MFSTART, self.header(), OwnedBody::Failover);
                self.count_message(MessageType::MFSTART, true);
                self.send_to(&master_id, message);
            }
        }
        Ok(())
    }

    /// Whether this master holds writes back for a manual failover (its clients' writes wait
    /// until it ends or times out).
    pub fn writes_paused(&self, now: Instant) -> bool {
        let end = self.timers.get(Timer::ManualFailover);
        self.myself().is_master()
            && self.manual.replica().is_some()
            && end.is_some_and(|end| now < end)
    }

    /// The `mflags` this node's headers carry: PAUSED on a master in a manual failover,
    /// FORCEACK on a replica's vote request during one.
    pub(crate) fn header_mflags(&self) -> [u8; 3] {
        let me = self.myself();
        let mut flags = 0;
        if me.is_master() && self.manual.replica().is_some() {
            flags |= redis_cluster_bus::MessageFlags::PAUSED.bits();
        }
        if me.is_replica() && self.manual_asked() {
            flags |= redis_cluster_bus::MessageFlags::FORCEACK.bits();
        }
        [flags, 0, 0]
    }

    /// MFSTART from one of this master's replicas: pause, and ping it at once.
    pub(crate) fn handle_mfstart(&mut self, from: &NodeId, now: u64) {
        let me = self.myself();
        let own_replica = self
            .node(from)
            .is_some_and(|n| n.master == Some(me.id) && n.is_replica());
        if !me.is_master() || !own_replica {
            return;
        }
        self.start_manual(Manual::for_replica(*from), Instant::from_millis(now));
        self.ping_node(from, MessageType::PING, now);
    }

    /// On the replica, a header from its master: once it says PAUSED, its offset is the one
    /// to reach; reached (the driver's replication keeps this node's offset), the election
    /// may start.
    pub(crate) fn manual_progress(&mut self, from: &NodeId, paused: bool, offset: u64, now: u64) {
        let me = self.myself();
        if !self.manual_asked() || !me.is_replica() || me.master != Some(*from) {
            return;
        }
        let mine = me.repl_offset;
        if self.manual.progress(paused, offset, mine) {
            self.handle_failover(now);
        }
    }

    /// Whether a manual failover is under way (asked for on a replica, or paused for on a
    /// master), until its end.
    pub(crate) fn manual_asked(&self) -> bool {
        self.timers.is_set(Timer::ManualFailover)
    }

    /// A manual failover begins at `now`: it ends after [`MANUAL_TIMEOUT`] unless it
    /// completes first. The timer fires the first millisecond after the timeout, as the
    /// server's `mf_end < now` test ends it.
    fn start_manual(&mut self, manual: Manual, now: Instant) {
        self.manual = manual;
        let end = now + MANUAL_TIMEOUT + Duration::from_millis(1);
        self.timers.set(Timer::ManualFailover, end);
    }

    /// A manual failover ends: completed, abandoned at its end, or overtaken by a role
    /// change.
    pub(crate) fn end_manual(&mut self) {
        self.manual = Manual::default();
        self.timers.stop(Timer::ManualFailover);
    }

    /// No election under way any more.
    fn reset_election(&mut self) {
        self.election = Election::default();
        self.timers.stop(Timer::Election);
    }

    /// The cron's part: a paused master pings its replica every tick.
    pub(crate) fn manual_cron(&mut self, now: u64) {
        if let Some(replica) = self.manual.replica() {
            self.ping_node(&replica, MessageType::PING, now);
        }
    }
}

/// How long a master must stay orphaned before a replica migrates to it (ms).
const MIGRATION_DELAY: u64 = 5_000;

impl ClusterNode {
    /// Replica migration (semantics 4.3), from the cron: a replica whose master has the most
    /// healthy replicas (at least two, and more than the migration barrier), and the smallest
    /// id among those masters' replicas, moves to a master orphaned for more than 5 s.
    ///
    /// One walk of the table counts every master's healthy replicas: the cron runs this ten
    /// times a second on every replica, so a count per master would cost O(N²) a tick. A
    /// walk that found no orphaned master is not repeated until the table or the cluster
    /// state changes: it would find none again (only an orphan's wait depends on time).
    pub(crate) fn handle_replica_migration(&mut self, now: u64) {
        if self
            .walks
            .no_orphans(self.topology.version(), self.health.ok())
        {
            return;
        }
        let me = self.myself();
        let Some(my_master) = me.master.filter(|_| me.is_replica()) else {
            return;
        };
        // Healthy replicas per master, by table index.
        let mut ok = vec![0usize; self.topology.capacity()];
        for node in self.topology.table() {
            if node.is_replica() && !node.is_failed() {
                if let Some(at) = node.master.as_ref().and_then(|m| self.topology.index_of(m)) {
                    ok[usize::from(at)] += 1;
                }
            }
        }
        let mut max = 0;
        let mut orphan = None;
        for (at, node) in self.topology.enumerate_mut() {
            if !node.is_master() {
                continue;
            }
            max = max.max(ok[usize::from(at)]);
            let orphaned = !node.is_failed()
                && node.flags.contains(NodeFlags::MIGRATE_TO)
                && ok[usize::from(at)] == 0
                && node.has_slots();
            if !orphaned {
                node.orphaned_time = 0;
            } else {
                if node.orphaned_time == 0 {
                    node.orphaned_time = now;
                }
                // The first orphan in id order, as the server's walk finds it.
                if orphan.is_none_or(|(id, _)| node.id < id) {
                    orphan = Some((node.id, node.orphaned_time));
                }
            }
        }
        let none = orphan
            .is_none()
            .then(|| (self.topology.version(), self.health.ok()));
        self.walks.orphans_looked(none);
        let mine = self
            .topology
            .index_of(&my_master)
            .map_or(0, |at| ok[usize::from(at)]);
        let allowed = self.config.allow_replica_migration && self.health.ok();
        if !allowed || max < 2 || mine != max || mine <= self.config.migration_barrier as usize {
            return;
        }
        let Some((target, since)) = orphan else {
            return;
        };
        // The candidate: the smallest id among the replicas of the masters with `max`.
        let candidate = self
            .topology
            .table()
            .filter(|r| r.is_replica())
            .filter(|r| {
                let master = r.master.as_ref().and_then(|m| self.topology.index_of(m));
                master.is_some_and(|at| {
                    ok[usize::from(at)] == max
                        && self.topology.at(at).is_some_and(|m| m.is_master())
                })
            })
            .map(|r| r.id)
            .min();
        if candidate == Some(self.myself().id) && now.saturating_sub(since) > MIGRATION_DELAY {
            self.set_my_master(target);
            self.push(Output::SaveConfig);
        }
    }
}
