//! The timers and the 100 ms cron (`clusterCron`): handshake expiry, the links to open and
//! reset, the pings the cron sends, PFAIL, and the cron's shortcut of walking the table only
//! when something changed or a node's time came.

use alloc::vec::Vec;

use redis_cluster_bus::{MessageType, NodeFlags, NodeId};

use crate::{
    cluster::ClusterNode,
    node::Node,
    time::{Duration, Instant},
    timers::Timer,
};

/// The cron period: `clusterCron` runs ten times a second.
pub const CRON_MS: u64 = 100;

impl ClusterNode {
    /// When [`ClusterNode::handle_timeout`] wants to run next (calling it earlier is
    /// harmless).
    pub fn poll_timeout(&self) -> Instant {
        self.timers.next().unwrap_or(Instant::NEVER)
    }

    /// Fires the timers that are due (calling it early is harmless): a manual failover
    /// that timed out ends, the cron runs, and a scheduled vote request goes out.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.tick(now);
        for timer in Timer::ALL {
            if !self.timers.fire(timer, now) {
                continue;
            }
            let ms = now.as_millis();
            match timer {
                Timer::ManualFailover => self.end_manual(),
                Timer::Cron => {
                    self.timers
                        .set(Timer::Cron, now + Duration::from_millis(CRON_MS));
                    self.cron(ms);
                }
                Timer::Election => self.handle_failover(ms),
            }
        }
    }

    /// The 100 ms cron (`clusterCron`): handshake timeouts, connections to open, pings (a
    /// random one every second, and any node whose PONG is older than half the node timeout),
    /// PFAIL, and the cluster state.
    fn cron(&mut self, now: u64) {
        self.health.cron_ran(Instant::from_millis(now));
        let once_a_second = self.walks.tick();
        // Once a second: of five random linked nodes without a ping in flight, the one with
        // the oldest PONG. Drawn before the walk below, which cannot change what it looks
        // at (the walk only removes handshake nodes and connects unlinked ones: neither is
        // ever chosen), so this is the server's order of effects.
        if once_a_second {
            self.random_ping(now);
        }
        // The walk acts on a node only when its time comes (its PONG older than half the
        // timeout, its ping older than the timeout, its handshake expired) or when
        // something in the table changed since the last walk (a mutable access): otherwise
        // it would do nothing, and at a thousand nodes it is most of a quiet second's cost.
        if self.walks.due(self.topology.version(), now) {
            let (due, pfail_nodes) = self.walk(now);
            self.walks.walked(self.topology.version(), due, pfail_nodes);
        }
        self.manual_cron(now);
        self.handle_failover(now);
        self.handle_replica_migration(now);
        // As the server's cron: the state again when something it depends on changed (a
        // PFAIL mark here; slot owners, FAIL marks and roles flag it where they change),
        // and on every tick while the cluster is down (its delays run out with time).
        if self.health.due() {
            self.refresh_state();
        }
    }

    /// Makes the cron walk the node table on every tick, as the server's does, instead of
    /// only when the table changed or a node's time came (and replica migration look for
    /// orphans on every tick too). The outputs are the same either way — the simulator's
    /// tests run both and compare — so this is for such comparisons; it costs the walks.
    pub fn set_walk_every_tick(&mut self, on: bool) {
        self.walks.set_every_tick(on);
    }

    /// The cron's walk of the table, by index (no id look-ups), doing what the server's two
    /// walks do: handshakes that expired, connections to open, pings to nodes whose PONG is
    /// older than half the node timeout, PFAIL for pings older than the timeout from nodes
    /// not heard from for as long, resets of stuck links, and the count of PFAIL nodes.
    /// Returns the first time at which a node will be due for one of those if nothing
    /// changes meanwhile, and the PFAIL nodes counted.
    fn walk(&mut self, now: u64) -> (u64, usize) {
        let timeout = self.config.node_timeout.as_millis();
        let handshake_ttl = timeout.max(1000);
        let me = self.topology.me();
        let mut pfail_nodes = 0;
        let mut due = u64::MAX;
        for at in 0..self.topology.capacity() {
            let Ok(at) = u16::try_from(at) else { break };
            let Some(node) = self.topology.at(at) else {
                continue;
            };
            if at == me {
                continue;
            }
            if node.in_handshake() && now.saturating_sub(node.ctime) > handshake_ttl {
                let id = node.id;
                self.remove_node(&id);
                continue;
            }
            if !node.in_handshake() && link_stuck(node, now, timeout) {
                // Our PING has waited half the node timeout on a link older than the
                // timeout, and nothing at all came from the node meanwhile: the link is
                // closed and opened again (below), as the server's cron frees it; the new
                // link's PING keeps the old ping time. A peer that dropped our PING (a drop
                // filter since lifted, a lost connection) hears from us again.
                let id = node.id;
                self.close_outbound(&id);
            }
            let Some(node) = self.topology.at(at) else {
                continue;
            };
            if !node.link && !node.connecting && !node.flags.contains(NodeFlags::NOADDR) {
                self.connect(at);
            }
            let Some(node) = self.topology.at(at) else {
                continue;
            };
            if !node.in_handshake() {
                let idle = now.saturating_sub(node.pong_received) > timeout / 2;
                if node.link && node.ping_sent == 0 && idle {
                    let id = node.id;
                    self.ping_node(&id, MessageType::PING, now);
                } else {
                    // A ping in flight for longer than the node timeout, link or not, and
                    // nothing else heard from the node for as long: PFAIL (the server's
                    // `min(ping_delay, data_delay) > node_timeout`).
                    let late = node.ping_sent != 0
                        && now.saturating_sub(node.ping_sent) > timeout
                        && now.saturating_sub(node.data_received) > timeout;
                    if late && !node.is_pfailed() && !node.is_failed() {
                        if let Some(node) = self.topology.at_mut(at) {
                            node.set(NodeFlags::PFAIL, true);
                        }
                        self.health.mark_stale();
                    }
                }
            }
            let Some(node) = self.topology.at(at) else {
                continue;
            };
            pfail_nodes += usize::from(node.is_pfailed());
            due = due.min(due_time(node, timeout));
        }
        (due, pfail_nodes)
    }

    /// Brings the cron's next walk forward to the due time of the node at `at`, after a
    /// quiet write of its ping or pong time (one that made no new table version).
    pub(crate) fn fold_due(&mut self, at: u16) {
        if at == self.topology.me() {
            return;
        }
        if let Some(node) = self.topology.at(at) {
            let due = due_time(node, self.config.node_timeout.as_millis());
            self.walks.fold_due(due);
        }
    }

    /// The cron's once-a-second ping: of five nodes drawn at random from the table, the
    /// one with the oldest PONG among those linked, not in a handshake and with no ping in
    /// flight.
    fn random_ping(&mut self, now: u64) {
        // Draws are uniform over the nodes present; a table without holes (the usual case)
        // needs no list of them.
        let holes = self.topology.capacity() != self.topology.known();
        let present: Vec<u16> = if holes {
            (0..self.topology.capacity())
                .filter_map(|at| u16::try_from(at).ok())
                .filter(|&at| self.topology.at(at).is_some())
                .collect()
        } else {
            Vec::new()
        };
        let count = if holes {
            present.len()
        } else {
            self.topology.capacity()
        } as u64;
        let me = self.topology.me();
        let mut oldest: Option<(u64, NodeId)> = None;
        for _ in 0..5 {
            if count == 0 {
                break;
            }
            let draw = self.rng_next() % count;
            let at = if holes {
                present[draw as usize]
            } else {
                draw as u16
            };
            let Some(node) = self.topology.at(at).filter(|_| at != me) else {
                continue;
            };
            if !node.link || node.ping_sent != 0 || node.in_handshake() {
                continue;
            }
            if oldest.is_none_or(|(pong, _)| node.pong_received < pong) {
                oldest = Some((node.pong_received, node.id));
            }
        }
        if let Some((_, id)) = oldest {
            self.ping_node(&id, MessageType::PING, now);
        }
    }
}

