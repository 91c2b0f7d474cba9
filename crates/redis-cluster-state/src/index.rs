//! [`NodeIndex`]: node ids to node-table indexes, in id order and by hash.
//!
//! Every bus message names its sender and, in gossip, a tenth of the cluster: at a thousand
//! nodes that is about a hundred id look-ups per message. An ordered map alone costs a dozen
//! 40-byte comparisons per look-up; a small open-addressing table (linear probing, keyed by
//! the node's seed so that chosen ids cannot pile up in one run) answers in one or two. Its
//! buckets hold 32 bits of the id's hash and the table index, eight bytes: the id itself is
//! checked in the node table's entry, whose first cache line the caller reads anyway (with
//! the ids in the buckets, a thousand nodes' indexes were 86 MB, each look-up a miss of its
//! own). The ordered map stays for what needs id order (CLUSTER NODES, iteration).

use alloc::{collections::BTreeMap, vec, vec::Vec};

use redis_cluster_bus::NodeId;

use crate::table::Table;

/// An empty bucket.
const EMPTY: u16 = u16::MAX;

#[derive(Clone, Copy, Debug)]
struct Bucket {
    /// The high half of the id's hash: its home bucket is in its low bits.
    hash: u32,
    at: u16,
}

const FREE: Bucket = Bucket { hash: 0, at: EMPTY };

#[derive(Clone, Debug)]
pub(crate) struct NodeIndex {
    order: BTreeMap<NodeId, u16>,
    /// A power of two, at most half full.
    buckets: Vec<Bucket>,
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

