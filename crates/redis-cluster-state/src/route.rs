//! [`ClusterNode::route`]: where a keyed command goes, decided as a real node decides it
//! (semantics section 1.2, steps A to H, in that order).

use core::fmt;

use redis_hash_slot::{Slot, key_slot};

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
            Self::TryAgain => {
                f.write_str("TRYAGAIN Multiple keys request during rehashing of slot")
            }
            Self::CrossSlot => f.write_str("CROSSSLOT Keys in request don't hash to the same slot"),
            Self::Unbound => f.write_str("CLUSTERDOWN Hash slot not served"),
            Self::Down => f.write_str("CLUSTERDOWN The cluster is down"),
            Self::DownReadOnly => {
                f.write_str("CLUSTERDOWN The cluster is down and only accepts read commands")
            }
        }
    }
}

impl ClusterNode {
    /// Where the command `request` goes. `exists` tells whether a key is in this node's
    /// keyspace; it is asked only while the slot is migrating or importing, as the server
    /// looks keys up only then. Allocates nothing.
    pub fn route<K: AsRef<[u8]>>(
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
        let mine = self.owners[usize::from(u16::from(slot))] == self.myself;
        let migrating = mine && !self.migrating_to.is_empty() && self.migrating_to(slot).is_some();
        let importing =
            !migrating && !self.importing_from.is_empty() && self.importing_from(slot).is_some();
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
        if !self.state_ok {
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
