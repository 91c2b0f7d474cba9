//! Keeping the slot map fresh: `CLUSTER SHARDS` (`CLUSTER SLOTS` for a node without it) from
//! the known masters in turn, then the seeds; after a MOVED, a lost connection or CLUSTERDOWN,
//! and on a period; at most one at a time and one per `refresh_min_interval`.
//!
//! A node that lags behind is not trusted: `CLUSTER INFO` goes before each map, and a map
//! from a node whose `cluster_current_epoch` is below the highest one a map was taken at is
//! refused (the next node is asked). A node that missed a failover has a lower epoch than
//! those that voted in it. After a whole round of refusals the highest epoch is forgotten,
//! so that a cluster whose epochs went back (a reset) is followed again.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use redis_cluster_route::{Endpoint, SlotMap};
use redis_hash_slot::Slot;
use redis_resp::Frame;

use crate::conn::Expect;
use crate::engine::{Engine, masters};
use crate::{ConnId, Event, error_frame};

/// When the next reload is due and what the last ones found.
#[derive(Debug)]
pub(crate) struct Refresh {
    interval: Duration,
    min_interval: Duration,
    /// Asked for (by a MOVED, a loss …) since this moment.
    wanted: Option<Instant>,
    /// The periodic reload.
    periodic: Option<Instant>,
    /// A failed reload is tried on another node from this moment.
    again: Option<Instant>,
    last: Option<Instant>,
    in_flight: Option<ConnId>,
    /// The next candidate to ask.
    cursor: usize,
    /// Reloads failed in a row.
    failures: usize,
    /// MOVEDs seen since the reload in flight was asked: its answer may predate them.
    moved: Vec<(Slot, Endpoint)>,
    /// Nodes that refused `CLUSTER SHARDS` (older than 7.0).
    no_shards: HashSet<String>,
    /// The map is the caller's ([`crate::Config::fixed_map`]): never reloaded.
    stopped: bool,
    /// The highest `cluster_current_epoch` a map was taken at.
    epoch: u64,
    /// The epoch of the node asked now, once its `CLUSTER INFO` came.
    answered_epoch: Option<u64>,
}

impl Refresh {
    pub(crate) fn new(now: Instant, interval: Duration, min_interval: Duration) -> Self {
        Self {
            interval,
            min_interval,
            wanted: Some(now),
            periodic: None,
            again: None,
            last: None,
            in_flight: None,
            cursor: 0,
            failures: 0,
            moved: Vec::new(),
            no_shards: HashSet::new(),
            stopped: false,
            epoch: 0,
            answered_epoch: None,
        }
    }

    /// No reload, ever: the caller gives the map.
    pub(crate) fn stop(&mut self) {
        self.stopped = true;
    }

    /// A reload is wanted as soon as the minimum interval allows.
    pub(crate) fn want(&mut self, now: Instant) {
        self.wanted.get_or_insert(now);
    }

    /// A MOVED, to be applied again over a map that may be older than it.
    pub(crate) fn moved(&mut self, slot: Slot, to: Endpoint) {
        if self.in_flight.is_some() {
            self.moved.push((slot, to));
        }
    }

    /// When the next reload may start; `None` while one is in flight.
    pub(crate) fn due(&self) -> Option<Instant> {
        if self.in_flight.is_some() || self.stopped {
            return None;
        }
        let wanted = self.wanted.map(|at| match self.last {
            Some(last) => at.max(last + self.min_interval),
            None => at,
        });
        [wanted, self.periodic, self.again]
            .into_iter()
            .flatten()
            .min()
    }
}

impl Engine {
    /// `CLUSTER INFO` of the node asked for the map: its current epoch (an error, from a
    /// node that has none to say, leaves the map trusted as before).
    pub(crate) fn answer_epoch(&mut self, conn: ConnId, frame: &Frame) {
        if self.refresh.in_flight != Some(conn) {
            return;
        }
        let epoch = frame.as_bytes().and_then(|text| {
            text.split(|&b| b == b'\n')
                .find_map(|line| line.strip_prefix(b"cluster_current_epoch:"))
                .and_then(|n| std::str::from_utf8(n).ok())
                .and_then(|n| n.trim().parse().ok())
        });
        self.refresh.answered_epoch = epoch;
    }

