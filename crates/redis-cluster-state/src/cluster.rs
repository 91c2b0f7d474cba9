//! [`ClusterNode`]: one node's view of the cluster: its node table, the slot table with the
//! migrating and importing marks, its epochs and the cluster state.

use alloc::{collections::VecDeque, vec::Vec};

use redis_cluster_bus::{NodeFlags, NodeId};
use redis_hash_slot::{Slot, SlotSet};

use crate::{
    config::Config,
    error::CommandError,
    health::Health,
    node::{Node, NodeIp},
    output::Output,
    time::Instant,
    topology::Topology,
};

/// One node's view of the cluster.
///
/// ```
/// use redis_cluster_state::{ClusterNode, Config, Instant};
/// use redis_hash_slot::{Slot, SlotRange};
///
/// let mut node = ClusterNode::new(Config::new("127.0.0.1", 7000));
/// let first = SlotRange::new(Slot::new(0).unwrap(), Slot::new(5460).unwrap()).unwrap();
/// node.add_slots(first, Instant::ZERO)?;
/// assert_eq!(node.owner(Slot::new(42).unwrap()).map(|n| n.port), Some(7000));
/// assert_eq!(node.myself().slots.len(), 5461);
/// # Ok::<(), redis_cluster_state::CommandError>(())
/// ```
#[derive(Clone, Debug)]
pub struct ClusterNode {
    pub(crate) config: Config,
    /// The nodes, the slot owners and the open slots.
    pub(crate) topology: Topology,
    /// The cluster-wide logical clock, as this node knows it.
    pub(crate) current_epoch: u64,
    /// The epoch in which this node last voted (it votes once per epoch).
    pub(crate) last_vote_epoch: u64,
    /// `cluster_state`, and whether it is due for a new evaluation.
    pub(crate) health: Health,
    /// Bus messages sent and received, by type, for CLUSTER INFO.
    pub(crate) stats: crate::stats::Stats,
    /// The generator every random choice draws from, seeded by the config.
    pub(crate) rng: u64,
    /// The outputs not polled yet, in order.
    pub(crate) outputs: VecDeque<crate::output::Queued>,
    /// The bus links handed out and not yet closed.
    pub(crate) links: crate::handles::Links,
    /// The deadlines: the cron, a manual failover's end, the election's request.
    pub(crate) timers: crate::timers::Timers,
    /// What the cron remembers to skip walks that would change nothing.
    pub(crate) walks: crate::timers::Walks,
    /// This replica's election, when one is under way.
    pub(crate) election: crate::election::Election,
    /// A manual failover under way, on either side.
    pub(crate) manual: crate::election::Manual,
    /// The time of the latest input (ms).
    pub(crate) clock: u64,
    /// DEBUG DROP-CLUSTER-PACKET-FILTER: incoming messages of this type are ignored.
    pub(crate) drop_filter: Option<redis_cluster_bus::MessageType>,
    /// Which table entries the gossip section being built holds, a bit each (kept between
    /// sections only to save its allocation).
    pub(crate) gossip_marks: Vec<u64>,
}

