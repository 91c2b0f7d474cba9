//! Moving slots with the cluster's own migration protocol, as `redis-cli --cluster reshard`
//! does: SETSLOT IMPORTING on the target, MIGRATING on the source, GETKEYSINSLOT and
//! MIGRATE in batches, then SETSLOT NODE on the target, the source and every other master.
//! And closing what an interrupted run left open, as `redis-cli --cluster fix` does.

use std::io;

use redis_cluster_proto::state::rebalance::Closing;

use crate::conn::{Conn, Reply, bytes, cmd, int, items};
use crate::survey::{Master, OpenSlot};

pub(crate) struct Mover<'a> {
    pub(crate) masters: &'a [Master],
    pub(crate) conns: Vec<Conn>,
    /// Keys per MIGRATE.
    pub(crate) batch: usize,
    /// MIGRATE's timeout, in ms.
    pub(crate) timeout_ms: u64,
}

fn is_error(reply: &Reply) -> Option<String> {
    match reply {
        Reply::SimpleError(e) | Reply::BulkError(e) => {
            Some(String::from_utf8_lossy(e).into_owned())
        }
        _ => None,
    }
}

impl Mover<'_> {
    pub(crate) fn new(masters: &[Master], batch: usize, timeout_ms: u64) -> io::Result<Mover<'_>> {
        let conns = masters
            .iter()
            .map(|m| Conn::connect(&m.addr))
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
                    self.conns[m].ok(&["CLUSTER", "SETSLOT", &open.slot.to_string(), "STABLE"])?;
                }
                Ok(0)
            }
        }
    }

    /// Moves `slot` with its keys from master `from` to master `to`; the number of keys
    /// moved. Safe to run again on a slot it left half moved.
    pub(crate) fn migrate(&mut self, slot: u16, from: usize, to: usize) -> io::Result<u64> {
        let s = slot.to_string();
        let (from_id, to_id) = (self.masters[from].id.clone(), self.masters[to].id.clone());
        // The target may already own it (an interrupted run got that far): then it needs no
        // importing mark, and MIGRATE to it works without one.
        let reply = self.conns[to].call(&["CLUSTER", "SETSLOT", &s, "IMPORTING", &from_id])?;
        if let Some(e) = is_error(&reply).filter(|e| !e.contains("already the owner")) {
            return Err(io::Error::other(format!(
                "SETSLOT IMPORTING on {}: {e}",
                self.masters[to].addr
            )));
        }
        let reply = self.conns[from].call(&["CLUSTER", "SETSLOT", &s, "MIGRATING", &to_id])?;
        let source_owns = match is_error(&reply) {
            None => true,
            // The source gave the slot up already: it must hold no key of it.
            Some(e) if e.contains("not the owner") => {
                if self.keys_in(from, slot)? > 0 {
                    return Err(io::Error::other(format!(
                        "{} holds keys of slot {slot} it does not own: run redis-cli --cluster fix",
                        self.masters[from].addr
                    )));
                }
                false
            }
            Some(e) => {
                return Err(io::Error::other(format!(
                    "SETSLOT MIGRATING on {}: {e}",
                    self.masters[from].addr
                )));
            }
        };
        let (host, port) = self.masters[to]
            .addr
            .rsplit_once(':')
            .map(|(h, p)| (h.to_owned(), p.to_owned()))
            .unwrap_or_default();
        // A source that gave the slot up holds none of its keys (checked above).
        let moved = if source_owns {
            self.move_keys(&s, from, &host, &port)?
        } else {
            0
        };
        // The target first, so that it serves the slot before the source lets go of it;
        // then the source, then everyone else, so that nobody waits for gossip.
        let order = std::iter::once(to)
            .chain(std::iter::once(from))
            .chain((0..self.masters.len()).filter(|&m| m != to && m != from));
        for m in order {
            let reply = self.conns[m].call(&["CLUSTER", "SETSLOT", &s, "NODE", &to_id])?;
            if let Some(e) = is_error(&reply) {
                // A master that has not heard of the target yet learns it by gossip.
                if m == to || m == from {
                    return Err(io::Error::other(format!(
                        "SETSLOT NODE on {}: {e}",
                        self.masters[m].addr
                    )));
                }
            }
        }
        Ok(moved)
    }

    /// MIGRATE of every key of slot `s` from `from` to `host:port`, a batch at a time.
    fn move_keys(&mut self, s: &str, from: usize, host: &str, port: &str) -> io::Result<u64> {
        let mut moved = 0;
        let mut last = Vec::new();
        loop {
            let batch = self.batch.to_string();
            let reply = self.conns[from].ok(&["CLUSTER", "GETKEYSINSLOT", s, &batch])?;
            let keys: Vec<Vec<u8>> = items(&reply).iter().map(bytes).collect();
            if keys.is_empty() {
                return Ok(moved);
            }
            // The same keys twice: MIGRATE answered without moving them; stop rather than
            // loop (the slot stays open for the next run).
            if keys == last {
                return Err(io::Error::other(format!(
                    "slot {s}: MIGRATE from {} left its keys in place",
                    self.masters[from].addr
                )));
            }
            // REPLACE: a key on both sides is one an interrupted MIGRATE copied and did not
            // delete; the source's copy is the one clients wrote to since.
            let timeout = self.timeout_ms.to_string();
            let mut argv = cmd(&["MIGRATE", host, port, "", "0", &timeout, "REPLACE", "KEYS"]);
            argv.extend(keys.iter().cloned());
            let reply = self.conns[from].call(&argv)?;
            if let Some(e) = is_error(&reply) {
                let source = &self.masters[from].addr;
                return Err(io::Error::other(format!(
                    "MIGRATE from {source} to {host}:{port}: {e}"
                )));
            }
            moved += keys.len() as u64;
            last = keys;
        }
    }
}
