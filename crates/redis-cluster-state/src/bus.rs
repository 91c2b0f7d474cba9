//! The cluster bus side of a node: MEET handshakes, PING / PONG with gossip, the 100 ms cron,
//! epochs and slot claims carried by headers (semantics sections 2, 3 and 9), as inputs
//! (`handle_*`) and outputs (`poll_output`), with no socket in sight.

use alloc::{boxed::Box, string::String, vec::Vec};

use redis_cluster_bus::{
    ExtensionType, Message, MessageType, NodeFlags, NodeId, OwnedExtension, OwnedGossip,
    OwnedHeader, OwnedMessage, OwnedPing,
};
use redis_hash_slot::{Slot, SlotSet};

use crate::{
    cluster::{ClusterNode, CommandError, random_id},
    link::LinkId,
    node::{Node, NodeIp},
    time::{Duration, Instant},
    timers::Timer,
};

/// Something the driver must do, drained with [`ClusterNode::poll_output`] after each input.
// `Send` holds a message with its 2 KiB slot bitmap inline: outputs are drained one at a time,
// and a box would add an allocation to every message sent.
#[allow(clippy::large_enum_variant)]
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
    /// Encode `message` and write it on `link`.
    Send {
        /// Where.
        link: LinkId,
        /// What.
        message: Box<OwnedMessage>,
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

/// The cron period: `clusterCron` runs ten times a second.
pub const CRON_MS: u64 = 100;

impl ClusterNode {
    /// The next output, in the order they were produced.
    pub fn poll_output(&mut self) -> Option<Output> {
        self.outputs.pop_front()
    }

    /// When [`ClusterNode::handle_timeout`] wants to run next (calling it earlier is
    /// harmless).
    pub fn poll_timeout(&self) -> Instant {
        self.timers.next().unwrap_or(Instant::NEVER)
    }

    pub(crate) fn push(&mut self, output: Output) {
        // One save waiting is enough: the driver writes nodes.conf as it is when it gets
        // there, after every change of the same input.
        if matches!(output, Output::SaveConfig)
            && self.outputs.iter().any(|o| matches!(o, Output::SaveConfig))
        {
            return;
        }
        self.outputs.push_back(output);
    }

    /// `CLUSTER MEET ip port [cport]`: starts a handshake with the node there, under a
    /// temporary id until its first PONG names it.
    pub fn meet(
        &mut self,
        ip: &str,
        port: u16,
        cport: u16,
        now: Instant,
    ) -> Result<(), CommandError> {
        let now = now.as_millis();
        self.clock = self.clock.max(now);
        if ip.is_empty() || port == 0 || cport == 0 {
            return Err(CommandError::BadAddress(alloc::format!("{ip}:{port}")));
        }
        self.start_handshake(ip, port, cport, true, now);
        Ok(())
    }

    /// Adds a handshake node for `ip:port@cport` unless one is already running for that
    /// address (`clusterStartHandshake`); `meet`: its first message is a MEET.
    fn start_handshake(&mut self, ip: &str, port: u16, cport: u16, meet: bool, now: u64) {
        let running = self
            .nodes()
            .any(|n| n.in_handshake() && n.ip == ip && n.port == port && n.cport == cport);
        if running {
            return;
        }
        let id = random_id(&mut self.rng);
        let mut node = Node::new(id);
        node.ip = NodeIp::new(ip);
        node.port = port;
        node.cport = cport;
        node.set(NodeFlags::HANDSHAKE, true);
        node.set(NodeFlags::MEET, meet);
        node.ctime = now;
        self.insert(node);
    }

    /// `CLUSTER REPLICATE <id>`: this node becomes a replica of that master.
    pub fn replicate(&mut self, master: &NodeId, now: Instant) -> Result<(), CommandError> {
        self.clock = self.clock.max(now.as_millis());
        let me = self.myself().id;
        let Some(target) = self.node(master) else {
            return Err(CommandError::UnknownNode(alloc::format!("{master}")));
        };
        if target.id == me {
            return Err(CommandError::Other("Can't replicate myself"));
        }
        if !target.is_master() {
            return Err(CommandError::Other(
                "I can only replicate a master, not a replica.",
            ));
        }
        if self.myself().is_master() && self.myself().has_slots() {
            return Err(CommandError::Other(
                "To set a master the node must be empty and without assigned slots.",
            ));
        }
        self.set_my_master(*master);
        self.push(Output::SaveConfig);
        Ok(())
    }

    pub(crate) fn set_my_master(&mut self, master: NodeId) {
        self.push(Output::Event(Event::BecameReplica { master }));
        let me = self.myself_mut();
        me.set(NodeFlags::MASTER, false);
        me.set(NodeFlags::REPLICA, true);
        me.master = Some(master);
        self.migrating_to.clear();
        self.importing_from.clear();
        self.end_manual();
        if let Some(master) = self.node_mut(&master) {
            master.set(NodeFlags::MIGRATE_TO, true);
        }
        self.update_state();
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
        for to in linked {
            let message = OwnedMessage::new(kind, self.header(), body.clone());
            self.count_message(kind.0, true);
            self.send_to(&to, message);
        }
    }

    /// Queues `message` on the outbound link to `id` when it is up (else the message is
    /// dropped, as the server sends nothing on a missing link).
    pub(crate) fn send_to(&mut self, id: &NodeId, message: OwnedMessage) {
        if let Some(link) = self.link_to(id) {
            self.push(Output::Send {
                link,
                message: Box::new(message),
            });
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
        self.count_message(kind.0, true);
        self.push(Output::Send {
            link,
            message: Box::new(message),
        });
    }

    /// Records a PING sent to `id` at `now` unless one is in flight. Written quietly, the
    /// node's new due time folded into the walk's, as a PONG's time is: as a new table
    /// version, every ping sent made the next cron tick walk the whole table (at N = 1000,
    /// two walks in three were for that).
    fn note_ping_sent(&mut self, id: &NodeId, now: u64) {
        if let Some(at) = self.index_of(id) {
            if let Some(node) = self.at_mut_quiet(at) {
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
            state: u8::from(!self.state_ok),
            mflags: self.header_mflags(),
        }
    }

    /// The gossip section: `max(3, N/10)` random healthy nodes (at most N - 2), then every
    /// PFAIL node; a hostname extension when this node announces one.
    fn gossip_body(&mut self) -> OwnedPing {
        let me = self.myself;
        let known = self.index.len();
        let table = self.nodes.len() as u64;
        let wanted = (known / 10).max(3).min(known.saturating_sub(2));
        let mut ping = OwnedPing::default();
        ping.reserve_gossip(wanted + self.pfail_nodes);
        let mut chosen = 0;
        // Which table entries this section holds, a bit each (a linear `contains` would
        // cost N²/200 comparisons per message). Cleared per section: at a thousand nodes
        // that is 16 words, where a stamp per entry, never cleared, spread the marks over
        // 4 KB and made most draws a cache miss more.
        let mut marks = core::mem::take(&mut self.gossip_marks);
        marks.clear();
        marks.resize(self.nodes.len().div_ceil(64), 0);
        let marked = |marks: &[u64], at: u16| marks[usize::from(at / 64)] & (1 << (at % 64)) != 0;
        // Random draws from the table, as the server draws random dictionary entries: three
        // tries per wanted entry, a draw of this node (or of a free table slot) spends one.
        // A chosen node's entry is written at once: its address is in the entry's second
        // cache line, fetched while the next draws go on.
        self.fetch_draws(wanted + wanted / 8 + 4);
        let mut tries = wanted * 3;
        while chosen < wanted && tries > 0 && table > 1 {
            tries -= 1;
            let at = (self.rng_next() % table) as u16;
            let Some(node) = self.at(at).filter(|_| at != me) else {
                continue;
            };
            let skip = node.in_handshake()
                || node.flags.contains(NodeFlags::NOADDR)
                || node.is_pfailed()
                || (!node.link && !node.has_slots());
            if skip || marked(&marks, at) {
                continue;
            }
            marks[usize::from(at / 64)] |= 1 << (at % 64);
            ping.push_gossip(gossip_entry(node));
            chosen += 1;
        }
        // Every PFAIL node, counted by the last cron: no walk of the table when there is none.
        if self.pfail_nodes > 0 {
            for (at, node) in self.nodes.enumerate() {
                let at = at as u16;
                let pfail = node.is_pfailed();
                if pfail && at != me && !marked(&marks, at) {
                    ping.push_gossip(gossip_entry(node));
                }
            }
        }
        self.gossip_marks = marks;
        if let Some(host) = self.myself().hostname.as_ref().filter(|h| !h.is_empty()) {
            ping.extensions.push(OwnedExtension {
                kind: ExtensionType::HOSTNAME,
                payload: host.as_bytes().to_vec(),
                raw: false,
            });
        }
        ping
    }

    /// Brings into the cache the entries (both lines) of the nodes the next `draws` draws
    /// of [`Self::gossip_body`] will pick, without advancing the generator.
    ///
    /// A draw reads its node's first line, and a chosen node's second: both misses at scale
    /// (a thousand nodes' tables take 320 MB). Drawing and testing one node at a time, the
    /// core waited for most misses in turn; these loads, with nothing depending on them, go
    /// out together. The caller asks for a few more draws than it wants entries, for those
    /// it skips (itself, a node drawn twice). At N = 1000 this made a run 10 % faster.
    fn fetch_draws(&self, draws: usize) {
        let mut rng = self.rng;
        let table = self.nodes.len() as u64;
        if table == 0 {
            return;
        }
        let mut sum = 0u64;
        for _ in 0..draws {
            let at = (crate::cluster::next(&mut rng) % table) as usize;
            sum = sum.wrapping_add(self.nodes.touch(at, true));
        }
        core::hint::black_box(sum);
    }

    /// Brings into the cache, for every gossip entry of `ping` (the first 256), the id
    /// index's home bucket of its id and then the table entry that bucket names, before
    /// [`Self::process_gossip`] looks them up one by one.
    ///
    /// Each look-up is two dependent misses at scale (a bucket, then an entry's first line);
    /// in the processing loop, with its branches and writes, the core waited for most of
    /// them in turn. Here the loads of each pass are independent of each other and go out
    /// together. A home bucket that holds another id (a collision) costs only a wasted load.
    /// At N = 1000 this made a run 6 % faster.
    fn fetch_gossip_nodes(&self, ping: &redis_cluster_bus::Ping<'_>) {
        let mut homes = [0u16; 256];
        let mut count = 0;
        for (home, entry) in homes.iter_mut().zip(ping.gossip()) {
            *home = self.index.home(&entry.node());
            count += 1;
        }
        let mut sum = 0u64;
        for &at in &homes[..count] {
            sum = sum.wrapping_add(self.nodes.touch(usize::from(at), false));
        }
        core::hint::black_box(sum);
    }

    pub(crate) fn rng_next(&mut self) -> u64 {
        crate::cluster::next(&mut self.rng)
    }

    /// Fires the timers that are due (calling it early is harmless): a manual failover
    /// that timed out ends, the cron runs, and a scheduled vote request goes out.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.clock = self.clock.max(now.as_millis());
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
        self.first_cron.get_or_insert(now);
        self.cron_runs += 1;
        // Once a second: of five random linked nodes without a ping in flight, the one with
        // the oldest PONG. Drawn before the walk below, which cannot change what it looks
        // at (the walk only removes handshake nodes and connects unlinked ones: neither is
        // ever chosen), so this is the server's order of effects.
        if self.cron_runs % 10 == 0 {
            self.random_ping(now);
        }
        // The walk acts on a node only when its time comes (its PONG older than half the
        // timeout, its ping older than the timeout, its handshake expired) or when
        // something in the table changed since the last walk (a mutable access): otherwise
        // it would do nothing, and at a thousand nodes it is most of a quiet second's cost.
        let (version, due) = self.walked;
        if self.walk_every_tick || version != self.nodes.version() || now >= due {
            let due = self.walk(now);
            self.walked = (self.nodes.version(), due);
        }
        self.manual_cron(now);
        self.handle_failover(now);
        self.handle_replica_migration(now);
        // As the server's cron: the state again when something it depends on changed (a
        // PFAIL mark here; slot owners, FAIL marks and roles flag it where they change),
        // and on every tick while the cluster is down (its delays run out with time).
        if self.state_stale || !self.state_ok {
            self.update_state();
        }
    }

    /// Makes the cron walk the node table on every tick, as the server's does, instead of
    /// only when the table changed or a node's time came (and replica migration look for
    /// orphans on every tick too). The outputs are the same either way — the simulator's
    /// tests run both and compare — so this is for such comparisons; it costs the walks.
    pub fn set_walk_every_tick(&mut self, on: bool) {
        self.walk_every_tick = on;
    }

    /// The cron's walk of the table, by index (no id look-ups), doing what the server's two
    /// walks do: handshakes that expired, connections to open, pings to nodes whose PONG is
    /// older than half the node timeout, PFAIL for pings older than the timeout from nodes
    /// not heard from for as long, resets of stuck links, and the count of PFAIL nodes.
    /// Returns the first time at which a node will be due for one of those if nothing
    /// changes meanwhile.
    fn walk(&mut self, now: u64) -> u64 {
        let timeout = self.config.node_timeout.as_millis();
        let handshake_ttl = timeout.max(1000);
        let me = self.myself;
        let mut pfail_nodes = 0;
        let mut due = u64::MAX;
        for at in 0..self.nodes.len() {
            let Ok(at) = u16::try_from(at) else { break };
            let Some(node) = self.at(at) else { continue };
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
            let Some(node) = self.at(at) else { continue };
            if !node.link && !node.connecting && !node.flags.contains(NodeFlags::NOADDR) {
                self.connect(at);
            }
            let Some(node) = self.at(at) else { continue };
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
                        if let Some(node) = self.at_mut(at) {
                            node.set(NodeFlags::PFAIL, true);
                        }
                        self.state_stale = true;
                    }
                }
            }
            let Some(node) = self.at(at) else { continue };
            pfail_nodes += usize::from(node.is_pfailed());
            due = due.min(due_time(node, timeout));
        }
        self.pfail_nodes = pfail_nodes;
        due
    }

    /// Brings the cron's next walk forward to the due time of the node at `at`, after a
    /// quiet write of its ping or pong time (one that made no new table version).
    fn fold_due(&mut self, at: u16) {
        if at == self.myself {
            return;
        }
        if let Some(node) = self.at(at) {
            let due = due_time(node, self.config.node_timeout.as_millis());
            self.walked.1 = self.walked.1.min(due);
        }
    }

    /// The cron's once-a-second ping: of five nodes drawn at random from the table, the
    /// one with the oldest PONG among those linked, not in a handshake and with no ping in
    /// flight.
    fn random_ping(&mut self, now: u64) {
        // Draws are uniform over the nodes present; a table without holes (the usual case)
        // needs no list of them.
        let holes = self.nodes.len() != self.index.len();
        let present: Vec<u16> = if holes {
            (0..self.nodes.len())
                .filter_map(|at| u16::try_from(at).ok())
                .filter(|&at| self.at(at).is_some())
                .collect()
        } else {
            Vec::new()
        };
        let count = if holes {
            present.len()
        } else {
            self.nodes.len()
        } as u64;
        let me = self.myself;
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
            let Some(node) = self.at(at).filter(|_| at != me) else {
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

    pub(crate) fn remove_node(&mut self, id: &NodeId) {
        let Some(at) = self.index.remove(id) else {
            return;
        };
        for slot in 0..16384u16 {
            if self.owners[usize::from(slot)] == at {
                if let Some(slot) = Slot::new(slot) {
                    self.bind(slot, None);
                }
            }
        }
        let link = self
            .nodes
            .get(usize::from(at))
            .map(|n| (n.outbound_link, n.link));
        if let Some((Some(link), up)) = link {
            self.outbound.remove(&link);
            if up {
                self.push(Output::Close(link));
            }
        }
        self.nodes.remove(usize::from(at));
    }

    /// A message arrived on `link`; `peer_ip` is the address the connection comes from (what
    /// a node learns another's IP from when the header carries none).
    pub fn handle_message(
        &mut self,
        link: LinkId,
        peer_ip: &str,
        message: &Message<'_>,
        now: Instant,
    ) {
        let now = now.as_millis();
        self.clock = self.clock.max(now);
        if !self.outbound.contains_key(&link) && !self.inbound.contains(&link) {
            return; // a link closed (or never handed out): the server reads no more from it
        }
        let Some(header) = message.header() else {
            // A light header (Valkey) comes only from a node that knows this one.
            if let Message::Publish(publish) = message {
                self.deliver(publish);
            }
            return; // nothing for the tables
        };
        let kind = message.kind();
        self.count_message(kind.base().0, false);
        // DEBUG DROP-CLUSTER-PACKET-FILTER: counted as received, then ignored, as the
        // server does.
        if self.drop_filter == Some(kind.0) {
            return;
        }
        let sender_id = header.sender();
        let sender_known = self.node(&sender_id).is_some_and(|n| !n.in_handshake());
        let header_ip = NodeIp::from_wire(header.myip());
        let ip = if header_ip.is_empty() {
            NodeIp::new(peer_ip)
        } else {
            header_ip
        };

        // Epochs travel in every header from a known node (2.1).
        if sender_known {
            self.current_epoch = self.current_epoch.max(header.current_epoch());
            // Neither is read by the cron: no new table version.
            let at = self.index_of(&sender_id);
            if let Some(sender) = at.and_then(|at| self.at_mut_quiet(at)) {
                if header.config_epoch() > sender.config_epoch && header.replicaof().is_none() {
                    sender.config_epoch = header.config_epoch();
                }
                sender.repl_offset = header.offset();
                // Any message is proof of life (the cron's PFAIL rule reads it); written
                // quietly: it can only put a node's due time later, and the walk that
                // comes at the earlier time finds the later one.
                sender.data_received = now;
            }
        }
        match message {
            // As the server: from a node it knows only.
            Message::Publish(publish) if sender_known => {
                self.deliver(publish);
                return;
            }
            Message::Fail(fail) if sender_known => {
                self.handle_fail(&fail.node(), now);
                return;
            }
            Message::Failover(request)
                if sender_known && kind == MessageType::FAILOVER_AUTH_REQUEST =>
            {
                self.handle_auth_request(request, now);
                return;
            }
            Message::Failover(ack) if sender_known && kind == MessageType::FAILOVER_AUTH_ACK => {
                self.handle_auth_ack(ack, now);
                return;
            }
            Message::Failover(_) if sender_known && kind == MessageType::MFSTART => {
                self.handle_mfstart(&sender_id, now);
                return;
            }
            Message::Update(update) if sender_known => {
                let slots = SlotSet::from(update.slots());
                self.handle_update(&update.node(), update.config_epoch(), &slots);
                return;
            }
            _ => {}
        }
        let Message::Ping(ping) = message else {
            return; // UPDATE and failover messages: not handled yet
        };

        // A MEET from an unknown node: add it as a handshake node and gossip back.
        if kind == MessageType::MEET && !sender_known {
            self.start_handshake(&ip, header.port(), header.cport(), false, now);
            self.process_gossip(ping, now);
        }
        if kind == MessageType::PING || kind == MessageType::MEET {
            self.send_ping(link, MessageType::PONG, now);
        }

        // On our own link to a handshake node: its PONG gives its real id.
        let outbound = self.outbound_node(link);
        let mut link_node = outbound;
        if let Some(linked) = outbound {
            let handshake = self.node(&linked).is_some_and(Node::in_handshake);
            if handshake {
                if self.node(&sender_id).is_some() {
                    // Already known under its real id: drop the duplicate.
                    self.remove_node(&linked);
                    return;
                }
                self.rename(&linked, sender_id);
                link_node = Some(sender_id);
                self.push(Output::SaveConfig);
            } else if linked != sender_id && sender_known {
                // A PONG from someone else on this node's link: its address is stale.
                if let Some(node) = self.node_mut(&linked) {
                    node.set(NodeFlags::NOADDR, true);
                }
                self.close_outbound(&linked);
                return;
            }
        }
        let Some(sender) = self.node(&sender_id).filter(|n| !n.in_handshake()) else {
            return;
        };
        let sender_id = sender.id;
        // The connection the sender's messages come in on: a newer one replaces (and closes)
        // an older one, as the server's setClusterNodeToInboundClusterLink does.
        if outbound.is_none() && sender.inbound_link != Some(link) {
            let old = sender.inbound_link;
            if let Some(node) = self.node_mut(&sender_id) {
                node.inbound_link = Some(link);
            }
            if let Some(old) = old {
                self.inbound.remove(&old);
                self.push(Output::Close(old));
            }
        }

        if kind == MessageType::PONG {
            if let Some(linked) = link_node {
                if let Some(at) = self.index_of(&linked) {
                    // New times only move this node's due time, folded into the walk's; a
                    // PFAIL cleared is a change the walk counts.
                    let pfailed = self.at(at).is_some_and(Node::is_pfailed);
                    let node = match pfailed {
                        true => self.at_mut(at),
                        false => self.at_mut_quiet(at),
                    };
                    if let Some(node) = node {
                        node.pong_received = now;
                        node.ping_sent = 0;
                        if pfailed {
                            node.set(NodeFlags::PFAIL, false);
                            self.state_stale = true;
                        }
                    }
                    self.fold_due(at);
                }
                self.clear_failure_if_needed(&linked, now);
            }
        }
        // The sender's address, role and slots as it says them.
        // Written only when it differs: a write is a new table version, and the cron walks
        // the table again after one.
        let nofailover = header.flags().contains(NodeFlags::NOFAILOVER);
        let (moved, flagged) = self.node(&sender_id).map_or((false, false), |node| {
            let moved = node.ip != ip || node.port != header.port() || node.cport != header.cport();
            (
                moved,
                node.flags.contains(NodeFlags::NOFAILOVER) != nofailover,
            )
        });
        if moved || flagged {
            if let Some(node) = self.node_mut(&sender_id) {
                if moved {
                    node.ip = ip;
                    node.port = header.port();
                    node.cport = header.cport();
                    node.pport = header.pport();
                }
                node.set(NodeFlags::NOFAILOVER, nofailover);
            }
        }
        self.update_hostname(&sender_id, ping);
        self.forget_as_told(&sender_id, ping, now);
        let paused = header
            .message_flags()
            .contains(redis_cluster_bus::MessageFlags::PAUSED);
        self.manual_progress(&sender_id, paused, header.offset(), now);
        match header.replicaof() {
            None => self.set_master_role(&sender_id),
            Some(master) => self.set_replica_role(&sender_id, master),
        }
        let sender_is_master = header.replicaof().is_none();
        // As the server does, slots are looked at only when the claim differs from what we
        // record for the sender (or its master).
        let recorded = match header.replicaof() {
            None => self.node(&sender_id),
            Some(master) => self.node(&master),
        };
        let dirty = recorded.is_none_or(|r| r.slots.as_bitmap() != header.myslots().as_bitmap());
        if dirty {
            let claimed = SlotSet::from(header.myslots());
            // Stale claims get an UPDATE about the owner that supersedes them (2.3).
            if recorded.is_some() {
                self.send_update_if_stale(&sender_id, header.config_epoch(), &claimed);
            }
            if sender_is_master {
                self.claim_slots(&sender_id, header.config_epoch(), &claimed);
            }
        }
        if sender_is_master {
            self.resolve_epoch_collision(&sender_id);
        }
        self.process_gossip(ping, now);
        if self.state_stale {
            self.update_state();
        }
    }

    /// Drops every message of type `kind` that arrives from now on (`None`: none), as
    /// `DEBUG DROP-CLUSTER-PACKET-FILTER <type>` makes the server do (`-1` is `None`). The
    /// messages are still counted in `cluster_stats_messages_*_received`.
    ///
    /// ```
    /// use redis_cluster_bus::MessageType;
    /// use redis_cluster_state::{ClusterNode, Config};
    ///
    /// let mut node = ClusterNode::new(Config::new("127.0.0.1", 7000));
    /// node.set_drop_filter(Some(MessageType::PONG.0));
    /// assert_eq!(node.drop_filter(), Some(MessageType::PONG.0));
    /// ```
    pub fn set_drop_filter(&mut self, kind: Option<u16>) {
        self.drop_filter = kind;
    }

    /// The type [`ClusterNode::set_drop_filter`] set.
    pub fn drop_filter(&self) -> Option<u16> {
        self.drop_filter
    }

    /// Sets the hostname a node announces (its ping extension gives it on the bus).
    pub fn set_hostname(&mut self, id: &NodeId, hostname: Option<String>) {
        if let Some(node) = self.node_mut(id) {
            node.hostname = hostname.filter(|h| !h.is_empty());
        }
    }

    fn update_hostname(&mut self, id: &NodeId, ping: &redis_cluster_bus::Ping<'_>) {
        let host = ping.extensions().find_map(|e| {
            (e.kind() == ExtensionType::HOSTNAME)
                .then(|| e.text().map(|t| String::from_utf8_lossy(t).into_owned()))
                .flatten()
        });
        let host = host.filter(|h| !h.is_empty());
        // The cron does not read hostnames: no new table version.
        let at = self.index_of(id);
        if let Some(node) = at.and_then(|at| self.at_mut_quiet(at)) {
            if node.hostname != host {
                node.hostname = host;
            }
        }
    }

    /// A newer server's FORGOTTEN_NODE extensions (Redis 7.2 and later, Valkey: what its
    /// `CLUSTER FORGET` tells the others while it keeps the node out): each node named is
    /// removed and kept out for the TTL given, in seconds, unless it is this node, its
    /// master or the sender (`clusterProcessPingExt`). Redis 7.0 ignores them; a node of
    /// this crate among newer servers follows the FORGET they were told.
    fn forget_as_told(&mut self, sender: &NodeId, ping: &redis_cluster_bus::Ping<'_>, now: u64) {
        let mut forgot = false;
        for (id, ttl) in ping.extensions().filter_map(|e| e.forgotten_node()) {
            let me = self.myself();
            let mine = id == me.id || me.is_replica() && me.master == Some(id);
            if mine || id == *sender || self.node(&id).is_none() {
                continue;
            }
            // Only known nodes are added: the list stays as short as the table.
            self.forgotten.retain(|(f, until)| *f != id && *until > now);
            self.forgotten
                .push((id, now.saturating_add(ttl.saturating_mul(1000))));
            self.remove_node(&id);
            forgot = true;
        }
        if forgot {
            self.update_state();
            self.push(Output::SaveConfig);
        }
    }

    fn rename(&mut self, from: &NodeId, to: NodeId) {
        let Some(at) = self.index.remove(from) else {
            return;
        };
        self.index.insert(to, at);
        let mut link = None;
        if let Some(node) = self.nodes.get_mut(usize::from(at)) {
            node.id = to;
            node.set(NodeFlags::HANDSHAKE, false);
            link = node.outbound_link;
        }
        // The link keeps its handle; it goes to the real id now.
        if let Some(link) = link {
            self.relink(link, to);
        }
    }

    fn set_master_role(&mut self, id: &NodeId) {
        if self.node(id).is_none_or(Node::is_master) {
            return;
        }
        if let Some(node) = self.node_mut(id) {
            if !node.is_master() {
                node.set(NodeFlags::REPLICA, false);
                node.set(NodeFlags::MASTER, true);
                node.master = None;
                // A role change is configuration: nodes.conf is saved (semantics of
                // `clusterSetNodeAsMaster`).
                self.push(Output::SaveConfig);
            }
        }
    }

    fn set_replica_role(&mut self, id: &NodeId, master: NodeId) {
        let Some(node) = self.node(id) else { return };
        let was_master = node.is_master();
        // Written only when it changes (a write is a new table version for the cron).
        let settled = !was_master && node.is_replica() && node.master == Some(master);
        if was_master {
            // A master turned replica gives up its slots.
            let slots: Vec<Slot> = node.slots.iter().collect();
            for slot in slots {
                self.bind(slot, None);
            }
        }
        if !settled {
            if let Some(node) = self.node_mut(id) {
                node.set(NodeFlags::MASTER, false);
                node.set(NodeFlags::REPLICA, true);
                node.master = Some(master);
            }
            // A master turned replica, or a replica's new master: saved, as the server
            // saves it.
            self.push(Output::SaveConfig);
        }
        // A master that has (had) replicas may receive a migrating one later.
        let marked = self
            .node(&master)
            .is_none_or(|m| m.flags.contains(NodeFlags::MIGRATE_TO));
        if !marked {
            if let Some(master) = self.node_mut(&master) {
                master.set(NodeFlags::MIGRATE_TO, true);
            }
        }
    }

    /// Semantics 2.3, sending side: the first slot `sender` claims whose owner (neither the
    /// sender nor unassigned) has a greater config epoch earns the sender one UPDATE about
    /// that owner.
    fn send_update_if_stale(&mut self, sender: &NodeId, epoch: u64, claimed: &SlotSet) {
        // Slots whose owner stopped claiming them count as unclaimed here, and are left out
        // of the bitmap the UPDATE describes (semantics 2.2, 2.3).
        let owner = claimed.iter().find_map(|slot| {
            self.owner(slot)
                .filter(|o| o.id != *sender && o.config_epoch > epoch)
                .filter(|_| !self.not_claiming.contains(slot))
                .map(|o| (o.id, o.config_epoch, SlotSet::clone(&o.slots)))
        });
        let Some((id, config_epoch, mut slots)) = owner else {
            return;
        };
        for slot in self.not_claiming.iter() {
            slots.remove(slot);
        }
        if !self.node(sender).is_some_and(|n| n.link) {
            return;
        }
        let message = OwnedMessage::new(
            MessageType::UPDATE,
            self.header(),
            redis_cluster_bus::OwnedUpdate {
                config_epoch,
                node: id,
                slots,
            },
        );
        self.count_message(MessageType::UPDATE.0, true);
        self.send_to(sender, message);
    }

    /// Semantics 2.3, receiving side: news about `id` at a config epoch greater than ours.
    fn handle_update(&mut self, id: &NodeId, epoch: u64, slots: &SlotSet) {
        if *id == self.myself().id {
            return; // an UPDATE about myself is discarded
        }
        let Some(node) = self.node(id) else { return };
        if node.config_epoch >= epoch {
            return;
        }
        self.set_master_role(id);
        if let Some(node) = self.node_mut(id) {
            node.config_epoch = epoch;
        }
        self.claim_slots(id, epoch, slots);
        self.push(Output::SaveConfig);
        self.update_state();
    }

    /// Semantics 2.2: bind each slot the master `sender` claims when it is unassigned or its
    /// owner's config epoch is strictly smaller; never a slot this node imports. When this
    /// node (or its master) loses its last slot to the sender, it follows the sender.
    fn claim_slots(&mut self, sender: &NodeId, epoch: u64, claimed: &SlotSet) {
        let Some(at) = self.index_of(sender) else {
            return;
        };
        let me = self.myself().id;
        let my_master = self.myself().master.filter(|_| self.myself().is_replica());
        let mine = my_master.unwrap_or(me);
        let mut lost_mine = false;
        let mut changed = false;
        for slot in claimed.iter() {
            let owner = self.owner(slot).map(|n| (n.id, n.config_epoch));
            match owner {
                Some((owner, _)) if owner == *sender => {
                    self.not_claiming.remove(slot);
                    continue;
                }
                _ if self.importing_from(slot).is_some() => continue,
                // Equal epochs never rebind (2.2), unless the owner stopped claiming it.
                Some((_, owner_epoch))
                    if owner_epoch >= epoch && !self.not_claiming.contains(slot) =>
                {
                    continue;
                }
                Some((owner, _)) => lost_mine |= owner == mine,
                None => {}
            }
            self.bind(slot, Some(at));
            changed = true;
        }
        // Slots bound to the sender that it no longer claims stay bound (unbinding would
        // turn the cluster down for nothing) but are marked: any claimant may take them, and
        // they are no evidence for UPDATE messages.
        let dropped: Vec<Slot> = self
            .at(at)
            .map(|n| n.slots.iter().filter(|s| !claimed.contains(*s)).collect())
            .unwrap_or_default();
        for slot in dropped {
            self.not_claiming.insert(slot);
        }
        if changed {
            self.push(Output::SaveConfig);
        }
        let mine_empty = self.node(&mine).is_some_and(|n| !n.has_slots());
        if lost_mine && mine_empty && self.config.allow_replica_migration {
            self.set_my_master(*sender);
        }
    }

    /// Semantics 2.4: two masters with the same config epoch; the smaller id moves.
    fn resolve_epoch_collision(&mut self, sender: &NodeId) {
        let me = self.myself();
        let Some(other) = self.node(sender) else {
            return;
        };
        if !me.is_master() || !other.is_master() || other.config_epoch != me.config_epoch {
            return;
        }
        if me.id.as_bytes() >= other.id.as_bytes() {
            return;
        }
        self.current_epoch += 1;
        let epoch = self.current_epoch;
        self.myself_mut().config_epoch = epoch;
        self.push(Output::SaveConfig);
    }

    /// A gossip entry about a node we know (semantics 3, after its failure report):
    ///
    /// - a healthy entry about a node we have no ping in flight to and no valid failure
    ///   report about gives us its pong time (seconds, so a round value) when that is newer
    ///   than ours and not more than 500 ms ahead of our clock. This node's own entry
    ///   included, as the server does: it is why `myself` shows a round pong time. At scale
    ///   this is what keeps the half-timeout pings rare: a node whose PONG someone else got
    ///   recently is not pinged again.
    /// - a healthy entry with an address that differs from the one we have for a node we
    ///   see as PFAIL or FAIL moves it there (the old link is closed; the cron reconnects).
    fn gossip_known(&mut self, at: u16, entry: redis_cluster_bus::GossipEntry<'_>, now: u64) {
        let validity = self.config.node_timeout.as_millis() * 2;
        let flags = entry.flags();
        if flags.contains(NodeFlags::PFAIL) || flags.contains(NodeFlags::FAIL) {
            return;
        }
        let Some(node) = self.at(at) else {
            return;
        };
        // The cheap tests first: the reports are in a later cache line of the entry (whether
        // there are any is in the first).
        let pong = u64::from(entry.pong_received()) * 1000;
        let newer = node.ping_sent == 0 && pong <= now + 500 && pong > node.pong_received;
        let adopt = newer
            && !(node.reported
                && node
                    .fail_reports
                    .iter()
                    .any(|(_, when)| now.saturating_sub(*when) <= validity));
        if adopt {
            // A later pong only moves the node's due time (folded into the walk's).
            if let Some(node) = self.at_mut_quiet(at) {
                node.pong_received = pong;
            }
            self.fold_due(at);
        }
        let Some(node) = self.at(at) else {
            return;
        };
        // The address is read only for a failing node: it lives outside the entry's first
        // cache line, and this runs for a tenth of the cluster per message.
        let failing = node.is_pfailed() || node.is_failed();
        if !failing || flags.contains(NodeFlags::NOADDR) {
            return;
        }
        let moved = !node.ip.as_bytes().eq_ignore_ascii_case(entry.ip())
            || node.port != entry.port()
            || node.cport != entry.cport();
        let Some(node) = self.at_mut(at).filter(|_| moved) else {
            return;
        };
        node.ip = NodeIp::from_wire(entry.ip());
        node.port = entry.port();
        node.pport = entry.pport();
        node.cport = entry.cport();
        node.set(NodeFlags::NOADDR, false);
        let (id, linked) = (node.id, node.link);
        if linked {
            self.close_outbound(&id);
        }
    }

    /// Gossip entries: known nodes' reports and addresses are taken; an unknown node, when
    /// the sender is a node this one knows, is added under its own id with the role the
    /// entry gives, and pinged (not met) by the cron (unless blacklisted or without an
    /// address), as `clusterProcessGossipSection` does: an address may have been reused
    /// by a node of another cluster, which a PING does not join as a MEET would.
    fn process_gossip(&mut self, ping: &redis_cluster_bus::Ping<'_>, now: u64) {
        let sender = ping.header().sender();
        let sender_known = self.node(&sender).is_some_and(|n| !n.in_handshake());
        let sender_is_master = self
            .node(&sender)
            .is_some_and(|n| n.is_master() && !n.in_handshake());
        self.fetch_gossip_nodes(ping);
        for entry in ping.gossip() {
            let id = entry.node();
            if let Some(at) = self.index_of(&id) {
                if sender_is_master {
                    self.gossip_failure_report(&sender, at, entry.flags(), now);
                }
                self.gossip_known(at, entry, now);
                continue;
            }
            let flags = entry.flags();
            if !sender_known
                || flags.contains(NodeFlags::NOADDR)
                || flags.contains(NodeFlags::HANDSHAKE)
            {
                continue;
            }
            if self
                .forgotten
                .iter()
                .any(|(f, until)| *f == id && *until > now)
            {
                continue;
            }
            let mut node = Node::new(id);
            node.ip = NodeIp::new(&String::from_utf8_lossy(entry.ip()));
            node.port = entry.port();
            node.cport = entry.cport();
            let replica = flags.contains(NodeFlags::REPLICA);
            node.set(NodeFlags::REPLICA, replica);
            node.set(NodeFlags::MASTER, !replica);
            node.ctime = now;
            self.insert(node);
            self.push(Output::SaveConfig);
        }
    }
}

/// The gossip entry about `node`: its times in seconds, its address and flags.
fn gossip_entry(node: &Node) -> OwnedGossip {
    OwnedGossip::new(node.id)
        .with_ping_sent((node.ping_sent / 1000) as u32)
        .with_pong_received((node.pong_received / 1000) as u32)
        .with_ip(node.ip.as_bytes())
        .with_port(node.port)
        .with_cport(node.cport)
        .with_flags(node.flags)
        .with_pport(node.pport)
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
