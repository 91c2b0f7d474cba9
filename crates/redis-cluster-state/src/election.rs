//! The data of a failover in progress: a replica's [`Election`], a [`Manual`] failover on
//! either side, and [`FailoverMode`]. The rules that move them are in `failover.rs`.

use redis_cluster_bus::NodeId;

use crate::time::Instant;

/// A replica's election in progress.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Election {
    /// When the request goes out, or went out: the attempt's start, from which its expiry
    /// and the next attempt count (the `Timer::Election` wakes the node for it).
    pub(crate) time: Option<Instant>,
    /// Whether the request went out.
    pub(crate) sent: bool,
    /// The replica's rank among its siblings when scheduled.
    pub(crate) rank: usize,
    /// Votes received.
    pub(crate) votes: usize,
    /// The epoch the request carried.
    pub(crate) epoch: u64,
}

/// A manual failover in progress (`CLUSTER FAILOVER`), on the replica or on its master; it
/// is in progress while `Timer::ManualFailover` is armed, which is its end.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Manual {
    /// On the master: the replica taking over.
    pub(crate) replica: Option<NodeId>,
    /// On the replica: the master's offset once it paused, when known.
    pub(crate) master_offset: Option<u64>,
    /// On the replica: the election may start.
    pub(crate) can_start: bool,
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
