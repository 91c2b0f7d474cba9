//! [`SlotMove`]: moving one slot and its keys between masters with the cluster's own
//! protocol, as `redis-cli --cluster reshard` drives it, one command at a time and without
//! I/O: the caller sends each command to the master it names and passes the reply back.
//!
//! The steps: `CLUSTER SETSLOT <slot> IMPORTING <source>` on the target, `MIGRATING
//! <target>` on the source, then `CLUSTER GETKEYSINSLOT` and `MIGRATE … REPLACE KEYS` on the
//! source until no key is left, then `SETSLOT <slot> NODE <target>` on the target, the source
//! and every other master. A move that an interrupted run left half done can be run again:
//! a target that already owns the slot, or a source that already gave it up (with no key of
//! it left), are taken as steps already done.

use alloc::string::{String, ToString};
use alloc::vec::Vec;

use redis_cluster_bus::{Address, NodeId};
use redis_hash_slot::Slot;
use redis_resp::Frame;

/// One step of a [`SlotMove`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Send `argv` to master `master` and pass its reply to [`SlotMove::reply`].
    Send {
        /// The master: the source, the target, or one given to [`SlotMove::with_masters`].
        master: NodeId,
        /// The command.
        argv: Vec<Vec<u8>>,
    },
    /// The target serves the slot; `keys` keys moved.
    Done {
        /// How many keys MIGRATE moved.
        keys: u64,
    },
}

/// Why a move stopped. The slot is left open: running the move again resumes it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MoveError {
    /// A master answered a step with an error.
    #[error("{command} on master {master}: {message}")]
    Refused {
        /// The master.
        master: NodeId,
        /// The command (`SETSLOT IMPORTING`, `MIGRATE`, …).
        command: &'static str,
        /// Its error reply.
        message: String,
    },
    /// The source no longer owns the slot but still holds keys of it.
    #[error("master {master} holds keys of slot {slot}, which it does not own")]
    Stray {
        /// The source.
        master: NodeId,
        /// The slot.
        slot: Slot,
    },
    /// GETKEYSINSLOT gave the same keys after a MIGRATE of them.
    #[error("slot {slot}: MIGRATE left its keys on master {master}")]
    Stuck {
        /// The source.
        master: NodeId,
        /// The slot.
        slot: Slot,
    },
    /// A reply of the wrong shape.
    #[error("{command} on master {master}: unexpected reply")]
    Reply {
        /// The master.
        master: NodeId,
        /// The command.
        command: &'static str,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Phase {
    Importing,
    Migrating,
    /// The source refused MIGRATING as not the owner: does it hold keys of the slot?
    Stray,
    GetKeys,
    Migrate(usize),
    /// SETSLOT NODE to the n-th master of the order: target, source, the others.
    Node(usize),
}

/// One slot's move from one master to another.
///
/// ```
/// use redis_cluster_bus::{Address, NodeId};
/// use redis_cluster_state::migration::{SlotMove, Step};
/// use redis_hash_slot::Slot;
/// use redis_resp::Frame;
///
/// let source: NodeId = "a".repeat(40).parse()?;
/// let target: NodeId = "b".repeat(40).parse()?;
/// let slot = Slot::new(42).ok_or("a slot")?;
/// let mut mv = SlotMove::new(slot, source, target, Address::new("127.0.0.1", 7001));
/// let to = |step: Step| match step {
///     Step::Send { master, .. } => Some(master),
///     Step::Done { .. } => None,
/// };
/// let ok = Frame::SimpleString(&b"OK"[..]);
/// // IMPORTING on the target, MIGRATING on the source.
/// assert_eq!(to(mv.start()), Some(target));
/// assert_eq!(to(mv.reply(&ok)?), Some(source));
/// // GETKEYSINSLOT: no key left, so SETSLOT NODE on the target, then the source.
/// assert_eq!(to(mv.reply(&ok)?), Some(source));
/// let none: Frame<&[u8]> = Frame::Array(vec![]);
/// assert_eq!(to(mv.reply(&none)?), Some(target));
/// assert_eq!(to(mv.reply(&ok)?), Some(source));
/// assert_eq!(mv.reply(&ok)?, Step::Done { keys: 0 });
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct SlotMove {
    slot: Slot,
    from: NodeId,
    to: NodeId,
    /// The other masters, told the new owner after the target and the source.
    others: Vec<NodeId>,
    target: Address,
    /// Keys per GETKEYSINSLOT and MIGRATE.
    batch: usize,
    /// MIGRATE's timeout, in ms.
    timeout_ms: u64,
    phase: Phase,
    moved: u64,
    /// The keys of the MIGRATE in flight.
    keys: Vec<Vec<u8>>,
}