    /// Starts a reload when one is due and none is in flight.
    pub(crate) fn drive_refresh(&mut self, now: Instant) {
        if self.refresh.due().is_none_or(|at| at > now) {
            return;
        }
        let mut candidates = self.map.as_ref().map(masters).unwrap_or_default();
        for seed in &self.config.seeds {
            let seed = seed.to_string();
            if !candidates.contains(&seed) {
                candidates.push(seed);
            }
        }
        if candidates.is_empty() {
            return;
        }
        let addr = candidates[self.refresh.cursor % candidates.len()].clone();
        self.refresh.cursor = self.refresh.cursor.wrapping_add(1);
        let shards = !self.refresh.no_shards.contains(&addr);
        let conn = self.connection(now, &addr, 2);
        self.refresh.answered_epoch = None;
        if let Some(c) = self.conns.get_mut(&conn) {
            c.write(&[&b"CLUSTER"[..], b"INFO"], Expect::Epoch, now);
        }
        self.ask_map(now, conn, shards);
        let r = &mut self.refresh;
        r.in_flight = Some(conn);
        r.last = Some(now);
        r.wanted = None;
        r.periodic = None;
        r.again = None;
        r.moved.clear();
    }

    fn ask_map(&mut self, now: Instant, conn: ConnId, shards: bool) {
        let sub: &[u8] = if shards { b"SHARDS" } else { b"SLOTS" };
        if let Some(c) = self.conns.get_mut(&conn) {
            c.write(&[&b"CLUSTER"[..], sub], Expect::Refresh { shards }, now);
        }
        self.mark_writable(conn);
    }

    /// The answer to `CLUSTER SHARDS` / `SLOTS`.
    pub(crate) fn answer_refresh(
        &mut self,
        now: Instant,
        conn: ConnId,
        shards: bool,
        frame: Frame,
    ) {
        let Some((addr, host)) = self
            .conns
            .get(&conn)
            .map(|c| (c.addr.clone(), c.host.clone()))
        else {
            return;
        };
        if shards && frame.is_error() {
            // Older than 7.0: ask the same node with CLUSTER SLOTS.
            self.refresh.no_shards.insert(addr);
            self.ask_map(now, conn, false);
            return;
        }
        let parsed = if shards {
            SlotMap::from_cluster_shards(&frame)
        } else {
            SlotMap::from_cluster_slots(&frame)
        };
        let mut map = match parsed {
            Ok(map) if map.assigned() > 0 => map,
            Ok(_) => return self.refresh_failed(now, &format!("{addr}: no slot is assigned")),
            Err(e) => return self.refresh_failed(now, &format!("{addr}: {e}")),
        };
        // A node behind the others on epochs (it missed a failover, say) is not believed.
        if let Some(epoch) = self.refresh.answered_epoch.take() {
            if epoch < self.refresh.epoch {
                let behind = self.refresh.epoch;
                return self.refresh_failed(
                    now,
                    &format!("{addr}: lags behind (current epoch {epoch}, seen {behind})"),
                );
            }
            self.refresh.epoch = epoch;
        }
        map.fill_unknown_hosts(&host);
        for (slot, to) in std::mem::take(&mut self.refresh.moved) {
            map.assign(slot, to);
        }
        self.counters.refreshed += 1;
        let r = &mut self.refresh;
        r.in_flight = None;
        r.failures = 0;
        r.periodic = Some(now + r.interval);
        if self.map.as_ref() != Some(&map) {
            self.push_event(Event::SlotMapChanged {
                masters: masters(&map).len(),
                assigned: map.assigned(),
            });
            self.map = Some(map);
            self.map_changed();
        }
        self.map_installed(now);
    }

    /// A reload failed: the next candidate is asked at once, and after a whole round of
    /// failures after a pause; requests waiting for a first map get the reason.
    pub(crate) fn refresh_failed(&mut self, now: Instant, reason: &str) {
        let candidates =
            self.map.as_ref().map_or(0, |m| masters(m).len()) + self.config.seeds.len();
        let r = &mut self.refresh;
        r.in_flight = None;
        r.failures += 1;
        r.moved.clear();
        if r.failures < candidates.max(1) {
            r.again = Some(now);
        } else {
            r.failures = 0;
            // Nobody in a whole round was trusted: epochs may have gone back (a reset).
            r.epoch = 0;
            r.again = Some(now + self.config.retry_max);
            self.push_event(Event::RefreshFailed {
                reason: reason.to_string(),
            });
            if self.map.is_none() {
                let text = format!("CLUSTERDOWN no slot map: {reason}");
                self.fail_unrouted(&error_frame(&text));
            }
        }
        self.drive_refresh(now);
    }
}
