//! Masters the caller names: a slot map it gives ([`Config::fixed_map`](crate::Config), then
//! [`Engine::set_slot_map`]) instead of one read from the nodes, and holds on slot ranges
//! while the masters serving them change hands (a Sentinel failover).

use std::time::Instant;

use redis_cluster_route::SlotMap;
use redis_hash_slot::SlotRange;

use crate::engine::{Engine, all_nodes, masters};
use crate::request::{CallKey, CallState, Combine, Target};
use crate::{Event, error_frame};

impl Engine {
    /// Replaces the slot map: later commands go where `map` says, what is in flight finishes
    /// where it was sent, and requests that waited for a map are routed. This is how a driver
    /// of standalone masters ([`Config::fixed_map`](crate::Config)) reports that one moved (a
    /// Sentinel switch). Idle connections to nodes the new map does not name are closed. In
    /// a cluster the next reload replaces this map again.
    pub fn set_slot_map(&mut self, now: Instant, map: SlotMap) {
        if self.map.as_ref() == Some(&map) {
            return;
        }
        let named = all_nodes(&map);
        self.push_event(Event::SlotMapChanged {
            masters: masters(&map).len(),
            assigned: map.assigned(),
        });
        self.map = Some(map);
        self.map_changed();
        let idle: Vec<_> = self
            .shared
            .iter()
            .filter(|(addr, _)| !named.contains(addr))
            .flat_map(|(_, pair)| pair.iter().flatten().copied())
            .filter(|conn| self.conns.get(conn).is_some_and(|c| c.owed.is_empty()))
            .collect();
        for conn in idle {
            self.close(now, conn);
        }
        self.map_installed(now);
    }

    /// Holds the commands of `range` until `until`: none is sent to the master serving it
    /// (those in flight finish), so that no write is acknowledged by a master that is about
    /// to stop being one. [`Engine::release`] sends them, to wherever the map then says; at
    /// `until` those still held get a `MASTERDOWN` error. A command without a slot (a
    /// fan-out's part, SCAN) is held when it would go to the master of a held range. Holding
    /// a range again moves its end.
    pub fn hold(&mut self, now: Instant, range: SlotRange, until: Instant) {
        match self.holds.iter_mut().find(|(r, _)| *r == range) {
            Some(hold) => hold.1 = until,
            None => self.holds.push((range, until)),
        }
        self.prune_holds(now);
    }

    /// Ends the hold of `range` (a switch came, or the failover was aborted): its commands
    /// are sent, in their order, to where the map says now.
    pub fn release(&mut self, now: Instant, range: SlotRange) {
        self.holds.retain(|(r, _)| *r != range);
        for (key, was, until) in std::mem::take(&mut self.held) {
            // A part bound to the range's old master (a fan-out's, a SCAN step) goes to its
            // new one.
            let master = self
                .map
                .as_ref()
                .and_then(|m| m.master(was.start()))
                .map(ToString::to_string);
            let Some(request) = self.requests.get_mut(&key.0) else {
                continue;
            };
            let Some(call) = request.calls.get_mut(key.1) else {
                continue;
            };
            // Still waiting for this hold (not retried since for another reason).
            if call.state != CallState::Retry(until) {
                continue;
            }
            if let (Target::Node(old), Some(new)) = (&mut call.target, master) {
                if *old != new {
                    if let Combine::Scan { masters, .. } = &mut request.combine {
                        for m in masters.iter_mut().filter(|m| **m == *old) {
                            m.clone_from(&new);
                        }
                    }
                    *old = new;
                }
            }
            call.state = CallState::Queued;
            self.retries.remove(&(until, key));
            self.dispatch(now, key);
        }
    }

    /// Whether the call must wait: then it waits (`true`), or, its hold over, is answered
    /// `MASTERDOWN` (also `true`). `addr` is where it would go.
    pub(crate) fn held(&mut self, now: Instant, key: CallKey, addr: &str) -> bool {
        let Some(call) = self.call_ref(key) else {
            return false;
        };
        let slot = match &call.target {
            Target::Slot { slot, .. } if call.asking().is_none() => Some(*slot),
            _ => None,
        };
        let map = self.map.as_ref();
        let hold = self.holds.iter().copied().find(|(range, _)| match slot {
            Some(slot) => range.contains(slot),
            None => map
                .and_then(|m| m.master(range.start()))
                .is_some_and(|master| master.to_string() == addr),
        });
        let Some((range, until)) = hold else {
            return false;
        };
        if until <= now {
            let text =
                format!("MASTERDOWN the failover of slots {range} did not end within the hold");
            self.complete(now, key, error_frame(&text));
            return true;
        }
        if let Some(call) = self.call_mut(key) {
            call.state = CallState::Retry(until);
        }
        self.retries.insert((until, key));
        self.held.push((key, range, until));
        true
    }

    /// Forgets holds that are over (after the calls they held were answered).
    pub(crate) fn prune_holds(&mut self, now: Instant) {
        self.holds.retain(|(_, until)| *until > now);
        if self.holds.is_empty() {
            self.held.clear();
        }
    }
}
