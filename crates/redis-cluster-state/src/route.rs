//! [`ClusterNode::route`]: where a keyed command goes, decided as a real node decides it
//! (semantics section 1.2, steps A to H, in that order).

use core::fmt;

use redis_hash_slot::{Slot, key_slot};
use redis_resp::errors;

use crate::{cluster::ClusterNode, config::EndpointType, node::Node};

/// A keyed command as the redirect decision sees it. For EXEC: every key of every queued
/// command, and `write` when any of them writes.
#[derive(Clone, Copy, Debug)]
pub struct Request<'a, K> {
    /// The keys, in the order the command names them.
    pub keys: &'a [K],
    /// The command may write (`write` flag).
    pub write: bool,
    /// The connection sent ASKING before this command (or the command has the `asking` flag:
    /// RESTORE-ASKING).
    pub asking: bool,
    /// The connection is in READONLY mode.
    pub readonly: bool,
    /// The command is MIGRATE.
    pub migrate: bool,
    /// The command is sharded pub/sub (SPUBLISH, SSUBSCRIBE, SUNSUBSCRIBE): its "keys" are
    /// channels.
    pub pubsub_shard: bool,
}

impl<'a, K> Request<'a, K> {
    /// A read by a normal connection.
    pub fn new(keys: &'a [K]) -> Self {
        Self {
            keys,
            write: false,
            asking: false,
            readonly: false,
            migrate: false,
            pubsub_shard: false,
        }
    }
}

/// What a node does with a keyed command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision<'n> {
    /// Run it here.
    Serve,
    /// `-MOVED <slot> <endpoint>:<port>`.
    Moved(Slot, &'n Node, EndpointType),
    /// `-ASK <slot> <endpoint>:<port>`: the slot is migrating there and every key is missing.
    Ask(Slot, &'n Node, EndpointType),
    /// `-TRYAGAIN Multiple keys request during rehashing of slot`.
    TryAgain,
    /// `-CROSSSLOT Keys in request don't hash to the same slot`.
    CrossSlot,
    /// `-CLUSTERDOWN Hash slot not served`: the first key's slot has no owner.
    Unbound,
    /// `-CLUSTERDOWN The cluster is down`.
    Down,
    /// `-CLUSTERDOWN The cluster is down and only accepts read commands`.
    DownReadOnly,
}

impl Decision<'_> {
    /// Whether the command runs here.
    #[inline]
    pub fn is_served(&self) -> bool {
        *self == Self::Serve
    }
}

impl fmt::Display for Decision<'_> {
    /// The error line the server sends (without `-` and CRLF); empty for [`Decision::Serve`].
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let endpoint = |f: &mut fmt::Formatter<'_>, node: &Node, kind: EndpointType| match kind {
            EndpointType::Ip => write!(f, "{}:{}", node.ip, node.port),
            EndpointType::Hostname => match &node.hostname {
                Some(host) if !host.is_empty() => write!(f, "{host}:{}", node.port),
                _ => write!(f, "?:{}", node.port),
            },
            EndpointType::Unknown => write!(f, ":{}", node.port),
        };
        match *self {
            Self::Serve => Ok(()),
            Self::Moved(slot, node, kind) => {
                write!(f, "MOVED {} ", u16::from(slot))?;
                endpoint(f, node, kind)
            }
            Self::Ask(slot, node, kind) => {
                write!(f, "ASK {} ", u16::from(slot))?;
                endpoint(f, node, kind)
            }
            Self::TryAgain => f.write_str(errors::TRYAGAIN),
            Self::CrossSlot => f.write_str(errors::CROSSSLOT),
            Self::Unbound => f.write_str(errors::CLUSTERDOWN_UNBOUND),
            Self::Down => f.write_str(errors::CLUSTERDOWN),
            Self::DownReadOnly => f.write_str(errors::CLUSTERDOWN_READONLY),
        }
    }
}

