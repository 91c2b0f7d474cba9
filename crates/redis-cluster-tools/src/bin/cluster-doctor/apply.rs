//! Moving slots with the cluster's own migration protocol, as `redis-cli --cluster reshard`
//! does, and closing what an interrupted run left open, as `redis-cli --cluster fix` does.
//! The steps and the decisions are the state crate's (`migration::SlotMove`,
//! `rebalance::OpenSlot::closing`); this file sends them and reads the replies. Where the
//! servers move slots themselves (Valkey 9's `CLUSTER MIGRATESLOTS`), it asks them to and
//! follows their `CLUSTER GETSLOTMIGRATIONS` to the end.

use std::collections::HashSet;
use std::io;
use std::time::{Duration, Instant};

use redis_cluster_bus::{Address, NodeId};
use redis_cluster_state::migration::{SlotMove, Step, stable};
use redis_cluster_state::rebalance::Closing;
use redis_hash_slot::Slot;

use crate::conn::{Conn, Reply, int, items, text};
use crate::survey::{Master, OpenSlot};

pub(crate) struct Mover<'a> {
    pub(crate) masters: &'a [Master],
    pub(crate) conns: Vec<Conn>,
    /// Keys per MIGRATE.
    pub(crate) batch: usize,
    /// MIGRATE's timeout, in ms.
    pub(crate) timeout_ms: u64,
}