/// When the cron's walk next has something to do for `node` if nothing changes meanwhile: its
/// handshake expires, its PONG gets older than half the timeout (linked, no ping in flight),
/// its ping and its last message of any kind older than the timeout (PFAIL), or its link
/// stuck ([`link_stuck`]).
fn due_time(node: &Node, timeout: u64) -> u64 {
    if node.in_handshake() {
        node.ctime.saturating_add(timeout.max(1000) + 1)
    } else if node.ping_sent == 0 {
        match node.link {
            true => node.pong_received.saturating_add(timeout / 2 + 1),
            false => u64::MAX,
        }
    } else {
        let pfail = match node.is_pfailed() || node.is_failed() {
            true => u64::MAX,
            false => node
                .ping_sent
                .max(node.data_received)
                .saturating_add(timeout + 1),
        };
        let reset = match node.link {
            true => (node.link_time.saturating_add(timeout))
                .max(node.ping_sent.saturating_add(timeout / 2))
                .max(node.data_received.saturating_add(timeout / 2))
                .saturating_add(1),
            false => u64::MAX,
        };
        pfail.min(reset)
    }
}

/// Whether our outbound link to `node` is to be reset (the server's `clusterCron`): older
/// than the node timeout, a ping in flight for more than half of it, and no message of any
/// kind from the node for as long.
fn link_stuck(node: &Node, now: u64, timeout: u64) -> bool {
    // The first line's fields first: the walk reads the later line of a node only when its
    // ping is late.
    node.link
        && node.ping_sent != 0
        && now.saturating_sub(node.ping_sent) > timeout / 2
        && now.saturating_sub(node.link_time) > timeout
        && now.saturating_sub(node.data_received) > timeout / 2
}