impl ClusterNode {
    /// Where the command `request` goes. `exists` tells whether a key is in this node's
    /// keyspace; it is asked only while the slot is migrating or importing, as the server
    /// looks keys up only then. Allocates nothing.
    #[inline]
    pub fn route<K: AsRef<[u8]>>(
        &self,
        request: &Request<'_, K>,
        exists: impl FnMut(&[u8]) -> bool,
    ) -> Decision<'_> {
        // The common case, inlined into the caller: one key, the cluster up, no slot open
        // anywhere. Steps A, C to F change nothing then, and the owner's entry is read only
        // when the answer needs it (G, H). The rest goes through every step in order.
        let [key] = request.keys else {
            return self.route_any(request, exists);
        };
        if !self.health.ok() || self.topology.has_open_slots() {
            return self.route_any(request, exists);
        }
        let slot = key_slot(key.as_ref());
        let Some(at) = self.topology.owner_of(slot) else {
            return Decision::Unbound; // A1
        };
        if at == self.topology.me() {
            return Decision::Serve; // H
        }
        let Some(owner) = self.topology.at(at) else {
            return Decision::Unbound; // A1
        };
        if (request.readonly || request.pubsub_shard) && !request.write {
            let me = self.myself();
            if me.is_replica() && me.master == Some(owner.id) {
                return Decision::Serve; // G
            }
        }
        Decision::Moved(slot, owner, self.config.preferred_endpoint) // H
    }

    /// Where a client blocked on `request`'s keys (BLPOP and the like) goes when the
    /// configuration changes, as the server's `clusterRedirectBlockedClientIfNeeded` decides:
    /// [`Decision::Down`] while the cluster is down; for the first key whose slot is neither
    /// this node's nor being imported, [`Decision::Unbound`] or [`Decision::Moved`];
    /// otherwise [`Decision::Serve`]: it stays blocked. A slot only migrating away keeps its
    /// blocked clients (no ASK, no TRYAGAIN), and a READONLY replica keeps the reads of its
    /// master's slots.
    ///
    /// ```
    /// use redis_cluster_state::{ClusterNode, Config, Instant, Request};
    ///
    /// let mut node = ClusterNode::new(Config::new("127.0.0.1", 7000));
    /// # use redis_hash_slot::Slot;
    /// node.add_slots((0..16384).filter_map(Slot::new), Instant::ZERO)
    ///     .expect("free slots");
    /// node.update_state(Instant::ZERO);
    /// assert!(node.route_blocked(&Request::new(&[b"queue"])).is_served());
    /// ```
    pub fn route_blocked<K: AsRef<[u8]>>(&self, request: &Request<'_, K>) -> Decision<'_> {
        if !self.health.ok() {
            return Decision::Down;
        }
        let me = self.myself();
        for key in request.keys {
            let slot = key_slot(key.as_ref());
            let mine = self.topology.is_mine(slot);
            if mine || self.importing_from(slot).is_some() {
                continue;
            }
            let Some(owner) = self.owner(slot) else {
                return Decision::Unbound;
            };
            let replica_read = request.readonly && !request.write && me.master == Some(owner.id);
            if !(replica_read && me.is_replica()) {
                return Decision::Moved(slot, owner, self.config.preferred_endpoint);
            }
        }
        Decision::Serve
    }

    /// [`Self::route`], every step in order.
    fn route_any<K: AsRef<[u8]>>(
        &self,
        request: &Request<'_, K>,
        mut exists: impl FnMut(&[u8]) -> bool,
    ) -> Decision<'_> {
        let endpoint = self.config.preferred_endpoint;
        // A. The first key decides the slot and its owner.
        let Some(first) = request.keys.first() else {
            return Decision::Serve; // B
        };
        let first = first.as_ref();
        let slot = key_slot(first);
        let Some(owner) = self.owner(slot) else {
            return Decision::Unbound; // A1
        };
        // Owners compare by their place in the table, not by their 40-byte ids.
        let mine = self.topology.is_mine(slot);
        let migrating = mine && self.migrating_to(slot).is_some();
        let importing = !migrating && self.importing_from(slot).is_some();
        let mut multi_key = false;
        for key in &request.keys[1..] {
            let key = key.as_ref();
            if key_slot(key) != slot {
                return Decision::CrossSlot; // A3
            }
            multi_key |= key != first;
        }
        // A4. Key existence counts only for an open slot.
        let (mut present, mut missing) = (0usize, 0usize);
        if (migrating || importing) && !request.pubsub_shard {
            for key in request.keys {
                if exists(key.as_ref()) {
                    present += 1;
                } else {
                    missing += 1;
                }
            }
        }
        // C. The cluster is down.
        if !self.health.ok() {
            if request.pubsub_shard {
                if !self.config.allow_pubsubshard_when_down {
                    return Decision::Down;
                }
            } else if !self.config.allow_reads_when_down {
                return Decision::Down;
            } else if request.write {
                return Decision::DownReadOnly;
            }
        }
        // D. MIGRATE of an open slot runs here.
        if request.migrate && (migrating || importing) {
            return Decision::Serve;
        }
        // E. Migrating: missing keys are at the target.
        if migrating && missing > 0 {
            if present > 0 {
                return Decision::TryAgain;
            }
            return match self.migrating_to(slot).and_then(|id| self.node(id)) {
                Some(target) => Decision::Ask(slot, target, endpoint),
                None => Decision::Unbound,
            };
        }
        // F. Importing, after ASKING.
        if importing && request.asking {
            if multi_key && missing > 0 {
                return Decision::TryAgain;
            }
            return Decision::Serve;
        }
        // G. Reads of my master's slots on a READONLY replica.
        if (request.readonly || request.pubsub_shard) && !request.write {
            let me = self.myself();
            if me.is_replica() && me.master == Some(owner.id) {
                return Decision::Serve;
            }
        }
        // H.
        if !mine {
            return Decision::Moved(slot, owner, endpoint);
        }
        Decision::Serve
    }
}

