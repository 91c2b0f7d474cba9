//! `CLUSTER <subcommand>` for the subcommands that need no bus traffic: the replies and the
//! errors of the real server, as RESP frames.

use alloc::{format, string::String, vec::Vec};

use redis_cluster_bus::{NodeFlags, NodeId};
use redis_hash_slot::{Slot, key_slot};
use redis_resp::Frame;

use crate::{
    cluster::{ClusterNode, CommandError},
    reply::{Protocol, Reply, text_reply},
    time::Instant,
};

/// How long CLUSTER FORGET keeps a node out (ms).
const FORGET_TTL: u64 = 60_000;

fn error(text: impl Into<String>) -> Reply {
    Frame::SimpleError(format!("ERR {}", text.into()).into_bytes())
}

fn ok() -> Reply {
    Frame::SimpleString(b"OK".to_vec())
}

/// `getSlotOrReply`: a decimal in 0..16384.
fn slot(arg: &[u8]) -> Result<Slot, CommandError> {
    core::str::from_utf8(arg)
        .ok()
        .and_then(|s| s.parse::<i64>().ok())
        .and_then(|n| u16::try_from(n).ok())
        .and_then(Slot::new)
        .ok_or(CommandError::BadSlot)
}

fn node_id(arg: &[u8]) -> Option<NodeId> {
    arg.try_into().ok().map(NodeId)
}