impl Mover<'_> {
    pub(crate) fn new(masters: &[Master], batch: usize, timeout_ms: u64) -> io::Result<Mover<'_>> {
        let conns = masters
            .iter()
            .map(|m| Conn::connect(&m.addr()))
            .collect::<io::Result<Vec<_>>>()?;
        Ok(Mover {
            masters,
            conns,
            batch,
            timeout_ms,
        })
    }

    fn keys_in(&mut self, master: usize, slot: u16) -> io::Result<u64> {
        let reply = self.conns[master].ok(&["CLUSTER", "COUNTKEYSINSLOT", &slot.to_string()])?;
        Ok(int(&reply).unwrap_or_default().max(0) as u64)
    }

    /// How to close an open slot: the state crate decides, from the marks and, when it
    /// must, the keys the target holds.
    pub(crate) fn closing(&mut self, open: &OpenSlot) -> io::Result<Closing> {
        let mut asked = Ok(false);
        let closing = open.marks.closing(|to| {
            asked = self.keys_in(to, open.slot).map(|n| n > 0);
            matches!(asked, Ok(true))
        });
        asked.map(|_| closing)
    }

    /// Closes an open slot as [`Mover::closing`] decided.
    pub(crate) fn close(&mut self, open: &OpenSlot, closing: Closing) -> io::Result<u64> {
        match closing {
            Closing::Finish { from, to } => self.migrate(open.slot, from, to),
            Closing::RollBack => {
                let marks = &open.marks;
                let marked: Vec<usize> = (marks.migrating.iter().map(|&(m, _)| m))
                    .chain(marks.importing.iter().map(|&(m, _)| m))
                    .collect();
                let slot = Slot::new(open.slot)
                    .ok_or_else(|| io::Error::other(format!("slot {}", open.slot)))?;
                for m in marked {
                    self.conns[m].ok(&stable(slot))?;
                }
                Ok(0)
            }
        }
    }

    /// Every master has `CLUSTER MIGRATESLOTS`, or the error names one that has not.
    pub(crate) fn check_atomic(&mut self) -> io::Result<()> {
        for (m, conn) in self.conns.iter_mut().enumerate() {
            let reply = conn.call(&["COMMAND", "INFO", "cluster|migrateslots"])?;
            let known = items(&reply).first().is_some_and(|e| !items(e).is_empty());
            if !known {
                return Err(io::Error::other(format!(
                    "--atomic: {} has no CLUSTER MIGRATESLOTS (Valkey 9.0 and later have it)",
                    self.masters[m].addr()
                )));
            }
        }
        Ok(())
    }

    /// Waits until no master has a slot migration of the servers' own under way.
    pub(crate) fn wait_for_migrations(&mut self) -> io::Result<()> {
        for m in 0..self.conns.len() {
            let deadline = Instant::now() + MIGRATION_LIMIT;
            while migrations(&mut self.conns[m])?
                .iter()
                .any(|job| !job.finished())
            {
                if Instant::now() > deadline {
                    return Err(io::Error::other(format!(
                        "{}: a slot migration still runs after {} s",
                        self.masters[m].addr(),
                        MIGRATION_LIMIT.as_secs()
                    )));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        Ok(())
    }

    /// Moves `slots` with their keys from master `from` to master `to` with one `CLUSTER
    /// MIGRATESLOTS` on `from`, and follows the migration jobs it starts until each has
    /// succeeded (or one failed: its message is the error); the number of keys moved.
    pub(crate) fn migrate_atomic(
        &mut self,
        slots: &[u16],
        from: usize,
        to: usize,
    ) -> io::Result<u64> {
        let mut keys = 0;
        for &slot in slots {
            keys += self.keys_in(from, slot)?;
        }
        let before: HashSet<String> = migrations(&mut self.conns[from])?
            .into_iter()
            .map(|job| job.name)
            .collect();
        let mut argv = vec![
            "CLUSTER".to_string(),
            "MIGRATESLOTS".into(),
            "SLOTSRANGE".into(),
        ];
        for (start, end) in ranges(slots) {
            argv.extend([start.to_string(), end.to_string()]);
        }
        argv.extend(["NODE".into(), self.masters[to].id.clone()]);
        self.conns[from].ok(&argv)?;
        let deadline = Instant::now() + MIGRATION_LIMIT;
        loop {
            let jobs: Vec<Job> = migrations(&mut self.conns[from])?
                .into_iter()
                .filter(|job| job.export && !before.contains(&job.name))
                .collect();
            if let Some(failed) = jobs.iter().find(|job| job.failed()) {
                return Err(io::Error::other(format!(
                    "{}: slot migration {} {}: {}",
                    self.masters[from].addr(),
                    failed.ranges,
                    failed.state,
                    failed.message
                )));
            }
            if !jobs.is_empty() && jobs.iter().all(|job| job.state == "success") {
                return Ok(keys);
            }
            if Instant::now() > deadline {
                return Err(io::Error::other(format!(
                    "{}: the slot migration did not end within {} s",
                    self.masters[from].addr(),
                    MIGRATION_LIMIT.as_secs()
                )));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Moves `slot` with its keys from master `from` to master `to`, as the state crate's
    /// `SlotMove` says, step by step; the number of keys moved. Safe to run again on a slot
    /// it left half moved.
    pub(crate) fn migrate(&mut self, slot: u16, from: usize, to: usize) -> io::Result<u64> {
        let ids = self
            .masters
            .iter()
            .map(|m| m.id.parse::<NodeId>())
            .collect::<Result<Vec<NodeId>, _>>()
            .map_err(|e| io::Error::other(format!("CLUSTER NODES: {e}")))?;
        let slot = Slot::new(slot).ok_or_else(|| io::Error::other(format!("slot {slot}")))?;
        let target = Address::new(self.masters[to].host.clone(), self.masters[to].port);
        let mut mv = SlotMove::new(slot, ids[from], ids[to], target)
            .with_masters(ids.iter().copied())
            .with_batch(self.batch)
            .with_timeout(self.timeout_ms);
        let mut step = mv.start();
        loop {
            match step {
                Step::Done { keys } => return Ok(keys),
                Step::Send { master, argv } => {
                    let Some(master) = ids.iter().position(|id| *id == master) else {
                        return Err(io::Error::other(format!("a step for {master}")));
                    };
                    let reply = self.conns[master].call(&argv)?;
                    step = mv.reply(&reply).map_err(|e| {
                        io::Error::other(format!("{e} ({})", self.masters[master].addr()))
                    })?;
                }
            }
        }
    }
}

/// How long one of the servers' slot migrations may take.
const MIGRATION_LIMIT: Duration = Duration::from_secs(300);

/// One entry of `CLUSTER GETSLOTMIGRATIONS`: a job that moves slot ranges, running or done.
struct Job {
    name: String,
    /// This node sends the slots (`EXPORT`), rather than receives them.
    export: bool,
    ranges: String,
    /// `success` when done; `failed` or `cancelled` when it ended without moving them.
    state: String,
    message: String,
}

impl Job {
    fn failed(&self) -> bool {
        matches!(self.state.as_str(), "failed" | "cancelled" | "canceled")
    }

    fn finished(&self) -> bool {
        self.state == "success" || self.failed()
    }
}

/// The node's migration jobs, from its `CLUSTER GETSLOTMIGRATIONS` reply (a RESP2 map per job).
fn migrations(conn: &mut Conn) -> io::Result<Vec<Job>> {
    let reply: Reply = conn.ok(&["CLUSTER", "GETSLOTMIGRATIONS"])?;
    Ok(items(&reply)
        .iter()
        .map(|entry| {
            let field = |name: &str| {
                items(entry)
                    .chunks(2)
                    .find(|pair| text(&pair[0]) == name)
                    .and_then(|pair| pair.get(1))
                    .map(text)
                    .unwrap_or_default()
            };
            Job {
                name: field("name"),
                export: field("operation") == "EXPORT",
                ranges: field("slot_ranges"),
                state: field("state"),
                message: field("message"),
            }
        })
        .collect())
}

/// `slots` (in any order) as ranges of consecutive slots.
fn ranges(slots: &[u16]) -> Vec<(u16, u16)> {
    let mut sorted = slots.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut ranges: Vec<(u16, u16)> = Vec::new();
    for slot in sorted {
        match ranges.last_mut() {
            Some((_, end)) if *end + 1 == slot => *end = slot,
            _ => ranges.push((slot, slot)),
        }
    }
    ranges
}