#[cfg(test)]
mod tests {
    use alloc::{format, string::String};

    use crate::{ClusterNode, Config, Request};

    use super::Decision;

    fn id(i: usize) -> String {
        format!("{:040x}", i + 1)
    }

    /// Three masters, the third without slots 10000-10999, and a replica of the first; the
    /// node on line `me` is myself.
    fn layout(me: usize) -> String {
        let lines = [
            ("master", String::from("-"), "0-5460"),
            ("master", String::from("-"), "5461-9999"),
            ("master", String::from("-"), "11000-16383"),
            ("slave", id(0), ""),
        ];
        let mut text = String::new();
        for (i, (role, master, slots)) in lines.iter().enumerate() {
            let flags = if i == me {
                format!("myself,{role}")
            } else {
                String::from(*role)
            };
            let epoch = if *role == "slave" { 1 } else { i + 1 };
            text += &format!(
                "{} 127.0.0.1:{}@{} {flags} {master} 0 0 {epoch} connected {slots}\n",
                id(i),
                7000 + i,
                17000 + i,
            );
        }
        text + "vars currentEpoch 3 lastVoteEpoch 0\n"
    }

    /// `route`'s inlined path for one key must decide as the walk through every step does,
    /// for every request flag, on a master and on a replica, with the cluster up and down,
    /// with and without an open slot.
    #[test]
    fn the_one_key_path_decides_as_every_step_does() {
        for me in [0, 3] {
            let mut config = Config::new("127.0.0.1", 7000 + me as u16);
            config.require_full_coverage = false;
            config.allow_reads_when_down = me == 3;
            let mut node = ClusterNode::from_nodes_conf(config, &layout(me), crate::Instant::ZERO)
                .expect("layout");
            let (mut served, mut moved, mut unbound, mut other) = (0, 0, 0, 0);
            for (state_ok, open) in [(true, false), (false, false), (true, true)] {
                node.health.force(state_ok);
                if open {
                    let id = node.myself().id;
                    node.topology
                        .set_migrating(redis_hash_slot::Slot::MIN, Some(id));
                }
                for i in 0..1000 {
                    let key = format!("key:{i}");
                    let keys = [key.as_bytes()];
                    for flags in 0..8u8 {
                        let mut request = Request::new(&keys);
                        request.write = flags & 1 != 0;
                        request.readonly = flags & 2 != 0;
                        request.pubsub_shard = flags & 4 != 0;
                        let fast = node.route(&request, |_| false);
                        let every = node.route_any(&request, |_| false);
                        assert_eq!(fast, every, "{key} flags {flags} me {me}");
                        match fast {
                            Decision::Serve => served += 1,
                            Decision::Moved(..) => moved += 1,
                            Decision::Unbound => unbound += 1,
                            _ => other += 1,
                        }
                    }
                }
            }
            // Each kind of answer came up, so each branch of the inlined path was compared.
            assert!(
                served > 0 && moved > 0 && unbound > 0 && other > 0,
                "me {me}"
            );
        }
    }
}
