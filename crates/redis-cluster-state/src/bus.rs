//! What a message does to the tables (semantics sections 2 and 9): a MEET's handshake, the
//! sender's epochs, role, address and slot claims from every header, UPDATE, config-epoch
//! collisions, the hostname, human-nodename, shard-id and FORGOTTEN_NODE extensions; and the
//! commands that change
//! the same things (MEET, REPLICATE).

use alloc::{string::String, vec::Vec};

use redis_cluster_bus::{ExtensionType, Message, MessageType, NodeFlags, NodeId, OwnedMessage};
use redis_hash_slot::{Slot, SlotSet};

use crate::{
    cluster::{ClusterNode, random_id},
    config::is_hostname,
    error::CommandError,
    node::{Node, NodeIp},
    output::{Event, LinkId, Output},
    time::Instant,
};

impl ClusterNode {
    /// `CLUSTER MEET ip port [cport]`: starts a handshake with the node there, under a
    /// temporary id until its first PONG names it.
    pub fn meet(
        &mut self,
        ip: &str,
        port: u16,
        cport: u16,
        now: Instant,
    ) -> Result<(), CommandError> {
        let now = self.tick(now);
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
        self.topology.insert(node);
    }

    /// `CLUSTER REPLICATE <id>`: this node becomes a replica of that master.
    pub fn replicate(&mut self, master: &NodeId, now: Instant) -> Result<(), CommandError> {
        self.tick(now);
        let me = self.myself().id;
        let Some(target) = self.node(master) else {
            return Err(CommandError::UnknownNode(alloc::format!("{master}")));
        };
        if target.id == me {
            return Err(CommandError::ReplicateMyself);
        }
        if !target.is_master() {
            return Err(CommandError::ReplicateReplica);
        }
        if self.myself().is_master() && self.myself().has_slots() {
            return Err(CommandError::ReplicateWithSlots);
        }
        self.set_my_master(*master);
        self.push(Output::SaveConfig);
        Ok(())
    }

    pub(crate) fn set_my_master(&mut self, master: NodeId) {
        self.push(Output::Event(Event::BecameReplica { master }));
        let me = self.topology.myself_mut();
        me.set(NodeFlags::MASTER, false);
        me.set(NodeFlags::REPLICA, true);
        me.master = Some(master);
        self.topology.close_open_slots();
        self.end_manual();
        if let Some(master) = self.topology.node_mut(&master) {
            master.set(NodeFlags::MIGRATE_TO, true);
        }
        self.refresh_state();
    }