fn argv(parts: &[&[u8]]) -> Vec<Vec<u8>> {
    parts.iter().map(|p| p.to_vec()).collect()
}

fn error<B: AsRef<[u8]>>(reply: &Frame<B>) -> Option<String> {
    match reply {
        Frame::SimpleError(e) | Frame::BulkError(e) => {
            Some(String::from_utf8_lossy(e.as_ref()).into_owned())
        }
        _ => None,
    }
}

impl SlotMove {
    /// A move of `slot` from the master `from` to the master `to`, which the source's
    /// MIGRATE reaches at `target`. 100 keys per batch and a 60 s MIGRATE timeout; only the
    /// two are told the new owner unless [`Self::with_masters`] names the others.
    pub fn new(slot: Slot, from: NodeId, to: NodeId, target: Address) -> Self {
        Self {
            slot,
            from,
            to,
            others: Vec::new(),
            target,
            batch: 100,
            timeout_ms: 60_000,
            phase: Phase::Importing,
            moved: 0,
            keys: Vec::new(),
        }
    }

    /// Every master of the cluster: after the target and the source, each other one gets
    /// the SETSLOT NODE too, in this order, so that nobody waits for gossip.
    pub fn with_masters(mut self, masters: impl IntoIterator<Item = NodeId>) -> Self {
        let (from, to) = (self.from, self.to);
        self.others = masters
            .into_iter()
            .filter(|m| *m != from && *m != to)
            .collect();
        self
    }

    /// Keys per GETKEYSINSLOT and MIGRATE (at least 1).
    pub fn with_batch(mut self, batch: usize) -> Self {
        self.batch = batch.max(1);
        self
    }

    /// MIGRATE's timeout, in milliseconds.
    pub fn with_timeout(mut self, timeout_ms: u64) -> Self {
        self.timeout_ms = timeout_ms;
        self
    }

    /// The first step: the target's IMPORTING mark.
    pub fn start(&mut self) -> Step {
        self.phase = Phase::Importing;
        self.step()
    }

    /// The master that receives the `n`-th SETSLOT NODE: the target first, so that it
    /// serves the slot before the source lets go, then the source, then the others, so
    /// that nobody waits for gossip.
    fn node_order(&self, n: usize) -> Option<NodeId> {
        let others = self.others.iter().copied();
        [self.to, self.from].into_iter().chain(others).nth(n)
    }

    fn setslot(&self, master: NodeId, what: &[u8], id: NodeId) -> Step {
        let slot = self.slot.to_string();
        let parts: [&[u8]; 5] = [b"CLUSTER", b"SETSLOT", slot.as_bytes(), what, id.as_bytes()];
        Step::Send {
            master,
            argv: argv(&parts),
        }
    }

