//! [`NodeIndex`]: node ids to node-table indexes, in id order and by hash.
//!
//! Every bus message names its sender and, in gossip, a tenth of the cluster: at a thousand
//! nodes that is about a hundred id look-ups per message. An ordered map alone costs a dozen
//! 40-byte comparisons per look-up; a small open-addressing table (linear probing, keyed by
//! the node's seed so that chosen ids cannot pile up in one run) answers in one or two. The
//! ordered map stays for what needs id order (CLUSTER NODES, iteration).

use alloc::{collections::BTreeMap, vec, vec::Vec};

use redis_cluster_bus::NodeId;

/// An empty bucket.
const EMPTY: u16 = u16::MAX;

#[derive(Clone, Debug)]
pub(crate) struct NodeIndex {
    order: BTreeMap<NodeId, u16>,
    /// Buckets holding ids and their table indexes (the id beside its index: one cache
    /// miss per look-up); a power of two, at most half full.
    buckets: Vec<(NodeId, u16)>,
    key: u64,
}

impl NodeIndex {
    pub(crate) fn new(key: u64) -> Self {
        Self {
            order: BTreeMap::new(),
            buckets: Vec::new(),
            key,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.order.len()
    }

    /// Table indexes in id order.
    pub(crate) fn values(&self) -> impl Iterator<Item = u16> + '_ {
        self.order.values().copied()
    }

    fn home(&self, id: &NodeId) -> usize {
        let word = |at: usize| {
            let mut bytes = [0u8; 8];
            bytes.copy_from_slice(&id.0[at..at + 8]);
            u64::from_le_bytes(bytes)
        };
        let mut h = (word(0) ^ self.key).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        h ^= word(8).rotate_left(21) ^ word(16).rotate_left(42) ^ word(24) ^ word(32);
        h = (h ^ (h >> 31)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        (h >> 32) as usize & (self.buckets.len() - 1)
    }

    /// The bucket holding `id`, or the empty one where it would go.
    fn find(&self, id: &NodeId) -> (usize, bool) {
        let mask = self.buckets.len() - 1;
        let mut i = self.home(id);
        loop {
            let (held, at) = &self.buckets[i];
            if *at == EMPTY {
                return (i, false);
            }
            if held == id {
                return (i, true);
            }
            i = (i + 1) & mask;
        }
    }

    pub(crate) fn get(&self, id: &NodeId) -> Option<u16> {
        if self.buckets.is_empty() {
            return None;
        }
        match self.find(id) {
            (i, true) => Some(self.buckets[i].1),
            (_, false) => None,
        }
    }

    /// Maps `id` to `at`, replacing what `id` mapped to before.
    pub(crate) fn insert(&mut self, id: NodeId, at: u16) {
        self.remove(&id);
        self.order.insert(id, at);
        if self.order.len() * 2 > self.buckets.len() {
            self.rebuild((self.order.len() * 2).next_power_of_two().max(16));
        } else {
            let (i, _) = self.find(&id);
            self.buckets[i] = (id, at);
        }
    }

    pub(crate) fn remove(&mut self, id: &NodeId) -> Option<u16> {
        let at = self.order.remove(id)?;
        let (mut hole, found) = self.find(id);
        if !found {
            return Some(at); // unreachable while `order` and the buckets agree
        }
        // Backward-shift deletion: move up every entry of the run after the hole that may
        // live there, so that no probe stops early at a hole.
        let mask = self.buckets.len() - 1;
        self.buckets[hole].1 = EMPTY;
        let mut next = hole;
        loop {
            next = (next + 1) & mask;
            let entry = self.buckets[next];
            if entry.1 == EMPTY {
                break;
            }
            let home = self.home(&entry.0);
            // The entry stays when its home is cyclically within (hole, next].
            let stays = if hole <= next {
                hole < home && home <= next
            } else {
                hole < home || home <= next
            };
            if !stays {
                self.buckets[hole] = entry;
                self.buckets[next].1 = EMPTY;
                hole = next;
            }
        }
        Some(at)
    }

    fn rebuild(&mut self, size: usize) {
        self.buckets = vec![(NodeId::NONE, EMPTY); size];
        let entries: Vec<(NodeId, u16)> = self.order.iter().map(|(id, at)| (*id, *at)).collect();
        for (id, at) in entries {
            let (i, _) = self.find(&id);
            self.buckets[i] = (id, at);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn id(n: u8) -> NodeId {
        // Few distinct ids, so that operations hit the same ones and runs collide.
        let mut id = [b'0'; 40];
        id[0] = b'a' + n % 7;
        id[39] = b'a' + n / 7;
        NodeId(id)
    }

    proptest! {
        /// Any sequence of inserts and removes answers as an ordered map does.
        #[test]
        fn agrees_with_a_map(ops in proptest::collection::vec((any::<bool>(), 0u8..40, 0u16..500), 0..400), key in any::<u64>()) {
            let mut index = NodeIndex::new(key);
            let mut model = BTreeMap::new();
            for (insert, n, at) in ops {
                if insert {
                    index.insert(id(n), at);
                    model.insert(id(n), at);
                } else {
                    prop_assert_eq!(index.remove(&id(n)), model.remove(&id(n)));
                }
                for n in 0..40 {
                    prop_assert_eq!(index.get(&id(n)), model.get(&id(n)).copied());
                }
                prop_assert_eq!(index.len(), model.len());
                prop_assert!(index.values().eq(model.values().copied()));
            }
        }
    }
}