impl ClusterNode {
    /// Runs `CLUSTER <args…>` (`args` without `CLUSTER`) for the subcommands served from the
    /// tables alone: INFO, MYID, MYSHARDID, KEYSLOT, NODES, SLOTS, SHARDS, REPLICAS / SLAVES,
    /// COUNT-FAILURE-REPORTS, ADDSLOTS, ADDSLOTSRANGE, DELSLOTS, DELSLOTSRANGE, SETSLOT,
    /// SET-CONFIG-EPOCH, BUMPEPOCH, FAILOVER, MEET, REPLICATE, FORGET, SAVECONFIG, FLUSHSLOTS,
    /// RESET, at time `now`. `keys_in_slot` counts the driver's keys in a slot
    /// (SETSLOT NODE refuses to give away a slot that still holds some). Returns `None` for
    /// any other subcommand, which the caller handles (or answers as unknown): LINKS needs
    /// the driver's figures for each connection, see [`ClusterNode::cluster_links`].
    pub fn cluster_command<A: AsRef<[u8]>>(
        &mut self,
        args: &[A],
        protocol: Protocol,
        now: Instant,
        keys_in_slot: impl Fn(Slot) -> u64,
    ) -> Option<Reply> {
        let name = args.first()?.as_ref().to_ascii_lowercase();
        let rest: Vec<&[u8]> = args[1..].iter().map(AsRef::as_ref).collect();
        let arity_error = || {
            let name = String::from_utf8_lossy(&name).into_owned();
            error(format!(
                "wrong number of arguments for 'cluster|{name}' command"
            ))
        };
        let result = match (name.as_slice(), rest.as_slice()) {
            (b"info", []) => Ok(text_reply(protocol, self.cluster_info())),
            (b"myid", []) => Ok(Frame::BulkString(self.myself().id.as_bytes().to_vec())),
            (b"myshardid", []) => Ok(Frame::BulkString(self.shard_id().into_bytes())),
            (b"keyslot", [key]) => Ok(Frame::Integer(i64::from(u16::from(key_slot(key))))),
            (b"nodes", []) => Ok(text_reply(protocol, self.cluster_nodes())),
            (b"slots", []) => Ok(self.cluster_slots(protocol)),
            (b"shards", []) => Ok(self.cluster_shards(protocol)),
            (b"replicas" | b"slaves", [id]) => self.replicas_reply(id),
            (b"count-failure-reports", [id]) => match node_id(id).and_then(|id| self.node(&id)) {
                Some(node) => {
                    let id = node.id;
                    Ok(Frame::Integer(self.failure_reports(&id, now) as i64))
                }
                None => Err(CommandError::UnknownNode(
                    String::from_utf8_lossy(id).into_owned(),
                )),
            },
            (b"addslots" | b"delslots", slots) if !slots.is_empty() => slots
                .iter()
                .map(|s| slot(s))
                .collect::<Result<Vec<_>, _>>()
                .and_then(|slots| {
                    if name == b"addslots" {
                        self.add_slots(slots, now)
                    } else {
                        self.del_slots(slots, now)
                    }
                })
                .map(|()| ok()),
            (b"addslotsrange" | b"delslotsrange", pairs)
                if !pairs.is_empty() && pairs.len() % 2 == 0 =>
            {
                self.slot_ranges(pairs)
                    .and_then(|slots| {
                        if name == b"addslotsrange" {
                            self.add_slots(slots, now)
                        } else {
                            self.del_slots(slots, now)
                        }
                    })
                    .map(|()| ok())
            }
            (b"setslot", [s, action, target @ ..]) => {
                self.setslot_command(s, action, target, &keys_in_slot, now)
            }
            (b"set-config-epoch", [epoch]) => match core::str::from_utf8(epoch)
                .ok()
                .and_then(|e| e.parse::<i64>().ok())
            {
                Some(n) if n < 0 => Err(CommandError::BadConfigEpoch(
                    String::from_utf8_lossy(epoch).into_owned(),
                )),
                Some(n) => self.set_config_epoch(n as u64).map(|()| ok()),
                None => Err(CommandError::NotInteger),
            },
            (b"failover", options) if options.len() <= 1 => {
                let mode = match options.first().map(|o| o.to_ascii_lowercase()) {
                    None => Some(crate::FailoverMode::Default),
                    Some(o) if o == b"force" => Some(crate::FailoverMode::Force),
                    Some(o) if o == b"takeover" => Some(crate::FailoverMode::Takeover),
                    Some(_) => None,
                };
                match mode {
                    Some(mode) => self.failover(mode, now).map(|()| ok()),
                    None => Ok(Frame::SimpleError(b"ERR syntax error".to_vec())),
                }
            }
            (b"meet", [ip, port, cport @ ..]) if cport.len() <= 1 => {
                self.meet_command(ip, port, cport.first().copied(), now)
            }
            (b"replicate", [id]) => match node_id(id) {
                Some(id) => self.replicate(&id, now).map(|()| ok()),
                None => Err(CommandError::UnknownNode(
                    String::from_utf8_lossy(id).into_owned(),
                )),
            },
            (b"forget", [id]) => self.forget_command(id, now.as_millis()),
            (b"reset", options) if options.len() <= 1 => {
                let hard = match options.first().map(|o| o.to_ascii_lowercase()) {
                    None => Some(false),
                    Some(o) if o == b"soft" => Some(false),
                    Some(o) if o == b"hard" => Some(true),
                    Some(_) => None,
                };
                let keys: u64 = (0..16384).filter_map(Slot::new).map(&keys_in_slot).sum();
                match hard {
                    None => Ok(Frame::SimpleError(b"ERR syntax error".to_vec())),
                    Some(_) if self.myself().is_master() && keys > 0 => {
                        Err(CommandError::ResetWithKeys)
                    }
                    Some(hard) => {
                        self.reset(hard);
                        Ok(ok())
                    }
                }
            }
            (b"saveconfig", []) => {
                self.push(crate::Output::SaveConfig);
                Ok(ok())
            }
            (b"flushslots", []) => {
                let keys: u64 = (0..16384).filter_map(Slot::new).map(&keys_in_slot).sum();
                if keys > 0 {
                    Err(CommandError::FlushWithKeys)
                } else {
                    let mine: Vec<Slot> = self.myself().slots.iter().collect();
                    for slot in mine {
                        self.bind(slot, None);
                    }
                    self.update_state();
                    self.push(crate::Output::SaveConfig);
                    Ok(ok())
                }
            }
            (b"bumpepoch", []) => {
                let (bumped, epoch) = self.bump_epoch();
                let word = if bumped { "BUMPED" } else { "STILL" };
                Ok(Frame::SimpleString(format!("{word} {epoch}").into_bytes()))
            }
            (
                b"info"
                | b"myid"
                | b"myshardid"
                | b"keyslot"
                | b"nodes"
                | b"slots"
                | b"shards"
                | b"replicas"
                | b"slaves"
                | b"count-failure-reports"
                | b"addslots"
                | b"delslots"
                | b"addslotsrange"
                | b"delslotsrange"
                | b"setslot"
                | b"set-config-epoch"
                | b"bumpepoch"
                | b"failover"
                | b"meet"
                | b"replicate"
                | b"forget"
                | b"saveconfig"
                | b"flushslots"
                | b"reset",
                _,
            ) => return Some(arity_error()),
            _ => return None,
        };
        // What the server persists before it replies (`CLUSTER_TODO_SAVE_CONFIG`, saved in
        // `clusterBeforeSleep`, which runs before replies are written).
        let persisted = matches!(
            name.as_slice(),
            b"addslots"
                | b"delslots"
                | b"addslotsrange"
                | b"delslotsrange"
                | b"setslot"
                | b"set-config-epoch"
                | b"bumpepoch"
                | b"replicate"
                | b"forget"
                | b"flushslots"
                | b"reset"
        );
        if persisted && matches!(result, Ok(Frame::SimpleString(_) | Frame::BulkString(_))) {
            self.push(crate::Output::SaveConfig);
        }
        Some(result.unwrap_or_else(|e| error(format!("{e}"))))
    }

