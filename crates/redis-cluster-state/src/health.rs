//! [`Health`]: `cluster_state`, `ok` or `fail`, and what deciding it again needs: whether
//! something it depends on changed, and the two delays that hold a master at `fail` (after
//! its first cron, and after it was last in a minority).

use redis_hash_slot::SLOT_COUNT;

use crate::{
    config::Config,
    time::{Duration, Instant},
    topology::Topology,
};

/// How long a master stays `fail` after its first cron.
const WRITABLE_DELAY: Duration = Duration::from_millis(2_000);

/// The cluster state of one node's view, and when it is due for a new evaluation.
#[derive(Clone, Debug)]
pub(crate) struct Health {
    ok: bool,
    /// Whether it was evaluated once (the first evaluation is no change).
    evaluated: bool,
    /// Whether something it depends on (a slot's owner, a PFAIL mark, a role) changed since
    /// it was last computed: a message or a cron tick evaluates it again only then, as the
    /// server's `CLUSTER_TODO_UPDATE_STATE` and its cron's `update_state` do (the cron also
    /// while the cluster is down).
    stale: bool,
    /// When the first cron ran.
    first_cron: Option<Instant>,
    /// When this node last saw itself in a minority.
    minority_time: Option<Instant>,
}

impl Default for Health {
    fn default() -> Self {
        Self {
            ok: false,
            evaluated: false,
            stale: true,
            first_cron: None,
            minority_time: None,
        }
    }
}

impl Health {
    /// Whether the cluster is `ok` in this view.
    pub(crate) fn ok(&self) -> bool {
        self.ok
    }

    /// Something the state depends on changed.
    pub(crate) fn mark_stale(&mut self) {
        self.stale = true;
    }

    /// Whether the cron should evaluate the state: something changed, or it is `fail` (its
    /// delays run out with time).
    pub(crate) fn due(&self) -> bool {
        self.stale || !self.ok
    }

    /// Whether something changed since the last evaluation.
    pub(crate) fn is_stale(&self) -> bool {
        self.stale
    }

    /// The cron runs at `now`: the first run starts the writable delay.
    pub(crate) fn cron_ran(&mut self, now: Instant) {
        self.first_cron.get_or_insert(now);
    }

    /// Sets the state without evaluating it (unit tests of the routing decision).
    #[cfg(test)]
    pub(crate) fn force(&mut self, ok: bool) {
        self.ok = ok;
    }

    /// Evaluates the state at `now` (semantics 1.5) for a node whose own role is master or
    /// not; returns the new state when it changed.
    ///
    /// `fail` when full coverage is required and a slot is unassigned or owned by a FAIL
    /// node, or when fewer than a majority of the slot-owning masters are free of FAIL and
    /// PFAIL. A master does not turn `ok` within 2 s of its first cron, nor within the
    /// rejoin delay (the node timeout clamped to 0.5–5 s) after it was last in a minority;
    /// before the first cron the state is computed at once.
    pub(crate) fn evaluate(
        &mut self,
        topology: &Topology,
        config: &Config,
        now: Instant,
    ) -> Option<bool> {
        self.stale = false;
        let master = topology.myself().is_master();
        if let Some(first) = self.first_cron {
            if master && !self.ok && now.saturating_since(first) < WRITABLE_DELAY {
                return None;
            }
        }
        let mut ok = true;
        if config.require_full_coverage {
            // Every slot has an owner that is not FAIL: the owners' counts add up.
            let served: usize = topology
                .table()
                .filter(|n| !n.is_failed())
                .map(|n| usize::from(n.slot_count))
                .sum();
            ok = served == usize::from(SLOT_COUNT);
        }
        let masters = topology.table().filter(|n| n.is_master() && n.has_slots());
        let (size, reachable) = masters.fold((0, 0), |(size, up), n| {
            let healthy = !n.is_failed() && !n.is_pfailed();
            (size + 1, up + usize::from(healthy))
        });
        if reachable < size / 2 + 1 {
            ok = false;
            self.minority_time = Some(now);
        }
        if ok && !self.ok && master && self.first_cron.is_some() {
            let rejoin = Duration::from_millis(config.node_timeout.as_millis().clamp(500, 5000));
            if self
                .minority_time
                .is_some_and(|t| now.saturating_since(t) < rejoin)
            {
                return None;
            }
        }
        let changed = self.ok != ok && self.evaluated;
        self.evaluated = true;
        self.ok = ok;
        changed.then_some(ok)
    }
}
