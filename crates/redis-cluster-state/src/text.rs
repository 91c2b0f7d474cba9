//! The node table as text: `CLUSTER NODES` lines and the nodes.conf file (semantics 6.1, 6.2).

use alloc::{
    string::{String, ToString},
    vec::Vec,
};
use core::fmt::Write as _;

use redis_cluster_bus::{NodeAddress, NodeFlags, NodeId, NodesLine, SlotToken};
use redis_hash_slot::Slot;

use crate::{
    cluster::ClusterNode,
    config::Config,
    node::{Node, NodeIp},
    time::Instant,
};

/// Why a nodes.conf could not be loaded (the server stops with "Unrecoverable error:
/// corrupted cluster config file.").
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("corrupted cluster config file, line {line}: {what}")]
pub struct ConfError {
    /// The line, from 1 (0: the file as a whole).
    pub line: usize,
    /// What is wrong.
    pub what: &'static str,
}

impl ClusterNode {
    /// `CLUSTER NODES`: one line per known node, handshake nodes included, each ending in
    /// `\n`, in node-id order (the server's order is its hash table's, which clients never
    /// rely on).
    pub fn cluster_nodes(&self) -> String {
        let mut out = String::new();
        for node in self.nodes() {
            self.write_line(&mut out, node, false);
        }
        out
    }

    /// The lines of `CLUSTER REPLICAS <id>`: the replicas of that master.
    pub fn replica_lines(&self, master: &NodeId) -> Vec<String> {
        self.nodes()
            .filter(|n| n.is_replica() && n.master.as_ref() == Some(master))
            .map(|node| {
                let mut line = String::new();
                self.write_line(&mut line, node, false);
                line
            })
            .collect()
    }

    /// The nodes.conf file: the `CLUSTER NODES` lines without handshake nodes (with the aux
    /// fields newer servers keep), then `vars currentEpoch <n> lastVoteEpoch <n>`.
    pub fn nodes_conf(&self) -> String {
        let mut out = String::new();
        for node in self.nodes().filter(|n| !n.in_handshake()) {
            self.write_line(&mut out, node, true);
        }
        let _ = writeln!(
            out,
            "vars currentEpoch {} lastVoteEpoch {}",
            self.current_epoch, self.last_vote_epoch
        );
        out
    }

    fn write_line(&self, out: &mut String, node: &Node, conf: bool) {
        // The address and the slot tokens are written by the bus crate's line types, the
        // ones the loader reads them with.
        let address = NodeAddress {
            ip: node.ip.as_str(),
            port: node.port,
            cport: Some(node.cport),
            hostname: node.hostname.as_deref().filter(|h| !h.is_empty()),
            aux: if conf { &node.aux } else { "" },
        };
        let master = match &node.master {
            Some(master) if node.is_replica() => master.to_string(),
            _ => String::from("-"),
        };
        let myself = node.flags.contains(NodeFlags::MYSELF);
        let link = if node.link || myself {
            "connected"
        } else {
            "disconnected"
        };
        let _ = write!(
            out,
            "{} {address} {} {master} {} {} {} {link}",
            node.id,
            node.flags,
            node.ping_sent,
            node.pong_received,
            self.node_epoch(node)
        );
        for range in node.slots.ranges() {
            let _ = write!(out, " {}", SlotToken::Range(range));
        }
        if myself {
            // Open slots, in slot order, on the myself line only.
            let mut marks: Vec<(u16, bool, String)> = Vec::new();
            marks.extend(
                self.topology
                    .migrating()
                    .map(|(s, id)| (s, true, id.to_string())),
            );
            marks.extend(
                self.topology
                    .importing()
                    .map(|(s, id)| (s, false, id.to_string())),
            );
            marks.sort_by_key(|(slot, _, _)| *slot);
            for (slot, migrating, id) in marks {
                let Some(slot) = Slot::new(slot) else {
                    continue;
                };
                let token = match migrating {
                    true => SlotToken::Migrating(slot, &id),
                    false => SlotToken::Importing(slot, &id),
                };
                let _ = write!(out, " {token}");
            }
        }
        out.push('\n');
    }

    /// The config epoch a line shows: a replica's is its master's.
    fn node_epoch(&self, node: &Node) -> u64 {
        match node.master.as_ref().and_then(|m| self.node(m)) {
            Some(master) if node.is_replica() => master.config_epoch,
            _ => node.config_epoch,
        }
    }

