//! [`Topology`]: who is in the cluster and who serves what, as pure data: the node table,
//! the id index over it, the ids kept out for a while (CLUSTER FORGET's blacklist), the slot
//! table of owners, the open slots (migrating and importing marks) and the slots whose owner
//! stopped claiming them. It sends nothing and reads no clock; `ClusterNode` reads it and
//! turns what its changes return into outputs.

use alloc::{collections::BTreeMap, vec, vec::Vec};

use redis_cluster_bus::NodeId;
use redis_hash_slot::{SLOT_COUNT, Slot, SlotSet};

use crate::{index::NodeIndex, node::Node, output::LinkId, table::Table, time::Instant};

/// No owner in the slot table.
const NONE: u16 = u16::MAX;

/// The nodes and the slots of one node's view; entries are named by their table index
/// (`u16`), which the slot table holds.
#[derive(Clone, Debug)]
pub(crate) struct Topology {
    /// This node's own index; its entry is created with the topology and never removed.
    myself: u16,
    /// The node table: a slab indexed by the numbers the slot table holds.
    nodes: Table,
    index: NodeIndex,
    /// Ids forgotten (`CLUSTER FORGET`, a forgotten-node extension) and until when gossip
    /// may not bring them back; only known nodes are added, so it stays as short as the table.
    blacklist: Vec<(NodeId, Instant)>,
    /// The owner of each slot, by table index; [`NONE`] when unassigned.
    owners: Vec<u16>,
    migrating: BTreeMap<u16, NodeId>,
    importing: BTreeMap<u16, NodeId>,
    /// Slots still bound to an owner that stopped claiming them in its pings (the server's
    /// `owner_not_claiming_slot`); cleared when the slot changes owner.
    not_claiming: SlotSet,
}

impl Topology {
    /// A topology of `me` alone, its id index keyed by `seed`.
    pub(crate) fn new(me: Node, seed: u64) -> Self {
        let mut topology = Self {
            myself: 0,
            nodes: Table::default(),
            index: NodeIndex::new(seed),
            blacklist: Vec::new(),
            owners: vec![NONE; usize::from(SLOT_COUNT)],
            migrating: BTreeMap::new(),
            importing: BTreeMap::new(),
            not_claiming: SlotSet::new(),
        };
        topology.myself = topology.insert(me);
        topology
    }

    /// This node's own table index.
    pub(crate) fn me(&self) -> u16 {
        self.myself
    }

    pub(crate) fn myself(&self) -> &Node {
        self.at(self.myself).unwrap_or_else(|| unreachable_myself())
    }

    pub(crate) fn myself_mut(&mut self) -> &mut Node {
        let at = usize::from(self.myself);
        match self.nodes.get_mut(at) {
            Some(node) => node,
            None => unreachable_myself(),
        }
    }

    /// The table index of a node, by id.
    pub(crate) fn index_of(&self, id: &NodeId) -> Option<u16> {
        self.index.get(id, &self.nodes)
    }

    pub(crate) fn node(&self, id: &NodeId) -> Option<&Node> {
        self.at(self.index_of(id)?)
    }

    pub(crate) fn node_mut(&mut self, id: &NodeId) -> Option<&mut Node> {
        let at = self.index_of(id)?;
        self.at_mut(at)
    }

    pub(crate) fn at(&self, at: u16) -> Option<&Node> {
        self.nodes.get(usize::from(at))
    }

    pub(crate) fn at_mut(&mut self, at: u16) -> Option<&mut Node> {
        self.nodes.get_mut(usize::from(at))
    }

    /// [`Self::at_mut`] without a new table version (see `Table::get_mut_quiet` for what
    /// may be written through it).
    pub(crate) fn at_mut_quiet(&mut self, at: u16) -> Option<&mut Node> {
        self.nodes.get_mut_quiet(usize::from(at))
    }

    /// Every known node, itself included, in id order.
    pub(crate) fn nodes(&self) -> impl Iterator<Item = &Node> {
        self.index.values().filter_map(|at| self.at(at))
    }

    /// Every known node in table order: cheaper than [`Self::nodes`] where order is of no
    /// consequence (sums, counts, the cron's walk).
    pub(crate) fn table(&self) -> impl Iterator<Item = &Node> {
        self.nodes.iter()
    }

