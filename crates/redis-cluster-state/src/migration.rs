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

use redis_resp::Frame;

/// One step of a [`SlotMove`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Send `argv` to master `master` and pass its reply to [`SlotMove::reply`].
    Send {
        /// The master (an index into the ids given to [`SlotMove::new`]).
        master: usize,
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
        master: usize,
        /// The command (`SETSLOT IMPORTING`, `MIGRATE`, …).
        command: &'static str,
        /// Its error reply.
        message: String,
    },
    /// The source no longer owns the slot but still holds keys of it.
    #[error("master {master} holds keys of slot {slot}, which it does not own")]
    Stray {
        /// The source.
        master: usize,
        /// The slot.
        slot: u16,
    },
    /// GETKEYSINSLOT gave the same keys after a MIGRATE of them.
    #[error("slot {slot}: MIGRATE left its keys on master {master}")]
    Stuck {
        /// The source.
        master: usize,
        /// The slot.
        slot: u16,
    },
    /// A reply of the wrong shape.
    #[error("{command} on master {master}: unexpected reply")]
    Reply {
        /// The master.
        master: usize,
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
/// use redis_cluster_state::migration::{SlotMove, Step};
/// use redis_resp::Frame;
///
/// let ids = ["aaaa", "bbbb"];
/// let mut mv = SlotMove::new(42, 0, 1, &ids, ("127.0.0.1", 7001));
/// let ok = Frame::SimpleString(&b"OK"[..]);
/// // IMPORTING on the target, MIGRATING on the source.
/// assert!(matches!(mv.start(), Step::Send { master: 1, .. }));
/// assert!(matches!(mv.reply(&ok)?, Step::Send { master: 0, .. }));
/// // GETKEYSINSLOT: no key left, so SETSLOT NODE on the target, then the source.
/// assert!(matches!(mv.reply(&ok)?, Step::Send { master: 0, .. }));
/// let none: Frame<&[u8]> = Frame::Array(vec![]);
/// assert!(matches!(mv.reply(&none)?, Step::Send { master: 1, .. }));
/// assert!(matches!(mv.reply(&ok)?, Step::Send { master: 0, .. }));
/// assert_eq!(mv.reply(&ok)?, Step::Done { keys: 0 });
/// # Ok::<(), redis_cluster_state::migration::MoveError>(())
/// ```
#[derive(Clone, Debug)]
pub struct SlotMove {
    slot: u16,
    from: usize,
    to: usize,
    ids: Vec<String>,
    host: String,
    port: u16,
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
    /// A move of `slot` from master `from` to master `to` (indices into `ids`), the masters
    /// named by their ids (`ids`, every master of the cluster), the target reached at
    /// `target` (host, port) by the source's MIGRATE. 100 keys per batch and a 60 s MIGRATE
    /// timeout.
    pub fn new(slot: u16, from: usize, to: usize, ids: &[&str], target: (&str, u16)) -> Self {
        Self {
            slot,
            from,
            to,
            ids: ids.iter().map(|id| id.to_string()).collect(),
            host: target.0.to_string(),
            port: target.1,
            batch: 100,
            timeout_ms: 60_000,
            phase: Phase::Importing,
            moved: 0,
            keys: Vec::new(),
        }
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
    fn node_order(&self, n: usize) -> Option<usize> {
        let others = (0..self.ids.len()).filter(|&m| m != self.to && m != self.from);
        [self.to, self.from].into_iter().chain(others).nth(n)
    }

    fn setslot(&self, master: usize, what: &[u8], id: Option<usize>) -> Step {
        let slot = self.slot.to_string();
        let mut parts: Vec<&[u8]> = alloc::vec![b"CLUSTER", b"SETSLOT", slot.as_bytes(), what];
        // An index past the ids sends an empty id, which the server refuses.
        if let Some(id) = id {
            parts.push(self.ids.get(id).map_or(&[][..], |id| id.as_bytes()));
        }
        Step::Send {
            master,
            argv: argv(&parts),
        }
    }

    /// The command of the current phase.
    fn step(&self) -> Step {
        let slot = self.slot.to_string();
        match self.phase {
            Phase::Importing => self.setslot(self.to, b"IMPORTING", Some(self.from)),
            Phase::Migrating => self.setslot(self.from, b"MIGRATING", Some(self.to)),
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
                let (port, timeout) = (self.port.to_string(), self.timeout_ms.to_string());
                // REPLACE: a key on both sides is one an interrupted MIGRATE copied and did
                // not delete; the source's copy is the one clients wrote to since.
                let mut parts = argv(&[
                    b"MIGRATE",
                    self.host.as_bytes(),
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
                Some(master) => self.setslot(master, b"NODE", Some(self.to)),
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
pub fn stable(slot: u16) -> Vec<Vec<u8>> {
    let slot = slot.to_string();
    argv(&[b"CLUSTER", b"SETSLOT", slot.as_bytes(), b"STABLE"])
}
