//! Moving slots with the cluster's own migration protocol, as `redis-cli --cluster reshard`
//! does, and closing what an interrupted run left open, as `redis-cli --cluster fix` does.
//! The steps and the decisions are the state crate's (`migration::SlotMove`,
//! `rebalance::OpenSlot::closing`); this file sends them and reads the replies.

use std::io;

use redis_cluster_proto::state::migration::{SlotMove, Step, stable};
use redis_cluster_proto::state::rebalance::Closing;

use crate::conn::{Conn, int};
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
                for m in marked {
                    self.conns[m].ok(&stable(open.slot))?;
                }
                Ok(0)
            }
        }
    }

    /// Moves `slot` with its keys from master `from` to master `to`, as the state crate's
    /// `SlotMove` says, step by step; the number of keys moved. Safe to run again on a slot
    /// it left half moved.
    pub(crate) fn migrate(&mut self, slot: u16, from: usize, to: usize) -> io::Result<u64> {
        let ids: Vec<&str> = self.masters.iter().map(|m| m.id.as_str()).collect();
        let target = (self.masters[to].host.as_str(), self.masters[to].port);
        let mut mv = SlotMove::new(slot, from, to, &ids, target)
            .with_batch(self.batch)
            .with_timeout(self.timeout_ms);
        let mut step = mv.start();
        loop {
            match step {
                Step::Done { keys } => return Ok(keys),
                Step::Send { master, argv } => {
                    let reply = self.conns[master].call(&argv)?;
                    step = mv.reply(&reply).map_err(|e| {
                        io::Error::other(format!("{e} ({})", self.masters[master].addr()))
                    })?;
                }
            }
        }
    }
}