    fn meet_command(
        &mut self,
        ip: &[u8],
        port: &[u8],
        cport: Option<&[u8]>,
        now: Instant,
    ) -> Result<Reply, CommandError> {
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        let bad = || CommandError::BadAddress(alloc::format!("{}:{}", text(ip), text(port)));
        let address: Option<core::net::IpAddr> =
            core::str::from_utf8(ip).ok().and_then(|s| s.parse().ok());
        let number = |b: &[u8]| {
            core::str::from_utf8(b)
                .ok()
                .and_then(|s| s.parse::<u16>().ok())
        };
        let (Some(address), Some(port)) = (address, number(port)) else {
            return Err(bad());
        };
        let cport = match cport {
            Some(c) => number(c).ok_or_else(bad)?,
            None => port.wrapping_add(10000),
        };
        self.meet(&alloc::format!("{address}"), port, cport, now)?;
        Ok(ok())
    }

    /// `CLUSTER FORGET <id>`: removes the node and keeps it out for 60 s.
    fn forget_command(&mut self, id: &[u8], now: u64) -> Result<Reply, CommandError> {
        let unknown = || CommandError::UnknownNode(String::from_utf8_lossy(id).into_owned());
        let id = node_id(id)
            .filter(|id| self.node(id).is_some())
            .ok_or_else(unknown)?;
        let me = self.myself();
        if id == me.id {
            return Err(CommandError::ForgetMyself);
        }
        if me.is_replica() && me.master == Some(id) {
            return Err(CommandError::ForgetMyMaster);
        }
        self.forgotten.retain(|(f, until)| *f != id && *until > now);
        self.forgotten.push((id, now + FORGET_TTL));
        self.remove_node(&id);
        self.update_state();
        self.push(crate::Output::SaveConfig);
        Ok(ok())
    }

    /// `CLUSTER RESET [SOFT|HARD]` (`clusterReset`): a replica becomes a master (the driver
    /// empties its keyspace on [`crate::Event::BecameMaster`]), every slot and open slot is
    /// dropped, every other node forgotten; HARD also zeroes the epochs and draws a new id.
    pub fn reset(&mut self, hard: bool) {
        if self.myself().is_replica() {
            let me = self.myself_mut();
            me.set(NodeFlags::REPLICA, false);
            me.set(NodeFlags::MASTER, true);
            me.master = None;
            self.push(crate::Output::Event(crate::Event::BecameMaster));
        }
        self.migrating_to.clear();
        self.importing_from.clear();
        for n in 0..16384 {
            if let Some(slot) = Slot::new(n) {
                self.bind(slot, None);
            }
        }
        let me = self.myself().id;
        let others: Vec<NodeId> = self.nodes().map(|n| n.id).filter(|id| *id != me).collect();
        for id in others {
            self.remove_node(&id);
        }
        if hard {
            self.current_epoch = 0;
            self.last_vote_epoch = 0;
            self.myself_mut().config_epoch = 0;
            let id = crate::cluster::random_id(&mut self.rng);
            if let Some(at) = self.index.remove(&me) {
                self.index.insert(id, at);
            }
            self.myself_mut().id = id;
        }
        self.update_state();
        self.push(crate::Output::SaveConfig);
    }

    /// The shard id: the one a newer server keeps in nodes.conf (`shard-id=`), else the id of
    /// the shard's master.
    pub fn shard_id(&self) -> String {
        let me = self.myself();
        if let Some(id) = me.aux.split(',').find_map(|f| f.strip_prefix("shard-id=")) {
            return String::from(id);
        }
        let master = me.master.filter(|_| me.is_replica()).unwrap_or(me.id);
        format!("{master}")
    }

    fn replicas_reply(&self, id: &[u8]) -> Result<Reply, CommandError> {
        let unknown = || CommandError::UnknownNode(String::from_utf8_lossy(id).into_owned());
        let master = node_id(id)
            .and_then(|id| self.node(&id))
            .ok_or_else(unknown)?;
        if !master.is_master() {
            return Err(CommandError::NotAMaster);
        }
        let lines = self.replica_lines(&master.id);
        Ok(Frame::Array(
            lines
                .into_iter()
                .map(|l| Frame::BulkString(l.into_bytes()))
                .collect(),
        ))
    }

    fn slot_ranges(&self, pairs: &[&[u8]]) -> Result<Vec<Slot>, CommandError> {
        let mut slots = Vec::new();
        for pair in pairs.chunks(2) {
            let (start, end) = (slot(pair[0])?, slot(pair[1])?);
            if start > end {
                return Err(CommandError::RangeOrder(u16::from(start), u16::from(end)));
            }
            slots.extend((u16::from(start)..=u16::from(end)).filter_map(Slot::new));
        }
        Ok(slots)
    }