    /// [`Self::table`] with each node's index.
    pub(crate) fn enumerate(&self) -> impl Iterator<Item = (u16, &Node)> {
        self.nodes.enumerate().map(|(at, node)| (at as u16, node))
    }

    /// [`Self::enumerate`], mutably (a new table version).
    pub(crate) fn enumerate_mut(&mut self) -> impl Iterator<Item = (u16, &mut Node)> {
        self.nodes
            .enumerate_mut()
            .map(|(at, node)| (at as u16, node))
    }

    /// How many nodes are known, itself included.
    pub(crate) fn known(&self) -> usize {
        self.index.len()
    }

    /// Table entries, free ones included: indexes run below this.
    pub(crate) fn capacity(&self) -> usize {
        self.nodes.len()
    }

    /// Changes with every mutable access to a node (see `Table::version`).
    pub(crate) fn version(&self) -> u64 {
        self.nodes.version()
    }

    /// A word of the entry at `at` (with `address`, of its second cache line), read only to
    /// bring it into the cache ahead of a batch of look-ups.
    pub(crate) fn touch(&self, at: u16, address: bool) -> u64 {
        self.nodes.touch(usize::from(at), address)
    }

    /// Where the id index's home bucket of `id` is, for [`Self::bucket`].
    pub(crate) fn home(&self, id: &NodeId) -> u32 {
        self.index.home(id)
    }

    /// The entry the id index's bucket at `bucket` names, for [`Self::touch`].
    pub(crate) fn bucket(&self, bucket: u32) -> u16 {
        self.index.bucket(bucket)
    }

    /// Adds a node to the table (replacing one with the same id) and returns its index.
    pub(crate) fn insert(&mut self, node: Node) -> u16 {
        if let Some(at) = self.index_of(&node.id) {
            self.nodes.replace(usize::from(at), node);
            return at;
        }
        let id = node.id;
        let at = self.nodes.add(node) as u16;
        self.index.insert(id, at);
        at
    }

    /// Removes a node other than this one, unbinding its slots. Returns its outbound link
    /// and whether that was up, and whether it owned a slot; `None` for an unknown id.
    pub(crate) fn remove(&mut self, id: &NodeId) -> Option<Removed> {
        let at = self.index_of(id).filter(|&at| at != self.myself)?;
        self.index.remove(id);
        let mut owned = false;
        for slot in Slot::all() {
            if self.owners[usize::from(u16::from(slot))] == at {
                self.bind(slot, None);
                owned = true;
            }
        }
        let link = self
            .at(at)
            .and_then(|n| n.outbound_link.map(|link| (link, n.link)));
        self.nodes.remove(usize::from(at));
        Some(Removed { link, owned })
    }

    /// Keeps `id` out until `until` (a later call for the same id replaces its time); the
    /// entries whose time is past `now` are dropped.
    pub(crate) fn blacklist(&mut self, id: NodeId, until: Instant, now: Instant) {
        self.blacklist.retain(|(f, t)| *f != id && *t > now);
        self.blacklist.push((id, until));
    }

    /// Whether `id` is kept out at `now`.
    pub(crate) fn is_blacklisted(&self, id: &NodeId, now: Instant) -> bool {
        self.blacklist.iter().any(|(f, t)| f == id && *t > now)
    }

    /// Gives the node `from` the id `to`; returns its index.
    pub(crate) fn rename(&mut self, from: &NodeId, to: NodeId) -> Option<u16> {
        let at = self.index_of(from)?;
        self.index.remove(from);
        self.index.insert(to, at);
        if let Some(node) = self.at_mut(at) {
            node.id = to;
        }
        Some(at)
    }

    /// Makes the node `id` this node's own entry (a loaded nodes.conf names it), and with
    /// `drop_old` removes the entry that was (the placeholder of a first start). An unknown
    /// `id` changes nothing.
    pub(crate) fn adopt_myself(&mut self, id: &NodeId, drop_old: bool) {
        let (Some(at), old) = (self.index_of(id), self.myself) else {
            return;
        };
        self.myself = at;
        if drop_old && at != old {
            if let Some(old_id) = self.at(old).map(|n| n.id) {
                self.index.remove(&old_id);
            }
            self.nodes.remove(usize::from(old));
        }
    }

    /// The table index of `slot`'s owner.
    pub(crate) fn owner_of(&self, slot: Slot) -> Option<u16> {
        match self.owners.get(usize::from(u16::from(slot))) {
            Some(&NONE) | None => None,
            Some(&at) => Some(at),
        }
    }

