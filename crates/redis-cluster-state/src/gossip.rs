//! The gossip section of PING, PONG and MEET (semantics 3): which entries a node writes,
//! and what it takes from the entries it reads (pong times, addresses, unknown nodes).

use alloc::string::String;

use redis_cluster_bus::{ExtensionType, NodeFlags, OwnedExtension, OwnedGossip, OwnedPing};

use crate::{
    cluster::ClusterNode,
    node::{Node, NodeIp},
    output::Output,
    time::Instant,
};

impl ClusterNode {
    /// The gossip section: `max(3, N/10)` random healthy nodes (at most N - 2), then every
    /// PFAIL node; a hostname extension when this node announces one.
    pub(crate) fn gossip_body(&mut self) -> OwnedPing {
        let me = self.topology.me();
        let known = self.topology.known();
        let table = self.topology.capacity() as u64;
        let wanted = (known / 10).max(3).min(known.saturating_sub(2));
        let mut ping = OwnedPing::default();
        ping.reserve_gossip(wanted + self.walks.pfail_nodes());
        let mut chosen = 0;
        // Which table entries this section holds, a bit each (a linear `contains` would
        // cost N²/200 comparisons per message). Cleared per section: at a thousand nodes
        // that is 16 words, where a stamp per entry, never cleared, spread the marks over
        // 4 KB and made most draws a cache miss more.
        let mut marks = core::mem::take(&mut self.gossip_marks);
        marks.clear();
        marks.resize(self.topology.capacity().div_ceil(64), 0);
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
            let Some(node) = self.topology.at(at).filter(|_| at != me) else {
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
        if self.walks.pfail_nodes() > 0 {
            for (at, node) in self.topology.enumerate() {
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
    ///
    /// The draws are worked out first and loaded in a pass of their own: mixed into one
    /// loop, each load came with the generator's and the division's instructions, and the
    /// core's window of instructions in flight ran full with few loads in it (with the
    /// receiver's passes split the same way: 7 % off 20-s windows at N = 1000, about 5 %
    /// off whole runs).
    fn fetch_draws(&self, draws: usize) {
        let mut rng = self.rng;
        let table = self.topology.capacity() as u64;
        if table == 0 {
            return;
        }
        let mut picks = [0u16; 256];
        let draws = draws.min(picks.len());
        for pick in &mut picks[..draws] {
            *pick = (crate::cluster::next(&mut rng) % table) as u16;
        }
        let mut sum = 0u64;
        for &at in &picks[..draws] {
            sum = sum.wrapping_add(self.topology.touch(at, true));
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
    /// At N = 1000 this made a run 6 % faster. The ids are hashed in a pass before the
    /// buckets' loads, for the reason given at [`Self::fetch_draws`].
    fn fetch_gossip_nodes(&self, ping: &redis_cluster_bus::Ping<'_>) {
        let mut buckets = [0u32; 256];
        let mut count = 0;
        for (bucket, entry) in buckets.iter_mut().zip(ping.gossip()) {
            *bucket = self.topology.home(&entry.node());
            count += 1;
        }
        let mut homes = [0u16; 256];
        for (home, &bucket) in homes.iter_mut().zip(&buckets[..count]) {
            *home = self.topology.bucket(bucket);
        }
        let mut sum = 0u64;
        for &at in &homes[..count] {
            sum = sum.wrapping_add(self.topology.touch(at, false));
        }
        core::hint::black_box(sum);
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
        let Some(node) = self.topology.at(at) else {
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
            if let Some(node) = self.topology.at_mut_quiet(at) {
                node.pong_received = pong;
            }
            self.fold_due(at);
        }
        let Some(node) = self.topology.at(at) else {
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
        let Some(node) = self.topology.at_mut(at).filter(|_| moved) else {
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
    pub(crate) fn process_gossip(&mut self, ping: &redis_cluster_bus::Ping<'_>, now: u64) {
        let sender = ping.header().sender();
        let sender_known = self.node(&sender).is_some_and(|n| !n.in_handshake());
        let sender_is_master = self
            .node(&sender)
            .is_some_and(|n| n.is_master() && !n.in_handshake());
        self.fetch_gossip_nodes(ping);
        for entry in ping.gossip() {
            let id = entry.node();
            if let Some(at) = self.topology.index_of(&id) {
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
            if self.topology.is_blacklisted(&id, Instant::from_millis(now)) {
                continue;
            }
            let mut node = Node::new(id);
            node.ip = NodeIp::new(&String::from_utf8_lossy(entry.ip()));
            node.port = entry.port();
            node.pport = entry.pport();
            node.cport = entry.cport();
            let replica = flags.contains(NodeFlags::REPLICA);
            node.set(NodeFlags::REPLICA, replica);
            node.set(NodeFlags::MASTER, !replica);
            node.ctime = now;
            self.topology.insert(node);
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