    /// Loads a nodes.conf as a starting server does: `config` gives the announced ports and
    /// options, the file gives the identity, the table and the epochs. Non-zero ping and pong
    /// times become `now`, FAIL nodes fail at `now`, replicas' config epochs are forced to 0
    /// and the current epoch is raised to the largest config epoch found.
    ///
    /// Where a hand-edited file lists an id twice, the lines add up as on the server: the
    /// flags of both, the slots no earlier line claimed, the last line's epoch and address.
    /// The one file the servers load and this refuses is one whose `myself` line is also
    /// `handshake`: they save it without their own line and cannot start from it again.
    pub fn from_nodes_conf(config: Config, text: &str, now: Instant) -> Result<Self, ConfError> {
        let now = now.as_millis();
        let mut cluster = Self::new(config);
        let placeholder = cluster.myself().id;
        let mut myself = None;
        let mut open: Vec<(Slot, bool, NodeId)> = Vec::new();
        let mut from_file = alloc::collections::BTreeSet::new();
        let mut epochs = None;
        for (number, line) in text.lines().enumerate() {
            let bad = |what| ConfError {
                line: number + 1,
                what,
            };
            let fields: Vec<&str> = line.split(' ').filter(|f| !f.is_empty()).collect();
            match fields.first() {
                None => continue,
                Some(&"vars") => {
                    let (mut current, mut vote) = (0, 0);
                    for pair in fields[1..].chunks(2) {
                        let [name, value] = pair else {
                            return Err(bad("vars without a value"));
                        };
                        let value = value.parse().map_err(|_| bad("vars value"))?;
                        match *name {
                            "currentEpoch" => current = value,
                            "lastVoteEpoch" => vote = value,
                            _ => {} // unknown variables are only warned about
                        }
                    }
                    epochs = Some((current, vote));
                    continue;
                }
                Some(_) => {}
            }
            let line = NodesLine::parse(line).map_err(|e| bad(e.what()))?;
            let id = line.node_id().ok_or_else(|| bad("bad node id"))?;
            // The entry this file already made for the id (as a master of an earlier line),
            // else a new one; never the placeholder of `new`, even when the seed drew the
            // same id.
            let mut node = match from_file.contains(&id) {
                true => cluster.node(&id).cloned().unwrap_or_else(|| Node::new(id)),
                false => Node::new(id),
            };
            from_file.insert(id);
            let address = line.address;
            node.ip = NodeIp::new(address.ip);
            node.port = address.port;
            node.cport = address.bus_port();
            node.hostname = address.hostname.map(String::from);
            node.aux = String::from(address.aux);
            // A second line for the same id adds its flags to the first's, as the server's
            // loader does: `myself` from the first line stays.
            let flags = line.node_flags().ok_or_else(|| bad("unknown flag"))?;
            node.flags |= flags;
            // `-` leaves the master an earlier line of the id gave.
            let master = line.master_id().ok_or_else(|| bad("bad master id"))?;
            if let Some(master) = master {
                node.master = Some(master);
                if from_file.insert(master) {
                    cluster.topology.insert(Node::new(master));
                }
            }
            let time = |field: &str| -> Result<u64, ConfError> {
                let t: u64 = field.parse().map_err(|_| bad("bad time"))?;
                Ok(if t == 0 { 0 } else { now })
            };
            node.ping_sent = time(line.ping_sent)?;
            node.pong_received = time(line.pong_received)?;
            node.config_epoch = line
                .config_epoch
                .parse()
                .map_err(|_| bad("bad config epoch"))?;
            if node.is_replica() {
                node.config_epoch = 0;
            }
            if node.is_failed() {
                node.fail_time = now;
            }
            let is_myself = node.flags.contains(NodeFlags::MYSELF);
            if is_myself && node.in_handshake() {
                // The servers load this, then save a file without their own line (handshake
                // nodes are never saved) that none of them can start from.
                return Err(bad("myself in handshake"));
            }
            if flags.contains(NodeFlags::MYSELF) {
                if myself.is_some() {
                    return Err(bad("two myself lines"));
                }
                myself = Some(id);
                node.link = true;
            }
            let at = cluster.topology.insert(node);
            for token in line.slots() {
                let (slot, migrating, target) = match token.map_err(|e| bad(e.what()))? {
                    SlotToken::Range(range) => {
                        // The first line to claim a slot keeps it, as on the server.
                        for slot in range {
                            if cluster.owner(slot).is_none() {
                                cluster.bind(slot, Some(at));
                            }
                        }
                        continue;
                    }
                    SlotToken::Migrating(slot, to) => (slot, true, to),
                    SlotToken::Importing(slot, from) => (slot, false, from),
                };
                let target = NodesLine::id_of(target).ok_or_else(|| bad("bad open slot"))?;
                if is_myself {
                    open.push((slot, migrating, target));
                }
            }
        }
        let Some(me) = myself else {
            return Err(ConfError {
                line: 0,
                what: "no myself line",
            });
        };
        // The placeholder identity of `new` gives way to the file's.
        cluster
            .topology
            .adopt_myself(&me, !from_file.contains(&placeholder));
        let config = cluster.config.clone();
        let me = cluster.topology.myself_mut();
        me.port = config.port;
        me.cport = config.cport;
        me.pport = config.pport;
        if config.hostname.is_some() {
            me.hostname = config.hostname.clone();
        }
        if me.ip.is_empty() {
            me.ip = NodeIp::new(&config.ip);
        }
        for (slot, migrating, target) in open {
            match migrating {
                true => cluster.topology.set_migrating(slot, Some(target)),
                false => cluster.topology.set_importing(slot, Some(target)),
            };
        }
        let (current, vote) = epochs.unwrap_or((0, 0));
        let largest = cluster.nodes().map(|n| n.config_epoch).max().unwrap_or(0);
        cluster.current_epoch = current.max(largest);
        cluster.last_vote_epoch = vote;
        cluster.refresh_state();
        Ok(cluster)
    }
}
