//! The node's timers: one deadline per [`Timer`], in a table. [`Timers::next`] is what
//! `poll_timeout` reports; an input at or after a deadline fires that timer once.

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