    fn hash(&self, id: &NodeId) -> u32 {
        let word = |at: usize| {
            let mut bytes = [0u8; 8];
            bytes.copy_from_slice(&id.0[at..at + 8]);
            u64::from_le_bytes(bytes)
        };
        let mut h = (word(0) ^ self.key).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        h ^= word(8).rotate_left(21) ^ word(16).rotate_left(42) ^ word(24) ^ word(32);
        h = (h ^ (h >> 31)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        (h >> 32) as u32
    }

    fn mask(&self) -> usize {
        self.buckets.len() - 1
    }

    /// The table index of `id`; `table` holds the ids the buckets point at.
    pub(crate) fn get(&self, id: &NodeId, table: &Table) -> Option<u16> {
        if self.buckets.is_empty() {
            return None;
        }
        let hash = self.hash(id);
        let mut i = hash as usize & self.mask();
        loop {
            let bucket = self.buckets[i];
            if bucket.at == EMPTY {
                return None;
            }
            if bucket.hash == hash
                && table
                    .get(usize::from(bucket.at))
                    .is_some_and(|node| node.id == *id)
            {
                return Some(bucket.at);
            }
            i = (i + 1) & self.mask();
        }
    }

    /// Where `id`'s home bucket is (0 for an empty index): arithmetic only, no load, so
    /// that a batch of look-ups can compute them all before their loads (see
    /// `ClusterNode::fetch_gossip_nodes`).
    pub(crate) fn home(&self, id: &NodeId) -> u32 {
        match self.buckets.is_empty() {
            true => 0,
            false => self.hash(id) & self.mask() as u32,
        }
    }

    /// The table index in the bucket at `bucket`, whoever's it is (a free one's mark past
    /// any table): a plain load, so that a batch of them can overlap their cache misses
    /// ahead of the look-ups proper.
    pub(crate) fn bucket(&self, bucket: u32) -> u16 {
        self.buckets.get(bucket as usize).map_or(EMPTY, |b| b.at)
    }

    /// Maps `id` to `at`, replacing what `id` mapped to before.
    pub(crate) fn insert(&mut self, id: NodeId, at: u16) {
        self.remove(&id);
        self.order.insert(id, at);
        if self.order.len() * 2 > self.buckets.len() {
            self.rebuild((self.order.len() * 2).next_power_of_two().max(16));
        } else {
            self.place(&id, at);
        }
    }

    /// Puts `at` in the first free bucket from `id`'s home.
    fn place(&mut self, id: &NodeId, at: u16) {
        let hash = self.hash(id);
        let mut i = hash as usize & self.mask();
        while self.buckets[i].at != EMPTY {
            i = (i + 1) & self.mask();
        }
        self.buckets[i] = Bucket { hash, at };
    }

    pub(crate) fn remove(&mut self, id: &NodeId) -> Option<u16> {
        let at = self.order.remove(id)?;
        // Its bucket is the one on its probe run that points at `at` (indexes are unique).
        let mask = self.mask();
        let mut hole = self.hash(id) as usize & mask;
        loop {
            match self.buckets[hole].at {
                EMPTY => return Some(at), // unreachable while `order` and the buckets agree
                held if held == at => break,
                _ => hole = (hole + 1) & mask,
            }
        }
        // Backward-shift deletion: move up every entry of the run after the hole that may
        // live there, so that no probe stops early at a hole.
        self.buckets[hole] = FREE;
        let mut next = hole;
        loop {
            next = (next + 1) & mask;
            let entry = self.buckets[next];
            if entry.at == EMPTY {
                break;
            }
            let home = entry.hash as usize & mask;
            // The entry stays when its home is cyclically within (hole, next].
            let stays = if hole <= next {
                hole < home && home <= next
            } else {
                hole < home || home <= next
            };
            if !stays {
                self.buckets[hole] = entry;
                self.buckets[next] = FREE;
                hole = next;
            }
        }
        Some(at)
    }

    fn rebuild(&mut self, size: usize) {
        self.buckets = vec![FREE; size];
        let entries: Vec<(NodeId, u16)> = self.order.iter().map(|(id, at)| (*id, *at)).collect();
        for (id, at) in entries {
            self.place(&id, at);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::Node;
    use proptest::prelude::*;

    fn id(n: u8) -> NodeId {
        // Few distinct ids, so that operations hit the same ones and runs collide.
        let mut id = [b'0'; 40];
        id[0] = b'a' + n % 7;
        id[39] = b'a' + n / 7;
        NodeId(id)
    }

    proptest! {
        /// Any sequence of inserts and removes answers as an ordered map does (each id has
        /// its own table entry, as in a node table).
        #[test]
        fn agrees_with_a_map(ops in proptest::collection::vec((any::<bool>(), 0u8..40), 0..400), key in any::<u64>()) {
            let mut index = NodeIndex::new(key);
            let mut table = Table::default();
            for n in 0..40 {
                prop_assert_eq!(table.add(Node::new(id(n))), usize::from(n));
            }
            for n in 0..40 {
                table.remove(n);
            }
            let mut model = BTreeMap::new();
            for (insert, n) in ops {
                let at = u16::from(n);
                if insert {
                    table.replace(usize::from(at), Node::new(id(n)));
                    index.insert(id(n), at);
                    model.insert(id(n), at);
                } else {
                    prop_assert_eq!(index.remove(&id(n)), model.remove(&id(n)));
                    table.remove(usize::from(at));
                }
                for n in 0..40 {
                    prop_assert_eq!(index.get(&id(n), &table), model.get(&id(n)).copied());
                }
                prop_assert_eq!(index.len(), model.len());
                prop_assert!(index.values().eq(model.values().copied()));
                // The prefetch's home buckets name entries in use or are free, and the
                // first id of every probe run sits in its home bucket.
                let mut at_home = 0;
                for n in 0..40 {
                    let named = index.bucket(index.home(&id(n)));
                    let held = named == EMPTY || model.values().any(|&at| at == named);
                    prop_assert!(held, "home bucket names {}", named);
                    at_home += usize::from(model.get(&id(n)) == Some(&named));
                }
                prop_assert_eq!(at_home == 0, model.is_empty());
            }
        }
    }

    #[test]
    fn an_empty_index_has_no_home_entries() {
        let index = NodeIndex::new(7);
        assert_eq!(index.bucket(index.home(&id(1))), EMPTY);
        assert_eq!(index.bucket(u32::MAX), EMPTY);
    }

    #[test]
    fn a_bucket_is_eight_bytes() {
        assert_eq!(size_of::<Bucket>(), 8);
    }
}