    fn setslot_command(
        &mut self,
        s: &[u8],
        action: &[u8],
        target: &[&[u8]],
        keys_in_slot: &impl Fn(Slot) -> u64,
        now: Instant,
    ) -> Result<Reply, CommandError> {
        if self.myself().is_replica() {
            return Err(CommandError::SetSlotOnReplica);
        }
        let slot = slot(s)?;
        let action = action.to_ascii_lowercase();
        let target = match (action.as_slice(), target) {
            (b"stable", []) => None,
            (b"migrating" | b"importing" | b"node", [id]) => Some(*id),
            _ => {
                return Err(CommandError::BadSetSlot);
            }
        };
        let node = match target {
            Some(id) => {
                let known = node_id(id).filter(|id| self.node(id).is_some());
                match known {
                    Some(id) => Some(id),
                    None if action == b"node" => {
                        return Err(CommandError::UnknownNode(
                            String::from_utf8_lossy(id).into_owned(),
                        ));
                    }
                    None => {
                        return Err(CommandError::UnknownAbout(
                            String::from_utf8_lossy(id).into_owned(),
                        ));
                    }
                }
            }
            None => None,
        };
        match (action.as_slice(), node) {
            (b"stable", _) => {
                self.migrating_to.remove(&u16::from(slot));
                self.importing_from.remove(&u16::from(slot));
            }
            (b"migrating", Some(id)) => self.set_migrating(slot, id)?,
            (b"importing", Some(id)) => self.set_importing(slot, id)?,
            (b"node", Some(id)) => self.set_slot_node(slot, id, keys_in_slot(slot), now)?,
            _ => {}
        }
        Ok(ok())
    }

    /// `CLUSTER SETSLOT <slot> MIGRATING <id>` on the owner.
    pub fn set_migrating(&mut self, slot: Slot, to: NodeId) -> Result<(), CommandError> {
        if self.owner(slot).map(|n| n.id) != Some(self.myself().id) {
            return Err(CommandError::NotOwner(u16::from(slot)));
        }
        if !self.node(&to).is_some_and(|n| n.is_master()) {
            return Err(CommandError::TargetNotMaster);
        }
        self.migrating_to.insert(u16::from(slot), to);
        Ok(())
    }

    /// `CLUSTER SETSLOT <slot> IMPORTING <id>` on the new owner.
    pub fn set_importing(&mut self, slot: Slot, from: NodeId) -> Result<(), CommandError> {
        if self.owner(slot).map(|n| n.id) == Some(self.myself().id) {
            return Err(CommandError::AlreadyOwner(u16::from(slot)));
        }
        if !self.node(&from).is_some_and(|n| n.is_master()) {
            return Err(CommandError::TargetNotMaster);
        }
        self.importing_from.insert(u16::from(slot), from);
        Ok(())
    }

    /// `CLUSTER SETSLOT <slot> NODE <id>`: `keys` is how many keys this node holds in the
    /// slot. Closing an import on the new owner bumps its config epoch without consensus; a
    /// master that gives away its last slot becomes the receiver's replica when replica
    /// migration is allowed.
    pub fn set_slot_node(
        &mut self,
        slot: Slot,
        to: NodeId,
        keys: u64,
        now: Instant,
    ) -> Result<(), CommandError> {
        self.clock = self.clock.max(now.as_millis());
        let me = self.myself().id;
        let Some(target) = self.node(&to) else {
            return Err(CommandError::UnknownNode(format!("{to}")));
        };
        if !target.is_master() {
            return Err(CommandError::TargetNotMaster);
        }
        let mine = self.owner(slot).map(|n| n.id) == Some(me);
        if mine && to != me && keys > 0 {
            return Err(CommandError::StillHoldsKeys(u16::from(slot)));
        }
        if keys == 0 {
            self.migrating_to.remove(&u16::from(slot));
        }
        let at = self.index_of(&to);
        self.bind(slot, at);
        if mine && to != me && !self.myself().has_slots() && self.config.allow_replica_migration {
            let node = self.myself_mut();
            node.set(NodeFlags::MASTER, false);
            node.set(NodeFlags::REPLICA, true);
            node.master = Some(to);
            self.migrating_to.clear();
            self.importing_from.clear();
        }
        if to == me && self.importing_from.remove(&u16::from(slot)).is_some() {
            // Bump without consensus, so that the new claim wins over the old owner's.
            self.bump_epoch();
        }
        self.update_state();
        Ok(())
    }
}
