//! When things are due: the node's timers, one deadline per [`Timer`], in a table
//! ([`Timers::next`] is what `poll_timeout` reports; an input at or after a deadline fires
//! that timer once), and [`Walks`], what the cron remembers of when its walks are due.

use crate::time::Instant;

/// What a node waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Timer {
    /// The 100 ms cron (`clusterCron`): pings, PFAIL, handshakes, replica migration, the
    /// cluster state.
    Cron,
    /// The end of a manual failover (`mf_end`), on the replica and on its paused master.
    ManualFailover,
    /// When this replica's vote request goes out (`failover_auth_time`).
    Election,
}

impl Timer {
    /// Every timer, in the order a due input fires them: a manual failover that timed out
    /// ends before the cron and the election look at it.
    pub(crate) const ALL: [Self; 3] = [Self::ManualFailover, Self::Cron, Self::Election];

    const fn slot(self) -> usize {
        match self {
            Self::Cron => 0,
            Self::ManualFailover => 1,
            Self::Election => 2,
        }
    }
}

/// A deadline per timer, or none.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Timers([Option<Instant>; 3]);

impl Timers {
    /// Arms `timer` for `at`, replacing its deadline.
    pub(crate) fn set(&mut self, timer: Timer, at: Instant) {
        self.0[timer.slot()] = Some(at);
    }

    /// Disarms `timer`.
    pub(crate) fn stop(&mut self, timer: Timer) {
        self.0[timer.slot()] = None;
    }

    /// `timer`'s deadline.
    pub(crate) fn get(&self, timer: Timer) -> Option<Instant> {
        self.0[timer.slot()]
    }

    /// Whether `timer` is armed.
    pub(crate) fn is_set(&self, timer: Timer) -> bool {
        self.get(timer).is_some()
    }

    /// The earliest deadline.
    pub(crate) fn next(&self) -> Option<Instant> {
        self.0.iter().flatten().min().copied()
    }

    /// Disarms `timer` and says so when its deadline is `now` or earlier: the caller then
    /// does what it waited for (and may arm it again).
    pub(crate) fn fire(&mut self, timer: Timer, now: Instant) -> bool {
        let due = self.get(timer).is_some_and(|at| at <= now);
        if due {
            self.stop(timer);
        }
        due
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_earliest_deadline_fires_once() {
        let mut timers = Timers::default();
        assert_eq!(timers.next(), None);
        timers.set(Timer::Cron, Instant::from_millis(100));
        timers.set(Timer::Election, Instant::from_millis(40));
        assert_eq!(timers.next(), Some(Instant::from_millis(40)));
        assert!(
            !timers.fire(Timer::Election, Instant::from_millis(39)),
            "early"
        );
        assert!(timers.fire(Timer::Election, Instant::from_millis(40)));
        assert!(
            !timers.fire(Timer::Election, Instant::from_millis(41)),
            "once"
        );
        assert_eq!(timers.next(), Some(Instant::from_millis(100)));
        timers.stop(Timer::Cron);
        assert!(!timers.is_set(Timer::Cron));
        assert_eq!(timers.next(), None);
    }
}

/// What the cron remembers between ticks to skip work that would change nothing: its tick
/// count, when the table was last walked and when a node is next due, whether the last
/// look for orphaned masters found none, and the PFAIL count gossip sections are sized by.
#[derive(Clone, Debug)]
pub(crate) struct Walks {
    ticks: u64,
    /// The table's version when the cron last walked it, and the first time after that
    /// walk at which a node becomes due for something (a ping, PFAIL, a handshake's end).
    walked: (u64, u64),
    /// The table's version and the cluster state when replica migration last found no
    /// orphaned master: until either changes it would find none again.
    no_orphans: Option<(u64, bool)>,
    /// Walk on every tick regardless (`ClusterNode::set_walk_every_tick`).
    every_tick: bool,
    /// PFAIL nodes as the last walk counted them.
    pfail_nodes: usize,
}

impl Default for Walks {
    fn default() -> Self {
        Self {
            ticks: 0,
            walked: (u64::MAX, 0),
            no_orphans: None,
            every_tick: false,
            pfail_nodes: 0,
        }
    }
}

impl Walks {
    /// Walk on every tick, or only when due.
    pub(crate) fn set_every_tick(&mut self, on: bool) {
        self.every_tick = on;
    }

    /// One more tick; whether it is a once-a-second one.
    pub(crate) fn tick(&mut self) -> bool {
        self.ticks += 1;
        self.ticks % 10 == 0
    }

    /// Whether the table at `version` needs a walk at `now`.
    pub(crate) fn due(&self, version: u64, now: u64) -> bool {
        let (walked, due) = self.walked;
        self.every_tick || walked != version || now >= due
    }

    /// A walk of the table at `version` found `pfail_nodes` PFAIL nodes and the next node
    /// due at `due`.
    pub(crate) fn walked(&mut self, version: u64, due: u64, pfail_nodes: usize) {
        self.walked = (version, due);
        self.pfail_nodes = pfail_nodes;
    }

    /// A node's ping or pong time changed without a new table version: it is due at `due`.
    pub(crate) fn fold_due(&mut self, due: u64) {
        self.walked.1 = self.walked.1.min(due);
    }

    /// Whether replica migration may skip its look: it found no orphan at this `version`
    /// and cluster state.
    pub(crate) fn no_orphans(&self, version: u64, ok: bool) -> bool {
        !self.every_tick && self.no_orphans == Some((version, ok))
    }

    /// What replica migration's look found: no orphan at this `version` and state, or one.
    pub(crate) fn orphans_looked(&mut self, none: Option<(u64, bool)>) {
        self.no_orphans = none;
    }

    /// PFAIL nodes as the last walk counted them: gossip sections carry them all.
    pub(crate) fn pfail_nodes(&self) -> usize {
        self.pfail_nodes
    }
}