    pub(crate) fn remove_node(&mut self, id: &NodeId) {
        let Some(removed) = self.topology.remove(id) else {
            return;
        };
        if removed.owned {
            self.health.mark_stale();
        }
        if let Some((link, up)) = removed.link {
            self.links.close(link);
            if up {
                self.push(Output::Close(link));
            }
        }
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
        let now = self.tick(now);
        if !self.links.is_open(link) {
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
        self.count_message(kind.base(), false);
        // DEBUG DROP-CLUSTER-PACKET-FILTER: counted as received, then ignored, as the
        // server does.
        if self.drop_filter == Some(kind) {
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
            let at = self.topology.index_of(&sender_id);
            if let Some(sender) = at.and_then(|at| self.topology.at_mut_quiet(at)) {
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
                if let Some(node) = self.topology.node_mut(&linked) {
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
            if let Some(node) = self.topology.node_mut(&sender_id) {
                node.inbound_link = Some(link);
            }
            if let Some(old) = old {
                self.links.close(old);
                self.push(Output::Close(old));
            }
        }

        if kind == MessageType::PONG {
            if let Some(linked) = link_node {
                if let Some(at) = self.topology.index_of(&linked) {
                    // New times only move this node's due time, folded into the walk's; a
                    // PFAIL cleared is a change the walk counts.
                    let pfailed = self.topology.at(at).is_some_and(Node::is_pfailed);
                    let node = match pfailed {
                        true => self.topology.at_mut(at),
                        false => self.topology.at_mut_quiet(at),
                    };
                    if let Some(node) = node {
                        node.pong_received = now;
                        node.ping_sent = 0;
                        if pfailed {
                            node.set(NodeFlags::PFAIL, false);
                            self.health.mark_stale();
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
            let moved = node.ip != ip
                || node.port != header.port()
                || node.cport != header.cport()
                || node.pport != header.pport();
            (
                moved,
                node.flags.contains(NodeFlags::NOFAILOVER) != nofailover,
            )
        });
        if moved || flagged {
            if let Some(node) = self.topology.node_mut(&sender_id) {
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
        self.update_nodename_and_shard(&sender_id, header.replicaof(), ping);
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
        if self.health.is_stale() {
            self.refresh_state();
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
    /// node.set_drop_filter(Some(MessageType::PONG));
    /// assert_eq!(node.drop_filter(), Some(MessageType::PONG));
    /// ```
    pub fn set_drop_filter(&mut self, kind: Option<MessageType>) {
        self.drop_filter = kind;
    }

    /// The type [`ClusterNode::set_drop_filter`] set.
    pub fn drop_filter(&self) -> Option<MessageType> {
        self.drop_filter
    }

    /// Sets the hostname a node announces (its ping extension gives it on the bus).
    pub fn set_hostname(&mut self, id: &NodeId, hostname: Option<String>) {
        if let Some(node) = self.topology.node_mut(id) {
            node.hostname = hostname.filter(|h| !h.is_empty());
        }
    }

    fn update_hostname(&mut self, id: &NodeId, ping: &redis_cluster_bus::Ping<'_>) {
        let host = ping.extensions().find_map(|e| {
            (e.kind() == ExtensionType::HOSTNAME)
                .then(|| e.text().map(|t| String::from_utf8_lossy(t).into_owned()))
                .flatten()
        });
        // Only what a server lets itself announce (letters, digits, `-`, `.`): a peer's
        // blank, comma or line break would be written into nodes.conf and CLUSTER NODES.
        let host = host.filter(|h| !h.is_empty() && is_hostname(h.as_bytes()));
        // The cron does not read hostnames: no new table version.
        let at = self.topology.index_of(id);
        if let Some(node) = at.and_then(|at| self.topology.at_mut_quiet(at)) {
            if node.hostname != host {
                node.hostname = host;
            }
        }
    }

    /// What a newer server (Redis 7.2+, Valkey) says of itself in ping extensions 1 and 3,
    /// taken as it takes them (`clusterProcessPingExt`): the sender's human node name (none
    /// without the extension), and its shard id, or its master's when it sends none (a 7.0
    /// node; nothing when that is unknown too). A replica of the sender takes the sender's
    /// shard id as its own. Both are kept as nodes.conf aux fields (`nodename=`,
    /// `shard-id=`), saved as the server saves them. (Newer servers send extensions only to a
    /// node whose headers carry the extension flag: this one's do while it has a hostname.)
    fn update_nodename_and_shard(
        &mut self,
        sender: &NodeId,
        master: Option<NodeId>,
        ping: &redis_cluster_bus::Ping<'_>,
    ) {
        let dialect = redis_cluster_bus::Dialect::Redis;
        let mut nodename = None;
        let mut shard = None;
        for ext in ping.extensions() {
            if ext.kind() == ExtensionType::HUMAN_NODENAME {
                nodename = ext.text_in(dialect).map(|t| String::from_utf8_lossy(t));
            } else if let Some(id) = ext.shard_id() {
                shard = Some(id);
            }
        }
        // Kept only when it cannot break the nodes.conf line it is written into: printable
        // ASCII without blanks or commas (Redis 7.2's source checks its own setting against
        // a looser rule, which lets both through, and a peer's not at all).
        let nodename = nodename.filter(|n| !n.is_empty() && is_aux_value(n.as_bytes()));
        let shard = shard.or_else(|| {
            let master = master.filter(|m| m != sender)?;
            self.node(&master)?.shard_id()
        });
        let shard_text = shard.map(|id| alloc::format!("{id}"));
        let mut changed = false;
        if let Some(at) = self.topology.index_of(sender) {
            // Aux fields are not read by the cron: no new table version.
            if let Some(node) = self.topology.at_mut_quiet(at) {
                changed |= node.set_aux_field("nodename", nodename.as_deref());
                if let Some(shard) = &shard_text {
                    changed |= node.set_aux_field("shard-id", Some(shard));
                }
            }
        }
        let me = self.myself();
        if let Some(shard) = &shard_text {
            if me.id != *sender && me.is_replica() && me.master == Some(*sender) {
                let at = self.topology.index_of(&me.id);
                if let Some(node) = at.and_then(|at| self.topology.at_mut_quiet(at)) {
                    changed |= node.set_aux_field("shard-id", Some(shard));
                }
            }
        }
        if changed {
            self.push(Output::SaveConfig);
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
            let until = now.saturating_add(ttl.saturating_mul(1000));
            let (until, now) = (Instant::from_millis(until), Instant::from_millis(now));
            self.topology.blacklist(id, until, now);
            self.remove_node(&id);
            forgot = true;
        }
        if forgot {
            self.refresh_state();
            self.push(Output::SaveConfig);
        }
    }

    fn rename(&mut self, from: &NodeId, to: NodeId) {
        let Some(at) = self.topology.rename(from, to) else {
            return;
        };
        let mut link = None;
        if let Some(node) = self.topology.at_mut(at) {
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
        if let Some(node) = self.topology.node_mut(id) {
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
            if let Some(node) = self.topology.node_mut(id) {
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
            if let Some(master) = self.topology.node_mut(&master) {
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
                .filter(|_| !self.topology.not_claiming(slot))
                .map(|o| (o.id, o.config_epoch, SlotSet::clone(&o.slots)))
        });
        let Some((id, config_epoch, mut slots)) = owner else {
            return;
        };
        for slot in self.topology.not_claiming_slots().iter() {
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
        self.count_message(MessageType::UPDATE, true);
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
        if let Some(node) = self.topology.node_mut(id) {
            node.config_epoch = epoch;
        }
        self.claim_slots(id, epoch, slots);
        self.push(Output::SaveConfig);
        self.refresh_state();
    }

    /// Semantics 2.2: bind each slot the master `sender` claims when it is unassigned or its
    /// owner's config epoch is strictly smaller; never a slot this node imports. When this
    /// node (or its master) loses its last slot to the sender, it follows the sender.
    fn claim_slots(&mut self, sender: &NodeId, epoch: u64, claimed: &SlotSet) {
        let Some(at) = self.topology.index_of(sender) else {
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
                    self.topology.set_not_claiming(slot, false);
                    continue;
                }
                _ if self.importing_from(slot).is_some() => continue,
                // Equal epochs never rebind (2.2), unless the owner stopped claiming it.
                Some((_, owner_epoch))
                    if owner_epoch >= epoch && !self.topology.not_claiming(slot) =>
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
            .topology
            .at(at)
            .map(|n| n.slots.iter().filter(|s| !claimed.contains(*s)).collect())
            .unwrap_or_default();
        for slot in dropped {
            self.topology.set_not_claiming(slot, true);
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
        self.topology.myself_mut().config_epoch = epoch;
        self.push(Output::SaveConfig);
    }
}

/// A value that a nodes.conf aux field can hold whole: printable ASCII, no blank (the line's
/// separator) and no comma (the fields').
fn is_aux_value(text: &[u8]) -> bool {
    text.iter().all(|&b| b.is_ascii_graphic() && b != b',')
}