    /// The node serving `slot`: one index into the table.
    pub(crate) fn owner(&self, slot: Slot) -> Option<&Node> {
        self.at(self.owner_of(slot)?)
    }

    /// Whether this node serves `slot`.
    pub(crate) fn is_mine(&self, slot: Slot) -> bool {
        self.owner_of(slot) == Some(self.myself)
    }

    /// Binds `slot` to the node at `at` (or unbinds it), keeping every node's slot set in
    /// step; a change of owner clears the slot's not-claiming mark.
    pub(crate) fn bind(&mut self, slot: Slot, at: Option<u16>) {
        let entry = usize::from(u16::from(slot));
        let old = self.owners[entry];
        if old != at.unwrap_or(NONE) {
            self.not_claiming.remove(slot);
        }
        if old != NONE {
            if let Some(node) = self.nodes.get_mut(usize::from(old)) {
                if node.slots.remove(slot) {
                    node.slot_count -= 1;
                }
            }
        }
        self.owners[entry] = at.unwrap_or(NONE);
        if let Some(at) = at {
            if let Some(node) = self.nodes.get_mut(usize::from(at)) {
                if node.slots.insert(slot) {
                    node.slot_count += 1;
                }
            }
        }
    }

    /// The node `slot` is migrating to, on its owner.
    pub(crate) fn migrating_to(&self, slot: Slot) -> Option<&NodeId> {
        self.migrating.get(&u16::from(slot))
    }

    /// The node `slot` is being imported from.
    pub(crate) fn importing_from(&self, slot: Slot) -> Option<&NodeId> {
        self.importing.get(&u16::from(slot))
    }

    /// Marks `slot` migrating to `to`, or clears the mark; returns the mark it had.
    pub(crate) fn set_migrating(&mut self, slot: Slot, to: Option<NodeId>) -> Option<NodeId> {
        let slot = u16::from(slot);
        match to {
            Some(to) => self.migrating.insert(slot, to),
            None => self.migrating.remove(&slot),
        }
    }

    /// Marks `slot` importing from `from`, or clears the mark; returns the mark it had.
    pub(crate) fn set_importing(&mut self, slot: Slot, from: Option<NodeId>) -> Option<NodeId> {
        let slot = u16::from(slot);
        match from {
            Some(from) => self.importing.insert(slot, from),
            None => self.importing.remove(&slot),
        }
    }

    /// Clears every migrating and importing mark.
    pub(crate) fn close_open_slots(&mut self) {
        self.migrating.clear();
        self.importing.clear();
    }

    /// Whether any slot is migrating or importing.
    pub(crate) fn has_open_slots(&self) -> bool {
        !self.migrating.is_empty() || !self.importing.is_empty()
    }

    /// Every migrating mark, by slot number.
    pub(crate) fn migrating(&self) -> impl Iterator<Item = (u16, &NodeId)> {
        self.migrating.iter().map(|(slot, id)| (*slot, id))
    }

    /// Every importing mark, by slot number.
    pub(crate) fn importing(&self) -> impl Iterator<Item = (u16, &NodeId)> {
        self.importing.iter().map(|(slot, id)| (*slot, id))
    }

    /// Whether `slot`'s owner stopped claiming it.
    pub(crate) fn not_claiming(&self, slot: Slot) -> bool {
        self.not_claiming.contains(slot)
    }

    /// Notes that `slot`'s owner stopped claiming it, or (`false`) claims it again.
    pub(crate) fn set_not_claiming(&mut self, slot: Slot, not_claiming: bool) {
        match not_claiming {
            true => self.not_claiming.insert(slot),
            false => self.not_claiming.remove(slot),
        };
    }

    /// The slots whose owner stopped claiming them.
    pub(crate) fn not_claiming_slots(&self) -> &SlotSet {
        &self.not_claiming
    }
}

/// What [`Topology::remove`] took out with a node.
pub(crate) struct Removed {
    /// Its outbound link, and whether that was up.
    pub(crate) link: Option<(LinkId, bool)>,
    /// Whether it owned a slot (the cluster state must be evaluated again).
    pub(crate) owned: bool,
}

/// The node's own entry is created with it and never removed.
#[cold]
fn unreachable_myself() -> ! {
    unreachable!("a ClusterNode always holds its own entry")
}