impl ClusterNode {
    /// A node alone in its cluster, as at a first start: a master with no slots, epochs 0,
    /// its id from `config.id` or else drawn from the seed.
    pub fn new(config: Config) -> Self {
        let mut rng = config.seed ^ 0x9e37_79b9_7f4a_7c15;
        let id = config.id.unwrap_or_else(|| random_id(&mut rng));
        let mut me = Node::new(id);
        me.ip = NodeIp::new(&config.ip);
        me.port = config.port;
        me.cport = config.cport;
        me.pport = config.pport;
        me.hostname = config.hostname.clone();
        me.flags = NodeFlags::MYSELF | NodeFlags::MASTER;
        if config.replica_no_failover {
            me.set(NodeFlags::NOFAILOVER, true);
        }
        me.link = true;
        let mut node = Self {
            config,
            topology: Topology::new(me, rng),
            current_epoch: 0,
            last_vote_epoch: 0,
            health: Health::default(),
            stats: crate::stats::Stats::default(),
            rng,
            outputs: VecDeque::new(),
            links: crate::handles::Links::default(),
            timers: crate::timers::Timers::default(),
            walks: crate::timers::Walks::default(),
            election: crate::election::Election::default(),
            manual: crate::election::Manual::default(),
            clock: 0,
            drop_filter: None,
            gossip_marks: Vec::new(),
        };
        node.timers.set(crate::timers::Timer::Cron, Instant::ZERO);
        node.refresh_state();
        node
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Replaces the configuration while the node runs, as CONFIG SET does on the server: the
    /// timeouts, factors and switches apply from the next input on, and this node's own
    /// announced hostname and no-failover flag change at once (the next PING carries them).
    /// `id`, `seed` and the addresses are read only by [`ClusterNode::new`]; here they are
    /// kept as they were.
    ///
    /// ```
    /// use redis_cluster_state::{ClusterNode, Config, Duration, Instant};
    ///
    /// let mut node = ClusterNode::new(Config::new("127.0.0.1", 7000));
    /// let mut config = node.config().clone();
    /// config.node_timeout = Duration::from_millis(500);
    /// config.hostname = Some("a.example".into());
    /// node.set_config(config, Instant::ZERO);
    /// assert_eq!(node.config().node_timeout, Duration::from_millis(500));
    /// assert_eq!(node.myself().hostname.as_deref(), Some("a.example"));
    /// ```
    pub fn set_config(&mut self, mut config: Config, now: Instant) {
        self.tick(now);
        config.id = self.config.id;
        config.seed = self.config.seed;
        config.ip = core::mem::take(&mut self.config.ip);
        config.port = self.config.port;
        config.cport = self.config.cport;
        config.pport = self.config.pport;
        let me = self.topology.myself_mut();
        me.hostname = config.hostname.clone().filter(|h| !h.is_empty());
        me.set(NodeFlags::NOFAILOVER, config.replica_no_failover);
        self.config = config;
        self.health.mark_stale();
    }

    /// This node's own entry.
    pub fn myself(&self) -> &Node {
        self.topology.myself()
    }

    /// The node with this id.
    pub fn node(&self, id: &NodeId) -> Option<&Node> {
        self.topology.node(id)
    }

    /// Every known node, itself included, in id order.
    pub fn nodes(&self) -> impl Iterator<Item = &Node> {
        self.topology.nodes()
    }

    /// The node serving `slot`: one index into the table.
    pub fn owner(&self, slot: Slot) -> Option<&Node> {
        self.topology.owner(slot)
    }

    /// Binds `slot` to the node at `at` (or unbinds it): the cluster state is due for a new
    /// evaluation.
    pub(crate) fn bind(&mut self, slot: Slot, at: Option<u16>) {
        self.health.mark_stale();
        self.topology.bind(slot, at);
    }

    /// The node `slot` is migrating to, on its owner.
    pub fn migrating_to(&self, slot: Slot) -> Option<&NodeId> {
        self.topology.migrating_to(slot)
    }

    /// The node `slot` is being imported from.
    pub fn importing_from(&self, slot: Slot) -> Option<&NodeId> {
        self.topology.importing_from(slot)
    }

    /// The cluster-wide logical clock.
    pub fn current_epoch(&self) -> u64 {
        self.current_epoch
    }

    /// The epoch in which this node last voted.
    pub fn last_vote_epoch(&self) -> u64 {
        self.last_vote_epoch
    }

    /// The config epoch this node advertises: its own, or its master's for a replica
    /// (`cluster_my_epoch`).
    pub fn my_epoch(&self) -> u64 {
        let me = self.myself();
        match me.master.as_ref().and_then(|m| self.node(m)) {
            Some(master) if me.is_replica() => master.config_epoch,
            _ => me.config_epoch,
        }
    }

    /// Whether the cluster is `ok` in this node's view (`cluster_state`).
    pub fn state_ok(&self) -> bool {
        self.health.ok()
    }

    /// `CLUSTER ADDSLOTS` / `ADDSLOTSRANGE`: every slot must be unassigned and given once;
    /// then each is bound to this node and its importing mark cleared.
    pub fn add_slots(
        &mut self,
        slots: impl IntoIterator<Item = Slot>,
        now: Instant,
    ) -> Result<(), CommandError> {
        self.tick(now);
        let slots = self.distinct(slots)?;
        if let Some(&busy) = slots.iter().find(|&&s| self.owner(s).is_some()) {
            return Err(CommandError::SlotBusy(busy));
        }
        for slot in slots {
            self.topology.set_importing(slot, None);
            self.bind(slot, Some(self.topology.me()));
        }
        self.refresh_state();
        Ok(())
    }

    /// `CLUSTER DELSLOTS` / `DELSLOTSRANGE`: every slot must be assigned and given once.
    pub fn del_slots(
        &mut self,
        slots: impl IntoIterator<Item = Slot>,
        now: Instant,
    ) -> Result<(), CommandError> {
        self.tick(now);
        let slots = self.distinct(slots)?;
        if let Some(&free) = slots.iter().find(|&&s| self.owner(s).is_none()) {
            return Err(CommandError::SlotUnassigned(free));
        }
        for slot in slots {
            self.bind(slot, None);
        }
        self.refresh_state();
        Ok(())
    }

    fn distinct(&self, slots: impl IntoIterator<Item = Slot>) -> Result<Vec<Slot>, CommandError> {
        let mut seen = SlotSet::new();
        let mut out = Vec::new();
        for slot in slots {
            if !seen.insert(slot) {
                return Err(CommandError::SlotTwice(slot));
            }
            out.push(slot);
        }
        Ok(out)
    }

    /// `CLUSTER SET-CONFIG-EPOCH`: only alone and at config epoch 0; raises the current epoch.
    pub fn set_config_epoch(&mut self, epoch: u64, now: Instant) -> Result<(), CommandError> {
        self.tick(now);
        if self.topology.known() > 1 {
            return Err(CommandError::NotAlone);
        }
        if self.myself().config_epoch != 0 {
            return Err(CommandError::EpochAlreadySet);
        }
        self.topology.myself_mut().config_epoch = epoch;
        self.current_epoch = self.current_epoch.max(epoch);
        Ok(())
    }

    /// Bump without consensus (`CLUSTER BUMPEPOCH`): when this node's config epoch is 0 or not
    /// the largest known, takes currentEpoch + 1. Returns whether it bumped, and the epoch.
    pub fn bump_epoch(&mut self, now: Instant) -> (bool, u64) {
        self.tick(now);
        let mine = self.myself().config_epoch;
        let largest = self
            .nodes()
            .map(|n| n.config_epoch)
            .max()
            .unwrap_or(0)
            .max(self.current_epoch);
        if mine == 0 || mine != largest {
            self.current_epoch += 1;
            let epoch = self.current_epoch;
            self.topology.myself_mut().config_epoch = epoch;
            (true, epoch)
        } else {
            (false, mine)
        }
    }

    /// Recomputes `cluster_state` (semantics 1.5) at the latest input's time, queues
    /// [`crate::Event::StateChanged`] when it changed, and returns it: `fail` when full
    /// coverage is required and a slot is unassigned or owned by a FAIL node, or when fewer
    /// than a majority of the slot-owning masters are free of FAIL and PFAIL. A master does
    /// not turn `ok` within 2 s of its first cron (`handle_timeout`), nor within the rejoin
    /// delay (the node timeout clamped to 0.5–5 s) after it was last in a minority; before
    /// the first cron the state is computed at once, so that a table built and queried
    /// without running the node (a tool, a test) has its plain answer.
    pub fn update_state(&mut self, now: Instant) -> bool {
        self.tick(now);
        self.refresh_state()
    }

    /// [`Self::update_state`] at the latest input's time.
    pub(crate) fn refresh_state(&mut self) -> bool {
        let now = Instant::from_millis(self.clock);
        if let Some(ok) = self.health.evaluate(&self.topology, &self.config, now) {
            self.push(Output::Event(crate::output::Event::StateChanged { ok }));
        }
        self.health.ok()
    }
}

impl ClusterNode {
    /// Notes the time of an input (the node's clock never goes back) and returns it in the
    /// milliseconds the node's records count in.
    pub(crate) fn tick(&mut self, now: Instant) -> u64 {
        self.clock = self.clock.max(now.as_millis());
        now.as_millis()
    }

    pub(crate) fn rng_next(&mut self) -> u64 {
        next(&mut self.rng)
    }
}

pub(crate) fn next(state: &mut u64) -> u64 {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    state.wrapping_mul(0x2545_f491_4f6c_dd1d)
}

/// 40 lowercase hex digits from the generator, as a first start draws its id.
pub(crate) fn random_id(state: &mut u64) -> NodeId {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut id = [0u8; NodeId::LEN];
    for chunk in id.chunks_mut(16) {
        let mut bits = next(state);
        for byte in chunk {
            *byte = HEX[(bits & 15) as usize];
            bits >>= 4;
        }
    }
    NodeId(id)
}
