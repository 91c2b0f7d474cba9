//! [`Table`]: the node table, a slab of [`Node`]s indexed by the numbers the slot table and
//! the id index hold.
//!
//! Which entries are in use is kept apart from the entries, in one byte each: a walk or a
//! random draw learns that an entry is free without touching it, and one that is in use
//! costs the entry's first cache line, where [`Node`] keeps what the cron and the gossip
//! read. (As `Vec<Option<Node>>`, the compiler put the `Option`'s tag in a later line of the
//! entry: every look-up paid two lines.)
//!
//! Every mutable access counts as a change ([`Table::version`]): what the cron derives from
//! the whole table (which node is due for a ping, orphaned masters) needs no new walk while
//! the version stands still and no deadline passed. The exception, [`Table::get_mut_quiet`],
//! is for the writes every message makes and the cron does not read (or only as a due time,
//! which the writer folds into the walk's).

use alloc::vec::Vec;

use redis_cluster_bus::NodeId;

use crate::node::Node;

#[derive(Clone, Debug, Default)]
pub(crate) struct Table {
    entries: Vec<Node>,
    used: Vec<bool>,
    version: u64,
}

impl Table {
    /// Entries, free ones included: indexes run below this.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    pub(crate) fn get(&self, at: usize) -> Option<&Node> {
        match self.used.get(at) {
            Some(true) => self.entries.get(at),
            _ => None,
        }
    }

    /// Reads a word of the first cache line of the entry at `at`, used or free, and with
    /// `address` one of the second (a gossip entry's address and ports): 0 past the end.
    /// The value means nothing; the loads bring the lines into the cache ahead of a batch
    /// of look-ups (see `ClusterNode::fetch_draws`).
    pub(crate) fn touch(&self, at: usize, address: bool) -> u64 {
        self.entries.get(at).map_or(0, |node| match address {
            true => node.pong_received ^ u64::from(node.port),
            false => node.pong_received,
        })
    }

    /// Changes with every mutable access (a look-up for writing counts, written or not).
    pub(crate) fn version(&self) -> u64 {
        self.version
    }

    pub(crate) fn get_mut(&mut self, at: usize) -> Option<&mut Node> {
        self.version += 1;
        self.get_mut_quiet(at)
    }

    /// A mutable access that is not a new version: only for writes to what neither the
    /// cron's walk nor replica migration reads (epochs, offsets, hostnames, failure reports),
    /// or to a node's ping and pong times when the caller folds the node's new due time into
    /// the walk's (`ClusterNode::fold_due`).
    pub(crate) fn get_mut_quiet(&mut self, at: usize) -> Option<&mut Node> {
        match self.used.get(at) {
            Some(true) => self.entries.get_mut(at),
            _ => None,
        }
    }

    /// Puts `node` in the first free entry (or a new one at the end); returns where.
    pub(crate) fn add(&mut self, node: Node) -> usize {
        self.version += 1;
        match self.used.iter().position(|used| !used) {
            Some(at) => {
                self.entries[at] = node;
                self.used[at] = true;
                at
            }
            None => {
                self.entries.push(node);
                self.used.push(true);
                self.entries.len() - 1
            }
        }
    }

    /// Puts `node` at `at`, in use or free; an index past the end changes nothing.
    pub(crate) fn replace(&mut self, at: usize, node: Node) {
        self.version += 1;
        if let (Some(entry), Some(used)) = (self.entries.get_mut(at), self.used.get_mut(at)) {
            *entry = node;
            *used = true;
        }
    }

    /// Frees the entry at `at` (its heap parts are dropped).
    pub(crate) fn remove(&mut self, at: usize) {
        self.version += 1;
        if let Some(used) = self.used.get_mut(at) {
            *used = false;
            self.entries[at] = Node::new(NodeId::NONE);
        }
    }

    /// The entries in use, in table order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Node> {
        self.entries
            .iter()
            .zip(&self.used)
            .filter_map(|(node, used)| used.then_some(node))
    }

    /// The entries in use with their indexes, in table order.
    pub(crate) fn enumerate(&self) -> impl Iterator<Item = (usize, &Node)> {
        self.iter_at().map(|at| (at, &self.entries[at]))
    }

    /// The entries in use, mutably, with their indexes, in table order.
    pub(crate) fn enumerate_mut(&mut self) -> impl Iterator<Item = (usize, &mut Node)> {
        self.version += 1;
        self.entries
            .iter_mut()
            .zip(&self.used)
            .enumerate()
            .filter_map(|(at, (node, used))| used.then_some((at, node)))
    }

    /// The indexes in use, in table order.
    pub(crate) fn iter_at(&self) -> impl Iterator<Item = usize> + '_ {
        self.used
            .iter()
            .enumerate()
            .filter_map(|(at, used)| used.then_some(at))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    fn node(n: u8) -> Node {
        Node::new(NodeId([b'a' + n; 40]))
    }

    #[test]
    fn free_entries_are_reused_and_skipped() {
        let mut table = Table::default();
        assert_eq!(table.add(node(0)), 0);
        assert_eq!(table.add(node(1)), 1);
        assert_eq!(table.add(node(2)), 2);
        table.remove(1);
        assert!(table.get(1).is_none());
        assert!(table.get_mut(1).is_none());
        assert!(table.get(7).is_none());
        assert_eq!(table.len(), 3);
        let ids: Vec<u8> = table.iter().map(|n| n.id.0[0]).collect();
        assert_eq!(ids, [b'a', b'c']);
        assert_eq!(table.iter_at().collect::<Vec<_>>(), [0, 2]);
        assert_eq!(
            table.enumerate().map(|(at, _)| at).collect::<Vec<_>>(),
            [0, 2]
        );
        assert_eq!(table.enumerate_mut().count(), 2);
        // The free entry is the first one taken, then the table grows.
        assert_eq!(table.add(node(3)), 1);
        assert_eq!(table.get(1).map(|n| n.id.0[0]), Some(b'd'));
        assert_eq!(table.add(node(4)), 3);
        // An explicit index replaces; one past the end changes nothing.
        table.replace(0, node(5));
        assert_eq!(table.get(0).map(|n| n.id.0[0]), Some(b'f'));
        table.replace(9, node(6));
        assert_eq!(table.len(), 4);
    }

    #[test]
    fn every_mutable_access_but_a_quiet_one_is_a_new_version() {
        let mut table = Table::default();
        let mut seen = vec![table.version()];
        table.add(node(0));
        seen.push(table.version());
        table.replace(0, node(1));
        seen.push(table.version());
        let _ = table.get(0);
        let _ = table.iter().count();
        assert_eq!(
            table.version(),
            *seen.last().unwrap_or(&0),
            "reads change nothing"
        );
        let _ = table.get_mut(0);
        seen.push(table.version());
        if let Some(node) = table.get_mut_quiet(0) {
            node.pong_received = 7;
        }
        assert_eq!(
            table.version(),
            *seen.last().unwrap_or(&0),
            "a quiet write is no new version"
        );
        assert_eq!(table.get(0).map(|n| n.pong_received), Some(7));
        let _ = table.enumerate_mut().count();
        seen.push(table.version());
        table.remove(0);
        seen.push(table.version());
        seen.dedup();
        assert_eq!(seen.len(), 6);
    }
}