    /// The command of the current phase.
    fn step(&self) -> Step {
        let slot = self.slot.to_string();
        match self.phase {
            Phase::Importing => self.setslot(self.to, b"IMPORTING", self.from),
            Phase::Migrating => self.setslot(self.from, b"MIGRATING", self.to),
            Phase::Stray => Step::Send {
                master: self.from,
                argv: argv(&[b"CLUSTER", b"COUNTKEYSINSLOT", slot.as_bytes()]),
            },
            Phase::GetKeys => {
                let batch = self.batch.to_string();
                Step::Send {
                    master: self.from,
                    argv: argv(&[
                        b"CLUSTER",
                        b"GETKEYSINSLOT",
                        slot.as_bytes(),
                        batch.as_bytes(),
                    ]),
                }
            }
            Phase::Migrate(_) => {
                let (port, timeout) = (self.target.port.to_string(), self.timeout_ms.to_string());
                // REPLACE: a key on both sides is one an interrupted MIGRATE copied and did
                // not delete; the source's copy is the one clients wrote to since.
                let mut parts = argv(&[
                    b"MIGRATE",
                    self.target.host.as_bytes(),
                    port.as_bytes(),
                    b"",
                    b"0",
                    timeout.as_bytes(),
                    b"REPLACE",
                    b"KEYS",
                ]);
                parts.extend(self.keys.iter().cloned());
                Step::Send {
                    master: self.from,
                    argv: parts,
                }
            }
            Phase::Node(n) => match self.node_order(n) {
                Some(master) => self.setslot(master, b"NODE", self.to),
                None => Step::Done { keys: self.moved },
            },
        }
    }

    /// Takes the reply to the last step and gives the next.
    pub fn reply<B: AsRef<[u8]>>(&mut self, reply: &Frame<B>) -> Result<Step, MoveError> {
        let refused = |master, command, message| MoveError::Refused {
            master,
            command,
            message,
        };
        self.phase = match self.phase {
            Phase::Importing => match error(reply) {
                // An interrupted run got as far as giving the target the slot.
                Some(m) if !m.contains("already the owner") => {
                    return Err(refused(self.to, "SETSLOT IMPORTING", m));
                }
                _ => Phase::Migrating,
            },
            Phase::Migrating => match error(reply) {
                None => Phase::GetKeys,
                Some(m) if m.contains("not the owner") => Phase::Stray,
                Some(m) => return Err(refused(self.from, "SETSLOT MIGRATING", m)),
            },
            Phase::Stray => match reply {
                Frame::Integer(0) => Phase::Node(0),
                Frame::Integer(_) => {
                    return Err(MoveError::Stray {
                        master: self.from,
                        slot: self.slot,
                    });
                }
                _ => {
                    return Err(MoveError::Reply {
                        master: self.from,
                        command: "COUNTKEYSINSLOT",
                    });
                }
            },
            Phase::GetKeys => {
                let Frame::Array(items) = reply else {
                    return Err(match error(reply) {
                        Some(m) => refused(self.from, "GETKEYSINSLOT", m),
                        None => MoveError::Reply {
                            master: self.from,
                            command: "GETKEYSINSLOT",
                        },
                    });
                };
                let keys: Vec<Vec<u8>> = items
                    .iter()
                    .filter_map(|k| match k {
                        Frame::BulkString(k) | Frame::SimpleString(k) => Some(k.as_ref().to_vec()),
                        _ => None,
                    })
                    .collect();
                if keys.is_empty() {
                    Phase::Node(0)
                } else if keys == self.keys {
                    return Err(MoveError::Stuck {
                        master: self.from,
                        slot: self.slot,
                    });
                } else {
                    let n = keys.len();
                    self.keys = keys;
                    Phase::Migrate(n)
                }
            }
            Phase::Migrate(n) => {
                // OK, or the status NOKEY when the keys expired in between.
                if let Some(m) = error(reply) {
                    return Err(refused(self.from, "MIGRATE", m));
                }
                self.moved += n as u64;
                Phase::GetKeys
            }
            Phase::Node(n) => {
                let master = self.node_order(n).unwrap_or(self.to);
                // A master that has not heard of the target yet learns it by gossip.
                match error(reply) {
                    Some(m) if master == self.to || master == self.from => {
                        return Err(refused(master, "SETSLOT NODE", m));
                    }
                    _ => {}
                }
                Phase::Node(n + 1)
            }
        };
        Ok(self.step())
    }
}

/// `CLUSTER SETSLOT <slot> STABLE`, sent to each master that marks `slot` open: how a move
/// that never started is rolled back.
pub fn stable(slot: Slot) -> Vec<Vec<u8>> {
    let slot = slot.to_string();
    argv(&[b"CLUSTER", b"SETSLOT", slot.as_bytes(), b"STABLE"])
}
