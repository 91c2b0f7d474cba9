//! A failover in progress: a replica's [`Election`] (its schedule, request and votes), a
//! [`Manual`] failover on either side, and [`FailoverMode`]. When each step runs, and what
//! it sends, is `failover.rs`'s.

use redis_cluster_bus::NodeId;

use crate::time::{Duration, Instant};

/// A replica's election in progress: when its vote request goes out, the rank it was
/// scheduled at, the epoch it asked in, and the votes counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Election {
    /// When the request goes out, or went out: the attempt's start, from which its expiry
    /// and the next attempt count (the `Timer::Election` wakes the node for it).
    time: Option<Instant>,
    /// Whether the request went out.
    sent: bool,
    /// The replica's rank among its siblings when scheduled.
    rank: usize,
    /// Votes received.
    votes: usize,
    /// The epoch the request carried.
    epoch: u64,
}

impl Election {
    /// A new attempt whose request goes out at `start`, for a replica of `rank`.
    pub(crate) fn schedule(start: Instant, rank: usize) -> Self {
        Self {
            time: Some(start),
            rank,
            ..Self::default()
        }
    }

    /// The attempt's start, if there is one.
    pub(crate) fn start(&self) -> Option<Instant> {
        self.time
    }

    /// Whether a new attempt may be scheduled at `now`: none was, or the last one started
    /// more than `retry` ago.
    pub(crate) fn may_retry(&self, now: Instant, retry: Duration) -> bool {
        self.time.is_none_or(|previous| now - previous > retry)
    }

    /// Before the request goes out, a replica whose rank got worse waits a second more
    /// per place lost; returns the new start when it moved.
    pub(crate) fn rerank(&mut self, rank: usize) -> Option<Instant> {
        if self.sent || rank <= self.rank {
            return None;
        }
        let later = Duration::from_secs((rank - self.rank) as u64);
        self.rank = rank;
        let start = self.time.as_mut()?;
        *start += later;
        Some(*start)
    }

    /// Whether the request went out.
    pub(crate) fn requested(&self) -> bool {
        self.sent
    }

    /// The request goes out now, in `epoch`.
    pub(crate) fn request(&mut self, epoch: u64) {
        self.epoch = epoch;
        self.sent = true;
    }

    /// A vote from a master whose header carries `current_epoch`: counted when the request
    /// went out and the vote is not from an older epoch. Returns whether it counted.
    pub(crate) fn vote(&mut self, current_epoch: u64) -> bool {
        let counts = self.sent && current_epoch >= self.epoch;
        self.votes += usize::from(counts);
        counts
    }

    /// The votes counted.
    pub(crate) fn votes(&self) -> usize {
        self.votes
    }

    /// The epoch the request carried: the config epoch a won election takes.
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch
    }

    /// A takeover: no request, the epoch is one bumped without consensus.
    pub(crate) fn take_over(epoch: u64) -> Self {
        Self {
            epoch,
            ..Self::default()
        }
    }
}

/// A manual failover in progress (`CLUSTER FAILOVER`), on the replica or on its master; it
/// is in progress while `Timer::ManualFailover` is armed, which is its end.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Manual {
    /// On the master: the replica taking over.
    replica: Option<NodeId>,
    /// On the replica: the master's offset once it paused, when known.
    master_offset: Option<u64>,
    /// On the replica: the election may start.
    can_start: bool,
}

impl Manual {
    /// On a master: `replica` takes over, and writes pause until it has this master's offset.
    pub(crate) fn for_replica(replica: NodeId) -> Self {
        Self {
            replica: Some(replica),
            ..Self::default()
        }
    }

    /// On a replica: FORCE, the election may start at once.
    pub(crate) fn forced() -> Self {
        Self {
            can_start: true,
            ..Self::default()
        }
    }

    /// On the master: the replica taking over.
    pub(crate) fn replica(&self) -> Option<NodeId> {
        self.replica
    }

    /// On the replica: whether the election may start.
    pub(crate) fn can_start(&self) -> bool {
        self.can_start
    }

    /// On the replica, a header from its master (`paused`, at `offset`), this replica at
    /// `mine`: the first paused header's offset is the one to reach. Returns whether the
    /// election may start from now on (it just became possible).
    pub(crate) fn progress(&mut self, paused: bool, offset: u64, mine: u64) -> bool {
        if paused && self.master_offset.is_none() {
            self.master_offset = Some(offset);
        }
        if self.master_offset == Some(mine) && !self.can_start {
            self.can_start = true;
            return true;
        }
        false
    }
}

/// `CLUSTER FAILOVER`'s option.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FailoverMode {
    /// Coordinated with a healthy master: it pauses writes until this replica has its offset.
    #[default]
    Default,
    /// No coordination with the master; still an election.
    Force,
    /// No election: take the slots by bumping the config epoch without consensus.
    Takeover,
}
